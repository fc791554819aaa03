//! The cluster and namespace a command talks to, chosen as kubectl chooses them.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::Error;

/// Where to connect: kubectl's `--kubeconfig` and `--context`.
#[derive(Clone, Debug, Default)]
pub struct Target {
    /// A kubeconfig file; otherwise `KUBECONFIG`, `~/.kube/config`, or the pod's service
    /// account inside a cluster.
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig; otherwise its current context.
    pub context: Option<String>,
}

/// A client and the namespace of the chosen context (`default` when it names none).
pub async fn connect(target: &Target) -> Result<(Client, String), Error> {
    let options = KubeConfigOptions {
        context: target.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &target.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .map_err(|error| Error::Kubeconfig(format!("{}: {error}", path.display())))?;
            Config::from_custom_kubeconfig(kubeconfig, &options).await
        }
        None if target.context.is_some() => Config::from_kubeconfig(&options).await,
        None => Config::infer()
            .await
            .map_err(|error| Error::Kubeconfig(error.to_string()))
            .map(Ok)?,
    }
    .map_err(|error| Error::Kubeconfig(error.to_string()))?;
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|error| Error::Kubeconfig(error.to_string()))?;
    Ok((client, namespace))
}
