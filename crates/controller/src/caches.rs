//! Wiring the watch caches a reconcile reads, and the triggers their changes send: pods (with
//! an index by controller), Services, ConfigMaps, Secrets, and for the kinds served, the
//! launcher's RBAC objects and ScaleIn and ScaleOut requests (TrainingJobs), launcher Jobs
//! (MPIJobs) and PodGroups (with a gang scheduler). A kind not served gets an empty cache and
//! no watch, and so needs no RBAC. Every watch selects eto's own objects by label (see
//! [`crate::watches`]). Starting the controllers over them is [`crate::controllers`]'s.

use std::pin::Pin;
use std::sync::Arc;

use eto_api::well_known::{MANAGED_BY_LABEL, MANAGER};
use eto_engine::job::{Coordinator, Kind};
use eto_engine::node_warnings::Rules as NodeWarningRules;
use eto_engine::pod_group::GangScheduler;
use eto_engine::scaling::ScalerKind;
use futures::{Stream, StreamExt};
use k8s_openapi::Resource as _;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};
use tokio::sync::watch;

use crate::context::Stores;
use crate::first_lists::Listed;
use crate::metrics::Metrics;
use crate::name_index::name_index;
use crate::observe;
use crate::pod_cache::{PodCache, pod_cache};
use crate::pod_groups;
use crate::resources::{POD_GROUPS, request_resource};
use crate::scope::Scope;
use crate::spec_changes::SpecChanges;
use crate::warned_nodes::{Tracker, WarnedNodes};
use crate::watches::{Watches, dynamic_api};

/// The watch of one kind of scaling request: its kind, resource, cache and events.
pub(crate) type RequestStream = (
    ScalerKind,
    ApiResource,
    Store<DynamicObject>,
    Pin<Box<dyn Stream<Item = Result<DynamicObject, watcher::Error>> + Send>>,
);

/// The caches of a running operator and what their changes send.
pub(crate) struct Caches {
    /// The caches, as reconciles read them.
    pub stores: Stores,
    /// The names of the caches a job's plan needs listed first.
    pub inputs: Vec<&'static str>,
    /// The jobs the changes of their children call to reconcile.
    pub child_triggers: Vec<Pin<Box<dyn Stream<Item = Trigger> + Send>>>,
    /// The watches of ScaleIn and ScaleOut requests, for their controllers.
    pub request_streams: Vec<RequestStream>,
    /// The writers of the job caches, at [`Kind::index`], which the job controllers fill.
    pub job_writers: [reflector::store::Writer<DynamicObject>; Kind::COUNT],
}

/// What the caches are wired for.
pub(crate) struct Served<'a> {
    /// The kinds of job served.
    pub kinds: &'a [Kind],
    /// The gang scheduler, if any, whose PodGroup API may be missing (its jobs then report it,
    /// and the watch keeps retrying so that installing it later is seen).
    pub gang: Option<&'a GangScheduler>,
    /// The node warnings acted on, if any: the Nodes are then watched too.
    pub node_warnings: Option<&'a NodeWarningRules>,
}

/// Starts the watches of every cache `served` needs, in the scope of `watches`.
///
/// # Errors
/// Whether the PodGroup API is served could not be checked: the error of that list.
pub(crate) async fn wire(
    watches: Watches<'_>,
    wanted: Served<'_>,
    metrics: &Arc<Metrics>,
) -> Result<Caches, kube::Error> {
    let Served {
        kinds,
        gang,
        node_warnings,
    } = wanted;
    let Watches {
        client,
        scope,
        changes,
        listed,
    } = watches;
    let any_coordinator =
        |has: fn(Coordinator) -> bool| kinds.iter().any(|kind| has(kind.vocabulary().coordinator));
    let scale_requests = kinds.iter().any(|kind| kind.scaled_by_requests());
    // The caches every job is planned from, and the triggers their changes send.
    let mut inputs = vec![Pod::KIND, Service::KIND, ConfigMap::KIND, Secret::KIND];
    let mut child_triggers = Vec::new();
    let (pods, mut pod_writer) = pod_cache();
    let events = watches.watched::<Pod>(move |event| {
        pod_writer.apply_watcher_event(event);
    });
    // A pod change starts a measurement of how long discovery takes to follow it.
    let seen = Arc::clone(metrics);
    child_triggers.push(
        triggers(events)
            .inspect(move |(kind, job)| {
                let namespace = job.namespace.as_deref().unwrap_or_default();
                seen.pod_changes
                    .seen(kind.vocabulary().name, namespace, &job.name);
            })
            .boxed(),
    );
    let (services, events) = watches.reflected::<Service>();
    child_triggers.push(triggers(events));
    let (config_maps, events) = watches.reflected::<ConfigMap>();
    child_triggers.push(triggers(events));
    let (secrets, events) = watches.reflected::<Secret>();
    child_triggers.push(triggers(events));
    // The caches of some kinds only; a cache no served kind needs stays empty and has no
    // watch (and needs no RBAC for it).
    let (service_accounts, roles, role_bindings) =
        if any_coordinator(|coordinator| coordinator.has_own_rbac) {
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
    let autoscalers = if kinds.iter().any(|kind| kind.autoscaled_by_metrics()) {
        inputs.push(HorizontalPodAutoscaler::KIND);
        let (autoscalers, events) = watches.reflected::<HorizontalPodAutoscaler>();
        child_triggers.push(spec_triggers(events, autoscalers.clone()));
        autoscalers
    } else {
        reflector::store().0
    };
    let launcher_jobs = if any_coordinator(|coordinator| coordinator.runs_in_a_batch_job) {
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
    let (scale_ins, scale_outs) = if scale_requests {
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
    let pod_groups_resource = pod_groups::resource(gang.unwrap_or(&GangScheduler::Volcano));
    let mut pod_groups_missing = false;
    let pod_groups = match gang {
        Some(scheduler) => {
            let served = served(client, scope, &pod_groups_resource).await?;
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

    // Nodes, for the advance warnings of their loss: cluster-wide whatever the scope, and a
    // change looks again at the jobs with pods on the node only when the warning it shows
    // changes (a node's status changes every few seconds).
    let warned_nodes = WarnedNodes::default();
    if let Some(rules) = node_warnings {
        inputs.push(Node::KIND);
        child_triggers.push(warning_triggers(
            client,
            (listed, changes),
            rules.clone(),
            warned_nodes.clone(),
            pods.clone(),
        ));
    }

    let job_writers = Kind::ALL.map(|kind| reflector::store::Writer::new(kind.api_resource()));
    let stores = Stores {
        jobs: job_writers
            .each_ref()
            .map(reflector::store::Writer::as_reader),
        launcher_jobs,
        pods,
        services,
        config_maps,
        secrets,
        service_accounts,
        roles,
        role_bindings,
        autoscalers,
        scale_ins,
        scale_outs,
        scale_ins_by_job,
        scale_outs_by_job,
        pod_groups,
        pod_groups_resource,
        warned_nodes,
        changes: changes.clone(),
    };
    if pod_groups_missing {
        child_triggers.push(every_job_once_listed(listed, POD_GROUPS, &stores));
    }
    Ok(Caches {
        stores,
        inputs,
        child_triggers,
        request_streams,
        job_writers,
    })
}

/// Watches the cluster's Nodes, keeping `warned` (see [`crate::warned_nodes`]); yields the
/// jobs with pods on a node whose warning appeared, changed or was withdrawn.
fn warning_triggers(
    client: &Client,
    watches: (&Listed, &watch::Sender<()>),
    rules: NodeWarningRules,
    warned: WarnedNodes,
    pods: PodCache,
) -> Pin<Box<dyn Stream<Item = Trigger> + Send>> {
    let (listed, changes) = (watches.0.clone(), watches.1.clone());
    let mut tracker = Tracker::new(rules, warned);
    watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
        .filter_map(move |event| {
            listed.observe(Node::KIND, &event);
            let triggers = match &event {
                Ok(event) => {
                    let changed = tracker.apply(event);
                    if !changed.is_empty() {
                        changes.send_replace(());
                    }
                    changed
                        .iter()
                        .flat_map(|node| pods.on_node(node))
                        .filter_map(|pod| owner_trigger(&pod.metadata))
                        .collect()
                }
                Err(error) => {
                    tracing::warn!(%error, "node watch error; retrying");
                    Vec::new()
                }
            };
            std::future::ready(Some(futures::stream::iter(triggers)))
        })
        .flatten()
        .boxed()
}

/// A job to reconcile because one of its children changed.
pub(crate) type Trigger = (Kind, ObjectRef<DynamicObject>);

/// The job whose reconcile a change of the child with `metadata` calls for: its controller
/// owner, or for the pod of a launcher Job (owned by the Job; an MPIJob's), the job its label
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
        ("batch", "Job") => {
            // The pod of a launcher Job: its job is of the kind whose launcher runs in one.
            let kind = Kind::ALL
                .into_iter()
                .find(|kind| kind.vocabulary().coordinator.runs_in_a_batch_job)?;
            let name = metadata
                .labels
                .as_ref()?
                .get(kind.vocabulary().job_name_label)?;
            (kind, name.as_str())
        }
        (group, kind) => (Kind::of_api(group, kind)?, owner.name.as_str()),
    };
    Some((
        kind,
        ObjectRef::new_with(name, kind.api_resource()).within(namespace),
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
        let jobs: Vec<Trigger> = Kind::ALL
            .into_iter()
            .flat_map(|kind| {
                let resource = kind.api_resource();
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

/// The jobs whose reconcile the changes in `stream` call for, as [`triggers`] finds them, of
/// children whose status another controller writes often: only a new child, a change of its
/// spec, or its deletion (see [`SpecChanges`]). `cache` is the cache the stream fills, which shows a deleted child
/// gone by the time the stream yields it.
fn spec_triggers<K>(
    stream: impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    cache: Store<K>,
) -> Pin<Box<dyn Stream<Item = Trigger> + Send>>
where
    K: Resource<DynamicType = ()> + serde::Serialize + Clone + Send + Sync + 'static,
{
    let mut changes = SpecChanges::default();
    triggers(stream.filter(move |changed| {
        let calls_for_reconcile = changed.as_ref().map_or(true, |object| {
            let gone = cache.get(&ObjectRef::from_obj(object)).is_none();
            let spec = serde_json::to_value(object)
                .map(|value| value["spec"].clone())
                .unwrap_or_default();
            changes.calls_for_reconcile(object.meta().uid.as_deref(), &spec, gone)
        });
        std::future::ready(calls_for_reconcile)
    }))
}

/// Whether the objects of `resource` can be listed in every namespace of `scope`: `false`
/// when the cluster does not serve the resource (404, its CRD is not installed).
///
/// # Errors
/// A list failed for another reason (for example RBAC).
pub(crate) async fn served(
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
