//! Elastic behaviour against the simulated cluster: waiting for capacity, scaling requests,
//! draining workers before they are deleted, and keeping replacements off failing nodes.

// Test code: a panic is a test failure with its message.
#![allow(clippy::unwrap_used)]

use eto_api::training_job::JobPhase;
use eto_tests::env::{Env, in_phase, job_yaml, sim_config};

#[tokio::test]
async fn a_job_that_cannot_get_its_minimum_fails_at_max_wait_and_one_without_a_limit_waits_on() {
    // Two GPUs; each job needs three ready workers to start.
    let env = Env::start(sim_config(1, 2)).await;
    env.apply_job(&job_yaml(
        "impatient",
        3,
        3,
        "\n  elasticPolicy:\n    maxWaitSeconds: 2",
        "Never",
    ))
    .await;
    env.apply_job(&job_yaml("patient", 3, 3, "", "Never")).await;

    let failed = env
        .wait_job("impatient", "fails", in_phase(JobPhase::Failed))
        .await;
    let condition = failed
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap();
    assert_eq!(condition.reason.as_deref(), Some("WaitingResourceTimeout"));
    let message = condition.message.unwrap();
    assert!(message.contains("for 3 ready workers"), "{message}");
    assert!(
        message.contains("ready,") && message.contains("pending"),
        "{message}"
    );
    for index in 0..3 {
        env.wait_pod(&format!("impatient-worker-{index}"), "is deleted", |pod| {
            pod.is_none()
        })
        .await;
    }

    // It waited as long as the first one and keeps waiting.
    let patient = env.jobs().get("patient").await.unwrap().status.unwrap();
    assert_eq!(patient.phase, Some(JobPhase::Created));
    assert!(
        env.event_reasons("patient")
            .await
            .iter()
            .all(|r| r != "WaitingResourceTimeout")
    );
}
