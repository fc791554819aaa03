//! Validation and defaulting of a TrainingJob.
//!
//! The CRD's schema and CEL rules reject most bad specs at admission, but not all of them: a
//! rule cannot read pod templates' resource limits, annotations are free-form, and a CRD
//! installed without validation (or an older one) lets anything through. [`validate`] checks
//! every rule again, so the controller never builds objects from a spec it does not
//! understand; it reports the errors in the job's status and events instead.

use std::fmt;
use std::time::Duration;

use eto_api::common::ReplicaRestartPolicy;
use eto_api::training_job::{
    CleanPodPolicy, ElasticPolicy, JobRestartPolicy, LauncherAttachMode, TrainingJob, WorkerSpec,
};
use eto_api::well_known::{
    JOB_SUSPENDED_ANNOTATION, MAX_WAIT_TIME_ANNOTATION, SSH_SECRET_ANNOTATION,
};
use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};

use crate::build::{DEEPSPEED_DIR, DISCOVERY_DIR, RESERVED_VOLUMES, SSH_DIR};
use crate::effective_spec::{EffectiveSpec, ElasticSettings, SshSecretSource, WorkerCounts};
use crate::names::{MAX_JOB_NAME_LEN, is_dns1035_label, is_dns1123_subdomain};

/// Extended resource whose limit sets the default slots per worker.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// One violated rule, naming the field as a path into the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the offending field, for example `spec.etReplicaSpecs.worker.minReplicas`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// A TrainingJob that breaks at least one rule; every broken rule is listed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid TrainingJob: {}", join(.errors))]
pub struct InvalidSpec {
    /// The violated rules, in the order of the fields in the spec.
    pub errors: Vec<FieldError>,
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Validates `job` and applies every default.
///
/// # Errors
/// [`InvalidSpec`] listing every rule the job breaks, each naming its field.
pub fn validate(job: &TrainingJob) -> Result<EffectiveSpec, InvalidSpec> {
    let mut errors = Errors::default();
    let spec = &job.spec;

    check_job_name(
        job.metadata.name.as_deref().unwrap_or_default(),
        &mut errors,
    );

    let launcher = &spec.et_replica_specs.launcher;
    if let Some(replicas) = launcher.replicas.filter(|replicas| *replicas != 1) {
        errors.push(
            "spec.etReplicaSpecs.launcher.replicas",
            format!("must be 1, not {replicas}"),
        );
    }
    check_template(
        "spec.etReplicaSpecs.launcher.template",
        &launcher.template,
        Role::Launcher,
        &mut errors,
    );

    let worker = &spec.et_replica_specs.worker;
    let workers = worker_counts(worker, &mut errors);
    check_template(
        "spec.etReplicaSpecs.worker.template",
        &worker.template,
        Role::Worker,
        &mut errors,
    );

    if spec.launcher_attach_mode == Some(LauncherAttachMode::Kubexec) {
        errors.push(
            "spec.launcherAttachMode",
            "kubexec is not supported: eto starts worker processes over ssh, so remove the \
             field or set it to ssh",
        );
    }

    let slots_per_worker = match spec.slots_per_worker {
        Some(slots) => positive("spec.slotsPerWorker", slots, &mut errors),
        None => slots_from_gpu_limit(&worker.template, &mut errors),
    };

    let backoff_limit = spec
        .backoff_limit
        .map_or(EffectiveSpec::DEFAULT_BACKOFF_LIMIT, |limit| {
            non_negative("spec.backoffLimit", limit, &mut errors)
        });
    let active_deadline = spec.active_deadline_seconds.map(|seconds| {
        Duration::from_secs(positive_seconds(
            "spec.activeDeadlineSeconds",
            seconds,
            &mut errors,
        ))
    });
    let ttl_after_finished = spec.ttl_seconds_after_finished.map(|seconds| {
        let seconds = non_negative("spec.ttlSecondsAfterFinished", seconds, &mut errors);
        Duration::from_secs(seconds.into())
    });
    let elastic = elastic_settings(job, spec.elastic_policy.as_ref(), &mut errors);
    let ssh_secret = ssh_secret_source(job, &mut errors);
    let suspend = spec.suspend.unwrap_or(false) || suspended_by_annotation(job, &mut errors);

    errors.into_result(EffectiveSpec {
        workers,
        slots_per_worker,
        clean_pod_policy: spec.clean_pod_policy.unwrap_or(CleanPodPolicy::Running),
        job_restart_policy: spec.restart_policy.unwrap_or(JobRestartPolicy::Never),
        backoff_limit,
        worker_restart_policy: worker.restart_policy.unwrap_or(ReplicaRestartPolicy::Never),
        launcher_restart_policy: launcher.restart_policy,
        suspend,
        active_deadline,
        ttl_after_finished,
        elastic,
        ssh_secret,
    })
}

#[derive(Default)]
struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }

    fn into_result<T>(self, value: T) -> Result<T, InvalidSpec> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(InvalidSpec { errors: self.0 })
        }
    }
}

fn check_job_name(name: &str, errors: &mut Errors) {
    if name.len() > MAX_JOB_NAME_LEN {
        errors.push(
            "metadata.name",
            format!(
                "must be at most {MAX_JOB_NAME_LEN} characters, so that the worker host names \
                 `<name>-worker-<index>` stay valid DNS labels"
            ),
        );
    } else if !is_dns1035_label(name) {
        errors.push(
            "metadata.name",
            "must consist of lowercase letters, digits and '-', start with a letter and end \
             with a letter or digit, because it names the job's Services",
        );
    }
}

fn worker_counts(worker: &WorkerSpec, errors: &mut Errors) -> WorkerCounts {
    const PATH: &str = "spec.etReplicaSpecs.worker";
    // A count that is itself invalid is reported once and left out of the ordering checks.
    let count = |field: &str, value: Option<i32>, errors: &mut Errors| {
        let value = value?;
        let count = u32::try_from(value).ok().filter(|count| *count >= 1);
        if count.is_none() {
            errors.push(
                format!("{PATH}.{field}"),
                format!("must be at least 1, not {value}"),
            );
        }
        count
    };
    let replicas = count("replicas", worker.replicas, errors);
    let min_replicas = count("minReplicas", worker.min_replicas, errors);
    let max = count("maxReplicas", worker.max_replicas, errors);

    let desired = replicas.or(min_replicas).unwrap_or(1);
    let min = min_replicas.unwrap_or(desired);
    if min > desired {
        errors.push(
            format!("{PATH}.minReplicas"),
            format!("must not be greater than replicas ({min} > {desired})"),
        );
    }
    if let Some(max) = max {
        if desired > max {
            errors.push(
                format!("{PATH}.replicas"),
                format!("must not be greater than maxReplicas ({desired} > {max})"),
            );
        }
        // A defaulted minimum equals `desired`, whose excess is reported above.
        if let Some(min) = min_replicas.filter(|min| *min > max) {
            errors.push(
                format!("{PATH}.minReplicas"),
                format!("must not be greater than maxReplicas ({min} > {max})"),
            );
        }
    }
    WorkerCounts { desired, min, max }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Launcher,
    Worker,
}

fn check_template(path: &str, template: &PodTemplateSpec, role: Role, errors: &mut Errors) {
    let Some(pod) = &template.spec else {
        errors.push(format!("{path}.spec"), "is required");
        return;
    };
    if pod.containers.is_empty() {
        errors.push(
            format!("{path}.spec.containers"),
            "must list at least one container",
        );
    }
    for (index, volume) in pod.volumes.iter().flatten().enumerate() {
        if RESERVED_VOLUMES.contains(&volume.name.as_str()) {
            errors.push(
                format!("{path}.spec.volumes[{index}].name"),
                format!("{} is reserved for eto's own volume", volume.name),
            );
        }
    }
    for (index, container) in pod.containers.iter().enumerate() {
        let field = format!("{path}.spec.containers[{index}]");
        if container.name.is_empty() {
            errors.push(format!("{field}.name"), "is required");
        }
        if container.image.as_deref().is_none_or(str::is_empty) {
            errors.push(format!("{field}.image"), "is required");
        }
        // eto mounts the SSH key pair in every container, host discovery and the notice in
        // the launcher's first, the notice in every worker container.
        let reserved: &[&str] = match (role, index) {
            (Role::Launcher, 0) => &[SSH_DIR, DISCOVERY_DIR, DEEPSPEED_DIR],
            (Role::Launcher, _) => &[SSH_DIR],
            (Role::Worker, _) => &[SSH_DIR, DISCOVERY_DIR],
        };
        for (mount_index, mount) in container.volume_mounts.iter().flatten().enumerate() {
            if reserved.contains(&mount.mount_path.trim_end_matches('/')) {
                errors.push(
                    format!("{field}.volumeMounts[{mount_index}].mountPath"),
                    format!("{} is where eto mounts its own files", mount.mount_path),
                );
            }
        }
    }
}

fn slots_from_gpu_limit(worker: &PodTemplateSpec, errors: &mut Errors) -> u32 {
    let Some(container) = worker.spec.as_ref().and_then(|pod| pod.containers.first()) else {
        return 1;
    };
    let Some((kind, quantity)) = gpu_quantity(container) else {
        return 1;
    };
    match quantity.parse::<u32>() {
        Ok(gpus) => gpus.max(1),
        Err(_) => {
            errors.push(
                format!(
                    "spec.etReplicaSpecs.worker.template.spec.containers[0].resources.\
                     {kind}[{GPU_RESOURCE}]"
                ),
                format!(
                    "must be a whole number of GPUs, not {quantity:?}; set spec.slotsPerWorker \
                     to choose the slots explicitly"
                ),
            );
            1
        }
    }
}

/// The GPU count of a container: its limit, else its request (extended resources may give
/// either), with the name of the map it came from.
fn gpu_quantity(container: &Container) -> Option<(&'static str, &str)> {
    let resources = container.resources.as_ref()?;
    [
        ("limits", &resources.limits),
        ("requests", &resources.requests),
    ]
    .into_iter()
    .find_map(|(kind, map)| Some((kind, map.as_ref()?.get(GPU_RESOURCE)?.0.as_str())))
}

fn elastic_settings(
    job: &TrainingJob,
    policy: Option<&ElasticPolicy>,
    errors: &mut Errors,
) -> ElasticSettings {
    const PATH: &str = "spec.elasticPolicy";
    let policy = policy.cloned().unwrap_or_default();
    let seconds = |field: &str, value: i32, errors: &mut Errors| {
        Duration::from_secs(non_negative(&format!("{PATH}.{field}"), value, errors).into())
    };
    let max_wait = match policy.max_wait_seconds {
        Some(value) => Some(seconds("maxWaitSeconds", value, errors)),
        None => max_wait_from_annotation(job, errors),
    };
    ElasticSettings {
        max_wait: max_wait.filter(|wait| !wait.is_zero()),
        suspend_below_min_workers: policy.suspend_below_min_workers.unwrap_or(true),
        below_min: policy
            .below_min_seconds
            .map_or(ElasticSettings::DEFAULT_BELOW_MIN, |value| {
                seconds("belowMinSeconds", value, errors)
            }),
        checkpoint_grace: policy
            .checkpoint_grace_seconds
            .map_or(ElasticSettings::DEFAULT_CHECKPOINT_GRACE, |value| {
                seconds("checkpointGraceSeconds", value, errors)
            }),
        blacklist_cooldown: policy
            .blacklist_cooldown_seconds
            .map_or(ElasticSettings::DEFAULT_BLACKLIST_COOLDOWN, |value| {
                seconds("blacklistCooldownSeconds", value, errors)
            }),
        drain: policy
            .drain_seconds
            .map_or(ElasticSettings::DEFAULT_DRAIN, |value| {
                seconds("drainSeconds", value, errors)
            }),
    }
}

fn max_wait_from_annotation(job: &TrainingJob, errors: &mut Errors) -> Option<Duration> {
    let value = job
        .metadata
        .annotations
        .as_ref()?
        .get(MAX_WAIT_TIME_ANNOTATION)?;
    match value.trim().parse::<u64>() {
        Ok(seconds) => Some(Duration::from_secs(seconds)),
        Err(_) => {
            errors.push(
                format!("metadata.annotations[{MAX_WAIT_TIME_ANNOTATION}]"),
                format!("must be a whole number of seconds, not {value:?}"),
            );
            None
        }
    }
}

/// Whether the annotation `job-supervisor.kube-ai.io/job-suspended` asks for a suspend.
fn suspended_by_annotation(job: &TrainingJob, errors: &mut Errors) -> bool {
    let value = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(JOB_SUSPENDED_ANNOTATION));
    match value.map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            errors.push(
                format!("metadata.annotations[{JOB_SUSPENDED_ANNOTATION}]"),
                format!("must be \"true\" or \"false\", not {other:?}"),
            );
            false
        }
    }
}

fn ssh_secret_source(job: &TrainingJob, errors: &mut Errors) -> SshSecretSource {
    let Some(name) = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SSH_SECRET_ANNOTATION))
    else {
        return SshSecretSource::Generated;
    };
    if !is_dns1123_subdomain(name) {
        errors.push(
            format!("metadata.annotations[{SSH_SECRET_ANNOTATION}]"),
            format!("must name a Secret (a lowercase DNS subdomain), not {name:?}"),
        );
    }
    SshSecretSource::Provided(name.clone())
}

fn positive(field: &str, value: i32, errors: &mut Errors) -> u32 {
    match u32::try_from(value) {
        Ok(value) if value >= 1 => value,
        _ => {
            errors.push(field, format!("must be at least 1, not {value}"));
            1
        }
    }
}

fn positive_seconds(field: &str, value: i64, errors: &mut Errors) -> u64 {
    match u64::try_from(value) {
        Ok(value) if value >= 1 => value,
        _ => {
            errors.push(field, format!("must be at least 1, not {value}"));
            1
        }
    }
}

fn non_negative(field: &str, value: i32, errors: &mut Errors) -> u32 {
    u32::try_from(value).unwrap_or_else(|_| {
        errors.push(field, format!("must not be negative, not {value}"));
        0
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::testing::{training_job, worker_container, worker_pod_spec};

    fn set_annotation(job: &mut TrainingJob, key: &str, value: &str) {
        job.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
    }

    fn set_worker_gpus(job: &mut TrainingJob, kind: &str, quantity: &str) {
        let resources = worker_container(job).resources.get_or_insert_default();
        let map = match kind {
            "limits" => resources.limits.get_or_insert_with(BTreeMap::new),
            _ => resources.requests.get_or_insert_with(BTreeMap::new),
        };
        map.insert(GPU_RESOURCE.into(), Quantity(quantity.into()));
    }

    fn valid(job: &TrainingJob) -> EffectiveSpec {
        validate(job).unwrap_or_else(|invalid| panic!("expected a valid job: {invalid}"))
    }

    fn error_fields(job: &TrainingJob) -> Vec<String> {
        match validate(job) {
            Ok(spec) => panic!("expected an invalid job, got {spec:?}"),
            Err(invalid) => invalid
                .errors
                .into_iter()
                .map(|error| error.field)
                .collect(),
        }
    }

    #[test]
    fn a_minimal_job_gets_et_operator_defaults() {
        let spec = valid(&training_job());
        assert_eq!(
            spec.workers,
            WorkerCounts {
                desired: 2,
                min: 2,
                max: None
            }
        );
        assert_eq!(spec.slots_per_worker, 1);
        assert_eq!(spec.clean_pod_policy, CleanPodPolicy::Running);
        assert_eq!(spec.job_restart_policy, JobRestartPolicy::Never);
        assert_eq!(spec.backoff_limit, 6);
        assert_eq!(spec.worker_restart_policy, ReplicaRestartPolicy::Never);
        assert_eq!(spec.launcher_restart_policy, None);
        assert!(!spec.suspend);
        assert_eq!(spec.active_deadline, None);
        assert_eq!(spec.ttl_after_finished, None);
        assert_eq!(
            spec.elastic,
            ElasticSettings {
                max_wait: None,
                suspend_below_min_workers: true,
                below_min: Duration::from_secs(30),
                checkpoint_grace: Duration::from_secs(300),
                blacklist_cooldown: Duration::from_secs(600),
                drain: Duration::from_secs(30),
            }
        );
        assert_eq!(spec.ssh_secret, SshSecretSource::Generated);
    }

    #[test]
    fn worker_counts_default_from_each_other() {
        // (replicas, minReplicas, maxReplicas) -> (desired, min, max)
        let cases = [
            ((Some(3), None, None), (3, 3, None)),
            ((None, Some(2), None), (2, 2, None)),
            ((None, None, None), (1, 1, None)),
            ((Some(8), Some(1), Some(128)), (8, 1, Some(128))),
            ((Some(4), Some(4), Some(4)), (4, 4, Some(4))),
        ];
        for ((replicas, min, max), (desired, want_min, want_max)) in cases {
            let mut job = training_job();
            let worker = &mut job.spec.et_replica_specs.worker;
            (worker.replicas, worker.min_replicas, worker.max_replicas) = (replicas, min, max);
            assert_eq!(
                valid(&job).workers,
                WorkerCounts {
                    desired,
                    min: want_min,
                    max: want_max
                },
                "replicas={replicas:?} min={min:?} max={max:?}"
            );
        }
    }

    #[test]
    fn slots_come_from_the_spec_then_the_gpu_limit_then_one() {
        type Mutation = fn(&mut TrainingJob);
        let cases: [(&str, Mutation, u32); 6] = [
            ("no GPUs", |_| {}, 1),
            ("GPU limit", |job| set_worker_gpus(job, "limits", "4"), 4),
            (
                "GPU request only",
                |job| set_worker_gpus(job, "requests", "2"),
                2,
            ),
            (
                "zero GPUs still run one process",
                |job| set_worker_gpus(job, "limits", "0"),
                1,
            ),
            (
                "slotsPerWorker wins over the GPU limit",
                |job| {
                    set_worker_gpus(job, "limits", "8");
                    job.spec.slots_per_worker = Some(2);
                },
                2,
            ),
            (
                "the limit wins over the request",
                |job| {
                    set_worker_gpus(job, "requests", "2");
                    set_worker_gpus(job, "limits", "3");
                },
                3,
            ),
        ];
        for (case, mutate, slots) in cases {
            let mut job = training_job();
            mutate(&mut job);
            assert_eq!(valid(&job).slots_per_worker, slots, "{case}");
        }
    }

    #[test]
    fn max_wait_comes_from_the_policy_then_the_arena_annotation_else_there_is_no_limit() {
        type Mutation = fn(&mut TrainingJob);
        let cases: [(&str, Mutation, Option<u64>); 5] = [
            ("neither: no limit", |_| {}, None),
            (
                "annotation",
                |job| set_annotation(job, MAX_WAIT_TIME_ANNOTATION, "900"),
                Some(900),
            ),
            (
                "policy wins over the annotation",
                |job| {
                    set_annotation(job, MAX_WAIT_TIME_ANNOTATION, "900");
                    job.spec.elastic_policy = Some(ElasticPolicy {
                        max_wait_seconds: Some(120),
                        ..Default::default()
                    });
                },
                Some(120),
            ),
            (
                "zero in the policy waits forever",
                |job| {
                    job.spec.elastic_policy = Some(ElasticPolicy {
                        max_wait_seconds: Some(0),
                        ..Default::default()
                    });
                },
                None,
            ),
            (
                "zero in the annotation waits forever",
                |job| {
                    set_annotation(job, MAX_WAIT_TIME_ANNOTATION, "0");
                },
                None,
            ),
        ];
        for (case, mutate, seconds) in cases {
            let mut job = training_job();
            mutate(&mut job);
            assert_eq!(
                valid(&job).elastic.max_wait,
                seconds.map(Duration::from_secs),
                "{case}"
            );
        }
    }

    #[test]
    fn the_job_supervisors_annotation_suspends_as_spec_suspend_does() {
        for (value, suspend) in [("true", true), ("false", false)] {
            let mut job = training_job();
            set_annotation(&mut job, JOB_SUSPENDED_ANNOTATION, value);
            assert_eq!(valid(&job).suspend, suspend, "{value}");
        }
        assert!(!valid(&training_job()).suspend);
    }

    #[test]
    fn explicit_settings_are_carried_over() {
        let mut job = training_job();
        job.spec.clean_pod_policy = Some(CleanPodPolicy::None);
        job.spec.restart_policy = Some(JobRestartPolicy::OnFailure);
        job.spec.backoff_limit = Some(3);
        job.spec.suspend = Some(true);
        job.spec.active_deadline_seconds = Some(3600);
        job.spec.ttl_seconds_after_finished = Some(0);
        job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::ExitCode);
        job.spec.et_replica_specs.launcher.restart_policy = Some(ReplicaRestartPolicy::Always);
        job.spec.elastic_policy = Some(ElasticPolicy {
            max_wait_seconds: None,
            suspend_below_min_workers: Some(false),
            below_min_seconds: Some(10),
            checkpoint_grace_seconds: Some(30),
            blacklist_cooldown_seconds: Some(0),
            drain_seconds: Some(5),
        });
        set_annotation(&mut job, SSH_SECRET_ANNOTATION, "team-ssh");

        let spec = valid(&job);
        assert_eq!(spec.clean_pod_policy, CleanPodPolicy::None);
        assert_eq!(spec.job_restart_policy, JobRestartPolicy::OnFailure);
        assert_eq!(spec.backoff_limit, 3);
        assert!(spec.suspend);
        assert_eq!(spec.active_deadline, Some(Duration::from_secs(3600)));
        assert_eq!(spec.ttl_after_finished, Some(Duration::ZERO));
        assert_eq!(spec.worker_restart_policy, ReplicaRestartPolicy::ExitCode);
        assert_eq!(
            spec.launcher_restart_policy,
            Some(ReplicaRestartPolicy::Always)
        );
        assert!(!spec.elastic.suspend_below_min_workers);
        assert_eq!(spec.elastic.below_min, Duration::from_secs(10));
        assert_eq!(spec.elastic.checkpoint_grace, Duration::from_secs(30));
        assert_eq!(spec.elastic.blacklist_cooldown, Duration::ZERO);
        assert_eq!(spec.elastic.drain, Duration::from_secs(5));
        assert_eq!(
            spec.ssh_secret,
            SshSecretSource::Provided("team-ssh".into())
        );
    }

    #[test]
    fn every_rule_names_its_field() {
        type Mutation = fn(&mut TrainingJob);
        let cases: Vec<(Mutation, &str)> = vec![
            (
                |job| job.metadata.name = Some("a".repeat(51)),
                "metadata.name",
            ),
            (
                |job| job.metadata.name = Some("1mnist".into()),
                "metadata.name",
            ),
            (
                |job| job.metadata.name = Some("mnist.v2".into()),
                "metadata.name",
            ),
            (
                |job| job.spec.et_replica_specs.launcher.replicas = Some(2),
                "spec.etReplicaSpecs.launcher.replicas",
            ),
            (
                |job| job.spec.et_replica_specs.worker.replicas = Some(0),
                "spec.etReplicaSpecs.worker.replicas",
            ),
            (
                |job| job.spec.et_replica_specs.worker.min_replicas = Some(-1),
                "spec.etReplicaSpecs.worker.minReplicas",
            ),
            (
                |job| job.spec.et_replica_specs.worker.max_replicas = Some(0),
                "spec.etReplicaSpecs.worker.maxReplicas",
            ),
            (
                |job| job.spec.et_replica_specs.worker.min_replicas = Some(3),
                "spec.etReplicaSpecs.worker.minReplicas",
            ),
            (
                |job| job.spec.et_replica_specs.launcher.template.spec = None,
                "spec.etReplicaSpecs.launcher.template.spec",
            ),
            (
                |job| worker_pod_spec(job).containers.clear(),
                "spec.etReplicaSpecs.worker.template.spec.containers",
            ),
            (
                |job| worker_container(job).image = None,
                "spec.etReplicaSpecs.worker.template.spec.containers[0].image",
            ),
            (
                |job| worker_container(job).name = String::new(),
                "spec.etReplicaSpecs.worker.template.spec.containers[0].name",
            ),
            (
                |job| job.spec.launcher_attach_mode = Some(LauncherAttachMode::Kubexec),
                "spec.launcherAttachMode",
            ),
            (
                |job| job.spec.slots_per_worker = Some(0),
                "spec.slotsPerWorker",
            ),
            (
                |job| set_worker_gpus(job, "limits", "1.5"),
                "spec.etReplicaSpecs.worker.template.spec.containers[0].resources.limits[nvidia.com/gpu]",
            ),
            (
                |job| set_worker_gpus(job, "requests", "500m"),
                "spec.etReplicaSpecs.worker.template.spec.containers[0].resources.requests[nvidia.com/gpu]",
            ),
            (|job| job.spec.backoff_limit = Some(-1), "spec.backoffLimit"),
            (
                |job| job.spec.active_deadline_seconds = Some(0),
                "spec.activeDeadlineSeconds",
            ),
            (
                |job| job.spec.ttl_seconds_after_finished = Some(-5),
                "spec.ttlSecondsAfterFinished",
            ),
            (
                |job| {
                    job.spec.elastic_policy = Some(ElasticPolicy {
                        max_wait_seconds: Some(-1),
                        ..Default::default()
                    });
                },
                "spec.elasticPolicy.maxWaitSeconds",
            ),
            (
                |job| {
                    job.spec.elastic_policy = Some(ElasticPolicy {
                        checkpoint_grace_seconds: Some(-1),
                        ..Default::default()
                    });
                },
                "spec.elasticPolicy.checkpointGraceSeconds",
            ),
            (
                |job| {
                    job.spec.elastic_policy = Some(ElasticPolicy {
                        blacklist_cooldown_seconds: Some(-1),
                        ..Default::default()
                    });
                },
                "spec.elasticPolicy.blacklistCooldownSeconds",
            ),
            (
                |job| {
                    job.spec.elastic_policy = Some(ElasticPolicy {
                        drain_seconds: Some(-1),
                        ..Default::default()
                    });
                },
                "spec.elasticPolicy.drainSeconds",
            ),
            (
                |job| set_annotation(job, MAX_WAIT_TIME_ANNOTATION, "10m"),
                "metadata.annotations[job-supervisor.kube-ai.io/max-wait-time]",
            ),
            (
                |job| set_annotation(job, JOB_SUSPENDED_ANNOTATION, "yes"),
                "metadata.annotations[job-supervisor.kube-ai.io/job-suspended]",
            ),
            (
                |job| {
                    job.spec.elastic_policy = Some(ElasticPolicy {
                        below_min_seconds: Some(-5),
                        ..Default::default()
                    });
                },
                "spec.elasticPolicy.belowMinSeconds",
            ),
            (
                |job| set_annotation(job, SSH_SECRET_ANNOTATION, "My_Secret"),
                "metadata.annotations[arena.kubeflow.org/ssh-secret]",
            ),
            (
                |job| {
                    worker_pod_spec(job).volumes = Some(vec![
                        serde_json::from_value(
                            serde_json::json!({"name": "eto-ssh", "emptyDir": {}}),
                        )
                        .unwrap(),
                    ]);
                },
                "spec.etReplicaSpecs.worker.template.spec.volumes[0].name",
            ),
            (
                |job| {
                    worker_container(job).volume_mounts = Some(vec![
                        serde_json::from_value(
                            serde_json::json!({"name": "keys", "mountPath": "/root/.ssh/"}),
                        )
                        .unwrap(),
                    ]);
                },
                "spec.etReplicaSpecs.worker.template.spec.containers[0].volumeMounts[0].mountPath",
            ),
            (
                |job| {
                    let spec = job
                        .spec
                        .et_replica_specs
                        .launcher
                        .template
                        .spec
                        .as_mut()
                        .unwrap();
                    spec.containers[0].volume_mounts = Some(vec![
                        serde_json::from_value(
                            serde_json::json!({"name": "data", "mountPath": "/etc/edl"}),
                        )
                        .unwrap(),
                    ]);
                },
                "spec.etReplicaSpecs.launcher.template.spec.containers[0].volumeMounts[0].mountPath",
            ),
        ];
        for (mutate, field) in cases {
            let mut job = training_job();
            mutate(&mut job);
            assert_eq!(
                error_fields(&job),
                vec![field.to_string()],
                "rule for {field}"
            );
        }
    }

    #[test]
    fn worker_count_orderings_are_checked_pairwise() {
        let mut job = training_job();
        let worker = &mut job.spec.et_replica_specs.worker;
        (worker.replicas, worker.min_replicas, worker.max_replicas) = (Some(4), Some(6), Some(3));
        assert_eq!(
            error_fields(&job),
            vec![
                "spec.etReplicaSpecs.worker.minReplicas",
                "spec.etReplicaSpecs.worker.replicas",
                "spec.etReplicaSpecs.worker.minReplicas",
            ]
        );
    }

    #[test]
    fn a_defaulted_minimum_is_not_reported_against_the_maximum() {
        let mut job = training_job();
        let worker = &mut job.spec.et_replica_specs.worker;
        (worker.replicas, worker.min_replicas, worker.max_replicas) = (Some(8), None, Some(4));
        assert_eq!(
            error_fields(&job),
            vec!["spec.etReplicaSpecs.worker.replicas"]
        );
    }

    #[test]
    fn every_broken_rule_is_reported_with_a_readable_message() {
        let mut job = training_job();
        job.spec.et_replica_specs.launcher.replicas = Some(3);
        job.spec.backoff_limit = Some(-2);
        let invalid = validate(&job).unwrap_err();
        assert_eq!(
            invalid.to_string(),
            "invalid TrainingJob: spec.etReplicaSpecs.launcher.replicas: must be 1, not 3; \
             spec.backoffLimit: must not be negative, not -2"
        );
    }
}
