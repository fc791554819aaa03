//! Carrying out a plan: the only place that writes.
//!
//! Order, and why:
//! 1. The generated SSH Secret, created once (never applied again: its key pair must not
//!    change under running pods).
//! 2. Children, with server-side apply under the field manager `eto`, forced (eto owns them;
//!    an object of the same name that the job does not control is never written, see
//!    [`crate::ownership`]), in the plan's order: the launcher's ServiceAccount, Role and RoleBinding, the worker
//!    Service, new workers, the ConfigMap, then the launcher (which mounts the ConfigMap and
//!    runs as the ServiceAccount). An MPIJob's launcher Job is created instead (its pod
//!    template is immutable: one that exists already is left as it is). Pods are applied
//!    only to create them: the labels and annotations eto shows a pod that exists (the
//!    launcher's hostfile, a worker's notice, the hosts on an MPIJob launcher Job's pod) are
//!    written as a JSON merge patch of its metadata, since a pod's spec cannot change and
//!    the caches do not keep it (see [`crate::cache_trim`]). Pods listed one after another (new
//!    workers, or notices for every worker) are written concurrently, in batches that grow
//!    from one (see [`steps`] and [`batches`]).
//! 3. Deletions (scale-in victims, pods of a failed run, clean-up after the job finished).
//! 4. The job's ScaleIn and ScaleOut requests: the job added to their owners, their status.
//!    A request's status records what it decided (the workers it adds or removes), and the
//!    engine re-derives the job's workers from it; so it is written before the job's status:
//!    an operator stopped between the two carries the request on, where the reverse order
//!    could start a ScaleOut twice.
//! 5. The job's status, with server-side apply of `/status`: written after the children, so
//!    that a failed write of a child leaves the status describing what exists, and the next
//!    reconcile tries again.
//! 6. Events, best effort: a failure to record one is logged, not retried.
//! 7. The deletion of a finished job whose time to live ran out.
//!
//! It returns what the next reconcile must see in the caches (see [`crate::freshness`]).

use eto_api::well_known::{HOSTFILE_ANNOTATION, MANAGER};
use eto_engine::job::Kind;
use eto_engine::kind::ApiStatus;
use eto_engine::plan::{Child, ChildKind, Plan};
use eto_engine::pod_metadata::PodMetadata;
use eto_engine::scaling::{ScalerKind, ScalerStatus, ScalerUpdate};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use serde::Serialize;
use serde_json::json;

use crate::context::Context;
use crate::error::Error;
use crate::freshness::Written;
use crate::kubeai_stop;
use crate::metrics::DecisionLabels;
use crate::ownership::Owner;
use crate::pod_groups;
use crate::resources::{NamespacedObject, request_resource};
use crate::ssh_keys;

/// A custom object eto writes: a job, or one of its requests.
pub struct Target<'a> {
    /// The object as the controller's cache shows it.
    pub object: &'a DynamicObject,
    /// Its resource.
    pub resource: &'a ApiResource,
}

impl Target<'_> {
    fn namespace(&self) -> &str {
        self.object
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.object.metadata.name.as_deref().unwrap_or_default()
    }

    fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), self.namespace(), self.resource)
    }

    /// The job as the owner of its requests: not their controller (a request may already
    /// have one, and only one is allowed), so that they go with the job.
    fn as_owner(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.resource.api_version.clone(),
            kind: self.resource.kind.clone(),
            name: self.name().to_string(),
            uid: self.object.metadata.uid.clone().unwrap_or_default(),
            controller: None,
            block_owner_deletion: None,
        }
    }

    fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.resource.api_version.clone()),
            kind: Some(self.resource.kind.clone()),
            name: self.object.metadata.name.clone(),
            namespace: self.object.metadata.namespace.clone(),
            uid: self.object.metadata.uid.clone(),
            resource_version: self.object.metadata.resource_version.clone(),
            field_path: None,
        }
    }
}

fn params() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

/// Applies one child and counts the write.
async fn apply_one<K>(ctx: &Context, namespace: &str, object: &K) -> Result<(), Error>
where
    K: NamespacedObject + Serialize,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    api.patch(&name, &params(), &Patch::Apply(object))
        .await
        .map_err(|source| Error::Apply {
            kind: K::KIND,
            name,
            source,
        })?;
    ctx.metrics.count_write(K::KIND, "apply");
    Ok(())
}

/// Whether `child` carries host discovery: the job's ConfigMap, or a launcher pod with its
/// hostfile annotation.
pub fn is_discovery_data(child: &Child) -> bool {
    match child {
        Child::ConfigMap(_) => true,
        Child::PodMetadata(change) => change.annotation(HOSTFILE_ANNOTATION).is_some(),
        Child::Pod(pod) => pod
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|annotations| annotations.contains_key(HOSTFILE_ANNOTATION)),
        _ => false,
    }
}

/// Applies `object` once the job may write it (see [`crate::ownership`]): as `store` shows it,
/// or, when the cache lacks it, as a look-up finds it.
async fn apply_checked<K>(
    ctx: &Context,
    namespace: &str,
    object: &K,
    store: &Store<K>,
    owner: &Owner,
) -> Result<(), Error>
where
    K: NamespacedObject + Serialize,
{
    let name = object.meta().name.as_deref().unwrap_or_default();
    match store.get(&ObjectRef::new(name).within(namespace)) {
        Some(cached) => owner.may_write(K::KIND, cached.meta())?,
        None => owner.check_existing::<K>(ctx, namespace, name).await?,
    }
    apply_one(ctx, namespace, object).await
}

/// Whether the API server refused to apply an object over an existing one (409, or 422: a
/// pod's spec cannot change).
fn refused_over_existing(error: &Error) -> bool {
    matches!(error, Error::Apply { source: kube::Error::Api(status), .. } if status.code == 409 || status.code == 422)
}

/// Applies a pod; returns it when it was new (not in the cache), for the caches to show.
async fn apply_pod(
    ctx: &Context,
    namespace: &str,
    pod: &Pod,
    owner: &Owner,
) -> Result<Option<ObjectRef<Pod>>, Error> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let cached_ref = ObjectRef::new(name).within(namespace);
    let cached = ctx.stores.pods.get(&cached_ref);
    if let Some(cached) = &cached {
        owner.may_write("Pod", &cached.metadata)?;
    }
    match apply_one(ctx, namespace, pod).await {
        Ok(()) => Ok(cached.is_none().then_some(cached_ref)),
        Err(refused) if cached.is_none() && refused_over_existing(&refused) => {
            owner.check_existing::<Pod>(ctx, namespace, name).await?;
            Err(refused)
        }
        Err(error) => Err(error),
    }
}

/// The most pod writes in flight at once.
pub const MAX_CONCURRENT_POD_WRITES: usize = 32;

/// One step of writing a plan's children (see [`steps`]).
#[derive(Debug)]
pub enum Step<'a> {
    /// A child written alone, after the steps before it.
    One(&'a Child),
    /// Pods the plan lists one after another (the workers it adds): they do not depend on
    /// each other, and are written together in [`batches`].
    Pods(Vec<&'a Pod>),
    /// Metadata changes of pods the plan lists one after another (the notice shown to every
    /// worker), written together in [`batches`] like new pods.
    PodMetadata(Vec<&'a PodMetadata>),
}

/// The steps that write `children` in the plan's order.
pub fn steps(children: &[Child]) -> Vec<Step<'_>> {
    let mut steps = Vec::new();
    for child in children {
        match (child, steps.last_mut()) {
            (Child::Pod(pod), Some(Step::Pods(pods))) => pods.push(pod.as_ref()),
            (Child::Pod(pod), _) => steps.push(Step::Pods(vec![pod.as_ref()])),
            (Child::PodMetadata(change), Some(Step::PodMetadata(changes))) => changes.push(change),
            (Child::PodMetadata(change), _) => steps.push(Step::PodMetadata(vec![change])),
            (other, _) => steps.push(Step::One(other)),
        }
    }
    steps
}

/// `items` in the batches written together: of one, two, four, ... up to
/// [`MAX_CONCURRENT_POD_WRITES`], as Kubernetes' ReplicaSet and Job controllers create pods,
/// so that a template the API server rejects fails one write, not one per worker.
pub fn batches<T>(items: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    let mut size = 1;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (batch, later) = rest.split_at(size.min(rest.len()));
        rest = later;
        size = (size * 2).min(MAX_CONCURRENT_POD_WRITES);
        Some(batch)
    })
}

/// Carries out `write` for each of `items`, concurrently, in [`batches`]; `done` gets what
/// each write that succeeded returns. A batch with a failed write is the last, and the first
/// failure in it is returned.
async fn write_in_batches<T, R, F>(
    items: &[T],
    write: impl Fn(&T) -> F,
    mut done: impl FnMut(R),
) -> Result<(), Error>
where
    F: Future<Output = Result<R, Error>>,
{
    for batch in batches(items) {
        let results = futures::future::join_all(batch.iter().map(&write)).await;
        let mut failure = None;
        for result in results {
            match result {
                Ok(value) => done(value),
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
        }
        if let Some(error) = failure {
            return Err(error);
        }
    }
    Ok(())
}

/// Applies `pods` concurrently, in [`batches`]. A batch with a failed write is the last: the
/// pods it created are recorded, and the first failure is returned. The next reconcile keeps
/// the pods created and adds the missing ones (see `eto_engine::target_workers`).
async fn apply_pods(
    ctx: &Context,
    namespace: &str,
    pods: &[&Pod],
    owner: &Owner,
    written: &mut Written,
) -> Result<(), Error> {
    write_in_batches(
        pods,
        |pod| apply_pod(ctx, namespace, pod, owner),
        |created| written.created_pods.extend(created),
    )
    .await
}

/// Writes `changes` to the metadata of pods as JSON merge patches, concurrently, in
/// [`batches`]; the first failure ends the writes and is returned. A pod that is gone (or no
/// longer cached) is skipped: the next reconcile plans from what exists.
async fn patch_pods_metadata(
    ctx: &Context,
    namespace: &str,
    changes: &[&PodMetadata],
    owner: &Owner,
) -> Result<(), Error> {
    write_in_batches(
        changes,
        |change| patch_pod_metadata(ctx, namespace, change, owner),
        |()| {},
    )
    .await
}

async fn patch_pod_metadata(
    ctx: &Context,
    namespace: &str,
    change: &PodMetadata,
    owner: &Owner,
) -> Result<(), Error> {
    let cached = ctx
        .stores
        .pods
        .get(&ObjectRef::new(&change.name).within(namespace));
    let Some(cached) = cached else {
        return Ok(());
    };
    owner.may_write("Pod", &cached.metadata)?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let params = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..PatchParams::default()
    };
    match pods
        .patch(&change.name, &params, &Patch::Merge(change.merge_patch()))
        .await
    {
        Ok(_) => {
            ctx.metrics.count_write("Pod", "patch");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(source) => Err(Error::Apply {
            kind: "Pod",
            name: change.name.clone(),
            source,
        }),
    }
}

async fn apply_child(
    ctx: &Context,
    namespace: &str,
    child: &Child,
    owner: &Owner,
    written: &mut Written,
) -> Result<(), Error> {
    let stores = &ctx.stores;
    match child {
        Child::Pod(pod) => apply_pods(ctx, namespace, &[pod.as_ref()], owner, written).await,
        Child::PodMetadata(change) => patch_pods_metadata(ctx, namespace, &[change], owner).await,
        Child::Service(service) => {
            apply_checked(ctx, namespace, service.as_ref(), &stores.services, owner).await
        }
        Child::ConfigMap(config_map) => {
            apply_checked(
                ctx,
                namespace,
                config_map.as_ref(),
                &stores.config_maps,
                owner,
            )
            .await
        }
        Child::ServiceAccount(account) => {
            let store = &stores.service_accounts;
            apply_checked(ctx, namespace, account.as_ref(), store, owner).await
        }
        Child::Role(role) => {
            apply_checked(ctx, namespace, role.as_ref(), &stores.roles, owner).await
        }
        Child::RoleBinding(binding) => {
            let store = &stores.role_bindings;
            apply_checked(ctx, namespace, binding.as_ref(), store, owner).await
        }
        Child::PodGroup(group) => pod_groups::apply(ctx, namespace, group, owner).await,
        Child::Autoscaler(autoscaler) => {
            let store = &stores.autoscalers;
            apply_checked(ctx, namespace, autoscaler.as_ref(), store, owner).await
        }
        Child::LauncherJob(job) => {
            let name = job.metadata.name.clone().unwrap_or_default();
            let jobs: Api<BatchJob> = Api::namespaced(ctx.client.clone(), namespace);
            let params = PostParams {
                field_manager: Some(MANAGER.into()),
                ..PostParams::default()
            };
            match jobs.create(&params, job.as_ref()).await {
                Ok(_) => {
                    ctx.metrics.count_write("Job", "create");
                    written
                        .created_jobs
                        .push(ObjectRef::new(&name).within(namespace));
                    Ok(())
                }
                // Created by an earlier reconcile whose write the cache has not shown yet, or
                // someone else's.
                Err(kube::Error::Api(status)) if status.is_already_exists() => {
                    owner
                        .check_existing::<BatchJob>(ctx, namespace, &name)
                        .await
                }
                Err(source) => Err(Error::Apply {
                    kind: "Job",
                    name,
                    source,
                }),
            }
        }
    }
}

/// Deletes one child in the background (a pod with `grace_seconds`, when given) and counts the
/// write; one already gone is not an error.
async fn delete_one<K>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    grace_seconds: Option<i64>,
) -> Result<(), Error>
where
    K: NamespacedObject,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    let params = DeleteParams {
        grace_period_seconds: grace_seconds.and_then(|grace| u32::try_from(grace).ok()),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => {
            ctx.metrics.count_write(K::KIND, "delete");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(source) => Err(Error::Delete {
            kind: K::KIND,
            name: name.into(),
            source,
        }),
    }
}

/// Records an event about `target`, best effort: a failure is logged, not retried.
pub async fn publish(
    ctx: &Context,
    target: &Target<'_>,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    // Each event is a decision: one log line for it, in the reconcile's span.
    match type_ {
        EventType::Warning => tracing::warn!(object = target.name(), reason, action, "{note}"),
        EventType::Normal => tracing::info!(object = target.name(), reason, action, "{note}"),
    }
    let published = ctx
        .events
        .publish(&target.reference(), type_, reason, action, note)
        .await;
    if let Err(error) = published {
        tracing::warn!(namespace = target.namespace(), name = target.name(), %error, reason, "failed to record an event");
    }
}

/// Writes `update` to the request `target`: makes `owner` (its job) one of its owners, and
/// applies its new status. Returns the request and its resourceVersion before a status write
/// that changed it, for the caches to show.
///
/// # Errors
/// A write failed.
pub async fn request_update(
    ctx: &Context,
    target: &Target<'_>,
    owner: Option<OwnerReference>,
    update: &ScalerUpdate,
) -> Result<Option<(ObjectRef<DynamicObject>, String)>, Error> {
    let api = target.api(&ctx.client);
    let failed = |source| Error::WriteRequest {
        kind: update.kind.as_str(),
        name: update.name.clone(),
        source,
    };
    let header = json!({"apiVersion": target.resource.api_version, "kind": target.resource.kind});
    if let Some(owner) = owner.filter(|_| update.adopt) {
        let mut patch = header.clone();
        patch["metadata"] = json!({"name": update.name, "ownerReferences": [owner]});
        api.patch(&update.name, &params(), &Patch::Apply(&patch))
            .await
            .map_err(failed)?;
        ctx.metrics
            .count_request_write(&target.resource.kind, "apply");
    }
    let Some(status) = &update.status else {
        return Ok(None);
    };
    let mut patch = header;
    patch["status"] = match status {
        ScalerStatus::In(status) => serde_json::to_value(status),
        ScalerStatus::Out(status) => serde_json::to_value(status),
    }
    .map_err(|source| Error::Serialize {
        what: "a request's status",
        source,
    })?;
    let after = api
        .patch_status(&update.name, &params(), &Patch::Apply(&patch))
        .await
        .map_err(failed)?;
    ctx.metrics
        .count_request_write(&target.resource.kind, "apply-status");
    let before = target.object.metadata.resource_version.clone();
    Ok(before
        .filter(|b| after.metadata.resource_version.as_ref() != Some(b))
        .map(|before| {
            (
                ObjectRef::from_obj_with(target.object, target.resource.clone()),
                before,
            )
        }))
}

/// The request of `kind` named `name` in `namespace`, as the caches show it.
fn cached_request(
    ctx: &Context,
    kind: ScalerKind,
    namespace: &str,
    name: &str,
) -> Option<std::sync::Arc<DynamicObject>> {
    let store = match kind {
        ScalerKind::ScaleIn => &ctx.stores.scale_ins,
        ScalerKind::ScaleOut => &ctx.stores.scale_outs,
    };
    store.get(&ObjectRef::new_with(name, request_resource(kind)).within(namespace))
}

/// Carries out `plan` for `job`, of `kind`, writing only children that `owner` controls (see
/// [`crate::ownership`]); see the module documentation for the order. Adds to `written` the
/// writes the caches must show before the job is planned again.
///
/// # Errors
/// The first write that failed; nothing after it is attempted.
pub async fn execute(
    ctx: &Context,
    kind: Kind,
    job: &Target<'_>,
    owner: &Owner,
    plan: Plan,
    written: &mut Written,
) -> Result<(), Error> {
    let client = &ctx.client;
    let namespace = job.namespace();
    if let Some(secret) = plan.create_ssh_secret {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let comment = format!("eto:{namespace}/{}", job.name());
        let secret = ssh_keys::with_new_key_pair(secret, &comment).map_err(Error::GenerateKey)?;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let created = secrets
            .create(
                &PostParams {
                    field_manager: Some(MANAGER.into()),
                    ..PostParams::default()
                },
                &secret,
            )
            .await;
        match created {
            Ok(_) => {
                ctx.metrics.count_write("Secret", "create");
            }
            // Created by an earlier reconcile whose write the cache has not shown yet, or
            // someone else's.
            Err(kube::Error::Api(status)) if status.is_already_exists() => {
                owner
                    .check_existing::<Secret>(ctx, namespace, &name)
                    .await?;
            }
            Err(source) => return Err(Error::CreateSecret { name, source }),
        }
    }
    for step in steps(&plan.apply) {
        match step {
            Step::One(child) => apply_child(ctx, namespace, child, owner, written).await?,
            Step::Pods(pods) => apply_pods(ctx, namespace, &pods, owner, written).await?,
            Step::PodMetadata(changes) => {
                patch_pods_metadata(ctx, namespace, &changes, owner).await?;
            }
        }
    }
    // The notices are written: their stop signals go now, before a deletion, in a task of
    // their own.
    if let Some(client) = ctx.pod_proxy.clone() {
        kubeai_stop::Sender {
            client,
            events: ctx.events.clone(),
            metrics: std::sync::Arc::clone(&ctx.metrics),
        }
        .spawn(kind.vocabulary().name, job.reference(), plan.stops);
    }
    for deletion in &plan.delete {
        match deletion.kind {
            ChildKind::Pod => {
                delete_one::<Pod>(ctx, namespace, &deletion.name, deletion.grace_seconds).await?;
            }
            ChildKind::Service => {
                delete_one::<Service>(ctx, namespace, &deletion.name, None).await?;
            }
            ChildKind::Job => delete_one::<BatchJob>(ctx, namespace, &deletion.name, None).await?,
            ChildKind::PodGroup => pod_groups::delete(ctx, namespace, &deletion.name).await?,
            ChildKind::Autoscaler => {
                delete_one::<HorizontalPodAutoscaler>(ctx, namespace, &deletion.name, None).await?;
            }
        }
    }
    for update in &plan.scalers {
        let Some(request) = cached_request(ctx, update.kind, namespace, &update.name) else {
            // Deleted since it was planned.
            continue;
        };
        let resource = request_resource(update.kind);
        let target = Target {
            object: request.as_ref(),
            resource: &resource,
        };
        if let Some(shown) = request_update(ctx, &target, Some(job.as_owner()), update).await? {
            written.requests.push((update.kind, shown.0, shown.1));
        }
    }
    let jobs = job.api(client);
    if let Some(status) = plan.status {
        let status = ApiStatus::of(kind, job.name(), status);
        let patch = json!({"apiVersion": job.resource.api_version, "kind": job.resource.kind, "status": status});
        let after = jobs
            .patch_status(job.name(), &params(), &Patch::Apply(&patch))
            .await
            .map_err(Error::Status)?;
        ctx.metrics
            .count_request_write(kind.vocabulary().name, "apply-status");
        let before = job.object.metadata.resource_version.clone();
        if let Some(before) = before.filter(|b| after.metadata.resource_version.as_ref() != Some(b))
        {
            let cached = ObjectRef::from_obj_with(job.object, job.resource.clone());
            written.status = Some((kind, cached, before));
        }
    }
    ctx.metrics
        .count_tallies(kind.vocabulary().name, &plan.tallies);
    for event in plan.events {
        ctx.metrics
            .decisions
            .get_or_create(&DecisionLabels {
                kind: kind.vocabulary().name.into(),
                reason: event.reason.clone(),
            })
            .inc();
        let type_ = if event.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        publish(ctx, job, type_, &event.reason, &event.action, event.note).await;
    }
    if plan.delete_job {
        match jobs.delete(job.name(), &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(source) => return Err(Error::DeleteJob(source)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[test]
    fn batches_double_from_one_to_the_limit() {
        let items: Vec<usize> = (0..100).collect();
        let sizes: Vec<usize> = batches(&items).map(<[usize]>::len).collect();
        assert_eq!(sizes, [1, 2, 4, 8, 16, 32, 32, 5]);
        assert_eq!(batches(&items).flatten().count(), 100);
        assert_eq!(batches::<usize>(&[]).count(), 0);
    }

    #[test]
    fn pods_listed_together_make_one_step_and_the_rest_keep_their_order() {
        let pod = |name: &str| {
            Child::Pod(Box::new(Pod {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..ObjectMeta::default()
                },
                ..Pod::default()
            }))
        };
        let config_map = Child::ConfigMap(Box::default());
        let children = [pod("w-0"), pod("w-1"), config_map, pod("launcher")];
        let shown: Vec<Vec<&str>> = steps(&children)
            .iter()
            .map(|step| match step {
                Step::One(child) => vec![child.kind()],
                Step::Pods(pods) => pods
                    .iter()
                    .map(|pod| pod.metadata.name.as_deref().unwrap_or_default())
                    .collect(),
                Step::PodMetadata(changes) => {
                    changes.iter().map(|change| change.name.as_str()).collect()
                }
            })
            .collect();
        assert_eq!(
            shown,
            [vec!["w-0", "w-1"], vec!["ConfigMap"], vec!["launcher"]]
        );
    }
}
