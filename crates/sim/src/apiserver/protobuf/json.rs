//! A decoded Kubernetes message shown as Go's JSON encoding shows the same Go object.
//!
//! - Field names are the protobuf names (in Kubernetes' messages, the JSON names).
//! - A scalar holding its zero value (`""`, `0`, `false`) is shown only where Go shows it: in a
//!   pointer field or one without `omitempty` ([`go_json::SHOWN_ZEROS`]). Kubernetes writes
//!   non-pointer fields to protobuf even when they are zero, so this cannot be read from the
//!   message. Empty lists and maps are left out, or `null` where Go shows them.
//! - Embedded Go structs ([`go_json::INLINED`]) have their fields shown in the enclosing object.
//! - Kubernetes' own encodings: `Time` as RFC 3339 to the second (`null` when zero), `MicroTime`
//!   to the microsecond, `IntOrString` as a number or a string, `Quantity` as its string,
//!   `RawExtension` and `FieldsV1` as the JSON they hold, bytes in base64, 64-bit integers as
//!   numbers.

use prost_reflect::{DynamicMessage, MapKey, ReflectMessage, Value};
use serde_json::Map;

use super::ProtobufError;
use super::go_json::{INLINED, SHOWN_ZEROS};

type Json = serde_json::Value;

/// The JSON form of a message.
///
/// # Errors
/// A `RawExtension` or `FieldsV1` that is not JSON, or a time out of range.
pub fn object(message: &DynamicMessage) -> Result<Json, ProtobufError> {
    if let Some(special) = special(message)? {
        return Ok(special);
    }
    let mut fields = Map::new();
    fields_into(message, &mut fields)?;
    Ok(Json::Object(fields))
}

/// Adds the fields of `message` to `fields`.
fn fields_into(
    message: &DynamicMessage,
    fields: &mut Map<String, Json>,
) -> Result<(), ProtobufError> {
    let descriptor = message.descriptor();
    for field in descriptor.fields() {
        let key = (descriptor.full_name(), field.name());
        let shows_zero = SHOWN_ZEROS.binary_search(&key).is_ok();
        if !message.has_field(&field) {
            if shows_zero && (field.is_list() || field.is_map()) {
                fields.insert(field.name().to_string(), Json::Null);
            }
            continue;
        }
        let value = message.get_field(&field);
        if let Value::Message(inner) = &*value
            && INLINED.binary_search(&key).is_ok()
        {
            fields_into(inner, fields)?;
            continue;
        }
        if is_zero(&value) && !shows_zero {
            continue;
        }
        fields.insert(field.name().to_string(), self::value(&value)?);
    }
    Ok(())
}

fn value(value: &Value) -> Result<Json, ProtobufError> {
    Ok(match value {
        Value::Bool(b) => Json::from(*b),
        Value::I32(n) | Value::EnumNumber(n) => Json::from(*n),
        Value::I64(n) => Json::from(*n),
        Value::U32(n) => Json::from(*n),
        Value::U64(n) => Json::from(*n),
        Value::F32(n) => Json::from(f64::from(*n)),
        Value::F64(n) => Json::from(*n),
        Value::String(s) => Json::from(s.as_str()),
        Value::Bytes(bytes) => base64(bytes),
        Value::Message(message) => object(message)?,
        Value::List(items) => Json::Array(items.iter().map(self::value).collect::<Result<_, _>>()?),
        Value::Map(entries) => {
            let mut object = Map::new();
            for (key, entry) in entries {
                object.insert(map_key(key), self::value(entry)?);
            }
            Json::Object(object)
        }
    })
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Bool(b) => !b,
        Value::I32(n) | Value::EnumNumber(n) => *n == 0,
        Value::I64(n) => *n == 0,
        Value::U32(n) => *n == 0,
        Value::U64(n) => *n == 0,
        Value::F32(n) => *n == 0.0,
        Value::F64(n) => *n == 0.0,
        Value::String(s) => s.is_empty(),
        Value::Bytes(bytes) => bytes.is_empty(),
        Value::List(items) => items.is_empty(),
        Value::Map(entries) => entries.is_empty(),
        Value::Message(_) => false,
    }
}

fn map_key(key: &MapKey) -> String {
    match key {
        MapKey::String(s) => s.clone(),
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
    }
}

fn base64(bytes: &[u8]) -> Json {
    serde_json::to_value(k8s_openapi::ByteString(bytes.to_vec())).unwrap_or(Json::Null)
}

/// The JSON form of the messages Kubernetes encodes in its own way, or `None` for others.
fn special(message: &DynamicMessage) -> Result<Option<Json>, ProtobufError> {
    let descriptor = message.descriptor();
    let name = descriptor.full_name();
    let field = |field: &str| {
        message
            .get_field_by_name(field)
            .map(|value| value.into_owned())
    };
    Ok(Some(match name.strip_prefix("k8s.io.apimachinery.pkg.") {
        Some("apis.meta.v1.Time") => time(name, field("seconds"), field("nanos"), false)?,
        Some("apis.meta.v1.MicroTime") => time(name, field("seconds"), field("nanos"), true)?,
        Some("util.intstr.IntOrString") => match field("type") {
            Some(Value::I64(1)) => value_or_null(field("strVal"))?,
            _ => value_or_null(field("intVal"))?,
        },
        Some("api.resource.Quantity") => value_or_null(field("string"))?,
        Some("runtime.RawExtension") => raw_json(name, field("raw"))?,
        Some("apis.meta.v1.FieldsV1") => raw_json(name, field("Raw"))?,
        _ => return Ok(None),
    }))
}

fn value_or_null(value: Option<Value>) -> Result<Json, ProtobufError> {
    value.map_or(Ok(Json::Null), |value| self::value(&value))
}

fn time(
    name: &str,
    seconds: Option<Value>,
    nanos: Option<Value>,
    micro: bool,
) -> Result<Json, ProtobufError> {
    let seconds = match seconds {
        Some(Value::I64(seconds)) => seconds,
        _ => 0,
    };
    let nanos = match nanos {
        Some(Value::I32(nanos)) => nanos,
        _ => 0,
    };
    if seconds == 0 && nanos == 0 {
        return Ok(Json::Null);
    }
    let at = jiff::Timestamp::new(seconds, nanos).map_err(|source| ProtobufError::Time {
        field: name.to_string(),
        source,
    })?;
    let whole = at.strftime("%Y-%m-%dT%H:%M:%S");
    Ok(Json::from(if micro {
        format!("{whole}.{:06}Z", at.subsec_microsecond())
    } else {
        format!("{whole}Z")
    }))
}

fn raw_json(name: &str, raw: Option<Value>) -> Result<Json, ProtobufError> {
    match raw {
        Some(Value::Bytes(bytes)) if !bytes.is_empty() => {
            serde_json::from_slice(&bytes).map_err(|source| ProtobufError::RawJson {
                field: name.to_string(),
                source,
            })
        }
        _ => Ok(Json::Null),
    }
}
