//! Helpers for the crate's unit tests.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

use crate::descriptions;

/// The CRD of `K` exactly as eto publishes it.
pub(crate) fn crd<K: CustomResourceExt>() -> CustomResourceDefinition {
    descriptions::reflow(K::crd())
}

/// The OpenAPI schema of the single version of `crd`.
pub(crate) fn schema(crd: &CustomResourceDefinition) -> Value {
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref();
    serde_json::to_value(schema.unwrap()).unwrap()
}
