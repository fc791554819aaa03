//! ScaleIn and ScaleOut requests against the simulated cluster, as `arena scalein etjob` and
//! `arena scaleout etjob` create them.

use std::time::Duration;

use eto_api::common::{JobCondition, ScalerPhase};
use eto_api::job_status::JobPhase;
use eto_api::{ScaleIn, ScaleOut, TrainingJob};
use eto_tests::env::{Env, JobYaml, in_phase, sim_config};
use eto_tests::history::PodHistory;
use eto_tests::workspace_root;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};

/// A job of `replicas` one-GPU workers between `min` and `max`, whose removed workers drain
/// for one second.
fn job(name: &str, replicas: u32, min: u32, max: u32) -> String {
    JobYaml {
        name,
        replicas,
        min,
        max: Some(max),
        extra_spec: "\n  elasticPolicy:\n    drainSeconds: 1",
        worker_policy: "Never",
    }
    .render()
}

fn scale_out(name: &str, job: &str, count: u32, extra: &str) -> String {
    format!(
        "apiVersion: kai.alibabacloud.com/v1alpha1\nkind: ScaleOut\nmetadata:\n  name: {name}\nspec:\n  selector:\n    name: {job}\n  toAdd:\n    count: {count}\n{extra}"
    )
}

fn scale_in(name: &str, job: &str, to_delete: &str, extra: &str) -> String {
    format!(
        "apiVersion: kai.alibabacloud.com/v1alpha1\nkind: ScaleIn\nmetadata:\n  name: {name}\nspec:\n  selector:\n    name: {job}\n  toDelete:\n{to_delete}\n{extra}"
    )
}

/// Starts `yaml`'s job and waits until all its workers are ready and its launcher runs.
async fn running(env: &Env, yaml: &str) -> TrainingJob {
    let job: TrainingJob = env.apply(yaml).await;
    let name = job.name_any();
    env.wait_job(&name, "runs with every worker ready", |job| {
        job.status.as_ref().is_some_and(|s| {
            s.phase == Some(JobPhase::Running)
                && s.workers.as_ref().is_some_and(|w| w.ready == w.desired)
        })
    })
    .await
}

async fn finished<K>(env: &Env, name: &str) -> (Option<ScalerPhase>, Vec<JobCondition>)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
    K: HasScalerStatus,
{
    let request: K = env
        .wait(name, "finishes", |request: &K| {
            matches!(
                request.phase(),
                Some(ScalerPhase::Succeeded | ScalerPhase::Failed)
            )
        })
        .await;
    (request.phase(), request.conditions())
}

/// The phase and conditions of a request, whatever its kind.
trait HasScalerStatus {
    fn phase(&self) -> Option<ScalerPhase>;
    fn conditions(&self) -> Vec<JobCondition>;
}

impl HasScalerStatus for ScaleIn {
    fn phase(&self) -> Option<ScalerPhase> {
        self.status.as_ref().and_then(|s| s.phase)
    }
    fn conditions(&self) -> Vec<JobCondition> {
        self.status.clone().unwrap_or_default().conditions
    }
}

impl HasScalerStatus for ScaleOut {
    fn phase(&self) -> Option<ScalerPhase> {
        self.status.as_ref().and_then(|s| s.phase)
    }
    fn conditions(&self) -> Vec<JobCondition> {
        self.status.clone().unwrap_or_default().conditions
    }
}

/// The reason and message of the condition of `type_`.
fn reason_and_message(conditions: &[JobCondition], type_: &str) -> (String, String) {
    let condition = conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {conditions:?}"));
    (
        condition.reason.clone().unwrap_or_default(),
        condition.message.clone().unwrap_or_default(),
    )
}

async fn hostfile_lines(env: &Env, job: &str) -> usize {
    env.launcher_hostfile(job)
        .await
        .unwrap_or_default()
        .lines()
        .count()
}

#[tokio::test]
async fn a_scale_out_of_two_adds_two_workers_to_discovery_and_succeeds() {
    let env = Env::start(sim_config(2, 8)).await;
    let job = running(&env, &job("grow", 2, 1, 6)).await;
    let _: ScaleOut = env.apply(&scale_out("grow-more", "grow", 2, "")).await;
    let (phase, _) = finished::<ScaleOut>(&env, "grow-more").await;
    assert_eq!(phase, Some(ScalerPhase::Succeeded));
    let request: ScaleOut = env.wait("grow-more", "is read", |_| true).await;
    assert_eq!(
        request.status.unwrap().add_pods,
        ["grow-worker-2", "grow-worker-3"]
    );
    let owners: Vec<String> = request
        .metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .map(|owner| owner.uid)
        .collect();
    assert_eq!(owners, [job.uid().unwrap()], "the job owns the request");
    let job = env
        .wait_job("grow", "holds to four ready workers", |job| {
            job.status
                .as_ref()
                .and_then(|s| s.workers.as_ref())
                .is_some_and(|w| (w.ready, w.desired, w.spec_replicas) == (4, 4, Some(2)))
        })
        .await;
    assert_eq!(job.status.unwrap().phase, Some(JobPhase::Running));
    env.wait_pod("grow-launcher", "lists the four workers", |pod| {
        pod.and_then(|p| p.annotations().get("eto.dev/hostfile").cloned())
            .is_some_and(|h| h.lines().count() == 4)
    })
    .await;
    let reasons = env.event_reasons("grow").await;
    assert!(
        reasons.contains(&"ScalingStarted".to_string()),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&"ScaleSucceeded".to_string()),
        "{reasons:?}"
    );
    let succeeded = env
        .operator
        .as_ref()
        .unwrap()
        .metrics
        .scaling_requests
        .get_or_create(&eto_controller::metrics::ScalingLabels {
            request: "ScaleOut".into(),
            result: "succeeded".into(),
        })
        .get();
    assert_eq!(succeeded, 1);
}

#[tokio::test]
async fn a_scale_out_that_is_not_ready_in_time_fails_and_removes_what_it_added() {
    // Three GPUs: the job takes two, one of the two added workers fits.
    let env = Env::start(sim_config(1, 3)).await;
    running(&env, &job("cramped", 2, 1, 6)).await;
    let _: ScaleOut = env
        .apply(&scale_out("cramped-more", "cramped", 2, "  timeout: 2\n"))
        .await;
    let (phase, conditions) = finished::<ScaleOut>(&env, "cramped-more").await;
    assert_eq!(phase, Some(ScalerPhase::Failed));
    let (reason, message) = reason_and_message(&conditions, "ScaleFailed");
    assert_eq!(reason, "Timeout");
    assert!(
        message.contains("1 of 2 added workers were ready"),
        "{message}"
    );
    for added in ["cramped-worker-2", "cramped-worker-3"] {
        env.wait_pod(added, "is removed", |pod| pod.is_none()).await;
    }
    let job = env.jobs().get("cramped").await.unwrap().status.unwrap();
    assert_eq!(job.target_workers, ["cramped-worker-0", "cramped-worker-1"]);
    assert_eq!(job.workers.unwrap().desired, 2);
}

#[tokio::test]
async fn a_scale_in_by_name_drains_the_named_workers_before_deleting_them() {
    let env = Env::start(sim_config(2, 8)).await;
    running(&env, &job("named", 4, 1, 6)).await;
    let history = PodHistory::start(&env).await;
    let _: ScaleIn = env
        .apply(&scale_in(
            "named-less",
            "named",
            "    podNames: [named-worker-1, named-worker-3]",
            "",
        ))
        .await;
    let (phase, _) = finished::<ScaleIn>(&env, "named-less").await;
    assert_eq!(phase, Some(ScalerPhase::Succeeded));
    for worker in ["named-worker-1", "named-worker-3"] {
        let (left, deleted) = history.left_discovery_then_deleted("named", worker);
        assert!(
            left.0 < deleted.0,
            "{worker}: out of discovery before deletion"
        );
        assert!(
            deleted.1 - left.1 >= Duration::from_millis(900),
            "{worker} drained for elasticPolicy.drainSeconds"
        );
    }
    let job = env.jobs().get("named").await.unwrap().status.unwrap();
    assert_eq!(job.target_workers, ["named-worker-0", "named-worker-2"]);
    assert_eq!(job.workers.unwrap().desired, 2);
    assert_eq!(hostfile_lines(&env, "named").await, 2);
}

#[tokio::test]
async fn a_scale_in_by_count_removes_the_newest_workers() {
    let env = Env::start(sim_config(2, 8)).await;
    running(&env, &job("counted", 4, 1, 6)).await;
    let _: ScaleIn = env
        .apply(&scale_in("counted-less", "counted", "    count: 2", ""))
        .await;
    let (phase, _) = finished::<ScaleIn>(&env, "counted-less").await;
    assert_eq!(phase, Some(ScalerPhase::Succeeded));
    let request: ScaleIn = env.wait("counted-less", "is read", |_| true).await;
    assert_eq!(
        request.status.unwrap().to_delete_pods,
        ["counted-worker-2", "counted-worker-3"]
    );
    assert_eq!(
        env.worker_names("counted").await,
        ["counted-worker-0", "counted-worker-1"]
    );
}

#[tokio::test]
async fn requests_beyond_min_or_max_or_with_a_script_fail_and_change_nothing() {
    let env = Env::start(sim_config(2, 8)).await;
    running(&env, &job("bounded", 2, 2, 3)).await;
    let before = env.worker_names("bounded").await;
    let _: ScaleIn = env
        .apply(&scale_in("bounded-in", "bounded", "    count: 1", ""))
        .await;
    let _: ScaleOut = env.apply(&scale_out("bounded-out", "bounded", 2, "")).await;
    let _: ScaleOut = env
        .apply(&scale_out(
            "bounded-script",
            "bounded",
            1,
            "  script: /usr/local/bin/scaler.sh\n",
        ))
        .await;
    let (phase, conditions) = finished::<ScaleIn>(&env, "bounded-in").await;
    assert_eq!(phase, Some(ScalerPhase::Failed));
    assert_eq!(
        reason_and_message(&conditions, "ScaleFailed"),
        (
            "BelowMinReplicas".into(),
            "spec.toDelete.count: removing 1 of 2 workers would leave 1, fewer than worker.minReplicas (2)".into()
        )
    );
    let (_, conditions) = finished::<ScaleOut>(&env, "bounded-out").await;
    assert_eq!(
        reason_and_message(&conditions, "ScaleFailed"),
        (
            "AboveMaxReplicas".into(),
            "spec.toAdd.count: adding 2 to 2 workers would make 4, more than worker.maxReplicas (3)".into()
        )
    );
    let (_, conditions) = finished::<ScaleOut>(&env, "bounded-script").await;
    let (reason, message) = reason_and_message(&conditions, "ScaleFailed");
    assert_eq!(reason, "ScriptNotSupported");
    assert!(message.contains("pods/exec"), "{message}");
    assert_eq!(env.worker_names("bounded").await, before, "nothing changed");
    let job = env.jobs().get("bounded").await.unwrap().status.unwrap();
    assert_eq!(job.phase, Some(JobPhase::Running));
    assert_eq!(job.workers.unwrap().desired, 2);
}

#[tokio::test]
async fn a_request_naming_a_job_of_another_namespace_fails_at_once() {
    let env = Env::start(sim_config(1, 8)).await;
    let _: ScaleOut = env
        .apply(&scale_out("elsewhere", "team-b/mnist", 1, ""))
        .await;
    let (phase, conditions) = finished::<ScaleOut>(&env, "elsewhere").await;
    assert_eq!(phase, Some(ScalerPhase::Failed));
    let (reason, message) = reason_and_message(&conditions, "ScaleFailed");
    assert_eq!(reason, "InvalidSelector");
    assert!(
        message.contains("of its own namespace (default)"),
        "{message}"
    );
}

#[tokio::test]
async fn a_finished_request_is_not_carried_out_again_after_an_operator_restart() {
    let mut env = Env::start(sim_config(2, 8)).await;
    running(&env, &job("once", 2, 1, 6)).await;
    let _: ScaleOut = env.apply(&scale_out("once-more", "once", 1, "")).await;
    finished::<ScaleOut>(&env, "once-more").await;
    let request: ScaleOut = env.wait("once-more", "is read", |_| true).await;
    env.stop_operator().await;
    env.start_operator();
    // Make sure the new operator has reconciled the job since it started.
    let touched = env
        .jobs()
        .patch(
            "once",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"activeDeadlineSeconds": 86_400}})),
        )
        .await
        .unwrap();
    env.wait_job("once", "is reconciled", |job| {
        job.status.as_ref().and_then(|s| s.observed_generation) == touched.metadata.generation
    })
    .await;
    assert_eq!(
        env.worker_names("once").await,
        ["once-worker-0", "once-worker-1", "once-worker-2"]
    );
    let again: ScaleOut = env.wait("once-more", "is read", |_| true).await;
    assert_eq!(
        again.resource_version(),
        request.resource_version(),
        "untouched"
    );
}

#[tokio::test]
async fn the_examples_scale_the_job_arena_renders() {
    let env = Env::start(sim_config(2, 8)).await;
    let example =
        |file: &str| std::fs::read_to_string(workspace_root().join("examples").join(file)).unwrap();
    running(&env, &example("arena-etjob.yaml")).await;
    // Removed workers drain for a second rather than thirty.
    env.jobs()
        .patch(
            "elastic-mnist",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"elasticPolicy": {"drainSeconds": 1}}})),
        )
        .await
        .unwrap();

    let out: ScaleOut = env.apply(&example("scaleout.yaml")).await;
    assert_eq!(
        finished::<ScaleOut>(&env, &out.name_any()).await.0,
        Some(ScalerPhase::Succeeded)
    );
    let by_name: ScaleIn = env.apply(&example("scalein-pods.yaml")).await;
    assert_eq!(
        finished::<ScaleIn>(&env, &by_name.name_any()).await.0,
        Some(ScalerPhase::Succeeded)
    );
    let by_count: ScaleIn = env.apply(&example("scalein-count.yaml")).await;
    assert_eq!(
        finished::<ScaleIn>(&env, &by_count.name_any()).await.0,
        Some(ScalerPhase::Succeeded)
    );

    // 8 + 2 - 2 - 2: workers 3 and 5 by name, then the two newest.
    let job = env
        .wait_job("elastic-mnist", "holds to six ready workers", |job| {
            job.status
                .as_ref()
                .and_then(|s| s.workers.as_ref())
                .is_some_and(|w| (w.ready, w.desired) == (6, 6))
        })
        .await;
    assert_eq!(
        job.status.unwrap().target_workers,
        ["0", "1", "2", "4", "6", "7"].map(|i| format!("elastic-mnist-worker-{i}"))
    );
    assert!(
        env.wait_job("elastic-mnist", "runs", in_phase(JobPhase::Running))
            .await
            .status
            .is_some()
    );
}
