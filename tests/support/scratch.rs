//! A scratch namespace on a real cluster (the one KUBECONFIG names), with eto's CRDs
//! installed and the operator running in-process for that namespace only: what the tests that
//! need a cluster start from.

use std::sync::Arc;
use std::time::Duration;

use eto_api::TrainingJob;
use eto_api::job_status::JobPhase;
use eto_controller::{Metrics, Settings};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

use crate::poll::until;

/// The phase of `job`, once eto wrote one.
pub fn phase_of(job: &TrainingJob) -> Option<JobPhase> {
    job.status.as_ref()?.phase
}

/// A scratch namespace on the cluster KUBECONFIG names, with eto's CRDs installed and the
/// operator running in-process for that namespace only.
pub struct Scratch {
    /// A client of the cluster.
    pub client: Client,
    /// The scratch namespace.
    pub namespace: String,
    stop: CancellationToken,
    operator: tokio::task::JoinHandle<Result<(), eto_controller::RunError>>,
}

impl Scratch {
    /// A new scratch namespace named after `name` and this process, the CRDs installed, the
    /// operator started.
    pub async fn start(name: &str) -> Self {
        let client = Client::try_default()
            .await
            .expect("KUBECONFIG names a cluster");
        let namespace = format!("eto-test-{name}-{}", std::process::id());
        let scratch: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}}))
                .expect("a namespace");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &scratch)
            .await
            .expect("the API server accepts it");
        eto_controller::install_crds(&client)
            .await
            .expect("the CRDs install");
        let stop = CancellationToken::new();
        let operator = tokio::spawn(eto_controller::run(
            client.clone(),
            Settings {
                scope: eto_controller::Scope::of(vec![namespace.clone()]),
                pod_proxy: Some(kube::Config::infer().await.expect("a kubeconfig")),
                ..Settings::default()
            },
            Arc::new(Metrics::default()),
            Arc::new(jiff::Timestamp::now),
            stop.clone().cancelled_owned(),
        ));
        Self {
            client,
            namespace,
            stop,
            operator,
        }
    }

    /// The TrainingJobs of the namespace.
    pub fn jobs(&self) -> Api<TrainingJob> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The pods of the namespace.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Applies the job `yaml` as it is.
    pub async fn apply(&self, yaml: &str) {
        self.apply_job(serde_saphyr::from_str(yaml).expect("a TrainingJob"))
            .await;
    }

    /// Applies `job` (server-side, as the test).
    pub async fn apply_job(&self, job: TrainingJob) {
        let name = job.metadata.name.clone().expect("the job has a name");
        self.jobs()
            .patch(
                &name,
                &PatchParams::apply("eto-test").force(),
                &Patch::Apply(&job),
            )
            .await
            .expect("the API server accepts it");
    }

    /// Waits until the job `name` is `Running`.
    pub async fn wait_running(&self, name: &str, within: Duration) {
        let jobs = self.jobs();
        until("the job runs", within, async || {
            let job = jobs.get(name).await.ok()?;
            (phase_of(&job)? == eto_api::job_status::JobPhase::Running).then_some(())
        })
        .await;
    }

    /// Sets `spec.suspend` of the job `name`.
    pub async fn suspend(&self, name: &str) {
        self.jobs()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"suspend": true}})),
            )
            .await
            .expect("the API server accepts it");
    }

    /// Stops the operator and deletes the namespace.
    pub async fn end(self) {
        self.stop.cancel();
        let _ = self.operator.await;
        Api::<Namespace>::all(self.client.clone())
            .delete(&self.namespace, &DeleteParams::default())
            .await
            .expect("the API server accepts it");
    }
}
