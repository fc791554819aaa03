//! Running the TrainingJob controller.

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eto_api::TrainingJob;
use eto_api::well_known::{MANAGED_BY_LABEL, MANAGER};
use eto_engine::scaling::ScalerKind;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::Resource as _;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::apply;
use crate::context::{Clock, Context, Stores};
use crate::freshness::CACHE_WAIT;
use crate::listed::Listed;
use crate::metrics::Metrics;
use crate::reconcile::{RECONCILE_TIMEOUT, error_policy, reconcile};
use crate::requests::{self, Requests};
use crate::shutdown::{InFlight, SHUTDOWN_GRACE};

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Only jobs (and children) in this namespace; all namespaces when `None`.
    pub namespace: Option<String>,
    /// Jobs reconciled at the same time.
    pub concurrency: u16,
    /// Changes within this window are handled by one reconcile.
    pub debounce: Duration,
    /// Name of this operator instance in events (for example its pod name).
    pub instance: Option<String>,
    /// How long one reconcile may take before it is abandoned, logged as an error and retried.
    pub reconcile_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            concurrency: 16,
            debounce: Duration::from_millis(20),
            instance: None,
            reconcile_timeout: RECONCILE_TIMEOUT,
        }
    }
}

/// Why the controller did not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The TrainingJob API is not served.
    #[error(
        "cannot list TrainingJobs ({0}); is the CRD installed? Install it with `eto-operator crd | kubectl apply --server-side -f -`"
    )]
    CrdMissing(#[source] kube::Error),
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// A cache of the objects of kind `K` that eto manages, and the stream that fills it (and
/// triggers reconciles of their owners). `changes` is sent to after each update of the cache;
/// `listed` is told when its first list is done.
fn reflected<K>(
    client: &Client,
    namespace: Option<&str>,
    changes: &watch::Sender<()>,
    listed: &Listed,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: k8s_openapi::Resource
        + Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    let (store, writer) = reflector::store();
    let config = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGER}"));
    let changes = changes.clone();
    let listed = listed.clone();
    let stream = watcher(api::<K>(client, namespace), config)
        .default_backoff()
        .reflect(writer)
        .inspect(move |event| {
            listed.observe(K::KIND, event);
            changes.send_replace(());
        })
        .touched_objects();
    (store, stream)
}

/// A cache of the custom objects of `resource` (all of them: users create them), and the stream
/// that fills it, as [`reflected`] does for eto's own objects.
fn reflected_custom(
    client: &Client,
    namespace: Option<&str>,
    resource: &ApiResource,
    changes: &watch::Sender<()>,
    listed: &Listed,
    cache: &'static str,
) -> (
    Store<DynamicObject>,
    impl Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static,
) {
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let changes = changes.clone();
    let listed = listed.clone();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .inspect(move |event| {
            listed.observe(cache, event);
            changes.send_replace(());
        })
        .applied_objects();
    (store, stream)
}

/// `stream`, held back until `caches` have completed their first list.
fn after_listed<S: Stream + Send + 'static>(
    listed: &Listed,
    caches: &'static [&'static str],
    stream: S,
) -> impl Stream<Item = S::Item> + Send + 'static {
    let listed = listed.clone();
    futures::stream::once(async move {
        let started = Instant::now();
        listed.all(caches).await;
        tracing::info!(after = ?started.elapsed(), "caches filled; watching TrainingJobs");
        stream
    })
    .flatten()
}

/// The caches a job is planned from, besides the TrainingJobs.
const JOB_INPUTS: &[&str] = &[
    Pod::KIND,
    Service::KIND,
    ConfigMap::KIND,
    Secret::KIND,
    ServiceAccount::KIND,
    Role::KIND,
    RoleBinding::KIND,
    ScalerKind::ScaleIn.as_str(),
    ScalerKind::ScaleOut.as_str(),
];

/// The name [`Listed`] knows the TrainingJob cache by.
pub const JOBS: &str = "TrainingJob";

/// Runs the controller until `shutdown` resolves.
///
/// # Guarantees
/// - No job is planned before every cache has completed its first list: planned from a cache
///   that has not listed yet, a job's workers would look lost. The TrainingJob watch is held
///   back until then, so reconciles never have to wait for it, and jobs that already exist
///   when the controller starts are all reconciled as soon as the caches are filled.
/// - Once `shutdown` resolves, no reconcile starts, and this returns as soon as none is under
///   way, or after [`SHUTDOWN_GRACE`], abandoning those still under way (see
///   [`crate::shutdown`]). So the controller stops within [`SHUTDOWN_GRACE`] of the signal.
///
/// # Errors
/// The TrainingJob CRD is not installed (checked once at start).
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    clock: Clock,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), RunError> {
    let shutdown = shutdown.shared();
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
    tracing::info!("eto controller stopped");
    result
}

async fn run_until(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    clock: Clock,
    in_flight: InFlight,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) -> Result<(), RunError> {
    let namespace = settings.namespace.as_deref();
    let resource = ApiResource::erase::<TrainingJob>(&());
    let jobs: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    jobs.list_metadata(&ListParams::default().limit(1))
        .await
        .map_err(RunError::CrdMissing)?;

    let changes = watch::channel(()).0;
    let listed = Listed::default();
    let job_writer = reflector::store::Writer::new(resource.clone());
    let job_cache = job_writer.as_reader();
    let (pods, pod_events) = reflected::<Pod>(&client, namespace, &changes, &listed);
    let (services, service_events) = reflected::<Service>(&client, namespace, &changes, &listed);
    let (config_maps, config_map_events) =
        reflected::<ConfigMap>(&client, namespace, &changes, &listed);
    let (secrets, secret_events) = reflected::<Secret>(&client, namespace, &changes, &listed);
    let (service_accounts, service_account_events) =
        reflected::<ServiceAccount>(&client, namespace, &changes, &listed);
    let (roles, role_events) = reflected::<Role>(&client, namespace, &changes, &listed);
    let (role_bindings, role_binding_events) =
        reflected::<RoleBinding>(&client, namespace, &changes, &listed);
    let scale_in_resource = apply::request_resource(ScalerKind::ScaleIn);
    let scale_out_resource = apply::request_resource(ScalerKind::ScaleOut);
    let (scale_ins, scale_in_events) = reflected_custom(
        &client,
        namespace,
        &scale_in_resource,
        &changes,
        &listed,
        ScalerKind::ScaleIn.as_str(),
    );
    let (scale_outs, scale_out_events) = reflected_custom(
        &client,
        namespace,
        &scale_out_resource,
        &changes,
        &listed,
        ScalerKind::ScaleOut.as_str(),
    );
    let reporter = Reporter {
        controller: MANAGER.into(),
        instance: settings.instance.clone(),
    };
    let stores = Stores {
        jobs: job_cache.clone(),
        pods,
        services,
        config_maps,
        secrets,
        service_accounts,
        roles,
        role_bindings,
        scale_ins: scale_ins.clone(),
        scale_outs: scale_outs.clone(),
        changes,
    };
    let job_changes = stores.changes.clone();
    let job_listed = listed.clone();
    let job_watch = watcher(jobs, watcher::Config::default())
        .default_backoff()
        .reflect(job_writer)
        .inspect(move |event| {
            job_listed.observe(JOBS, event);
            job_changes.send_replace(());
        })
        .applied_objects();
    let job_events = after_listed(&listed, JOB_INPUTS, job_watch);
    let ctx = Arc::new(Context {
        client: client.clone(),
        stores,
        recorder: Recorder::new(client, reporter),
        clock,
        metrics,
        cache_wait: CACHE_WAIT,
        reconcile_timeout: settings.reconcile_timeout,
    });
    let config = controller::Config::default()
        .debounce(settings.debounce)
        .concurrency(settings.concurrency);
    tracing::info!(
        namespace = namespace.unwrap_or("<all>"),
        "eto controller starting"
    );
    // A ScaleIn or ScaleOut of an existing job makes its request controller ask for a
    // reconcile of the job, which carries the request out.
    let (poke, poked) = futures::channel::mpsc::unbounded();
    let job_in_flight = in_flight.clone();
    let job_controller = Controller::for_stream_with(job_events, job_cache, resource.clone())
        .owns_stream(pod_events)
        .owns_stream(service_events)
        .owns_stream(config_map_events)
        .owns_stream(secret_events)
        .owns_stream(service_account_events)
        .owns_stream(role_events)
        .owns_stream(role_binding_events)
        .reconcile_on(poked)
        .with_config(config.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(
            move |job, ctx| job_in_flight.track(reconcile(job, ctx)),
            error_policy,
            Arc::clone(&ctx),
        )
        .for_each(log_result);
    let request_controller = |kind: ScalerKind, api_resource: ApiResource, store, events| {
        let in_flight = in_flight.clone();
        let requests = Arc::new(Requests {
            kind,
            resource: api_resource.clone(),
            job_resource: resource.clone(),
            shared: Arc::clone(&ctx),
            poke: poke.clone(),
            listed: listed.clone(),
        });
        // Not held back: this watch fills a cache the job controller waits for.
        Controller::for_stream_with(events, store, api_resource)
            .with_config(config.clone())
            .graceful_shutdown_on(shutdown.clone())
            .run(
                move |request, requests| in_flight.track(requests::reconcile(request, requests)),
                requests::error_policy,
                requests,
            )
            .for_each(log_result)
    };
    let scale_in_controller = request_controller(
        ScalerKind::ScaleIn,
        scale_in_resource,
        scale_ins,
        scale_in_events,
    );
    let scale_out_controller = request_controller(
        ScalerKind::ScaleOut,
        scale_out_resource,
        scale_outs,
        scale_out_events,
    );
    futures::join!(job_controller, scale_in_controller, scale_out_controller);
    Ok(())
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
