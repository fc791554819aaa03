//! Running the TrainingJob controller.

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eto_api::TrainingJob;
use eto_api::well_known::{MANAGED_BY_LABEL, MANAGER};
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::context::{Clock, Context, Stores};
use crate::freshness::CACHE_WAIT;
use crate::metrics::Metrics;
use crate::reconcile::{RECONCILE_TIMEOUT, error_policy, reconcile};
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
/// triggers reconciles of their owners). `changes` is sent to after each update of the cache.
fn reflected<K>(
    client: &Client,
    namespace: Option<&str>,
    changes: &watch::Sender<()>,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
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
    let stream = watcher(api::<K>(client, namespace), config)
        .default_backoff()
        .reflect(writer)
        .inspect(move |_| {
            changes.send_replace(());
        })
        .touched_objects();
    (store, stream)
}

/// Resolves once every cache of children has completed its first list.
///
/// This is the only place that waits for it. kube-runtime's `Store::wait_until_ready` keeps a
/// single waker per store: of several tasks waiting on one store at the same time, only the one
/// that polled last is woken when the list completes, and the others wait forever.
async fn children_listed(stores: Stores) {
    // A store whose writer is gone never becomes ready; the controller is stopping then.
    let _ = futures::join!(
        stores.pods.wait_until_ready(),
        stores.services.wait_until_ready(),
        stores.config_maps.wait_until_ready(),
        stores.secrets.wait_until_ready(),
        stores.service_accounts.wait_until_ready(),
        stores.roles.wait_until_ready(),
        stores.role_bindings.wait_until_ready(),
    );
}

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
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
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
    let job_writer = reflector::store::Writer::new(resource.clone());
    let job_cache = job_writer.as_reader();
    let (pods, pod_events) = reflected::<Pod>(&client, namespace, &changes);
    let (services, service_events) = reflected::<Service>(&client, namespace, &changes);
    let (config_maps, config_map_events) = reflected::<ConfigMap>(&client, namespace, &changes);
    let (secrets, secret_events) = reflected::<Secret>(&client, namespace, &changes);
    let (service_accounts, service_account_events) =
        reflected::<ServiceAccount>(&client, namespace, &changes);
    let (roles, role_events) = reflected::<Role>(&client, namespace, &changes);
    let (role_bindings, role_binding_events) =
        reflected::<RoleBinding>(&client, namespace, &changes);
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
        changes,
    };
    let job_changes = stores.changes.clone();
    let job_watch = watcher(jobs, watcher::Config::default())
        .default_backoff()
        .reflect(job_writer)
        .inspect(move |_| {
            job_changes.send_replace(());
        })
        .applied_objects();
    let listed = children_listed(stores.clone());
    let job_events = futures::stream::once(async move {
        let started = Instant::now();
        listed.await;
        tracing::info!(after = ?started.elapsed(), "the caches of children are filled; watching TrainingJobs");
        job_watch
    })
    .flatten();
    let ctx = Arc::new(Context {
        client: client.clone(),
        stores,
        recorder: Recorder::new(client, reporter),
        clock,
        metrics,
        cache_wait: CACHE_WAIT,
        reconcile_timeout: settings.reconcile_timeout,
    });
    tracing::info!(
        namespace = namespace.unwrap_or("<all>"),
        "eto controller starting"
    );
    Controller::for_stream_with(job_events, job_cache, resource)
        .owns_stream(pod_events)
        .owns_stream(service_events)
        .owns_stream(config_map_events)
        .owns_stream(secret_events)
        .owns_stream(service_account_events)
        .owns_stream(role_events)
        .owns_stream(role_binding_events)
        .with_config(
            controller::Config::default()
                .debounce(settings.debounce)
                .concurrency(settings.concurrency),
        )
        .graceful_shutdown_on(shutdown)
        .run(
            move |job, ctx| in_flight.track(reconcile(job, ctx)),
            error_policy,
            ctx,
        )
        .for_each(|result| async move {
            match result {
                Ok((job, _)) => tracing::debug!(%job, "reconciled"),
                // Failed reconciles are logged by the error policy.
                Err(controller::Error::ReconcilerFailed(..)) => {}
                Err(error) => tracing::warn!(%error, "controller error"),
            }
        })
        .await;
    Ok(())
}
