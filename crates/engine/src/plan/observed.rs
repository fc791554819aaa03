//! What a plan reads: the job, its children as the caches hold them, and what the
//! controller learned during the reconcile (a name taken, a pod refused).

use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

use crate::already_applied::is_applied;
pub use crate::child::Child;
use crate::gang::Gang;
use crate::goodput::ReportedProgress;
use crate::group_report::GroupReport;
use crate::job::JobRef;
use crate::node_warnings::NodeWarning;
use crate::pod_group::PodGroup;
use crate::scaling::Scaler;

/// Whether the job's SSH Secret exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretPresence {
    /// It exists.
    Present,
    /// It does not.
    Missing,
}

/// The name of one of a job's children, held by an object the job does not control: one
/// eto did not create (made by hand, by another tool, left behind by a deleted job of the
/// same name, or orphaned). eto never adopts or overwrites such an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakenName {
    /// The kind of the object, for example `ConfigMap`.
    pub kind: &'static str,
    /// Its name, in the job's namespace.
    pub name: String,
    /// Who controls it, as people read it: `Deployment/web`, or `nobody`.
    pub holder: String,
}

/// The reason of the condition and the event of a job one of whose children's names is taken
/// (see [`TakenName`]).
pub const NAME_TAKEN: &str = "NameTaken";

/// How often a job blocked by a taken name looks again: the object that holds the name is not
/// eto's, so no watch tells eto when it goes.
pub const NAME_TAKEN_RECHECK: Duration = Duration::from_secs(15);

/// A pod of the job that the API server refused to create for a reason that retrying at once
/// does not change: the pod is invalid (for example a template field the CRD accepts and pod
/// validation does not), or an admission check forbids it (a ResourceQuota, Pod Security).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedPod {
    /// The pod's name.
    pub name: String,
    /// The API server's message.
    pub message: String,
}

/// The reason of the condition and the event of a job whose pod the API server rejected (see
/// [`RejectedPod`]).
pub const POD_REJECTED: &str = "PodRejected";

/// How often a job whose pod was rejected tries again: a quota may grow, a webhook change.
pub const POD_REJECTED_RECHECK: Duration = Duration::from_secs(30);

/// A job and its children, as observed.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The job.
    pub job: JobRef<'a>,
    /// The pods the job controls, and those its launcher Job controls.
    pub pods: Vec<&'a Pod>,
    /// The last state of pods the job controlled that the watch saw deleted lately (the pod
    /// cache keeps them a while): a pod the pod garbage collector marked and deleted at once
    /// may be seen only as it went, and its mark tells its loss (see
    /// [`crate::loss::Loss::of_departed`]).
    pub departed: Vec<&'a Pod>,
    /// The headless Service of the workers, named by the kind ([`crate::job::Kind::service_name`]).
    pub worker_service: Option<&'a Service>,
    /// The headless Services a kind has one per pod (see
    /// [`crate::job::ServedJob::pod_service_names`]).
    pub pod_services: Vec<&'a Service>,
    /// `<job>-config`.
    pub config_map: Option<&'a ConfigMap>,
    /// `<job>-launcher`.
    pub service_account: Option<&'a ServiceAccount>,
    /// `<job>-launcher`.
    pub role: Option<&'a Role>,
    /// `<job>-launcher`.
    pub role_binding: Option<&'a RoleBinding>,
    /// The job's SSH Secret, generated or provided.
    pub ssh_secret: SecretPresence,
    /// The ScaleIn and ScaleOut requests of the job's namespace that name it.
    pub scalers: &'a [Scaler],
    /// The launcher's batch Job, for a kind whose launcher is one
    /// (see [`crate::job::Coordinator::runs_in_a_batch_job`]).
    pub launcher_job: Option<&'a BatchJob>,
    /// Names of the job's children found held by objects it does not control.
    pub taken: &'a [TakenName],
    /// A pod the API server refused to create during this reconcile: the job is planned
    /// again, creating no pod.
    pub rejected_pod: Option<&'a RejectedPod>,
    /// The operator's gang scheduling (see [`crate::gang`]).
    pub gang: Gang<'a>,
    /// The job's PodGroup, read when the operator uses a gang scheduler.
    pub pod_group: Option<&'a PodGroup>,
    /// The nodes of the cluster that announced they go away soon (see
    /// [`crate::node_warnings`]): the job's workers on them count as disrupted.
    pub node_warnings: &'a [NodeWarning],
    /// What the run's coordinator reports, read while it runs, for a kind whose runs have one
    /// (see [`crate::group_report`]).
    pub group_report: Option<&'a GroupReport>,
    /// The training's progress as an earlier reconcile of the job read it (the controller
    /// keeps the latest read in memory, with the time it was read where the report gave
    /// none): the steps up to it trained, even if no pod is left to tell them now (see
    /// [`crate::goodput::Sighting::earlier`]).
    pub earlier_progress: Option<&'a ReportedProgress>,
    /// The job's HorizontalPodAutoscaler, for a kind whose jobs may have one (see
    /// [`crate::job::Vocabulary::autoscaler`]).
    pub autoscaler: Option<&'a HorizontalPodAutoscaler>,
}

impl<'a> Observed<'a> {
    /// `job` before any of its children exists: the view of a job just created.
    pub fn without_children(job: JobRef<'a>) -> Self {
        Self {
            job,
            pods: Vec::new(),
            departed: Vec::new(),
            worker_service: None,
            pod_services: Vec::new(),
            config_map: None,
            service_account: None,
            role: None,
            role_binding: None,
            ssh_secret: SecretPresence::Missing,
            scalers: &[],
            launcher_job: None,
            taken: &[],
            rejected_pod: None,
            gang: Gang::Off,
            pod_group: None,
            node_warnings: &[],
            group_report: None,
            earlier_progress: None,
            autoscaler: None,
        }
    }

    /// Whether `child` differs from the object of its kind and name that the job has, or the
    /// job has none: a Service, a ServiceAccount, a Role, a RoleBinding or a ConfigMap.
    /// Children of other kinds are found elsewhere, and always need applying here.
    pub fn needs_apply(&self, child: &Child) -> bool {
        match child {
            Child::Service(service) => needs_apply(service.as_ref(), self.service(child.name())),
            Child::ServiceAccount(account) => needs_apply(account.as_ref(), self.service_account),
            Child::Role(role) => needs_apply(role.as_ref(), self.role),
            Child::RoleBinding(binding) => needs_apply(binding.as_ref(), self.role_binding),
            Child::ConfigMap(config_map) => needs_apply(config_map.as_ref(), self.config_map),
            Child::Pod(_)
            | Child::PodMetadata(_)
            | Child::LauncherJob(_)
            | Child::PodGroup(_)
            | Child::Autoscaler(_) => true,
        }
    }

    /// The Service named `name` that the job has.
    fn service(&self, name: &str) -> Option<&'a Service> {
        self.worker_service
            .into_iter()
            .chain(self.pod_services.iter().copied())
            .find(|service| service.metadata.name.as_deref() == Some(name))
    }

    /// Whether the name `name` of a child of `kind` is held by an object the job does not
    /// control ([`Observed::taken`]).
    pub fn is_taken(&self, kind: &str, name: &str) -> bool {
        self.taken
            .iter()
            .any(|held| held.kind == kind && held.name == name)
    }
}

/// Whether `desired` differs from what is `observed` (or nothing is).
pub(super) fn needs_apply<T: serde::Serialize, U: serde::Serialize>(
    desired: &T,
    observed: Option<&U>,
) -> bool {
    !observed.is_some_and(|observed| is_applied(desired, observed))
}
