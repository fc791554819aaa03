//! Jobs of many workers against the simulated cluster: their workers are written
//! concurrently, in growing batches, a write refused in the middle of a batch is made good by
//! the next reconcile without a duplicate, a pod template the API server rejects is reported
//! once instead of failing once per worker, and jobs reconciled at the same time keep to their
//! own pods.

use std::collections::BTreeSet;
use std::time::Duration;

use eto_api::job_status::JobPhase;
use eto_sim::{Fault, FaultAction};
use eto_tests::env::{Env, hostfile, hostfile_shown, in_phase, job_yaml, sim_config};
use eto_tests::history::PodHistory;

/// Waits until `job` runs with the workers `indices` in its launcher's discovery.
async fn wait_running_with(env: &Env, job: &str, indices: &[u32]) {
    env.wait_job(job, "runs", in_phase(JobPhase::Running)).await;
    let expected = hostfile(job, indices);
    env.wait_pod(
        &format!("{job}-launcher"),
        "lists every worker",
        |launcher| launcher.and_then(hostfile_shown) == Some(expected.as_str()),
    )
    .await;
}

/// The pods of `job`: its workers with `indices`, and its launcher.
fn pods_of(job: &str, indices: &[u32]) -> BTreeSet<String> {
    indices
        .iter()
        .map(|i| format!("{job}-worker-{i}"))
        .chain([format!("{job}-launcher")])
        .collect()
}

#[tokio::test]
async fn a_128_worker_job_starts_every_worker_and_lists_them_all() {
    let env = Env::start(sim_config(16, 8)).await;
    let history = PodHistory::start(&env).await;
    env.apply_job(&job_yaml("wide", 128, 128, "", "Never"))
        .await;
    let all: Vec<u32> = (0..128).collect();
    wait_running_with(&env, "wide", &all).await;
    assert_eq!(history.names(), pods_of("wide", &all));
    // Naming 128 workers takes more than the 1,024 bytes an event's note may have: the
    // note is cut, not the event refused.
    let created = env.event_notes("wide", "WorkersCreated").await;
    assert_eq!(created.len(), 1, "{created:?}");
    assert!(
        created[0].starts_with("created workers wide-worker-0, wide-worker-1, ")
            && created[0].ends_with(" ...")
            && created[0].len() <= 1024,
        "{created:?}"
    );
}

#[tokio::test]
async fn a_pod_write_refused_mid_batch_is_made_good_without_a_duplicate() {
    let env = Env::start(sim_config(2, 8)).await;
    let history = PodHistory::start(&env).await;
    // Batches of one, two and four workers: the sixth pod write, one of the third batch's, is
    // refused; the batch's other writes go through, and the reconcile ends without a status.
    env.cluster.inject(Fault {
        writes_only: true,
        path_contains: Some("/pods/".into()),
        skip: 5,
        ..Fault::every(FaultAction::Fail(500), 1)
    });
    env.apply_job(&job_yaml("batched", 12, 12, "", "Never"))
        .await;
    // The next reconcile finds six unrecorded live workers and keeps them; it cannot know
    // whether the refused worker ever ran (Horovod blacklists hosts by name), so the six it
    // adds take indices past the highest. Which write of the batch came sixth varies.
    env.wait_job("batched", "runs twelve workers", |job| {
        in_phase(JobPhase::Running)(job)
            && job
                .status
                .as_ref()
                .is_some_and(|status| status.current_workers.len() == 12)
    })
    .await;
    let mut indices: Vec<u32> = env
        .worker_names("batched")
        .await
        .iter()
        .map(|name| name.trim_start_matches("batched-worker-").parse().unwrap())
        .collect();
    indices.sort_unstable();
    assert_eq!(indices.len(), 12, "{indices:?}");
    wait_running_with(&env, "batched", &indices).await;
    assert_eq!(env.cluster.faults_acted(), 1, "the write was refused");
    assert_eq!(
        history.names(),
        pods_of("batched", &indices),
        "every pod ever created is one of the twelve workers or the launcher"
    );
}

#[tokio::test]
async fn a_pod_template_the_api_server_rejects_is_reported_once_not_per_worker() {
    let env = Env::start(sim_config(2, 8)).await;
    let history = PodHistory::start(&env).await;
    // Counts the pod writes, letting them through.
    env.cluster.inject(Fault {
        writes_only: true,
        path_contains: Some("/pods/".into()),
        ..Fault::every(FaultAction::Delay(Duration::ZERO), u32::MAX)
    });
    // Two containers of one name: the CRD takes the template, pod validation does not.
    let worker = "          - name: worker\n            image: horovod/horovod:0.28.1\n";
    let yaml = job_yaml("rejected", 16, 16, "", "Never").replacen(worker, &worker.repeat(2), 1);
    env.apply_job(&yaml).await;
    let job = env
        .wait_job("rejected", "reports the rejected pod", |job| {
            job.status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Stalled"))
                .is_some_and(|c| c.reason.as_deref() == Some("PodRejected"))
        })
        .await;
    let status = job.status.unwrap();
    let stalled = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Stalled")
        .unwrap();
    let message = stalled.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("rejected pod rejected-worker-0") && message.contains("Duplicate value"),
        "{message}"
    );
    assert!(
        status.target_workers.is_empty(),
        "no worker is counted as the job's"
    );
    assert!(history.names().is_empty(), "no pod was ever created");
    let reported = env.event_reasons("rejected").await;
    assert_eq!(
        reported.iter().filter(|r| *r == "PodRejected").count(),
        1,
        "{reported:?}"
    );
    assert!(
        env.cluster.faults_acted() < 4,
        "the first refusal ends the writes: {} pod writes for 16 workers",
        env.cluster.faults_acted()
    );
}

#[tokio::test]
async fn two_jobs_created_together_each_get_their_own_workers_and_hosts() {
    let env = Env::start(sim_config(4, 8)).await;
    let history = PodHistory::start(&env).await;
    // Reconciled at the same time: each job's workers are written in batches while the
    // other's are.
    let (left, right) = (
        job_yaml("left", 12, 12, "", "Never"),
        job_yaml("right", 12, 12, "", "Never"),
    );
    tokio::join!(env.apply_job(&left), env.apply_job(&right));
    let all: Vec<u32> = (0..12).collect();
    wait_running_with(&env, "left", &all).await;
    wait_running_with(&env, "right", &all).await;
    let expected: BTreeSet<String> = pods_of("left", &all)
        .into_iter()
        .chain(pods_of("right", &all))
        .collect();
    assert_eq!(
        history.names(),
        expected,
        "each job created its own workers and launcher, once"
    );
}
