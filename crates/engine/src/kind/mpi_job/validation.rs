//! Validation and defaulting of an MPIJob.
//!
//! The rules are mpi-operator's, with eto's additions: `elasticPolicy` bounds, Worker restart
//! policies `ExitCode` and `Always`, and Worker replicas that default to the minimum (or 1)
//! instead of being required.

use eto_api::common::CleanPodPolicy;
use eto_api::common::ReplicaRestartPolicy;
use eto_api::mpi_job::{
    LAUNCHER, LauncherCreationPolicy, MPIJob, MpiImplementation, MpiReplicaSpec, WORKER,
};
use eto_api::training_job::JobRestartPolicy;

use crate::builders::{DISCOVERY_DIR, MPI_CONFIG_DIR};
use crate::effective_spec::{
    EffectiveSpec, LauncherStart, MpiSettings, SshSecretSource, WorkerCounts,
};
use crate::job::InvalidSpec;
use crate::job::Kind;
use crate::validation::{
    CountField, Errors, ReservedPaths, RunLimitFields, check_job_name, check_template,
    elastic_settings, positive,
};

/// Default of `sshAuthMountPath`.
pub const DEFAULT_SSH_AUTH_MOUNT_PATH: &str = "/root/.ssh";

/// Validates MPIJob `job` and applies every default, mpi-operator's and eto's.
///
/// # Errors
/// [`InvalidSpec`] listing every rule the job breaks, each naming its field.
pub fn validate(job: &MPIJob) -> Result<EffectiveSpec, InvalidSpec> {
    let mut errors = Errors::default();
    let spec = &job.spec;
    check_job_name(
        job.metadata.name.as_deref().unwrap_or_default(),
        &mut errors,
    );
    for key in spec.mpi_replica_specs.keys() {
        if key != LAUNCHER && key != WORKER {
            errors.push(
                format!("spec.mpiReplicaSpecs[{key}]"),
                format!("unknown replica type {key:?}; the types are {LAUNCHER} and {WORKER}"),
            );
        }
    }

    let ssh_auth_mount_path = spec
        .ssh_auth_mount_path
        .clone()
        .unwrap_or_else(|| DEFAULT_SSH_AUTH_MOUNT_PATH.into());
    let ssh_path = ssh_auth_mount_path.trim_end_matches('/');
    if !ssh_auth_mount_path.starts_with('/') || ssh_path.is_empty() {
        errors.push(
            "spec.sshAuthMountPath",
            format!("must be an absolute directory path, not {ssh_auth_mount_path:?}"),
        );
    } else if [MPI_CONFIG_DIR, DISCOVERY_DIR].contains(&ssh_path) {
        errors.push(
            "spec.sshAuthMountPath",
            format!("{ssh_auth_mount_path} is where eto mounts the MPI configuration or notice"),
        );
    }

    let launcher_paths = ReservedPaths {
        first: &[ssh_path, MPI_CONFIG_DIR, DISCOVERY_DIR],
        others: &[],
    };
    let worker_paths = ReservedPaths {
        first: &[ssh_path, DISCOVERY_DIR],
        others: &[DISCOVERY_DIR],
    };
    match spec.mpi_replica_specs.get(LAUNCHER) {
        None => errors.push(
            format!("spec.mpiReplicaSpecs.{LAUNCHER}"),
            "is required: the job needs a launcher",
        ),
        Some(launcher) => {
            let path = format!("spec.mpiReplicaSpecs.{LAUNCHER}");
            if let Some(replicas) = launcher.replicas.filter(|replicas| *replicas != 1) {
                errors.push(
                    format!("{path}.replicas"),
                    format!("must be 1, not {replicas}"),
                );
            }
            if let Some(policy) = launcher.restart_policy.filter(|policy| {
                !matches!(
                    policy,
                    ReplicaRestartPolicy::OnFailure | ReplicaRestartPolicy::Never
                )
            }) {
                errors.push(
                    format!("{path}.restartPolicy"),
                    format!("must be OnFailure or Never, not {policy:?}"),
                );
            }
            template(&path, launcher, &launcher_paths, &mut errors);
        }
    }

    let elastic_policy = spec.elastic_policy.as_ref();
    let worker = spec.mpi_replica_specs.get(WORKER);
    let workers = worker_counts(worker, elastic_policy, &mut errors);
    if let Some(worker) = worker {
        template(
            &format!("spec.mpiReplicaSpecs.{WORKER}"),
            worker,
            &worker_paths,
            &mut errors,
        );
    }

    let slots_per_worker = positive(
        "spec.slotsPerWorker",
        spec.slots_per_worker.unwrap_or(1),
        &mut errors,
    );
    let run_policy = spec.run_policy.clone().unwrap_or_default();
    let limits = RunLimitFields {
        parent: "spec.runPolicy",
        backoff_limit: run_policy.backoff_limit,
        active_deadline_seconds: run_policy.active_deadline_seconds,
        ttl_seconds_after_finished: run_policy.ttl_seconds_after_finished,
    }
    .check(&mut errors);
    let mut elastic = elastic_settings(
        &job.metadata,
        elastic_policy.map(|policy| &policy.policy),
        &mut errors,
    );
    if elastic_policy.is_none() {
        // Without eto's protocol, a suspend (Kueue's preemption) deletes the pods at once, as
        // mpi-operator does: Kueue admits the preemptor only once they are gone.
        elastic.spec_suspend_grace = std::time::Duration::ZERO;
        // Its pods' commands run as mpi-operator runs them.
        elastic.checkpoint_on_termination = false;
    }
    if let Some(policy) = &run_policy.scheduling_policy {
        if let Some(min_available) = policy.min_available {
            positive(
                "spec.runPolicy.schedulingPolicy.minAvailable",
                min_available,
                &mut errors,
            );
        }
        if let Some(timeout) = policy.schedule_timeout_seconds {
            positive(
                "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
                timeout,
                &mut errors,
            );
        }
    }
    let launcher_start = match spec.launcher_creation_policy {
        None | Some(LauncherCreationPolicy::AtStartup) => LauncherStart::AtStartup,
        Some(LauncherCreationPolicy::WaitForWorkersReady) => LauncherStart::WhenMinReady,
    };

    errors.into_result(
        Kind::MPI_JOB,
        EffectiveSpec {
            workers,
            slots_per_worker,
            clean_pod_policy: run_policy.clean_pod_policy.unwrap_or(CleanPodPolicy::None),
            // A failed launcher restarts the job, as the launcher Job's backoff did.
            job_restart_policy: JobRestartPolicy::OnFailure,
            backoff_limit: limits.backoff_limit,
            worker_restart_policy: worker
                .and_then(|w| w.restart_policy)
                .unwrap_or(ReplicaRestartPolicy::Never),
            // A launcher Job that disappears is recreated, as mpi-operator does.
            suspend: run_policy.suspend.unwrap_or(false),
            active_deadline: limits.active_deadline,
            ttl_after_finished: limits.ttl_after_finished,
            elastic,
            ssh_secret: SshSecretSource::Generated,
            launcher_start,
            mpi: Some(MpiSettings {
                implementation: spec
                    .mpi_implementation
                    .unwrap_or(MpiImplementation::OpenMpi),
                ssh_auth_mount_path,
                run_launcher_as_worker: spec.run_launcher_as_worker.unwrap_or(false),
            }),
            scheduling_policy: run_policy.scheduling_policy.clone(),
        },
    )
}

fn template(
    path: &str,
    replica: &MpiReplicaSpec,
    reserved: &ReservedPaths<'_>,
    errors: &mut Errors,
) {
    match &replica.template {
        Some(template) => check_template(&format!("{path}.template"), template, reserved, errors),
        None => errors.push(format!("{path}.template"), "is required"),
    }
}

/// The worker counts: `Worker.replicas` (default: the minimum, or 1) within
/// `elasticPolicy.minReplicas` (default: the replicas) and `maxReplicas`. A job without a
/// Worker spec has no workers.
fn worker_counts(
    worker: Option<&MpiReplicaSpec>,
    policy: Option<&eto_api::mpi_job::MpiElasticPolicy>,
    errors: &mut Errors,
) -> WorkerCounts {
    let Some(worker) = worker else {
        if policy.is_some_and(|p| p.min_replicas.is_some() || p.max_replicas.is_some()) {
            errors.push(
                "spec.elasticPolicy",
                format!("minReplicas and maxReplicas need workers: add mpiReplicaSpecs.{WORKER}"),
            );
        }
        return WorkerCounts {
            desired: 0,
            min: 0,
            max: None,
            spares: 0,
        };
    };
    crate::validation::worker_counts(
        &CountField {
            value: worker.replicas,
            path: &format!("spec.mpiReplicaSpecs.{WORKER}.replicas"),
            called: "the Worker replicas",
        },
        &CountField {
            value: policy.and_then(|p| p.min_replicas),
            path: "spec.elasticPolicy.minReplicas",
            called: "elasticPolicy.minReplicas",
        },
        &CountField {
            value: policy.and_then(|p| p.max_replicas),
            path: "spec.elasticPolicy.maxReplicas",
            called: "elasticPolicy.maxReplicas",
        },
        errors,
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::testing::mpi_job;

    fn valid(job: &MPIJob) -> EffectiveSpec {
        validate(job).unwrap_or_else(|invalid| panic!("expected a valid job: {invalid}"))
    }

    fn errors(job: &MPIJob) -> Vec<String> {
        match validate(job) {
            Ok(spec) => panic!("expected an invalid job, got {spec:?}"),
            Err(invalid) => invalid.errors.iter().map(ToString::to_string).collect(),
        }
    }

    fn patched(patch: serde_json::Value) -> MPIJob {
        let mut value = serde_json::to_value(mpi_job()).unwrap();
        json_patch::merge(&mut value, &patch);
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_minimal_job_gets_mpi_operator_defaults() {
        let spec = valid(&mpi_job());
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
        assert_eq!(spec.clean_pod_policy, CleanPodPolicy::None);
        assert_eq!(spec.job_restart_policy, JobRestartPolicy::OnFailure);
        assert_eq!(spec.backoff_limit, 6);
        assert_eq!(spec.worker_restart_policy, ReplicaRestartPolicy::Never);
        assert_eq!(spec.launcher_start, LauncherStart::AtStartup);
        assert!(!spec.suspend);
        assert_eq!(
            spec.mpi,
            Some(MpiSettings {
                implementation: MpiImplementation::OpenMpi,
                ssh_auth_mount_path: "/root/.ssh".into(),
                run_launcher_as_worker: false,
            })
        );
    }

    #[test]
    fn fields_map_onto_the_engine() {
        let spec = valid(&patched(json!({"spec": {
            "slotsPerWorker": 4,
            "runLauncherAsWorker": true,
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiImplementation": "Intel",
            "runPolicy": {
                "cleanPodPolicy": "Running", "backoffLimit": 0, "suspend": true,
                "activeDeadlineSeconds": 3600, "ttlSecondsAfterFinished": 60
            },
            "mpiReplicaSpecs": {"Worker": {"replicas": 4, "restartPolicy": "OnFailure"}},
            "elasticPolicy": {"minReplicas": 2, "maxReplicas": 8, "drainSeconds": 5}
        }})));
        assert_eq!(
            spec.workers,
            WorkerCounts {
                desired: 4,
                min: 2,
                max: Some(8),
                spares: 0,
            }
        );
        assert_eq!(spec.slots_per_worker, 4);
        assert_eq!(spec.clean_pod_policy, CleanPodPolicy::Running);
        assert_eq!(spec.backoff_limit, 0);
        assert!(spec.suspend);
        assert_eq!(spec.active_deadline, Some(Duration::from_secs(3600)));
        assert_eq!(spec.ttl_after_finished, Some(Duration::from_secs(60)));
        assert_eq!(spec.worker_restart_policy, ReplicaRestartPolicy::OnFailure);
        assert_eq!(spec.launcher_start, LauncherStart::WhenMinReady);
        assert_eq!(spec.elastic.drain, Duration::from_secs(5));
        let mpi = spec.mpi.unwrap();
        assert_eq!(mpi.implementation, MpiImplementation::Intel);
        assert_eq!(mpi.ssh_auth_mount_path, "/home/mpiuser/.ssh");
        assert!(mpi.run_launcher_as_worker);
    }

    #[test]
    fn worker_counts_default_from_each_other() {
        // (Worker replicas, minReplicas, maxReplicas) -> (desired, min, max)
        let cases = [
            ((Some(3), None, None), (3, 3, None)),
            ((None, Some(2), None), (2, 2, None)),
            ((None, None, None), (1, 1, None)),
            ((Some(8), Some(1), Some(16)), (8, 1, Some(16))),
        ];
        for ((replicas, min, max), (desired, want_min, want_max)) in cases {
            let mut job = mpi_job();
            job.spec.mpi_replica_specs.get_mut(WORKER).unwrap().replicas = replicas;
            job.spec.elastic_policy = Some(eto_api::mpi_job::MpiElasticPolicy {
                min_replicas: min,
                max_replicas: max,
                ..Default::default()
            });
            assert_eq!(
                valid(&job).workers,
                WorkerCounts {
                    desired,
                    min: want_min,
                    max: want_max,
                    spares: 0,
                }
            );
        }
    }

    #[test]
    fn a_job_without_workers_runs_on_its_launcher() {
        let mut job = mpi_job();
        job.spec.mpi_replica_specs.remove(WORKER);
        assert_eq!(
            valid(&job).workers,
            WorkerCounts {
                desired: 0,
                min: 0,
                max: None,
                spares: 0,
            }
        );
    }

    #[test]
    fn every_rule_names_its_field() {
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (
                json!({"spec": {"mpiReplicaSpecs": {"launcher": {"replicas": 1}}}}),
                "spec.mpiReplicaSpecs[launcher]: unknown replica type \"launcher\"; the types are Launcher and Worker",
            ),
            (
                json!({"spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 2}}}}),
                "spec.mpiReplicaSpecs.Launcher.replicas: must be 1, not 2",
            ),
            (
                json!({"spec": {"mpiReplicaSpecs": {"Launcher": {"restartPolicy": "ExitCode"}}}}),
                "spec.mpiReplicaSpecs.Launcher.restartPolicy: must be OnFailure or Never, not ExitCode",
            ),
            (
                json!({"spec": {"mpiReplicaSpecs": {"Launcher": null}}}),
                "spec.mpiReplicaSpecs.Launcher: is required: the job needs a launcher",
            ),
            (
                json!({"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 0}}}}),
                "spec.mpiReplicaSpecs.Worker.replicas: must be at least 1, not 0",
            ),
            (
                json!({"spec": {"mpiReplicaSpecs": {"Worker": {"template": null}}}}),
                "spec.mpiReplicaSpecs.Worker.template: is required",
            ),
            (
                json!({"spec": {"slotsPerWorker": 0}}),
                "spec.slotsPerWorker: must be at least 1, not 0",
            ),
            (
                json!({"spec": {"runPolicy": {"backoffLimit": -1}}}),
                "spec.runPolicy.backoffLimit: must not be negative, not -1",
            ),
            (
                json!({"spec": {"sshAuthMountPath": "ssh"}}),
                "spec.sshAuthMountPath: must be an absolute directory path, not \"ssh\"",
            ),
            (
                json!({"spec": {"sshAuthMountPath": "/etc/mpi/"}}),
                "spec.sshAuthMountPath: /etc/mpi/ is where eto mounts the MPI configuration or notice",
            ),
            (
                json!({"spec": {"elasticPolicy": {"minReplicas": 3}}}),
                "spec.elasticPolicy.minReplicas: must not be greater than the Worker replicas (3 > 2)",
            ),
            (
                json!({"spec": {"elasticPolicy": {"maxReplicas": 1}}}),
                "spec.mpiReplicaSpecs.Worker.replicas: must not be greater than elasticPolicy.maxReplicas (2 > 1)",
            ),
            (
                json!({"spec": {"mpiReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [
                    {"name": "w", "image": "i", "volumeMounts": [{"name": "x", "mountPath": "/root/.ssh"}]}
                ]}}}}}}),
                "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].volumeMounts[0].mountPath: /root/.ssh is where eto mounts its own files",
            ),
        ];
        for (patch, expected) in cases {
            assert_eq!(errors(&patched(patch.clone())), [expected], "{patch}");
        }
        let mut long = mpi_job();
        long.metadata.name = Some("a".repeat(60));
        assert!(errors(&long)[0].starts_with("metadata.name: must be at most"));
    }

    #[test]
    fn the_error_names_the_kind() {
        let invalid = validate(&patched(json!({"spec": {"slotsPerWorker": 0}}))).unwrap_err();
        assert_eq!(
            invalid.to_string(),
            "invalid MPIJob: spec.slotsPerWorker: must be at least 1, not 0"
        );
    }
}
