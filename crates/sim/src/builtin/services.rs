//! kube-apiserver's Services: cluster IPs allocated, and what cannot change.

use serde_json::{Map, Value, json};

use super::invalid;
use crate::errors::{ApiError, Cause};
use crate::resources::ResourceType;
use crate::store::State;

pub(super) fn admit_service(
    state: &State,
    resource: &ResourceType,
    old: Option<&Value>,
    service: &mut Value,
) -> Result<(), ApiError> {
    let old_ip = old
        .and_then(|old| old["spec"]["clusterIP"].as_str())
        .map(String::from);
    match (&old_ip, service["spec"]["clusterIP"].as_str()) {
        (Some(old_ip), Some(new_ip)) if old_ip != new_ip => {
            return Err(invalid(
                resource,
                service,
                vec![Cause::invalid(
                    "spec.clusterIP",
                    format!("Invalid value: {new_ip:?}: field is immutable"),
                )],
            ));
        }
        (Some(old_ip), None) => service["spec"]["clusterIP"] = json!(old_ip),
        (None, None | Some("")) => {
            let n = state.resource_version() + 1;
            service["spec"]["clusterIP"] =
                json!(format!("10.96.{}.{}", (n / 250) % 250, n % 250 + 1));
        }
        _ => {}
    }
    let ip = service["spec"]["clusterIP"].clone();
    service["spec"]["clusterIPs"] = json!([ip]);
    if service["spec"].get("type").is_none() {
        service["spec"]["type"] = json!("ClusterIP");
    }
    if service["spec"].get("sessionAffinity").is_none() {
        service["spec"]["sessionAffinity"] = json!("None");
    }
    // The defaults of a single-stack IPv4 cluster.
    if service["spec"]["type"] != "ExternalName" {
        let spec = &mut service["spec"];
        if spec.get("ipFamilies").is_none() {
            spec["ipFamilies"] = json!(["IPv4"]);
        }
        if spec.get("ipFamilyPolicy").is_none() {
            let headless_without_selector = spec["clusterIP"] == "None"
                && spec["selector"].as_object().is_none_or(Map::is_empty);
            spec["ipFamilyPolicy"] = json!(if headless_without_selector {
                "RequireDualStack"
            } else {
                "SingleStack"
            });
        }
        if spec.get("internalTrafficPolicy").is_none() {
            spec["internalTrafficPolicy"] = json!("Cluster");
        }
    }
    if service["status"].get("loadBalancer").is_none() {
        service["status"]["loadBalancer"] = json!({});
    }
    for port in service["spec"]["ports"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        if port.get("protocol").is_none() {
            port["protocol"] = json!("TCP");
        }
        if port.get("targetPort").is_none() {
            port["targetPort"] = port["port"].clone();
        }
    }
    Ok(())
}
