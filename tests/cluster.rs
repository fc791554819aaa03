//! Against a real cluster (the one KUBECONFIG names): `cargo test -p eto-tests --test integration
//! cluster:: -- --ignored`. Each test installs the CRDs, runs the operator in-process for a scratch
//! namespace, and checks what only a real kubelet can show: the launcher's
//! `/etc/edl/discover_hosts.sh` follows the workers, and a notice reaches the workers'
//! `/etc/edl/notice`. Needs pulls of `busybox`.

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

/// A scratch namespace on the cluster KUBECONFIG names, with eto's CRDs installed and the
/// operator running in-process for that namespace only.
struct Scratch {
    client: Client,
    namespace: String,
    stop: CancellationToken,
    operator: tokio::task::JoinHandle<Result<(), eto_controller::RunError>>,
}

impl Scratch {
    async fn start(name: &str) -> Self {
        let client = Client::try_default().await.unwrap();
        let namespace = format!("eto-test-{name}-{}", std::process::id());
        let scratch: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &scratch)
            .await
            .unwrap();
        eto_controller::install_crds(&client).await.unwrap();
        let stop = CancellationToken::new();
        let operator = tokio::spawn(eto_controller::run(
            client.clone(),
            Settings {
                scope: eto_controller::Scope::of(vec![namespace.clone()]),
                ..Settings::default()
            },
            Arc::new(Metrics::default()),
            Arc::new(jiff::Timestamp::now),
            stop.clone().cancelled_owned(),
        ));
        Self {
            client,
            namespace,
            stop,
            operator,
        }
    }

    fn jobs(&self) -> Api<TrainingJob> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn apply(&self, yaml: &str) {
        let job: TrainingJob = serde_saphyr::from_str(yaml).unwrap();
        let name = job.metadata.name.clone().unwrap();
        self.jobs()
            .patch(
                &name,
                &PatchParams::apply("eto-test").force(),
                &Patch::Apply(&job),
            )
            .await
            .unwrap();
    }

    async fn end(self) {
        self.stop.cancel();
        let _ = self.operator.await;
        Api::<Namespace>::all(self.client.clone())
            .delete(&self.namespace, &DeleteParams::default())
            .await
            .unwrap();
    }
}

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG): installs eto's CRDs and runs pods in a scratch namespace"]
async fn the_launchers_discovery_script_follows_the_workers_on_a_real_kubelet() {
    let scratch = Scratch::start("discovery").await;
    scratch.apply(JOB).await;
    let pods = scratch.pods();
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
    scratch.end().await;
}

/// Workers that print their `/etc/edl/notice` five times a second.
const NOTICED: &str = r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata:
  name: noticed
spec:
  elasticPolicy:
    checkpointGraceSeconds: 120
  etReplicaSpecs:
    launcher:
      template:
        spec:
          containers:
          - name: launcher
            image: busybox:1.36
            command: ["sleep", "3600"]
    worker:
      replicas: 1
      template:
        spec:
          containers:
          - name: worker
            image: busybox:1.36
            command: ["sh", "-c", "while true; do cat /etc/edl/notice; echo; sleep 0.2; done"]
"#;

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG): installs eto's CRDs and runs pods in a scratch namespace"]
async fn a_suspend_notice_reaches_the_workers_file_on_a_real_kubelet() {
    let scratch = Scratch::start("notice").await;
    scratch.apply(NOTICED).await;
    let jobs = scratch.jobs();
    eventually("the job runs", Duration::from_secs(300), async || {
        let job = jobs.get("noticed").await.ok()?;
        let phase = job.status?.phase?;
        (phase == eto_api::training_job::JobPhase::Running).then_some(())
    })
    .await;
    jobs.patch(
        "noticed",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    let posted = Instant::now();
    let pods = scratch.pods();
    eventually(
        "the worker's /etc/edl/notice shows the suspend notice",
        Duration::from_secs(60),
        async || {
            let params = LogParams {
                tail_lines: Some(5),
                ..LogParams::default()
            };
            let logs = pods.logs("noticed-worker-0", &params).await.ok()?;
            logs.contains(r#""kind":"Suspend""#).then_some(())
        },
    )
    .await;
    println!(
        "the worker read the suspend notice {:?} after spec.suspend was set",
        posted.elapsed()
    );
    scratch.end().await;
}
