//! An MPIJob's objects, named and shaped as mpi-operator makes them: its workers, the
//! launcher Job, the Service and the ConfigMap.

use std::collections::BTreeMap;

use eto_api::job_status::NodeCooldown;
use eto_api::mpi_job::MpiImplementation;
use eto_api::well_known::{
    HOSTFILE_ANNOTATION, LAUNCHER_ROLE, MPI_JOB_NAME_LABEL, MPI_OPERATOR_NAME,
    MPI_OPERATOR_NAME_LABEL, MPI_ROLE_ENV, RESUME_ENV, WORKER_ROLE,
};
use k8s_openapi::api::batch::v1::{
    Job as BatchJob, JobSpec, PodFailurePolicy, PodFailurePolicyOnPodConditionsPattern,
    PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapProjection, Container, DownwardAPIProjection, KeyToPath, Pod, PodDNSConfig,
    PodTemplateSpec, ProjectedVolumeSource, Service, ServiceSpec, Volume, VolumeMount,
    VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::builders::{
    MPI_CONFIG_DIR, MPI_CONFIG_VOLUME, SshWorker, notice_mount, notice_volume, resume_value,
    set_env, ssh_worker_pod,
};
use crate::builders::{join_gang, ssh_mounts, ssh_volume};
use crate::child::Child;
use crate::discovery::{self, Host, MPI_DISCOVER_HOSTS_SCRIPT};
use crate::downward_api::annotation_file;
use crate::effective_spec::MpiSettings;
use crate::job::launcher::{LauncherInputs, LauncherObjects, RunningLauncher};
use crate::job::{JobContext, Role, merged};
use crate::{names, notice};

/// The file of `/etc/mpi` that lists the ready hosts, one `host:slots` line each; the
/// discovery script prints it.
pub const READY_HOSTS_FILE: &str = "ready_hosts";

/// Worker `index` of MPIJob `job` (see [`ssh_worker_pod`]), as mpi-operator builds it: the
/// key pair at `sshAuthMountPath` in the first container, a first container with arguments
/// but no command runs the image's entry point, `K_MPI_JOB_ROLE=worker`, and the job's
/// Service domain in its DNS search path.
pub fn worker_pod(job: JobContext<'_>, index: u32, in_cooldown: &[NodeCooldown]) -> Option<Pod> {
    let ssh = SshWorker {
        args_go_to_sshd: false,
        keys_in_every_container: false,
    };
    let mut pod = ssh_worker_pod(job, index, in_cooldown, ssh);
    let spec = pod.spec.get_or_insert_default();
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
    Some(pod)
}

/// The launcher Job `<job>-launcher` of MPIJob `job`'s current run, showing `ready_hosts` to
/// host discovery.
///
/// Its pod is the Launcher template as mpi-operator builds it (host name `<job>-launcher` in
/// the job's Service, `K_MPI_JOB_ROLE=launcher`, the MPI implementation's environment, GPUs
/// hidden unless `runLauncherAsWorker`, the SSH key pair at `sshAuthMountPath`), with
/// `/etc/mpi` holding `hostfile` and `discover_hosts.sh` from the ConfigMap and
/// `ready_hosts` from the pod's own annotation (see [`crate::discovery`]), and the notice in
/// `/etc/edl/notice`.
///
/// The Job runs one pod and never retries it (`backoffLimit: 0`, `restartPolicy: Never`):
/// eto restarts the whole job after a launcher failure, up to `runPolicy.backoffLimit` times.
/// A pod the platform took is not a failure of the Job ([`ignore_disruptions`]).
/// Its pod template is immutable, so eto creates the Job once per run and afterwards updates
/// only its pod's annotations.
pub fn launcher_job(
    job: JobContext<'_>,
    mpi: &MpiSettings,
    ready_hosts: &str,
    avoided: &[NodeCooldown],
) -> BatchJob {
    let template = job
        .job_ref
        .coordinator_template()
        .cloned()
        .unwrap_or_default();
    let template_metadata = template.metadata.unwrap_or_default();
    let name = names::launcher(job.name());
    let mut pod_labels = job.pod_labels(Role::Launcher);
    if mpi.run_launcher_as_worker {
        pod_labels.insert(job.kind().vocabulary().index_label.into(), "0".into());
    }
    let mut annotations =
        BTreeMap::from([(HOSTFILE_ANNOTATION.to_string(), ready_hosts.to_string())]);
    annotations.extend(notice::annotations(job.notice));
    let mut spec = template.spec.unwrap_or_default();
    spec.restart_policy = Some("Never".into());
    spec.hostname = Some(name.clone());
    spec.subdomain = Some(job.service_name());
    if spec.host_network == Some(true) {
        spec.dns_policy = Some("ClusterFirstWithHostNet".into());
    }
    let volumes = spec.volumes.get_or_insert_default();
    volumes.push(ssh_volume(&job));
    volumes.push(config_volume(job.name()));
    volumes.push(notice_volume(&[]));
    if let Some(first) = spec.containers.first_mut() {
        let mounts = first.volume_mounts.get_or_insert_default();
        mounts.extend(ssh_mounts(&job));
        mounts.push(VolumeMount {
            name: MPI_CONFIG_VOLUME.into(),
            mount_path: MPI_CONFIG_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
        mounts.push(notice_mount());
        launcher_env(first, &mpi.implementation, job.spec.slots_per_worker);
        if !mpi.run_launcher_as_worker {
            // The launcher only starts processes elsewhere: it must not take GPUs it was
            // given by accident.
            set_env(first, "NVIDIA_VISIBLE_DEVICES", "");
            set_env(first, "NVIDIA_DRIVER_CAPABILITIES", "");
        }
        set_env(first, RESUME_ENV, resume_value(&job));
    }
    let mut pod_metadata = ObjectMeta {
        labels: Some(merged(template_metadata.labels.as_ref(), pod_labels)),
        annotations: Some(merged(template_metadata.annotations.as_ref(), annotations)),
        ..ObjectMeta::default()
    };
    crate::builders::place_launcher(&job, &mut spec, avoided);
    crate::builders::hold_on_sigterm(&job, &mut spec);
    join_gang(&job, &mut pod_metadata, &mut spec, Role::Launcher);
    BatchJob {
        metadata: ObjectMeta {
            labels: Some(job.pod_labels(Role::Launcher)),
            ..job.metadata(name)
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            pod_failure_policy: Some(ignore_disruptions()),
            pod_replacement_policy: Some("Failed".into()),
            template: PodTemplateSpec {
                metadata: Some(pod_metadata),
                spec: Some(spec),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// The launcher Job's pod failure policy: a pod the platform took (`DisruptionTarget`: a
/// preemption, an eviction, its node's loss) is not the Job's failure and does not count
/// against its `backoffLimit`. eto sees the disrupted pod and resumes the MPIJob in a new run
/// with a new launcher Job (see `plan/run/launcher_loss.rs`); the Job itself never fails
/// for it.
fn ignore_disruptions() -> PodFailurePolicy {
    PodFailurePolicy {
        rules: vec![PodFailurePolicyRule {
            action: "Ignore".into(),
            on_exit_codes: None,
            on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                type_: crate::pods::DISRUPTION_TARGET_CONDITION.into(),
                status: "True".into(),
            }]),
        }],
    }
}

/// The launcher's role and MPI environment, as mpi-operator sets them.
fn launcher_env(container: &mut Container, implementation: &MpiImplementation, slots: u32) {
    let hostfile = format!("{MPI_CONFIG_DIR}/hostfile");
    let slots = slots.to_string();
    set_env(container, MPI_ROLE_ENV, LAUNCHER_ROLE);
    let vars: Vec<(&str, &str)> = match implementation {
        MpiImplementation::OpenMpi => vec![
            ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
            ("OMPI_MCA_orte_default_hostfile", &hostfile),
            ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
            ("OMPI_MCA_orte_set_default_slots", &slots),
        ],
        MpiImplementation::Intel => vec![
            ("I_MPI_HYDRA_HOST_FILE", &hostfile),
            (
                "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS",
                "-o ConnectionAttempts=10",
            ),
            ("I_MPI_PERHOST", &slots),
        ],
        MpiImplementation::Mpich => vec![
            ("HYDRA_HOST_FILE", &hostfile),
            ("HYDRA_LAUNCH_EXTRA_ARGS", "-o ConnectionAttempts=10"),
        ],
    };
    for (name, value) in vars {
        set_env(container, name, value);
    }
}

/// `/etc/mpi`: `hostfile` and `discover_hosts.sh` from the job's ConfigMap, `ready_hosts` from
/// the launcher pod's own annotation.
fn config_volume(job: &str) -> Volume {
    let item = |key: &str, mode: i32| KeyToPath {
        key: key.into(),
        path: key.into(),
        mode: Some(mode),
    };
    Volume {
        name: MPI_CONFIG_VOLUME.into(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(0o444),
            sources: Some(vec![
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: names::config_map(job),
                        items: Some(vec![
                            item("hostfile", 0o444),
                            item("discover_hosts.sh", 0o555),
                        ]),
                        optional: None,
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    downward_api: Some(DownwardAPIProjection {
                        items: Some(vec![annotation_file(
                            READY_HOSTS_FILE,
                            HOSTFILE_ANNOTATION,
                            0o444,
                        )]),
                    }),
                    ..VolumeProjection::default()
                },
            ]),
        }),
        ..Volume::default()
    }
}

/// The launcher of MPIJob `job`: its launcher Job, whose pod shows the ready hosts
/// `inputs.ready`, and the ConfigMap of its hostfile, which lists every worker of the target
/// `inputs.target` (mpirun is given them all at its start) in the implementation's format.
pub fn launcher_objects(job: JobContext<'_>, inputs: LauncherInputs<'_>) -> LauncherObjects {
    let Some(mpi) = &job.spec.mpi else {
        return LauncherObjects::default();
    };
    let hostfile = discovery::mpi_hostfile(inputs.target, mpi.implementation);
    let ready = discovery::hostfile(inputs.ready);
    LauncherObjects {
        config_map: Some(config_map(job, &hostfile)),
        launcher: Some(Child::LauncherJob(Box::new(launcher_job(
            job,
            mpi,
            &ready,
            inputs.avoided,
        )))),
        running: RunningLauncher::Annotated,
    }
}

/// The launcher of MPIJob `job` as a host of its hostfile and discovery, when it trains too
/// (`runLauncherAsWorker`).
pub fn launcher_host(job: JobContext<'_>) -> Option<Host> {
    let trains = job.spec.mpi.as_ref()?.run_launcher_as_worker;
    trains.then(|| Host {
        name: names::mpi_host(job.name(), job.namespace(), &job.job_ref.launcher_name()),
        slots: job.spec.slots_per_worker,
    })
}

/// What a run of MPIJob `job` needs beside its pods and launcher Job: its Service.
pub fn supporting_objects(job: JobContext<'_>) -> Vec<Child> {
    vec![Child::Service(Box::new(service(job)))]
}

/// The headless Service `<job>` that gives the launcher and the workers of MPIJob `job` their
/// DNS names `<pod>.<job>.<namespace>.svc`, ready or not (so that names resolve by the time
/// mpirun or Horovod connects).
pub fn service(job: JobContext<'_>) -> Service {
    Service {
        metadata: job.metadata(job.service_name()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(BTreeMap::from([
                (
                    MPI_OPERATOR_NAME_LABEL.to_string(),
                    MPI_OPERATOR_NAME.to_string(),
                ),
                (MPI_JOB_NAME_LABEL.to_string(), job.name().to_string()),
            ])),
            publish_not_ready_addresses: Some(true),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The ConfigMap `<job>-config` of MPIJob `job`: `hostfile` in the MPI implementation's format
/// and `discover_hosts.sh`.
pub fn config_map(job: JobContext<'_>, hostfile: &str) -> ConfigMap {
    ConfigMap {
        metadata: job.metadata(names::config_map(job.name())),
        data: Some(BTreeMap::from([
            ("hostfile".to_string(), hostfile.to_string()),
            (
                "discover_hosts.sh".to_string(),
                MPI_DISCOVER_HOSTS_SCRIPT.to_string(),
            ),
        ])),
        ..ConfigMap::default()
    }
}
