//! Changes to the labels and annotations of a pod that already exists.
//!
//! A pod's spec cannot change after it is created, and eto's caches keep only the part of it
//! the engine reads (the node), so eto never re-sends a pod to change its metadata: it writes
//! a JSON merge patch of the labels and annotations that differ. Keys a patch does not name
//! are left as they are, so a key eto stops showing is removed explicitly.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value, json};

/// New labels and annotations for a pod that exists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodMetadata {
    /// The pod, in the job's namespace.
    pub name: String,
    /// Labels to set.
    pub labels: BTreeMap<String, String>,
    /// Annotations to set (`Some`) or to remove (`None`).
    pub annotations: BTreeMap<String, Option<String>>,
}

impl PodMetadata {
    /// What turns the metadata of the pod `observed` into `desired`: the labels and
    /// annotations `desired` has with a value `observed` lacks, and the annotations in
    /// `removable` that `observed` has and `desired` does not. `None` when nothing differs.
    pub fn change(desired: &ObjectMeta, observed: &ObjectMeta, removable: &[&str]) -> Option<Self> {
        let differing = |wanted: Option<&BTreeMap<String, String>>,
                         present: Option<&BTreeMap<String, String>>| {
            wanted
                .into_iter()
                .flatten()
                .filter(|(key, value)| present.and_then(|p| p.get(*key)) != Some(*value))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect::<BTreeMap<_, _>>()
        };
        let labels = differing(desired.labels.as_ref(), observed.labels.as_ref());
        let mut annotations: BTreeMap<String, Option<String>> =
            differing(desired.annotations.as_ref(), observed.annotations.as_ref())
                .into_iter()
                .map(|(key, value)| (key, Some(value)))
                .collect();
        let has = |metadata: &ObjectMeta, key: &str| {
            metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(key))
        };
        for key in removable {
            if has(observed, key) && !has(desired, key) {
                annotations.insert((*key).to_string(), None);
            }
        }
        if labels.is_empty() && annotations.is_empty() {
            return None;
        }
        Some(Self {
            name: observed.name.clone().unwrap_or_default(),
            labels,
            annotations,
        })
    }

    /// The annotation `key` this change sets, if it sets it.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).and_then(Option::as_deref)
    }

    /// The JSON merge patch (RFC 7386) of the change: removed annotations are `null`.
    pub fn merge_patch(&self) -> Value {
        let mut metadata = Map::new();
        if !self.labels.is_empty() {
            metadata.insert("labels".into(), json!(self.labels));
        }
        if !self.annotations.is_empty() {
            metadata.insert("annotations".into(), json!(self.annotations));
        }
        json!({ "metadata": metadata })
    }

    /// What the API server makes of `metadata` when it applies [`PodMetadata::merge_patch`]:
    /// the labels and annotations set, the removed annotations gone, every other key kept.
    /// For tests that stand in for the API server.
    #[cfg(any(test, feature = "test-support"))]
    pub fn apply_to(self, metadata: &mut ObjectMeta) {
        if !self.labels.is_empty() {
            metadata.labels.get_or_insert_default().extend(self.labels);
        }
        if self.annotations.is_empty() {
            return;
        }
        let annotations = metadata.annotations.get_or_insert_default();
        for (key, value) in self.annotations {
            match value {
                Some(value) => annotations.insert(key, value),
                None => annotations.remove(&key),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ObjectMeta {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                    .collect(),
            )
            .filter(|m: &BTreeMap<String, String>| !m.is_empty())
        };
        ObjectMeta {
            name: Some("job-worker-0".into()),
            labels: map(labels),
            annotations: map(annotations),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn changes_are_the_keys_that_differ() {
        struct Case {
            name: &'static str,
            desired: ObjectMeta,
            observed: ObjectMeta,
            patch: Option<Value>,
        }
        let cases = [
            Case {
                name: "everything shown already",
                desired: metadata(&[("role", "worker")], &[("notice", "a")]),
                observed: metadata(&[("role", "worker"), ("other", "x")], &[("notice", "a")]),
                patch: None,
            },
            Case {
                name: "a new annotation value",
                desired: metadata(&[("role", "worker")], &[("notice", "b")]),
                observed: metadata(&[("role", "worker")], &[("notice", "a")]),
                patch: Some(json!({"metadata": {"annotations": {"notice": "b"}}})),
            },
            Case {
                name: "a notice withdrawn",
                desired: metadata(&[("role", "worker")], &[]),
                observed: metadata(&[("role", "worker")], &[("notice", "a"), ("theirs", "t")]),
                patch: Some(json!({"metadata": {"annotations": {"notice": null}}})),
            },
            Case {
                name: "a missing label, others' keys untouched",
                desired: metadata(&[("role", "worker"), ("run", "2")], &[]),
                observed: metadata(&[("role", "worker")], &[("theirs", "t")]),
                patch: Some(json!({"metadata": {"labels": {"run": "2"}}})),
            },
        ];
        for case in cases {
            let change = PodMetadata::change(&case.desired, &case.observed, &["notice"]);
            assert_eq!(
                change.as_ref().map(PodMetadata::merge_patch),
                case.patch,
                "{}",
                case.name
            );
            if let Some(change) = change {
                assert_eq!(change.name, "job-worker-0", "{}", case.name);
                let patch = change.merge_patch();
                let mut patched = case.observed.clone();
                change.apply_to(&mut patched);
                assert_eq!(
                    merged(&case.observed, &patch),
                    serde_json::to_value(&patched).expect("metadata serializes"),
                    "{}: applied as the merge patch applies",
                    case.name
                );
            }
        }
    }

    /// `observed` with `patch` applied as RFC 7386 says (a `null` removes a key).
    fn merged(observed: &ObjectMeta, patch: &Value) -> Value {
        fn merge(target: &mut Value, patch: &Value) {
            let Value::Object(patch) = patch else {
                *target = patch.clone();
                return;
            };
            if !target.is_object() {
                *target = json!({});
            }
            let target = target.as_object_mut().expect("an object");
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(key);
                } else {
                    merge(target.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
        }
        let mut object = json!({ "metadata": observed });
        merge(&mut object, patch);
        object["metadata"].take()
    }
}
