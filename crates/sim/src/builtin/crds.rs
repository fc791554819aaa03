//! CustomResourceDefinition registration: a CRD checked, established (at once or after
//! [`crate::store::State::crd_establish_delay`]), and its resource type served.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{invalid, is};
use crate::errors::{ApiError, Cause};
use crate::options::{Subresource, WriteOptions, timestamp_now};
use crate::resources::{PrinterColumn, ResourceId, ResourceType, ScalePaths};
use crate::schema::CompiledCrdSchema;
use crate::store::State;

/// Whether a CRD's `Established` condition holds: the API server serves its resource.
pub(super) fn is_established(crd: &Value) -> bool {
    crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True")
}

/// Checks a CRD and sets its status, `Established` or not yet; returns the resource type it
/// defines.
pub(super) fn admit_crd(
    resource: &ResourceType,
    crd: &mut Value,
    established: bool,
) -> Result<ResourceType, ApiError> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default().to_string();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default().to_string();
    let kind = names["kind"].as_str().unwrap_or_default().to_string();
    let mut causes = Vec::new();
    if group.is_empty() {
        causes.push(Cause::invalid("spec.group", "Required value"));
    }
    if plural.is_empty() || kind.is_empty() {
        causes.push(Cause::invalid(
            "spec.names",
            "Required value: plural and kind are required",
        ));
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let Some(version) = versions
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true) && v["served"].as_bool() != Some(false))
        .cloned()
    else {
        causes.push(Cause::invalid(
            "spec.versions",
            "Invalid value: one served version must be the storage version",
        ));
        return Err(invalid(resource, crd, causes));
    };
    let schema = version["schema"]["openAPIV3Schema"].clone();
    if !schema.is_object() {
        causes.push(Cause::invalid(
            "spec.versions[0].schema.openAPIV3Schema",
            "Required value: schemas are required",
        ));
    }
    let compiled = match CompiledCrdSchema::compile(schema) {
        Ok(compiled) => Some(compiled),
        Err(errors) => {
            causes.extend(errors.into_iter().map(|error| {
                Cause::invalid(
                    "spec.validation.openAPIV3Schema",
                    format!("Invalid value: compilation failed: {error}"),
                )
            }));
            None
        }
    };
    if !causes.is_empty() {
        return Err(invalid(resource, crd, causes));
    }
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    };
    let subresources = &version["subresources"];
    let scale = subresources
        .get("scale")
        .filter(|s| s.is_object())
        .map(|scale| ScalePaths {
            spec_replicas: scale["specReplicasPath"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            status_replicas: scale["statusReplicasPath"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            label_selector: scale["labelSelectorPath"].as_str().map(String::from),
        });
    let printer_columns = version["additionalPrinterColumns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|column| PrinterColumn {
            name: column["name"].as_str().unwrap_or_default().to_string(),
            type_: column["type"].as_str().unwrap_or("string").to_string(),
            json_path: column["jsonPath"].as_str().unwrap_or_default().to_string(),
            description: column["description"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            priority: column["priority"].as_i64().unwrap_or(0) as i32,
        })
        .collect();
    let defined = ResourceType {
        id: ResourceId::new(&group, &plural),
        version: version["name"].as_str().unwrap_or("v1").to_string(),
        kind,
        singular: names["singular"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| names["kind"].as_str().unwrap_or_default().to_lowercase()),
        short_names: strings(&names["shortNames"]),
        namespaced: spec["scope"].as_str() != Some("Cluster"),
        status_subresource: subresources.get("status").is_some_and(Value::is_object),
        scale,
        printer_columns,
        schema: compiled.map(Arc::new),
        custom: true,
    };
    let now = timestamp_now();
    let condition = |type_: &str, holds: bool, reason: &str, message: &str| json!({"type": type_, "status": if holds { "True" } else { "False" }, "reason": reason, "message": message, "lastTransitionTime": now});
    let established = if established {
        condition(
            "Established",
            true,
            "InitialNamesAccepted",
            "the initial names have been accepted",
        )
    } else {
        condition(
            "Established",
            false,
            "Installing",
            "the initial names have been accepted",
        )
    };
    crd["status"] = json!({
        "acceptedNames": names,
        "conditions": [
            condition("NamesAccepted", true, "NoConflicts", "no conflicts found"),
            established,
        ],
        "storedVersions": [version["name"]],
    });
    Ok(defined)
}

/// Effects of a stored write: an established CRD (re)defines its resource type; one not yet
/// established is established [`State::crd_establish_delay`] later (see [`establish_due`]).
pub fn after_write(state: &mut State, resource: &ResourceType, stored: &Value) {
    if is(
        resource,
        "apiextensions.k8s.io",
        "customresourcedefinitions",
    ) && stored["metadata"].get("deletionTimestamp").is_none()
    {
        let established = is_established(stored);
        let mut crd = stored.clone();
        if let Ok(defined) = admit_crd(resource, &mut crd, established) {
            let name = stored["metadata"]["name"].as_str().unwrap_or_default();
            if established {
                state.establishing.remove(name);
                state.registry.insert(defined);
            } else {
                let due = std::time::Instant::now() + state.crd_establish_delay;
                state.establishing.entry(name.to_string()).or_insert(due);
            }
        }
    }
}

/// What kube-apiserver's establishing controller does: sets `Established` on the CRDs whose
/// time has come, which makes their resources served. Returns when the next one is due.
pub fn establish_due(state: &mut State, now: std::time::Instant) -> Option<std::time::Instant> {
    let due: Vec<String> = state
        .establishing
        .iter()
        .filter(|(_, at)| **at <= now)
        .map(|(name, _)| name.clone())
        .collect();
    let crds = ResourceId::new("apiextensions.k8s.io", "customresourcedefinitions");
    for name in due {
        state.establishing.remove(&name);
        let Some(resource) = state.registry.get(&crds).cloned() else {
            continue;
        };
        let Ok(crd) = state.fetch(&resource, "", &name) else {
            continue;
        };
        let mut established = (*crd).clone();
        let conditions = established["status"]["conditions"]
            .as_array_mut()
            .into_iter()
            .flatten();
        for condition in conditions.filter(|c| c["type"] == "Established") {
            condition["status"] = json!("True");
            condition["reason"] = json!("InitialNamesAccepted");
        }
        let _ = state.replace(
            &resource,
            "",
            &name,
            established,
            Some(Subresource::Status),
            &WriteOptions::internal("apiextensions-apiserver"),
        );
    }
    state.establishing.values().min().copied()
}
