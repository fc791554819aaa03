//! An elastic PyTorchJob whose rendezvous eto hosts: a store pod of its own, agents that are
//! its clients, a rendezvous id per run, workers replaced under new names, and the store's
//! loss handled as a launcher's.

use eto_api::PyTorchJob;
use eto_api::job_status::JobPhase;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::pytorch::env;
use crate::group_report::{GroupReport, GroupState, Member};
use crate::testing::pytorch_job;
use crate::testing::world::{World, deleted_pods, pod_names, reasons};

const UID: &str = "6f1d7c1e-0000-4000-8000-000000000003";

/// `ddp`, two Workers between one and three, no Master, its rendezvous left to eto.
pub(super) fn elastic(patch: serde_json::Value) -> PyTorchJob {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "maxRestarts": 2},
            "pytorchReplicaSpecs": {"Master": null}
        }}),
    );
    json_patch::merge(&mut value, &patch);
    serde_json::from_value(value).unwrap()
}

/// How the round the store reports stands.
pub(super) enum Round {
    /// Agents gather for it.
    Forming,
    /// It formed: its members train.
    Formed,
    /// It formed, and an agent closed the rendezvous.
    Closed,
}

/// The store's report of its rendezvous in `round`, standing as `state`, whose members are
/// `members` with the age of their heartbeats; nobody waits.
pub(super) fn store_report(round: i64, state: Round, members: &[(&str, f64)]) -> GroupReport {
    let closed = matches!(state, Round::Closed);
    GroupReport {
        orders: None,
        quorum: None,
        progress: None,
        saved: Vec::new(),
        group: Some(GroupState {
            round,
            complete: !matches!(state, Round::Forming),
            closed,
            closed_for: closed.then_some(1.0),
            others: Vec::new(),
            reformations: Vec::new(),
            participants: i64::try_from(members.len()).unwrap(),
            waiting: 0,
            spares: 0,
            members: members
                .iter()
                .map(|(host, age)| Member {
                    host: host.to_string(),
                    heartbeat_age: Some(*age),
                })
                .collect(),
        }),
    }
}

fn phase(world: &World) -> Option<JobPhase> {
    world.pytorch_job.as_ref()?.status.as_ref()?.eto.phase
}

/// A world whose job runs: its store and both workers ready.
fn running(job: PyTorchJob) -> World {
    let mut world = World::pytorch(job);
    world.reconcile();
    for pod in ["ddp-rdzv", "ddp-worker-0", "ddp-worker-1"] {
        world.ready(pod);
    }
    world.reconcile();
    assert_eq!(phase(&world), Some(JobPhase::Running));
    world
}

#[test]
fn the_store_runs_in_a_pod_of_its_own_and_every_agent_is_its_client() {
    let mut world = World::pytorch(elastic(json!({})));
    let plan = world.reconcile();
    assert_eq!(
        pod_names(&plan),
        ["ddp-worker-0", "ddp-worker-1", "ddp-rdzv"]
    );
    assert_eq!(
        world.pod_services.keys().collect::<Vec<_>>(),
        ["ddp-workers"],
        "one Service names every pod; none per pod"
    );
    let service = world.pod_services["ddp-workers"].spec.clone().unwrap();
    assert_eq!(service.cluster_ip.as_deref(), Some("None"));
    assert_eq!(service.publish_not_ready_addresses, Some(true));
    assert_eq!(
        service.selector.unwrap(),
        [(
            "training.kubeflow.org/job-name".to_string(),
            "ddp".to_string()
        )]
        .into()
    );

    for worker in ["ddp-worker-0", "ddp-worker-1"] {
        let pod = &world.pods[worker];
        let expected = [
            (
                "PET_RDZV_ENDPOINT",
                "ddp-rdzv.ddp-workers:29400".to_string(),
            ),
            ("PET_RDZV_BACKEND", "c10d".into()),
            ("PET_NNODES", "1:3".into()),
            ("PET_MAX_RESTARTS", "2".into()),
            ("PET_RDZV_ID", format!("{UID}-0")),
            ("PET_RDZV_CONF", "is_host=false".into()),
            (
                "ETO_SAVED_URL",
                "http://ddp-rdzv.ddp-workers:29401/saved".into(),
            ),
            ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1".into()),
            ("PET_MONITOR_INTERVAL", "0.1".into()),
        ];
        for (name, value) in expected {
            assert_eq!(
                env(pod, name).as_deref(),
                Some(value.as_str()),
                "{worker} {name}"
            );
        }
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some(worker));
        assert_eq!(spec.subdomain.as_deref(), Some("ddp-workers"));
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert!(
            !labels.contains_key("training.kubeflow.org/job-role"),
            "no worker is rank 0 for good: {labels:?}"
        );
    }

    let store = &world.pods["ddp-rdzv"];
    let spec = store.spec.as_ref().unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.hostname.as_deref(), Some("ddp-rdzv"));
    assert_eq!(spec.subdomain.as_deref(), Some("ddp-workers"));
    let container = &spec.containers[0];
    assert_eq!(container.image.as_deref(), Some("pytorch/pytorch:2.5.1"));
    let resources = container.resources.as_ref().unwrap();
    assert_eq!(resources.limits, None, "the store asks for no accelerator");
    assert_eq!(
        container
            .command
            .as_ref()
            .unwrap()
            .last()
            .map(String::as_str),
        Some(format!("{UID}-0").as_str())
    );
    assert_eq!(
        store.metadata.labels.as_ref().unwrap()["training.kubeflow.org/replica-type"],
        "rendezvous"
    );
    assert!(
        spec.affinity.is_some(),
        "placed off spot capacity, as launchers are"
    );
}

#[test]
fn an_explicit_rendezvous_conf_keeps_its_own_is_host_and_port() {
    let mut world = World::pytorch(elastic(json!({"spec": {"elasticPolicy": {
        "rdzvPort": 29500,
        "rdzvId": "team-run",
        "rdzvConf": [{"key": "join_timeout", "value": "60"}, {"key": "is_host", "value": "false"}]
    }}})));
    world.reconcile();
    let worker = &world.pods["ddp-worker-0"];
    assert_eq!(
        env(worker, "PET_RDZV_ENDPOINT").as_deref(),
        Some("ddp-rdzv.ddp-workers:29500")
    );
    assert_eq!(env(worker, "PET_RDZV_ID").as_deref(), Some("team-run-0"));
    assert_eq!(
        env(worker, "PET_RDZV_CONF").as_deref(),
        Some("join_timeout=60,is_host=false")
    );
}

#[test]
fn a_job_with_a_master_or_its_own_rendezvous_keeps_v1s_wiring() {
    for patch in [
        json!({"spec": {"elasticPolicy": {"rdzvHost": "ddp-worker-0"}}}),
        json!({"spec": {"elasticPolicy": {"rdzvBackend": "etcd-v2"}}}),
        json!({"spec": {"elasticPolicy": {"standalone": true}}}),
        json!({"spec": {"pytorchReplicaSpecs": {"Master": pytorch_job().spec.pytorch_replica_specs["Master"]}}}),
    ] {
        let mut world = World::pytorch(elastic(patch.clone()));
        let plan = world.reconcile();
        assert!(
            !pod_names(&plan).contains(&"ddp-rdzv".to_string()),
            "{patch}: {:?}",
            pod_names(&plan)
        );
        assert_eq!(
            env(&world.pods["ddp-worker-0"], "PET_RDZV_CONF"),
            None,
            "{patch}"
        );
    }
}

#[test]
fn losing_worker_0_keeps_the_run_and_a_replacement_joins_under_a_new_name() {
    let mut world = running(elastic(json!({})));
    world.lose_with_node("ddp-worker-0");
    let plan = world.reconcile();
    assert_eq!(phase(&world), Some(JobPhase::Running), "{plan:#?}");
    assert_eq!(pod_names(&plan), ["ddp-worker-2"]);
    assert!(!reasons(&plan).iter().any(|r| r.contains("Restarting")));
    assert_eq!(
        env(&world.pods["ddp-worker-2"], "PET_RDZV_ID").as_deref(),
        Some(format!("{UID}-0").as_str()),
        "the replacement joins the same rendezvous"
    );
    assert!(world.pods.contains_key("ddp-rdzv"), "the store stays");
}

#[test]
fn the_worker_replicas_scale_the_job_within_its_bounds() {
    let mut world = running(elastic(json!({})));
    let workers = |world: &mut World, replicas: i32| {
        world.set_worker_replicas(replicas);
        world.reconcile()
    };
    let plan = workers(&mut world, 3);
    assert_eq!(pod_names(&plan), ["ddp-worker-2"]);
    let plan = workers(&mut world, 9);
    assert_eq!(pod_names(&plan), Vec::<String>::new(), "maxReplicas is 3");
}

#[test]
fn losing_the_store_suspends_and_resumes_with_a_new_rendezvous_id() {
    let mut world = running(elastic(json!({})));
    world.exit("ddp-rdzv", 1);
    let plan = world.reconcile();
    assert!(
        reasons(&plan).contains(&"LauncherDisrupted".to_string()),
        "{:?}",
        reasons(&plan)
    );
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-rdzv", "ddp-worker-0", "ddp-worker-1"]
    );
    assert_eq!(phase(&world), Some(JobPhase::Suspended));
    let plan = world.reconcile();
    assert_eq!(phase(&world), Some(JobPhase::Created), "{plan:#?}");
    let created = pod_names(&plan);
    assert_eq!(created, ["ddp-worker-2", "ddp-worker-3", "ddp-rdzv"]);
    assert_eq!(
        env(&world.pods["ddp-worker-2"], "PET_RDZV_ID").as_deref(),
        Some(format!("{UID}-1").as_str()),
        "a new run meets at a new rendezvous"
    );
    assert_eq!(
        world
            .pytorch_job
            .as_ref()
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .eto
            .restart_count,
        Some(0),
        "no failure counted"
    );
}

#[test]
fn the_first_worker_to_succeed_ends_the_job_and_the_store_goes() {
    let mut world = running(elastic(json!({})));
    world.exit("ddp-worker-1", 0);
    let plan = world.reconcile();
    assert_eq!(phase(&world), Some(JobPhase::Succeeded));
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-rdzv"],
        "cleanPodPolicy None keeps the workers; the store serves no one"
    );
}

/// The notice pod `name` shows, if any.
fn notice_of(world: &World, name: &str) -> Option<eto_api::job_status::Notice> {
    let annotations = world.pods[name].metadata.annotations.as_ref()?;
    let json = annotations.get(eto_api::well_known::NOTICE_ANNOTATION)?;
    Some(serde_json::from_str(json).expect("a notice is JSON"))
}

#[test]
fn below_its_minimum_it_checkpoints_suspends_once_its_workers_exit_and_resumes_at_a_new_rendezvous()
{
    use eto_api::job_status::NoticeKind;
    let mut world = running(elastic(
        json!({"spec": {"elasticPolicy": {"minReplicas": 2}}}),
    ));
    world.evict("ddp-worker-0");
    let plan = world.reconcile();
    assert_eq!(
        pod_names(&plan),
        ["ddp-worker-2"],
        "a replacement is asked for"
    );
    assert_eq!(
        notice_of(&world, "ddp-worker-1"),
        None,
        "not yet: the replacement may start"
    );
    world.advance(30);
    world.reconcile();
    let notice =
        notice_of(&world, "ddp-worker-1").expect("told to checkpoint after belowMinSeconds");
    assert_eq!(notice.kind, NoticeKind::Suspend);
    assert_eq!(
        phase(&world),
        Some(JobPhase::Running),
        "still checkpointing"
    );

    // torchrun's agent stops when its training saved and exited: with any code, that is
    // what the notice asked, neither a success nor a failure.
    world.exit("ddp-worker-1", 0);
    let plan = world.reconcile();
    assert_eq!(phase(&world), Some(JobPhase::Suspended), "{plan:#?}");
    assert!(deleted_pods(&plan).contains(&"ddp-rdzv".to_string()));

    let plan = world.reconcile();
    let created = pod_names(&plan);
    assert!(created.contains(&"ddp-rdzv".to_string()), "{created:?}");
    let worker = created
        .iter()
        .find(|name| name.starts_with("ddp-worker-"))
        .expect("workers of the new run");
    assert_eq!(
        notice_of(&world, worker).map(|n| n.kind),
        Some(NoticeKind::Resume)
    );
    assert_eq!(
        env(&world.pods[worker], "PET_RDZV_ID").as_deref(),
        Some(format!("{UID}-1").as_str())
    );
}

#[test]
fn until_its_store_tells_of_a_rendezvous_the_job_reads_it_again_soon() {
    use crate::group_report::FORMING_POLL;
    let members = [("ddp-worker-0", 1.0), ("ddp-worker-1", 1.0)];
    // (what the store answers, whether eto reads it again within FORMING_POLL)
    let cases = [
        // Its server starts: no answer yet.
        (None, true),
        // It answers, and no agent wrote the rendezvous yet.
        (Some(GroupReport::default()), true),
        // The first round gathers its agents: eto's orders end its last call.
        (Some(store_report(0, Round::Forming, &members)), true),
        (Some(store_report(0, Round::Formed, &members)), false),
    ];
    for (index, (report, soon)) in cases.into_iter().enumerate() {
        let mut world = running(elastic(json!({})));
        world.group_report = report;
        let plan = world.reconcile();
        assert_eq!(
            plan.requeue_after
                .is_some_and(|after| after <= FORMING_POLL),
            soon,
            "case {index}: {:?}",
            plan.requeue_after
        );
    }
}

#[test]
fn a_worker_gone_with_its_node_or_deleted_is_replaced_too() {
    let mut world = running(elastic(json!({})));
    world.pods.remove("ddp-worker-0");
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["ddp-worker-2"]);
    assert_eq!(phase(&world), Some(JobPhase::Running));
}

#[test]
fn the_status_shows_the_rendezvous_the_store_reports_and_follows_it_while_it_forms() {
    use eto_api::pytorch_job::RendezvousStatus;
    let mut world = running(elastic(json!({})));
    let rendezvous = |world: &World| {
        let status = world.pytorch_job.as_ref()?.status.as_ref()?;
        status.rendezvous.clone()
    };
    assert_eq!(rendezvous(&world), None, "no report, nothing shown");
    let report = |round, state, waiting| {
        let members = [("ddp-worker-0", 1.0), ("ddp-worker-1", 1.0)];
        let mut report = store_report(round, state, &members);
        if let Some(group) = report.group.as_mut() {
            group.waiting = waiting;
        }
        report
    };
    world.group_report = Some(report(3, Round::Forming, 1));
    let plan = world.reconcile();
    assert_eq!(
        rendezvous(&world),
        Some(RendezvousStatus {
            round: 3,
            agents: 2,
            waiting: 1,
            spares: None,
            complete: false,
            closed: false,
            last_reformation: None,
        })
    );
    assert!(
        plan.requeue_after
            .is_some_and(|after| after <= std::time::Duration::from_secs(5)),
        "read again while the group forms: {:?}",
        plan.requeue_after
    );
    world.group_report = Some(report(4, Round::Formed, 0));
    world.reconcile();
    assert_eq!(
        rendezvous(&world).map(|r| (r.round, r.complete)),
        Some((4, true))
    );
    world.group_report = None;
    world.reconcile();
    assert_eq!(
        rendezvous(&world).map(|r| r.round),
        Some(4),
        "a report that cannot be read changes nothing"
    );
}

#[test]
fn a_worker_the_platform_took_is_counted_as_preempted_not_failed() {
    let mut world = running(elastic(json!({})));
    world.lose_with_node("ddp-worker-0");
    world.reconcile();
    world.ready("ddp-worker-2");
    world.exit("ddp-worker-1", 3);
    world.reconcile();
    let status = world.pytorch_job.as_ref().unwrap().status.clone().unwrap();
    let workers = &status.replica_statuses[&eto_api::pytorch_job::PyTorchReplicaType::Worker];
    assert_eq!(
        (workers.active, workers.failed, workers.preempted),
        (1, 1, 1),
        "worker 2 runs, worker 1's training failed, worker 0 went with its node: {workers:?}"
    );
}

#[test]
fn with_etos_settings_torchrun_gets_time_to_stop_its_training_on_sigterm() {
    let grace = |world: &World| {
        let spec = world.pods["ddp-worker-0"].spec.clone().unwrap();
        (
            spec.termination_grace_period_seconds,
            env(
                &world.pods["ddp-worker-0"],
                "TORCH_ELASTIC_SHUTDOWN_TIMEOUT",
            ),
        )
    };
    let mut world = World::pytorch(elastic(
        json!({"spec": {"elasticPolicy": {"checkpointGraceSeconds": 120}}}),
    ));
    world.reconcile();
    assert_eq!(grace(&world), (Some(120), Some("110".into())));

    let mut world = World::pytorch(elastic(json!({"spec": {
        "elasticPolicy": {"checkpointGraceSeconds": 120},
        "pytorchReplicaSpecs": {"Worker": {"template": {"spec": {
            "terminationGracePeriodSeconds": 60,
            "containers": [{"name": "pytorch", "image": "pytorch/pytorch:2.5.1",
                            "env": [{"name": "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "value": "15"}]}]
        }}}}
    }})));
    world.reconcile();
    assert_eq!(
        grace(&world),
        (Some(60), Some("15".into())),
        "the template's own stand"
    );

    for settings in [json!({}), json!({"checkpointOnTermination": false})] {
        let mut world = World::pytorch(elastic(
            json!({"spec": {"elasticPolicy": settings.clone()}}),
        ));
        world.reconcile();
        assert_eq!(grace(&world), (None, None), "{settings}: as v1 runs it");
    }
}

#[test]
fn a_suspend_notice_waits_only_for_workers_whose_agents_train_in_a_formed_group() {
    use eto_api::job_status::NoticeKind;
    let report = |state: Round, age: f64| {
        store_report(2, state, &[("ddp-worker-0", age), ("ddp-worker-1", age)])
    };
    // (what the store reports, the keep-alive the job sets, the suspend waits for a save)
    let cases = [
        (None, json!([]), true),
        (Some(report(Round::Formed, 2.0)), json!([]), true),
        // The agents left the round to re-form the group: their training is stopped.
        (Some(report(Round::Forming, 2.0)), json!([]), false),
        // Their heartbeats stopped: torchrun takes them for dead after 5 s × 3.
        (Some(report(Round::Formed, 16.0)), json!([]), false),
        (
            Some(report(Round::Formed, 16.0)),
            json!([{"key": "keep_alive_interval", "value": "10"}]),
            true,
        ),
    ];
    for (index, (group_report, conf, waits)) in cases.into_iter().enumerate() {
        let mut world = running(elastic(json!({"spec": {"elasticPolicy": {
            "checkpointGraceSeconds": 60, "rdzvConf": conf
        }}})));
        world.group_report = group_report;
        world
            .pytorch_job
            .as_mut()
            .unwrap()
            .spec
            .run_policy
            .get_or_insert_default()
            .suspend = Some(true);
        world.reconcile();
        let status = world.observed().job.status();
        let suspending = status
            .notice
            .as_ref()
            .is_some_and(|notice| notice.kind == NoticeKind::Suspend);
        assert_eq!(suspending, waits, "case {index}: {:?}", status.phase);
        assert_eq!(
            status.phase == Some(JobPhase::Suspended),
            !waits,
            "case {index}"
        );
    }
}

#[test]
fn a_suspending_job_reads_its_store_again_soon_and_suspends_once_no_agent_trains() {
    use crate::group_report::FORMING_POLL;
    use eto_api::job_status::NoticeKind;
    let mut world = running(elastic(json!({"spec": {"elasticPolicy": {
        "minReplicas": 2, "checkpointGraceSeconds": 60
    }}})));
    let members = [("ddp-worker-0", 1.0), ("ddp-worker-1", 1.0)];
    world.group_report = Some(store_report(0, Round::Formed, &members));
    world.reconcile();
    world.lose_with_node("ddp-worker-0");
    let plan = world.reconcile();
    let status = world.observed().job.status();
    assert_eq!(
        status.notice.as_ref().map(|notice| notice.kind),
        Some(NoticeKind::Suspend),
        "the survivor still trains in the round that formed: it is told to checkpoint"
    );
    assert!(
        plan.requeue_after
            .is_some_and(|after| after <= FORMING_POLL),
        "no pod changes when the survivor's agent stops its training: {:?}",
        plan.requeue_after
    );

    // The store took the lost agent out and told the others to re-form: the survivor's agent
    // stopped its training and waits in the next round for a second agent that cannot come.
    world.group_report = Some(store_report(1, Round::Forming, &[("ddp-worker-1", 1.0)]));
    world.advance(FORMING_POLL.as_secs() as i64);
    world.reconcile();
    assert_eq!(
        phase(&world),
        Some(JobPhase::Suspended),
        "nothing of the run can save any more: it does not wait out the 60 s"
    );
}

#[test]
fn a_worker_whose_agent_left_the_group_silent_is_replaced_after_a_grace() {
    use crate::group_report::FormedRound;
    let mut world = running(elastic(json!({})));
    for pod in ["ddp-worker-0", "ddp-worker-1"] {
        world.training(pod);
    }
    world.reconcile();
    // Worker 1 froze: the group re-formed without it, its pod still runs.
    let left_at = world.now;
    world.group_report = Some(GroupReport {
        group: Some(GroupState {
            round: 2,
            complete: true,
            participants: 1,
            members: vec![Member {
                host: "ddp-worker-0".into(),
                heartbeat_age: Some(0.5),
            }],
            reformations: vec![FormedRound {
                round: 2,
                since: Some((left_at - jiff::SignedDuration::from_secs(31)).to_string()),
                formed: left_at.to_string(),
                paused: Some(31.0),
                members: vec!["ddp-worker-0".into()],
                left: vec!["ddp-worker-1".into()],
                joined: Vec::new(),
            }],
            ..GroupState::default()
        }),
        ..GroupReport::default()
    });
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty(), "not before the grace");
    assert!(
        plan.requeue_after
            .is_some_and(|after| after <= std::time::Duration::from_secs(60)),
        "{:?}",
        plan.requeue_after
    );
    world.advance(60);
    let plan = world.reconcile();
    assert_eq!(deleted_pods(&plan), ["ddp-worker-1"]);
    assert!(world.pods.contains_key("ddp-worker-2"), "replaced");
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    let entry = status.eto.blacklist.last().unwrap();
    assert_eq!(
        (entry.pod.as_str(), entry.reason.as_str()),
        ("ddp-worker-1", "Silent")
    );
    assert_eq!(
        status
            .eto
            .nodes_in_cooldown
            .iter()
            .map(|n| n.node.as_str())
            .collect::<Vec<_>>(),
        ["node-ddp-worker-1"]
    );
    assert!(reasons(&plan).contains(&"WorkerLost".to_string()));
    // A Worker back in the group (its agent restarted in its pod) is left alone.
    let mut world = running(elastic(json!({})));
    world.training("ddp-worker-1");
    let mut report = world.group_report.clone().unwrap_or_default();
    report.group = Some(GroupState {
        round: 3,
        complete: true,
        participants: 2,
        members: vec![
            Member {
                host: "ddp-worker-0".into(),
                heartbeat_age: Some(0.5),
            },
            Member {
                host: "ddp-worker-1".into(),
                heartbeat_age: Some(0.5),
            },
        ],
        reformations: vec![FormedRound {
            round: 2,
            since: None,
            formed: world.now.to_string(),
            paused: None,
            members: vec!["ddp-worker-0".into()],
            left: vec!["ddp-worker-1".into()],
            joined: Vec::new(),
        }],
        ..GroupState::default()
    });
    world.group_report = Some(report);
    world.advance(120);
    assert!(deleted_pods(&world.reconcile()).is_empty());
}
