//! Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`),
//! which client-go and kubectl's typed commands (`kubectl create namespace`, `create secret`,
//! ...) send for built-in objects, decoded into the JSON object the JSON path would store.
//!
//! A body is the four bytes `k8s\0` followed by a `runtime.Unknown` envelope that names the
//! object's `apiVersion` and `kind` and holds the object's own message. Messages are decoded
//! by reflection (`prost-reflect`) over the descriptors of Kubernetes' own `generated.proto`
//! files (`kubernetes.binpb`, compiled by `crates/sim/tools/kubernetes_protos.py`), and shown
//! as Go's JSON encoding shows the same Go object (see [`json`]).
//!
//! Decoded: the kinds of `v1`, `apps/v1`, `batch/v1`, `policy/v1`, `autoscaling/v1`,
//! `coordination.k8s.io/v1`, `events.k8s.io/v1` and `rbac.authorization.k8s.io/v1`, and
//! `DeleteOptions`. Custom resources have no protobuf form, as in kube-apiserver.

mod go_json;
mod json;

use std::sync::LazyLock;

use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, Value};

/// The media type of Kubernetes' protobuf encoding.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The prefix of every protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// The protobuf package of each group version decoded, by `apiVersion`.
const PACKAGES: &[(&str, &str)] = &[
    ("v1", "k8s.io.api.core.v1"),
    ("apps/v1", "k8s.io.api.apps.v1"),
    ("batch/v1", "k8s.io.api.batch.v1"),
    ("policy/v1", "k8s.io.api.policy.v1"),
    ("autoscaling/v1", "k8s.io.api.autoscaling.v1"),
    ("coordination.k8s.io/v1", "k8s.io.api.coordination.v1"),
    ("events.k8s.io/v1", "k8s.io.api.events.v1"),
    ("rbac.authorization.k8s.io/v1", "k8s.io.api.rbac.v1"),
];

const META_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";

static DESCRIPTORS: LazyLock<Result<DescriptorPool, String>> = LazyLock::new(|| {
    DescriptorPool::decode(include_bytes!("kubernetes.binpb").as_slice())
        .map_err(|error| error.to_string())
});

/// Why a protobuf body could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    /// The body lacks the `k8s\0` prefix.
    #[error("the protobuf body does not start with the Kubernetes magic number")]
    NoMagic,
    /// The built-in descriptors did not load (a build problem, not the request's).
    #[error("the protobuf descriptors did not load: {0}")]
    Descriptors(String),
    /// The `runtime.Unknown` envelope did not parse.
    #[error("the protobuf envelope is malformed: {0}")]
    Envelope(prost_reflect::prost::DecodeError),
    /// The envelope says the object is compressed or in another encoding.
    #[error("the protobuf envelope holds an object in {0:?}, which is not supported")]
    Encoding(String),
    /// No protobuf message for this kind.
    #[error("{kind} of {api_version:?} has no protobuf form")]
    UnknownKind {
        /// The envelope's `apiVersion`.
        api_version: String,
        /// The envelope's `kind`.
        kind: String,
    },
    /// The object's message did not parse.
    #[error("the {kind} in the protobuf body is malformed: {source}")]
    Message {
        /// The envelope's `kind`.
        kind: String,
        /// What the parser said.
        source: prost_reflect::prost::DecodeError,
    },
    /// A field that holds JSON (a `RawExtension`, managed fields) holds something else.
    #[error("{field} holds bytes that are not JSON: {source}")]
    RawJson {
        /// The message type.
        field: String,
        /// What the JSON parser said.
        source: serde_json::Error,
    },
    /// A time outside the range a timestamp can hold.
    #[error("{field} holds an invalid time: {source}")]
    Time {
        /// The message type.
        field: String,
        /// What the time library said.
        source: jiff::Error,
    },
}

/// Whether a `Content-Type` names the protobuf encoding.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case(MEDIA_TYPE))
}

/// Decodes a protobuf request body into the JSON object it stands for, with `apiVersion` and
/// `kind` from its envelope.
///
/// # Errors
/// A body without the envelope, a kind with no protobuf form here, or a malformed message.
pub fn decode(body: &[u8]) -> Result<serde_json::Value, ProtobufError> {
    let envelope = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let unknown = DynamicMessage::decode(
        message("k8s.io.apimachinery.pkg.runtime.Unknown")?,
        envelope,
    )
    .map_err(ProtobufError::Envelope)?;
    for encoding in ["contentEncoding", "contentType"] {
        let encoding = string(&unknown, encoding);
        if !encoding.is_empty() && !is_protobuf(&encoding) {
            return Err(ProtobufError::Encoding(encoding));
        }
    }
    let type_meta = match unknown.get_field_by_name("typeMeta").as_deref() {
        Some(Value::Message(type_meta)) => type_meta.clone(),
        _ => DynamicMessage::new(message("k8s.io.apimachinery.pkg.runtime.TypeMeta")?),
    };
    let api_version = string(&type_meta, "apiVersion");
    let kind = string(&type_meta, "kind");
    let unknown_kind = || ProtobufError::UnknownKind {
        api_version: api_version.clone(),
        kind: kind.clone(),
    };
    let package = if kind == "DeleteOptions" {
        Some(META_V1)
    } else {
        PACKAGES
            .iter()
            .find(|(version, _)| *version == api_version)
            .map(|(_, package)| *package)
    };
    let descriptor = package
        .and_then(|package| {
            descriptors()
                .ok()?
                .get_message_by_name(&format!("{package}.{kind}"))
        })
        .ok_or_else(unknown_kind)?;
    let raw = match unknown.get_field_by_name("raw").as_deref() {
        Some(Value::Bytes(raw)) => raw.clone(),
        _ => prost_reflect::bytes::Bytes::new(),
    };
    let object =
        DynamicMessage::decode(descriptor, raw).map_err(|source| ProtobufError::Message {
            kind: kind.clone(),
            source,
        })?;
    let mut object = json::object(&object)?;
    if let serde_json::Value::Object(fields) = &mut object {
        fields.insert("apiVersion".into(), api_version.into());
        fields.insert("kind".into(), kind.into());
    }
    Ok(object)
}

/// The protobuf body of `object`, a message of kind `kind` in `api_version`: the magic
/// number and the envelope, as client-go writes it.
///
/// # Errors
/// The built-in descriptors did not load.
pub fn encode(
    api_version: &str,
    kind: &str,
    object: &DynamicMessage,
) -> Result<Vec<u8>, ProtobufError> {
    use prost_reflect::prost::Message as _;
    let mut type_meta = DynamicMessage::new(message("k8s.io.apimachinery.pkg.runtime.TypeMeta")?);
    type_meta.set_field_by_name("apiVersion", Value::String(api_version.into()));
    type_meta.set_field_by_name("kind", Value::String(kind.into()));
    let mut envelope = DynamicMessage::new(message("k8s.io.apimachinery.pkg.runtime.Unknown")?);
    envelope.set_field_by_name("typeMeta", Value::Message(type_meta));
    envelope.set_field_by_name("raw", Value::Bytes(object.encode_to_vec().into()));
    let mut body = MAGIC.to_vec();
    body.extend(envelope.encode_to_vec());
    Ok(body)
}

/// The descriptors of the messages eto-sim decodes (clients can encode bodies with them).
///
/// # Errors
/// The built-in descriptors did not load, which the unit tests rule out.
pub fn descriptors() -> Result<&'static DescriptorPool, ProtobufError> {
    DESCRIPTORS
        .as_ref()
        .map_err(|error| ProtobufError::Descriptors(error.clone()))
}

fn message(name: &str) -> Result<MessageDescriptor, ProtobufError> {
    descriptors()?
        .get_message_by_name(name)
        .ok_or_else(|| ProtobufError::Descriptors(format!("no message {name}")))
}

fn string(message: &DynamicMessage, field: &str) -> String {
    match message.get_field_by_name(field).as_deref() {
        Some(Value::String(value)) => value.clone(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;
