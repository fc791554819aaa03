//! How fast host discovery follows the workers, in the simulated cluster.
//!
//! `cargo bench -p eto-controller --bench discovery` runs the operator against eto-sim and,
//! 100 times, fails a ready worker and waits for its replacement. It prints the delay from each
//! worker change being committed in the API server to the launcher's hostfile annotation (what
//! the launcher's `/etc/edl/hostfile` shows, see `eto_engine::discovery`) reflecting it:
//! removals (a worker failed) and additions (its replacement became ready), median, p99 and
//! max. The kubelet's own refresh of the file is not part of the figure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use eto_api::TrainingJob;
use eto_api::well_known::HOSTFILE_ANNOTATION;
use eto_controller::{Metrics, Settings};
use eto_sim::resources::ResourceId;
use eto_sim::store::{ObjectKey, Store};
use eto_sim::{SimCluster, SimConfig};
use kube::api::{Api, Patch, PatchParams};
use tokio_util::sync::CancellationToken;

const CHANGES: usize = 100;
const WORKERS: usize = 16;

fn job_yaml() -> String {
    format!(
        r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata:
  name: bench
  namespace: default
spec:
  etReplicaSpecs:
    launcher:
      template:
        spec:
          containers: [{{name: launcher, image: horovod/horovod:0.28.1}}]
    worker:
      replicas: {WORKERS}
      minReplicas: 1
      restartPolicy: Always
      template:
        spec:
          containers:
          - name: worker
            image: horovod/horovod:0.28.1
            resources: {{limits: {{nvidia.com/gpu: 1}}}}
"#
    )
}

fn hostfile(store: &Store) -> Option<String> {
    store.read(|state| {
        let launcher = state.get(
            &ResourceId::new("", "pods"),
            &ObjectKey::new("default", "bench-launcher"),
        )?;
        launcher["metadata"]["annotations"][HOSTFILE_ANNOTATION]
            .as_str()
            .map(String::from)
    })
}

fn ready(store: &Store, pod: &str) -> bool {
    store.read(|state| {
        state
            .get(
                &ResourceId::new("", "pods"),
                &ObjectKey::new("default", pod),
            )
            .is_some_and(|pod| {
                pod["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    && pod["status"]["phase"] == "Running"
            })
    })
}

/// Waits (on the store's change notifications, not by sleeping) until `condition` holds;
/// returns when it was first seen.
async fn until(store: &Store, condition: impl Fn() -> bool) -> Instant {
    let mut changes = store.subscribe();
    loop {
        if condition() {
            return Instant::now();
        }
        tokio::time::timeout(Duration::from_secs(30), changes.changed())
            .await
            .expect("progress within 30 s")
            .expect("the store lives");
    }
}

fn host(index: usize) -> String {
    format!("bench-worker-{index}.bench-workers:1")
}

fn report(name: &str, mut delays: Vec<Duration>) {
    delays.sort();
    let at = |fraction: f64| delays[((delays.len() - 1) as f64 * fraction).round() as usize];
    println!(
        "{name:<9} {} changes: median {:?}, p99 {:?}, max {:?}",
        delays.len(),
        at(0.5),
        at(0.99),
        delays.last().copied().unwrap_or_default()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let cluster = SimCluster::start(SimConfig::default().gpu_nodes(4, 8))
        .await
        .expect("the cluster starts");
    let client = cluster.client();
    eto_controller::install_crds(&client)
        .await
        .expect("the CRDs install");
    let stop = CancellationToken::new();
    let operator = tokio::spawn(eto_controller::run(
        client.clone(),
        Settings::default(),
        Arc::new(Metrics::default()),
        Arc::new(jiff::Timestamp::now),
        stop.clone().cancelled_owned(),
    ));
    let job: TrainingJob = serde_saphyr::from_str(&job_yaml()).expect("a valid job");
    let jobs: Api<TrainingJob> = Api::default_namespaced(client);
    jobs.patch(
        "bench",
        &PatchParams::apply("bench").force(),
        &Patch::Apply(&job),
    )
    .await
    .expect("the job applies");
    let store = Arc::clone(cluster.store());
    until(&store, || {
        hostfile(&store).is_some_and(|h| h.lines().count() == WORKERS)
    })
    .await;

    let mut removals = Vec::with_capacity(CHANGES);
    let mut additions = Vec::with_capacity(CHANGES);
    let mut workers: Vec<usize> = (0..WORKERS).collect();

    for replacement in WORKERS..WORKERS + CHANGES {
        let victim = workers.remove(0);
        let failed = Instant::now();
        cluster
            .fail_pod("default", &format!("bench-worker-{victim}"), 137, "Error")
            .expect("the worker fails");
        let gone = until(&store, || {
            hostfile(&store).is_some_and(|h| !h.lines().any(|l| l == host(victim)))
        })
        .await;
        removals.push(gone - failed);

        workers.push(replacement);
        let became_ready = until(&store, || {
            ready(&store, &format!("bench-worker-{replacement}"))
        })
        .await;
        let listed = until(&store, || {
            hostfile(&store).is_some_and(|h| h.lines().any(|l| l == host(replacement)))
        })
        .await;
        additions.push(listed - became_ready);
    }
    println!(
        "host discovery delay: from a worker change committed in the API server to the launcher's hostfile"
    );
    report("removals", removals.clone());
    report("additions", additions.clone());
    report("all", removals.into_iter().chain(additions).collect());
    stop.cancel();
    let _ = operator.await;
}
