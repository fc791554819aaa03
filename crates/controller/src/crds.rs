//! Installing eto's CRDs.

use std::time::Duration;

use eto_api::well_known::MANAGER;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};

/// How long [`install_crds`] waits for the API server to serve a CRD it accepted.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// Why eto's CRDs could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The API server refused to store a CRD.
    #[error("the API server refused CRD {name}: {source}")]
    Apply {
        /// The CRD.
        name: String,
        /// The refusal.
        #[source]
        source: kube::Error,
    },
    /// Waiting for a CRD to be established failed.
    #[error("could not watch CRD {name} until it is established: {source}")]
    Watch {
        /// The CRD.
        name: String,
        /// What failed.
        #[source]
        source: kube::runtime::wait::Error,
    },
    /// A CRD was stored but not established within [`ESTABLISH_TIMEOUT`].
    #[error("CRD {name} is stored but was not established within {}s", ESTABLISH_TIMEOUT.as_secs())]
    NotEstablished {
        /// The CRD.
        name: String,
    },
}

/// Installs or updates every CRD eto serves, with server-side apply under the field manager
/// `eto` (what `kubectl apply --server-side -f crds/` does under `kubectl`), and returns once
/// the API server serves them all (their `Established` condition holds). A CRD the API server
/// has just stored is not served at once: a client that used it right away would be told the
/// resource does not exist.
///
/// # Errors
/// The first CRD the API server refused, or one not established within
/// [`ESTABLISH_TIMEOUT`].
pub async fn install_crds(client: &Client) -> Result<(), CrdError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for crd in eto_api::crds() {
        let name = crd.name_any();
        crds.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(|source| CrdError::Apply {
            name: name.clone(),
            source,
        })?;
        names.push(name);
    }
    for name in names {
        let established = await_condition(crds.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(ESTABLISH_TIMEOUT, established).await {
            Ok(Ok(_)) => {}
            Ok(Err(source)) => return Err(CrdError::Watch { name, source }),
            Err(_) => return Err(CrdError::NotEstablished { name }),
        }
    }
    Ok(())
}
