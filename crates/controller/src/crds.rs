//! Installing eto's CRDs.

use eto_api::well_known::MANAGER;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};

/// Installs or updates every CRD eto serves, with server-side apply under the field manager
/// `eto` (what `kubectl apply --server-side -f crds/` does under `kubectl`).
///
/// # Errors
/// The first CRD the API server refused.
pub async fn install_crds(client: &Client) -> Result<(), kube::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in eto_api::crds() {
        crds.patch(
            &crd.name_any(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await?;
    }
    Ok(())
}
