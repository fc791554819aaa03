//! A PyTorchJob's pods and Services: training-operator v1's (see [`crate::kind::pytorch_job`]),
//! with eto's labels, the job's notice in `/etc/edl/notice` of every container, and eto's
//! placement (the Master away from spot capacity and warned nodes, Workers away from nodes in
//! cooldown, and one per node where the job keeps spares).

use eto_api::PyTorchJob;
use eto_api::job_status::NodeCooldown;
use eto_api::pytorch_job::PyTorchReplicaType;
use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, Pod, PodSpec, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::builders::join_gang;
use crate::builders::{notice_mount, notice_volume, place_launcher, worker_metadata};
use crate::child::Child;
use crate::job::launcher::{LauncherInputs, LauncherObjects, RunningLauncher};
use crate::job::{JobContext, Role, merged};
use crate::kind::pytorch_job::rendezvous::{self, HostedRendezvous};
use crate::kind::pytorch_job::{Defaulted, JOB_ROLE_LABEL, env, pod, replica_groups, service};
use crate::{cooldown, joining, notice, spares};

/// The launcher of PyTorchJob `job`: the rendezvous store eto hosts, the Lighthouse of its
/// replica groups, or the Master, which trains and shows the job's notice as the Workers do.
pub fn launcher_objects(job: JobContext<'_>, inputs: LauncherInputs<'_>) -> LauncherObjects {
    let (pod, running) = match job.job_ref.coordinator() {
        super::RENDEZVOUS_STORE => (store_pod(job, inputs.avoided), RunningLauncher::Left),
        super::LIGHTHOUSE => (lighthouse_pod(job, inputs.avoided), RunningLauncher::Left),
        _ => (master_pod(job, inputs.avoided), RunningLauncher::Relabelled),
    };
    LauncherObjects {
        config_map: None,
        launcher: pod.map(|pod| Child::Pod(Box::new(pod))),
        running,
    }
}

/// The Master of `job`, if it is a PyTorchJob with one (see [`pod::pod`]), placed away from
/// the nodes `avoided`.
pub fn master_pod(job: JobContext<'_>, avoided: &[NodeCooldown]) -> Option<Pod> {
    let pytorch = pytorch_job(&job)?;
    let defaulted = Defaulted::of(pytorch);
    let built = pod::pod(pytorch, &defaulted, PyTorchReplicaType::Master, 0, None)?;
    let mut spec = with_notice(built.spec.unwrap_or_default(), &[]);
    place_launcher(&job, &mut spec, avoided);
    let mut metadata = master_metadata(job);
    join_gang(&job, &mut metadata, &mut spec, Role::Launcher);
    Some(Pod {
        metadata,
        spec: Some(spec),
        status: None,
    })
}

/// The labels and annotations of the Master of `job`: its template's, with eto's labels,
/// v1's, and the job's notice over them.
fn master_metadata(job: JobContext<'_>) -> ObjectMeta {
    let mut labels = job.pod_labels(Role::Launcher);
    labels.insert(job.kind().vocabulary().index_label.into(), "0".into());
    labels.insert(JOB_ROLE_LABEL.into(), "master".into());
    job.pod_metadata(
        job.kind().launcher_name(job.name()),
        job.job_ref.coordinator_template(),
        labels,
        notice::annotations(job.notice),
    )
}

/// Worker `index` of `job`, if it is a PyTorchJob with Workers (see [`pod::pod`]), with the
/// metadata [`worker_metadata`] gives every kind's workers, preferring nodes not
/// `in_cooldown`.
pub fn worker_pod(job: JobContext<'_>, index: u32, in_cooldown: &[NodeCooldown]) -> Option<Pod> {
    let pytorch = pytorch_job(&job)?;
    let defaulted = Defaulted::of(pytorch);
    let hosted = HostedRendezvous::of(pytorch);
    let run = hosted.as_ref().map(|hosted| hosted.of_run(job.run));
    let built = pod::pod(
        pytorch,
        &defaulted,
        PyTorchReplicaType::Worker,
        index,
        run.as_ref(),
    )?;
    let groups = replica_groups::ReplicaGroups::of(pytorch).is_some();
    // Workers joining a running group start together, behind a gate whose file sits beside
    // the notice (see crate::joining); a replica group's id shows there too.
    let beside: Vec<_> = hosted
        .as_ref()
        .map(|_| joining::start_file())
        .into_iter()
        .chain(groups.then(replica_groups::group_file))
        .collect();
    let mut spec = with_notice(built.spec.unwrap_or_default(), &beside);
    if let Some(hosted) = &hosted {
        // Named in the Service that publishes every pod of the job, so that the address
        // torchrun's rank 0 advertises (its fully qualified host name) resolves.
        spec.hostname = Some(crate::names::worker(job.name(), index));
        spec.subdomain = Some(hosted.service_name());
        if let Some(container) = super::training_container(&mut spec) {
            joining::gate_command(container);
        }
    }
    if groups {
        let pod = crate::names::worker(job.name(), index);
        replica_groups::name_in_service(&mut spec, job.name(), job.namespace(), &pod);
        replica_groups::never_restarted_in_place(&mut spec);
    }
    // Where eto runs the group, the training has time after a SIGTERM, which torchrun forwards
    // to it: to save (a group that re-forms), or to leave between two steps (a replica group),
    // so that no other group has a collective in flight with it when it goes.
    if (hosted.is_some() || groups) && job.spec.elastic.checkpoint_on_termination {
        time_to_save_on_sigterm(&mut spec, job.spec.elastic.checkpoint_grace);
    }
    cooldown::avoiding(&mut spec, in_cooldown);
    spares::spread(&mut spec, &job.spec.workers, &job.pod_labels(Role::Worker));
    let mut metadata = worker_metadata(job, index);
    if defaulted.master.is_none() && index == 0 && hosted.is_none() {
        // Without a Master, worker 0 is rank 0, as v1 labels it.
        metadata
            .labels
            .get_or_insert_default()
            .insert(JOB_ROLE_LABEL.into(), "master".into());
    }
    join_gang(&job, &mut metadata, &mut spec, Role::Worker);
    Some(Pod {
        metadata,
        spec: Some(spec),
        status: None,
    })
}

/// What a run of PyTorchJob `job` needs beside its pods: the Service that names every pod
/// when eto hosts its rendezvous or runs its replica groups, else a Service per pod, named like it, for the Master and
/// the run's Workers as the spec has them.
pub fn supporting_objects(job: JobContext<'_>) -> Vec<Child> {
    let services = if job.job_ref.coordinator().only_serves {
        vec![rendezvous::service(job)]
    } else {
        let workers: Vec<u32> = (0..job.spec.workers.desired).collect();
        pod_services(job, &workers)
    };
    services
        .into_iter()
        .map(|service| Child::Service(Box::new(service)))
        .collect()
}

/// The headless Services of the Master and of the Workers `workers` of `job`, if it is a
/// PyTorchJob (see [`service::service`]), with eto's labels.
pub fn pod_services(job: JobContext<'_>, workers: &[u32]) -> Vec<Service> {
    let Some(pytorch) = pytorch_job(&job) else {
        return Vec::new();
    };
    let defaulted = Defaulted::of(pytorch);
    let master = std::iter::once((PyTorchReplicaType::Master, 0));
    let workers = workers
        .iter()
        .map(|index| (PyTorchReplicaType::Worker, *index));
    master
        .chain(workers)
        .filter_map(|(type_, index)| service::service(pytorch, &defaulted, type_, index))
        .map(|mut service| {
            let labels = service.metadata.labels.take();
            service.metadata.labels = Some(merged(labels.as_ref(), job.labels()));
            service
        })
        .collect()
}

/// The rendezvous store of `job`'s current run, if eto hosts its rendezvous (see
/// [`rendezvous::store_pod`]), placed away from the nodes `avoided`.
pub fn store_pod(job: JobContext<'_>, avoided: &[NodeCooldown]) -> Option<Pod> {
    let hosted = HostedRendezvous::of(pytorch_job(&job)?)?;
    rendezvous::store_pod(job, &hosted, avoided)
}

/// The Lighthouse of `job`'s current run, if its Workers are replica groups (see
/// [`replica_groups::lighthouse_pod`]), placed away from the nodes `avoided`.
pub fn lighthouse_pod(job: JobContext<'_>, avoided: &[NodeCooldown]) -> Option<Pod> {
    let groups = replica_groups::ReplicaGroups::of(pytorch_job(&job)?)?;
    replica_groups::lighthouse_pod(job, &groups, avoided)
}

fn pytorch_job<'a>(job: &JobContext<'a>) -> Option<&'a PyTorchJob> {
    job.job_ref.downcast()
}

/// The time torchrun has to stop its training processes after a SIGTERM (an eviction, a
/// drain, a node shutdown), which it forwards to them: a grace period of `checkpoint_grace`
/// (`checkpointGraceSeconds`) where the template sets none, and torchrun's own wait before it
/// kills them, `TORCH_ELASTIC_SHUTDOWN_TIMEOUT` (read by torchrun 2.12 and later; 30 s before),
/// [`SHUTDOWN_MARGIN_SECONDS`] less than the grace period, where the container sets none.
/// Training code that saves on SIGTERM then has that time.
fn time_to_save_on_sigterm(spec: &mut PodSpec, checkpoint_grace: std::time::Duration) {
    let default = i64::try_from(checkpoint_grace.as_secs()).unwrap_or(i64::MAX);
    let grace = *spec.termination_grace_period_seconds.get_or_insert(default);
    let shutdown = (grace - SHUTDOWN_MARGIN_SECONDS).max(1);
    if let Some(container) = super::training_container(spec) {
        env::add_to_container(container, &[env::var(SHUTDOWN_TIMEOUT_ENV, shutdown)]);
    }
}

/// torchrun's wait, in seconds, between the SIGTERM it forwards and the SIGKILL.
pub const SHUTDOWN_TIMEOUT_ENV: &str = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT";

/// How much sooner than the grace period's end torchrun stops waiting.
pub const SHUTDOWN_MARGIN_SECONDS: i64 = 10;

/// `spec` with the notice volume, holding the files `beside` the notice too, mounted in every
/// container.
fn with_notice(mut spec: PodSpec, beside: &[DownwardAPIVolumeFile]) -> PodSpec {
    spec.volumes
        .get_or_insert_default()
        .push(notice_volume(beside));
    for container in &mut spec.containers {
        container
            .volume_mounts
            .get_or_insert_default()
            .push(notice_mount());
    }
    spec
}
