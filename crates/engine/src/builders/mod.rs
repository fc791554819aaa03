//! What every kind's objects are built from: the job's context ([`JobContext`]), labels and
//! metadata, the SSH workers and Secret, notice volumes and eto's PID 1 ([`termination`]);
//! built from the job alone (no API calls). Each kind's module builds its objects with them.
//!
//! Every object carries the job's controller owner reference (so garbage collection removes
//! it with the job), [`MANAGER`](eto_api::well_known::MANAGER) as
//! `app.kubernetes.io/managed-by` (so eto's watches select only its own objects) and the job
//! labels of the kind's original operator (et-operator's, or mpi-operator's
//! `training.kubeflow.org/*`).

mod ssh_secret;
pub mod termination;
mod worker;

use eto_api::job_status::{NodeCooldown, NoticeKind};
use k8s_openapi::api::core::v1::{
    DownwardAPIVolumeFile, DownwardAPIVolumeSource, KeyToPath, PodSpec, SecretVolumeSource, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use ssh_secret::{SSH_AUTH_SECRET_TYPE, ssh_secret};
pub use worker::{SshWorker, ssh_worker_pod, worker_metadata};

use crate::downward_api::annotation_file;
use crate::effective_spec::SshSecretSource;
use crate::job::{JobContext, Role};
use crate::names;

/// Name of the volume holding the SSH key pair, mounted at [`SSH_DIR`].
pub const SSH_VOLUME: &str = "eto-ssh";
/// Where the SSH key pair is mounted in every container.
pub const SSH_DIR: &str = "/root/.ssh";
/// Name of the launcher's volume with the hostfile and the discovery script.
pub const DISCOVERY_VOLUME: &str = "eto-discovery";
/// Where the launcher finds `hostfile` and `discover_hosts.sh`.
pub const DISCOVERY_DIR: &str = "/etc/edl";
/// Name of the launcher's volume with the DeepSpeed hostfile.
pub const DEEPSPEED_VOLUME: &str = "eto-deepspeed";
/// Where the launcher finds the DeepSpeed `hostfile`.
pub const DEEPSPEED_DIR: &str = "/job";
/// Name of the volume with the notice, mounted at [`DISCOVERY_DIR`] in the workers (and in an
/// MPIJob's launcher).
pub const NOTICE_VOLUME: &str = "eto-notice";
/// Name of an MPIJob launcher's volume with the hostfile and the discovery script, mounted at
/// [`MPI_CONFIG_DIR`].
pub const MPI_CONFIG_VOLUME: &str = "eto-mpi-config";
/// Where an MPIJob's launcher finds `hostfile` and `discover_hosts.sh`, as with mpi-operator.
pub const MPI_CONFIG_DIR: &str = "/etc/mpi";
/// Volume names eto adds to pods; templates may not use them.
pub const RESERVED_VOLUMES: [&str; 5] = [
    SSH_VOLUME,
    DISCOVERY_VOLUME,
    DEEPSPEED_VOLUME,
    NOTICE_VOLUME,
    MPI_CONFIG_VOLUME,
];
/// Command of a worker whose first container has none: an SSH daemon in the foreground, so
/// that the launcher can start the training processes. Images often leave out sshd's host
/// keys (each container should have its own), so the host keys missing are generated first
/// (`ssh-keygen -A` makes only those), and sshd's privilege separation directory is made if
/// it is missing; then the shell becomes sshd (`exec`), which gets the container's `args`.
pub const SSHD_COMMAND: [&str; 4] = [
    "/bin/sh",
    "-c",
    "ssh-keygen -A >/dev/null 2>&1; mkdir -p /run/sshd 2>/dev/null; exec /usr/sbin/sshd -De \"$@\"",
    "eto-sshd",
];

/// Where a launcher would rather run: off spot capacity, unless its template places it itself
/// or `elasticPolicy.launcherAvoidsSpot` is false (see [`crate::spot_capacity`]); and off the
/// nodes `avoided` (those that announced they go away), by the preference workers get against
/// nodes in cooldown (see [`crate::cooldown::avoiding`]). It leaves a node that stopped
/// reporting after a while, as workers do (see [`crate::unreachable_nodes`]).
pub(crate) fn place_launcher(job: &JobContext<'_>, spec: &mut PodSpec, avoided: &[NodeCooldown]) {
    if job.spec.elastic.launcher_avoids_spot {
        crate::spot_capacity::avoid(spec);
    }
    crate::cooldown::avoiding(spec, avoided);
    crate::unreachable_nodes::leave_after_a_while(spec);
}

/// Runs the pod's first command under eto's PID 1, when the job asks for it (see
/// [`termination`]).
pub(crate) fn hold_on_sigterm(job: &JobContext<'_>, spec: &mut PodSpec) {
    let elastic = &job.spec.elastic;
    if elastic.checkpoint_on_termination {
        let grace = i64::try_from(elastic.checkpoint_grace.as_secs()).unwrap_or(i64::MAX);
        termination::hold_on_sigterm(spec, grace);
    }
}

/// The value of `ETO_RESUME` in the launcher of `job`'s current run.
pub(crate) fn resume_value(job: &JobContext<'_>) -> &'static str {
    if job.notice.is_some_and(|n| n.kind == NoticeKind::Resume) {
        "true"
    } else {
        "false"
    }
}

/// Puts the pod in `role` with `metadata` and `spec` in the job's PodGroup, when the
/// operator uses a gang scheduler (see [`crate::gang::join`]).
pub fn join_gang(job: &JobContext<'_>, metadata: &mut ObjectMeta, spec: &mut PodSpec, role: Role) {
    if let Some(scheduler) = job.gang {
        let preemptable = role == Role::Worker;
        crate::gang::join(metadata, spec, job.job_ref, scheduler, preemptable);
    }
}

/// The Secret holding the job's SSH key pair.
pub fn ssh_secret_name(job: &JobContext<'_>) -> String {
    match &job.spec.ssh_secret {
        // A job whose pods need no SSH mounts none; the name it would have is given.
        SshSecretSource::Generated | SshSecretSource::Unused => {
            names::generated_ssh_secret(job.name())
        }
        SshSecretSource::Provided(name) => name.clone(),
    }
}

/// The SSH volume: the key pair as `id_rsa`, `id_rsa.pub` and `authorized_keys` (the
/// public key), and for a TrainingJob `config`. A TrainingJob's files are readable by their
/// owner only; an MPIJob's too when they are mounted at `/root/.ssh`, and by everyone
/// otherwise (as mpi-operator mounts them), so that a non-root user can read its key.
pub fn ssh_volume(job: &JobContext<'_>) -> Volume {
    let items = ssh_files(job)
        .into_iter()
        .map(|(key, path)| KeyToPath {
            key: key.into(),
            path: path.into(),
            mode: None,
        })
        .collect();
    let default_mode = match &job.spec.mpi {
        None => Some(0o600),
        Some(mpi) => (mpi.ssh_auth_mount_path.trim_end_matches('/') == SSH_DIR).then_some(0o600),
    };
    Volume {
        name: SSH_VOLUME.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(ssh_secret_name(job)),
            default_mode,
            items: Some(items),
            optional: None,
        }),
        ..Volume::default()
    }
}

/// The files of the SSH volume: the Secret's key and the file name it gets.
fn ssh_files(job: &JobContext<'_>) -> Vec<(&'static str, &'static str)> {
    match &job.spec.mpi {
        None => vec![
            ("id_rsa", "id_rsa"),
            ("id_rsa.pub", "id_rsa.pub"),
            ("id_rsa.pub", "authorized_keys"),
            ("config", "config"),
        ],
        Some(_) => vec![
            ("ssh-privatekey", "id_rsa"),
            ("ssh-publickey", "id_rsa.pub"),
            ("ssh-publickey", "authorized_keys"),
        ],
    }
}

/// The mounts of the SSH volume's files, one by one (`subPath`), into `/root/.ssh` in
/// every container of a TrainingJob's pods, into `sshAuthMountPath` in the first
/// container of an MPIJob's. The directory stays the image's own (or one the runtime
/// makes, mode 0755): a volume mounted as the whole directory would be mode 1777, which
/// an OpenSSH server with its default `StrictModes yes` refuses ("bad ownership or
/// modes for directory").
pub fn ssh_mounts(job: &JobContext<'_>) -> Vec<VolumeMount> {
    let dir = job
        .spec
        .mpi
        .as_ref()
        .map_or(SSH_DIR, |mpi| mpi.ssh_auth_mount_path.as_str())
        .trim_end_matches('/');
    ssh_files(job)
        .into_iter()
        .map(|(_, file)| VolumeMount {
            name: SSH_VOLUME.into(),
            mount_path: format!("{dir}/{file}"),
            sub_path: Some(file.into()),
            read_only: Some(true),
            ..VolumeMount::default()
        })
        .collect()
}

/// The volume showing a pod its notice (see [`crate::notice`]) as `notice`, and the files
/// `beside` it.
pub fn notice_volume(beside: &[DownwardAPIVolumeFile]) -> Volume {
    let notice = annotation_file("notice", eto_api::well_known::NOTICE_ANNOTATION, 0o444);
    Volume {
        name: NOTICE_VOLUME.into(),
        downward_api: Some(DownwardAPIVolumeSource {
            default_mode: Some(0o444),
            items: Some(
                std::iter::once(notice)
                    .chain(beside.iter().cloned())
                    .collect(),
            ),
        }),
        ..Volume::default()
    }
}

/// The mount of [`notice_volume`] at `/etc/edl`.
pub fn notice_mount() -> VolumeMount {
    VolumeMount {
        name: NOTICE_VOLUME.into(),
        mount_path: DISCOVERY_DIR.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

/// Sets `name` to `value` in the environment of `container`, replacing a value the template
/// gave (the operator's variables win, as with mpi-operator, which appends them).
pub fn set_env(container: &mut k8s_openapi::api::core::v1::Container, name: &str, value: &str) {
    let env = container.env.get_or_insert_default();
    env.retain(|var| var.name != name);
    env.push(k8s_openapi::api::core::v1::EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    });
}
