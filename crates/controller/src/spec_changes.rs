//! Which changes of a child call for its job's reconcile when another controller writes the
//! child's status often: kube-controller-manager writes a HorizontalPodAutoscaler's status at
//! its syncs (its current metrics, every 15 s by default), while its spec, the part eto keeps,
//! changes only when someone edits it. A change calls for one when the object is new to the
//! watch, when its spec differs from the one last seen, or when it is gone. The spec itself is
//! compared: kube-apiserver keeps no `metadata.generation` for an HPA.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// A fingerprint of the spec last seen of each object, by uid.
#[derive(Debug, Default)]
pub(crate) struct SpecChanges {
    specs: HashMap<String, u64>,
}

impl SpecChanges {
    /// Whether the change of the object `uid` (if it has one) whose spec is now `spec` calls
    /// for its job's reconcile; `gone` says it was deleted.
    pub(crate) fn calls_for_reconcile(
        &mut self,
        uid: Option<&str>,
        spec: &serde_json::Value,
        gone: bool,
    ) -> bool {
        let Some(uid) = uid else {
            return true;
        };
        if gone {
            self.specs.remove(uid);
            return true;
        }
        let mut hasher = DefaultHasher::new();
        spec.to_string().hash(&mut hasher);
        let fingerprint = hasher.finish();
        self.specs.insert(uid.to_string(), fingerprint) != Some(fingerprint)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn new_objects_spec_changes_and_deletions_call_for_a_reconcile_status_changes_do_not() {
        let mut changes = SpecChanges::default();
        let (four, nine) = (json!({"maxReplicas": 4}), json!({"maxReplicas": 9}));
        let cases = [
            (Some("a"), &four, false, true, "new to the watch"),
            (Some("a"), &four, false, false, "its status changed"),
            (Some("a"), &four, false, false, "its status changed again"),
            (Some("a"), &nine, false, true, "its spec changed"),
            (Some("b"), &nine, false, true, "another object"),
            (Some("a"), &nine, true, true, "deleted"),
            (
                Some("a"),
                &nine,
                false,
                true,
                "seen again after its deletion",
            ),
            (None, &four, false, true, "no uid: nothing to compare"),
        ];
        for (uid, spec, gone, expected, case) in cases {
            assert_eq!(
                changes.calls_for_reconcile(uid, spec, gone),
                expected,
                "{case}"
            );
        }
    }
}
