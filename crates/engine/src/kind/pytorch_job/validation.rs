//! The rules of a PyTorchJob: training-operator v1's webhook rules, checked again in case the
//! CRD that admitted the job lacks them (v1's own CRD has none: its webhook checked them), and
//! eto's.
//!
//! v1's rules: a DNS-1035 name; replica types `Master` and `Worker` only; a Master with
//! `replicas: 1` written out; Workers at least 1; every replica type with a template whose
//! containers have images, one of them named `pytorch`; `elasticPolicy` only with Workers, and
//! not both `nprocPerNode` fields; `managedBy` v1's or MultiKueue's. eto's: at least one
//! replica type, `nprocPerNode` that torchrun reads (`auto`, `cpu`, `gpu` or a positive
//! number), non-negative run limits, elastic bounds from 1 with `minReplicas <= maxReplicas`,
//! `elasticPolicy.metrics` that kube-apiserver accepts in a HorizontalPodAutoscaler (see
//! [`super::metrics`]), no volume or mount where eto puts its own files, and a name short
//! enough for `<name>-worker-<index>`.

use eto_api::PyTorchJob;
use eto_api::common::ReplicaRestartPolicy;
use eto_api::elastic::ElasticPolicy;
use eto_api::pytorch_job::{
    MASTER, MULTIKUEUE, PYTORCH_CONTAINER, ReplicaGroups as ReplicaGroupsSpec, TRAINING_OPERATOR,
    WORKER,
};
use eto_api::training_job::JobRestartPolicy;

use crate::builders::DISCOVERY_DIR;
use crate::effective_spec::{EffectiveSpec, LauncherStart, SshSecretSource, WorkerCounts};
use crate::job::InvalidSpec;
use crate::job::Kind;
use crate::kind::pytorch_job::Defaulted;
use crate::kind::pytorch_job::rendezvous::HostedRendezvous;
use crate::kind::pytorch_job::replica_groups::ReplicaGroups;
use crate::validation::{
    Errors, ReservedPaths, RunLimitFields, RunLimits, check_job_name, check_template,
    elastic_settings,
};

/// Validates PyTorchJob `job` and applies every default, v1's and eto's.
///
/// The Master, if there is one, is the run's launcher (see
/// [`super::MASTER_POD`]): its `restartPolicy` decides what its failure
/// does (`Never` fails the job; `OnFailure`, `Always` and `ExitCode` restart it, up to
/// `backoffLimit` times); without one, the job succeeds once every Worker has (with
/// `elasticPolicy`: once one has, as v1 decides). A static job's Workers are not replaced
/// within a run (a lost Worker ends the run, whose successor numbers its Workers from 0
/// again). An elastic job whose rendezvous eto hosts (see
/// [`crate::kind::pytorch_job::rendezvous`]) runs between `minReplicas` and `maxReplicas`
/// Workers, toward the Worker replicas, replacing lost Workers under new names and
/// suspending below its minimum; any other elastic job runs its Worker replicas with v1's
/// wiring. A suspend of the spec deletes the pods at once, as v1 does.
///
/// # Errors
/// [`InvalidSpec`] listing every rule the job breaks, each naming its field.
pub fn validate(job: &PyTorchJob) -> Result<EffectiveSpec, InvalidSpec> {
    validate_with_container(job, PYTORCH_CONTAINER)
}

/// [`validate`], for a job whose pods train in the container named `container` (a TrainJob's
/// `node`) rather than v1's `pytorch`.
///
/// # Errors
/// [`InvalidSpec`] listing every rule the job breaks, each naming its field.
pub fn validate_with_container(
    job: &PyTorchJob,
    container: &str,
) -> Result<EffectiveSpec, InvalidSpec> {
    let mut errors = Errors::default();
    let limits = check(job, container, &mut errors);
    let spec = &job.spec;
    let defaulted = Defaulted::of(job);
    let workers = defaulted
        .worker
        .as_ref()
        .map_or(0, |worker| worker.replicas);
    let run_policy = spec.run_policy.clone().unwrap_or_default();
    // eto runs the group: it hosts the rendezvous, or the Workers are replica groups.
    let groups = ReplicaGroups::of(job);
    let replica_groups = groups.is_some();
    // The engine counts Worker pods; replica groups count groups of this many.
    let pods_per_group = groups.map_or(1, |groups| groups.pods_per_group);
    let eto_runs_group = HostedRendezvous::of(job).is_some() || replica_groups;
    // eto's settings apply where eto runs the group; elsewhere the defaults do.
    let eto = spec
        .elastic_policy
        .as_ref()
        .map(|policy| &policy.eto)
        .filter(|_| eto_runs_group);
    let mut elastic = elastic_settings(&job.metadata, eto, &mut errors);
    // Replica groups are eto's own: v1's ways need not be kept for them.
    if !replica_groups && eto.is_none_or(|eto| *eto == ElasticPolicy::default()) {
        // As v1 runs them: a suspend (Kueue's preemption) deletes the pods at once, and the
        // pods' commands run as they are.
        elastic.spec_suspend_grace = std::time::Duration::ZERO;
        elastic.checkpoint_on_termination = false;
    }
    // A static job's minimum is all its ranks: a lost one ends the run at once (see
    // plan/run/rank_loss.rs), it does not wait below the minimum. An elastic job whose
    // rendezvous eto hosts goes on above its minimum and suspends below it.
    elastic.suspend_below_min_workers = eto_runs_group;
    let counts = match (&defaulted.elastic, eto_runs_group) {
        (Some(bounds), true) => WorkerCounts {
            desired: workers
                .clamp(bounds.min, bounds.max.max(bounds.min))
                .saturating_mul(pods_per_group),
            min: bounds.min.saturating_mul(pods_per_group),
            max: Some(bounds.max.max(bounds.min).saturating_mul(pods_per_group)),
            spares: bounds
                .policy
                .spare_replicas
                .map_or(0, |spares| u32::try_from(spares).unwrap_or(0)),
        },
        _ => WorkerCounts {
            desired: workers,
            min: workers,
            max: Some(workers),
            spares: 0,
        },
    };
    // Workers whose rendezvous eto hosts are replaced, under new names, whenever their pod
    // ends or goes: a training failure under `OnFailure` restarts in the pod, so what reaches
    // eto is the platform's doing (a pod gone with its node included), or a failure the
    // Worker's policy leaves to eto; a first Worker that succeeds ends the job before. A static
    // job's Workers are its ranks, whose loss ends the run.
    let worker_restart_policy = if eto_runs_group {
        ReplicaRestartPolicy::Always
    } else {
        ReplicaRestartPolicy::Never
    };
    let job_restart_policy = match defaulted.master.as_ref().map(|m| m.restart_policy) {
        Some(ReplicaRestartPolicy::Never) => JobRestartPolicy::Never,
        _ => JobRestartPolicy::OnFailure,
    };
    errors.into_result(
        Kind::PYTORCH_JOB,
        EffectiveSpec {
            workers: counts,
            slots_per_worker: 1,
            clean_pod_policy: defaulted.clean_pod_policy,
            job_restart_policy,
            backoff_limit: limits.backoff_limit,
            worker_restart_policy,
            suspend: run_policy.suspend.unwrap_or(false),
            active_deadline: limits.active_deadline,
            ttl_after_finished: limits.ttl_after_finished,
            elastic,
            ssh_secret: SshSecretSource::Unused,
            launcher_start: LauncherStart::AtStartup,
            mpi: None,
            scheduling_policy: run_policy.scheduling_policy.clone(),
        },
    )
}

/// The most pods a replica group may have: a torchrun group of this many nodes.
const MAX_PODS_PER_GROUP: i32 = 1024;

/// Adds to `errors` every rule `groups`, the replica groups of `job`, break: a job of groups
/// has no Master, its groups have 1 to [`MAX_PODS_PER_GROUP`] pods, groups of several pods
/// are not scaled by `metrics` (the scale subresource counts groups in its spec but pods in
/// its status, which a HorizontalPodAutoscaler would misread), and the Lighthouse's port and
/// timeouts are in range.
fn check_replica_groups(job: &PyTorchJob, groups: &ReplicaGroupsSpec, errors: &mut Errors) {
    const FIELD: &str = "spec.elasticPolicy.replicaGroups";
    if job.spec.pytorch_replica_specs.contains_key(MASTER) {
        errors.push(
            FIELD,
            format!("a job of replica groups has no {MASTER}: its Workers form the groups"),
        );
    }
    match groups.pods_per_group {
        Some(size) if !(1..=MAX_PODS_PER_GROUP).contains(&size) => errors.push(
            format!("{FIELD}.podsPerGroup"),
            format!("must be between 1 and {MAX_PODS_PER_GROUP}, not {size}"),
        ),
        Some(size)
            if size > 1
                && job
                    .spec
                    .elastic_policy
                    .as_ref()
                    .is_some_and(|policy| policy.metrics.is_some()) =>
        {
            errors.push(
                format!("{FIELD}.podsPerGroup"),
                format!(
                    "cannot be {size} with spec.elasticPolicy.metrics: an autoscaler would count \
                     pods where the Worker replicas count groups; scale groups of several pods \
                     through the Worker replicas"
                ),
            );
        }
        _ => {}
    }
    let lighthouse = groups.lighthouse.clone().unwrap_or_default();
    if let Some(port) = lighthouse.port.filter(|port| !(1..=65535).contains(port)) {
        errors.push(
            format!("{FIELD}.lighthouse.port"),
            format!("must be between 1 and 65535, not {port}"),
        );
    }
    for (field, value) in [
        ("heartbeatTimeoutMs", lighthouse.heartbeat_timeout_ms),
        ("joinTimeoutMs", lighthouse.join_timeout_ms),
        ("quorumTickMs", lighthouse.quorum_tick_ms),
    ] {
        if let Some(value) = value.filter(|value| *value < 1) {
            errors.push(
                format!("{FIELD}.lighthouse.{field}"),
                format!("must be at least 1, not {value}"),
            );
        }
    }
}

/// Adds every rule `job` breaks to `errors`; returns its run limits as validated.
fn check(job: &PyTorchJob, container: &str, errors: &mut Errors) -> RunLimits {
    let spec = &job.spec;
    check_job_name(job.metadata.name.as_deref().unwrap_or_default(), errors);
    if spec.pytorch_replica_specs.is_empty() {
        errors.push(
            "spec.pytorchReplicaSpecs",
            format!("needs a {MASTER} or {WORKER}"),
        );
    }
    let reserved = ReservedPaths {
        first: &[DISCOVERY_DIR],
        others: &[DISCOVERY_DIR],
    };
    for (key, replica) in &spec.pytorch_replica_specs {
        let path = format!("spec.pytorchReplicaSpecs.{key}");
        match key.as_str() {
            MASTER => match replica.replicas {
                Some(1) => {}
                Some(other) => errors.push(
                    format!("{path}.replicas"),
                    format!("must be 1, not {other}"),
                ),
                None => errors.push(format!("{path}.replicas"), "must be set to 1"),
            },
            WORKER => {
                if let Some(replicas) = replica.replicas.filter(|replicas| *replicas < 1) {
                    errors.push(
                        format!("{path}.replicas"),
                        format!("must be at least 1, not {replicas}"),
                    );
                }
            }
            _ => errors.push(
                format!("spec.pytorchReplicaSpecs[{key}]"),
                format!("unknown replica type {key:?}; the types are {MASTER} and {WORKER}"),
            ),
        }
        let Some(template) = &replica.template else {
            errors.push(format!("{path}.template"), "is required");
            continue;
        };
        check_template(&format!("{path}.template"), template, &reserved, errors);
        let containers = template.spec.iter().flat_map(|pod| &pod.containers);
        if !containers.clone().any(|c| c.name == container)
            && template
                .spec
                .as_ref()
                .is_some_and(|pod| !pod.containers.is_empty())
        {
            errors.push(
                format!("{path}.template.spec.containers"),
                format!("needs a container named {container:?}: it is the one eto configures"),
            );
        }
    }
    if let Some(nproc) = &spec.nproc_per_node
        && !matches!(nproc.as_str(), "auto" | "cpu" | "gpu")
        && nproc.parse::<u32>().map_or(true, |n| n == 0)
    {
        errors.push(
            "spec.nprocPerNode",
            format!("must be auto, cpu, gpu or a positive number, not {nproc:?}"),
        );
    }
    if let Some(policy) = &spec.elastic_policy {
        if !spec.pytorch_replica_specs.contains_key(WORKER) {
            errors.push(
                "spec.elasticPolicy",
                format!("needs Workers: add pytorchReplicaSpecs.{WORKER}"),
            );
        }
        if policy.n_proc_per_node.is_some() && spec.nproc_per_node.is_some() {
            errors.push(
                "spec.elasticPolicy.nProcPerNode",
                "is deprecated and cannot be set with spec.nprocPerNode; keep spec.nprocPerNode",
            );
        }
        for (field, value) in [
            ("minReplicas", policy.min_replicas),
            ("maxReplicas", policy.max_replicas),
        ] {
            if let Some(value) = value.filter(|value| *value < 1) {
                errors.push(
                    format!("spec.elasticPolicy.{field}"),
                    format!("must be at least 1, not {value}"),
                );
            }
        }
        if let (Some(min), Some(max)) = (policy.min_replicas, policy.max_replicas)
            && min > max
        {
            errors.push(
                "spec.elasticPolicy.minReplicas",
                format!("must not be greater than maxReplicas ({min} > {max})"),
            );
        }
        if let Some(metrics) = &policy.metrics {
            super::metrics::check(metrics, "spec.elasticPolicy.metrics", errors);
        }
        if let Some(groups) = &policy.replica_groups {
            check_replica_groups(job, groups, errors);
        }
        if let Some(spares) = policy.spare_replicas {
            if spares < 0 {
                errors.push(
                    "spec.elasticPolicy.spareReplicas",
                    format!("must not be negative, not {spares}"),
                );
            } else if let Some(size) = policy
                .replica_groups
                .as_ref()
                .and_then(|groups| groups.pods_per_group)
                .filter(|size| spares > 0 && *size > 1)
            {
                errors.push(
                    "spec.elasticPolicy.spareReplicas",
                    format!(
                        "spare groups need replicaGroups.podsPerGroup 1, not {size}: a spare \
                         waits as one pod"
                    ),
                );
            } else if spares > 0
                && policy.replica_groups.is_none()
                && HostedRendezvous::of(job).is_none()
            {
                errors.push(
                    "spec.elasticPolicy.spareReplicas",
                    "needs the rendezvous eto hosts: no Master, no rdzvHost, rdzvBackend c10d, \
                     not standalone",
                );
            }
        }
    }
    let run_policy = spec.run_policy.clone().unwrap_or_default();
    if let Some(manager) = run_policy
        .managed_by
        .as_deref()
        .filter(|manager| ![TRAINING_OPERATOR, MULTIKUEUE].contains(manager))
    {
        errors.push(
            "spec.runPolicy.managedBy",
            format!("must be {TRAINING_OPERATOR} or {MULTIKUEUE}, not {manager:?}"),
        );
    }
    RunLimitFields {
        parent: "spec.runPolicy",
        backoff_limit: run_policy.backoff_limit,
        active_deadline_seconds: run_policy.active_deadline_seconds,
        ttl_seconds_after_finished: run_policy.ttl_seconds_after_finished,
    }
    .check(errors)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    use super::*;

    fn pod(container: &str) -> Value {
        json!({"spec": {"containers": [{"name": container, "image": "torch"}]}})
    }

    fn job(spec: Value) -> PyTorchJob {
        let mut value = json!({
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "ddp"},
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod("pytorch")},
                "Worker": {"replicas": 2, "template": pod("pytorch")}
            }}
        });
        json_patch::merge(&mut value, &spec);
        serde_json::from_value(value).unwrap()
    }

    fn errors(spec: Value) -> Vec<String> {
        let mut errors = Errors::default();
        check(&job(spec), PYTORCH_CONTAINER, &mut errors);
        errors.0.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn jobs_v1_accepted_are_accepted() {
        let accepted = [
            json!({}),
            json!({"spec": {"pytorchReplicaSpecs": {"Master": null}}}),
            json!({"spec": {"pytorchReplicaSpecs": {"Worker": null}}}),
            json!({"spec": {"nprocPerNode": "8"}}),
            json!({"spec": {"nprocPerNode": "gpu", "runPolicy": {"managedBy": "kubeflow.org/training-operator", "backoffLimit": 0}}}),
            json!({"spec": {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 4, "nProcPerNode": 2}}}),
        ];
        for spec in accepted {
            assert_eq!(errors(spec.clone()), Vec::<String>::new(), "{spec}");
        }
    }

    #[test]
    fn each_rule_names_its_field() {
        let cases = [
            (
                json!({"metadata": {"name": "DDP"}}),
                "metadata.name: must consist of lowercase letters",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Master": null, "Worker": null}}}),
                "spec.pytorchReplicaSpecs: needs a Master or Worker",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"worker": {"template": pod("pytorch")}}}}),
                "spec.pytorchReplicaSpecs[worker]: unknown replica type \"worker\"",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": null}}}}),
                "spec.pytorchReplicaSpecs.Master.replicas: must be set to 1",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 2}}}}),
                "spec.pytorchReplicaSpecs.Master.replicas: must be 1, not 2",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 0}}}}),
                "spec.pytorchReplicaSpecs.Worker.replicas: must be at least 1, not 0",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Worker": {"template": null}}}}),
                "spec.pytorchReplicaSpecs.Worker.template: is required",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Worker": {"template": pod("trainer")}}}}),
                "spec.pytorchReplicaSpecs.Worker.template.spec.containers: needs a container named \"pytorch\"",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Master": {"template": {"spec": {"containers": [{"name": "pytorch"}]}}}}}}),
                "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].image: is required",
            ),
            (
                json!({"spec": {"nprocPerNode": "0"}}),
                "spec.nprocPerNode: must be auto, cpu, gpu or a positive number, not \"0\"",
            ),
            (
                json!({"spec": {"nprocPerNode": "all"}}),
                "spec.nprocPerNode: must be auto, cpu, gpu or a positive number, not \"all\"",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Worker": null}, "elasticPolicy": {}}}),
                "spec.elasticPolicy: needs Workers",
            ),
            (
                json!({"spec": {"nprocPerNode": "2", "elasticPolicy": {"nProcPerNode": 2}}}),
                "spec.elasticPolicy.nProcPerNode: is deprecated",
            ),
            (
                json!({"spec": {"elasticPolicy": {"minReplicas": 3, "maxReplicas": 2}}}),
                "spec.elasticPolicy.minReplicas: must not be greater than maxReplicas (3 > 2)",
            ),
            (
                json!({"spec": {"elasticPolicy": {"minReplicas": 0}}}),
                "spec.elasticPolicy.minReplicas: must be at least 1, not 0",
            ),
            (
                json!({"spec": {"elasticPolicy": {"spareReplicas": -1}}}),
                "spec.elasticPolicy.spareReplicas: must not be negative, not -1",
            ),
            (
                json!({"spec": {"elasticPolicy": {"spareReplicas": 1}}}),
                "spec.elasticPolicy.spareReplicas: needs the rendezvous eto hosts",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Master": null}, "elasticPolicy": {"spareReplicas": 1, "replicaGroups": {"podsPerGroup": 2}}}}),
                "spec.elasticPolicy.spareReplicas: spare groups need replicaGroups.podsPerGroup 1, not 2",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Master": null}, "elasticPolicy": {"replicaGroups": {"podsPerGroup": 0}}}}),
                "spec.elasticPolicy.replicaGroups.podsPerGroup: must be between 1 and 1024, not 0",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Master": null}, "elasticPolicy": {"metrics": [], "replicaGroups": {"podsPerGroup": 2}}}}),
                "spec.elasticPolicy.replicaGroups.podsPerGroup: cannot be 2 with spec.elasticPolicy.metrics",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Master": null}, "elasticPolicy": {"replicaGroups": {"lighthouse": {"port": 70000}}}}}),
                "spec.elasticPolicy.replicaGroups.lighthouse.port: must be between 1 and 65535, not 70000",
            ),
            (
                json!({"spec": {"pytorchReplicaSpecs": {"Master": null}, "elasticPolicy": {"replicaGroups": {"lighthouse": {"heartbeatTimeoutMs": 0}}}}}),
                "spec.elasticPolicy.replicaGroups.lighthouse.heartbeatTimeoutMs: must be at least 1, not 0",
            ),
            (
                json!({"spec": {"elasticPolicy": {"replicaGroups": {}}}}),
                "spec.elasticPolicy.replicaGroups: a job of replica groups has no Master",
            ),
            (
                json!({"spec": {"runPolicy": {"managedBy": ""}}}),
                "spec.runPolicy.managedBy: must be kubeflow.org/training-operator or kueue.x-k8s.io/multikueue, not \"\"",
            ),
            (
                json!({"spec": {"runPolicy": {"backoffLimit": -1}}}),
                "spec.runPolicy.backoffLimit",
            ),
        ];
        for (spec, expected) in cases {
            let found = errors(spec.clone());
            assert!(
                found.len() == 1 && found[0].starts_with(expected),
                "{spec}: expected one error starting with {expected:?}, got {found:?}"
            );
        }
    }

    #[test]
    fn etos_elastic_settings_apply_where_eto_hosts_the_rendezvous() {
        use std::time::Duration;
        let elastic = |policy: Value| {
            json!({"spec": {
                "pytorchReplicaSpecs": {"Master": null, "Worker": {"replicas": 3}},
                "elasticPolicy": policy
            }})
        };
        let spec = validate(&job(elastic(json!({
            "minReplicas": 2, "maxReplicas": 4, "belowMinSeconds": 5, "checkpointGraceSeconds": 20
        }))))
        .unwrap();
        assert_eq!(
            (spec.workers.desired, spec.workers.min, spec.workers.max),
            (3, 2, Some(4))
        );
        assert_eq!(spec.elastic.below_min, Duration::from_secs(5));
        assert_eq!(spec.elastic.checkpoint_grace, Duration::from_secs(20));
        assert_eq!(spec.elastic.spec_suspend_grace, Duration::from_secs(20));
        assert!(spec.elastic.suspend_below_min_workers);
        assert_eq!(spec.workers.spares, 0);

        let spares = validate(&job(elastic(json!({
            "minReplicas": 2, "maxReplicas": 4, "spareReplicas": 1
        }))))
        .unwrap();
        assert_eq!(spares.workers.spares, 1);

        let spare_group = job(elastic(json!({
            "minReplicas": 2, "maxReplicas": 4, "spareReplicas": 1, "replicaGroups": {}
        })));
        assert_eq!(validate(&spare_group).unwrap().workers.spares, 1);

        let unset = validate(&job(elastic(json!({"minReplicas": 2, "maxReplicas": 4})))).unwrap();
        assert_eq!(
            unset.elastic.spec_suspend_grace,
            Duration::ZERO,
            "without eto's settings a suspend is immediate, as Kueue expects"
        );
        let groups = validate(&job(elastic(json!({
            "minReplicas": 2, "maxReplicas": 4, "replicaGroups": {}
        }))))
        .unwrap();
        assert!(
            !groups.elastic.spec_suspend_grace.is_zero()
                && groups.elastic.checkpoint_on_termination,
            "replica groups are eto's own: its settings apply without any set"
        );
        let pairs = validate(&job(elastic(json!({
            "minReplicas": 2, "maxReplicas": 4, "replicaGroups": {"podsPerGroup": 2}
        }))))
        .unwrap();
        assert_eq!(
            (pairs.workers.desired, pairs.workers.min, pairs.workers.max),
            (6, 4, Some(8)),
            "the counts of groups of two, in pods"
        );
        let huge = validate(&job(elastic(json!({
            "minReplicas": 2, "maxReplicas": i32::MAX, "replicaGroups": {"podsPerGroup": 1024}
        }))))
        .unwrap();
        assert_eq!(
            huge.workers.max,
            Some(u32::MAX),
            "counts saturate, never overflow"
        );

        let own_host = validate(&job(elastic(json!({
            "minReplicas": 2, "maxReplicas": 4, "rdzvHost": "ddp-worker-0", "belowMinSeconds": 5
        }))))
        .unwrap();
        assert_eq!(
            (own_host.workers.min, own_host.workers.max),
            (3, Some(3)),
            "v1's wiring runs the Worker replicas"
        );
        assert!(!own_host.elastic.suspend_below_min_workers);
        assert_eq!(own_host.elastic.below_min, Duration::from_secs(30));

        let errors = validate(&job(elastic(json!({"belowMinSeconds": -1})))).unwrap_err();
        assert_eq!(
            errors.errors[0].to_string(),
            "spec.elasticPolicy.belowMinSeconds: must not be negative, not -1"
        );
    }
}
