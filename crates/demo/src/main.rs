//! `eto-demo`: eto end to end on a simulated GPU cluster, in one command.
//!
//! It starts a simulated cluster with spot GPU nodes, installs eto's CRDs, runs the operator,
//! submits the TrainingJob `arena submit etjob` renders, follows it to `Running`, has the
//! kubelet evict a worker, then announces the reclaim of every GPU node two minutes
//! ahead, as Karpenter taints a node it is about to take: the job gets a checkpoint notice at
//! once and is suspended while the GPUs still run; the autoscaler adds nodes and the job resumes from its
//! checkpoint. Its pods opt in to the `kubeai` SDK's stop signal, as ACK users' pods do, and a
//! local listener stands in for the SDK to show the stop arriving with the notice. It ends with
//! the `kubectl get events` and `kubectl get trainingjobs` views.

mod kubeai_stand_in;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use eto_api::TrainingJob;
use eto_api::elastic::ElasticPolicy;
use eto_api::job_status::{JobPhase, NoticeKind};
use eto_api::well_known::{KUBEAI_MANAGED_ANNOTATION, KUBEAI_PORT, NOTICE_ANNOTATION, RESUME_ENV};
use eto_controller::{Metrics, Settings};
use eto_sim::nodes::warnings::Warning;
use eto_sim::{KubeletConfig, NodeSpec, SimCluster, SimConfig};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::kubeai_stand_in::StandIn;

/// The TrainingJob the demo submits: what Arena renders for an 8-worker spot job.
const ARENA_JOB: &str = include_str!("../../../examples/arena-etjob.yaml");
const JOB: &str = "elastic-mnist";
/// How long the demo waits for each step.
const STEP: Duration = Duration::from_secs(60);

/// Runs eto end to end on a simulated GPU cluster.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Keep the cluster and the operator running after the demo, for kubectl; Ctrl-C ends it.
    #[arg(long)]
    keep_running: bool,
    /// Where to write the kubeconfig of the simulated cluster.
    #[arg(long, default_value = "eto-demo.kubeconfig")]
    kubeconfig: PathBuf,
    /// Where the operator's log goes (`RUST_LOG` sets its level; `info` by default), so that
    /// the demo's own lines tell the story alone.
    #[arg(long, default_value = "eto-demo.log")]
    log: PathBuf,
}

#[derive(Debug, thiserror::Error)]
enum DemoError {
    #[error("cannot start the simulated cluster: {0}")]
    Start(#[from] eto_sim::StartError),
    #[error("cannot write the kubeconfig: {0}")]
    Write(#[from] std::io::Error),
    #[error("request failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot install the CRDs: {0}")]
    Crds(#[from] eto_controller::CrdError),
    #[error("the example job does not parse: {0}")]
    Example(#[from] serde_saphyr::Error),
    #[error("timed out: {0}")]
    Timeout(&'static str),
    #[error("the simulated cluster refused: {0}")]
    Sim(#[from] eto_sim::errors::ApiError),
}

#[tokio::main]
async fn main() -> ExitCode {
    use tracing_subscriber::prelude::*;
    let args = Args::parse();
    let log = match std::fs::File::create(&args.log) {
        Ok(file) => Arc::new(file),
        Err(error) => {
            eprintln!(
                "eto-demo: cannot write the log {}: {error}",
                args.log.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(log)
                .with_filter(filter)
                .with_filter(eto_controller::pod_proxy::quiet_answers()),
        )
        .init();
    match demo(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("eto-demo: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn demo(args: Args) -> Result<(), DemoError> {
    // The launcher needs no GPU: it lands on the CPU node, which no spot storm takes.
    let config = SimConfig {
        kubelet: KubeletConfig {
            start_delay: Duration::from_millis(400),
            termination_delay: Duration::from_millis(400),
            orphan_gc_delay: Duration::ZERO,
        },
        nodes: vec![
            NodeSpec::gpu("cpu-node", 0),
            NodeSpec::gpu("spot-0", 8),
            NodeSpec::gpu("spot-1", 8),
        ],
        ..SimConfig::default()
    };
    let cluster = SimCluster::start(config).await?;
    std::fs::write(&args.kubeconfig, cluster.kubeconfig())?;
    println!(
        "• simulated cluster at {} with a CPU node and 2 spot nodes of 8 GPUs (kubeconfig: {})",
        cluster.url(),
        args.kubeconfig.display()
    );
    println!("• the operator's log goes to {}", args.log.display());
    let client = cluster.client();

    eto_controller::install_crds(&client).await?;
    println!(
        "• installed the CRDs: {}",
        eto_api::crds()
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>()
            .join(", ")
    );

    let sdk = StandIn::start().await?;
    cluster.forward_every_pod_port(KUBEAI_PORT, sdk.address);

    let stop = CancellationToken::new();
    let operator = tokio::spawn(eto_controller::run(
        client.clone(),
        Settings {
            instance: Some("eto-demo".into()),
            pod_proxy: Some(cluster.config()),
            ..Settings::default()
        },
        Arc::new(Metrics::default()),
        Arc::new(jiff::Timestamp::now),
        stop.clone().cancelled_owned(),
    ));
    println!("• eto is running");

    let mut job: TrainingJob = serde_saphyr::from_str(ARENA_JOB)?;
    // Shorter than the defaults (30 s, 300 s), so that the story fits in a minute.
    job.spec.elastic_policy = Some(ElasticPolicy {
        below_min_seconds: Some(3),
        checkpoint_grace_seconds: Some(5),
        ..ElasticPolicy::default()
    });
    // What `arena submit etjob --annotation job-supervisor.kube-ai.io/managed-by-job-supervisor=true`
    // adds: the pods ask for the kubeai SDK's stop signal.
    let specs = &mut job.spec.et_replica_specs;
    for template in [&mut specs.launcher.template, &mut specs.worker.template] {
        template
            .metadata
            .get_or_insert_default()
            .annotations
            .get_or_insert_default()
            .insert(KUBEAI_MANAGED_ANNOTATION.into(), "true".into());
    }
    let jobs: Api<TrainingJob> = Api::default_namespaced(client.clone());
    jobs.patch(
        JOB,
        &PatchParams::apply("eto-demo").force(),
        &Patch::Apply(&job),
    )
    .await?;
    println!(
        "• submitted TrainingJob {JOB} (examples/arena-etjob.yaml: 8 workers, 1 to 128, one GPU each;\n  elasticPolicy: belowMinSeconds 3, checkpointGraceSeconds 5; pods annotated\n  {KUBEAI_MANAGED_ANNOTATION}: \"true\", a local listener standing in for the SDK)"
    );
    follow(&jobs, |job| {
        phase(job) == Some(JobPhase::Running) && ready(job) == 8
    })
    .await?;
    show_hostfile(&client).await?;

    println!(
        "• the kubelet evicts worker {JOB}-worker-3 (its node runs short of memory; exit code 137)"
    );
    cluster.evict_pod(
        "default",
        &format!("{JOB}-worker-3"),
        "The node was low on resource: memory.",
    )?;
    follow(&jobs, |job| {
        let status = job.status.as_ref();
        ready(job) == 8
            && status.is_some_and(|s| !s.current_workers.iter().any(|w| w.ends_with("-worker-3")))
    })
    .await?;
    show_hostfile(&client).await?;

    println!(
        "• a spot storm: the cloud announces it reclaims both GPU nodes in two minutes\n  (Karpenter's taint karpenter.sh/disrupted; the pods are untouched until then)"
    );
    for node in ["spot-0", "spot-1"] {
        cluster.announce_reclaim(
            node,
            &Warning::karpenter(),
            Duration::from_secs(120),
            Duration::from_secs(20),
        )?;
    }
    follow(&jobs, |job| {
        job.status
            .as_ref()
            .and_then(|s| s.notice.as_ref())
            .is_some_and(|n| n.kind == NoticeKind::Suspend)
    })
    .await?;
    show_notice(&client, "a checkpoint notice").await?;
    show_kubeai_stop(&client, &sdk).await?;
    follow(&jobs, |job| phase(job) == Some(JobPhase::Suspended)).await?;

    println!("• the cluster-autoscaler adds 2 GPU nodes for the pending workers");
    for node in ["autoscaled-0", "autoscaled-1"] {
        cluster.add_node(&NodeSpec::gpu(node, 8))?;
    }
    follow(&jobs, |job| {
        phase(job) == Some(JobPhase::Running) && ready(job) == 8
    })
    .await?;
    show_notice(&client, "the resume notice").await?;

    println!();
    println!("$ kubectl get events");
    print_table(&client, "/api/v1/namespaces/default/events").await?;
    println!();
    println!("$ kubectl get trainingjobs");
    print_table(
        &client,
        "/apis/kai.alibabacloud.com/v1alpha1/namespaces/default/trainingjobs",
    )
    .await?;

    if args.keep_running {
        println!();
        println!(
            "The cluster and eto keep running: KUBECONFIG={} kubectl get tj,pods. Ctrl-C ends.",
            args.kubeconfig.display()
        );
        let _ = tokio::signal::ctrl_c().await;
    }
    stop.cancel();
    let _ = operator.await;
    Ok(())
}

fn phase(job: &TrainingJob) -> Option<JobPhase> {
    job.status.as_ref().and_then(|s| s.phase)
}

fn ready(job: &TrainingJob) -> i32 {
    job.status
        .as_ref()
        .and_then(|s| s.workers.as_ref())
        .map_or(0, |w| w.ready)
}

/// Prints the job's progress as it changes, until `done`.
async fn follow(
    jobs: &Api<TrainingJob>,
    done: impl Fn(&TrainingJob) -> bool,
) -> Result<(), DemoError> {
    let updates = watcher(
        jobs.clone(),
        watcher::Config::default().fields(&format!("metadata.name={JOB}")),
    )
    .applied_objects();
    let mut updates = std::pin::pin!(updates);
    let mut last = String::new();
    let followed = tokio::time::timeout(STEP, async {
        while let Some(Ok(job)) = updates.next().await {
            let Some(status) = &job.status else { continue };
            let workers = status.workers.clone().unwrap_or_default();
            let line = format!(
                "  {:<9} {} of {} workers ready, {} pending",
                status.phase.map(|p| format!("{p:?}")).unwrap_or_default(),
                workers.ready,
                workers.desired,
                workers.pending
            );
            if line != last {
                println!("{line}");
                last = line;
            }
            if done(&job) {
                return true;
            }
        }
        false
    });
    match followed.await {
        Ok(true) => Ok(()),
        _ => Err(DemoError::Timeout("the job did not get there in a minute")),
    }
}

/// Prints the launcher's `/etc/edl/notice` and `ETO_RESUME`, once it shows a notice.
async fn show_notice(client: &Client, what: &str) -> Result<(), DemoError> {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let shows =
        |pod: Option<&Pod>| pod.is_some_and(|p| p.annotations().contains_key(NOTICE_ANNOTATION));
    let launcher = tokio::time::timeout(
        STEP,
        await_condition(pods, &format!("{JOB}-launcher"), shows),
    )
    .await
    .map_err(|_| DemoError::Timeout("no notice on the launcher"))?
    .map_err(|_| DemoError::Timeout("no notice on the launcher"))?
    .ok_or(DemoError::Timeout("no launcher"))?;
    let notice = launcher.annotations()[NOTICE_ANNOTATION].clone();
    let resume = launcher
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.env.as_ref())
        .and_then(|env| env.iter().find(|v| v.name == RESUME_ENV))
        .and_then(|v| v.value.clone())
        .unwrap_or_default();
    println!("  {what}: /etc/edl/notice on the launcher holds");
    println!("    {notice}");
    println!("  and its {RESUME_ENV} is {resume}");
    Ok(())
}

/// Prints the event that reports the `kubeai` stop sent with the `Suspend` notice, and how
/// many stops the stand-in SDK heard in all (the reclaimed workers' included).
async fn show_kubeai_stop(client: &Client, sdk: &StandIn) -> Result<(), DemoError> {
    let events: Api<Event> = Api::default_namespaced(client.clone());
    let stop_events = watcher(events, watcher::Config::default())
        .applied_objects()
        .filter_map(|event| async move {
            let message = event.ok()?.message?;
            message
                .starts_with("sent the kubeai stop")
                .then_some(message)
                .filter(|message| message.contains("Suspend notice"))
        });
    let mut stop_events = std::pin::pin!(stop_events);
    let note = tokio::time::timeout(STEP, stop_events.next())
        .await
        .ok()
        .flatten()
        .ok_or(DemoError::Timeout("no kubeai stop event"))?;
    println!("  and the kubeai SDK's stop: {note}");
    println!(
        "  (the stand-in SDK has heard {} GET /stop in all)",
        sdk.stops_heard()
    );
    Ok(())
}

async fn show_hostfile(client: &Client) -> Result<(), DemoError> {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let launcher = tokio::time::timeout(
        STEP,
        await_condition(pods, &format!("{JOB}-launcher"), |pod: Option<&Pod>| {
            pod.is_some()
        }),
    )
    .await
    .map_err(|_| DemoError::Timeout("no launcher"))?
    .map_err(|_| DemoError::Timeout("no launcher"))?;
    let hostfile = launcher
        .and_then(|pod| {
            pod.annotations()
                .get(eto_api::well_known::HOSTFILE_ANNOTATION)
                .cloned()
        })
        .unwrap_or_default();
    println!("  /etc/edl/discover_hosts.sh on the launcher prints:");
    for line in hostfile.lines() {
        println!("    {line}");
    }
    Ok(())
}

/// Prints the Table the API server returns for `path`, as kubectl does.
async fn print_table(client: &Client, path: &str) -> Result<(), DemoError> {
    let request = http::Request::get(path)
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .map_err(|_| DemoError::Timeout("an invalid request"))?;
    let table: Value =
        serde_json::from_str(&client.request_text(request).await?).unwrap_or_default();
    let columns: Vec<(usize, String)> = table["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| c["priority"].as_i64().unwrap_or(0) == 0)
        .map(|(i, c)| (i, c["name"].as_str().unwrap_or_default().to_uppercase()))
        .collect();
    let rows: Vec<Vec<String>> = table["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| {
            columns
                .iter()
                .map(|(i, _)| match &row["cells"][*i] {
                    Value::Null => String::new(),
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(c, (_, header))| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([header.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let render = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect::<Vec<_>>()
            .join("   ")
            .trim_end()
            .to_string()
    };
    println!(
        "{}",
        render(columns.iter().map(|(_, h)| h.as_str()).collect())
    );
    for row in &rows {
        println!("{}", render(row.iter().map(String::as_str).collect()));
    }
    Ok(())
}
