//! kube-apiserver's limits of Events written the new way.

use serde_json::Value;

use super::invalid;
use crate::errors::{ApiError, Cause};
use crate::resources::ResourceType;
use crate::validation::syntax;

/// The longest note (core: `message`) of an Event with an `eventTime`, in bytes.
const EVENT_NOTE_LIMIT: usize = 1024;
/// The longest `reportingInstance`, `action` and `reason` of such an Event, in bytes.
const EVENT_FIELD_LIMIT: usize = 128;

/// kube-apiserver's checks of an Event written the new way, with an `eventTime` (every
/// `events.k8s.io/v1` Event is): who reported it, what it did and why are required and short,
/// and its note is at most 1,024 bytes. `event` is in its stored (core `v1`) form, so the
/// fields carry their core names, as kube-apiserver's messages do.
pub(super) fn admit_event(resource: &ResourceType, event: &Value) -> Result<(), ApiError> {
    if event["eventTime"].is_null() {
        return Ok(());
    }
    let text = |field: &str| event[field].as_str().unwrap_or_default();
    let mut causes = Vec::new();
    let controller = text("reportingComponent");
    if controller.is_empty() {
        causes.push(Cause::required("reportingComponent"));
    } else if !syntax::qualified_name(controller).is_empty() {
        causes.push(Cause::invalid(
            "reportingComponent",
            format!("Invalid value: {controller:?}: must be a qualified name"),
        ));
    }
    // (field, required, longest)
    for (field, required, limit) in [
        ("reportingInstance", true, EVENT_FIELD_LIMIT),
        ("action", true, EVENT_FIELD_LIMIT),
        ("reason", true, EVENT_FIELD_LIMIT),
        ("message", false, EVENT_NOTE_LIMIT),
    ] {
        let value = text(field);
        if required && value.is_empty() {
            causes.push(Cause::required(field));
        } else if value.len() > limit {
            causes.push(Cause::invalid(
                field,
                format!("Invalid value: \"\": can have at most {limit} characters"),
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(resource, event, causes))
    }
}
