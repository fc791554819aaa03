//! A launcher the platform takes (see `plan/run/launcher_loss.rs`), stepped through the
//! in-memory world with time passed in: the run is suspended and resumed from its checkpoint
//! with a new launcher, never failed and never counted as a restart; a launcher whose own code
//! fails is still a failure.

use eto_api::common::{ConditionStatus, ReplicaRestartPolicy};
use eto_api::elastic::ElasticPolicy;
use eto_api::job_status::{JobPhase, Notice, NoticeKind};
use eto_api::training_job::JobRestartPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::conditions;
use crate::testing::world::{World, deleted_pods, reasons};
use crate::testing::{mpi_job, training_job};

const LAUNCHER: &str = "mnist-launcher";

/// A running TrainingJob of 4 workers needing 3, with the job restart policy `policy`.
fn running(policy: JobRestartPolicy) -> World {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.replicas = Some(4);
    job.spec.et_replica_specs.worker.min_replicas = Some(3);
    job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::OnFailure);
    job.spec.restart_policy = Some(policy);
    let mut world = World::new(job);
    world.launch_with(4);
    assert_eq!(world.status().phase, Some(JobPhase::Running));
    world
}

fn shown(world: &World, pod: &str) -> Option<Notice> {
    crate::notice::shown(&world.pods[pod])
}

fn suspended_reason(world: &World) -> Option<String> {
    conditions::find(&world.status().conditions, conditions::SUSPENDED)
        .filter(|condition| condition.status == ConditionStatus::True)
        .and_then(|condition| condition.reason.clone())
}

fn env_of(world: &World, pod: &str, name: &str) -> Option<String> {
    world.pods[pod].spec.as_ref()?.containers[0]
        .env
        .iter()
        .flatten()
        .find(|var| var.name == name)
        .and_then(|var| var.value.clone())
}

/// The pod's status as the platform leaves it: `Failed` with `code`, the pod reason `reason`
/// and, when given, `DisruptionTarget=True` with `target`.
fn ended(world: &mut World, pod: &str, code: i32, reason: Option<&str>, target: Option<&str>) {
    let phase = if code == 0 { "Succeeded" } else { "Failed" };
    let mut status = json!({"phase": phase,
        "containerStatuses": [{"name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" }}}}]});
    if let Some(reason) = reason {
        status["reason"] = json!(reason);
    }
    if let Some(target) = target {
        status["conditions"] =
            json!([{"type": "DisruptionTarget", "status": "True", "reason": target}]);
    }
    world.pod(pod).status = Some(serde_json::from_value(status).unwrap());
}

/// The notice `plan` shows pod `name` (which the world no longer holds once it is deleted).
fn shown_by(plan: &crate::plan::Plan, name: &str) -> Option<Notice> {
    let change = plan.apply.iter().find_map(|child| match child {
        crate::plan::Child::PodMetadata(change) if change.name == name => Some(change),
        _ => None,
    })?;
    let mut pod = k8s_openapi::api::core::v1::Pod::default();
    change.clone().apply_to(&mut pod.metadata);
    crate::notice::shown(&pod)
}

/// Follows a suspended job to its resume: the new run's workers become ready, its launcher is
/// created; asserts it resumes from the checkpoint without a restart.
fn resumes(world: &mut World, case: &str) {
    world.reconcile();
    let workers = world.status().target_workers.clone();
    assert_eq!(workers.len(), 4, "{case}: a new run asks for its workers");
    for worker in &workers {
        world.ready(worker);
    }
    let plan = world.reconcile();
    assert!(
        reasons(&plan).contains(&"TrainingJobResumed".to_string()),
        "{case}: {:?}",
        reasons(&plan)
    );
    assert_eq!(
        env_of(world, LAUNCHER, "ETO_RESUME").as_deref(),
        Some("true"),
        "{case}: the new launcher resumes from the checkpoint"
    );
    assert_eq!(
        shown(world, LAUNCHER).map(|n| (n.kind, n.reason)),
        Some((NoticeKind::Resume, "LauncherDisrupted".to_string())),
        "{case}"
    );
    world.ready(LAUNCHER);
    world.reconcile();
    let status = world.status();
    assert_eq!(status.phase, Some(JobPhase::Running), "{case}");
    assert_eq!(status.restart_count, 0, "{case}: no restart counted");
    assert!(
        conditions::find(&status.conditions, conditions::FAILED).is_none(),
        "{case}"
    );
}

#[test]
fn a_launcher_the_platform_took_suspends_the_run_and_a_new_one_resumes_from_the_checkpoint() {
    type Take = fn(&mut World);
    // (how the launcher goes, what the events and the condition say of it)
    let takes: [(&str, Take, &str); 6] = [
        (
            "reclaimed with its node (137, DisruptionTarget)",
            |world| {
                ended(
                    world,
                    LAUNCHER,
                    137,
                    Some("Terminated"),
                    Some("DeletionByPodGC"),
                )
            },
            "was deleted with its node, which is gone on node node-mnist-launcher",
        ),
        (
            "preempted, exit 1",
            |world| ended(world, LAUNCHER, 1, None, Some("PreemptionByScheduler")),
            "was preempted by the scheduler on node node-mnist-launcher",
        ),
        (
            "evicted by the kubelet",
            |world| world.evict(LAUNCHER),
            "was evicted by the kubelet (node pressure) on node node-mnist-launcher",
        ),
        (
            "its node shut down",
            |world| ended(world, LAUNCHER, 137, Some("Terminated"), None),
            "was terminated by its node's shutdown on node node-mnist-launcher",
        ),
        (
            "saved and exited 0 on the SIGTERM of its reclaim",
            |world| ended(world, LAUNCHER, 0, None, Some("TerminationByKubelet")),
            "was terminated by the kubelet",
        ),
        (
            "gone without a trace",
            |world| {
                world.pods.remove(LAUNCHER);
            },
            "its launcher mnist-launcher disappeared",
        ),
    ];
    for (how, take, says) in takes {
        for policy in [JobRestartPolicy::Never, JobRestartPolicy::OnFailure] {
            let case = format!("{how}, restartPolicy {policy:?}");
            let mut world = running(policy);
            take(&mut world);
            let plan = world.reconcile();
            let status = world.status();
            assert_eq!(status.phase, Some(JobPhase::Suspended), "{case}");
            assert_eq!(
                suspended_reason(&world).as_deref(),
                Some("LauncherDisrupted"),
                "{case}"
            );
            assert_eq!(status.restart_count, 0, "{case}");
            assert!(
                conditions::find(&status.conditions, conditions::FAILED).is_none(),
                "{case}"
            );
            let message = conditions::find(&status.conditions, conditions::SUSPENDED)
                .and_then(|s| s.message.clone())
                .unwrap();
            assert!(message.contains(says), "{case}: {message}");
            let event = plan
                .events
                .iter()
                .find(|e| e.reason == "LauncherDisrupted")
                .unwrap_or_else(|| panic!("{case}: {:?}", reasons(&plan)));
            assert!(
                event.warning && event.note.contains(says),
                "{case}: {event:?}"
            );
            assert!(
                !reasons(&plan).iter().any(|r| r.contains("Fail")),
                "{case}: {:?}",
                reasons(&plan)
            );
            // Every pod of the run goes; the workers still running are shown the notice first.
            let mut deleted = deleted_pods(&plan);
            deleted.retain(|pod| pod != LAUNCHER);
            assert_eq!(
                deleted,
                [0, 1, 2, 3].map(|i| format!("mnist-worker-{i}")),
                "{case}"
            );
            for worker in &deleted {
                assert_eq!(
                    shown_by(&plan, worker).map(|n| (n.kind, n.reason)),
                    Some((NoticeKind::Suspend, "LauncherDisrupted".to_string())),
                    "{case}: {worker} is shown the notice before it goes"
                );
            }
            assert_eq!(status.run, Some(1), "{case}: a new run");
            resumes(&mut world, &case);
        }
    }
}

#[test]
fn a_launcher_whose_own_code_fails_with_the_minimum_ready_is_still_a_failure() {
    let mut world = running(JobRestartPolicy::Never);
    world.exit(LAUNCHER, 1);
    let plan = world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Failed));
    assert!(!reasons(&plan).contains(&"LauncherDisrupted".to_string()));
    assert_eq!(
        conditions::find(&world.status().conditions, conditions::FAILED)
            .and_then(|f| f.message.clone())
            .as_deref(),
        Some("the launcher failed (exit code 1, Error)")
    );

    let mut world = running(JobRestartPolicy::OnFailure);
    // Killed for its memory: 137 as for a reclaim, but nothing says the platform did it.
    ended(&mut world, LAUNCHER, 137, None, None);
    world.reconcile();
    assert_eq!(world.status().restart_count, 1, "a restart, as before");
    assert_eq!(world.status().phase, Some(JobPhase::Restarting));
}

#[test]
fn a_warning_on_the_launchers_node_tells_the_launcher_and_every_worker_to_checkpoint_at_once() {
    let mut world = running(JobRestartPolicy::Never);
    // A worker shares the launcher's node: it hears the job stops, not only that it goes.
    world.pod("mnist-worker-3").spec.as_mut().unwrap().node_name =
        Some("node-mnist-launcher".into());
    world.warn("node-mnist-launcher", 120);
    let plan = world.reconcile();
    let notice = world.status().notice.clone().expect("a notice at once");
    assert_eq!(
        (notice.kind, notice.reason.as_str()),
        (NoticeKind::Suspend, "LauncherDisrupted")
    );
    assert_eq!(
        notice.deadline.as_ref().map(|d| d.0),
        Some(world.now + jiff::SignedDuration::from_secs(120)),
        "capped by the node's deadline, not checkpointGraceSeconds (300)"
    );
    assert!(
        notice
            .message
            .contains("node node-mnist-launcher goes away"),
        "{}",
        notice.message
    );
    for pod in [
        LAUNCHER,
        "mnist-worker-0",
        "mnist-worker-1",
        "mnist-worker-2",
        "mnist-worker-3",
    ] {
        assert_eq!(shown(&world, pod).as_ref(), Some(&notice), "{pod}");
    }
    // The worker on the warned node is lost, and not replaced: the run ends anyway.
    assert_eq!(
        reasons(&plan),
        ["LauncherDisrupted", "CheckpointNotice", "WorkerLost"]
    );
    let lost = &plan.events[2].note;
    assert!(
        lost.ends_with(
            "is not replaced: the job is suspending, and the run that resumes creates its own \
             workers"
        ),
        "the reason is the suspend, not the restart policy: {lost}"
    );
    assert!(deleted_pods(&plan).is_empty(), "the GPUs still run");
    assert_eq!(world.status().phase, Some(JobPhase::Running));

    // Rank 0 saved and every process exited: the launcher's exit completes the suspend.
    world.advance(20);
    world.exit(LAUNCHER, 1);
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Suspended));
    assert_eq!(
        suspended_reason(&world).as_deref(),
        Some("LauncherDisrupted")
    );
    assert_eq!(world.status().restart_count, 0);

    // The new launcher prefers any node but the one that goes.
    resumes(&mut world, "warned");
    let affinity = serde_json::to_value(
        &world.pods[LAUNCHER]
            .spec
            .as_ref()
            .unwrap()
            .affinity
            .as_ref()
            .unwrap()
            .node_affinity,
    )
    .unwrap();
    let preferred = &affinity["preferredDuringSchedulingIgnoredDuringExecution"];
    assert!(
        preferred.as_array().unwrap().iter().any(|term| {
            term["preference"]["matchFields"]
                == json!([{"key": "metadata.name", "operator": "NotIn", "values": ["node-mnist-launcher"]}])
        }),
        "{preferred}"
    );
}

#[test]
fn a_launcher_evicted_through_the_api_gets_its_termination_grace_to_checkpoint() {
    let mut world = running(JobRestartPolicy::Never);
    // The Eviction API marks the pod, then deletes it with its 30 s grace period: SIGTERM now,
    // SIGKILL then.
    let killed = world.now + jiff::SignedDuration::from_secs(30);
    world.disrupt(LAUNCHER);
    if let Some(conditions) = world
        .pod(LAUNCHER)
        .status
        .as_mut()
        .and_then(|s| s.conditions.as_mut())
    {
        conditions[1].reason = Some("EvictionByEvictionAPI".into());
    }
    world.pod(LAUNCHER).metadata.deletion_timestamp = Some(Time(killed));
    world.reconcile();
    let notice = world.status().notice.clone().expect("a notice at once");
    assert_eq!(notice.kind, NoticeKind::Suspend);
    assert_eq!(notice.deadline.map(|d| d.0), Some(killed));
    assert!(
        notice.message.contains("when the launcher's pod is killed"),
        "{}",
        notice.message
    );
    assert_eq!(
        shown(&world, "mnist-worker-2").map(|n| n.kind),
        Some(NoticeKind::Suspend)
    );
    world.advance(30);
    ended(
        &mut world,
        LAUNCHER,
        137,
        None,
        Some("EvictionByEvictionAPI"),
    );
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Suspended));
    assert_eq!(world.status().restart_count, 0);
}

#[test]
fn an_mpijobs_launcher_pod_the_platform_took_is_no_failure_of_its_job_or_of_the_mpijob() {
    let mut job = mpi_job();
    job.spec.run_policy.get_or_insert_default().backoff_limit = Some(0);
    let mut world = World::mpi(job);
    world.reconcile();
    world.ready("pi-worker-0");
    world.ready("pi-worker-1");
    world.reconcile();
    let first = world.launcher_pod_name();
    world.ready(&first);
    world.reconcile();
    assert_eq!(world.mpi_status().phase, Some(JobPhase::Running));
    let launcher_job = world.launcher_job.clone().expect("a launcher Job");
    assert_eq!(
        serde_json::to_value(&launcher_job.spec.as_ref().unwrap().pod_failure_policy).unwrap(),
        json!({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}),
        "the Job does not count the platform's losses against its backoffLimit"
    );

    // Reclaimed with its node; the Job, which ignores it, starts another pod meanwhile.
    ended(&mut world, &first, 137, None, Some("DeletionByPodGC"));
    let mut replacement = world.pods[&first].clone();
    replacement.metadata.name = Some(format!("{first}-x"));
    replacement.status = Some(serde_json::from_value(json!({"phase": "Pending"})).unwrap());
    world.pods.insert(format!("{first}-x"), replacement);
    let plan = world.reconcile();
    let status = world.mpi_status();
    assert_eq!(
        status.phase,
        Some(JobPhase::Suspended),
        "{:?}",
        reasons(&plan)
    );
    assert_eq!(status.restart_count, 0);
    assert!(world.launcher_job.is_none(), "the run's launcher Job goes");
    assert!(reasons(&plan).contains(&"LauncherDisrupted".to_string()));

    // Backoff limit 0 used nothing: the new run's launcher Job resumes.
    world.reconcile();
    for worker in world.mpi_status().target_workers.clone() {
        world.ready(&worker);
    }
    world.reconcile();
    let resumed = world.launcher_job.as_ref().expect("a new launcher Job");
    let env = &resumed
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .env;
    assert!(
        env.iter()
            .flatten()
            .any(|var| var.name == "ETO_RESUME" && var.value.as_deref() == Some("true"))
    );
}

#[test]
fn a_launcher_prefers_nodes_that_are_not_spot_unless_told_otherwise() {
    let spot_term = |world: &World| {
        let spec = world.pods[LAUNCHER].spec.clone().unwrap();
        spec.affinity
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.preferred_during_scheduling_ignored_during_execution)
            .into_iter()
            .flatten()
            .any(|term| {
                term.preference
                    .match_expressions
                    .iter()
                    .flatten()
                    .any(|r| r.key == "karpenter.sh/capacity-type" && r.operator == "NotIn")
            })
    };
    let world = running(JobRestartPolicy::Never);
    assert!(spot_term(&world), "by default");

    let mut job = training_job();
    job.spec.elastic_policy = Some(ElasticPolicy {
        launcher_avoids_spot: Some(false),
        ..ElasticPolicy::default()
    });
    let mut world = World::new(job);
    world.launch();
    assert!(!spot_term(&world), "switched off");
}
