//! Pods that fail on their own (a command that exits, an image that is never pulled, a
//! missing Secret) against the simulated cluster: eto backs their replacements off instead of
//! churning pods, says why on the job, and creates pods of a fixed template at once.

use std::time::Duration;

use eto_sim::nodes::containers::EXIT_AFTER;

use eto_tests::env::{Env, JobYaml, sim_config};

/// The pods ever created for `job`'s Workers: their indices are never used twice.
async fn workers_created(env: &Env, job: &str) -> i32 {
    let job = env.jobs().get(job).await.unwrap();
    job.status
        .and_then(|status| status.next_worker_index)
        .unwrap_or_default()
}

#[tokio::test]
async fn workers_whose_command_fails_at_once_are_backed_off_not_churned() {
    let env = Env::start(sim_config(2, 8)).await;
    let yaml = JobYaml {
        name: "typo",
        replicas: 2,
        min: 1,
        max: None,
        extra_spec: "",
        worker_policy: "OnFailure",
    }
    .render()
    .replace(
        "      template:\n        spec:\n          containers:\n          - name: worker",
        &format!(
            "      template:\n        metadata:\n          annotations:\n            {EXIT_AFTER}: 1s\n        spec:\n          containers:\n          - name: worker"
        ),
    );
    assert!(yaml.contains(EXIT_AFTER));
    env.apply_job(&yaml).await;
    tokio::time::sleep(Duration::from_secs(25)).await;
    let created = workers_created(&env, "typo").await;
    // Two Workers, replaced at once after their first failure, after 10 s after their second:
    // three each in 25 s. Replaced at once every time, they would be fifty.
    assert!(
        (4..=6).contains(&created),
        "{created} Workers created in 25 s"
    );
}
