//! Workers joining a running group of an elastic PyTorchJob whose rendezvous eto hosts start
//! together (see crate::joining): the first group's workers start at once, the workers of a
//! scale-out wait behind their gate until all of them run, or their batch wait ends.

use eto_api::PyTorchJob;
use eto_api::job_status::JobPhase;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::joining::{self, GO, START_ANNOTATION};
use crate::plan::{Child, Plan};
use crate::testing::pytorch_job;
use crate::testing::world::{World, created_pods};

/// `ddp`: three Workers between two and five, its rendezvous left to eto.
fn job() -> PyTorchJob {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "elasticPolicy": {"minReplicas": 2, "maxReplicas": 5},
            "pytorchReplicaSpecs": {"Master": null, "Worker": {"replicas": 3}}
        }}),
    );
    serde_json::from_value(value).unwrap()
}

pub(super) fn start(world: &World, pod: &str) -> Option<String> {
    crate::pods::annotation(&world.pods[pod], START_ANNOTATION).map(String::from)
}

/// The gates `plan` opens.
pub(super) fn opened(plan: &Plan) -> Vec<String> {
    plan.apply
        .iter()
        .filter_map(|child| match child {
            Child::PodMetadata(change)
                if change.annotations.get(START_ANNOTATION) == Some(&Some(GO.into())) =>
            {
                Some(change.name.clone())
            }
            _ => None,
        })
        .collect()
}

/// A world whose job runs with its three first workers.
fn running() -> World {
    let mut world = World::pytorch(job());
    world.reconcile();
    for pod in ["ddp-rdzv", "ddp-worker-0", "ddp-worker-1", "ddp-worker-2"] {
        assert_eq!(
            (pod, start(&world, pod)),
            (pod, (pod != "ddp-rdzv").then(|| GO.to_string())),
            "the first group starts at once"
        );
        world.ready(pod);
    }
    world.reconcile();
    let status = world
        .pytorch_job
        .as_ref()
        .and_then(|job| job.status.clone());
    assert_eq!(status.and_then(|s| s.eto.phase), Some(JobPhase::Running));
    world
}

/// Sets the Worker replicas and plans; the new pods get their creation time.
fn scale_to(world: &mut World, replicas: i32) -> Vec<String> {
    world.set_worker_replicas(replicas);
    let created = created_pods(&world.reconcile());
    for pod in &created {
        world.pod(pod).metadata.creation_timestamp = Some(Time(world.now));
    }
    created
}

#[test]
fn workers_of_a_scale_out_start_together_once_all_of_them_run() {
    let mut world = running();
    let created = scale_to(&mut world, 5);
    assert_eq!(created, ["ddp-worker-3", "ddp-worker-4"]);
    for pod in &created {
        assert_eq!(start(&world, pod), None, "{pod} waits behind its gate");
        let spec = world.pods[pod].spec.clone().unwrap();
        let command = spec.containers[0].command.clone().unwrap();
        assert_eq!(&command[..2], ["/bin/sh", "-c"], "{command:?}");
        let items = spec
            .volumes
            .unwrap()
            .into_iter()
            .find(|v| v.name == crate::builders::NOTICE_VOLUME)
            .and_then(|v| v.downward_api?.items)
            .unwrap();
        assert!(
            items.iter().any(|item| item.path == joining::START_FILE),
            "{items:?}"
        );
    }
    world.advance(3);
    world.ready("ddp-worker-3");
    assert_eq!(
        opened(&world.reconcile()),
        Vec::<String>::new(),
        "worker 4 is not there yet"
    );
    world.advance(3);
    world.ready("ddp-worker-4");
    assert_eq!(
        opened(&world.reconcile()),
        ["ddp-worker-3", "ddp-worker-4"],
        "together"
    );
}

#[test]
fn a_worker_left_pending_holds_the_others_no_longer_than_the_batch_wait() {
    let mut world = running();
    scale_to(&mut world, 5);
    world.ready("ddp-worker-3");
    let plan = world.reconcile();
    assert_eq!(opened(&plan), Vec::<String>::new());
    assert!(
        plan.requeue_after
            .is_some_and(|after| after <= joining::BATCH_WAIT),
        "{:?}",
        plan.requeue_after
    );
    world.advance(30);
    assert_eq!(opened(&world.reconcile()), ["ddp-worker-3"]);
    world.advance(60);
    world.ready("ddp-worker-4");
    assert_eq!(opened(&world.reconcile()), ["ddp-worker-4"], "once it runs");
}
