//! Field paths and field sets: which fields of an object a manager owns.
//!
//! A field set holds the paths of the leaves a manager set (scalars, atomic lists, empty maps)
//! plus the paths of the associative-list items it set, as `managedFields` records them in the
//! `fieldsV1` format (`f:name`, `k:{"name":"x"}`, `v:"value"`, `i:0`, and `.` for an item
//! itself).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// One step of a path into an object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A field of a map.
    Field(String),
    /// The item of an associative list whose key fields have these values (canonical JSON
    /// of a map with sorted keys).
    Key(String),
    /// The item of a set-list with this value (canonical JSON).
    Value(String),
    /// The item at this index of a list without keys.
    Index(usize),
}

/// A path from the root of an object.
pub type Path = Vec<PathElement>;

/// A set of owned paths.
pub type FieldSet = BTreeSet<Path>;

/// How a list merges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole.
    Atomic,
    /// A set of scalars, merged by value.
    Set,
    /// A list of maps merged by the values of these key fields.
    Map(Vec<String>),
}

/// Tells the list type of the list at a path.
pub trait ListTypes {
    /// The type of the list at `path`.
    fn list_type(&self, path: &[PathElement]) -> ListType;
}

/// List types of the built-in Kubernetes types, by field name (the `x-kubernetes-list-type`
/// and `x-kubernetes-list-map-keys` of their OpenAPI schemas).
pub struct BuiltinListTypes;

impl ListTypes for BuiltinListTypes {
    fn list_type(&self, path: &[PathElement]) -> ListType {
        let mut fields = path.iter().rev().filter_map(|element| match element {
            PathElement::Field(name) => Some(name.as_str()),
            _ => None,
        });
        let keys = |names: &[&str]| ListType::Map(names.iter().map(ToString::to_string).collect());
        match fields.next() {
            Some("containers" | "initContainers" | "ephemeralContainers") => keys(&["name"]),
            Some("volumes" | "env" | "imagePullSecrets" | "resourceClaims") => keys(&["name"]),
            Some("volumeMounts") => keys(&["mountPath"]),
            Some("ports") => match fields.next() {
                Some("containers" | "initContainers" | "ephemeralContainers") => {
                    keys(&["containerPort", "protocol"])
                }
                _ => keys(&["port", "protocol"]),
            },
            Some("conditions") => keys(&["type"]),
            Some("ownerReferences") => keys(&["uid"]),
            Some("hostAliases") => keys(&["ip"]),
            Some("topologySpreadConstraints") => keys(&["topologyKey", "whenUnsatisfiable"]),
            Some("finalizers") => ListType::Set,
            _ => ListType::Atomic,
        }
    }
}

/// List types read from a CRD's OpenAPI schema; lists without annotations are atomic.
pub struct SchemaListTypes<'a>(pub &'a Value);

impl ListTypes for SchemaListTypes<'_> {
    fn list_type(&self, path: &[PathElement]) -> ListType {
        // `metadata` of a custom object follows the built-in rules.
        if matches!(path.first(), Some(PathElement::Field(f)) if f == "metadata") {
            return BuiltinListTypes.list_type(path);
        }
        let mut schema = self.0;
        for element in path {
            schema = match element {
                PathElement::Field(name) => {
                    match schema.get("properties").and_then(|p| p.get(name)) {
                        Some(property) => property,
                        None => match schema.get("additionalProperties") {
                            Some(values) if values.is_object() => values,
                            _ => return ListType::Atomic,
                        },
                    }
                }
                _ => match schema.get("items") {
                    Some(items) => items,
                    None => return ListType::Atomic,
                },
            };
        }
        match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(
                schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(|k| k.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            _ => ListType::Atomic,
        }
    }
}

/// Canonical JSON of a value: maps with sorted keys, no whitespace.
pub fn canonical_json(value: &Value) -> String {
    fn sort(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let sorted: BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, sort(v))).collect();
                Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sort(value)).unwrap_or_default()
}

/// The key element of `item` in a list keyed by `keys`. A missing `protocol` key reads as
/// `TCP`, the API server's default, so ports match whether or not a client spelled it out.
pub fn item_key(item: &Value, keys: &[String]) -> PathElement {
    let key: BTreeMap<&str, Value> = keys
        .iter()
        .filter_map(|k| {
            let value = match item.get(k) {
                Some(v) if !v.is_null() => v.clone(),
                _ if k == "protocol" => Value::String("TCP".into()),
                _ => return None,
            };
            Some((k.as_str(), value))
        })
        .collect();
    PathElement::Key(serde_json::to_string(&key).unwrap_or_default())
}

/// The paths `value` sets: its leaves and its associative-list items.
pub fn fieldset_of(value: &Value, lists: &dyn ListTypes) -> FieldSet {
    let mut set = FieldSet::new();
    collect(value, &mut Vec::new(), lists, &mut set);
    set
}

fn collect(value: &Value, path: &mut Path, lists: &dyn ListTypes, set: &mut FieldSet) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (field, child) in map {
                path.push(PathElement::Field(field.clone()));
                collect(child, path, lists, set);
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match lists.list_type(path) {
            ListType::Atomic => {
                set.insert(path.clone());
            }
            ListType::Set => {
                for item in items {
                    path.push(PathElement::Value(canonical_json(item)));
                    set.insert(path.clone());
                    path.pop();
                }
            }
            ListType::Map(keys) => {
                for item in items {
                    path.push(item_key(item, &keys));
                    set.insert(path.clone());
                    collect(item, path, lists, set);
                    path.pop();
                }
            }
        },
        _ => {
            set.insert(path.clone());
        }
    }
}

/// One step into a JSON value: a map field or a list index.
enum Step<'a> {
    Field(&'a str),
    Index(usize),
}

/// Resolves `path` into plain field and index steps, finding keyed and set items by value.
fn steps<'a>(
    object: &Value,
    path: &'a [PathElement],
    lists: &dyn ListTypes,
) -> Option<Vec<Step<'a>>> {
    let mut current = object;
    let mut steps = Vec::with_capacity(path.len());
    for (depth, element) in path.iter().enumerate() {
        let step = match element {
            PathElement::Field(name) => Step::Field(name),
            PathElement::Index(index) => Step::Index(*index),
            PathElement::Value(json) => Step::Index(
                current
                    .as_array()?
                    .iter()
                    .position(|item| &canonical_json(item) == json)?,
            ),
            PathElement::Key(_) => {
                let ListType::Map(keys) = lists.list_type(&path[..depth]) else {
                    return None;
                };
                Step::Index(
                    current
                        .as_array()?
                        .iter()
                        .position(|item| &item_key(item, &keys) == element)?,
                )
            }
        };
        current = match &step {
            Step::Field(name) => current.get(*name)?,
            Step::Index(index) => current.get(*index)?,
        };
        steps.push(step);
    }
    Some(steps)
}

/// The value at `path` in `object`, if present.
pub fn value_at<'a>(
    object: &'a Value,
    path: &[PathElement],
    lists: &dyn ListTypes,
) -> Option<&'a Value> {
    steps(object, path, lists)?
        .iter()
        .try_fold(object, |current, step| match step {
            Step::Field(name) => current.get(*name),
            Step::Index(index) => current.get(*index),
        })
}

fn value_at_mut<'a>(
    object: &'a mut Value,
    path: &[PathElement],
    lists: &dyn ListTypes,
) -> Option<&'a mut Value> {
    steps(object, path, lists)?
        .iter()
        .try_fold(object, |current, step| match step {
            Step::Field(name) => current.get_mut(*name),
            Step::Index(index) => current.get_mut(*index),
        })
}

/// Removes the value at `path` from `object`; maps emptied by the removal are removed too
/// (but never the top-level sections).
pub fn remove_at(object: &mut Value, path: &[PathElement], lists: &dyn ListTypes) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let Some(parent) = value_at_mut(object, parent_path, lists) else {
        return;
    };
    match (last, parent) {
        (PathElement::Field(name), Value::Object(map)) => {
            map.remove(name);
        }
        (PathElement::Index(index), Value::Array(items)) if *index < items.len() => {
            items.remove(*index);
        }
        (PathElement::Value(json), Value::Array(items)) => {
            items.retain(|item| &canonical_json(item) != json);
        }
        (PathElement::Key(_), Value::Array(items)) => {
            if let ListType::Map(keys) = lists.list_type(parent_path) {
                items.retain(|item| &item_key(item, &keys) != last);
            }
        }
        _ => return,
    }
    let emptied = value_at(object, parent_path, lists).is_some_and(|parent| match parent {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    });
    if emptied && parent_path.len() > 1 {
        remove_at(object, parent_path, lists);
    }
}

/// Encodes a field set in the `fieldsV1` format of `managedFields`.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for element in path {
            let key = match element {
                PathElement::Field(name) => format!("f:{name}"),
                PathElement::Key(json) => format!("k:{json}"),
                PathElement::Value(json) => format!("v:{json}"),
                PathElement::Index(index) => format!("i:{index}"),
            };
            node = node
                .entry(key)
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("fieldsV1 nodes are maps");
        }
        if matches!(
            path.last(),
            Some(PathElement::Key(_) | PathElement::Value(_))
        ) {
            node.insert(".".into(), Value::Object(Map::new()));
        }
    }
    Value::Object(root)
}

/// Decodes the `fieldsV1` format of `managedFields`.
pub fn from_fields_v1(fields: &Value) -> FieldSet {
    fn walk(node: &Map<String, Value>, path: &mut Path, set: &mut FieldSet) {
        let children: Vec<_> = node.iter().filter(|(key, _)| key.as_str() != ".").collect();
        if (children.is_empty() || node.contains_key(".")) && !path.is_empty() {
            set.insert(path.clone());
        }
        for (key, child) in children {
            let element = match key.split_at(2.min(key.len())) {
                ("f:", name) => PathElement::Field(name.to_string()),
                ("k:", json) => PathElement::Key(json.to_string()),
                ("v:", json) => PathElement::Value(json.to_string()),
                ("i:", index) => match index.parse() {
                    Ok(index) => PathElement::Index(index),
                    Err(_) => continue,
                },
                _ => continue,
            };
            path.push(element);
            if let Value::Object(child) = child {
                walk(child, path, set);
            }
            path.pop();
        }
    }
    let mut set = FieldSet::new();
    if let Value::Object(root) = fields {
        walk(root, &mut Vec::new(), &mut set);
    }
    set
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn field(name: &str) -> PathElement {
        PathElement::Field(name.into())
    }

    #[test]
    fn field_sets_hold_leaves_and_keyed_items() {
        let pod = json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "main", "image": "x", "ports": [{"containerPort": 22}]}],
                "tolerations": [{"key": "a"}]
            }
        });
        let set = fieldset_of(&pod, &BuiltinListTypes);
        let main = PathElement::Key(r#"{"name":"main"}"#.into());
        let port = PathElement::Key(r#"{"containerPort":22,"protocol":"TCP"}"#.into());
        let expected: FieldSet = [
            vec![field("metadata"), field("labels"), field("app")],
            vec![field("spec"), field("containers"), main.clone()],
            vec![
                field("spec"),
                field("containers"),
                main.clone(),
                field("name"),
            ],
            vec![
                field("spec"),
                field("containers"),
                main.clone(),
                field("image"),
            ],
            vec![
                field("spec"),
                field("containers"),
                main.clone(),
                field("ports"),
                port.clone(),
            ],
            vec![
                field("spec"),
                field("containers"),
                main,
                field("ports"),
                port,
                field("containerPort"),
            ],
            vec![field("spec"), field("tolerations")],
        ]
        .into_iter()
        .collect();
        assert_eq!(set, expected);
    }

    #[test]
    fn fields_v1_round_trips() {
        let object = json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let set = fieldset_of(&object, &BuiltinListTypes);
        let encoded = to_fields_v1(&set);
        assert_eq!(
            encoded["f:metadata"]["f:finalizers"]["v:\"a\""],
            json!({".": {}})
        );
        assert_eq!(
            encoded["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["."],
            json!({})
        );
        assert_eq!(from_fields_v1(&encoded), set);
    }

    #[test]
    fn removing_a_leaf_prunes_emptied_maps() {
        let mut object = json!({"spec": {"a": {"b": 1}, "c": 2}});
        remove_at(
            &mut object,
            &[field("spec"), field("a"), field("b")],
            &BuiltinListTypes,
        );
        assert_eq!(object, json!({"spec": {"c": 2}}));
        let mut pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let key = PathElement::Key(r#"{"name":"a"}"#.into());
        remove_at(
            &mut pod,
            &[field("spec"), field("containers"), key],
            &BuiltinListTypes,
        );
        assert_eq!(pod, json!({"spec": {"containers": [{"name": "b"}]}}));
    }

    #[test]
    fn schema_list_types_follow_annotations() {
        let schema = json!({"properties": {"status": {"properties": {"conditions": {
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
            "items": {"type": "object"}
        }, "names": {"type": "array", "items": {"type": "string"}}}}}});
        let lists = SchemaListTypes(&schema);
        assert_eq!(
            lists.list_type(&[field("status"), field("conditions")]),
            ListType::Map(vec!["type".into()])
        );
        assert_eq!(
            lists.list_type(&[field("status"), field("names")]),
            ListType::Atomic
        );
        assert_eq!(
            lists.list_type(&[field("metadata"), field("finalizers")]),
            ListType::Set
        );
    }
}
