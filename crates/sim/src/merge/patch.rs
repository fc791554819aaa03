//! The patch formats of `PATCH` requests, told apart by `Content-Type`.

use serde_json::Value;

use super::fieldset::{
    BuiltinListTypes, ListType, ListTypes, Path, PathElement, canonical_json, item_key,
};

/// A patch format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902 JSON patch (`application/json-patch+json`).
    Json,
    /// RFC 7386 JSON merge patch (`application/merge-patch+json`).
    Merge,
    /// Kubernetes strategic merge patch (`application/strategic-merge-patch+json`).
    Strategic,
    /// Server-side apply (`application/apply-patch+yaml` or `+cbor`).
    Apply,
}

impl PatchType {
    /// The format named by a `Content-Type` header.
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        match content_type.split(';').next().unwrap_or_default().trim() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Applies an RFC 6902 patch, `test` operations included.
///
/// # Errors
/// The patch does not parse or an operation fails (a `test` mismatch, a missing path).
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, String> {
    let operations: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| format!("invalid JSON patch: {e}"))?;
    let mut result = target.clone();
    json_patch::patch(&mut result, &operations.0).map_err(|e| e.to_string())?;
    Ok(result)
}

/// Applies an RFC 7386 merge patch.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let mut result = target.clone();
    json_patch::merge(&mut result, patch);
    result
}

/// Applies a strategic merge patch to a built-in object: maps merge, keyed lists (containers
/// by name, conditions by type, ...) merge item by item, `finalizers` merge as a set, other
/// lists are replaced, `null` deletes; `$patch: replace|delete`, `$retainKeys` and
/// `$deleteFromPrimitiveList/<field>` directives are honoured, `$setElementOrder` is ignored.
pub fn strategic_merge_patch(target: &Value, patch: &Value) -> Value {
    let mut result = target.clone();
    strategic(&mut result, patch, &mut Vec::new());
    result
}

fn strategic(target: &mut Value, patch: &Value, path: &mut Path) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replacement = patch.clone();
            replacement.remove("$patch");
            *target = Value::Object(replacement);
            return;
        }
        Some("delete") => {
            *target = Value::Null;
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(map) = target else { return };
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        map.retain(|key, _| keep.contains(&key.as_str()));
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(doomed)) = (map.get_mut(field), value) {
                items.retain(|item| !doomed.contains(item));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            map.remove(key);
            continue;
        }
        path.push(PathElement::Field(key.clone()));
        let slot = map.entry(key.clone()).or_insert(Value::Null);
        match (slot, value) {
            (slot @ Value::Object(_), Value::Object(_)) => {
                strategic(slot, value, path);
                if slot.is_null() {
                    map.remove(key);
                }
            }
            (Value::Array(items), Value::Array(patch_items)) => {
                merge_list(items, patch_items, path)
            }
            (slot, value) => {
                let mut fresh = Value::Null;
                strategic_fresh(&mut fresh, value, path);
                *slot = fresh;
            }
        }
        path.pop();
    }
}

/// A patch value written where nothing (or something of another type) was: directives are
/// still stripped.
fn strategic_fresh(target: &mut Value, value: &Value, path: &mut Path) {
    match value {
        Value::Object(_) => strategic(target, value, path),
        Value::Array(items) => {
            let mut list = Vec::new();
            merge_list(&mut list, items, path);
            *target = Value::Array(list);
        }
        other => *target = other.clone(),
    }
}

fn merge_list(items: &mut Vec<Value>, patch: &[Value], path: &mut Path) {
    if patch
        .iter()
        .any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *items = patch
            .iter()
            .filter(|item| item.get("$patch").is_none())
            .cloned()
            .collect();
        return;
    }
    match BuiltinListTypes.list_type(path) {
        ListType::Atomic => *items = patch.to_vec(),
        ListType::Set => {
            let present: Vec<String> = items.iter().map(canonical_json).collect();
            items.extend(
                patch
                    .iter()
                    .filter(|item| !present.contains(&canonical_json(item)))
                    .cloned(),
            );
        }
        ListType::Map(keys) => {
            for patch_item in patch {
                let key = item_key(patch_item, &keys);
                let position = items.iter().position(|item| item_key(item, &keys) == key);
                let delete = patch_item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (position, delete) {
                    (Some(index), true) => {
                        items.remove(index);
                    }
                    (None, true) => {}
                    (Some(index), false) => {
                        path.push(key);
                        strategic(&mut items[index], patch_item, path);
                        path.pop();
                    }
                    (None, false) => {
                        let mut fresh = Value::Null;
                        path.push(key);
                        strategic(&mut fresh, patch_item, path);
                        path.pop();
                        items.push(fresh);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn strategic_patches_merge_keyed_lists_and_delete_with_null() {
        let pod = json!({
            "metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "c1", "image": "old"}, {"name": "c2", "image": "keep"}],
                     "tolerations": [{"key": "t1"}]}
        });
        let patch = json!({
            "metadata": {"labels": {"b": null, "c": "3"}, "finalizers": ["y"]},
            "spec": {"containers": [{"name": "c1", "image": "new"}, {"name": "c3", "image": "added"}],
                     "tolerations": [{"key": "t2"}]}
        });
        assert_eq!(
            strategic_merge_patch(&pod, &patch),
            json!({
                "metadata": {"labels": {"a": "1", "c": "3"}, "finalizers": ["x", "y"]},
                "spec": {"containers": [{"name": "c1", "image": "new"}, {"name": "c2", "image": "keep"}, {"name": "c3", "image": "added"}],
                         "tolerations": [{"key": "t2"}]}
            })
        );
    }

    #[test]
    fn strategic_patch_directives() {
        let pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeSelector": {"x": "1", "y": "2"}}, "metadata": {"finalizers": ["f", "g"]}});
        let patch = json!({
            "spec": {"containers": [{"name": "a", "$patch": "delete"}], "nodeSelector": {"$patch": "replace", "z": "3"}},
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["f"]},
            "$setElementOrder/spec": []
        });
        assert_eq!(
            strategic_merge_patch(&pod, &patch),
            json!({"spec": {"containers": [{"name": "b"}], "nodeSelector": {"z": "3"}}, "metadata": {"finalizers": ["g"]}})
        );
    }

    #[test]
    fn json_patches_support_test() {
        let object = json!({"metadata": {"resourceVersion": "5"}, "spec": {"replicas": 1}});
        let ok = json!([{"op": "test", "path": "/spec/replicas", "value": 1}, {"op": "replace", "path": "/spec/replicas", "value": 3}]);
        assert_eq!(json_patch(&object, &ok).unwrap()["spec"]["replicas"], 3);
        let failing = json!([{"op": "test", "path": "/spec/replicas", "value": 2}]);
        assert!(json_patch(&object, &failing).is_err());
    }

    #[test]
    fn merge_patches_follow_rfc_7386() {
        let object = json!({"a": {"b": 1, "c": 2}, "list": [1, 2]});
        assert_eq!(
            merge_patch(&object, &json!({"a": {"b": null}, "list": [3]})),
            json!({"a": {"c": 2}, "list": [3]})
        );
    }
}
