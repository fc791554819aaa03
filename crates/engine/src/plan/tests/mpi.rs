//! An MPIJob's life, planned by the same engine: its launcher Job, its mpi-operator status,
//! Kueue's suspend, and what eto adds.

use eto_api::MPIJob;
use eto_api::common::ReplicaRestartPolicy;
use eto_api::common::ReplicaType;
use eto_api::job_status::JobPhase;
use eto_api::mpi_job::{LauncherCreationPolicy, MpiElasticPolicy, RunPolicy, WORKER};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::conditions;
use crate::plan::*;
use crate::testing::mpi_job;
use crate::testing::world::{World, deleted_pods, pod_names, reasons};

fn condition(world: &World, type_: &str) -> (bool, String) {
    let status = world.mpi_status();
    let condition = conditions::find(&status.conditions, type_)
        .unwrap_or_else(|| panic!("no {type_} condition"));
    (
        condition.status == eto_api::common::ConditionStatus::True,
        condition.reason.clone().unwrap_or_default(),
    )
}

fn job_of(world: &mut World) -> &mut MPIJob {
    world.mpi_job.as_mut().expect("an MPIJob world")
}

fn kinds(plan: &Plan) -> Vec<&'static str> {
    plan.apply
        .iter()
        .map(|child| match child {
            Child::Service(_) => "Service",
            Child::PodMetadata(_) => "PodAnnotations",
            Child::Pod(_) => "Pod",
            Child::ConfigMap(_) => "ConfigMap",
            Child::LauncherJob(_) => "Job",
            Child::PodGroup(_) => "PodGroup",
            Child::Autoscaler(_) => "HorizontalPodAutoscaler",
            Child::ServiceAccount(_) | Child::Role(_) | Child::RoleBinding(_) => "RBAC",
        })
        .collect()
}

/// A world whose workers are ready and whose launcher Job's pod runs.
fn running(job: MPIJob) -> World {
    let mut world = World::mpi(job);
    world.reconcile();
    world.ready("pi-worker-0");
    world.ready("pi-worker-1");
    world.reconcile();
    let launcher = world.launcher_pod_name();
    world.ready(&launcher);
    world.reconcile();
    world
}

#[test]
fn a_new_job_gets_its_service_workers_config_and_launcher_job_at_startup() {
    let mut world = World::mpi(mpi_job());
    let plan = world.reconcile();
    assert_eq!(kinds(&plan), ["Service", "Pod", "Pod", "ConfigMap", "Job"]);
    assert_eq!(
        pod_names(&plan),
        ["pi-worker-0", "pi-worker-1"],
        "the launcher is a Job, not a pod"
    );
    let secret = plan.create_ssh_secret.as_ref().expect("an SSH Secret");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/ssh-auth"));
    assert_eq!(reasons(&plan), ["WorkersCreated", "LauncherCreated"]);
    let hostfile = world.config_map.as_ref().unwrap().data.as_ref().unwrap()["hostfile"].clone();
    assert_eq!(
        hostfile, "pi-worker-0.pi.default.svc slots=1\npi-worker-1.pi.default.svc slots=1\n",
        "mpirun gets every worker, ready or not"
    );
    let status = world.mpi_job.as_ref().unwrap().status.clone().unwrap();
    assert_eq!(
        status.replica_statuses[&ReplicaType::Worker]
            .selector
            .as_deref(),
        Some("training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=worker")
    );
    assert_eq!(
        condition(&world, conditions::CREATED),
        (true, "MPIJobCreated".into())
    );
    assert_eq!(status.eto.phase, Some(JobPhase::Created));
    assert_eq!(status.eto.restart_count, Some(0));
}

#[test]
fn wait_for_workers_ready_holds_the_launcher_until_the_minimum_is_ready() {
    let mut job = mpi_job();
    job.spec.launcher_creation_policy = Some(LauncherCreationPolicy::WaitForWorkersReady);
    let mut world = World::mpi(job);
    let plan = world.reconcile();
    assert!(!kinds(&plan).contains(&"Job"));
    world.ready("pi-worker-0");
    assert!(!kinds(&world.reconcile()).contains(&"Job"));
    world.ready("pi-worker-1");
    let plan = world.reconcile();
    assert_eq!(kinds(&plan), ["Job"]);
    let launcher = world.launcher_pod_name();
    assert_eq!(
        world.pods[&launcher].metadata.annotations.as_ref().unwrap()["eto.dev/hostfile"],
        "pi-worker-0.pi.default.svc:1\npi-worker-1.pi.default.svc:1\n"
    );
}

#[test]
fn discovery_follows_the_workers_through_the_launcher_pods_annotation() {
    let mut world = World::mpi(mpi_job());
    world.reconcile();
    let launcher = world.launcher_pod_name();
    let shown = |world: &World| {
        world.pods[&launcher].metadata.annotations.as_ref().unwrap()["eto.dev/hostfile"].clone()
    };
    assert_eq!(shown(&world), "");
    world.ready("pi-worker-1");
    let plan = world.reconcile();
    assert_eq!(kinds(&plan), ["PodAnnotations"]);
    assert_eq!(shown(&world), "pi-worker-1.pi.default.svc:1\n");
    world.ready(&launcher);
    world.ready("pi-worker-0");
    world.reconcile();
    assert_eq!(
        shown(&world),
        "pi-worker-0.pi.default.svc:1\npi-worker-1.pi.default.svc:1\n"
    );
    assert_eq!(world.mpi_status().phase, Some(JobPhase::Running));
    assert_eq!(
        condition(&world, conditions::RUNNING),
        (true, "MPIJobRunning".into())
    );
    assert!(world.reconcile().is_empty());
}

#[test]
fn a_launcher_started_with_pending_workers_is_not_below_its_minimum() {
    let mut world = World::mpi(mpi_job());
    world.reconcile();
    let launcher = world.launcher_pod_name();
    world.ready(&launcher);
    world.reconcile();
    world.advance(3600);
    let plan = world.reconcile();
    assert!(world.mpi_status().notice.is_none(), "{plan:#?}");
    assert_eq!(world.mpi_status().phase, Some(JobPhase::Created));
    assert_eq!(
        condition(&world, conditions::WORKERS_READY),
        (false, "WaitingForWorkers".into())
    );
}

#[test]
fn losing_workers_after_the_minimum_was_reached_suspends_the_job() {
    let mut world = running(mpi_job());
    world.evict("pi-worker-0");
    world.reconcile();
    assert_eq!(
        condition(&world, conditions::WORKERS_READY),
        (false, "BelowMinWorkers".into())
    );
    world.advance(31);
    world.reconcile();
    // The kubelet's eviction ended its process: the one worker left cannot form the group its
    // launcher needs, nor save, so the job is suspended at once.
    assert_eq!(
        condition(&world, conditions::SUSPENDED),
        (true, "BelowMinWorkers".into())
    );

    // A worker being reclaimed still runs, and the group may save: a notice first.
    let mut world = running(mpi_job());
    world.disrupt("pi-worker-0");
    world.reconcile();
    let notice = world.mpi_status().notice.expect("a checkpoint notice");
    assert_eq!(notice.kind, eto_api::job_status::NoticeKind::Suspend);
    assert!(notice.message.starts_with("MPIJob pi is suspending"));
    let launcher = world.launcher_pod_name();
    assert!(
        world.pods[&launcher].metadata.annotations.as_ref().unwrap()["eto.dev/notice"]
            .contains("\"kind\":\"Suspend\"")
    );
}

#[test]
fn the_launcher_jobs_success_is_the_jobs() {
    let mut world = running(mpi_job());
    world.launcher_job_finished(true);
    let plan = world.reconcile();
    assert_eq!(reasons(&plan), ["MPIJobSucceeded"]);
    assert_eq!(world.mpi_status().phase, Some(JobPhase::Succeeded));
    assert_eq!(
        condition(&world, conditions::SUCCEEDED),
        (true, "MPIJobSucceeded".into())
    );
    assert_eq!(
        condition(&world, conditions::READY),
        (true, "MPIJobSucceeded".into())
    );
    assert!(
        deleted_pods(&plan).is_empty(),
        "cleanPodPolicy defaults to None"
    );
}

#[test]
fn a_failed_launcher_restarts_the_job_until_the_backoff_limit() {
    let mut job = mpi_job();
    job.spec.run_policy = Some(RunPolicy {
        backoff_limit: Some(1),
        ..RunPolicy::default()
    });
    let mut world = running(job);
    let launcher = world.launcher_pod_name();
    world.exit(&launcher, 1);
    world.launcher_job_finished(false);
    let plan = world.reconcile();
    assert_eq!(reasons(&plan), ["MPIJobRestarting", "WorkersCreated"]);
    assert!(
        plan.delete
            .iter()
            .any(|d| d.kind == ChildKind::Job && d.name == "pi-launcher")
    );
    assert_eq!(world.mpi_status().restart_count, 1);
    assert!(world.launcher_job.is_none());
    // The new run: new workers, and once the old launcher Job is gone, a new one.
    assert_eq!(pod_names(&plan), ["pi-worker-2", "pi-worker-3"]);
    let plan = world.reconcile();
    assert_eq!(kinds(&plan), ["Job"]);
    let launcher = world.launcher_pod_name();
    world.ready("pi-worker-2");
    world.ready("pi-worker-3");
    world.ready(&launcher);
    world.reconcile();
    world.exit(&launcher, 1);
    world.launcher_job_finished(false);
    let plan = world.reconcile();
    assert_eq!(reasons(&plan), ["MPIJobFailed"]);
    assert_eq!(world.mpi_status().phase, Some(JobPhase::Failed));
    let (holds, reason) = condition(&world, conditions::FAILED);
    assert!(holds);
    assert_eq!(reason, "MPIJobFailed");
}

#[test]
fn a_failed_worker_is_replaced_under_a_new_name_and_an_evicted_one_fails_nothing() {
    let mut job = mpi_job();
    job.spec
        .mpi_replica_specs
        .get_mut(WORKER)
        .unwrap()
        .restart_policy = Some(ReplicaRestartPolicy::OnFailure);
    job.spec.elastic_policy = Some(MpiElasticPolicy {
        min_replicas: Some(1),
        ..MpiElasticPolicy::default()
    });
    let mut world = running(job);
    let created = |plan: &Plan| -> Vec<String> {
        pod_names(plan)
            .into_iter()
            .filter(|name| name.contains("-worker-"))
            .collect()
    };
    world.exit("pi-worker-0", 1);
    let plan = world.reconcile();
    assert_eq!(created(&plan), ["pi-worker-2"]);
    assert_eq!(
        (plan.tallies.lost.as_slice(), plan.tallies.replacements),
        (&["Failed"][..], 1)
    );
    world.evict("pi-worker-1");
    let plan = world.reconcile();
    assert_eq!(created(&plan), ["pi-worker-3"]);
    assert_eq!(plan.tallies.lost, ["Evicted"]);
    assert_eq!(world.mpi_status().phase, Some(JobPhase::Running));
    assert_eq!(world.mpi_status().blacklist.len(), 2);
}

#[test]
fn scaling_the_worker_replicas_resizes_the_job() {
    let mut world = running(mpi_job());
    job_of(&mut world)
        .spec
        .mpi_replica_specs
        .get_mut(WORKER)
        .unwrap()
        .replicas = Some(3);
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["pi-worker-2"]);
    assert_eq!(reasons(&plan), ["WorkersScaled", "WorkersCreated"]);
    let hostfile = world.config_map.as_ref().unwrap().data.as_ref().unwrap()["hostfile"].clone();
    assert_eq!(hostfile.lines().count(), 3);
}

#[test]
fn a_job_created_suspended_creates_nothing_and_starts_afresh_when_admitted() {
    let mut job = mpi_job();
    job.spec.run_policy = Some(RunPolicy {
        suspend: Some(true),
        ..RunPolicy::default()
    });
    let mut world = World::mpi(job);
    let plan = world.reconcile();
    assert!(plan.apply.is_empty() && plan.create_ssh_secret.is_none());
    assert_eq!(
        condition(&world, conditions::SUSPENDED),
        (true, "MPIJobSuspended".into())
    );
    // Kueue admits the job: it writes a node selector into the templates and unsuspends it.
    let job = job_of(&mut world);
    job.spec.run_policy.as_mut().unwrap().suspend = Some(false);
    for template in job.spec.mpi_replica_specs.values_mut() {
        template
            .template
            .as_mut()
            .unwrap()
            .spec
            .as_mut()
            .unwrap()
            .node_selector = Some(
            [(
                "cloud.google.com/gke-accelerator".to_string(),
                "a100".to_string(),
            )]
            .into(),
        );
    }
    let plan = world.reconcile();
    assert_eq!(
        reasons(&plan),
        ["MPIJobResumed", "WorkersCreated", "LauncherCreated"]
    );
    assert_eq!(
        condition(&world, conditions::SUSPENDED),
        (false, "MPIJobResumed".into())
    );
    let status = world.mpi_status();
    assert_eq!(status.notice, None, "a job that never ran resumes nothing");
    assert_eq!(status.run.unwrap_or_default(), 0);
    let selector = |pod: &k8s_openapi::api::core::v1::Pod| {
        pod.spec
            .as_ref()
            .unwrap()
            .node_selector
            .clone()
            .unwrap_or_default()
    };
    assert_eq!(
        selector(&world.pods["pi-worker-0"])["cloud.google.com/gke-accelerator"],
        "a100"
    );
    let launcher = world.launcher_pod_name();
    assert_eq!(
        selector(&world.pods[&launcher])["cloud.google.com/gke-accelerator"],
        "a100"
    );
    let env = serde_json::to_value(&world.pods[&launcher].spec.as_ref().unwrap().containers[0].env)
        .unwrap();
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!({"name": "ETO_RESUME", "value": "false"}))
    );
}

#[test]
fn suspending_a_running_job_removes_its_launcher_job_and_workers() {
    let mut job = mpi_job();
    job.spec.elastic_policy = Some(MpiElasticPolicy {
        policy: eto_api::elastic::ElasticPolicy {
            checkpoint_grace_seconds: Some(0),
            ..Default::default()
        },
        ..MpiElasticPolicy::default()
    });
    let mut world = running(job);
    job_of(&mut world).spec.run_policy = Some(RunPolicy {
        suspend: Some(true),
        ..RunPolicy::default()
    });
    let plan = world.reconcile();
    assert!(plan.delete.iter().any(|d| d.kind == ChildKind::Job));
    assert_eq!(plan.tallies.suspends, ["Suspended"]);
    assert!(world.pods.is_empty(), "{:?}", world.pods.keys());
    assert_eq!(
        condition(&world, conditions::SUSPENDED),
        (true, "MPIJobSuspended".into())
    );
    assert_eq!(
        condition(&world, conditions::RUNNING),
        (false, "MPIJobSuspended".into())
    );
    assert_eq!(world.mpi_status().phase, Some(JobPhase::Suspended));
}

#[test]
fn a_job_mpi_operator_started_is_left_alone_with_a_clear_condition() {
    let mut job = mpi_job();
    job.status = Some(
        serde_json::from_value(json!({
            "conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated"},
                           {"type": "Running", "status": "True", "reason": "MPIJobRunning"}],
            "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}},
            "startTime": "2026-11-20T10:00:00Z"
        }))
        .unwrap(),
    );
    let mut world = World::mpi(job);
    let plan = world.reconcile();
    assert!(plan.apply.is_empty() && plan.delete.is_empty() && plan.create_ssh_secret.is_none());
    assert_eq!(reasons(&plan), ["StartedByAnotherOperator"]);
    assert_eq!(
        condition(&world, conditions::STALLED),
        (true, "StartedByAnotherOperator".into())
    );
    let status = world.mpi_job.as_ref().unwrap().status.clone().unwrap();
    assert_eq!(status.replica_statuses[&ReplicaType::Worker].active, 2);
    assert!(world.reconcile().events.is_empty(), "reported once");
}

#[test]
fn a_job_mpi_operator_finished_stays_finished() {
    let mut job = mpi_job();
    job.spec.run_policy = Some(RunPolicy {
        ttl_seconds_after_finished: Some(60),
        ..RunPolicy::default()
    });
    job.status = Some(
        serde_json::from_value(json!({
            "conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated"},
                           {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded",
                            "message": "MPIJob default/pi successfully completed."}],
            "replicaStatuses": {"Launcher": {"succeeded": 1}},
            "completionTime": "2026-11-20T10:00:00Z"
        }))
        .unwrap(),
    );
    let mut world = World::mpi(job);
    let plan = world.reconcile();
    assert!(
        plan.apply.is_empty() && plan.create_ssh_secret.is_none(),
        "{plan:#?}"
    );
    assert!(plan.delete_job, "its time to live ran out long ago");
    assert_eq!(world.mpi_status().phase, Some(JobPhase::Succeeded));
    assert_eq!(
        condition(&world, conditions::READY),
        (true, "MPIJobSucceeded".into())
    );
    assert_eq!(
        world.mpi_status().replica_statuses[&ReplicaType::Launcher].succeeded,
        1
    );
}

#[test]
fn an_invalid_mpi_job_names_the_kind_and_field() {
    let mut job = mpi_job();
    job.spec.slots_per_worker = Some(0);
    let mut world = World::mpi(job);
    let plan = world.reconcile();
    assert!(plan.apply.is_empty());
    assert_eq!(plan.events[0].reason, "InvalidSpec");
    assert_eq!(
        plan.events[0].note,
        "invalid MPIJob: spec.slotsPerWorker: must be at least 1, not 0; nothing is created or changed until the spec is fixed"
    );
}

#[test]
fn a_deadline_beyond_the_last_time_there_is_never_comes() {
    let mut job = mpi_job();
    job.spec.run_policy = Some(RunPolicy {
        active_deadline_seconds: Some(251_602_207_201),
        ..RunPolicy::default()
    });
    let mut world = running(job);
    world.advance(86_400);
    world.reconcile();
    assert_eq!(world.mpi_status().phase, Some(JobPhase::Running));
}

fn suspend_by_run_policy(world: &mut World) {
    job_of(world).spec.run_policy = Some(RunPolicy {
        suspend: Some(true),
        ..RunPolicy::default()
    });
}

#[test]
fn without_an_elastic_policy_kueues_suspend_deletes_the_pods_at_once_after_showing_the_notice() {
    let mut world = running(mpi_job());
    let launcher = world.launcher_pod_name();
    suspend_by_run_policy(&mut world);
    let plan = world.reconcile();
    // The notice is written to every running pod before it is deleted (applies come first).
    let noticed: Vec<&str> = plan
        .apply
        .iter()
        .filter_map(|child| match child {
            Child::PodMetadata(change)
                if change
                    .annotation(eto_api::well_known::NOTICE_ANNOTATION)
                    .is_some_and(|n| n.contains("\"kind\":\"Suspend\"")) =>
            {
                Some(change.name.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(noticed, [launcher.as_str(), "pi-worker-0", "pi-worker-1"]);
    assert!(plan.delete.iter().any(|d| d.kind == ChildKind::Job));
    assert_eq!(
        deleted_pods(&plan),
        [launcher.as_str(), "pi-worker-0", "pi-worker-1"]
    );
    assert!(world.pods.is_empty(), "{:?}", world.pods.keys());
    assert_eq!(
        condition(&world, conditions::SUSPENDED),
        (true, "MPIJobSuspended".into())
    );
}

#[test]
fn with_an_elastic_policy_kueues_suspend_gives_the_pods_their_grace_period() {
    let mut job = mpi_job();
    job.spec.elastic_policy = Some(MpiElasticPolicy::default());
    let mut world = running(job);
    suspend_by_run_policy(&mut world);
    let plan = world.reconcile();
    assert!(plan.delete.is_empty());
    let notice = world.mpi_status().notice.expect("a checkpoint notice");
    assert_eq!(
        notice.deadline.unwrap().0,
        world.now + jiff::SignedDuration::from_secs(300)
    );
    world.advance(299);
    world.reconcile();
    assert_eq!(world.pods.len(), 3, "kept within the grace period");
    world.advance(1);
    world.reconcile();
    assert!(world.pods.is_empty());
}
