//! Gang scheduling: the PodGroup of a job for Volcano or for the scheduler-plugins
//! coscheduling plugin, and what its pods carry so that the scheduler finds it.
//!
//! # The gang is the minimum
//! An elastic job needs its minimum of workers, and its launcher, together; everything above
//! the minimum is opportunistic. So a job's PodGroup asks for the minimum only:
//! - `minMember` is the minimum of workers (`minReplicas`; for an MPIJob,
//!   `schedulingPolicy.minAvailable` when set, which counts the launcher) plus the launcher,
//!   **once the launcher exists**. A launcher created only when the minimum of workers is ready
//!   (every TrainingJob; an MPIJob with `launcherCreationPolicy: WaitForWorkersReady`) does not
//!   exist while the workers wait for the gang, and a gang that counted it would never form:
//!   the deadlock mpi-operator users meet with `WaitForWorkersReady`. Until the launcher
//!   exists, the gang is the workers of the minimum.
//! - `minResources` is what the whole minimum requests, the launcher included from the start,
//!   so that the scheduler admits the gang only where the launcher fits too, and the launcher
//!   is not left unschedulable after the gang. An MPIJob's `schedulingPolicy.minResources`
//!   replaces the computed sum.
//! - Workers above the minimum belong to the group, so they run under the same scheduler, but
//!   do not make it wait.
//!
//! # Queue, priority, timeout
//! An MPIJob's `schedulingPolicy` gives them (`queue`, `priorityClass`,
//! `scheduleTimeoutSeconds`), as with mpi-operator. Otherwise, and for a TrainingJob, the
//! queue is the job's annotation `scheduling.volcano.sh/queue-name` and the priority class is
//! that of the launcher's pod template, else the workers' (what `arena submit etjob -p`
//! renders). Volcano reads the queue and the priority class; the coscheduling plugin reads the
//! timeout. Each PodGroup carries only the fields of its own API.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::effective_spec::LauncherStart;
use crate::job::JobContext;
use crate::job::JobRef;
use crate::pod_group::{GangScheduler, PodGroup, PodGroupSpec};
use crate::quantity::{self, Amounts};

/// The annotation that puts a pod in a Volcano PodGroup.
pub const VOLCANO_GROUP_ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// The job annotation that names a Volcano queue (also read by mpi-operator).
pub const VOLCANO_QUEUE_ANNOTATION: &str = "scheduling.volcano.sh/queue-name";
/// The annotation that lets Volcano preempt a pod: eto puts it on the workers of a job, never
/// on its launcher. Volcano never takes a gang below its `minMember`, so it preempts workers
/// above a job's minimum only, to let another job's gang form.
pub const VOLCANO_PREEMPTABLE_ANNOTATION: &str = "volcano.sh/preemptable";
/// The label that puts a pod in a scheduler-plugins PodGroup.
pub const COSCHEDULING_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// The scheduler name of the scheduler-plugins coscheduling plugin when none is configured
/// (the name its Helm chart installs the second scheduler under).
pub const COSCHEDULING_DEFAULT_SCHEDULER: &str = "scheduler-plugins-scheduler";

/// The operator's gang scheduling, as a job is planned with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Gang<'a> {
    /// None: pods go to the scheduler their template names.
    #[default]
    Off,
    /// Every job gets a PodGroup of this scheduler, and its pods join it.
    Ready(&'a GangScheduler),
    /// The operator is set to use this scheduler, but the cluster does not serve its PodGroup
    /// API: no pod is created (it would never be scheduled), and the job says why.
    Missing(&'a GangScheduler),
}

impl<'a> Gang<'a> {
    /// The scheduler pods join, when its API is served.
    pub fn ready(self) -> Option<&'a GangScheduler> {
        match self {
            Self::Ready(scheduler) => Some(scheduler),
            Self::Off | Self::Missing(_) => None,
        }
    }
}

/// The reason of the condition and the event of a job whose gang scheduler's PodGroup API is
/// not served.
pub const GANG_SCHEDULER_MISSING: &str = "GangSchedulerMissing";

/// How often a job whose gang scheduler's API is missing looks again.
pub const GANG_SCHEDULER_RECHECK: std::time::Duration = std::time::Duration::from_secs(60);

/// The name of a job's PodGroup: the job's, as with mpi-operator.
pub fn pod_group_name(job: JobRef<'_>) -> &str {
    job.name()
}

/// Whether the launcher counts in the gang: the job has one (a PyTorchJob may have no
/// Master), and it exists or is created with the workers.
fn launcher_counts(job: JobContext<'_>, launcher_exists: bool) -> bool {
    job.job_ref.coordinator_template().is_some()
        && (launcher_exists || job.spec.launcher_start == LauncherStart::AtStartup)
}

/// The PodGroup of `job` for `scheduler`; `launcher_exists` says whether the launcher of the
/// current run exists (see the module documentation).
pub fn pod_group(
    job: JobContext<'_>,
    scheduler: &GangScheduler,
    launcher_exists: bool,
) -> PodGroup {
    let policy = job.spec.scheduling_policy.as_ref();
    let min_workers = job.spec.workers.min;
    // The gang with its launcher: minAvailable counts it.
    let has_launcher = job.job_ref.coordinator_template().is_some();
    let gang = policy
        .and_then(|policy| policy.min_available)
        .map_or(i64::from(min_workers) + i64::from(has_launcher), i64::from);
    let min_member = if launcher_counts(job, launcher_exists) || !has_launcher {
        gang
    } else {
        gang - 1
    };
    let min_resources = policy
        .and_then(|policy| policy.min_resources.clone())
        .unwrap_or_else(|| quantity::quantities(&gang_requests(job.job_ref, min_workers)));
    let launcher = job.job_ref.coordinator_template();
    let workers = job.job_ref.worker_template();
    let template_priority =
        |template: Option<&PodTemplateSpec>| template?.spec.as_ref()?.priority_class_name.clone();
    let priority = policy
        .and_then(|policy| policy.priority_class.clone())
        .or_else(|| template_priority(launcher))
        .or_else(|| template_priority(workers));
    let queue = policy.and_then(|policy| policy.queue.clone()).or_else(|| {
        job.job_ref
            .metadata()
            .annotations
            .as_ref()?
            .get(VOLCANO_QUEUE_ANNOTATION)
            .cloned()
    });
    let spec = match scheduler {
        GangScheduler::Volcano => PodGroupSpec {
            min_member: clamp(min_member),
            min_resources: non_empty(min_resources),
            queue,
            priority_class_name: priority,
            schedule_timeout_seconds: None,
        },
        GangScheduler::Coscheduling { .. } => PodGroupSpec {
            min_member: clamp(min_member),
            min_resources: non_empty(min_resources),
            queue: None,
            priority_class_name: None,
            schedule_timeout_seconds: policy.and_then(|policy| policy.schedule_timeout_seconds),
        },
    };
    PodGroup {
        api_version: format!("{}/{}", scheduler.group(), scheduler.version()),
        kind: "PodGroup".into(),
        metadata: job.metadata(pod_group_name(job.job_ref).to_string()),
        spec,
    }
}

fn clamp(count: i64) -> i32 {
    i32::try_from(count.max(1)).unwrap_or(i32::MAX)
}

fn non_empty(resources: BTreeMap<String, Quantity>) -> Option<BTreeMap<String, Quantity>> {
    (!resources.is_empty()).then_some(resources)
}

/// What the launcher and `min_workers` workers of `job` request together.
fn gang_requests(job: JobRef<'_>, min_workers: u32) -> Amounts {
    let requests = |template: Option<&PodTemplateSpec>| {
        template
            .and_then(|template| template.spec.as_ref())
            .map(quantity::pod_requests)
            .unwrap_or_default()
    };
    let mut total = requests(job.coordinator_template());
    quantity::add(&mut total, &requests(job.worker_template()), min_workers);
    total
}

/// Puts the pod with `metadata` and `spec` in `job`'s PodGroup for `scheduler`: the group's
/// annotation (Volcano) or label (coscheduling), and the scheduler's name unless the template
/// names a scheduler itself. A worker (`preemptable`) may be preempted by Volcano above the
/// job's minimum (see [`VOLCANO_PREEMPTABLE_ANNOTATION`]).
pub fn join(
    metadata: &mut ObjectMeta,
    spec: &mut PodSpec,
    job: JobRef<'_>,
    scheduler: &GangScheduler,
    preemptable: bool,
) {
    let group = pod_group_name(job).to_string();
    match scheduler {
        GangScheduler::Volcano => {
            let annotations = metadata.annotations.get_or_insert_default();
            annotations.insert(VOLCANO_GROUP_ANNOTATION.into(), group);
            if preemptable {
                annotations.insert(VOLCANO_PREEMPTABLE_ANNOTATION.into(), "true".into());
            }
        }
        GangScheduler::Coscheduling { .. } => {
            metadata
                .labels
                .get_or_insert_default()
                .insert(COSCHEDULING_GROUP_LABEL.into(), group);
        }
    }
    if spec.scheduler_name.as_deref().is_none_or(str::is_empty) {
        spec.scheduler_name = Some(scheduler.scheduler_name().to_string());
    }
}

#[cfg(test)]
mod tests;
