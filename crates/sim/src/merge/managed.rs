//! `metadata.managedFields`: which manager owns which fields, kept up to date on every write.

use serde_json::{Value, json};

use super::fieldset::{
    FieldSet, ListTypes, Path, PathElement, fieldset_of, from_fields_v1, to_fields_v1, value_at,
};

/// One entry of `metadata.managedFields`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedEntry {
    /// The field manager.
    pub manager: String,
    /// `Apply` (server-side apply) or `Update` (any other write).
    pub operation: String,
    /// API version the fields refer to.
    pub api_version: String,
    /// When the entry last changed.
    pub time: String,
    /// `status` or `scale` for writes through a subresource.
    pub subresource: Option<String>,
    /// The owned fields.
    pub fields: FieldSet,
}

impl ManagedEntry {
    fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }
}

/// Who is writing, and through which subresource.
#[derive(Clone, Debug)]
pub struct Writer {
    /// The field manager.
    pub manager: String,
    /// `status` or `scale`, or `None` for the main resource.
    pub subresource: Option<String>,
    /// API version of the written object.
    pub api_version: String,
    /// RFC 3339 time of the write.
    pub now: String,
}

/// Paths the server sets itself; nobody owns them.
fn untracked(path: &[PathElement]) -> bool {
    let field = |index: usize| match path.get(index) {
        Some(PathElement::Field(name)) => Some(name.as_str()),
        _ => None,
    };
    match field(0) {
        Some("apiVersion" | "kind") => true,
        Some("metadata") => matches!(
            field(1),
            Some(
                "name"
                    | "namespace"
                    | "uid"
                    | "resourceVersion"
                    | "generation"
                    | "creationTimestamp"
                    | "deletionTimestamp"
                    | "deletionGracePeriodSeconds"
                    | "managedFields"
                    | "selfLink"
            )
        ),
        _ => false,
    }
}

/// The fields of `object` that a writer owns by setting them.
pub fn owned_fields(object: &Value, lists: &dyn ListTypes) -> FieldSet {
    let mut set = fieldset_of(object, lists);
    set.retain(|path| !path.is_empty() && !untracked(path));
    set
}

/// Reads `metadata.managedFields`.
pub fn read_managed(object: &Value) -> Vec<ManagedEntry> {
    let Some(entries) = object["metadata"]["managedFields"].as_array() else {
        return Vec::new();
    };
    entries
        .iter()
        .map(|entry| ManagedEntry {
            manager: entry["manager"].as_str().unwrap_or_default().to_string(),
            operation: entry["operation"].as_str().unwrap_or("Update").to_string(),
            api_version: entry["apiVersion"].as_str().unwrap_or_default().to_string(),
            time: entry["time"].as_str().unwrap_or_default().to_string(),
            subresource: entry["subresource"].as_str().map(String::from),
            fields: from_fields_v1(&entry["fieldsV1"]),
        })
        .collect()
}

/// Writes `metadata.managedFields`, dropping entries that own nothing.
pub fn write_managed(object: &mut Value, entries: &[ManagedEntry]) {
    let entries: Vec<Value> = entries
        .iter()
        .filter(|entry| !entry.fields.is_empty())
        .map(|entry| {
            let mut value = json!({
                "manager": entry.manager,
                "operation": entry.operation,
                "apiVersion": entry.api_version,
                "time": entry.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&entry.fields),
            });
            if let Some(subresource) = &entry.subresource {
                value["subresource"] = Value::String(subresource.clone());
            }
            value
        })
        .collect();
    match object["metadata"].as_object_mut() {
        Some(metadata) if entries.is_empty() => {
            metadata.remove("managedFields");
        }
        Some(metadata) => {
            metadata.insert("managedFields".into(), Value::Array(entries));
        }
        None => {}
    }
}

/// Records a non-apply write (create, update, patch) of `new` over `old` by `writer`: the
/// writer gains the fields it changed, every other manager loses them.
pub fn record_update(old: Option<&Value>, new: &mut Value, writer: &Writer, lists: &dyn ListTypes) {
    let mut entries = old.map(read_managed).unwrap_or_default();
    let new_fields = owned_fields(new, lists);
    let old_fields = old.map(|old| owned_fields(old, lists)).unwrap_or_default();
    let changed: FieldSet = new_fields
        .iter()
        .filter(|path| {
            old.is_none_or(|old| value_at(old, path, lists) != value_at(new, path, lists))
        })
        .cloned()
        .collect();
    let removed: FieldSet = old_fields.difference(&new_fields).cloned().collect();
    if !changed.is_empty() || !removed.is_empty() {
        for entry in &mut entries {
            entry
                .fields
                .retain(|path| !changed.contains(path) && !removed.contains(path));
        }
        let index = match entries
            .iter()
            .position(|e| e.is(&writer.manager, "Update", writer.subresource.as_deref()))
        {
            Some(index) => index,
            None => {
                entries.push(ManagedEntry {
                    manager: writer.manager.clone(),
                    operation: "Update".into(),
                    api_version: writer.api_version.clone(),
                    time: writer.now.clone(),
                    subresource: writer.subresource.clone(),
                    fields: FieldSet::new(),
                });
                entries.len() - 1
            }
        };
        let entry = &mut entries[index];
        entry.fields.extend(changed);
        entry.time = writer.now.clone();
    }
    write_managed(new, &entries);
}

/// A field another manager owns with a different value than an apply asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyConflict {
    /// The manager that owns the field.
    pub manager: String,
    /// The field, as `.spec.replicas`.
    pub field: String,
}

/// Renders a path the way kube-apiserver's conflict messages do.
pub fn display_path(path: &Path) -> String {
    path.iter()
        .map(|element| match element {
            PathElement::Field(name) => format!(".{name}"),
            PathElement::Key(json) => format!(
                "[{}]",
                json.trim_start_matches('{')
                    .trim_end_matches('}')
                    .replace(':', "=")
            ),
            PathElement::Value(json) => format!("[{json}]"),
            PathElement::Index(index) => format!("[{index}]"),
        })
        .collect()
}

/// Server-side apply of `config` by `writer` onto `live` (`None` when the object does not
/// exist yet).
///
/// The result is `live` with `config` merged in, without the fields the writer applied
/// before but no longer applies (unless another manager owns them), and with updated
/// `managedFields`.
///
/// # Errors
/// Without `force`, the fields that other managers own with different values.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    writer: &Writer,
    force: bool,
    lists: &dyn ListTypes,
) -> Result<Value, Vec<ApplyConflict>> {
    let applied = owned_fields(config, lists);
    let Some(live) = live else {
        let mut object = config.clone();
        let entry = apply_entry(writer, applied);
        write_managed(&mut object, &[entry]);
        return Ok(object);
    };
    let mut entries = read_managed(live);
    let mut conflicts = Vec::new();
    // A manager is identified by its name, operation and subresource: the same name writing
    // with Update is another owner as far as conflicts go.
    for entry in entries
        .iter_mut()
        .filter(|e| !e.is(&writer.manager, "Apply", writer.subresource.as_deref()))
    {
        let clashing: Vec<Path> = entry
            .fields
            .iter()
            .filter(|owned| clashes(owned, &applied, live, config, lists))
            .cloned()
            .collect();
        if force {
            entry.fields.retain(|path| !clashing.contains(path));
        } else {
            conflicts.extend(clashing.iter().map(|path| ApplyConflict {
                manager: entry.manager.clone(),
                field: display_path(path),
            }));
        }
    }
    if !conflicts.is_empty() {
        return Err(conflicts);
    }

    let position = entries
        .iter()
        .position(|e| e.is(&writer.manager, "Apply", writer.subresource.as_deref()));
    let previous = position
        .map(|index| std::mem::take(&mut entries[index].fields))
        .unwrap_or_default();
    let mut object = live.clone();
    let mut released: Vec<&Path> = previous
        .difference(&applied)
        .filter(|path| !entries.iter().any(|e| e.fields.contains(*path)))
        .collect();
    // Deepest first, so that removing an item does not hide the fields below it.
    released.sort_by_key(|path| std::cmp::Reverse(path.len()));
    for path in released {
        super::fieldset::remove_at(&mut object, path, lists);
    }
    merge_into(&mut object, config, &mut Vec::new(), lists);

    match position {
        // Unchanged ownership keeps the entry as it was, time included.
        Some(index) if previous == applied => entries[index].fields = applied,
        Some(index) => entries[index] = apply_entry(writer, applied),
        None => entries.push(apply_entry(writer, applied)),
    }
    write_managed(&mut object, &entries);
    Ok(object)
}

fn apply_entry(writer: &Writer, fields: FieldSet) -> ManagedEntry {
    ManagedEntry {
        manager: writer.manager.clone(),
        operation: "Apply".into(),
        api_version: writer.api_version.clone(),
        time: writer.now.clone(),
        subresource: writer.subresource.clone(),
        fields,
    }
}

/// Whether the apply of `applied`/`config` changes the value of the owned path `owned`.
fn clashes(
    owned: &Path,
    applied: &FieldSet,
    live: &Value,
    config: &Value,
    lists: &dyn ListTypes,
) -> bool {
    // Ownership of a list item as such never conflicts; its fields may.
    if matches!(
        owned.last(),
        Some(PathElement::Key(_) | PathElement::Value(_))
    ) {
        return false;
    }
    // The applier sets this field, or a leaf above it (an atomic value replacing a subtree).
    let touched =
        applied.contains(owned) || (1..owned.len()).any(|depth| applied.contains(&owned[..depth]));
    touched && value_at(live, owned, lists) != value_at(config, owned, lists)
}

/// Merges an apply configuration into an object: maps field by field, associative lists item
/// by item (applied items first, in applied order), sets by value, everything else replaced.
pub fn merge_into(target: &mut Value, config: &Value, path: &mut Path, lists: &dyn ListTypes) {
    use super::fieldset::{ListType, canonical_json, item_key};
    match (target, config) {
        (Value::Object(target), Value::Object(config)) => {
            for (field, value) in config {
                path.push(PathElement::Field(field.clone()));
                let slot = target.entry(field.clone()).or_insert(Value::Null);
                if slot.is_null() || !value.is_object() && !value.is_array() {
                    *slot = value.clone();
                } else {
                    merge_into(slot, value, path, lists);
                }
                path.pop();
            }
        }
        (Value::Array(target), Value::Array(config)) => match lists.list_type(path) {
            ListType::Atomic => *target = config.clone(),
            ListType::Set => {
                let mut merged = config.clone();
                let present: Vec<String> = config.iter().map(canonical_json).collect();
                merged.extend(
                    target
                        .iter()
                        .filter(|item| !present.contains(&canonical_json(item)))
                        .cloned(),
                );
                *target = merged;
            }
            ListType::Map(keys) => {
                let mut rest: Vec<Value> = std::mem::take(target);
                for item in config {
                    let key = item_key(item, &keys);
                    let mut merged = match rest.iter().position(|live| item_key(live, &keys) == key)
                    {
                        Some(index) => rest.remove(index),
                        None => Value::Object(Default::default()),
                    };
                    path.push(key);
                    merge_into(&mut merged, item, path, lists);
                    path.pop();
                    target.push(merged);
                }
                target.extend(rest);
            }
        },
        (target, config) => *target = config.clone(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::merge::fieldset::BuiltinListTypes;

    fn writer(manager: &str) -> Writer {
        Writer {
            manager: manager.into(),
            subresource: None,
            api_version: "v1".into(),
            now: "2026-11-22T00:00:00Z".into(),
        }
    }

    fn strip_managed(mut object: Value) -> Value {
        object["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        object
    }

    #[test]
    fn apply_creates_then_merges_and_releases_fields() {
        let first = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1", "b": "2"}}, "data": {"x": "1"}});
        let created = apply(None, &first, &writer("eto"), false, &BuiltinListTypes).unwrap();
        assert_eq!(created["metadata"]["managedFields"][0]["manager"], "eto");
        assert_eq!(
            created["metadata"]["managedFields"][0]["operation"],
            "Apply"
        );

        // Someone else adds a label with a non-apply write.
        let mut edited = created.clone();
        edited["metadata"]["labels"]["c"] = json!("3");
        record_update(
            Some(&created),
            &mut edited,
            &writer("kubectl-edit"),
            &BuiltinListTypes,
        );

        // eto re-applies without label b: b goes, c (owned by kubectl-edit) stays.
        let second = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"x": "2"}});
        let applied = apply(
            Some(&edited),
            &second,
            &writer("eto"),
            false,
            &BuiltinListTypes,
        )
        .unwrap();
        assert_eq!(
            strip_managed(applied),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1", "c": "3"}}, "data": {"x": "2"}})
        );
    }

    #[test]
    fn applying_a_field_another_manager_owns_conflicts_unless_forced() {
        let config = json!({"metadata": {"name": "c"}, "data": {"x": "1"}});
        let live = apply(None, &config, &writer("kubectl"), false, &BuiltinListTypes).unwrap();
        let other = json!({"metadata": {"name": "c"}, "data": {"x": "2"}});
        let conflicts = apply(
            Some(&live),
            &other,
            &writer("eto"),
            false,
            &BuiltinListTypes,
        )
        .unwrap_err();
        assert_eq!(
            conflicts,
            vec![ApplyConflict {
                manager: "kubectl".into(),
                field: ".data.x".into()
            }]
        );

        // The same value is shared ownership, not a conflict.
        assert!(
            apply(
                Some(&live),
                &config,
                &writer("eto"),
                false,
                &BuiltinListTypes
            )
            .is_ok()
        );

        let forced = apply(Some(&live), &other, &writer("eto"), true, &BuiltinListTypes).unwrap();
        assert_eq!(forced["data"]["x"], "2");
        let managers: Vec<&str> = forced["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["eto"], "kubectl lost its only field");
    }

    #[test]
    fn the_appliers_own_update_entry_is_another_owner() {
        let config = json!({"metadata": {"name": "c"}, "data": {"x": "1"}});
        let live = apply(None, &config, &writer("kubectl"), false, &BuiltinListTypes).unwrap();
        let mut scaled = live.clone();
        scaled["data"]["x"] = json!("3");
        record_update(
            Some(&live),
            &mut scaled,
            &writer("kubectl"),
            &BuiltinListTypes,
        );
        let conflicts = apply(
            Some(&scaled),
            &config,
            &writer("kubectl"),
            false,
            &BuiltinListTypes,
        )
        .unwrap_err();
        assert_eq!(
            conflicts,
            vec![ApplyConflict {
                manager: "kubectl".into(),
                field: ".data.x".into()
            }]
        );
    }

    #[test]
    fn keyed_lists_merge_item_by_item() {
        let live = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}});
        let config = json!({"spec": {"containers": [{"name": "b", "image": "2"}]}});
        let mut merged = live.clone();
        merge_into(&mut merged, &config, &mut Vec::new(), &BuiltinListTypes);
        assert_eq!(
            merged,
            json!({"spec": {"containers": [{"name": "b", "image": "2"}, {"name": "a", "image": "1"}]}})
        );
    }

    #[test]
    fn a_repeated_apply_changes_nothing() {
        let config = json!({"metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"x": "1"}});
        let live = apply(None, &config, &writer("eto"), false, &BuiltinListTypes).unwrap();
        let later = Writer {
            now: "2026-11-22T01:00:00Z".into(),
            ..writer("eto")
        };
        assert_eq!(
            apply(Some(&live), &config, &later, false, &BuiltinListTypes).unwrap(),
            live
        );
    }

    #[test]
    fn updates_move_ownership_of_changed_fields() {
        let config = json!({"metadata": {"name": "c"}, "data": {"x": "1", "y": "1"}});
        let live = apply(None, &config, &writer("eto"), false, &BuiltinListTypes).unwrap();
        let mut patched = live.clone();
        patched["data"]["x"] = json!("9");
        record_update(
            Some(&live),
            &mut patched,
            &writer("kubectl-patch"),
            &BuiltinListTypes,
        );
        let entries = read_managed(&patched);
        let owner_of_x = entries
            .iter()
            .find(|e| e.fields.iter().any(|p| display_path(p) == ".data.x"))
            .map(|e| e.manager.as_str());
        assert_eq!(owner_of_x, Some("kubectl-patch"));
        assert!(
            entries.iter().any(
                |e| e.manager == "eto" && e.fields.iter().any(|p| display_path(p) == ".data.y")
            )
        );
    }
}
