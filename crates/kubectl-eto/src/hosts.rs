//! `kubectl eto hosts JOB`: what the launcher's discovery script prints, computed as eto
//! computes it.

use eto_api::well_known::HOSTFILE_ANNOTATION;
use eto_engine::plan::{Child, plan};
use kube::Client;
use serde::Serialize;

use crate::children;
use crate::error::Error;
use crate::jobs::Job;

/// The discovery list of a job, and whether its launcher shows it yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hosts {
    /// What the discovery script prints once eto has written its next decision: one
    /// `host:slots` line per ready worker (and the launcher, when it also trains).
    pub lines: Vec<String>,
    /// Whether the launcher's pod already holds exactly this list. `false` also when there
    /// is no launcher pod yet.
    pub launcher_has_it: bool,
    /// The launcher pod, if any.
    pub launcher: Option<String>,
}

impl Hosts {
    /// Asks the engine what it would write for `job` now, given its children in the cluster.
    ///
    /// # Errors
    /// [`Error::NoHostDiscovery`] for a job whose workers are not listed in host discovery
    /// (a PyTorchJob's), and the API server's errors.
    pub async fn fetch(client: &Client, job: &Job, now: jiff::Timestamp) -> Result<Self, Error> {
        let job = job.as_ref();
        if !job.coordinator().reads_host_discovery {
            return Err(Error::NoHostDiscovery {
                kind: job.kind().vocabulary().name,
                namespace: job.namespace().to_string(),
                name: job.name().to_string(),
            });
        }
        let children = children::fetch(client, job).await?;
        let decided = plan(&children::observed(&children, job), now);
        let launcher = children.coordinator_pod(job);
        let shown = launcher.and_then(|pod| annotation(&pod.metadata));
        let launcher_name = launcher.and_then(|pod| pod.metadata.name.clone());
        // The engine writes the list onto the launcher's pod when it changes: into a new
        // launcher, or as a change of an existing one's metadata. When the plan leaves the pod
        // alone, what it shows is current.
        let planned = decided.apply.iter().find_map(|child| match child {
            Child::Pod(pod) if is_new_launcher(pod, job) => annotation(&pod.metadata),
            Child::PodMetadata(change) if Some(&change.name) == launcher_name.as_ref() => {
                change.annotation(HOSTFILE_ANNOTATION).map(String::from)
            }
            _ => None,
        });
        let current = planned.clone().or(shown.clone()).unwrap_or_default();
        Ok(Self {
            lines: current.lines().map(String::from).collect(),
            launcher_has_it: launcher.is_some() && (planned.is_none() || planned == shown),
            launcher: launcher_name,
        })
    }

    /// The lines, as the script prints them.
    pub fn render(&self) -> String {
        self.lines.iter().map(|line| format!("{line}\n")).collect()
    }

    /// Whether the launcher shows the list yet, for the person reading (printed apart from the
    /// list, so the list itself can be piped).
    pub fn note(&self) -> String {
        match (&self.launcher, self.launcher_has_it) {
            (Some(pod), true) => format!("launcher {pod} shows this list"),
            (Some(pod), false) => format!(
                "launcher {pod} does not show this list yet: eto writes it at its next reconcile, and the kubelet then refreshes the file"
            ),
            (None, _) => "the job has no launcher pod yet".into(),
        }
    }
}

fn annotation(
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<String> {
    metadata
        .annotations
        .as_ref()?
        .get(HOSTFILE_ANNOTATION)
        .cloned()
}

/// Whether `pod` is a TrainingJob launcher the plan would create.
fn is_new_launcher(
    pod: &k8s_openapi::api::core::v1::Pod,
    job: eto_engine::job::JobRef<'_>,
) -> bool {
    pod.metadata.name.as_deref() == Some(eto_engine::names::launcher(job.name()).as_str())
}
