//! Running the controllers: one per kind of job served, and one per kind of scaling request.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eto_api::well_known::{MANAGED_BY_LABEL, MANAGER, MPI_JOB_NAME_LABEL};
use eto_engine::gang::GangScheduler;
use eto_engine::kind::Kind;
use eto_engine::scaling::ScalerKind;
use futures::channel::mpsc;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::Resource as _;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::scheduler::{ScheduleRequest, debounced_scheduler};
use kube::runtime::watcher;
use kube::{Client, Resource};
use tokio::sync::watch;

use crate::apply;
use crate::context::GangSettings;
use crate::context::{Clock, Context, Stores};
use crate::events::EventPublisher;
use crate::freshness::CACHE_WAIT;
use crate::listed::Listed;
use crate::metrics::Metrics;
use crate::name_index::name_index;
use crate::observe;
use crate::pod_cache::pod_cache;
use crate::pod_groups;
use crate::reconcile::{RECONCILE_TIMEOUT, error_policy, reconcile};
use crate::requests::{self, Requests};
use crate::resources::{POD_GROUPS, request_resource};
use crate::scope::Scope;
use crate::shutdown::{InFlight, SHUTDOWN_GRACE};
use crate::watches::{Watches, dynamic_api};

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
    /// The kinds of job served: both by default. Serving TrainingJobs includes their ScaleIn
    /// and ScaleOut requests.
    pub kinds: Vec<Kind>,
    /// The gang scheduler every job gets a PodGroup of; none by default.
    pub gang: Option<GangScheduler>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            scope: Scope::All,
            concurrency: 16,
            debounce: Duration::from_millis(20),
            instance: None,
            reconcile_timeout: RECONCILE_TIMEOUT,
            kinds: vec![Kind::TrainingJob, Kind::MpiJob],
            gang: None,
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
        crd: String,
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
        tracing::info!(after = ?started.elapsed(), kind = kind.name(), "caches filled; watching jobs");
        stream
    })
    .flatten()
}

/// A job to reconcile because one of its children changed.
type Trigger = (Kind, ObjectRef<DynamicObject>);

/// The job whose reconcile a change of the child with `metadata` calls for: its controller
/// owner, or for the pod of an MPIJob's launcher Job (owned by the Job), the MPIJob its label
/// names.
fn owner_trigger(metadata: &ObjectMeta) -> Option<Trigger> {
    let namespace = metadata.namespace.as_deref()?;
    let owner = metadata
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.controller == Some(true))?;
    let group = owner.api_version.split('/').next().unwrap_or_default();
    let (kind, name) = match (group, owner.kind.as_str()) {
        ("kai.alibabacloud.com", "TrainingJob") => (Kind::TrainingJob, owner.name.as_str()),
        ("kubeflow.org", "MPIJob") => (Kind::MpiJob, owner.name.as_str()),
        ("batch", "Job") => (
            Kind::MpiJob,
            metadata.labels.as_ref()?.get(MPI_JOB_NAME_LABEL)?.as_str(),
        ),
        _ => return None,
    };
    Some((
        kind,
        ObjectRef::new_with(name, apply::job_resource(kind)).within(namespace),
    ))
}

/// Every job in `stores`, once `cache` has completed its first list: jobs planned without
/// that cache (a PodGroup API that was not served) are planned again as soon as it is.
fn every_job_once_listed(
    listed: &Listed,
    cache: &'static str,
    stores: &Stores,
) -> Pin<Box<dyn Stream<Item = Trigger> + Send>> {
    let (listed, stores) = (listed.clone(), stores.clone());
    futures::stream::once(async move {
        listed.all(&[cache]).await;
        tracing::info!(cache, "now served; every job is planned again");
        let jobs: Vec<Trigger> = [Kind::TrainingJob, Kind::MpiJob]
            .into_iter()
            .flat_map(|kind| {
                let resource = apply::job_resource(kind);
                stores.jobs(kind).state().into_iter().map(move |job| {
                    (
                        kind,
                        ObjectRef::from_obj_with(job.as_ref(), resource.clone()),
                    )
                })
            })
            .collect();
        futures::stream::iter(jobs)
    })
    .flatten()
    .boxed()
}

/// The jobs whose reconcile the changes in `stream` call for.
fn triggers<K>(
    stream: impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) -> Pin<Box<dyn Stream<Item = Trigger> + Send>>
where
    K: Resource + Send + 'static,
{
    stream
        .filter_map(|changed| async move {
            match changed {
                Ok(object) => owner_trigger(object.meta()),
                Err(error) => {
                    tracing::warn!(%error, "watch error; retrying");
                    None
                }
            }
        })
        .boxed()
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

/// Whether the objects of `resource` can be listed in every namespace of `scope`: `false`
/// when the cluster does not serve the resource (404, its CRD is not installed).
///
/// # Errors
/// A list failed for another reason (for example RBAC).
async fn served(
    client: &Client,
    scope: &Scope,
    resource: &ApiResource,
) -> Result<bool, kube::Error> {
    for namespace in scope.watches() {
        let objects = dynamic_api(client, namespace, resource);
        match objects.list_metadata(&ListParams::default().limit(1)).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_not_found() || status.code == 404 => {
                return Ok(false);
            }
            Err(error) => return Err(error),
        }
    }
    Ok(true)
}

/// Checks that the jobs of `kind` can be listed in every namespace of `scope`.
async fn check_served(client: &Client, scope: &Scope, kind: Kind) -> Result<(), RunError> {
    let resource = apply::job_resource(kind);
    match served(client, scope, &resource).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(RunError::CrdMissing {
            kind: kind.name(),
            crd: format!("{}.{}", resource.plural, resource.group),
        }),
        Err(source) => Err(RunError::Unreachable {
            kind: kind.name(),
            source,
        }),
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
    let training_jobs = kinds.contains(&Kind::TrainingJob);
    let mpi_jobs = kinds.contains(&Kind::MpiJob);

    let changes = watch::channel(()).0;
    let listed = Listed::default();
    // The caches every job is planned from, and the triggers their changes send.
    let mut inputs = vec![Pod::KIND, Service::KIND, ConfigMap::KIND, Secret::KIND];
    let mut child_triggers = Vec::new();
    let (pods, mut pod_writer) = pod_cache();
    let watches = Watches {
        client: &client,
        scope: &scope,
        changes: &changes,
        listed: &listed,
    };
    let events = watches.watched::<Pod>(move |event| {
        pod_writer.apply_watcher_event(event);
    });
    // A pod change starts a measurement of how long discovery takes to follow it.
    let seen = Arc::clone(&metrics);
    child_triggers.push(
        triggers(events)
            .inspect(move |(kind, job)| {
                let namespace = job.namespace.as_deref().unwrap_or_default();
                seen.pod_changes.seen(kind.name(), namespace, &job.name);
            })
            .boxed(),
    );
    let (services, events) = watches.reflected::<Service>();
    child_triggers.push(triggers(events));
    let (config_maps, events) = watches.reflected::<ConfigMap>();
    child_triggers.push(triggers(events));
    let (secrets, events) = watches.reflected::<Secret>();
    child_triggers.push(triggers(events));
    // The caches of one kind only; a kind not served gets an empty cache and no watch (and
    // needs no RBAC for it).
    let (service_accounts, roles, role_bindings) = if training_jobs {
        inputs.extend([ServiceAccount::KIND, Role::KIND, RoleBinding::KIND]);
        let (accounts, events) = watches.reflected::<ServiceAccount>();
        child_triggers.push(triggers(events));
        let (roles, events) = watches.reflected::<Role>();
        child_triggers.push(triggers(events));
        let (bindings, events) = watches.reflected::<RoleBinding>();
        child_triggers.push(triggers(events));
        (accounts, roles, bindings)
    } else {
        (
            reflector::store().0,
            reflector::store().0,
            reflector::store().0,
        )
    };
    let launcher_jobs = if mpi_jobs {
        inputs.push(BatchJob::KIND);
        let (jobs, events) = watches.reflected::<BatchJob>();
        child_triggers.push(triggers(events));
        jobs
    } else {
        reflector::store().0
    };
    let scale_in_resource = request_resource(ScalerKind::ScaleIn);
    let scale_out_resource = request_resource(ScalerKind::ScaleOut);
    let mut request_streams = Vec::new();
    let (scale_ins_by_job, scale_in_index) = name_index(observe::selected_job);
    let (scale_outs_by_job, scale_out_index) = name_index(observe::selected_job);
    let (scale_ins, scale_outs) = if training_jobs {
        inputs.extend([ScalerKind::ScaleIn.as_str(), ScalerKind::ScaleOut.as_str()]);
        let (scale_ins, scale_in_events) = watches.reflected_custom(
            &scale_in_resource,
            &watcher::Config::default(),
            Some(scale_in_index),
            ScalerKind::ScaleIn.as_str(),
        );
        let (scale_outs, scale_out_events) = watches.reflected_custom(
            &scale_out_resource,
            &watcher::Config::default(),
            Some(scale_out_index),
            ScalerKind::ScaleOut.as_str(),
        );
        request_streams.push((
            ScalerKind::ScaleIn,
            scale_in_resource,
            scale_ins.clone(),
            scale_in_events.boxed(),
        ));
        request_streams.push((
            ScalerKind::ScaleOut,
            scale_out_resource,
            scale_outs.clone(),
            scale_out_events.boxed(),
        ));
        (scale_ins, scale_outs)
    } else {
        (
            reflector::store::Writer::new(scale_in_resource).as_reader(),
            reflector::store::Writer::new(scale_out_resource).as_reader(),
        )
    };

    // The jobs' PodGroups, when a gang scheduler is configured. Its PodGroup API is not eto's:
    // when the cluster does not serve it, the operator runs on, its jobs reporting it (see
    // crate::pod_groups), and the watch keeps retrying, so that installing it later is seen.
    let pod_groups_resource =
        pod_groups::resource(settings.gang.as_ref().unwrap_or(&GangScheduler::Volcano));
    let mut pod_groups_missing = false;
    let pod_groups = match &settings.gang {
        Some(scheduler) => {
            let served = served(&client, &scope, &pod_groups_resource)
                .await
                .map_err(|source| RunError::Unreachable {
                    kind: "PodGroup",
                    source,
                })?;
            if served {
                inputs.push(POD_GROUPS);
            } else {
                pod_groups_missing = true;
                tracing::error!(
                    scheduler = scheduler.display_name(),
                    crd = scheduler.crd_name(),
                    "gang scheduling is configured, but the cluster has no CustomResourceDefinition {}: jobs create no pods and report GangSchedulerMissing until it is installed",
                    scheduler.crd_name()
                );
            }
            let config =
                watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGER}"));
            let (groups, events) =
                watches.reflected_custom(&pod_groups_resource, &config, None, POD_GROUPS);
            child_triggers.push(triggers(events));
            groups
        }
        None => reflector::store::Writer::new(pod_groups_resource.clone()).as_reader(),
    };

    let job_writers = [Kind::TrainingJob, Kind::MpiJob]
        .map(|kind| reflector::store::Writer::new(apply::job_resource(kind)));
    let [training_writer, mpi_writer] = job_writers;
    let stores = Stores {
        training_jobs: training_writer.as_reader(),
        mpi_jobs: mpi_writer.as_reader(),
        launcher_jobs,
        pods,
        services,
        config_maps,
        secrets,
        service_accounts,
        roles,
        role_bindings,
        scale_ins,
        scale_outs,
        scale_ins_by_job,
        scale_outs_by_job,
        pod_groups,
        pod_groups_resource,
        changes: changes.clone(),
    };
    if pod_groups_missing {
        child_triggers.push(every_job_once_listed(&listed, POD_GROUPS, &stores));
    }
    let mut shown = Vec::new();
    if training_jobs {
        shown.push((Kind::TrainingJob.name(), stores.training_jobs.clone()));
    }
    if mpi_jobs {
        shown.push((Kind::MpiJob.name(), stores.mpi_jobs.clone()));
    }
    metrics.job_gauges.show(shown);
    let ctx = Arc::new(Context {
        client: client.clone(),
        stores: stores.clone(),
        events: EventPublisher::new(client.clone(), MANAGER, settings.instance.as_deref()),
        clock,
        metrics,
        cache_wait: CACHE_WAIT,
        reconcile_timeout: settings.reconcile_timeout,
        retries: crate::retries::Retries::default(),
        gang: settings.gang.clone().map(|scheduler| GangSettings {
            scheduler,
            listed: listed.clone(),
        }),
    });
    // Requests are not delayed here: a child's change is debounced on its way to the
    // controller (below); a job's own changes are reconciled at once.
    let config = controller::Config::default().concurrency(settings.concurrency);
    tracing::info!(
        namespaces = %scope.describe(),
        kinds = ?kinds.iter().map(|kind| kind.name()).collect::<Vec<_>>(),
        "eto controller starting"
    );

    let mut tasks: Vec<Task> = Vec::new();
    // Changes of children go to the controller of their job's kind.
    let (training_triggers, training_triggered) = mpsc::unbounded::<ObjectRef<DynamicObject>>();
    let (mpi_triggers, mpi_triggered) = mpsc::unbounded::<ObjectRef<DynamicObject>>();
    tasks.push(
        futures::stream::select_all(child_triggers)
            .take_until(shutdown.clone())
            .for_each(move |(kind, job)| {
                let sent = match kind {
                    Kind::TrainingJob => training_triggers.unbounded_send(job),
                    Kind::MpiJob => mpi_triggers.unbounded_send(job),
                };
                // A kind not served has no controller listening.
                drop(sent);
                futures::future::ready(())
            })
            .boxed(),
    );
    // A ScaleIn or ScaleOut of an existing job makes its request controller ask for a
    // reconcile of the job, which carries the request out.
    let (poke, poked) = mpsc::unbounded();
    let mut poked = Some(poked);
    for (kind, writer, triggered) in [
        (Kind::TrainingJob, training_writer, training_triggered),
        (Kind::MpiJob, mpi_writer, mpi_triggered),
    ] {
        if !kinds.contains(&kind) {
            continue;
        }
        let resource = apply::job_resource(kind);
        let watch = watches.reflect_custom(
            writer,
            &resource,
            &watcher::Config::default(),
            None,
            kind.name(),
        );
        let events = after_listed(&listed, kind, inputs.clone(), watch);
        let in_flight = in_flight.clone();
        let triggered = debounced_scheduler(
            triggered.map(|job| ScheduleRequest {
                message: job,
                run_at: tokio::time::Instant::now(),
            }),
            settings.debounce,
        );
        let mut controller =
            Controller::for_stream_with(events, stores.jobs(kind).clone(), resource)
                .reconcile_on(triggered);
        if kind == Kind::TrainingJob
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
                    Arc::clone(&ctx),
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
            job_resource: apply::job_resource(Kind::TrainingJob),
            shared: Arc::clone(&ctx),
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
                        in_flight.track(requests::reconcile(request, requests))
                    },
                    requests::error_policy,
                    requests,
                )
                .for_each(log_result)
                .boxed(),
        );
    }
    futures::future::join_all(tasks).await;
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
