//! A pod the API server refuses to create: the job reports it once and creates no pod.

use pretty_assertions::assert_eq;

use crate::conditions;
use crate::plan::*;
use crate::testing::training_job;
use crate::testing::world::{World, pod_names, reasons};

fn rejection(name: &str) -> RejectedPod {
    RejectedPod {
        name: name.into(),
        message: "Pod \"x\" is invalid: spec.containers[0].name: Invalid value: \"Worker\"".into(),
    }
}

#[test]
fn a_new_job_whose_first_worker_is_rejected_creates_no_pod_and_says_why_once() {
    let mut world = World::new(training_job());
    world.rejected_pod = Some(rejection("mnist-worker-0"));
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), Vec::<String>::new(), "no pod is created");
    let kinds: Vec<&str> = plan.apply.iter().map(Child::kind).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "Service",
            "ConfigMap"
        ],
        "the objects that were accepted are still applied"
    );
    assert_eq!(
        reasons(&plan),
        [POD_REJECTED],
        "one event, no WorkersCreated"
    );
    assert!(plan.events[0].warning);
    assert!(
        plan.events[0]
            .note
            .contains("rejected pod mnist-worker-0: Pod \"x\" is invalid"),
        "{}",
        plan.events[0].note
    );
    assert_eq!(plan.requeue_after, Some(POD_REJECTED_RECHECK));
    let status = world.status();
    assert!(
        status.target_workers.is_empty(),
        "no worker is the job's yet"
    );
    assert_eq!(status.next_worker_index, None, "no index is used up");
    assert_eq!(
        world.condition(conditions::READY),
        (false, POD_REJECTED.into())
    );
    assert_eq!(
        world.condition(conditions::STALLED),
        (true, POD_REJECTED.into())
    );
    assert!(
        !conditions::is_true(&world.status().conditions, conditions::LAUNCHER_CREATED),
        "no launcher either"
    );

    // Rejected again on the next try: nothing new to say.
    let plan = world.reconcile();
    assert!(plan.events.is_empty(), "{:?}", plan.events);
    assert!(plan.status.is_none(), "the status does not change");

    // Accepted at last: the workers are created under the indices they would have had.
    world.rejected_pod = None;
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-worker-0", "mnist-worker-1"]);
    assert_eq!(reasons(&plan), ["WorkersCreated"]);
    assert_eq!(world.condition(conditions::STALLED).0, false);
}

#[test]
fn a_rejected_replacement_still_lets_host_discovery_drop_the_lost_worker() {
    let mut world = World::launched_replacing_failed_workers();

    world.exit("mnist-worker-1", 1);
    world.rejected_pod = Some(rejection("mnist-worker-2"));
    let plan = world.reconcile();
    assert_eq!(
        pod_names(&plan),
        ["mnist-launcher"],
        "only the launcher's hostfile changes"
    );
    assert_eq!(
        world.launcher_hostfile().as_deref(),
        Some("mnist-worker-0.mnist-workers:1\n")
    );
    assert_eq!(reasons(&plan), [POD_REJECTED]);
    let status = world.status();
    assert_eq!(
        status.target_workers,
        ["mnist-worker-0", "mnist-worker-1"],
        "the workers' bookkeeping waits, as after a failed write"
    );
    assert!(status.blacklist.is_empty());

    world.rejected_pod = None;
    let plan = world.reconcile();
    assert_eq!(
        pod_names(&plan),
        ["mnist-worker-2"],
        "the replacement, once"
    );
    assert_eq!(reasons(&plan), ["WorkerLost", "WorkersCreated"]);
    assert_eq!(world.status().blacklist.len(), 1);
    assert_eq!(
        world.status().target_workers,
        ["mnist-worker-0", "mnist-worker-2"]
    );
}
