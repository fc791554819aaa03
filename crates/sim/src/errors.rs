//! Failures of API requests, rendered as the `Status` objects kube-apiserver returns.
//!
//! Clients tell errors apart by the `reason` string (kube-rs does), so every variant uses the
//! reason and HTTP code of the real API server.

use serde_json::{Value, json};

pub use crate::cause::Cause;
use crate::resources::ResourceId;

/// A failed API request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404: the object (or its namespace) does not exist.
    #[error("{resource} {name:?} not found")]
    NotFound {
        /// The resource of the missing object.
        resource: ResourceId,
        /// Its name.
        name: String,
    },
    /// 409: create of a name that is taken.
    #[error("{resource} {name:?} already exists")]
    AlreadyExists {
        /// The resource.
        resource: ResourceId,
        /// The taken name.
        name: String,
    },
    /// 409: a stale `resourceVersion`, or a server-side apply conflict.
    #[error("{message}")]
    Conflict {
        /// The resource.
        resource: ResourceId,
        /// The object name.
        name: String,
        /// The full message.
        message: String,
        /// Conflicting fields of a server-side apply.
        causes: Vec<Cause>,
    },
    /// 422: the object breaks its schema or the API's rules.
    #[error("{kind} {name:?} is invalid: {}", aggregate(causes))]
    Invalid {
        /// Group of the kind.
        group: String,
        /// Kind of the object.
        kind: String,
        /// Its name.
        name: String,
        /// Every invalid field.
        causes: Vec<Cause>,
    },
    /// 404: no resource is served at this path.
    #[error("the server could not find the requested resource")]
    NoSuchResource,
    /// 400: a malformed request.
    #[error("{0}")]
    BadRequest(String),
    /// 405: the verb is not served for this path.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 410: the requested resourceVersion has been compacted away.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// What the client asked for.
        requested: u64,
        /// The oldest resourceVersion still available.
        oldest: u64,
    },
    /// 503: a pod behind the pod proxy could not be reached, or did not answer in HTTP.
    #[error("{0}")]
    ServiceUnavailable(String),
    /// 415: a patch type the resource does not support.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A failure injected by a test: any code, reason and message.
    #[error("{message}")]
    Injected {
        /// HTTP code.
        code: u16,
        /// Status reason.
        reason: String,
        /// Status message.
        message: String,
    },
}

impl ApiError {
    /// HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            Self::NotFound { .. } | Self::NoSuchResource => 404,
            Self::AlreadyExists { .. } | Self::Conflict { .. } => 409,
            Self::Invalid { .. } => 422,
            Self::BadRequest(_) => 400,
            Self::MethodNotAllowed(_) => 405,
            Self::Expired { .. } => 410,
            Self::UnsupportedMediaType(_) => 415,
            Self::ServiceUnavailable(_) => 503,
            Self::Injected { code, .. } => *code,
        }
    }

    /// The `reason` string of the Status.
    pub fn reason(&self) -> &str {
        match self {
            Self::NotFound { .. } | Self::NoSuchResource => "NotFound",
            Self::AlreadyExists { .. } => "AlreadyExists",
            Self::Conflict { .. } => "Conflict",
            Self::Invalid { .. } => "Invalid",
            Self::BadRequest(_) => "BadRequest",
            Self::MethodNotAllowed(_) => "MethodNotAllowed",
            Self::Expired { .. } => "Expired",
            Self::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Self::ServiceUnavailable(_) => "ServiceUnavailable",
            Self::Injected { reason, .. } => reason,
        }
    }

    /// A stale-resourceVersion conflict on `name`.
    pub fn stale(resource: &ResourceId, name: &str) -> Self {
        Self::Conflict {
            resource: resource.clone(),
            name: name.to_string(),
            message: format!(
                "Operation cannot be fulfilled on {resource} {name:?}: the object has been \
                 modified; please apply your changes to the latest version and try again"
            ),
            causes: Vec::new(),
        }
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let details = match self {
            Self::NotFound { resource, name }
            | Self::AlreadyExists { resource, name }
            | Self::Conflict { resource, name, .. } => {
                let mut details =
                    json!({"name": name, "group": resource.group, "kind": resource.plural});
                if let Self::Conflict { causes, .. } = self
                    && !causes.is_empty()
                {
                    details["causes"] = causes_json(causes);
                }
                Some(details)
            }
            Self::Invalid {
                group,
                kind,
                name,
                causes,
            } => Some(json!({
                "name": name, "group": group, "kind": kind, "causes": causes_json(causes)
            })),
            _ => None,
        };
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        if let Some(details) = details {
            status["details"] = details;
        }
        status
    }
}

/// The causes as kube-apiserver's aggregated field errors read: one alone, several in
/// brackets, each `field: message`.
fn aggregate(causes: &[Cause]) -> String {
    let each: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    match each.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", each.join(", ")),
    }
}

fn causes_json(causes: &[Cause]) -> Value {
    causes
        .iter()
        .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_carry_the_reasons_kube_rs_matches_on() {
        let pods = ResourceId::new("", "pods");
        let not_found = ApiError::NotFound {
            resource: pods.clone(),
            name: "p".into(),
        }
        .to_status();
        assert_eq!(not_found["reason"], "NotFound");
        assert_eq!(not_found["code"], 404);
        assert_eq!(not_found["message"], "pods \"p\" not found");
        let stale = ApiError::stale(&pods, "p").to_status();
        assert_eq!(
            (stale["reason"].as_str(), stale["code"].as_u64()),
            (Some("Conflict"), Some(409))
        );
        let gone = ApiError::Expired {
            requested: 3,
            oldest: 10,
        }
        .to_status();
        assert_eq!(
            (gone["reason"].as_str(), gone["code"].as_u64()),
            (Some("Expired"), Some(410))
        );
    }
}
