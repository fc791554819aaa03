//! Helpers shared by eto-sim's integration tests.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::runtime::wait::{await_condition, conditions};
use serde_json::Value;

/// Waits until CRD `name` is established, as a client of kube-apiserver must before it uses
/// the resource the CRD defines.
pub async fn await_established(client: &kube::Client, name: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(crds, name, conditions::is_crd_established()),
    )
    .await
    .unwrap_or_else(|_| panic!("CRD {name} is not established within 10 s"))
    .unwrap();
}

/// An object as stored, without what the cluster assigns on creation: identity, times,
/// managed fields, a Service's cluster IPs.
pub fn without_assigned(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            metadata.remove(field);
        }
    }
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    object
}
