//! What validating a job of any kind reports, and the rules every kind shares.
//!
//! The CRDs' schemas and CEL rules reject most bad specs at admission, but not all of them: a
//! rule cannot read pod templates' resource limits, annotations are free-form, mpi-operator's
//! CRD leaves several fields open, and a CRD installed without validation (or an older one)
//! lets anything through. [`JobRef::validate`] checks every rule again (each kind's own in its
//! module's `validation`), so the controller never builds objects from a spec it does not
//! understand; it reports the errors in the job's status and events instead.

use std::time::Duration;

use eto_api::elastic::ElasticPolicy;
use eto_api::well_known::{JOB_SUSPENDED_ANNOTATION, KUBEAI_PORT, MAX_WAIT_TIME_ANNOTATION};
use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::builders::RESERVED_VOLUMES;
use crate::effective_spec::{EffectiveSpec, ElasticSettings, KubeaiStop, WorkerCounts};
use crate::field_error::FieldError;
use crate::job::InvalidSpec;
#[cfg(doc)]
use crate::job::JobRef;
use crate::job::Kind;
use crate::names::{MAX_JOB_NAME_LEN, is_dns1035_label};

/// Extended resource whose limit sets the default slots per worker of a TrainingJob.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

#[derive(Default)]
pub(crate) struct Errors(pub(crate) Vec<FieldError>);

impl Errors {
    pub(crate) fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }

    pub(crate) fn into_result<T>(self, kind: Kind, value: T) -> Result<T, InvalidSpec> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(InvalidSpec {
                kind,
                errors: self.0,
            })
        }
    }
}

pub(crate) fn check_job_name(name: &str, errors: &mut Errors) {
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

/// Where eto mounts its own files in the containers of a pod template: in the first
/// container, and in every other one.
pub(crate) struct ReservedPaths<'a> {
    pub(crate) first: &'a [&'a str],
    pub(crate) others: &'a [&'a str],
}

pub(crate) fn check_template(
    path: &str,
    template: &PodTemplateSpec,
    reserved: &ReservedPaths<'_>,
    errors: &mut Errors,
) {
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
        let reserved = if index == 0 {
            reserved.first
        } else {
            reserved.others
        };
        for (mount_index, mount) in container.volume_mounts.iter().flatten().enumerate() {
            let mount_path = mount.mount_path.trim_end_matches('/');
            if reserved
                .iter()
                .any(|r| r.trim_end_matches('/') == mount_path)
            {
                errors.push(
                    format!("{field}.volumeMounts[{mount_index}].mountPath"),
                    format!("{} is where eto mounts its own files", mount.mount_path),
                );
            }
        }
    }
}

pub(crate) fn gpu_quantity(container: &Container) -> Option<(&'static str, &str)> {
    let resources = container.resources.as_ref()?;
    [
        ("limits", &resources.limits),
        ("requests", &resources.requests),
    ]
    .into_iter()
    .find_map(|(kind, map)| Some((kind, map.as_ref()?.get(GPU_RESOURCE)?.0.as_str())))
}

pub(crate) fn elastic_settings(
    metadata: &ObjectMeta,
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
        None => max_wait_from_annotation(metadata, errors),
    };
    let checkpoint_grace = policy
        .checkpoint_grace_seconds
        .map_or(ElasticSettings::DEFAULT_CHECKPOINT_GRACE, |value| {
            seconds("checkpointGraceSeconds", value, errors)
        });
    ElasticSettings {
        max_wait: max_wait.filter(|wait| !wait.is_zero()),
        suspend_below_min_workers: policy.suspend_below_min_workers.unwrap_or(true),
        below_min: policy
            .below_min_seconds
            .map_or(ElasticSettings::DEFAULT_BELOW_MIN, |value| {
                seconds("belowMinSeconds", value, errors)
            }),
        checkpoint_grace,
        spec_suspend_grace: checkpoint_grace,
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
        launcher_avoids_spot: policy.launcher_avoids_spot.unwrap_or(true),
        checkpoint_on_termination: policy.checkpoint_on_termination.unwrap_or(true),
        kubeai: KubeaiStop {
            every_pod: policy.kubeai_stop.unwrap_or(false),
            port: match policy.kubeai_port.map(u16::try_from) {
                None => KUBEAI_PORT,
                Some(Ok(port)) if port > 0 => port,
                Some(_) => {
                    errors.push(
                        format!("{PATH}.kubeaiPort"),
                        "must be a port number, 1 to 65535",
                    );
                    KUBEAI_PORT
                }
            },
        },
    }
}

fn max_wait_from_annotation(metadata: &ObjectMeta, errors: &mut Errors) -> Option<Duration> {
    let value = metadata
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
pub(crate) fn suspended_by_annotation(metadata: &ObjectMeta, errors: &mut Errors) -> bool {
    let value = metadata
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
pub(crate) fn positive(field: &str, value: i32, errors: &mut Errors) -> u32 {
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

/// The retry and time limits of a job, as validated.
pub(crate) struct RunLimits {
    pub(crate) backoff_limit: u32,
    pub(crate) active_deadline: Option<Duration>,
    pub(crate) ttl_after_finished: Option<Duration>,
}

/// The fields holding a job's retry and time limits, under `parent` (`spec` of a TrainingJob,
/// `spec.runPolicy` of an MPIJob). Unset fields get the defaults.
pub(crate) struct RunLimitFields<'a> {
    pub(crate) parent: &'a str,
    pub(crate) backoff_limit: Option<i32>,
    pub(crate) active_deadline_seconds: Option<i64>,
    pub(crate) ttl_seconds_after_finished: Option<i32>,
}

impl RunLimitFields<'_> {
    pub(crate) fn check(&self, errors: &mut Errors) -> RunLimits {
        let parent = self.parent;
        RunLimits {
            backoff_limit: self
                .backoff_limit
                .map_or(EffectiveSpec::DEFAULT_BACKOFF_LIMIT, |limit| {
                    non_negative(&format!("{parent}.backoffLimit"), limit, errors)
                }),
            active_deadline: self.active_deadline_seconds.map(|seconds| {
                let field = format!("{parent}.activeDeadlineSeconds");
                Duration::from_secs(positive_seconds(&field, seconds, errors))
            }),
            ttl_after_finished: self.ttl_seconds_after_finished.map(|seconds| {
                let field = format!("{parent}.ttlSecondsAfterFinished");
                Duration::from_secs(non_negative(&field, seconds, errors).into())
            }),
        }
    }
}

/// One worker count of a job: its value, the path of its field, and how messages about other
/// fields name it.
pub(crate) struct CountField<'a> {
    pub(crate) value: Option<i32>,
    pub(crate) path: &'a str,
    pub(crate) called: &'a str,
}

/// Desired, minimum and maximum workers: `replicas` (default: the minimum, or 1) within `min`
/// (default: the replicas) and `max` (default: no bound). A count that is itself invalid is
/// reported once and left out of the ordering checks.
pub(crate) fn worker_counts(
    replicas: &CountField<'_>,
    min: &CountField<'_>,
    max: &CountField<'_>,
    errors: &mut Errors,
) -> WorkerCounts {
    let count = |field: &CountField<'_>, errors: &mut Errors| {
        let value = field.value?;
        let count = u32::try_from(value).ok().filter(|count| *count >= 1);
        if count.is_none() {
            errors.push(field.path, format!("must be at least 1, not {value}"));
        }
        count
    };
    let replicas_count = count(replicas, errors);
    let min_replicas = count(min, errors);
    let max_replicas = count(max, errors);
    let desired = replicas_count.or(min_replicas).unwrap_or(1);
    let min_count = min_replicas.unwrap_or(desired);
    if min_count > desired {
        errors.push(
            min.path,
            format!(
                "must not be greater than {} ({min_count} > {desired})",
                replicas.called
            ),
        );
    }
    if let Some(max_count) = max_replicas {
        if desired > max_count {
            errors.push(
                replicas.path,
                format!(
                    "must not be greater than {} ({desired} > {max_count})",
                    max.called
                ),
            );
        }
        // A defaulted minimum equals `desired`, whose excess is reported above.
        if let Some(min_count) = min_replicas.filter(|min| *min > max_count) {
            errors.push(
                min.path,
                format!(
                    "must not be greater than {} ({min_count} > {max_count})",
                    max.called
                ),
            );
        }
    }
    WorkerCounts {
        desired,
        min: min_count,
        max: max_replicas,
        spares: 0,
    }
}
