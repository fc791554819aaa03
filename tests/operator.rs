//! The operator against the simulated cluster: jobs from submission to completion, failures,
//! restarts, and an operator that is itself restarted.

use std::time::Duration;

use eto_api::job_status::JobPhase;
use eto_sim::NodeSpec;
use eto_tests::env::{Env, WAIT, hostfile, in_phase, job_yaml, pod_ready, sim_config};
use eto_tests::poll;
use eto_tests::workspace_root;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};

async fn running(env: &Env, name: &str) {
    env.wait_job(name, "runs", in_phase(JobPhase::Running))
        .await;
}

#[tokio::test]
async fn the_job_arena_renders_runs_with_the_right_hostfile() {
    let env = Env::start(sim_config(2, 8)).await;
    let yaml = std::fs::read_to_string(workspace_root().join("examples/arena-etjob.yaml")).unwrap();
    env.apply_job(&yaml).await;
    let job = env
        .wait_job("elastic-mnist", "runs with 8 ready workers", |job| {
            job.status.as_ref().is_some_and(|s| {
                s.phase == Some(JobPhase::Running)
                    && s.workers.as_ref().is_some_and(|w| w.ready == 8)
            })
        })
        .await;
    let status = job.status.unwrap();
    assert_eq!(status.target_workers.len(), 8);
    assert_eq!(
        (
            status.workers.as_ref().unwrap().min,
            status.workers.as_ref().unwrap().max
        ),
        (1, Some(128))
    );

    let expected = hostfile("elastic-mnist", &[0, 1, 2, 3, 4, 5, 6, 7]);
    env.wait_pod(
        "elastic-mnist-launcher",
        "lists the 8 ready workers",
        |pod| {
            pod.and_then(|p| p.annotations().get("eto.dev/hostfile").cloned())
                .is_some_and(|h| h == expected)
        },
    )
    .await;
    assert_eq!(
        env.config_map_hostfile("elastic-mnist").await.as_deref(),
        Some(expected.as_str())
    );

    // Arena finds the pods by its own labels, and et-operator's labels are there too.
    let pods = env
        .pods()
        .list(
            &ListParams::default()
                .labels("release=elastic-mnist,app=etjob,group-name=kai.alibabacloud.com"),
        )
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 9);
    let launcher = pods
        .items
        .iter()
        .find(|p| p.labels().get("training-job-role").map(String::as_str) == Some("launcher"))
        .unwrap();
    assert_eq!(
        launcher.labels()["master-pod-name"],
        "elastic-mnist-launcher"
    );
    let worker = env.pods().get("elastic-mnist-worker-3").await.unwrap();
    assert_eq!(worker.labels()["replica-index"], "3");
    // sshd (after the host keys it lacks), run by eto's PID 1: `/bin/sh -c <script> eto-pid1
    // /bin/sh -c <sshd script> eto-sshd`.
    let command = worker.spec.as_ref().unwrap().containers[0]
        .command
        .clone()
        .unwrap();
    assert_eq!(command[3], "eto-pid1");
    assert_eq!(command[4..], eto_engine::builders::SSHD_COMMAND);

    // The SSH key pair was generated into its own Secret, mounted by every pod.
    let secrets: Api<Secret> = Api::default_namespaced(env.client.clone());
    let secret = secrets.get("elastic-mnist-ssh").await.unwrap();
    let keys: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
    assert_eq!(keys, ["config", "id_rsa", "id_rsa.pub"]);
    let reasons = env.event_reasons("elastic-mnist").await;
    assert_eq!(
        reasons,
        ["WorkersCreated", "LauncherCreated", "TrainingJobRunning"]
    );
}

#[tokio::test]
async fn the_launcher_starts_only_once_min_replicas_workers_are_ready() {
    // One GPU node: three of four one-GPU workers fit, the fourth waits for capacity.
    let env = Env::start(sim_config(1, 3)).await;
    env.apply_job(&job_yaml("partial", 4, 3, "", "Never")).await;
    running(&env, "partial").await;
    let job = env.jobs().get("partial").await.unwrap();
    let workers = job.status.unwrap().workers.unwrap();
    assert_eq!((workers.ready, workers.pending), (3, 1));
    assert_eq!(
        env.launcher_hostfile("partial").await.unwrap(),
        hostfile("partial", &[0, 1, 2])
    );

    // More capacity: the fourth worker is scheduled and joins host discovery.
    env.cluster
        .add_node(&NodeSpec::gpu("autoscaled", 8))
        .unwrap();
    env.wait_job("partial", "has 4 ready workers", |job| {
        job.status
            .as_ref()
            .and_then(|s| s.workers.as_ref())
            .is_some_and(|w| w.ready == 4)
    })
    .await;
    env.wait_pod("partial-launcher", "lists 4 workers", |pod| {
        pod.and_then(|p| p.annotations().get("eto.dev/hostfile").cloned())
            .is_some_and(|h| h == hostfile("partial", &[0, 1, 2, 3]))
    })
    .await;
}

#[tokio::test]
async fn a_failed_worker_leaves_discovery_and_is_replaced_per_policy() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job_yaml("replaced", 3, 2, "", "OnFailure"))
        .await;
    env.apply_job(&job_yaml("kept-down", 3, 2, "", "Never"))
        .await;
    running(&env, "replaced").await;
    running(&env, "kept-down").await;

    env.cluster
        .fail_pod("default", "replaced-worker-1", 1, "Error")
        .unwrap();
    env.cluster
        .fail_pod("default", "kept-down-worker-1", 1, "Error")
        .unwrap();

    // Replaced under a new name, which joins host discovery once ready.
    env.wait_pod("replaced-worker-3", "is ready", pod_ready)
        .await;
    env.wait_pod("replaced-launcher", "lists the replacement", |pod| {
        pod.and_then(|p| p.annotations().get("eto.dev/hostfile").cloned())
            .is_some_and(|h| h == hostfile("replaced", &[0, 2, 3]))
    })
    .await;
    // Not replaced: the job goes on with two workers.
    env.wait_pod("kept-down-launcher", "drops the failed worker", |pod| {
        pod.and_then(|p| p.annotations().get("eto.dev/hostfile").cloned())
            .is_some_and(|h| h == hostfile("kept-down", &[0, 2]))
    })
    .await;
    assert_eq!(
        env.worker_names("kept-down").await,
        [
            "kept-down-worker-0",
            "kept-down-worker-1",
            "kept-down-worker-2"
        ],
        "the failed pod is kept"
    );
    let job = env.jobs().get("replaced").await.unwrap();
    let status = job.status.unwrap();
    assert_eq!(status.blacklist[0].pod, "replaced-worker-1");
    assert_eq!(status.blacklist[0].exit_code, Some(1));

    // A second loss is a decision of its own: its event names its own worker, rather than
    // counting as a repeat of the first loss's event.
    env.cluster
        .fail_pod("default", "replaced-worker-2", 1, "Error")
        .unwrap();
    env.wait_pod("replaced-worker-4", "is ready", pod_ready)
        .await;
    let notes = env.event_notes("replaced", "WorkerLost").await;
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].starts_with("worker replaced-worker-1 ")
            && notes[0].ends_with("replaced by replaced-worker-3"),
        "{notes:?}"
    );
    assert!(
        notes[1].starts_with("worker replaced-worker-2 ")
            && notes[1].ends_with("replaced by replaced-worker-4"),
        "{notes:?}"
    );
    let metrics = &env.operator.as_ref().expect("the operator runs").metrics;
    let lost = metrics
        .workers_lost
        .get_or_create(&eto_controller::metrics::LossLabels {
            kind: "TrainingJob".into(),
            reason: "Failed".into(),
        })
        .get();
    assert_eq!(
        lost, 3,
        "two losses in one job, one in the other, each counted once"
    );
    let replaced = metrics
        .worker_replacements
        .get_or_create(&eto_controller::metrics::KindLabels {
            kind: "TrainingJob".into(),
        })
        .get();
    assert_eq!(replaced, 2, "only one job replaces its workers");
}

#[tokio::test]
async fn a_spot_reclaim_removes_the_nodes_workers_from_discovery_before_they_die() {
    let mut config = sim_config(0, 0);
    config.nodes = vec![NodeSpec::gpu("stable", 2), NodeSpec::gpu("spot", 2)];
    let env = Env::start(config).await;
    env.apply_job(&job_yaml("spot", 4, 2, "", "Always")).await;
    running(&env, "spot").await;
    let on_spot: Vec<String> = env
        .pods()
        .list(&ListParams::default().fields("spec.nodeName=spot"))
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .filter(|name| name.contains("-worker-"))
        .collect();
    assert!(!on_spot.is_empty());
    env.cluster
        .reclaim_node("spot", Duration::from_secs(30))
        .unwrap();
    // Within the 30 s grace period, well before the pods are killed, they leave discovery.
    let job = env
        .wait_job("spot", "drops the reclaimed workers", |job| {
            job.status
                .as_ref()
                .is_some_and(|s| on_spot.iter().all(|w| !s.current_workers.contains(w)))
        })
        .await;
    let reasons: Vec<&str> = job
        .status
        .as_ref()
        .unwrap()
        .blacklist
        .iter()
        .map(|e| e.reason.as_str())
        .collect();
    assert!(reasons.iter().all(|r| *r == "Disrupted"), "{reasons:?}");
    let hostfile = env.launcher_hostfile("spot").await.unwrap();
    assert!(
        on_spot.iter().all(|w| !hostfile.contains(w.as_str())),
        "{hostfile}"
    );
}

#[tokio::test]
async fn launcher_success_applies_each_clean_pod_policy() {
    let env = Env::start(sim_config(2, 8)).await;
    for (name, policy) in [
        ("keep", "None"),
        ("clean-running", "Running"),
        ("clean-all", "All"),
    ] {
        env.apply_job(&job_yaml(
            name,
            2,
            2,
            &format!("\n  cleanPodPolicy: {policy}"),
            "Never",
        ))
        .await;
    }
    for name in ["keep", "clean-running", "clean-all"] {
        running(&env, name).await;
        env.cluster
            .succeed_pod("default", &format!("{name}-launcher"))
            .unwrap();
    }
    for name in ["keep", "clean-running", "clean-all"] {
        let job = env
            .wait_job(name, "succeeds", in_phase(JobPhase::Succeeded))
            .await;
        assert!(job.status.unwrap().completion_time.is_some());
    }
    let services: Api<Service> = Api::default_namespaced(env.client.clone());
    for name in ["clean-running", "clean-all"] {
        for worker in [0, 1] {
            env.wait_pod(&format!("{name}-worker-{worker}"), "is deleted", |pod| {
                pod.is_none()
            })
            .await;
        }
        assert!(
            services
                .get_opt(&format!("{name}-workers"))
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            env.pods()
                .get_opt(&format!("{name}-launcher"))
                .await
                .unwrap()
                .is_some(),
            "the launcher is kept"
        );
    }
    assert_eq!(
        env.worker_names("keep").await,
        ["keep-worker-0", "keep-worker-1"]
    );
}

#[tokio::test]
async fn launcher_failure_restarts_the_job_until_the_backoff_limit() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job_yaml(
        "flaky",
        2,
        2,
        "\n  restartPolicy: OnFailure\n  backoffLimit: 1",
        "Never",
    ))
    .await;
    running(&env, "flaky").await;
    env.cluster
        .fail_pod("default", "flaky-launcher", 1, "Error")
        .unwrap();
    let job = env
        .wait_job("flaky", "runs again after a restart", |job| {
            job.status
                .as_ref()
                .is_some_and(|s| s.restart_count == 1 && s.phase == Some(JobPhase::Running))
        })
        .await;
    assert_eq!(
        job.status.unwrap().target_workers,
        ["flaky-worker-2", "flaky-worker-3"],
        "new workers, new names"
    );
    assert_eq!(
        env.worker_names("flaky").await,
        ["flaky-worker-2", "flaky-worker-3"],
        "the failed run's pods are gone"
    );
    assert!(
        env.event_reasons("flaky")
            .await
            .contains(&"TrainingJobRestarting".to_string())
    );

    env.cluster
        .fail_pod("default", "flaky-launcher", 1, "Error")
        .unwrap();
    let failed = env
        .wait_job("flaky", "fails", in_phase(JobPhase::Failed))
        .await;
    let status = failed.status.unwrap();
    assert_eq!(status.restart_count, 1);
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Failed")
        .unwrap();
    assert!(
        condition
            .message
            .as_deref()
            .unwrap()
            .contains("backoff limit"),
        "{condition:?}"
    );
}

#[tokio::test]
async fn the_active_deadline_fails_the_job() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job_yaml(
        "bounded",
        2,
        2,
        "\n  activeDeadlineSeconds: 2",
        "Never",
    ))
    .await;
    running(&env, "bounded").await;
    let job = env
        .wait_job(
            "bounded",
            "fails at its deadline",
            in_phase(JobPhase::Failed),
        )
        .await;
    let failed = job
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap();
    assert_eq!(failed.reason.as_deref(), Some("DeadlineExceeded"));
    env.wait_pod("bounded-launcher", "is stopped", |pod| pod.is_none())
        .await;
}

#[tokio::test]
async fn a_finished_job_is_deleted_after_its_time_to_live() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job_yaml(
        "short-lived",
        2,
        2,
        "\n  ttlSecondsAfterFinished: 1",
        "Never",
    ))
    .await;
    running(&env, "short-lived").await;
    let uid = env.jobs().get("short-lived").await.unwrap().uid().unwrap();
    env.cluster
        .succeed_pod("default", "short-lived-launcher")
        .unwrap();
    let gone = kube::runtime::wait::await_condition(
        env.jobs(),
        "short-lived",
        kube::runtime::wait::conditions::is_deleted(&uid),
    );
    tokio::time::timeout(WAIT, gone).await.unwrap().unwrap();
    env.wait_pod("short-lived-launcher", "is collected with the job", |pod| {
        pod.is_none()
    })
    .await;
}

#[tokio::test]
async fn an_invalid_spec_is_reported_and_a_fix_recovers_the_job() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job_yaml(
        "typo",
        2,
        2,
        "\n  launcherAttachMode: kubexec",
        "Never",
    ))
    .await;
    let job = env
        .wait_job("typo", "reports the invalid field", |job| {
            job.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.reason.as_deref() == Some("InvalidSpec"))
            })
        })
        .await;
    let ready = job
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert!(ready.message.unwrap().contains("spec.launcherAttachMode"));
    assert!(
        env.worker_names("typo").await.is_empty(),
        "nothing is created"
    );
    assert_eq!(env.event_reasons("typo").await, ["InvalidSpec"]);

    env.apply_job(&job_yaml(
        "typo",
        2,
        2,
        "\n  launcherAttachMode: ssh",
        "Never",
    ))
    .await;
    running(&env, "typo").await;
}

#[tokio::test]
async fn a_restarted_operator_adopts_what_exists() {
    let mut env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job_yaml("survivor", 3, 2, "", "Always"))
        .await;
    running(&env, "survivor").await;
    env.stop_operator().await;

    // While eto is down: a worker fails and the job is scaled out.
    env.cluster
        .fail_pod("default", "survivor-worker-0", 1, "Error")
        .unwrap();
    env.jobs()
        .patch(
            "survivor",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"etReplicaSpecs": {"worker": {"replicas": 4}}}}),
            ),
        )
        .await
        .unwrap();
    env.start_operator();

    let job = env
        .wait_job("survivor", "converges on 4 ready workers", |job| {
            job.status
                .as_ref()
                .and_then(|s| s.workers.as_ref())
                .is_some_and(|w| w.ready == 4 && w.desired == 4)
        })
        .await;
    let status = job.status.unwrap();
    assert_eq!(
        status.target_workers,
        [
            "survivor-worker-1",
            "survivor-worker-2",
            "survivor-worker-3",
            "survivor-worker-4"
        ]
    );
    // No duplicates, no orphans: the three original workers, the failed one kept, one replacement.
    assert_eq!(
        env.worker_names("survivor").await,
        [
            "survivor-worker-0",
            "survivor-worker-1",
            "survivor-worker-2",
            "survivor-worker-3",
            "survivor-worker-4"
        ]
    );
    env.wait_pod("survivor-launcher", "lists the four workers", |pod| {
        pod.and_then(|p| p.annotations().get("eto.dev/hostfile").cloned())
            .is_some_and(|h| h == hostfile("survivor", &[1, 2, 3, 4]))
    })
    .await;
}

#[tokio::test]
async fn a_reconcile_with_no_change_writes_nothing() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job_yaml("quiet", 2, 2, "", "Never")).await;
    running(&env, "quiet").await;
    let metrics = std::sync::Arc::clone(&env.operator.as_ref().unwrap().metrics);
    let reconciles = || {
        metrics
            .reconciliations
            .get_or_create(&eto_controller::metrics::Outcome {
                result: "ok".into(),
            })
            .get()
    };
    // Let the job settle: wait until a reconcile leaves the cluster unchanged.
    poll::until("a reconcile that writes nothing", WAIT, async || {
        let before = env.cluster.store().read(|s| s.resource_version());
        let count = reconciles();
        env.jobs()
            .patch(
                "quiet",
                &PatchParams::default(),
                &Patch::Merge(
                    serde_json::json!({"metadata": {"annotations": {"poke": count.to_string()}}}),
                ),
            )
            .await
            .unwrap();
        poll::until("a reconcile of the poked job", WAIT, async || {
            (reconciles() != count).then_some(())
        })
        .await;
        // One write: the annotation above. Nothing from eto.
        (env.cluster.store().read(|s| s.resource_version()) == before + 1).then_some(())
    })
    .await;
    let writes = metrics.writes.get();
    let count = reconciles();
    env.jobs()
        .patch(
            "quiet",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"poke": "again"}}})),
        )
        .await
        .unwrap();
    poll::until("a reconcile of the poked job", WAIT, async || {
        (reconciles() != count).then_some(())
    })
    .await;
    assert_eq!(metrics.writes.get(), writes, "no child written");
    let _ = env.jobs().delete("quiet", &DeleteParams::default()).await;
}

/// The value of the sample `series` (name and labels, as exposed) in `exposed`.
fn sample(exposed: &str, series: &str) -> Option<f64> {
    exposed
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

#[tokio::test]
async fn metrics_after_a_scripted_job_show_its_phase_workers_writes_decisions_and_discovery() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job_yaml("measured", 2, 2, "", "OnFailure"))
        .await;
    running(&env, "measured").await;
    env.cluster
        .fail_pod("default", "measured-worker-0", 1, "Error")
        .unwrap();
    env.wait_pod("measured-worker-2", "is ready", pod_ready)
        .await;
    let metrics = std::sync::Arc::clone(&env.operator.as_ref().unwrap().metrics);
    // The status write that records the replacement comes last.
    let settled = env
        .wait_job("measured", "shows the replacement ready", |job| {
            job.status.as_ref().is_some_and(|s| {
                s.workers.as_ref().is_some_and(|w| w.ready == 2) && !s.blacklist.is_empty()
            })
        })
        .await;
    assert_eq!(
        settled.status.as_ref().unwrap().phase,
        Some(JobPhase::Running)
    );
    let exposed = metrics.encode();
    let expect = |series: &str| {
        sample(&exposed, series).unwrap_or_else(|| panic!("no {series} in:\n{exposed}"))
    };
    assert_eq!(expect("eto_leader"), 1.0);
    assert_eq!(
        expect("eto_jobs{kind=\"TrainingJob\",phase=\"Running\"}"),
        1.0
    );
    for (state, count) in [("desired", 2.0), ("ready", 2.0), ("pending", 0.0)] {
        assert_eq!(
            expect(&format!(
                "eto_job_workers{{kind=\"TrainingJob\",namespace=\"default\",job=\"measured\",state=\"{state}\"}}"
            )),
            count,
            "{state}"
        );
    }
    // The job's goodput ledger, counted to the scrape: it has lived, and its time is split
    // into buckets that add up to no more than its life so far.
    let ledger = settled
        .status
        .as_ref()
        .unwrap()
        .goodput
        .clone()
        .expect("a ledger");
    let bucket = |name: &str| {
        expect(&format!(
            "eto_job_goodput_seconds_total{{kind=\"TrainingJob\",namespace=\"default\",job=\"measured\",bucket=\"{name}\"}}"
        ))
    };
    let counted: f64 = [
        "productive",
        "waiting",
        "startUp",
        "reformation",
        "checkpoint",
        "retrained",
        "other",
    ]
    .iter()
    .map(|name| bucket(name))
    .sum();
    let lived = jiff::Timestamp::now()
        .duration_since(ledger.since.0)
        .as_secs_f64();
    // Counted at the scrape, before `lived` was measured; 10 ms for the ledger's rounding.
    assert!(
        counted > 0.0 && counted <= lived + 0.01,
        "{counted} s counted in {lived} s"
    );
    assert!(bucket("productive") > 0.0, "it ran");
    let ratio = expect(
        "eto_job_goodput_ratio{kind=\"TrainingJob\",namespace=\"default\",job=\"measured\"}",
    );
    assert!((0.0..=1.0).contains(&ratio), "{ratio}");
    assert_eq!(
        expect("eto_workers_lost_total{kind=\"TrainingJob\",reason=\"Failed\"}"),
        1.0
    );
    assert_eq!(
        expect("eto_worker_replacements_total{kind=\"TrainingJob\"}"),
        1.0
    );
    assert_eq!(
        expect("eto_decisions_total{kind=\"TrainingJob\",reason=\"WorkerLost\"}"),
        1.0
    );
    assert_eq!(
        expect("eto_decisions_total{kind=\"TrainingJob\",reason=\"LauncherCreated\"}"),
        1.0
    );
    // Three workers, the launcher, each applied at least once.
    assert!(expect("eto_api_writes_total{kind=\"Pod\",verb=\"apply\"}") >= 4.0);
    assert!(expect("eto_api_writes_total{kind=\"TrainingJob\",verb=\"apply-status\"}") >= 1.0);
    assert!(expect("eto_reconciliations_total{result=\"ok\"}") >= 1.0);
    // Discovery followed the pods at least twice: the workers becoming ready, the loss.
    assert!(expect("eto_discovery_update_seconds_count") >= 2.0);
}

#[tokio::test]
async fn an_operator_watching_a_list_of_namespaces_manages_those_and_leaves_the_rest() {
    let mut config = sim_config(2, 8);
    config.namespaces = vec!["team-a".into(), "team-b".into(), "team-c".into()];
    let mut env = Env::start(config).await;
    env.stop_operator().await;
    env.start_operator_with(eto_controller::Settings {
        scope: eto_controller::Scope::of(vec!["team-a".into(), "team-b".into()]),
        ..eto_controller::Settings::default()
    });
    let apply_in = |namespace: &'static str, name: &'static str| {
        let client = env.client.clone();
        async move {
            let job: eto_api::TrainingJob =
                serde_saphyr::from_str(&job_yaml(name, 2, 2, "", "Never")).unwrap();
            Api::<eto_api::TrainingJob>::namespaced(client, namespace)
                .patch(
                    name,
                    &PatchParams::apply("test").force(),
                    &Patch::Apply(&job),
                )
                .await
                .unwrap();
        }
    };
    let running_in = |namespace: &'static str, name: &'static str| {
        let jobs: Api<eto_api::TrainingJob> = Api::namespaced(env.client.clone(), namespace);
        async move {
            let wait = kube::runtime::wait::await_condition(
                jobs,
                name,
                |job: Option<&eto_api::TrainingJob>| {
                    job.and_then(|j| j.status.as_ref())
                        .is_some_and(|s| s.phase == Some(JobPhase::Running))
                },
            );
            tokio::time::timeout(WAIT, wait)
                .await
                .unwrap_or_else(|_| panic!("{namespace}/{name} never ran"))
                .unwrap();
        }
    };
    apply_in("team-a", "alpha").await;
    apply_in("team-b", "beta").await;
    apply_in("team-c", "gamma").await;
    running_in("team-a", "alpha").await;
    running_in("team-b", "beta").await;

    // Every watch ends and starts again: the namespaces' caches are listed again, one by one.
    env.cluster.drop_watches();
    apply_in("team-b", "delta").await;
    running_in("team-b", "delta").await;
    running_in("team-a", "alpha").await;

    let unmanaged: Api<eto_api::TrainingJob> = Api::namespaced(env.client.clone(), "team-c");
    assert_eq!(unmanaged.get("gamma").await.unwrap().status, None);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.client.clone(), "team-c");
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
