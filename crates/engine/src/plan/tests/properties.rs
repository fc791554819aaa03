//! Properties of the planner over random lives of a job of each kind: random specs, random sequences of
//! what happens to its pods (ready, failing, evicted, disrupted, deleted), time passing, scaling
//! and suspending, each followed by a reconcile. After every reconcile:
//!
//! - nothing panics;
//! - no worker name (index) is created twice in the job's life, where a kind never reuses one;
//! - host discovery lists only workers that were ready, running and not being deleted, of the
//!   current run, and not blacklisted;
//! - the target never has more workers than the maximum;
//! - a finished job creates nothing;
//! - a TrainingJob's launcher that exits while its run, having had its minimum, is below it
//!   never fails nor restarts the job: the exit completes a suspend (when
//!   `suspendBelowMinWorkers` holds);
//! - no loss the platform caused, of any pod, ever fails or restarts the job: a job fails or
//!   restarts only when the code of one of its pods failed (a TrainingJob's, only its
//!   launcher's; see [`crate::disruption`]);
//!
//! and, once nothing happens any more, a few reconciles reach a plan that changes nothing.
//!
//! Jobs, and ScaleIn and ScaleOut requests, with random values at random fields plan without a
//! panic, and one that does not decode is reported with a condition naming the field.
//!
//! The number of cases is `ETO_PROPTEST_CASES`: 100,000 by default (about four minutes on two
//! cores; test builds optimise the engine for it, see the workspace's `Cargo.toml`), and
//! `ETO_PROPTEST_CASES=1000000 cargo test --release -p eto-engine properties` runs a million.

use std::collections::BTreeSet;

use eto_api::common::ReplicaRestartPolicy;
use eto_api::job_status::JobPhase;
use eto_api::training_job::JobRestartPolicy;
use eto_api::well_known::{HOSTFILE_ANNOTATION, RUN_LABEL};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::job::{Kind, WorkerNames};
use crate::names;
use crate::plan::{Child, Plan};
use crate::pods;
use crate::testing::world::World;
use crate::testing::{mpi_job, pytorch_job, training_job};

/// The shape of a job.
#[derive(Clone, Debug)]
struct JobShape {
    kind: Kind,
    replicas: i32,
    min: i32,
    max: Option<i32>,
    worker_policy: ReplicaRestartPolicy,
    job_policy: JobRestartPolicy,
    suspend_below_min: bool,
    below_min_seconds: i32,
    checkpoint_grace_seconds: i32,
    drain_seconds: i32,
}

/// Something that happens between reconciles. Pods are picked by position among the pods
/// that exist, so that every pick names one.
#[derive(Clone, Debug)]
enum Happening {
    Ready(usize),
    NotReady(usize),
    Exit(usize, i32),
    Evict(usize),
    Disrupt(usize),
    LoseWithNode(usize),
    EvictThroughApi(usize),
    Delete(usize),
    Vanish(usize),
    Advance(i64),
    Scale(i32),
    Suspend(bool),
}

fn job_shape(kind: Kind) -> impl Strategy<Value = JobShape> {
    (1..6i32)
        .prop_flat_map(|replicas| {
            (
                Just(replicas),
                1..=replicas,
                prop::option::of(replicas..9),
                prop::sample::select(vec![
                    ReplicaRestartPolicy::Never,
                    ReplicaRestartPolicy::OnFailure,
                    ReplicaRestartPolicy::ExitCode,
                    ReplicaRestartPolicy::Always,
                ]),
                prop::sample::select(vec![JobRestartPolicy::Never, JobRestartPolicy::OnFailure]),
                any::<bool>(),
                0..40i32,
                0..40i32,
                0..20i32,
            )
        })
        .prop_map(
            move |(replicas, min, max, worker_policy, job_policy, suspend, below, grace, drain)| {
                JobShape {
                    kind,
                    replicas,
                    min,
                    max,
                    worker_policy,
                    job_policy,
                    suspend_below_min: suspend,
                    below_min_seconds: below,
                    checkpoint_grace_seconds: grace,
                    drain_seconds: drain,
                }
            },
        )
}

fn happening() -> impl Strategy<Value = Happening> {
    prop_oneof![
        4 => any::<usize>().prop_map(Happening::Ready),
        1 => any::<usize>().prop_map(Happening::NotReady),
        2 => (any::<usize>(), prop::sample::select(vec![0, 1, 137, 143])).prop_map(|(p, c)| Happening::Exit(p, c)),
        1 => any::<usize>().prop_map(Happening::Evict),
        1 => any::<usize>().prop_map(Happening::Disrupt),
        1 => any::<usize>().prop_map(Happening::LoseWithNode),
        1 => any::<usize>().prop_map(Happening::EvictThroughApi),
        1 => any::<usize>().prop_map(Happening::Delete),
        1 => any::<usize>().prop_map(Happening::Vanish),
        2 => (1..400i64).prop_map(Happening::Advance),
        1 => (1..9i32).prop_map(Happening::Scale),
        1 => any::<bool>().prop_map(Happening::Suspend),
    ]
}

fn world_of(shape: &JobShape) -> World {
    let elastic = json!({
        "minReplicas": shape.min,
        "maxReplicas": shape.max,
        "suspendBelowMinWorkers": shape.suspend_below_min,
        "belowMinSeconds": shape.below_min_seconds,
        "checkpointGraceSeconds": shape.checkpoint_grace_seconds,
        "drainSeconds": shape.drain_seconds,
    });
    let workers = json!({"replicas": shape.replicas, "restartPolicy": shape.worker_policy});
    match shape.kind.vocabulary().name {
        "TrainingJob" => {
            let mut job = training_job();
            let worker = &mut job.spec.et_replica_specs.worker;
            worker.replicas = Some(shape.replicas);
            worker.min_replicas = Some(shape.min);
            worker.max_replicas = shape.max;
            worker.restart_policy = Some(shape.worker_policy);
            job.spec.restart_policy = Some(shape.job_policy);
            job.spec.backoff_limit = Some(2);
            job.spec.elastic_policy = Some(eto_api::elastic::ElasticPolicy {
                suspend_below_min_workers: Some(shape.suspend_below_min),
                below_min_seconds: Some(shape.below_min_seconds),
                checkpoint_grace_seconds: Some(shape.checkpoint_grace_seconds),
                drain_seconds: Some(shape.drain_seconds),
                ..Default::default()
            });
            World::new(job)
        }
        "MPIJob" => World::mpi(patched(
            mpi_job(),
            json!({"spec": {
                "mpiReplicaSpecs": {"Worker": workers},
                "elasticPolicy": elastic,
                "runPolicy": {"backoffLimit": 2},
            }}),
        )),
        // An elastic PyTorchJob, whose rendezvous eto hosts.
        _ => {
            let mut elastic = elastic;
            elastic["maxReplicas"] = json!(shape.max.unwrap_or(shape.replicas));
            World::pytorch(patched(
                pytorch_job(),
                json!({"spec": {
                    "pytorchReplicaSpecs": {"Master": null, "Worker": workers},
                    "elasticPolicy": elastic,
                    "runPolicy": {"backoffLimit": 2},
                }}),
            ))
        }
    }
}

/// `job` with the JSON merge patch `patch`.
fn patched<T: Serialize + DeserializeOwned>(job: T, patch: serde_json::Value) -> T {
    let mut value = serde_json::to_value(job).expect("a job serializes");
    json_patch::merge(&mut value, &patch);
    serde_json::from_value(value).expect("the patched job decodes")
}

/// The world's job with the JSON merge patch `patch`.
fn patch_job(world: &mut World, patch: serde_json::Value) {
    if let Some(job) = world.mpi_job.take() {
        world.mpi_job = Some(patched(job, patch));
    } else if let Some(job) = world.pytorch_job.take() {
        world.pytorch_job = Some(patched(job, patch));
    } else {
        world.job = patched(world.job.clone(), patch);
    }
}

fn happen(world: &mut World, happening: &Happening) {
    let names: Vec<String> = world.pods.keys().cloned().collect();
    let pick = |index: usize| names.get(index % names.len().max(1)).cloned();
    let running = |world: &World, name: &str| {
        world.pods[name]
            .spec
            .as_ref()
            .is_some_and(|spec| spec.node_name.is_some())
    };
    match happening {
        Happening::Ready(i) => {
            if let Some(name) = pick(*i) {
                world.ready(&name);
            }
        }
        Happening::NotReady(i) => {
            if let Some(name) = pick(*i).filter(|n| running(world, n)) {
                world.running_not_ready(&name);
            }
        }
        Happening::Exit(i, code) => {
            if let Some(name) = pick(*i).filter(|n| running(world, n)) {
                world.exit(&name, *code);
            }
        }
        Happening::Evict(i) => {
            if let Some(name) = pick(*i).filter(|n| running(world, n)) {
                world.evict(&name);
            }
        }
        Happening::Disrupt(i) => {
            if let Some(name) = pick(*i).filter(|n| running(world, n)) {
                world.disrupt(&name);
            }
        }
        Happening::LoseWithNode(i) => {
            if let Some(name) = pick(*i).filter(|n| running(world, n)) {
                world.lose_with_node(&name);
            }
        }
        Happening::EvictThroughApi(i) => {
            if let Some(name) = pick(*i).filter(|n| running(world, n)) {
                world.disrupt(&name);
                let killed = world.now + jiff::SignedDuration::from_secs(30);
                world.pod(&name).metadata.deletion_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(killed));
            }
        }
        Happening::Delete(i) => {
            if let Some(name) = pick(*i) {
                let killed = world.now + jiff::SignedDuration::from_secs(30);
                world.pod(&name).metadata.deletion_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(killed));
            }
        }
        Happening::Vanish(i) => {
            if let Some(name) = pick(*i) {
                world.pods.remove(&name);
            }
        }
        Happening::Advance(seconds) => world.advance(*seconds),
        Happening::Scale(replicas) => match world.observed().job.kind().vocabulary().name {
            "TrainingJob" => world.job.spec.et_replica_specs.worker.replicas = Some(*replicas),
            "MPIJob" => patch_job(
                world,
                json!({"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": replicas}}}}),
            ),
            _ => world.set_worker_replicas(*replicas),
        },
        Happening::Suspend(suspend) => match world.observed().job.kind().vocabulary().name {
            "TrainingJob" => world.job.spec.suspend = Some(*suspend),
            _ => {
                patch_job(world, json!({"spec": {"runPolicy": {"suspend": suspend}}}));
            }
        },
    }
}

/// Checks one reconcile: `before` is the world it planned from, `plan` what it decided.
fn check(before: &World, plan: &Plan, created: &mut BTreeSet<String>) -> Result<(), String> {
    let observed = before.observed();
    let job = observed.job.name();
    let names_never_reused = observed.job.worker_names() == WorkerNames::NeverReused;
    let status = observed.job.status();
    let finished = matches!(status.phase, Some(JobPhase::Succeeded | JobPhase::Failed));
    let planned_status = plan.status.clone().unwrap_or(status.clone());
    for child in &plan.apply {
        let Child::Pod(pod) = child else { continue };
        let name = pod.metadata.name.clone().unwrap_or_default();
        if before.pods.contains_key(&name) {
            return Err(format!(
                "{name} is applied again, but a pod's spec cannot change"
            ));
        }
        if finished {
            return Err(format!("the finished job creates {name}"));
        }
        if names_never_reused
            && names::worker_index(job, &name).is_some()
            && !created.insert(name.clone())
        {
            return Err(format!("worker {name} is created a second time"));
        }
        if let Some(hosts) = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(HOSTFILE_ANNOTATION))
        {
            check_hosts(before, hosts, &planned_status)?;
        }
    }
    for child in &plan.apply {
        if let Child::PodMetadata(change) = child
            && let Some(hosts) = change.annotation(HOSTFILE_ANNOTATION)
        {
            check_hosts(before, hosts, &planned_status)?;
        }
    }
    check_launcher_exit(before, &status, &planned_status)?;
    check_platform_losses(before, &status, &planned_status)?;
    if let (Ok(spec), Some(status)) = (observed.job.validate(), plan.status.as_ref())
        && let Some(max) = spec.workers.max
        && status.target_workers.len() > max as usize
    {
        return Err(format!(
            "{} target workers, more than the maximum {max}",
            status.target_workers.len()
        ));
    }
    Ok(())
}

/// A launcher exit never fails nor restarts a job whose run is below its minimum (a
/// TrainingJob's launcher starts only once its run had the minimum).
fn check_launcher_exit(
    before: &World,
    status: &crate::status::JobStatus,
    planned: &crate::status::JobStatus,
) -> Result<(), String> {
    let observed = before.observed();
    if observed.job.kind() != Kind::TRAINING_JOB {
        return Ok(());
    }
    let Ok(spec) = observed.job.validate() else {
        return Ok(());
    };
    let launcher = names::launcher(before.job.metadata.name.as_deref().unwrap_or_default());
    let launcher_failed = before
        .pods
        .get(&launcher)
        .is_some_and(|pod| pods::phase(pod) == "Failed");
    let failed = planned.phase == Some(JobPhase::Failed) && status.phase != Some(JobPhase::Failed);
    let restarted = planned.restart_count > status.restart_count;
    if !launcher_failed || !spec.elastic.suspend_below_min_workers || !(failed || restarted) {
        return Ok(());
    }
    let ready = status
        .target_workers
        .iter()
        .filter(|worker| {
            before
                .pods
                .get(*worker)
                .is_some_and(|p| pods::is_ready(p) && !pods::is_disrupted(p))
        })
        .count();
    if ready < spec.workers.min as usize {
        return Err(format!(
            "the launcher's exit {} the job with {ready} of its {} workers ready",
            if failed { "failed" } else { "restarted" },
            spec.workers.min
        ));
    }
    Ok(())
}

/// A job fails or restarts only when its launcher's own code failed, or fails when its
/// Workers' own code failed more times in a row than `backoffLimit` allows (see
/// `plan/run/worker_backoff.rs`): never for a loss the platform caused (a disruption, an
/// eviction, a deletion, a pod gone), of the launcher or of any worker.
///
/// A role's failure is counted in the reconcile that sees it, and the job fails past the
/// limit in the reconcile after (reading the count its status holds), when the failed pod
/// may be gone: each count is checked when it is made, and a failure past the limit counted
/// before is the job's own.
fn check_platform_losses(
    before: &World,
    status: &crate::status::JobStatus,
    planned: &crate::status::JobStatus,
) -> Result<(), String> {
    let observed = before.observed();
    let launcher = observed.job.launcher_name();
    let failed_on_its_own = |pod: &k8s_openapi::api::core::v1::Pod| {
        pods::phase(pod) == "Failed" && crate::disruption::of(pod).is_none()
    };
    let failures = |status: &crate::status::JobStatus, role: &str| {
        status
            .backoff
            .iter()
            .find(|record| record.role == role)
            .map_or(0, |record| record.failures)
    };
    for record in &planned.backoff {
        if record.failures > failures(status, &record.role)
            && !before
                .pods
                .values()
                .any(|pod| crate::own_failure::OwnFailure::of(pod).is_some())
        {
            return Err(format!(
                "{} failures counted ({}) although no pod fails on its own",
                record.role, record.cause
            ));
        }
    }
    let failed = planned.phase == Some(JobPhase::Failed) && status.phase != Some(JobPhase::Failed);
    let restarted = planned.restart_count > status.restart_count;
    if !(failed || restarted) {
        return Ok(());
    }
    let limit = observed
        .job
        .validate()
        .map_or(u32::MAX, |spec| spec.backoff_limit);
    let counted_past_the_limit = failed
        && status
            .backoff
            .iter()
            .any(|record| u32::try_from(record.failures).is_ok_and(|n| n > limit));
    if counted_past_the_limit {
        return Ok(());
    }
    let own_failure = if observed.job.kind() == Kind::TRAINING_JOB {
        before.pods.get(&launcher).is_some_and(failed_on_its_own)
    } else {
        before.pods.values().any(failed_on_its_own)
    };
    // The Workers' back-off counts only their own failures, each a failed pod of theirs.
    let workers_failed_on_their_own = failed
        && status.backoff.iter().any(|record| record.failures > 0)
        && before
            .pods
            .iter()
            .any(|(name, pod)| *name != launcher && failed_on_its_own(pod));
    if own_failure || workers_failed_on_their_own {
        return Ok(());
    }
    Err(format!(
        "the job {} although neither its launcher's code nor its workers' failed: {:?}",
        if failed { "failed" } else { "restarted" },
        before.pods.get(&launcher).map(|pod| &pod.status)
    ))
}

/// Every host in `hosts` is a worker that was ready, running, not being deleted, of the
/// current run and not blacklisted.
fn check_hosts(
    before: &World,
    hosts: &str,
    status: &crate::status::JobStatus,
) -> Result<(), String> {
    for line in hosts.lines() {
        let pod_name = line.split('.').next().unwrap_or_default();
        let Some(pod) = before.pods.get(pod_name) else {
            return Err(format!("discovery lists {pod_name}, which does not exist"));
        };
        let usable = pods::is_ready(pod)
            && pods::phase(pod) == "Running"
            && !pods::is_terminating(pod)
            && !pods::is_disrupted(pod);
        if !usable {
            return Err(format!("discovery lists {pod_name}, which is not ready"));
        }
        let run = pods::label(pod, RUN_LABEL).and_then(|r| r.parse::<i32>().ok());
        if run.is_some_and(|run| run != status.run.unwrap_or(0)) {
            return Err(format!("discovery lists {pod_name} of an earlier run"));
        }
        if status.blacklist.iter().any(|entry| entry.pod == pod_name) {
            return Err(format!("discovery lists {pod_name}, which is blacklisted"));
        }
    }
    Ok(())
}

fn life(shape: &JobShape, happenings: &[Happening]) -> Result<(), TestCaseError> {
    let mut world = world_of(shape);
    let mut created = BTreeSet::new();
    let mut reconcile = |world: &mut World| -> Result<Plan, TestCaseError> {
        let plan = crate::plan::plan(&world.observed(), world.now);
        check(world, &plan, &mut created)
            .map_err(|problem| TestCaseError::fail(format!("{problem}\nplan: {plan:#?}")))?;
        world.apply(&plan);
        Ok(plan)
    };
    let first = reconcile(&mut world)?;
    if !first
        .apply
        .iter()
        .any(|child| matches!(child, Child::Pod(_)))
    {
        return Err(TestCaseError::fail(format!(
            "the job's first reconcile created no pod: {first:#?}"
        )));
    }
    for happening in happenings {
        happen(&mut world, happening);
        reconcile(&mut world)?;
    }
    // Left alone, the world settles: a reconcile with nothing to do.
    for _ in 0..6 {
        if reconcile(&mut world)?.is_empty() {
            return Ok(());
        }
    }
    Err(TestCaseError::fail(
        "six reconciles in a row still changed something",
    ))
}

/// A runner of `ETO_PROPTEST_CASES` cases (default 100,000), keeping no failure files.
fn runner() -> TestRunner {
    runner_of_share(1)
}

/// A runner of one `share`th of `ETO_PROPTEST_CASES` cases, for properties whose cases cost
/// more than they find.
fn runner_of_share(share: u32) -> TestRunner {
    let cases = std::env::var("ETO_PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse::<u32>().ok())
        .unwrap_or(100_000)
        / share.max(1);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Random lives of jobs of `kind`, a third of the cases each kind.
fn random_lives_of(kind: Kind) {
    let mut runner = runner_of_share(3);
    let strategy = (job_shape(kind), prop::collection::vec(happening(), 0..24));
    let result = runner.run(&strategy, |(shape, happenings)| life(&shape, &happenings));
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

#[test]
fn random_lives_of_a_training_job_keep_the_planners_promises() {
    random_lives_of(Kind::TRAINING_JOB);
}

#[test]
fn random_lives_of_an_mpi_job_keep_the_planners_promises() {
    random_lives_of(Kind::MPI_JOB);
}

#[test]
fn random_lives_of_an_elastic_pytorch_job_keep_the_planners_promises() {
    random_lives_of(Kind::PYTORCH_JOB);
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{Value, json};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        prop::sample::select(vec![-1i64, 0, 1, 2, 3, 8, 129, i64::from(i32::MAX) + 1])
            .prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        "[a-zA-Z0-9./:=-]{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "Never",
            "OnFailure",
            "Always",
            "ExitCode",
            "Running",
            "true",
            "1.5",
            "nvidia.com/gpu"
        ])
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
        ]
    })
}

/// One to three mutations: a path, by position in a list of paths, and the value written
/// there (or, with `None`, the key removed).
fn mutations() -> impl Strategy<Value = Vec<(usize, Option<serde_json::Value>)>> {
    prop::collection::vec(
        (any::<usize>(), prop::option::weighted(0.8, json_value())),
        1..4,
    )
}

/// Paths into a job where a mutation lands; the last part is the key written or removed.
const MUTABLE_PATHS: &[&str] = &[
    "spec",
    "spec/etReplicaSpecs",
    "spec/etReplicaSpecs/worker",
    "spec/etReplicaSpecs/worker/replicas",
    "spec/etReplicaSpecs/worker/minReplicas",
    "spec/etReplicaSpecs/worker/maxReplicas",
    "spec/etReplicaSpecs/worker/restartPolicy",
    "spec/etReplicaSpecs/worker/template",
    "spec/etReplicaSpecs/worker/template/spec/containers",
    "spec/etReplicaSpecs/launcher/template/spec",
    "spec/slotsPerWorker",
    "spec/cleanPodPolicy",
    "spec/elasticPolicy",
    "spec/elasticPolicy/maxWaitSeconds",
    "spec/mpiReplicaSpecs",
    "spec/mpiReplicaSpecs/Worker/replicas",
    "spec/mpiReplicaSpecs/Launcher",
    "spec/runPolicy",
    "spec/runPolicy/cleanPodPolicy",
    "spec/runPolicy/suspend",
    "spec/mpiImplementation",
    "metadata/annotations",
    "metadata/name",
    "status",
    "status/workers",
    "status/targetWorkers",
    "status/blacklist",
];

/// Sets (or with `None`, removes) the value at `path` of `object`, creating objects on the way.
fn mutate(object: &mut serde_json::Value, path: &str, value: Option<serde_json::Value>) {
    let mut parts: Vec<&str> = path.split('/').collect();
    let Some(last) = parts.pop() else { return };
    let mut at = object;
    for part in parts {
        if !at.is_object() {
            *at = serde_json::json!({});
        }
        at = at
            .as_object_mut()
            .map(|map| map.entry(part).or_insert(serde_json::json!({})))
            .unwrap_or_else(|| unreachable!("made an object above"));
    }
    if let Some(map) = at.as_object_mut() {
        match value {
            Some(value) => {
                map.insert(last.into(), value);
            }
            None => {
                map.remove(last);
            }
        }
    }
}

/// A job of `kind` mutated at random paths: it parses and plans without a panic, and one that
/// cannot be decoded gets a condition naming what is wrong.
fn plan_mutated(
    kind: crate::job::Kind,
    mutations: &[(usize, Option<serde_json::Value>)],
) -> Result<(), TestCaseError> {
    let mut value = match kind.vocabulary().name {
        "TrainingJob" => serde_json::to_value(training_job()),
        "MPIJob" => serde_json::to_value(crate::testing::mpi_job()),
        _ => serde_json::to_value(crate::testing::pytorch_job()),
    }
    .map_err(|error| TestCaseError::fail(error.to_string()))?;
    for (path, mutation) in mutations {
        mutate(
            &mut value,
            MUTABLE_PATHS[path % MUTABLE_PATHS.len()],
            mutation.clone(),
        );
    }
    let now = jiff::Timestamp::from_second(1_800_000_000).unwrap_or_default();
    let undecodable = |error: crate::field_error::FieldError| -> Result<(), TestCaseError> {
        let plan = crate::plan::plan_undecodable(kind, &Default::default(), None, &error, now);
        let status = plan.status.unwrap_or_default();
        let stalled = crate::conditions::find(&status.conditions, crate::conditions::STALLED)
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        prop_assert!(
            stalled.contains(&error.to_string()),
            "{stalled:?} does not name {error}"
        );
        Ok(())
    };
    match kind.vocabulary().name {
        "TrainingJob" => match crate::parse::parse::<eto_api::TrainingJob>(value) {
            Ok(job) => {
                let mut world = World::new(job);
                world.reconcile();
                world.reconcile();
            }
            Err(error) => undecodable(error)?,
        },
        "MPIJob" => match crate::parse::parse::<eto_api::MPIJob>(value) {
            Ok(job) => {
                let mut world = World::mpi(job);
                world.reconcile();
                world.reconcile();
            }
            Err(error) => undecodable(error)?,
        },
        _ => match crate::parse::parse::<eto_api::PyTorchJob>(value) {
            Ok(job) => {
                let mut world = World::pytorch(job);
                world.reconcile();
                world.reconcile();
            }
            Err(error) => undecodable(error)?,
        },
    }
    Ok(())
}

#[test]
fn jobs_with_random_fields_plan_or_are_reported_without_a_panic() {
    let mut runner = runner();
    let strategy = (0..crate::job::Kind::COUNT, mutations());
    let result = runner.run(&strategy, |(kind, mutations)| {
        plan_mutated(crate::job::Kind::ALL[kind], &mutations)
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

/// Paths into a ScaleIn or ScaleOut where a mutation lands.
const REQUEST_PATHS: &[&str] = &[
    "spec",
    "spec/selector",
    "spec/toAdd",
    "spec/toAdd/count",
    "spec/toDelete",
    "spec/toDelete/count",
    "spec/toDelete/podNames",
    "spec/timeout",
    "metadata/ownerReferences",
    "metadata/creationTimestamp",
    "status",
    "status/phase",
    "status/conditions",
    "status/addPods",
];

/// The messages of the conditions in a request's status.
fn condition_messages(status: &crate::scaling::ScalerStatus) -> Vec<String> {
    let value = match status {
        crate::scaling::ScalerStatus::In(status) => serde_json::to_value(status),
        crate::scaling::ScalerStatus::Out(status) => serde_json::to_value(status),
    }
    .unwrap_or_default();
    value["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|condition| condition["message"].as_str().map(str::to_string))
        .collect()
}

/// A ScaleIn or ScaleOut of a running job, mutated at random paths: the job plans it without
/// a panic, and one whose spec cannot be decoded fails with a condition naming the field.
fn request_mutated(
    running: &World,
    scale_in: bool,
    mutations: &[(usize, Option<serde_json::Value>)],
) -> Result<(), TestCaseError> {
    use crate::scaling::{Scaler, ScalerKind};
    let (kind, spec, parsed) = if scale_in {
        (
            ScalerKind::ScaleIn,
            serde_json::json!({"toDelete": {"count": 1}}),
            (|value| crate::parse::parse::<eto_api::ScaleIn>(value).err())
                as fn(serde_json::Value) -> Option<crate::field_error::FieldError>,
        )
    } else {
        (
            ScalerKind::ScaleOut,
            serde_json::json!({"toAdd": {"count": 1}}),
            (|value| crate::parse::parse::<eto_api::ScaleOut>(value).err())
                as fn(serde_json::Value) -> Option<crate::field_error::FieldError>,
        )
    };
    let mut world = running.clone();
    let mut value = serde_json::json!({
        "apiVersion": "kai.alibabacloud.com/v1alpha1",
        "kind": kind.as_str(),
        "metadata": {"name": "req", "namespace": "default", "uid": "uid-req",
            "creationTimestamp": world.now.to_string()},
        "spec": spec,
    });
    // A status (which may say the request finished) or metadata (which the API server
    // validates, so that a request never has it malformed) that a mutation touched leaves
    // nothing to report: only the absence of a panic is checked then.
    let mut checkable = true;
    for (path, mutation) in mutations {
        let path = REQUEST_PATHS[path % REQUEST_PATHS.len()];
        checkable &= path.starts_with("spec");
        mutate(&mut value, path, mutation.clone());
    }
    // Whatever the mutations did, the request names the job.
    if !value["spec"].is_object() {
        value["spec"] = serde_json::json!({});
    }
    value["spec"]["selector"] = serde_json::json!({"name": "mnist"});
    world.scalers.push(Scaler::read(kind, &value));
    let mut reported = Vec::new();
    for _ in 0..3 {
        let plan = world.reconcile();
        reported.extend(
            plan.scalers
                .iter()
                .filter(|update| update.name == "req")
                .filter_map(|update| update.status.as_ref())
                .flat_map(condition_messages),
        );
    }
    if let Some(error) = parsed(value).filter(|_| checkable) {
        prop_assert!(
            reported
                .iter()
                .any(|message| message.contains(&error.field)),
            "{reported:?} does not name {error}"
        );
    }
    Ok(())
}

#[test]
fn scaling_requests_with_random_fields_are_carried_out_or_reported_without_a_panic() {
    let mut running = World::new(training_job());
    running.reconcile();
    running.ready("mnist-worker-0");
    running.ready("mnist-worker-1");
    running.reconcile();
    running.ready("mnist-launcher");
    running.reconcile();
    // Each case reconciles a running job three times: a fifth of the cases.
    let mut runner = runner_of_share(5);
    let strategy = (any::<bool>(), mutations());
    let result = runner.run(&strategy, |(scale_in, mutations)| {
        request_mutated(&running, scale_in, &mutations)
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

#[test]
fn workers_failing_on_their_own_past_the_backoff_limit_may_fail_a_training_job() {
    // A life the random lives found: Workers whose code exits 1 again and again fail the job
    // by its backoffLimit, though its launcher never failed.
    use Happening::{Advance, Delete, Exit, Ready, Scale};
    let shape = JobShape {
        kind: Kind::TRAINING_JOB,
        replicas: 2,
        min: 2,
        max: None,
        worker_policy: ReplicaRestartPolicy::Always,
        job_policy: JobRestartPolicy::Never,
        suspend_below_min: false,
        below_min_seconds: 0,
        checkpoint_grace_seconds: 0,
        drain_seconds: 0,
    };
    let happenings = [
        Ready(1_986_973_790_585_518_385),
        Delete(2_381_274_073_748_419_932),
        Delete(6_301_925_255_404_432_619),
        Exit(7_601_314_065_436_580_113, 1),
        Ready(13_923_074_116_048_512_843),
        Ready(1_322_754_051_285_520_184),
        Exit(2_348_349_861_265_203_731, 1),
        Scale(6),
        Ready(5_657_048_941_154_261_259),
        Advance(10),
        Exit(2_206_635_014_656_849_952, 1),
    ];
    life(&shape, &happenings).unwrap();
}

#[test]
fn a_failure_counted_past_the_limit_fails_the_job_after_the_failed_pod_is_gone() {
    // A life the random lives found: the third failure of a Worker's own code is counted, the
    // failed Worker is replaced and its pod deleted, and the job fails at the next reconcile,
    // which an eviction brings: the failure is the Workers' own though no failed pod is left.
    use Happening::{Evict, EvictThroughApi, Exit, Ready, Scale};
    let shape = JobShape {
        kind: Kind::TRAINING_JOB,
        replicas: 2,
        min: 1,
        max: None,
        worker_policy: ReplicaRestartPolicy::OnFailure,
        job_policy: JobRestartPolicy::Never,
        suspend_below_min: false,
        below_min_seconds: 0,
        checkpoint_grace_seconds: 0,
        drain_seconds: 0,
    };
    let happenings = [
        Ready(512_678_110_630_984_165),
        Exit(1_594_245_106_379_019_305, 1),
        Scale(3),
        Ready(1_349_809_604_696_657_280),
        Ready(4_555_409_187_148_373_188),
        Exit(6_646_992_454_768_527_648, 1),
        Evict(4_175_418_869_779_287_845),
        Ready(0),
        Ready(17_646_143_757_510_982_946),
        Exit(16_629_180_850_835_561_512, 1),
        EvictThroughApi(3_055_217_690_384_055_304),
    ];
    life(&shape, &happenings).unwrap();
}
