//! How fast eto creates a wide job's children, against the floor: a plain `kube::Client`
//! writing the same objects, in the same order and at the same concurrency, to the same API
//! server in the same run.
//!
//! `cargo bench -p eto-operator --bench startup` runs against an in-process simulated
//! cluster; `-- --kubeconfig <path>` runs against the cluster that kubeconfig names (eto's
//! CRDs are installed there; jobs and objects go to the `default` namespace and are deleted
//! after). `-- --workers <n>` and `-- --rounds <n>` change the job's width (default 128) and
//! how many rounds are measured (default 5; the median is printed).
//!
//! Timed, for eto: from the job's server-side apply until its ConfigMap, the last child of
//! the first reconcile (after the ServiceAccount, Role, RoleBinding, Service and every
//! worker), is seen by a watch. For the floor: from the first write until the ConfigMap's
//! write returned. Both include the Secret.
//!
//! Both meet the same cluster: it has GPUs for both jobs, so the scheduler and the kubelets
//! place and start every pod of either (a job whose pods stay pending costs the API server
//! less); each measurement starts once the pods of the one before run, so that neither shares
//! the machine with the other's aftermath; and which of the two goes first alternates from
//! round to round.

use std::sync::Arc;
use std::time::{Duration, Instant};

use eto_api::TrainingJob;
use eto_controller::{Metrics, Settings};
use eto_tests::env::job_yaml;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::{reflector, watcher};

struct Options {
    kubeconfig: Option<String>,
    workers: u32,
    rounds: usize,
}

fn options() -> Options {
    let mut options = Options {
        kubeconfig: None,
        workers: 128,
        rounds: 5,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--kubeconfig" => options.kubeconfig = args.next(),
            "--workers" => {
                options.workers = args.next().and_then(|n| n.parse().ok()).unwrap_or(128)
            }
            "--rounds" => options.rounds = args.next().and_then(|n| n.parse().ok()).unwrap_or(5),
            // `cargo bench` passes `--bench`.
            _ => {}
        }
    }
    options
}

/// A TrainingJob of `workers` one-GPU workers, all needed to run.
fn job(name: &str, workers: u32) -> TrainingJob {
    let yaml = job_yaml(name, workers, workers, "", "Never");
    let mut job: TrainingJob = serde_saphyr::from_str(&yaml).expect("a valid job");
    job.metadata.namespace = Some("default".into());
    job
}

/// Writes what eto's first reconcile of `job` writes, in its order and batches, with a plain
/// client; returns how long it took.
async fn floor(client: &Client, job: &TrainingJob) -> Duration {
    let planned = eto_tests::floor::first_plan(job);
    let started = Instant::now();
    eto_tests::floor::write(client, &planned).await;
    started.elapsed()
}

/// Applies `job` with eto running; returns how long until its ConfigMap was seen.
async fn eto(client: &Client, job: &TrainingJob) -> Duration {
    let name = job.metadata.name.clone().unwrap_or_default();
    let config_maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}-config"));
    let mut seen = watcher::watcher(config_maps, config).boxed();
    // The first event comes once the initial list is in.
    let _ = seen.try_next().await;
    let jobs: Api<TrainingJob> = Api::default_namespaced(client.clone());
    let started = Instant::now();
    jobs.patch(&name, &PatchParams::apply("bench"), &Patch::Apply(job))
        .await
        .expect("the job applies");
    while let Some(event) = seen.try_next().await.expect("the watch runs") {
        if matches!(
            event,
            watcher::Event::Apply(_) | watcher::Event::InitApply(_)
        ) {
            break;
        }
    }
    started.elapsed()
}

/// How long [`settle`] waits for a round's pods to run.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// Waits until `expected` pods of `job` run, so that the scheduler and the kubelets are done
/// with them before the next measurement starts; gives up after [`SETTLE_LIMIT`] (a real
/// cluster may lack the GPUs), saying so.
async fn settle(client: &Client, job: &TrainingJob, expected: usize) {
    let name = job.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let (reader, writer) = reflector::store();
    let config = watcher::Config::default().labels(&format!("training-job-name={name}"));
    // Every event, the end of the first list included: the store shows a list only then.
    let mut changes = std::pin::pin!(reflector(writer, watcher(pods, config)));
    let running = async {
        while changes.try_next().await.expect("the watch runs").is_some() {
            let state = reader.state();
            let running = state.iter().filter(|pod| {
                pod.status
                    .as_ref()
                    .and_then(|status| status.phase.as_deref())
                    == Some("Running")
            });
            if running.count() >= expected {
                return;
            }
        }
    };
    if tokio::time::timeout(SETTLE_LIMIT, running).await.is_err() {
        eprintln!("warning: fewer than {expected} pods of {name} ran within {SETTLE_LIMIT:?}");
    }
}

/// Deletes what a round created and waits until the pods are gone.
async fn clean_up(client: &Client, floor_job: &TrainingJob, eto_job: &TrainingJob) {
    let background = DeleteParams::background();
    let jobs: Api<TrainingJob> = Api::default_namespaced(client.clone());
    let name = eto_job.metadata.name.clone().unwrap_or_default();
    let _ = jobs.delete(&name, &background).await;
    let floor_name = floor_job.metadata.name.clone().unwrap_or_default();
    let selector = format!("training-job-name={floor_name}");
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let _ = pods
        .delete_collection(&background, &ListParams::default().labels(&selector))
        .await;
    for object in ["config", "ssh", "workers", "launcher"] {
        let object = format!("{floor_name}-{object}");
        let _ = Api::<ConfigMap>::default_namespaced(client.clone())
            .delete(&object, &background)
            .await;
        let _ = Api::<Secret>::default_namespaced(client.clone())
            .delete(&object, &background)
            .await;
        let _ = Api::<k8s_openapi::api::core::v1::Service>::default_namespaced(client.clone())
            .delete(&object, &background)
            .await;
        let _ =
            Api::<k8s_openapi::api::core::v1::ServiceAccount>::default_namespaced(client.clone())
                .delete(&object, &background)
                .await;
        let _ = Api::<k8s_openapi::api::rbac::v1::Role>::default_namespaced(client.clone())
            .delete(&object, &background)
            .await;
        let _ = Api::<k8s_openapi::api::rbac::v1::RoleBinding>::default_namespaced(client.clone())
            .delete(&object, &background)
            .await;
    }
    let all = ListParams::default().labels("training-job-name");
    for _ in 0..600 {
        if pods
            .list(&all)
            .await
            .map(|list| list.items.is_empty())
            .unwrap_or(false)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("warning: pods of an earlier round were still there after 60 s");
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

#[tokio::main]
async fn main() {
    let options = options();
    let mut _cluster = None;
    let client = match &options.kubeconfig {
        Some(path) => {
            let kubeconfig =
                kube::config::Kubeconfig::read_from(path).expect("a readable kubeconfig");
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .expect("a usable kubeconfig");
            Client::try_from(config).expect("a client")
        }
        None => {
            // A GPU for every worker of both jobs.
            let nodes = usize::try_from(options.workers.div_ceil(4)).expect("a node count");
            let cluster =
                eto_sim::SimCluster::start(eto_sim::SimConfig::default().gpu_nodes(nodes, 8))
                    .await
                    .expect("the simulated cluster starts");
            let client = cluster.client();
            _cluster = Some(cluster);
            client
        }
    };
    eto_controller::install_crds(&client)
        .await
        .expect("eto's CRDs install");
    let stop = tokio_util::sync::CancellationToken::new();
    let operator = tokio::spawn(eto_controller::run(
        client.clone(),
        Settings {
            instance: Some("bench".into()),
            ..Settings::default()
        },
        Arc::new(Metrics::default()),
        Arc::new(jiff::Timestamp::now),
        stop.clone().cancelled_owned(),
    ));

    let (mut floors, mut etos) = (Vec::new(), Vec::new());
    // The floor writes the workers; eto's job runs its launcher too.
    let workers = usize::try_from(options.workers).expect("a pod count");
    for round in 0..options.rounds {
        let floor_job = job(&format!("floor-{round}"), options.workers);
        let eto_job = job(&format!("eto-{round}"), options.workers);
        if round % 2 == 0 {
            floors.push(floor(&client, &floor_job).await);
            settle(&client, &floor_job, workers).await;
            etos.push(eto(&client, &eto_job).await);
            settle(&client, &eto_job, workers + 1).await;
        } else {
            etos.push(eto(&client, &eto_job).await);
            settle(&client, &eto_job, workers + 1).await;
            floors.push(floor(&client, &floor_job).await);
            settle(&client, &floor_job, workers).await;
        }
        clean_up(&client, &floor_job, &eto_job).await;
    }
    stop.cancel();
    let _ = operator.await;

    let (floor, eto) = (median(floors), median(etos));
    let target = if options.kubeconfig.is_some() {
        "the kubeconfig's cluster"
    } else {
        "eto-sim"
    };
    println!(
        "start-up of a {}-worker TrainingJob against {target}, median of {} rounds:",
        options.workers, options.rounds
    );
    println!(
        "  floor (plain client, same objects, order and batches): {:>8.1} ms",
        floor.as_secs_f64() * 1e3
    );
    println!(
        "  eto (apply of the job to its last child seen):          {:>8.1} ms",
        eto.as_secs_f64() * 1e3
    );
    println!("  ratio: {:.2}", eto.as_secs_f64() / floor.as_secs_f64());
}
