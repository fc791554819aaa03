//! Advance warnings of a spot reclaim, end to end on the simulated cluster: a node announces it
//! goes away minutes ahead (Karpenter's taint); eto tells the workers on it at once, takes them
//! out of discovery and replaces them elsewhere, or suspends a job left below its minimum at
//! once, before the node goes; a withdrawn warning takes its notice back and its workers
//! return, or go when their replacements already joined; replica groups whose leaving would
//! cost the minimum hand over to spares before they leave.

use std::time::{Duration, Instant};

use eto_api::job_status::{JobPhase, Notice, NoticeKind};
use eto_api::well_known::NOTICE_ANNOTATION;
use eto_sim::nodes::warnings::Warning;
use eto_sim::{NodeSpec, SimConfig};
use eto_tests::env::{Env, JobYaml, in_phase, spot_nodes};
use k8s_openapi::api::core::v1::Pod;

fn notice_of(pod: &Pod) -> Option<Notice> {
    serde_json::from_str(pod.metadata.annotations.as_ref()?.get(NOTICE_ANNOTATION)?).ok()
}

/// Karpenter's warning on `node`, two minutes ahead of its reclaim.
fn announce(env: &Env, node: &str) -> Instant {
    env.cluster
        .announce_reclaim(
            node,
            &Warning::karpenter(),
            Duration::from_secs(120),
            Duration::from_secs(30),
        )
        .unwrap();
    Instant::now()
}

/// A job of 4 one-GPU workers needing `min`, replaced when lost.
fn job(name: &str, min: u32) -> String {
    JobYaml {
        name,
        replicas: 4,
        min,
        max: None,
        extra_spec: "\n  elasticPolicy:\n    checkpointGraceSeconds: 300",
        worker_policy: "OnFailure",
    }
    .render()
}

/// The job's worker pods on `node`.
async fn workers_on(env: &Env, job: &str, node: &str) -> Vec<String> {
    env.pods()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|pod| pod.spec.as_ref().unwrap().node_name.as_deref() == Some(node))
        .filter_map(|pod| pod.metadata.name)
        .filter(|name| name.starts_with(&format!("{job}-worker-")))
        .collect()
}

/// Fills the spot nodes with the job's 4 workers: 2 on one node, 2 on another.
async fn running(env: &Env, name: &str) -> (String, Vec<String>) {
    env.wait_job(name, "runs", in_phase(JobPhase::Running))
        .await;
    for node in ["spot-a", "spot-b", "spot-c"] {
        let workers = workers_on(env, name, node).await;
        if workers.len() == 2 {
            return (node.to_string(), workers);
        }
    }
    panic!("no spot node holds two workers");
}

#[tokio::test]
async fn workers_on_a_warned_node_are_told_at_once_leave_discovery_and_are_replaced_elsewhere() {
    let env = Env::start(spot_nodes()).await;
    env.apply_job(&job("storm", 2)).await;
    let (doomed, warned) = running(&env, "storm").await;
    // Announced two minutes ahead, as Karpenter taints a node it is about to take.
    let announced = announce(&env, &doomed);
    for worker in &warned {
        let pod = env
            .wait_pod(worker, "shows its Reclaim notice", |pod| {
                pod.and_then(notice_of)
                    .is_some_and(|n| n.kind == NoticeKind::Reclaim)
            })
            .await
            .unwrap();
        let notice = notice_of(&pod).unwrap();
        assert_eq!(notice.reason, "NodeWarning");
        assert!(notice.deadline.is_some());
        assert!(notice.message.contains(&doomed), "{}", notice.message);
    }
    println!(
        "the warned workers read their Reclaim notice {:?} after the announcement",
        announced.elapsed()
    );
    // Out of discovery, and replaced on a node that stays.
    env.wait_job(
        "storm",
        "trains with replacements of the warned workers",
        |job| {
            let status = job.status.as_ref().unwrap();
            status.current_workers.len() == 4
                && !status.current_workers.iter().any(|w| warned.contains(w))
        },
    )
    .await;
    assert_eq!(
        workers_on(&env, "storm", &doomed).await,
        warned,
        "the warned run on until their node goes"
    );
    let hostfile = env.launcher_hostfile("storm").await.unwrap_or_default();
    for worker in &warned {
        assert!(!hostfile.contains(worker.as_str()), "{hostfile}");
    }
    let notes = env.event_notes("storm", "NodeWarning").await;
    assert_eq!(notes.len(), 2, "one per warned worker: {notes:?}");
    assert!(
        notes[0].contains("taint karpenter.sh/disrupted"),
        "{notes:?}"
    );
    let launcher = env.pods().get("storm-launcher").await.unwrap();
    assert_eq!(notice_of(&launcher), None, "the job trains on");
    let job = env
        .wait_job("storm", "lists the warned node", |job| {
            job.status
                .as_ref()
                .is_some_and(|status| !status.node_warnings.is_empty())
        })
        .await;
    let listed = job.status.unwrap().node_warnings;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0].node.as_str(), &listed[0].workers),
        (doomed.as_str(), &warned)
    );
    // Karpenter's taint has no time: the deadline is two minutes after eto first saw it.
    let lead = listed[0].deadline.0.duration_since(listed[0].since.0);
    assert_eq!(lead, jiff::SignedDuration::from_secs(120));
}

#[tokio::test]
async fn a_warning_that_leaves_too_few_workers_suspends_the_job_before_its_node_goes() {
    let env = Env::start(spot_nodes()).await;
    env.apply_job(&job("crossed", 3)).await;
    let (doomed, _) = running(&env, "crossed").await;
    let announced = announce(&env, &doomed);
    let notice = env
        .wait_pod("crossed-launcher", "shows the Suspend notice", |pod| {
            pod.and_then(notice_of)
                .is_some_and(|n| n.kind == NoticeKind::Suspend)
        })
        .await
        .map(|pod| notice_of(&pod).unwrap())
        .unwrap();
    println!(
        "the Suspend notice was out {:?} after the announcement (belowMinSeconds not waited)",
        announced.elapsed()
    );
    // The grace period ends when the node goes, not 300 s later.
    let deadline = notice.deadline.clone().unwrap().0;
    let until = deadline.duration_since(jiff::Timestamp::now());
    assert!(
        until <= jiff::SignedDuration::from_secs(121),
        "capped by the warning: {notice:?}"
    );
    // The training code checkpoints and quits: the job is suspended while the node still runs.
    env.cluster
        .fail_pod("default", "crossed-launcher", 1, "Error")
        .unwrap();
    env.wait_job("crossed", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    assert!(
        announced.elapsed() < Duration::from_secs(120),
        "before the node went"
    );
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(env.cluster.client());
    assert!(
        nodes.get_opt(&doomed).await.unwrap().is_some(),
        "the node still runs"
    );
    // The other nodes hold a new run: it resumes from the checkpoint, off the warned node.
    env.wait_job("crossed", "resumes", in_phase(JobPhase::Running))
        .await;
    let launcher = env.pods().get("crossed-launcher").await.unwrap();
    assert_eq!(
        notice_of(&launcher).map(|n| n.kind),
        Some(NoticeKind::Resume)
    );
    assert!(workers_on(&env, "crossed", &doomed).await.is_empty());
}

#[tokio::test]
async fn a_withdrawn_warning_takes_its_notice_back_and_its_workers_return() {
    // Two spot nodes and no spare GPU: the replacements of the warned workers stay pending.
    let full = SimConfig {
        nodes: vec![
            NodeSpec::gpu("on-demand", 0),
            NodeSpec::gpu("spot-a", 2),
            NodeSpec::gpu("spot-b", 2),
        ],
        ..spot_nodes()
    };
    let env = Env::start(full).await;
    env.apply_job(&job("calm", 2)).await;
    let (doomed, warned) = running(&env, "calm").await;
    let warning = Warning {
        condition: Some("InstanceExpired".into()),
        message: Some("the instance is released soon".into()),
        ..Warning::default()
    };
    env.cluster.warn_node(&doomed, &warning).unwrap();
    env.wait_pod(&warned[0], "shows its Reclaim notice", |pod| {
        pod.and_then(notice_of).is_some()
    })
    .await;
    let job = env
        .wait_job("calm", "lists the warned node", |job| {
            job.status
                .as_ref()
                .is_some_and(|status| !status.node_warnings.is_empty())
        })
        .await;
    let listed = &job.status.unwrap().node_warnings[0];
    assert_eq!(
        (
            listed.node.as_str(),
            listed.signal.as_str(),
            &listed.workers
        ),
        (doomed.as_str(), "condition InstanceExpired", &warned)
    );
    env.cluster
        .withdraw_node_warning(&doomed, &warning)
        .unwrap();
    env.wait_pod(&warned[0], "no longer shows it", |pod| {
        pod.is_some_and(|pod| notice_of(pod).is_none())
    })
    .await;
    // Still running, the warned workers come back in place of their pending replacements.
    let job = env
        .wait_job("calm", "trains with its workers back", |job| {
            let status = job.status.as_ref().unwrap();
            status.current_workers.len() == 4
                && warned.iter().all(|w| status.current_workers.contains(w))
                && status.node_warnings.is_empty()
        })
        .await;
    let status = job.status.unwrap();
    assert!(status.blacklist.iter().all(|b| !warned.contains(&b.pod)));
    let returned = env.event_notes("calm", "WorkerReturned").await;
    assert_eq!(returned.len(), 2, "{returned:?}");
    let hostfile = env.launcher_hostfile("calm").await.unwrap_or_default();
    for worker in &warned {
        assert!(hostfile.contains(worker.as_str()), "{hostfile}");
    }
    for gave_way in status.target_workers.iter().filter(|w| !warned.contains(w)) {
        assert!(
            [
                "calm-worker-0",
                "calm-worker-1",
                "calm-worker-2",
                "calm-worker-3"
            ]
            .contains(&gave_way.as_str()),
            "the replacements gave way: {:?}",
            status.target_workers
        );
    }
}

#[tokio::test]
async fn a_warning_withdrawn_after_the_replacements_joined_deletes_the_warned_workers() {
    // Spare GPUs: the replacements of the warned workers start and join at once.
    let env = Env::start(spot_nodes()).await;
    env.apply_job(&job("settled", 2)).await;
    let (doomed, warned) = running(&env, "settled").await;
    let warning = Warning::karpenter();
    env.cluster.warn_node(&doomed, &warning).unwrap();
    let job = env
        .wait_job("settled", "trains with the replacements", |job| {
            let status = job.status.as_ref().unwrap();
            status.current_workers.len() == 4
                && !status.current_workers.iter().any(|w| warned.contains(w))
        })
        .await;
    let replaced = job.status.unwrap().current_workers;
    env.cluster
        .withdraw_node_warning(&doomed, &warning)
        .unwrap();
    // The job has its workers without them: they go rather than hold GPUs outside the job.
    for worker in &warned {
        env.wait_pod(worker, "is deleted", |pod| {
            pod.is_none_or(|pod| pod.metadata.deletion_timestamp.is_some())
        })
        .await;
    }
    let job = env
        .wait_job("settled", "no longer lists the warning", |job| {
            job.status
                .as_ref()
                .is_some_and(|status| status.node_warnings.is_empty())
        })
        .await;
    let status = job.status.unwrap();
    assert_eq!(status.current_workers, replaced, "the replacements stay");
    assert!(
        env.event_notes("settled", "WorkerReturned")
            .await
            .is_empty(),
        "no worker returned"
    );
    let hostfile = env.launcher_hostfile("settled").await.unwrap_or_default();
    for worker in &warned {
        assert!(!hostfile.contains(worker.as_str()), "{hostfile}");
    }
    assert_eq!(
        env.pods()
            .get("settled-launcher")
            .await
            .ok()
            .as_ref()
            .and_then(notice_of),
        None,
        "the job trains on"
    );
}

#[tokio::test]
async fn warned_groups_that_would_leave_too_few_hand_over_to_spares_before_they_leave() {
    use eto_api::PyTorchJob;
    use eto_engine::kind::pytorch_job::replica_groups::group_of;
    let env = Env::start(spot_nodes()).await;
    // Three TorchFT replica groups of one one-GPU pod needing two, replaced when lost.
    let groups = crate::pytorchjob::ELASTIC_JOB
        .replace("name: elastic", "name: ft")
        .replace("maxReplicas: 4", "maxReplicas: 4\n    replicaGroups: {}");
    env.apply::<PyTorchJob>(&groups).await;
    let job = env
        .wait::<PyTorchJob>("ft", "trains as three groups", |job| {
            job.status.as_ref().is_some_and(|status| {
                status.eto.current_workers.len() == 3 && status.eto.phase == Some(JobPhase::Running)
            })
        })
        .await;
    let run = job.status.unwrap().eto.run;
    let (doomed, warned) = {
        let mut found = None;
        for node in ["spot-a", "spot-b", "spot-c"] {
            let workers = workers_on(&env, "ft", node).await;
            if workers.len() == 2 {
                found = Some((node.to_string(), workers));
            }
        }
        found.expect("a spot node holds two groups")
    };
    let pods = env.pods().list(&Default::default()).await.unwrap().items;
    let staying = pods
        .iter()
        .find(|pod| {
            pod.metadata.name.as_deref().is_some_and(|name| {
                name.starts_with("ft-worker-") && !warned.contains(&name.to_string())
            })
        })
        .expect("the third group")
        .clone();
    announce(&env, &doomed);
    // The warned groups train on until spares wait: when they are told to go, the spares
    // started for them already run elsewhere.
    for worker in &warned {
        env.wait_pod(worker, "shows its Reclaim notice", |pod| {
            pod.and_then(notice_of)
                .is_some_and(|n| n.kind == NoticeKind::Reclaim)
        })
        .await;
    }
    let reasons = env.event_reasons("ft").await;
    assert!(
        reasons
            .iter()
            .any(|reason| reason == eto_engine::warned_handover::HANDING_OVER),
        "{reasons:?}"
    );
    let job = env
        .wait::<PyTorchJob>("ft", "trains as three groups again", |job| {
            job.status
                .as_ref()
                .is_some_and(|status| status.eto.current_workers.len() == 3)
        })
        .await;
    let status = job.status.unwrap().eto;
    assert_eq!(status.notice, None, "no suspend");
    assert_eq!(status.run, run, "the same run: never suspended");
    assert_eq!(
        status.current_workers,
        [
            staying.metadata.name.clone().unwrap(),
            "ft-worker-3".to_string(),
            "ft-worker-4".to_string()
        ],
        "the spares started for the warned groups took their places, and no other"
    );
    let now = env.pods().list(&Default::default()).await.unwrap().items;
    let group = |name: &str| {
        now.iter()
            .find(|pod| pod.metadata.name.as_deref() == Some(name))
            .and_then(group_of)
    };
    let mut taken: Vec<Option<u32>> = vec![group("ft-worker-3"), group("ft-worker-4")];
    taken.sort();
    let mut left: Vec<Option<u32>> = warned
        .iter()
        .map(|name| {
            pods.iter()
                .find(|pod| pod.metadata.name.as_ref() == Some(name))
        })
        .map(|pod| pod.and_then(group_of))
        .collect();
    left.sort();
    assert_eq!(taken, left, "the spares hold the warned groups' ids");
    let after = now
        .iter()
        .find(|pod| pod.metadata.name == staying.metadata.name)
        .unwrap();
    assert_eq!(
        after.metadata.uid, staying.metadata.uid,
        "the third group is untouched"
    );
    assert!(
        !now.iter()
            .any(|pod| pod.metadata.name.as_deref() == Some("ft-worker-5")),
        "no worker beyond the spares"
    );
}
