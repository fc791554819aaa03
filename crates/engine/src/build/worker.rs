//! Worker pods.

use eto_api::training_job::NodeCooldown;
use eto_api::well_known::{MPI_ROLE_ENV, WORKER_ROLE};
use k8s_openapi::api::core::v1::{Pod, PodDNSConfig};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Job, Role, SSHD_COMMAND, notice_mount, notice_volume, set_env};
use crate::kind::Kind;
use crate::{cooldown, names, notice};

/// Worker `index` of `job`: the worker template with eto's labels (template labels and
/// annotations kept), `restartPolicy: Never` (eto, not the kubelet, replaces workers, under a new
/// name), the host name `<job>-worker-<index>` in the subdomain of the job's headless Service,
/// the SSH key pair, the job's notice in `/etc/edl/notice` of every container (see
/// [`crate::notice`]), an SSH daemon as the first container's command when the template gives
/// none, and a preference against the nodes `in_cooldown` (see [`crate::cooldown`]).
///
/// A TrainingJob's worker has the key pair in every container. An MPIJob's worker is built as
/// mpi-operator builds it: the key pair at `sshAuthMountPath` in the first container,
/// `K_MPI_JOB_ROLE=worker`, the job's Service domain in its DNS search path.
pub fn worker_pod(job: Job<'_>, index: u32, in_cooldown: &[NodeCooldown]) -> Pod {
    let mut metadata = worker_metadata(job, index);
    let name = names::worker(job.name(), index);
    let kind = job.kind();
    let template = job.job.worker_template();
    let mut spec = template
        .and_then(|template| template.spec.clone())
        .unwrap_or_default();
    spec.restart_policy = Some("Never".into());
    spec.hostname = Some(name);
    spec.subdomain = Some(job.service_name());
    if let Some(first) = spec.containers.first_mut() {
        let no_command = first.command.as_ref().is_none_or(Vec::is_empty);
        let no_args = first.args.as_ref().is_none_or(Vec::is_empty);
        // A TrainingJob's arguments without a command go to sshd, as with et-operator; an
        // MPIJob's run as the image's entry point, as with mpi-operator.
        if no_command && (kind == Kind::TrainingJob || no_args) {
            first.command = Some(SSHD_COMMAND.iter().map(ToString::to_string).collect());
        }
    }
    super::hold_on_sigterm(&job, &mut spec);
    cooldown::avoiding(&mut spec, in_cooldown);
    let volumes = spec.volumes.get_or_insert_default();
    volumes.push(job.ssh_volume());
    volumes.push(notice_volume());
    for (position, container) in spec.containers.iter_mut().enumerate() {
        let mounts = container.volume_mounts.get_or_insert_default();
        if kind == Kind::TrainingJob || position == 0 {
            mounts.extend(job.ssh_mounts());
        }
        mounts.push(notice_mount());
    }
    if kind == Kind::MpiJob {
        if let Some(first) = spec.containers.first_mut() {
            set_env(first, MPI_ROLE_ENV, WORKER_ROLE);
        }
        if spec.host_network == Some(true) {
            spec.dns_policy = Some("ClusterFirstWithHostNet".into());
        }
        let search = format!(
            "{}.{}.svc.cluster.local",
            job.service_name(),
            job.namespace()
        );
        spec.dns_config
            .get_or_insert_with(PodDNSConfig::default)
            .searches
            .get_or_insert_default()
            .push(search);
    }
    job.join_gang(&mut metadata, &mut spec, Role::Worker);
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

/// The labels and annotations of worker `index` of `job` (see [`worker_pod`]): the template's,
/// with eto's labels and the job's notice over them.
pub fn worker_metadata(job: Job<'_>, index: u32) -> ObjectMeta {
    let mut labels = job.pod_labels(Role::Worker);
    // With the launcher as worker 0, mpi-operator numbers workers from 1 (Kueue's topology
    // aware scheduling needs unique indices across the pod group).
    let shown_index = match &job.spec.mpi {
        Some(mpi) if mpi.run_launcher_as_worker => index + 1,
        _ => index,
    };
    labels.insert(job.kind().index_label().into(), shown_index.to_string());
    job.pod_metadata(
        names::worker(job.name(), index),
        job.job.worker_template(),
        labels,
        notice::annotations(job.notice),
    )
}
