//! The PodGroup CRDs of the gang schedulers eto supports, as the tests install them in the
//! simulated cluster: structural schemas with the spec fields of the upstream APIs, so that a
//! field eto writes that the scheduler does not know is pruned, as kube-apiserver would.

use eto_engine::pod_group::GangScheduler;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

/// The spec properties of `scheduler`'s PodGroup API.
fn spec_properties(scheduler: &GangScheduler) -> serde_json::Value {
    let quantities = json!({
        "type": "object",
        "additionalProperties": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
    });
    match scheduler {
        GangScheduler::Volcano => json!({
            "minMember": {"type": "integer", "format": "int32"},
            "minResources": quantities,
            "minTaskMember": {"type": "object", "additionalProperties": {"type": "integer", "format": "int32"}},
            "queue": {"type": "string"},
            "priorityClassName": {"type": "string"},
        }),
        GangScheduler::Coscheduling { .. } => json!({
            "minMember": {"type": "integer", "format": "int32"},
            "minResources": quantities,
            "scheduleTimeoutSeconds": {"type": "integer", "format": "int32"},
        }),
    }
}

/// The PodGroup CRD of `scheduler`.
pub fn pod_group_crd(scheduler: &GangScheduler) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": scheduler.crd_name()},
        "spec": {
            "group": scheduler.group(),
            "names": {"kind": "PodGroup", "listKind": "PodGroupList", "plural": "podgroups", "singular": "podgroup", "shortNames": ["pg"]},
            "scope": "Namespaced",
            "versions": [{
                "name": scheduler.version(),
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {"type": "object", "properties": spec_properties(scheduler)},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            }],
        },
    }))
    .expect("a valid CRD")
}

/// Installs `scheduler`'s PodGroup CRD and waits until it is served.
pub async fn install(client: &Client, scheduler: &GangScheduler) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let created = crds
        .create(&PostParams::default(), &pod_group_crd(scheduler))
        .await
        .expect("the PodGroup CRD installs");
    let name = created.metadata.name.unwrap_or_default();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        kube::runtime::wait::await_condition(
            crds,
            &name,
            kube::runtime::wait::conditions::is_crd_established(),
        ),
    )
    .await
    .expect("the PodGroup CRD is established within 10 s")
    .expect("the PodGroup CRD can be watched");
}
