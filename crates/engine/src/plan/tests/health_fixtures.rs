//! The statuses eto writes in each state a job can be in, kept as the test data of the Argo CD
//! health checks in `integrations/argocd/`: each fixture there is a job as the engine plans it
//! here, so a change of status that a health check would misread fails a test. (The fixtures
//! of MPIJobs that mpi-operator wrote are written by hand, from mpi-operator's conditions.)
//!
//! `UPDATE_FIXTURES=1 cargo test -p eto-engine health_fixtures` rewrites them.

use std::path::{Path, PathBuf};

use eto_api::job_status::JobPhase;
use eto_api::mpi_job::{MpiElasticPolicy, RunPolicy};
use eto_api::training_job::JobRestartPolicy;
use eto_api::{MPIJob, PyTorchJob, TrainingJob};
use serde_json::json;

use crate::kind::mpi_job::status as mpi_status;
use crate::plan::{RejectedPod, TakenName};
use crate::testing::world::World;
use crate::testing::{mpi_job, pytorch_job, training_job};

/// A TrainingJob of 2 workers, at least 2, at generation 1, in a world that planned it once.
fn new_job() -> World {
    let mut job = training_job();
    job.metadata.generation = Some(1);
    job.spec.et_replica_specs.worker.min_replicas = Some(2);
    let mut world = World::new(job);
    world.reconcile();
    world
}

fn workers_ready(world: &mut World, names: &[&str]) {
    for name in names {
        world.ready(name);
    }
    world.reconcile();
}

fn running() -> World {
    let mut world = new_job();
    workers_ready(&mut world, &["mnist-worker-0", "mnist-worker-1"]);
    world.ready("mnist-launcher");
    world.reconcile();
    world
}

fn launcher_exits(mut world: World, code: i32) -> World {
    world.exit("mnist-launcher", code);
    world.reconcile();
    world
}

fn suspended_below_min() -> World {
    let mut world = running();
    world.disrupt("mnist-worker-1");
    world.reconcile();
    launcher_exits(world, 1)
}

fn suspended_for_its_launcher() -> World {
    let mut world = running();
    world.lose_with_node("mnist-launcher");
    world.reconcile();
    world
}

fn suspended_by_spec() -> World {
    let mut world = running();
    world.job.spec.suspend = Some(true);
    world.reconcile();
    launcher_exits(world, 0)
}

/// Each TrainingJob state: the fixture's name, the phase it has, and the job.
fn training_jobs() -> Vec<(&'static str, Option<JobPhase>, TrainingJob)> {
    let waiting_for_workers = new_job();
    let mut waiting_for_launcher = new_job();
    workers_ready(
        &mut waiting_for_launcher,
        &["mnist-worker-0", "mnist-worker-1"],
    );
    let mut scaling = running();
    scaling.job.spec.et_replica_specs.worker.max_replicas = Some(4);
    scaling.request(
        crate::scaling::ScalerKind::ScaleOut,
        "out",
        json!({"toAdd": {"count": 2}}),
    );
    scaling.reconcile();
    let mut restarting = running();
    restarting.job.spec.restart_policy = Some(JobRestartPolicy::OnFailure);
    let restarting = launcher_exits(restarting, 1);
    let mut suspending = running();
    suspending.job.spec.suspend = Some(true);
    suspending.reconcile();
    let mut resuming = suspended_below_min();
    resuming.reconcile();
    let replacements: Vec<String> = resuming
        .pods
        .keys()
        .filter(|name| name.contains("-worker-"))
        .cloned()
        .collect();
    for name in &replacements {
        resuming.ready(name);
    }
    resuming.reconcile();
    let mut invalid = training_job();
    invalid.metadata.generation = Some(1);
    invalid.spec.et_replica_specs.worker.min_replicas = Some(3);
    invalid.spec.et_replica_specs.worker.max_replicas = Some(2);
    let mut invalid = World::new(invalid);
    invalid.reconcile();
    let mut spec_changed = running();
    spec_changed.job.metadata.generation = Some(2);
    let stalled = |adjust: fn(&mut World)| {
        let mut job = training_job();
        job.metadata.generation = Some(1);
        let mut world = World::new(job);
        adjust(&mut world);
        world.reconcile();
        world
    };
    let name_taken = stalled(|world| {
        world.taken = vec![TakenName {
            kind: "ConfigMap",
            name: "mnist-config".into(),
            holder: "Deployment/web".into(),
        }];
    });
    let pod_rejected = stalled(|world| {
        world.rejected_pod = Some(RejectedPod {
            name: "mnist-worker-0".into(),
            message: "Pod \"mnist-worker-0\" is invalid: spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1".into(),
        });
    });
    let gang_scheduler_missing = stalled(|world| {
        world.gang = Some(crate::pod_group::GangScheduler::Volcano);
        world.pod_groups_served = false;
    });

    [
        ("waiting-for-workers", waiting_for_workers),
        ("waiting-for-launcher", waiting_for_launcher),
        ("running", running()),
        ("scaling", scaling),
        ("restarting", restarting),
        ("suspending", suspending),
        ("suspended-below-min", suspended_below_min()),
        ("suspended-launcher-disrupted", suspended_for_its_launcher()),
        ("suspended", suspended_by_spec()),
        ("resuming", resuming),
        ("succeeded", launcher_exits(running(), 0)),
        ("failed", launcher_exits(running(), 1)),
        ("invalid-spec", invalid),
        ("name-taken", name_taken),
        ("pod-rejected", pod_rejected),
        ("gang-scheduler-missing", gang_scheduler_missing),
        ("spec-changed", spec_changed),
    ]
    .into_iter()
    .map(|(name, world)| (name, world.status().phase, world.job))
    .collect()
}

/// An MPIJob of 2 elastic workers (at least 2) at generation 1, planned once.
fn new_mpi_job(adjust: impl FnOnce(&mut MPIJob)) -> World {
    let mut job = mpi_job();
    job.metadata.generation = Some(1);
    adjust(&mut job);
    let mut world = World::mpi(job);
    world.reconcile();
    world
}

fn mpi_running(adjust: impl FnOnce(&mut MPIJob)) -> World {
    let mut world = new_mpi_job(adjust);
    workers_ready(&mut world, &["pi-worker-0", "pi-worker-1"]);
    let launcher = world.launcher_pod_name();
    world.ready(&launcher);
    world.reconcile();
    world
}

fn mpi_launcher_ends(mut world: World, succeeded: bool) -> World {
    let launcher = world.launcher_pod_name();
    world.exit(&launcher, if succeeded { 0 } else { 1 });
    world.launcher_job_finished(succeeded);
    world.reconcile();
    world
}

/// The MPIJob of `world`, with the status the engine planned for it.
fn mpi_job_of(world: World) -> (Option<JobPhase>, MPIJob) {
    let status = world.mpi_status();
    let phase = status.phase;
    let mut job = world.mpi_job.expect("an MPIJob world");
    job.status = Some(mpi_status::from_engine(status));
    (phase, job)
}

/// Each MPIJob state eto writes: the fixture's name, the phase, and the job.
fn mpi_jobs() -> Vec<(&'static str, Option<JobPhase>, MPIJob)> {
    let elastic = |job: &mut MPIJob| {
        job.spec.elastic_policy = Some(MpiElasticPolicy {
            min_replicas: Some(2),
            ..MpiElasticPolicy::default()
        });
    };
    let no_backoff = |job: &mut MPIJob| {
        job.spec.run_policy = Some(RunPolicy {
            backoff_limit: Some(0),
            ..RunPolicy::default()
        });
    };
    let mut kueue_suspended = mpi_running(|_| {});
    kueue_suspended
        .mpi_job
        .as_mut()
        .expect("an MPIJob world")
        .spec
        .run_policy
        .get_or_insert_default()
        .suspend = Some(true);
    kueue_suspended.reconcile();
    let mut below_min = mpi_running(elastic);
    below_min.disrupt("pi-worker-1");
    below_min.reconcile();
    let below_min = mpi_launcher_ends(below_min, false);
    let invalid = new_mpi_job(|job| {
        job.spec.elastic_policy = Some(MpiElasticPolicy {
            min_replicas: Some(3),
            max_replicas: Some(2),
            ..MpiElasticPolicy::default()
        });
    });

    [
        ("eto-waiting-for-workers", new_mpi_job(|_| {})),
        ("eto-running", mpi_running(|_| {})),
        ("eto-suspended", kueue_suspended),
        ("eto-suspended-below-min", below_min),
        (
            "eto-succeeded",
            mpi_launcher_ends(mpi_running(|_| {}), true),
        ),
        (
            "eto-failed",
            mpi_launcher_ends(mpi_running(no_backoff), false),
        ),
        ("eto-invalid-spec", invalid),
    ]
    .into_iter()
    .map(|(name, world)| {
        let (phase, job) = mpi_job_of(world);
        (name, phase, job)
    })
    .collect()
}

/// A PyTorchJob at generation 1, adjusted by `adjust`, in a world that planned it once.
fn new_pytorch_job(adjust: impl FnOnce(&mut PyTorchJob)) -> World {
    let mut job = pytorch_job();
    job.metadata.generation = Some(1);
    adjust(&mut job);
    let mut world = World::pytorch(job);
    world.reconcile();
    world
}

/// A PyTorchJob whose Master and Workers run.
fn pytorch_running(adjust: impl FnOnce(&mut PyTorchJob)) -> World {
    let mut world = new_pytorch_job(adjust);
    workers_ready(
        &mut world,
        &["ddp-master-0", "ddp-worker-0", "ddp-worker-1"],
    );
    world
}

/// Each PyTorchJob state eto writes: the fixture's name, the phase, and the job.
fn pytorch_jobs() -> Vec<(&'static str, Option<JobPhase>, PyTorchJob)> {
    let mut suspended = pytorch_running(|_| {});
    suspended
        .pytorch_job
        .as_mut()
        .expect("a PyTorchJob world")
        .spec
        .run_policy
        .get_or_insert_default()
        .suspend = Some(true);
    suspended.reconcile();
    suspended.reconcile();
    let mut restarting = pytorch_running(|_| {});
    restarting.evict("ddp-worker-1");
    restarting.reconcile();
    let mut succeeded = pytorch_running(|_| {});
    succeeded.exit("ddp-master-0", 0);
    succeeded.reconcile();
    let mut failed = pytorch_running(|job| {
        let master = job.spec.pytorch_replica_specs.get_mut("Master");
        if let Some(master) = master {
            master.restart_policy = Some(eto_api::common::ReplicaRestartPolicy::Never);
        }
    });
    failed.exit("ddp-master-0", 1);
    failed.reconcile();
    let invalid = new_pytorch_job(|job| {
        job.spec.nproc_per_node = Some("all".into());
    });
    [
        ("eto-waiting-for-workers", new_pytorch_job(|_| {})),
        ("eto-running", pytorch_running(|_| {})),
        ("eto-suspended", suspended),
        ("eto-restarting", restarting),
        ("eto-succeeded", succeeded),
        ("eto-failed", failed),
        ("eto-invalid-spec", invalid),
    ]
    .into_iter()
    .map(|(name, world)| {
        let phase = world.observed().job.status().phase;
        let job = world.pytorch_job.expect("a PyTorchJob world");
        (name, phase, job)
    })
    .collect()
}

/// A TrainJob of Trainer's `torch-distributed` runtime at generation 1, adjusted by
/// `adjust`, in a world that planned it once.
fn new_train_job(adjust: impl FnOnce(&mut eto_api::TrainJob)) -> World {
    let mut job = crate::testing::train_job();
    job.metadata.generation = Some(1);
    adjust(&mut job);
    let runtime = crate::job::Referenced::Found(crate::testing::torch_distributed());
    let mut world = World::train(job, runtime);
    world.reconcile();
    world
}

/// A TrainJob whose two nodes run.
fn train_running(adjust: impl FnOnce(&mut eto_api::TrainJob)) -> World {
    let mut world = new_train_job(adjust);
    workers_ready(&mut world, &["mnist-master-0", "mnist-worker-0"]);
    world
}

/// Each TrainJob state eto writes: the fixture's name, the phase, and the job.
fn train_jobs() -> Vec<(&'static str, Option<JobPhase>, eto_api::TrainJob)> {
    let mut suspended = train_running(|_| {});
    if let Some((job, runtime)) = suspended.train_job.as_mut() {
        let mut stored = job.job.clone();
        stored.spec.suspend = Some(true);
        *job = crate::kind::train_job::ResolvedTrainJob::new(stored, runtime);
    }
    suspended.reconcile();
    suspended.reconcile();
    let mut succeeded = train_running(|_| {});
    succeeded.exit("mnist-master-0", 0);
    succeeded.exit("mnist-worker-0", 0);
    succeeded.reconcile();
    // A runtime whose nodes restart `Never`: node 0's failure fails the job.
    let mut never = crate::testing::torch_distributed();
    json_patch::merge(
        &mut never,
        &serde_json::json!({"spec": {"template": {"spec": {"replicatedJobs": [{"name": "node",
            "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "node", "image": "pytorch/pytorch:2.13.0"}]}}}}}]}}}}),
    );
    let mut failed = World::train(
        crate::testing::train_job(),
        crate::job::Referenced::Found(never),
    );
    failed.reconcile();
    workers_ready(&mut failed, &["mnist-master-0", "mnist-worker-0"]);
    failed.exit("mnist-master-0", 1);
    failed.reconcile();
    let invalid = new_train_job(|job| {
        job.spec.trainer.get_or_insert_default().env = vec![k8s_openapi::api::core::v1::EnvVar {
            name: "PET_NNODES".into(),
            value: Some("8".into()),
            value_from: None,
        }];
    });
    [
        ("eto-waiting-for-workers", new_train_job(|_| {})),
        ("eto-running", train_running(|_| {})),
        ("eto-suspended", suspended),
        ("eto-succeeded", succeeded),
        ("eto-failed", failed),
        ("eto-invalid-spec", invalid),
    ]
    .into_iter()
    .map(|(name, world)| {
        let phase = world.observed().job.status().phase;
        let job = world.train_job.expect("a TrainJob world").0.job;
        (name, phase, job)
    })
    .collect()
}

fn testdata(kind_dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../integrations/argocd")
        .join(kind_dir)
        .join("testdata")
}

/// Compares `object` with the fixture `name`, or writes it with `UPDATE_FIXTURES` set.
fn check(dir: &Path, name: &str, object: &impl serde::Serialize) -> Option<String> {
    let yaml = format!(
        "# A job as eto's engine plans it in this state; generated by\n\
         # `UPDATE_FIXTURES=1 cargo test -p eto-engine health_fixtures`, do not edit.\n{}",
        serde_saphyr::to_string(object).expect("jobs serialize")
    );
    let path = dir.join(format!("{name}.yaml"));
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        std::fs::create_dir_all(dir).expect("the testdata directory can be made");
        std::fs::write(&path, &yaml).expect("the fixture can be written");
        return None;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    (committed != yaml).then(|| path.display().to_string())
}

/// The fixtures' names and phases.
fn phases<T>(
    states: Vec<(&'static str, Option<JobPhase>, T)>,
) -> Vec<(&'static str, Option<JobPhase>)> {
    states
        .into_iter()
        .map(|(name, phase, _)| (name, phase))
        .collect()
}

#[test]
fn each_state_has_the_phase_its_fixture_is_named_for() {
    use JobPhase::*;
    pretty_assertions::assert_eq!(
        phases(training_jobs()),
        [
            ("waiting-for-workers", Some(Created)),
            ("waiting-for-launcher", Some(Created)),
            ("running", Some(Running)),
            ("scaling", Some(Scaling)),
            ("restarting", Some(Restarting)),
            ("suspending", Some(Running)),
            ("suspended-below-min", Some(Suspended)),
            ("suspended-launcher-disrupted", Some(Suspended)),
            ("suspended", Some(Suspended)),
            ("resuming", Some(Created)),
            ("succeeded", Some(Succeeded)),
            ("failed", Some(Failed)),
            ("invalid-spec", None),
            ("name-taken", None),
            ("pod-rejected", None),
            ("gang-scheduler-missing", None),
            ("spec-changed", Some(Running)),
        ]
    );
    pretty_assertions::assert_eq!(
        phases(mpi_jobs()),
        [
            ("eto-waiting-for-workers", Some(Created)),
            ("eto-running", Some(Running)),
            ("eto-suspended", Some(Suspended)),
            ("eto-suspended-below-min", Some(Suspended)),
            ("eto-succeeded", Some(Succeeded)),
            ("eto-failed", Some(Failed)),
            ("eto-invalid-spec", None),
        ]
    );
    pretty_assertions::assert_eq!(
        phases(pytorch_jobs()),
        [
            ("eto-waiting-for-workers", Some(Created)),
            ("eto-running", Some(Running)),
            ("eto-suspended", Some(Suspended)),
            ("eto-restarting", Some(Restarting)),
            ("eto-succeeded", Some(Succeeded)),
            ("eto-failed", Some(Failed)),
            ("eto-invalid-spec", None),
        ]
    );
    pretty_assertions::assert_eq!(
        phases(train_jobs()),
        [
            ("eto-waiting-for-workers", Some(Created)),
            ("eto-running", Some(Running)),
            ("eto-suspended", Some(Suspended)),
            ("eto-succeeded", Some(Succeeded)),
            ("eto-failed", Some(Failed)),
            ("eto-invalid-spec", None),
        ]
    );
}

#[test]
fn the_health_checks_test_data_is_what_eto_writes() {
    let mut stale = Vec::new();
    let dir = testdata("kai.alibabacloud.com/TrainingJob");
    for (name, _, job) in training_jobs() {
        stale.extend(check(&dir, name, &job));
    }
    let dir = testdata("kubeflow.org/MPIJob");
    for (name, _, job) in mpi_jobs() {
        stale.extend(check(&dir, name, &job));
    }
    let dir = testdata("kubeflow.org/PyTorchJob");
    for (name, _, job) in pytorch_jobs() {
        stale.extend(check(&dir, name, &job));
    }
    let dir = testdata("trainer.kubeflow.org/TrainJob");
    for (name, _, job) in train_jobs() {
        stale.extend(check(&dir, name, &job));
    }
    assert!(
        stale.is_empty(),
        "stale fixtures (run `UPDATE_FIXTURES=1 cargo test -p eto-engine health_fixtures`): {stale:?}"
    );
}
