//! Helpers for the crate's unit tests.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Resource;
use serde_json::Value;

use crate::crds;

/// The CRD of `K` exactly as eto publishes it.
pub(crate) fn crd<K: Resource<DynamicType = ()>>() -> CustomResourceDefinition {
    crds()
        .into_iter()
        .find(|crd| crd.spec.names.kind == K::kind(&()))
        .unwrap()
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
