//! Running the controllers: one per kind of job served, and one per kind of scaling request.
//!
//! [`run`] checks that the CRDs of the kinds to serve are installed, has the caches wired
//! (see `caches`), builds the reconciles' [`Context`] and starts the controllers over them; it
//! stops them within the shutdown grace period once asked.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eto_api::well_known::MANAGER;
use eto_engine::job::Kind;
use eto_engine::pod_group::GangScheduler;
use futures::channel::mpsc;
use futures::{FutureExt, Stream, StreamExt};
use kube::Client;
use kube::api::DynamicObject;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::scheduler::{ScheduleRequest, debounced_scheduler};
use kube::runtime::watcher;
use tokio::sync::watch;

use crate::caches::{self, Caches, served};
use crate::context::GangSettings;
use crate::context::{Clock, Context};
use crate::events::EventPublisher;
use crate::first_lists::Listed;
use crate::freshness::CACHE_WAIT;
use crate::metrics::Metrics;
use crate::reconcile::{RECONCILE_TIMEOUT, error_policy, reconcile};
use crate::scale_requests::{self, Requests};
use crate::scope::Scope;
use crate::shutdown::{InFlight, SHUTDOWN_GRACE};
use crate::watches::Watches;

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The namespaces of the jobs (and children) eto manages.
    pub scope: Scope,
    /// Jobs reconciled at the same time.
    pub concurrency: u16,
    /// Changes of a job's children (its pods going ready, failing, being reclaimed) within
    /// this window are handled by one reconcile of the job. A change of the job itself is
    /// reconciled at once: a new job's children are written without waiting out a window.
    pub debounce: Duration,
    /// Name of this operator instance in events (for example its pod name).
    pub instance: Option<String>,
    /// How long one reconcile may take before it is abandoned, logged as an error and retried.
    pub reconcile_timeout: Duration,
    /// The kinds of job served: every kind by default (the `eto-operator` binary serves
    /// TrainingJob and MPIJob unless told otherwise). Serving TrainingJobs includes their ScaleIn
    /// and ScaleOut requests.
    pub kinds: Vec<Kind>,
    /// The gang scheduler every job gets a PodGroup of; none by default.
    pub gang: Option<GangScheduler>,
    /// How eto reaches pods through the API server's pod proxy, for the `kubeai` SDK's stop
    /// signal (see [`crate::kubeai_stop`]): the configuration of the operator's client, from which
    /// a client that does not retry is made (a `503` of the pod proxy is the pod's answer).
    /// `None` sends no stop signals.
    pub pod_proxy: Option<kube::Config>,
    /// The advance warnings of node losses eto watches Nodes for and acts on (see
    /// [`eto_engine::node_warnings`]): the well-known ones by default. `None` watches no
    /// Nodes (and needs no RBAC on them).
    pub node_warnings: Option<eto_engine::node_warnings::Rules>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            scope: Scope::All,
            concurrency: 16,
            debounce: Duration::from_millis(20),
            instance: None,
            reconcile_timeout: RECONCILE_TIMEOUT,
            kinds: Kind::ALL.to_vec(),
            gang: None,
            pod_proxy: None,
            node_warnings: Some(eto_engine::node_warnings::Rules::default()),
        }
    }
}

/// Why the controller did not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The API of a kind to serve is not installed.
    #[error(
        "the {kind} API is not installed: the cluster has no CustomResourceDefinition {crd}. Install eto's CRDs with `eto-operator crd | kubectl apply --server-side -f -`, or serve only the other kinds (--kinds)"
    )]
    CrdMissing {
        /// The kind.
        kind: &'static str,
        /// The name of its CRD.
        crd: &'static str,
    },
    /// The jobs of a kind to serve cannot be listed for another reason.
    #[error("cannot list {kind}s: {source}")]
    Unreachable {
        /// The kind.
        kind: &'static str,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// No kind of job to serve.
    #[error("no kind of job to serve")]
    NothingToServe,
    /// The client of the pod proxy could not be made from its configuration.
    #[error("cannot make the pod proxy's client: {0}")]
    PodProxy(#[source] kube::Error),
    /// Leader election cannot run: invalid timings, or no usable Lease.
    #[error("leader election: {0}")]
    Election(String),
    /// This replica led and lost its Lease; it stopped at once.
    #[error("lost leadership ({0}); exiting so that this replica restarts as a standby")]
    LostLease(String),
}

/// `stream` of `kind`'s jobs, held back until `caches` have completed their first list.
fn after_listed<S: Stream + Send + 'static>(
    listed: &Listed,
    kind: Kind,
    caches: Vec<&'static str>,
    stream: S,
) -> impl Stream<Item = S::Item> + Send + 'static {
    let listed = listed.clone();
    futures::stream::once(async move {
        let started = Instant::now();
        listed.all(&caches).await;
        tracing::info!(after = ?started.elapsed(), kind = kind.vocabulary().name, "caches filled; watching jobs");
        stream
    })
    .flatten()
}

/// Runs the controllers until `shutdown` resolves.
///
/// # Guarantees
/// - No job is planned before every cache has completed its first list: planned from a cache
///   that has not listed yet, a job's workers would look lost. The job watches are held back
///   until then, so reconciles never have to wait for them, and jobs that already exist when
///   the controller starts are all reconciled as soon as the caches are filled.
/// - Once `shutdown` resolves, no reconcile starts, and this returns as soon as none is under
///   way, or after [`SHUTDOWN_GRACE`], abandoning those still under way (see
///   [`crate::shutdown`]). So the controller stops within [`SHUTDOWN_GRACE`] of the signal.
///
/// # Errors
/// The CRD of a kind to serve is not installed, or its jobs cannot be listed (checked once at
/// start).
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    clock: Clock,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), RunError> {
    let shutdown = shutdown.shared();
    metrics.leader.set(1);
    let gauges = Arc::clone(&metrics.job_gauges);
    let in_flight = InFlight::default();
    let controller = run_until(
        client,
        settings,
        metrics,
        clock,
        in_flight.clone(),
        shutdown.clone(),
    );
    let result = tokio::select! {
        result = controller => result,
        abandoned = in_flight.settled_after(shutdown) => {
            if abandoned {
                tracing::warn!(
                    grace = ?SHUTDOWN_GRACE,
                    "reconciles still under way after the shutdown grace period were abandoned; the next start completes them"
                );
            }
            Ok(())
        }
    };
    gauges.clear();
    tracing::info!("eto controller stopped");
    result
}

/// How many times a start-up check of a kind is tried when the API server answers with an
/// error it may not give again (a 5xx, a 429, no answer), and the wait before the first retry
/// (doubled after each).
const CHECK_ATTEMPTS: u32 = 6;
const CHECK_FIRST_RETRY: std::time::Duration = std::time::Duration::from_millis(250);

/// Checks that the jobs of `kind` can be listed in every namespace of `scope`. A transient
/// error (the API server restarting or overloaded) is retried a few times rather than ending
/// the operator's start: the pod would otherwise restart for nothing.
async fn check_served(client: &Client, scope: &Scope, kind: Kind) -> Result<(), RunError> {
    let resource = kind.api_resource();
    let mut wait = CHECK_FIRST_RETRY;
    let mut attempt = 1;
    let found = loop {
        match served(client, scope, &resource).await {
            Err(error) if attempt < CHECK_ATTEMPTS && transient(&error) => {
                tracing::warn!(kind = kind.vocabulary().name, %error, "cannot list the kind's jobs yet; retrying");
                tokio::time::sleep(wait).await;
                wait *= 2;
                attempt += 1;
            }
            found => break found,
        }
    };
    match found {
        Ok(true) => Ok(()),
        Ok(false) => Err(RunError::CrdMissing {
            kind: kind.vocabulary().name,
            crd: kind.vocabulary().resource,
        }),
        Err(source) => Err(RunError::Unreachable {
            kind: kind.vocabulary().name,
            source,
        }),
    }
}

/// Whether `error` may not happen again: the API server failed (5xx), throttled (429) or did
/// not answer.
fn transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

async fn run_until(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    clock: Clock,
    in_flight: InFlight,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) -> Result<(), RunError> {
    let scope = settings.scope.clone();
    let mut kinds = settings.kinds.clone();
    kinds.dedup();
    if kinds.is_empty() {
        return Err(RunError::NothingToServe);
    }
    for kind in &kinds {
        check_served(&client, &scope, *kind).await?;
    }
    let changes = watch::channel(()).0;
    let listed = Listed::default();
    let Caches {
        stores,
        inputs,
        child_triggers,
        request_streams,
        job_writers,
    } = caches::wire(
        Watches {
            client: &client,
            scope: &scope,
            changes: &changes,
            listed: &listed,
        },
        caches::Served {
            kinds: &kinds,
            gang: settings.gang.as_ref(),
            node_warnings: settings.node_warnings.as_ref(),
        },
        &metrics,
    )
    .await
    .map_err(|source| RunError::Unreachable {
        kind: "PodGroup",
        source,
    })?;
    let shown = kinds
        .iter()
        .map(|kind| (kind.vocabulary().name, stores.jobs(*kind).clone()))
        .collect();
    metrics.job_gauges.show(shown, clock.clone());
    let pod_proxy = match settings.pod_proxy.clone() {
        Some(mut config) => {
            config.default_retry = false;
            Some(Client::try_from(config).map_err(RunError::PodProxy)?)
        }
        None => None,
    };
    let ctx = Arc::new(Context {
        pod_proxy,
        node_warnings: settings.node_warnings.clone(),
        client: client.clone(),
        stores: stores.clone(),
        events: EventPublisher::new(client.clone(), MANAGER, settings.instance.as_deref()),
        clock,
        metrics,
        cache_wait: CACHE_WAIT,
        reconcile_timeout: settings.reconcile_timeout,
        retries: crate::retries::Retries::default(),
        progress_reads: crate::progress_reads::ProgressReads::default(),
        gang: settings.gang.clone().map(|scheduler| GangSettings {
            scheduler,
            listed: listed.clone(),
        }),
    });
    tracing::info!(
        namespaces = %scope.describe(),
        kinds = ?kinds.iter().map(|kind| kind.vocabulary().name).collect::<Vec<_>>(),
        "eto controller starting"
    );
    let watches = Watches {
        client: &client,
        scope: &scope,
        changes: &changes,
        listed: &listed,
    };
    let tasks = start_controllers(
        Wired {
            inputs,
            child_triggers,
            request_streams,
            job_writers,
        },
        &watches,
        &kinds,
        &settings,
        &ctx,
        &in_flight,
        shutdown,
    );
    futures::future::join_all(tasks).await;
    Ok(())
}

/// What the controllers start from: the caches' names, the triggers of child changes, the
/// request watches and the job caches' writers (see [`crate::caches`]).
struct Wired {
    inputs: Vec<&'static str>,
    child_triggers: Vec<Pin<Box<dyn Stream<Item = caches::Trigger> + Send>>>,
    request_streams: Vec<caches::RequestStream>,
    job_writers: [reflector::store::Writer<DynamicObject>; Kind::COUNT],
}

/// Starts a controller for each kind of job in `kinds` (its jobs' watch held back until the
/// caches have listed), one for each kind of scaling request, and the task that sends child
/// changes to the controller of their job's kind; returns them, to run until `shutdown`.
fn start_controllers(
    wired: Wired,
    watches: &Watches<'_>,
    kinds: &[Kind],
    settings: &Settings,
    ctx: &Arc<Context>,
    in_flight: &InFlight,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) -> Vec<Task> {
    let Wired {
        inputs,
        child_triggers,
        request_streams,
        job_writers,
    } = wired;
    let listed = watches.listed;
    // Requests are not delayed here: a child's change is debounced on its way to the
    // controller (below); a job's own changes are reconciled at once.
    let config = controller::Config::default().concurrency(settings.concurrency);

    let mut tasks: Vec<Task> = Vec::new();
    // Changes of children go to the controller of their job's kind.
    let channels = Kind::ALL.map(|_| mpsc::unbounded::<ObjectRef<DynamicObject>>());
    let (triggers, triggered): (Vec<_>, Vec<_>) = channels.into_iter().unzip();
    tasks.push(
        futures::stream::select_all(child_triggers)
            .take_until(shutdown.clone())
            .for_each(move |(kind, job)| {
                // A kind not served has no controller listening.
                drop(triggers[kind.index()].unbounded_send(job));
                futures::future::ready(())
            })
            .boxed(),
    );
    // A ScaleIn or ScaleOut of an existing job makes its request controller ask for a
    // reconcile of the job, which carries the request out.
    let (poke, poked) = mpsc::unbounded();
    let mut poked = Some(poked);
    for ((kind, writer), triggered) in Kind::ALL.into_iter().zip(job_writers).zip(triggered) {
        if !kinds.contains(&kind) {
            continue;
        }
        let resource = kind.api_resource();
        let watch = watches.reflect_custom(
            writer,
            &resource,
            &watcher::Config::default(),
            None,
            kind.vocabulary().name,
        );
        let events = after_listed(listed, kind, inputs.clone(), watch);
        let in_flight = in_flight.clone();
        let triggered = debounced_scheduler(
            triggered.map(|job| ScheduleRequest {
                message: job,
                run_at: tokio::time::Instant::now(),
            }),
            settings.debounce,
        );
        let mut controller =
            Controller::for_stream_with(events, ctx.stores.jobs(kind).clone(), resource)
                .reconcile_on(triggered);
        if kind.scaled_by_requests()
            && let Some(poked) = poked.take()
        {
            controller = controller.reconcile_on(poked);
        }
        tasks.push(
            controller
                .with_config(config.clone())
                .graceful_shutdown_on(shutdown.clone())
                .run(
                    move |job, ctx| in_flight.track(reconcile(kind, job, ctx)),
                    move |job, error, ctx| error_policy(kind, &job, error, &ctx),
                    Arc::clone(ctx),
                )
                .for_each(log_result)
                .boxed(),
        );
    }
    for (kind, resource, store, events) in request_streams {
        let in_flight = in_flight.clone();
        let requests = Arc::new(Requests {
            kind,
            resource: resource.clone(),
            job_resource: Kind::SCALED_BY_REQUESTS.api_resource(),
            shared: Arc::clone(ctx),
            poke: poke.clone(),
            listed: listed.clone(),
        });
        // Not held back: this watch fills a cache the job controller waits for.
        tasks.push(
            Controller::for_stream_with(events, store, resource)
                .with_config(config.clone())
                .graceful_shutdown_on(shutdown.clone())
                .run(
                    move |request, requests| {
                        in_flight.track(scale_requests::reconcile(request, requests))
                    },
                    scale_requests::error_policy,
                    requests,
                )
                .for_each(log_result)
                .boxed(),
        );
    }
    tasks
}

/// Logs what a controller reports about one object.
async fn log_result(
    result: Result<
        (ObjectRef<DynamicObject>, controller::Action),
        controller::Error<crate::Error, watcher::Error>,
    >,
) {
    match result {
        Ok((object, _)) => tracing::debug!(%object, "reconciled"),
        // Failed reconciles are logged by the error policies.
        Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(error) => tracing::warn!(%error, "controller error"),
    }
}
