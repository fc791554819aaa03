//! The PodGroup through a job's life: created before the pods that belong to it, the
//! launcher joining the gang once it exists, removed while the job is suspended or finished.

use eto_api::job_status::JobPhase;
use pretty_assertions::assert_eq;

use crate::gang::{GANG_SCHEDULER_MISSING, VOLCANO_GROUP_ANNOTATION};
use crate::plan::*;
use crate::pod_group::GangScheduler;
use crate::testing::world::{World, pod_names};
use crate::testing::{mpi_job, training_job};

fn volcano_world() -> World {
    let mut world = World::new(training_job());
    world.gang = Some(GangScheduler::Volcano);
    world
}

fn min_member(world: &World) -> Option<i32> {
    world.pod_group.as_ref().map(|group| group.spec.min_member)
}

fn kinds(plan: &Plan) -> Vec<&'static str> {
    plan.apply.iter().map(Child::kind).collect()
}

fn deletes_pod_group(plan: &Plan) -> bool {
    plan.delete
        .iter()
        .any(|deletion| deletion.kind == ChildKind::PodGroup && deletion.name == "mnist")
}

#[test]
fn the_group_comes_before_its_pods_and_takes_the_launcher_in_once_it_exists() {
    let mut world = volcano_world();
    let plan = world.reconcile();
    let kinds = kinds(&plan);
    let group = kinds.iter().position(|kind| *kind == "PodGroup").unwrap();
    let first_pod = kinds.iter().position(|kind| *kind == "Pod").unwrap();
    assert!(group < first_pod, "{kinds:?}");
    assert_eq!(
        min_member(&world),
        Some(2),
        "the two workers of the minimum; the launcher does not exist yet"
    );
    let worker = &world.pods["mnist-worker-0"];
    assert_eq!(
        worker.metadata.annotations.as_ref().unwrap()[VOLCANO_GROUP_ANNOTATION],
        "mnist"
    );
    assert_eq!(
        worker.spec.as_ref().unwrap().scheduler_name.as_deref(),
        Some("volcano")
    );

    world.ready("mnist-worker-0");
    world.ready("mnist-worker-1");
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-launcher"]);
    assert_eq!(
        world.pods["mnist-launcher"]
            .spec
            .as_ref()
            .unwrap()
            .scheduler_name
            .as_deref(),
        Some("volcano"),
        "the launcher belongs to the group too"
    );
    world.reconcile();
    assert_eq!(min_member(&world), Some(3), "the launcher joined the gang");
    world.ready("mnist-launcher");
    world.reconcile();
    assert!(
        world.reconcile().is_empty(),
        "a group that says what eto would write is not written again"
    );
}

#[test]
fn a_suspended_job_holds_no_group_and_a_resumed_one_gets_a_fresh_one() {
    let mut world = volcano_world();
    world.launch();
    assert_eq!(min_member(&world), Some(3));
    world.job.spec.suspend = Some(true);
    let plan = world.reconcile();
    assert!(
        !deletes_pod_group(&plan),
        "while the workers checkpoint, they keep their group"
    );
    world.advance(300);
    let plan = world.reconcile();
    assert!(world.pods.is_empty());
    assert!(deletes_pod_group(&plan), "the suspend releases the gang");
    assert_eq!(world.pod_group, None);
    world.advance(3_600);
    let plan = world.reconcile();
    assert!(
        !plan.apply.iter().any(|child| child.kind() == "PodGroup"),
        "nothing is reserved while suspended"
    );

    world.job.spec.suspend = Some(false);
    let plan = world.reconcile();
    assert!(kinds(&plan).contains(&"PodGroup"));
    assert_eq!(
        min_member(&world),
        Some(2),
        "a new run: the launcher is created once its workers are ready"
    );
}

#[test]
fn a_finished_job_releases_its_group() {
    let mut world = volcano_world();
    world.launch();
    world.exit("mnist-launcher", 0);
    let plan = world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Succeeded));
    assert!(deletes_pod_group(&plan));
    assert!(
        !deletes_pod_group(&world.reconcile()),
        "deleted once, not again"
    );
}

#[test]
fn without_a_gang_scheduler_there_is_no_group() {
    let mut world = World::new(training_job());
    let plan = world.reconcile();
    assert!(!kinds(&plan).contains(&"PodGroup"));
    assert_eq!(
        world.pods["mnist-worker-0"]
            .spec
            .as_ref()
            .unwrap()
            .scheduler_name,
        None
    );
}

#[test]
fn an_mpi_job_launcher_job_template_joins_the_group() {
    let mut world = World::mpi(mpi_job());
    world.gang = Some(GangScheduler::Coscheduling {
        scheduler_name: "scheduler-plugins-scheduler".into(),
    });
    let plan = world.reconcile();
    assert_eq!(
        kinds(&plan).first(),
        Some(&"Service"),
        "supporting objects first"
    );
    assert_eq!(
        min_member(&world),
        Some(3),
        "AtStartup: workers and launcher"
    );
    let launcher = world
        .launcher_job
        .as_ref()
        .expect("created with the workers");
    let template = &launcher.spec.as_ref().unwrap().template;
    assert_eq!(
        template.metadata.as_ref().unwrap().labels.as_ref().unwrap()
            [crate::gang::COSCHEDULING_GROUP_LABEL],
        "pi"
    );
    assert_eq!(
        template.spec.as_ref().unwrap().scheduler_name.as_deref(),
        Some("scheduler-plugins-scheduler")
    );
}

#[test]
fn without_the_schedulers_api_no_pod_is_created_and_the_job_says_why_once() {
    let mut world = volcano_world();
    world.pod_groups_served = false;
    let plan = world.reconcile();
    assert!(pod_names(&plan).is_empty());
    assert!(!kinds(&plan).contains(&"PodGroup"));
    let (ready, reason) = world.condition(crate::conditions::READY);
    assert_eq!((ready, reason.as_str()), (false, GANG_SCHEDULER_MISSING));
    let message = &crate::conditions::find(&world.status().conditions, crate::conditions::STALLED)
        .unwrap()
        .message;
    assert!(
        message
            .as_deref()
            .unwrap()
            .contains("CustomResourceDefinition podgroups.scheduling.volcano.sh"),
        "{message:?}"
    );
    assert_eq!(
        plan.requeue_after,
        Some(crate::gang::GANG_SCHEDULER_RECHECK),
        "it looks again"
    );
    assert_eq!(plan.events.len(), 1);
    world.advance(60);
    let plan = world.reconcile();
    assert!(plan.events.is_empty(), "reported once");

    world.pod_groups_served = true;
    let plan = world.reconcile();
    assert!(kinds(&plan).contains(&"PodGroup"));
    assert_eq!(pod_names(&plan), ["mnist-worker-0", "mnist-worker-1"]);
}

#[test]
fn a_pod_group_of_the_jobs_name_held_by_another_owner_is_reported_not_written() {
    let mut world = volcano_world();
    world.taken = vec![TakenName {
        kind: "PodGroup",
        name: "mnist".into(),
        holder: "MPIJob/mnist".into(),
    }];
    let plan = world.reconcile();
    assert!(!kinds(&plan).contains(&"PodGroup"));
    assert!(
        pod_names(&plan).is_empty(),
        "no pod joins a group that is not the job's"
    );
    assert_eq!(world.condition(crate::conditions::READY).1, NAME_TAKEN);
}
