//! Against a real cluster (the one KUBECONFIG names): `cargo test -p eto-tests --test cluster --
//! --ignored`. The test installs the CRDs, runs the operator in-process for a scratch
//! namespace, and checks what only a real kubelet can show: the launcher's
//! `/etc/edl/discover_hosts.sh` follows the workers. Needs pulls of `busybox`.

// Test code: a panic is a test failure with its message.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use eto_api::TrainingJob;
use eto_controller::{Metrics, Settings};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, LogParams, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

const JOB: &str = r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata:
  name: discovery
spec:
  etReplicaSpecs:
    launcher:
      template:
        spec:
          containers:
          - name: launcher
            image: busybox:1.36
            command: ["sh", "-c", "while true; do echo ==; /etc/edl/discover_hosts.sh; sleep 0.2; done"]
    worker:
      replicas: 2
      minReplicas: 1
      restartPolicy: Always
      template:
        spec:
          containers:
          - name: worker
            image: busybox:1.36
            command: ["sleep", "3600"]
"#;

/// The hosts of the last complete block the launcher printed.
async fn discovered(pods: &Api<Pod>) -> Option<Vec<String>> {
    let logs = pods
        .logs(
            "discovery-launcher",
            &LogParams {
                tail_lines: Some(50),
                ..LogParams::default()
            },
        )
        .await
        .ok()?;
    let blocks: Vec<&str> = logs.split("==\n").collect();
    let last_complete = blocks.get(blocks.len().checked_sub(2)?)?;
    Some(last_complete.lines().map(String::from).collect())
}

async fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(started.elapsed() < timeout, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG): installs eto's CRDs and runs pods in a scratch namespace"]
async fn the_launchers_discovery_script_follows_the_workers_on_a_real_kubelet() {
    let client = Client::try_default().await.unwrap();
    let namespace = format!("eto-test-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let scratch: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}})).unwrap();
    namespaces
        .create(&PostParams::default(), &scratch)
        .await
        .unwrap();
    eto_controller::install_crds(&client).await.unwrap();
    let stop = CancellationToken::new();
    let operator = tokio::spawn(eto_controller::run(
        client.clone(),
        Settings {
            namespace: Some(namespace.clone()),
            ..Settings::default()
        },
        Arc::new(Metrics::default()),
        Arc::new(jiff::Timestamp::now),
        stop.clone().cancelled_owned(),
    ));

    let job: TrainingJob = serde_saphyr::from_str(JOB).unwrap();
    let jobs: Api<TrainingJob> = Api::namespaced(client.clone(), &namespace);
    jobs.patch(
        "discovery",
        &PatchParams::apply("eto-test").force(),
        &Patch::Apply(&job),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let both = [
        "discovery-worker-0.discovery-workers:1".to_string(),
        "discovery-worker-1.discovery-workers:1".to_string(),
    ];
    eventually(
        "the launcher lists both workers",
        Duration::from_secs(300),
        async || discovered(&pods).await.filter(|hosts| hosts == &both),
    )
    .await;

    pods.delete("discovery-worker-0", &DeleteParams::default())
        .await
        .unwrap();
    let deleted = Instant::now();
    eventually(
        "the launcher drops the deleted worker",
        Duration::from_secs(60),
        async || {
            discovered(&pods)
                .await
                .filter(|hosts| !hosts.contains(&both[0]))
        },
    )
    .await;
    println!(
        "the launcher's discovery script dropped the worker {:?} after its deletion",
        deleted.elapsed()
    );

    stop.cancel();
    let _ = operator.await;
    namespaces
        .delete(&namespace, &DeleteParams::default())
        .await
        .unwrap();
}
