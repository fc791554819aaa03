//! A PyTorchJob's life, planned by the same engine: the Master in the launcher's place, a
//! Service per pod, v1's environment, each run's Workers numbered from 0, v1's status.

use eto_api::PyTorchJob;
use eto_api::job_status::JobPhase;
use k8s_openapi::api::core::v1::Pod;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::conditions;
use crate::plan::*;
use crate::testing::pytorch_job;
use crate::testing::world::{World, deleted_pods, pod_names, reasons};

fn patched(patch: serde_json::Value) -> PyTorchJob {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    json_patch::merge(&mut value, &patch);
    serde_json::from_value(value).unwrap()
}

/// The value of variable `name` in `pod`'s first container, if set.
pub(super) fn env(pod: &Pod, name: &str) -> Option<String> {
    pod.spec.as_ref()?.containers[0]
        .env
        .iter()
        .flatten()
        .find(|var| var.name == name)
        .and_then(|var| var.value.clone())
}

fn status(world: &World) -> eto_api::PyTorchJobStatus {
    world
        .pytorch_job
        .as_ref()
        .and_then(|job| job.status.clone())
        .expect("the job has a status")
}

fn last_condition(world: &World) -> String {
    status(world)
        .conditions
        .last()
        .map(|c| c.type_.clone())
        .unwrap_or_default()
}

/// A world whose Master and Workers run and are ready.
fn running(job: PyTorchJob) -> World {
    let mut world = World::pytorch(job);
    world.reconcile();
    for pod in ["ddp-master-0", "ddp-worker-0", "ddp-worker-1"] {
        world.ready(pod);
    }
    world.reconcile();
    world
}

#[test]
fn a_new_job_gets_a_service_per_pod_and_its_master_and_workers_with_v1s_environment() {
    let mut world = World::pytorch(pytorch_job());
    let plan = world.reconcile();
    let services: Vec<&str> = plan
        .apply
        .iter()
        .filter_map(|child| match child {
            Child::Service(service) => service.metadata.name.as_deref(),
            _ => None,
        })
        .collect();
    assert_eq!(services, ["ddp-master-0", "ddp-worker-0", "ddp-worker-1"]);
    assert_eq!(
        pod_names(&plan),
        ["ddp-worker-0", "ddp-worker-1", "ddp-master-0"]
    );
    assert!(plan.create_ssh_secret.is_none(), "torchrun needs no SSH");
    assert!(
        !plan.apply.iter().any(|child| matches!(
            child,
            Child::ConfigMap(_) | Child::ServiceAccount(_) | Child::Role(_) | Child::RoleBinding(_)
        )),
        "no discovery and no launcher RBAC"
    );
    for (pod, rank) in [
        ("ddp-master-0", "0"),
        ("ddp-worker-0", "1"),
        ("ddp-worker-1", "2"),
    ] {
        let pod = &world.pods[pod];
        assert_eq!(env(pod, "RANK").as_deref(), Some(rank));
        assert_eq!(env(pod, "WORLD_SIZE").as_deref(), Some("3"));
        assert_eq!(env(pod, "MASTER_ADDR").as_deref(), Some("ddp-master-0"));
        assert_eq!(
            pod.spec.as_ref().unwrap().restart_policy.as_deref(),
            Some("OnFailure")
        );
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(
            labels["training.kubeflow.org/operator-name"],
            "pytorchjob-controller"
        );
        assert_eq!(labels["app.kubernetes.io/managed-by"], "eto");
    }
    let master = world.pods["ddp-master-0"].metadata.labels.clone().unwrap();
    assert_eq!(master["training.kubeflow.org/replica-type"], "master");
    assert_eq!(master["training.kubeflow.org/job-role"], "master");
    let service = &world.pod_services["ddp-worker-1"];
    assert_eq!(
        service.spec.as_ref().unwrap().selector.as_ref().unwrap()["training.kubeflow.org/replica-index"],
        "1"
    );
    assert_eq!(
        service.metadata.labels.as_ref().unwrap()["app.kubernetes.io/managed-by"],
        "eto"
    );
    let written = status(&world);
    assert_eq!(written.eto.phase, Some(JobPhase::Created));
    assert_eq!(
        written.conditions.last().unwrap().reason.as_deref(),
        Some("PyTorchJobCreated")
    );
    assert_eq!(
        world.reconcile(),
        Plan::default(),
        "a second look changes nothing"
    );
}

#[test]
fn the_job_runs_and_succeeds_with_its_master_and_the_state_column_follows() {
    let mut world = running(pytorch_job());
    assert_eq!(status(&world).eto.phase, Some(JobPhase::Running));
    assert_eq!(last_condition(&world), "Running");
    let written = status(&world);
    let master = &written.replica_statuses[&eto_api::pytorch_job::PyTorchReplicaType::Master];
    assert_eq!(master.active, 1);
    world.exit("ddp-master-0", 0);
    let plan = world.reconcile();
    assert!(
        reasons(&plan).contains(&"PyTorchJobSucceeded".to_string()),
        "{plan:#?}"
    );
    let written = status(&world);
    assert_eq!(written.eto.phase, Some(JobPhase::Succeeded));
    assert!(written.completion_time.is_some());
    assert_eq!(last_condition(&world), "Succeeded");
    assert!(
        deleted_pods(&plan).is_empty(),
        "cleanPodPolicy None keeps the Workers"
    );
}

#[test]
fn a_master_that_fails_under_never_fails_the_job_and_under_on_failure_restarts_the_run() {
    let mut world = running(patched(
        json!({"spec": {"pytorchReplicaSpecs": {"Master": {"restartPolicy": "Never"}}}}),
    ));
    world.exit("ddp-master-0", 1);
    world.reconcile();
    assert_eq!(status(&world).eto.phase, Some(JobPhase::Failed));
    assert_eq!(last_condition(&world), "Failed");

    let mut world = running(pytorch_job());
    world.exit("ddp-master-0", 1);
    let plan = world.reconcile();
    assert_eq!(status(&world).eto.restart_count, Some(1));
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-master-0", "ddp-worker-0", "ddp-worker-1"],
        "the run ends: every pod goes"
    );
    assert_eq!(last_condition(&world), "Restarting");
    let plan = world.reconcile();
    assert_eq!(
        pod_names(&plan),
        ["ddp-worker-0", "ddp-worker-1", "ddp-master-0"],
        "the new run's pods take the same names, and so the same ranks"
    );
    assert_eq!(
        env(&world.pods["ddp-worker-1"], "RANK").as_deref(),
        Some("2")
    );
}

#[test]
fn a_worker_the_platform_takes_ends_the_run_not_the_job_and_the_next_run_has_the_same_ranks() {
    for lose in [World::evict, World::lose_with_node] {
        let mut world = running(pytorch_job());
        lose(&mut world, "ddp-worker-1");
        let plan = world.reconcile();
        assert_eq!(
            deleted_pods(&plan),
            ["ddp-master-0", "ddp-worker-0", "ddp-worker-1"],
            "the run cannot go on without its rank"
        );
        let written = status(&world);
        assert_eq!(
            written.eto.restart_count,
            Some(0),
            "the platform's loss counts nothing"
        );
        assert_eq!(written.eto.run, Some(1));
        let plan = world.reconcile();
        assert_eq!(
            pod_names(&plan),
            ["ddp-worker-0", "ddp-worker-1", "ddp-master-0"],
            "the new run's pods take the same names"
        );
        assert_eq!(
            env(&world.pods["ddp-worker-1"], "RANK").as_deref(),
            Some("2")
        );
    }
}

#[test]
fn a_worker_whose_training_fails_restarts_the_job_or_fails_it_as_its_policy_says() {
    let mut world = running(pytorch_job());
    world.exit("ddp-worker-0", 1);
    world.reconcile();
    assert_eq!(
        status(&world).eto.restart_count,
        Some(1),
        "OnFailure restarts, counted"
    );
    assert_eq!(last_condition(&world), "Restarting");

    for (policy, code) in [("Never", 1), ("ExitCode", 1)] {
        let mut world = running(patched(
            json!({"spec": {"pytorchReplicaSpecs": {"Worker": {"restartPolicy": policy}}}}),
        ));
        world.exit("ddp-worker-0", code);
        world.reconcile();
        assert_eq!(status(&world).eto.phase, Some(JobPhase::Failed), "{policy}");
        assert_eq!(last_condition(&world), "Failed");
    }
    let mut world = running(patched(
        json!({"spec": {"pytorchReplicaSpecs": {"Worker": {"restartPolicy": "ExitCode"}}}}),
    ));
    world.exit("ddp-worker-0", 137);
    world.reconcile();
    assert_eq!(
        status(&world).eto.restart_count,
        Some(1),
        "killed by a signal: restarted"
    );

    let mut world = running(patched(json!({"spec": {"runPolicy": {"backoffLimit": 0}}})));
    world.exit("ddp-worker-0", 1);
    world.reconcile();
    assert_eq!(
        status(&world).eto.phase,
        Some(JobPhase::Failed),
        "backoffLimit bounds it"
    );
}

#[test]
fn run_policy_suspend_deletes_the_pods_at_once_and_resuming_recreates_them() {
    let mut world = running(pytorch_job());
    world.pytorch_job.as_mut().unwrap().spec.run_policy = Some(eto_api::pytorch_job::RunPolicy {
        suspend: Some(true),
        ..Default::default()
    });
    let plan = world.reconcile();
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-master-0", "ddp-worker-0", "ddp-worker-1"]
    );
    world.reconcile();
    assert_eq!(status(&world).eto.phase, Some(JobPhase::Suspended));
    assert_eq!(last_condition(&world), "Suspended");
    world.pytorch_job.as_mut().unwrap().spec.run_policy = None;
    let plan = world.reconcile();
    assert_eq!(
        pod_names(&plan),
        ["ddp-worker-0", "ddp-worker-1", "ddp-master-0"]
    );
}

#[test]
fn an_elastic_job_naming_its_rendezvous_host_runs_with_v1s_wiring_and_succeeds_with_the_first() {
    let mut world = World::pytorch(patched(json!({"spec": {
        "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "maxRestarts": 2, "rdzvHost": "ddp-worker-0"},
        "pytorchReplicaSpecs": {"Master": null}
    }})));
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["ddp-worker-0", "ddp-worker-1"]);
    let worker = &world.pods["ddp-worker-1"];
    assert_eq!(env(worker, "PET_NNODES").as_deref(), Some("1:3"));
    assert_eq!(
        env(worker, "PET_RDZV_ENDPOINT").as_deref(),
        Some("ddp-worker-0:23456")
    );
    assert_eq!(env(worker, "PET_RDZV_BACKEND").as_deref(), Some("c10d"));
    assert_eq!(env(worker, "PET_MAX_RESTARTS").as_deref(), Some("2"));
    world.ready("ddp-worker-0");
    world.ready("ddp-worker-1");
    world.reconcile();
    world.exit("ddp-worker-1", 0);
    world.reconcile();
    assert_eq!(
        status(&world).eto.phase,
        Some(JobPhase::Succeeded),
        "v1: an elastic job succeeds with its first Worker"
    );
}

#[test]
fn a_job_of_workers_only_runs_while_they_run_and_succeeds_once_every_one_has() {
    let mut world = World::pytorch(patched(
        json!({"spec": {"pytorchReplicaSpecs": {"Master": null}}}),
    ));
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["ddp-worker-0", "ddp-worker-1"]);
    assert_eq!(
        world.pod_services.keys().collect::<Vec<_>>(),
        ["ddp-worker-0", "ddp-worker-1"]
    );
    let worker = &world.pods["ddp-worker-0"];
    assert_eq!(
        env(worker, "MASTER_ADDR"),
        None,
        "v1 gives workers only no master"
    );
    assert_eq!(env(worker, "PET_NNODES").as_deref(), Some("2"));
    assert_eq!(
        worker.metadata.labels.as_ref().unwrap()["training.kubeflow.org/job-role"],
        "master",
        "worker 0 is rank 0"
    );
    world.ready("ddp-worker-0");
    world.ready("ddp-worker-1");
    world.reconcile();
    assert_eq!(status(&world).eto.phase, Some(JobPhase::Running));
    world.exit("ddp-worker-1", 0);
    world.reconcile();
    assert_eq!(
        status(&world).eto.phase,
        Some(JobPhase::Running),
        "one of two finished"
    );
    world.exit("ddp-worker-0", 0);
    let plan = world.reconcile();
    assert!(reasons(&plan).contains(&"PyTorchJobSucceeded".to_string()));
    assert_eq!(last_condition(&world), "Succeeded");
}

#[test]
fn a_job_training_operator_v1_started_is_left_as_it_is_and_one_it_finished_stays_finished() {
    let v1_status = |types: &[(&str, &str)]| {
        let conditions: Vec<serde_json::Value> = types
            .iter()
            .map(|(type_, status)| json!({"type": type_, "status": status, "reason": format!("PyTorchJob{type_}")}))
            .collect();
        serde_json::from_value(json!({"conditions": conditions})).unwrap()
    };
    let mut running = pytorch_job();
    running.status = Some(v1_status(&[("Created", "True"), ("Running", "True")]));
    let mut world = World::pytorch(running);
    let plan = world.reconcile();
    assert!(pod_names(&plan).is_empty() && deleted_pods(&plan).is_empty());
    let stalled = status(&world)
        .conditions
        .into_iter()
        .find(|c| c.type_ == conditions::STALLED)
        .and_then(|c| c.message)
        .unwrap_or_default();
    assert!(stalled.contains("training-operator v1"), "{stalled}");
    assert_eq!(
        status(&world).eto.phase,
        None,
        "v1's conditions stay as v1 wrote them"
    );

    let mut finished = pytorch_job();
    finished.status = Some(v1_status(&[("Created", "True"), ("Succeeded", "True")]));
    let mut world = World::pytorch(finished);
    let plan = world.reconcile();
    assert!(pod_names(&plan).is_empty() && deleted_pods(&plan).is_empty());
    assert_eq!(last_condition(&world), "Succeeded");
}

#[test]
fn a_gang_counts_the_master_when_there_is_one_and_reads_the_scheduling_policy() {
    let min_member = |job: PyTorchJob| {
        let mut world = World::pytorch(job);
        world.gang = Some(crate::pod_group::GangScheduler::Volcano);
        world.reconcile();
        let group = world.pod_group.clone().expect("a PodGroup");
        (group.spec.min_member, group.spec.queue)
    };
    assert_eq!(min_member(pytorch_job()), (3, None));
    assert_eq!(
        min_member(patched(
            json!({"spec": {"pytorchReplicaSpecs": {"Master": null}}})
        )),
        (2, None),
        "no Master, no launcher in the gang"
    );
    assert_eq!(
        min_member(patched(json!({"spec": {"runPolicy": {"schedulingPolicy": {
            "minAvailable": 2, "queue": "research"
        }}}}))),
        (2, Some("research".to_string()))
    );
}

#[test]
fn clean_pod_policy_deletes_pods_and_their_services_as_v1_does() {
    let services = |world: &World| world.pod_services.keys().cloned().collect::<Vec<_>>();
    let mut world = running(patched(
        json!({"spec": {"runPolicy": {"cleanPodPolicy": "Running"}}}),
    ));
    world.exit("ddp-master-0", 0);
    let plan = world.reconcile();
    assert_eq!(deleted_pods(&plan), ["ddp-worker-0", "ddp-worker-1"]);
    assert_eq!(
        services(&world),
        ["ddp-master-0"],
        "the finished Master keeps its Service"
    );
    // The next look counts the pods that went; then nothing changes.
    assert!(world.reconcile().delete.is_empty());
    assert_eq!(world.reconcile(), Plan::default(), "nothing more to delete");

    let mut world = running(patched(
        json!({"spec": {"runPolicy": {"cleanPodPolicy": "All"}}}),
    ));
    world.exit("ddp-master-0", 0);
    let plan = world.reconcile();
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-master-0", "ddp-worker-0", "ddp-worker-1"],
        "All: the Master too"
    );
    assert!(services(&world).is_empty());
}
