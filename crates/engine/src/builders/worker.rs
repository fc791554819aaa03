//! Worker pods.

use eto_api::job_status::NodeCooldown;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{SSHD_COMMAND, join_gang, notice_mount, notice_volume, ssh_mounts, ssh_volume};
use crate::job::{JobContext, Role};
use crate::{cooldown, names, notice};

/// How the workers of a kind whose launcher reaches them over SSH follow their original
/// operator.
#[derive(Clone, Copy, Debug)]
pub struct SshWorker {
    /// Whether a first container with arguments but no command runs them as the SSH daemon's
    /// (et-operator's), rather than as the image's entry point (mpi-operator's).
    pub args_go_to_sshd: bool,
    /// Whether every container gets the key pair (et-operator's), or only the first
    /// (mpi-operator's).
    pub keys_in_every_container: bool,
}

/// Worker `index` of `job`, a job whose launcher reaches its workers over SSH: the worker
/// template with eto's labels (template labels and annotations kept), `restartPolicy: Never`
/// (eto, not the kubelet, replaces workers, under a new name), the host name
/// `<job>-worker-<index>` in the subdomain of the job's headless Service, the SSH key pair
/// (where `ssh` says), the job's notice in `/etc/edl/notice` of every container (see
/// [`crate::notice`]), an SSH daemon as the first container's command when the template gives
/// none, and a preference against the nodes `in_cooldown` (see [`crate::cooldown`]).
pub fn ssh_worker_pod(
    job: JobContext<'_>,
    index: u32,
    in_cooldown: &[NodeCooldown],
    ssh: SshWorker,
) -> Pod {
    let mut metadata = worker_metadata(job, index);
    let name = names::worker(job.name(), index);
    let template = job.job_ref.worker_template();
    let mut spec = template
        .and_then(|template| template.spec.clone())
        .unwrap_or_default();
    spec.restart_policy = Some("Never".into());
    spec.hostname = Some(name);
    spec.subdomain = Some(job.service_name());
    if let Some(first) = spec.containers.first_mut() {
        let no_command = first.command.as_ref().is_none_or(Vec::is_empty);
        let no_args = first.args.as_ref().is_none_or(Vec::is_empty);
        if no_command && (ssh.args_go_to_sshd || no_args) {
            first.command = Some(SSHD_COMMAND.iter().map(ToString::to_string).collect());
        }
    }
    super::hold_on_sigterm(&job, &mut spec);
    cooldown::avoiding(&mut spec, in_cooldown);
    let volumes = spec.volumes.get_or_insert_default();
    volumes.push(ssh_volume(&job));
    volumes.push(notice_volume(&[]));
    for (position, container) in spec.containers.iter_mut().enumerate() {
        let mounts = container.volume_mounts.get_or_insert_default();
        if ssh.keys_in_every_container || position == 0 {
            mounts.extend(ssh_mounts(&job));
        }
        mounts.push(notice_mount());
    }
    join_gang(&job, &mut metadata, &mut spec, Role::Worker);
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

/// The labels and annotations of worker `index` of `job` (see [`ssh_worker_pod`]): the template's,
/// with eto's labels and the job's notice over them.
pub fn worker_metadata(job: JobContext<'_>, index: u32) -> ObjectMeta {
    let mut labels = job.pod_labels(Role::Worker);
    // With the launcher as worker 0, mpi-operator numbers workers from 1 (Kueue's topology
    // aware scheduling needs unique indices across the pod group).
    let shown_index = match &job.spec.mpi {
        Some(mpi) if mpi.run_launcher_as_worker => index + 1,
        _ => index,
    };
    labels.insert(
        job.kind().vocabulary().index_label.into(),
        shown_index.to_string(),
    );
    job.pod_metadata(
        names::worker(job.name(), index),
        job.job_ref.worker_template(),
        labels,
        notice::annotations(job.notice),
    )
}
