//! Helpers shared by eto's workspace-level tests.

use std::path::PathBuf;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// The root of the workspace, where `crds/` and `examples/` live.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits one level below the workspace root")
        .to_path_buf()
}

/// A TCP port of this machine that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// The OpenAPI schema of the single version of `crd`, as JSON.
pub fn schema_of(crd: &CustomResourceDefinition) -> serde_json::Value {
    let version = crd
        .spec
        .versions
        .first()
        .expect("every eto CRD has a version");
    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref());
    serde_json::to_value(schema.expect("every eto CRD has a schema")).expect("schemas serialize")
}

/// The CRD of `kind` among eto's CRDs.
pub fn crd_of_kind(kind: &str) -> CustomResourceDefinition {
    eto_api::crds()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("eto serves no kind {kind}"))
}

pub mod autoscaled;
pub mod env;
pub mod eviction;
pub mod floor;
pub mod history;
pub mod job_api;
pub mod metrics;
pub mod nodes;
pub mod pod_groups;
pub mod poll;
pub mod rust_source;
pub mod scratch;
pub mod step_log;
pub mod tools;
pub mod trainer_runtime;
