//! What the API server does with a custom object against its CRD's structural schema, in
//! kube-apiserver's order: drop `null`s of non-nullable fields, prune unknown fields, apply
//! `default`s, then validate.
//!
//! Checked: `type` (with `nullable`, `x-kubernetes-int-or-string`,
//! `x-kubernetes-preserve-unknown-fields`), `required`, `enum`, `minimum`/`maximum` (and their
//! exclusive forms), `minLength`/`maxLength`, `minItems`/`maxItems`, `pattern`, the `int32`,
//! `int64` and `date-time` formats, duplicate keys of `x-kubernetes-list-type: map|set` lists,
//! and every `x-kubernetes-validations` CEL rule (through kube-cel, with `oldSelf` on updates).
//! Not checked: `multipleOf`, `uniqueItems`, `oneOf`/`anyOf`/`allOf`/`not`, other formats,
//! `x-kubernetes-embedded-resource` metadata, and the CEL cost budget.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::cause::Cause;

/// The schema of one CRD version, with its CEL rules compiled.
pub struct CompiledCrdSchema {
    /// The `openAPIV3Schema`.
    pub schema: Value,
    cel: kube_cel::CompiledSchema,
}

impl std::fmt::Debug for CompiledCrdSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledCrdSchema").finish_non_exhaustive()
    }
}

impl CompiledCrdSchema {
    /// Compiles the CEL rules of `schema`.
    ///
    /// # Errors
    /// The rules that do not compile, as `rule: error` lines.
    pub fn compile(schema: Value) -> Result<Self, Vec<String>> {
        let cel = kube_cel::compile_schema(&schema);
        let errors: Vec<String> = cel
            .compilation_errors()
            .iter()
            .map(|e| format!("{e:?}"))
            .collect();
        if errors.is_empty() {
            Ok(Self { schema, cel })
        } else {
            Err(errors)
        }
    }

    /// Removes the fields the schema does not know, returning their paths. `metadata`,
    /// `apiVersion` and `kind` are left to the caller.
    pub fn prune_unknown(&self, object: &mut Value) -> Vec<String> {
        let mut unknown = Vec::new();
        prune(object, &self.schema, "", Nulls::Keep, &mut unknown);
        unknown
    }

    /// Prepares a written object as kube-apiserver does: removes `null`s the schema does not
    /// allow, prunes unknown fields (returning their paths) and applies defaults.
    pub fn normalize(&self, object: &mut Value) -> Vec<String> {
        let mut unknown = Vec::new();
        prune(object, &self.schema, "", Nulls::Drop, &mut unknown);
        let metadata = object.get("metadata").cloned();
        *object = kube_cel::apply_defaults(&self.schema, object);
        if let (Some(metadata), Value::Object(map)) = (metadata, object) {
            map.insert("metadata".into(), metadata);
        }
        unknown
    }

    /// Every way `object` breaks the schema, `old` being the stored object on updates.
    pub fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let (Value::Object(map), Some(properties)) = (
            object,
            self.schema.get("properties").and_then(Value::as_object),
        ) {
            for field in required(&self.schema) {
                if !map.contains_key(field) {
                    causes.push(required_cause(field));
                }
            }
            for (field, value) in map {
                if matches!(field.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(schema) = properties.get(field) {
                    check(value, schema, field, &mut causes);
                }
            }
        }
        if causes.is_empty()
            && let Err(errors) = kube_cel::validate_compiled(&self.cel, object, old)
        {
            causes.extend(errors.iter().map(|error| {
                Cause::invalid(
                    error.field_path.clone(),
                    format!("Invalid value: \"object\": {}", error.message),
                )
            }));
        }
        causes
    }
}

fn nullable(schema: &Value) -> bool {
    schema
        .get("nullable")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn required(schema: &Value) -> impl Iterator<Item = &str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn required_cause(field: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.into(),
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Nulls {
    Keep,
    Drop,
}

fn prune(value: &mut Value, schema: &Value, path: &str, nulls: Nulls, unknown: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let keep_unknown = preserves_unknown(schema)
                || schema.get("additionalProperties").and_then(Value::as_bool) == Some(true);
            let fields: Vec<String> = map.keys().cloned().collect();
            for field in fields {
                // The root's type information is the API server's own business.
                if path.is_empty() && matches!(field.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_path = join(path, &field);
                match properties.and_then(|p| p.get(&field)).or(additional) {
                    Some(child_schema) => {
                        let child = map.get_mut(&field).expect("the key was just listed");
                        if nulls == Nulls::Drop && child.is_null() && !nullable(child_schema) {
                            map.remove(&field);
                        } else {
                            prune(child, child_schema, &child_path, nulls, unknown);
                        }
                    }
                    None if keep_unknown => {}
                    None => {
                        map.remove(&field);
                        unknown.push(child_path);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter_mut().enumerate() {
                    prune(
                        item,
                        item_schema,
                        &format!("{path}[{index}]"),
                        nulls,
                        unknown,
                    );
                }
            }
        }
        _ => {}
    }
}

fn show(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn check(value: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if value.is_null() {
        if !nullable(schema) {
            causes.push(Cause::invalid(
                path,
                format!(
                    "Invalid value: \"null\": {path} in body must be of type {}",
                    type_name(schema)
                ),
            ));
        }
        return;
    }
    if schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true)
    {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            causes.push(type_cause(value, "integer or string", path));
        }
        return;
    }
    let type_ok = match schema.get("type").and_then(Value::as_str) {
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    };
    if !type_ok {
        causes.push(type_cause(value, type_name(schema), path));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let supported: Vec<String> = allowed.iter().map(show).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                show(value),
                supported.join(", ")
            ),
            field: path.to_string(),
        });
    }
    check_bounds(value, schema, path, causes);
    match value {
        Value::Object(map) => {
            for field in required(schema) {
                if !map.contains_key(field) {
                    causes.push(required_cause(&join(path, field)));
                }
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (field, child) in map {
                if let Some(child_schema) = properties.and_then(|p| p.get(field)).or(additional) {
                    check(child, child_schema, &join(path, field), causes);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check(item, item_schema, &format!("{path}[{index}]"), causes);
                }
            }
            check_duplicates(items, schema, path, causes);
        }
        _ => {}
    }
}

fn type_name(schema: &Value) -> &str {
    schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("object")
}

fn type_cause(value: &Value, expected: &str, path: &str) -> Cause {
    let actual = match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    };
    Cause {
        reason: "FieldValueTypeInvalid".into(),
        message: format!(
            "Invalid value: \"{actual}\": {path} in body must be of type {expected}: \"{actual}\""
        ),
        field: path.to_string(),
    }
}

fn check_bounds(value: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let number = |key: &str| schema.get(key).and_then(Value::as_f64);
    let count = |key: &str| schema.get(key).and_then(Value::as_u64);
    let mut invalid = |message: String| {
        causes.push(Cause::invalid(
            path,
            format!("Invalid value: {}: {message}", show(value)),
        ))
    };
    if let Some(actual) = value.as_f64() {
        let exclusive_min = schema.get("exclusiveMinimum").and_then(Value::as_bool) == Some(true);
        let exclusive_max = schema.get("exclusiveMaximum").and_then(Value::as_bool) == Some(true);
        if let Some(minimum) = number("minimum")
            && (actual < minimum || exclusive_min && actual == minimum)
        {
            let relation = if exclusive_min {
                "greater than"
            } else {
                "greater than or equal to"
            };
            invalid(format!("{path} in body should be {relation} {minimum}"));
        }
        if let Some(maximum) = number("maximum")
            && (actual > maximum || exclusive_max && actual == maximum)
        {
            let relation = if exclusive_max {
                "less than"
            } else {
                "less than or equal to"
            };
            invalid(format!("{path} in body should be {relation} {maximum}"));
        }
        match schema.get("format").and_then(Value::as_str) {
            Some("int32") if i32::try_from(value.as_i64().unwrap_or(i64::MAX)).is_err() => {
                invalid(format!("{path} in body must be of type int32"));
            }
            _ => {}
        }
    }
    if let Some(text) = value.as_str() {
        let length = text.chars().count() as u64;
        if let Some(min) = count("minLength").filter(|min| length < *min) {
            invalid(format!(
                "{path} in body should be at least {min} chars long"
            ));
        }
        if let Some(max) = count("maxLength").filter(|max| length > *max) {
            invalid(format!("{path} in body may not be longer than {max}"));
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && regex::Regex::new(pattern).is_ok_and(|re| !re.is_match(text))
        {
            invalid(format!("{path} in body should match '{pattern}'"));
        }
        if schema.get("format").and_then(Value::as_str) == Some("date-time")
            && text.parse::<jiff::Timestamp>().is_err()
        {
            invalid(format!("{path} in body must be of type date-time"));
        }
    }
    if let Some(items) = value.as_array() {
        let length = items.len() as u64;
        if let Some(min) = count("minItems").filter(|min| length < *min) {
            causes.push(Cause::invalid(
                path,
                format!("Invalid value: {length}: {path} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = count("maxItems").filter(|max| length > *max) {
            causes.push(Cause {
                reason: "FieldValueTooMany".into(),
                message: format!("Too many: {length}: must have at most {max} items"),
                field: path.to_string(),
            });
        }
    }
}

fn check_duplicates(items: &[Value], schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let keys: Vec<&str> = match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|keys| keys.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default(),
        Some("set") => Vec::new(),
        _ => return,
    };
    let mut seen = BTreeSet::new();
    for (index, item) in items.iter().enumerate() {
        let identity = if keys.is_empty() {
            crate::merge::fieldset::canonical_json(item)
        } else {
            let key: Map<String, Value> = keys
                .iter()
                .map(|k| {
                    (
                        (*k).to_string(),
                        item.get(*k).cloned().unwrap_or(Value::Null),
                    )
                })
                .collect();
            crate::merge::fieldset::canonical_json(&Value::Object(key))
        };
        if !seen.insert(identity.clone()) {
            causes.push(Cause {
                reason: "FieldValueDuplicate".into(),
                message: format!("Duplicate value: {identity}"),
                field: format!("{path}[{index}]"),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn compiled() -> CompiledCrdSchema {
        CompiledCrdSchema::compile(json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "x-kubernetes-validations": [{"rule": "self.size <= 10", "message": "size must be at most 10"}],
                    "properties": {
                        "size": {"type": "integer", "format": "int32", "minimum": 1},
                        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "quantity": {"x-kubernetes-int-or-string": true},
                        "when": {"type": "string", "format": "date-time", "nullable": true}
                    }
                },
                "status": {"type": "object", "properties": {"conditions": {
                    "type": "array", "maxItems": 2,
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object", "properties": {"type": {"type": "string"}}}
                }}}
            }
        }))
        .unwrap()
    }

    #[test]
    fn normalization_prunes_unknown_fields_drops_nulls_and_defaults() {
        let schema = compiled();
        let mut object = json!({
            "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "x"},
            "spec": {"size": 2, "typo": 1, "labels": {"a": "b"}, "free": {"anything": [1]}, "when": null, "quantity": null},
            "extra": true
        });
        let unknown = schema.normalize(&mut object);
        assert_eq!(unknown, ["extra", "spec.typo"]);
        assert_eq!(
            object["spec"],
            json!({"size": 2, "mode": "fast", "labels": {"a": "b"}, "free": {"anything": [1]}, "when": null})
        );
    }

    #[test]
    fn validation_names_every_broken_rule() {
        let schema = compiled();
        let fields = |object: Value| -> Vec<(String, String)> {
            schema
                .validate(&object, None)
                .into_iter()
                .map(|c| (c.field, c.reason))
                .collect()
        };
        let pair = |field: &str, reason: &str| (field.to_string(), reason.to_string());
        assert_eq!(fields(json!({"spec": {"size": 3}})), vec![]);
        assert_eq!(
            fields(json!({"spec": {}})),
            vec![pair("spec.size", "FieldValueRequired")]
        );
        assert_eq!(
            fields(json!({"spec": {"size": 0}})),
            vec![pair("spec.size", "FieldValueInvalid")]
        );
        assert_eq!(
            fields(json!({"spec": {"size": "2"}})),
            vec![pair("spec.size", "FieldValueTypeInvalid")]
        );
        assert_eq!(
            fields(json!({"spec": {"size": 4_000_000_000u64}})),
            vec![pair("spec.size", "FieldValueInvalid")]
        );
        assert_eq!(
            fields(json!({"spec": {"size": 2, "mode": "odd"}})),
            vec![pair("spec.mode", "FieldValueNotSupported")]
        );
        assert_eq!(
            fields(json!({"spec": {"size": 2, "quantity": [1]}})),
            vec![pair("spec.quantity", "FieldValueTypeInvalid")]
        );
        assert_eq!(
            fields(json!({"spec": {"size": 2, "when": "yesterday"}})),
            vec![pair("spec.when", "FieldValueInvalid")]
        );
        assert_eq!(
            fields(
                json!({"spec": {"size": 2}, "status": {"conditions": [{"type": "A"}, {"type": "A"}]}})
            ),
            vec![pair("status.conditions[1]", "FieldValueDuplicate")]
        );
        assert_eq!(
            fields(
                json!({"spec": {"size": 2}, "status": {"conditions": [{"type": "A"}, {"type": "B"}, {"type": "C"}]}})
            ),
            vec![pair("status.conditions", "FieldValueTooMany")]
        );
        let cel = schema.validate(&json!({"spec": {"size": 11}}), None);
        assert_eq!(cel.len(), 1);
        assert_eq!(cel[0].field, "spec");
        assert!(
            cel[0].message.contains("size must be at most 10"),
            "{}",
            cel[0].message
        );
    }
}
