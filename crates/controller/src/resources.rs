//! What identifies the resources eto reads and writes, shared by the read side (caches,
//! look-ups) and the write side ([`crate::apply`]): the bound of the typed objects it reads
//! and writes, the dynamic resources of ScaleIn and ScaleOut requests, and the names the
//! caches are known by ([`crate::first_lists::Listed`]). It depends on no other module of the
//! crate.

use eto_api::{ScaleIn, ScaleOut};
use eto_engine::scaling::ScalerKind;
use kube::Resource;
use kube::api::ApiResource;
use serde::de::DeserializeOwned;

/// The name [`crate::first_lists::Listed`] knows the TrainingJob cache by.
pub const JOBS: &str = "TrainingJob";

/// The name [`crate::first_lists::Listed`] knows the PodGroup cache by.
pub const POD_GROUPS: &str = "PodGroup";

/// A namespaced built-in kind eto reads and writes as a typed object.
pub trait NamespacedObject:
    k8s_openapi::Resource
    + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + DeserializeOwned
    + Clone
    + std::fmt::Debug
{
}

impl<K> NamespacedObject for K where
    K: k8s_openapi::Resource
        + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug
{
}

/// The resource of requests of `kind`.
pub fn request_resource(kind: ScalerKind) -> ApiResource {
    match kind {
        ScalerKind::ScaleIn => ApiResource::erase::<ScaleIn>(&()),
        ScalerKind::ScaleOut => ApiResource::erase::<ScaleOut>(&()),
    }
}
