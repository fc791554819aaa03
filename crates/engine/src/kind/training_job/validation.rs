//! Validation and defaulting of a TrainingJob.

use eto_api::common::CleanPodPolicy;
use eto_api::common::ReplicaRestartPolicy;
use eto_api::training_job::{JobRestartPolicy, LauncherAttachMode, TrainingJob, WorkerSpec};
use eto_api::well_known::SSH_SECRET_ANNOTATION;
use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::builders::{DEEPSPEED_DIR, DISCOVERY_DIR, SSH_DIR};
use crate::effective_spec::{EffectiveSpec, LauncherStart, SshSecretSource, WorkerCounts};
use crate::job::InvalidSpec;
use crate::job::Kind;
use crate::names::is_dns1123_subdomain;
use crate::validation::{
    CountField, Errors, GPU_RESOURCE, ReservedPaths, RunLimitFields, check_job_name,
    check_template, elastic_settings, gpu_quantity, positive, suspended_by_annotation,
};

/// Where eto mounts its files in the launcher: the SSH key pair in every container, host
/// discovery and the notice in the first, the DeepSpeed hostfile in the first.
const LAUNCHER_PATHS: ReservedPaths<'static> = ReservedPaths {
    first: &[SSH_DIR, DISCOVERY_DIR, DEEPSPEED_DIR],
    others: &[SSH_DIR],
};
/// Where eto mounts its files in the workers: the SSH key pair and the notice, everywhere.
const WORKER_PATHS: ReservedPaths<'static> = ReservedPaths {
    first: &[SSH_DIR, DISCOVERY_DIR],
    others: &[SSH_DIR, DISCOVERY_DIR],
};

/// Validates TrainingJob `job` and applies every default.
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
        &LAUNCHER_PATHS,
        &mut errors,
    );

    let worker = &spec.et_replica_specs.worker;
    let workers = worker_counts(worker, &mut errors);
    check_template(
        "spec.etReplicaSpecs.worker.template",
        &worker.template,
        &WORKER_PATHS,
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

    let limits = RunLimitFields {
        parent: "spec",
        backoff_limit: spec.backoff_limit,
        active_deadline_seconds: spec.active_deadline_seconds,
        ttl_seconds_after_finished: spec.ttl_seconds_after_finished,
    }
    .check(&mut errors);
    let elastic = elastic_settings(&job.metadata, spec.elastic_policy.as_ref(), &mut errors);
    let ssh_secret = ssh_secret_source(job, &mut errors);
    let suspend =
        spec.suspend.unwrap_or(false) || suspended_by_annotation(&job.metadata, &mut errors);

    errors.into_result(
        Kind::TRAINING_JOB,
        EffectiveSpec {
            workers,
            slots_per_worker,
            clean_pod_policy: spec.clean_pod_policy.unwrap_or(CleanPodPolicy::Running),
            job_restart_policy: spec.restart_policy.unwrap_or(JobRestartPolicy::Never),
            backoff_limit: limits.backoff_limit,
            worker_restart_policy: worker.restart_policy.unwrap_or(ReplicaRestartPolicy::Never),
            suspend,
            active_deadline: limits.active_deadline,
            ttl_after_finished: limits.ttl_after_finished,
            elastic,
            ssh_secret,
            launcher_start: LauncherStart::WhenMinReady,
            mpi: None,
            scheduling_policy: None,
        },
    )
}

fn worker_counts(worker: &WorkerSpec, errors: &mut Errors) -> WorkerCounts {
    crate::validation::worker_counts(
        &CountField {
            value: worker.replicas,
            path: "spec.etReplicaSpecs.worker.replicas",
            called: "replicas",
        },
        &CountField {
            value: worker.min_replicas,
            path: "spec.etReplicaSpecs.worker.minReplicas",
            called: "minReplicas",
        },
        &CountField {
            value: worker.max_replicas,
            path: "spec.etReplicaSpecs.worker.maxReplicas",
            called: "maxReplicas",
        },
        errors,
    )
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use pretty_assertions::assert_eq;

    use eto_api::elastic::ElasticPolicy;
    use eto_api::well_known::{JOB_SUSPENDED_ANNOTATION, MAX_WAIT_TIME_ANNOTATION};

    use super::*;
    use crate::effective_spec::{ElasticSettings, KubeaiStop};
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
                max: None,
                spares: 0,
            }
        );
        assert_eq!(spec.slots_per_worker, 1);
        assert_eq!(spec.clean_pod_policy, CleanPodPolicy::Running);
        assert_eq!(spec.job_restart_policy, JobRestartPolicy::Never);
        assert_eq!(spec.backoff_limit, 6);
        assert_eq!(spec.worker_restart_policy, ReplicaRestartPolicy::Never);
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
                spec_suspend_grace: Duration::from_secs(300),
                blacklist_cooldown: Duration::from_secs(600),
                drain: Duration::from_secs(30),
                kubeai: KubeaiStop {
                    every_pod: false,
                    port: 9009
                },
                launcher_avoids_spot: true,
                checkpoint_on_termination: true,
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
                    max: want_max,
                    spares: 0,
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
            kubeai_stop: Some(true),
            kubeai_port: Some(19009),
            launcher_avoids_spot: Some(false),
            checkpoint_on_termination: Some(false),
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
        assert!(!spec.elastic.suspend_below_min_workers);
        assert!(!spec.elastic.launcher_avoids_spot);
        assert!(!spec.elastic.checkpoint_on_termination);
        assert_eq!(spec.elastic.below_min, Duration::from_secs(10));
        assert_eq!(spec.elastic.checkpoint_grace, Duration::from_secs(30));
        assert_eq!(spec.elastic.blacklist_cooldown, Duration::ZERO);
        assert_eq!(
            spec.elastic.kubeai,
            KubeaiStop {
                every_pod: true,
                port: 19009
            }
        );
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
