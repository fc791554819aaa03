//! Throughput and watch fan-out of the simulated API server, through `kube::Client` over HTTP.
//!
//! `cargo bench -p eto-sim --bench apiserver` prints writes per second (ConfigMap creates and
//! merge patches, and server-side applies of a pod-sized object) and the delay from a write's
//! acknowledgement to its arrival at each of 10 concurrent watchers (median, p99, max), which
//! all must see every event.

use std::sync::Arc;
use std::time::{Duration, Instant};

use eto_sim::{SimCluster, SimConfig};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

const CLIENTS: usize = 8;
const WRITES: usize = 12_000;
const APPLIES: usize = 4_000;
const WATCHERS: usize = 10;
const WATCHED_WRITES: usize = 2_000;

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"bench": "true"}}, "data": {"n": "0"}}),
    )
    .expect("a valid ConfigMap")
}

async fn run_parallel<F, Fut>(total: usize, operation: F) -> Duration
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let operation = Arc::new(operation);
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let operation = Arc::clone(&operation);
            tokio::spawn(async move {
                for index in (client..total).step_by(CLIENTS) {
                    operation(index).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a benchmark task panicked");
    }
    started.elapsed()
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let cluster = SimCluster::start(SimConfig::default())
        .await
        .expect("the simulated cluster starts");
    let client = cluster.client();
    println!(
        "eto-sim API server benchmark ({CLIENTS} concurrent clients, one process, 2 worker threads)"
    );

    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let creates = {
        let api = api.clone();
        run_parallel(WRITES / 2, move |i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &config_map(&format!("cm-{i}")))
                    .await
                    .expect("create");
            }
        })
        .await
    };
    let patches = {
        let api = api.clone();
        run_parallel(WRITES / 2, move |i| {
            let api = api.clone();
            async move {
                let patch = json!({"data": {"n": i.to_string()}});
                api.patch(
                    &format!("cm-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
                .expect("patch");
            }
        })
        .await
    };
    let writes_per_second = WRITES as f64 / (creates + patches).as_secs_f64();
    println!(
        "simple writes:       {writes_per_second:>8.0} per second ({} creates + {} merge patches)",
        WRITES / 2,
        WRITES / 2
    );

    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::default_namespaced(client.clone());
    let applies = run_parallel(APPLIES, move |i| {
        let pods = pods.clone();
        async move {
            let pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p-{}", i % 500), "labels": {"training-job-name": "bench", "replica-index": (i % 500).to_string()}, "annotations": {"generation": (i / 500).to_string()}},
                "spec": {"schedulerName": "none", "containers": [{"name": "worker", "image": "horovod/horovod:0.28.1", "command": ["/usr/sbin/sshd", "-De"],
                    "ports": [{"containerPort": 22, "protocol": "TCP"}], "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    "volumeMounts": [{"name": "ssh", "mountPath": "/root/.ssh"}]}],
                    "volumes": [{"name": "ssh", "secret": {"secretName": "bench-ssh", "defaultMode": 384}}]}
            });
            pods.patch(&format!("p-{}", i % 500), &PatchParams::apply("bench").force(), &Patch::Apply(&pod)).await.expect("apply");
        }
    })
    .await;
    println!(
        "server-side applies: {:>8.0} per second (pod-sized objects, {APPLIES} applies)",
        APPLIES as f64 / applies.as_secs_f64()
    );

    // Watch fan-out: WATCHERS watchers, each must see every write; measure delivery delay.
    let start_rv = api
        .list(&Default::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("a list resourceVersion");
    let acknowledged: Arc<std::sync::Mutex<Vec<Option<Instant>>>> =
        Arc::new(std::sync::Mutex::new(vec![None; WATCHED_WRITES]));
    let watchers: Vec<_> = (0..WATCHERS)
        .map(|_| {
            let api = api.clone();
            let start_rv = start_rv.clone();
            tokio::spawn(async move {
                let mut stream = api
                    .watch(&WatchParams::default().labels("fanout=true"), &start_rv)
                    .await
                    .expect("watch")
                    .boxed();
                let mut arrivals = Vec::with_capacity(WATCHED_WRITES);
                while arrivals.len() < WATCHED_WRITES {
                    match stream.try_next().await.expect("watch stream") {
                        Some(WatchEvent::Added(cm)) => {
                            let index: usize = cm
                                .name_any()
                                .trim_start_matches("fan-")
                                .parse()
                                .expect("a fan-out name");
                            arrivals.push((index, Instant::now()));
                        }
                        Some(_) => {}
                        None => panic!("the watch ended early"),
                    }
                }
                arrivals
            })
        })
        .collect();
    let fan_out = {
        let api = api.clone();
        let acknowledged = Arc::clone(&acknowledged);
        run_parallel(WATCHED_WRITES, move |i| {
            let api = api.clone();
            let acknowledged = Arc::clone(&acknowledged);
            async move {
                let mut cm = config_map(&format!("fan-{i}"));
                cm.labels_mut().insert("fanout".into(), "true".into());
                api.create(&PostParams::default(), &cm)
                    .await
                    .expect("create");
                acknowledged.lock().expect("not poisoned")[i] = Some(Instant::now());
            }
        })
        .await
    };
    let mut delays = Vec::with_capacity(WATCHERS * WATCHED_WRITES);
    for watcher in watchers {
        let arrivals = tokio::time::timeout(Duration::from_secs(60), watcher)
            .await
            .expect("watchers finish")
            .expect("watcher task");
        let acknowledged = acknowledged.lock().expect("not poisoned");
        for (index, arrived) in arrivals {
            let acked = acknowledged[index].expect("every write was acknowledged");
            delays.push(arrived.saturating_duration_since(acked));
        }
    }
    delays.sort();
    println!(
        "watch fan-out:       {WATCHERS} watchers each received all {WATCHED_WRITES} events ({:.0} writes per second meanwhile); \
         delay after the write's acknowledgement: median {:?}, p99 {:?}, max {:?}",
        WATCHED_WRITES as f64 / fan_out.as_secs_f64(),
        percentile(&delays, 0.5),
        percentile(&delays, 0.99),
        delays.last().copied().unwrap_or_default(),
    );
}
