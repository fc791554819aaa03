//! The operator's watches: one per kind of object it plans from, over every namespace of its
//! scope, each trimmed before it is cached (see [`crate::cache_trim`]).
//!
//! Every watch built by [`Watches`] tells the same two parties about each event, after the
//! event has reached its cache: `changes` (which wakes whatever waits for a cache to catch up,
//! see [`crate::freshness`]) and `listed` (which learns when the cache's first list is done).

use std::fmt::Debug;

use eto_api::well_known::{MANAGED_BY_LABEL, MANAGER};
use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::cache_trim::Trim;
use crate::first_lists::Listed;
use crate::name_index::NameIndexWriter;
use crate::scope::{Scope, merged};

/// A kind of object eto creates, and watches by its label: the built-in kinds of a job's
/// children (its PodGroups, which are custom objects, are watched by
/// [`Watches::reflected_custom`]).
pub(crate) trait Managed:
    k8s_openapi::Resource
    + Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Trim
    + Send
    + Sync
    + 'static
{
}

impl Managed for Pod {}
impl Managed for Service {}
impl Managed for ConfigMap {}
impl Managed for Secret {}
impl Managed for ServiceAccount {}
impl Managed for Role {}
impl Managed for RoleBinding {}
impl Managed for BatchJob {}
impl Managed for HorizontalPodAutoscaler {}

/// What every watch of one operator run shares.
#[derive(Clone, Copy)]
pub(crate) struct Watches<'a> {
    /// The client the watches use.
    pub client: &'a Client,
    /// The namespaces watched.
    pub scope: &'a Scope,
    /// Sent to after each event reached its cache.
    pub changes: &'a watch::Sender<()>,
    /// Told when each cache has completed its first list.
    pub listed: &'a Listed,
}

impl Watches<'_> {
    /// A cache of the objects of kind `K` that eto manages, and the stream that fills it and
    /// yields the objects changed; see [`Watches::watched`].
    pub fn reflected<K: Managed>(
        &self,
    ) -> (
        Store<K>,
        impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    ) {
        let (store, mut writer) = reflector::store();
        let stream = self.watched(move |event| writer.apply_watcher_event(event));
        (store, stream)
    }

    /// The objects of kind `K` that eto manages (selected by its managed-by label), trimmed,
    /// each watch event given to `cache`; the stream yields the objects changed. `listed`
    /// knows this cache by `K`'s kind.
    pub fn watched<K: Managed>(
        &self,
        mut cache: impl FnMut(&watcher::Event<K>) + Send + 'static,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static {
        let config = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGER}"));
        let changes = self.changes.clone();
        let listed = self.listed.clone();
        watch_scope(self.scope, config, |namespace| {
            api::<K>(self.client, namespace)
        })
        .modify(K::trim)
        .inspect_ok(move |event| cache(event))
        .inspect(move |event| {
            listed.observe(K::KIND, event);
            changes.send_replace(());
        })
        .touched_objects()
    }

    /// A cache of the custom objects of `resource` that `config` selects, and the stream that
    /// fills it, as [`Watches::reflected`] does for eto's own objects; see
    /// [`Watches::reflect_custom`].
    pub fn reflected_custom(
        &self,
        resource: &ApiResource,
        config: &watcher::Config,
        index: Option<NameIndexWriter<DynamicObject>>,
        cache: &'static str,
    ) -> (
        Store<DynamicObject>,
        impl Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static,
    ) {
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        (
            store,
            self.reflect_custom(writer, resource, config, index, cache),
        )
    }

    /// The custom objects of `resource` that `config` selects, trimmed, each watch event given
    /// to `index`, if any, and then to `writer` (a cache of `resource`); the stream yields the
    /// objects applied. `listed` knows this cache as `cache`.
    pub fn reflect_custom(
        &self,
        writer: reflector::store::Writer<DynamicObject>,
        resource: &ApiResource,
        config: &watcher::Config,
        mut index: Option<NameIndexWriter<DynamicObject>>,
        cache: &'static str,
    ) -> impl Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static {
        let changes = self.changes.clone();
        let listed = self.listed.clone();
        watch_scope(self.scope, config.clone(), |namespace| {
            dynamic_api(self.client, namespace, resource)
        })
        .modify(DynamicObject::trim)
        .inspect_ok(move |event| {
            if let Some(index) = &mut index {
                index.apply_watcher_event(event);
            }
        })
        .reflect(writer)
        .inspect(move |event| {
            listed.observe(cache, event);
            changes.send_replace(());
        })
        .applied_objects()
    }
}

/// The objects of kind `K` in `namespace` (all namespaces when `None`).
fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// The custom objects of `resource` in `namespace` (all namespaces when `None`).
pub(crate) fn dynamic_api(
    client: &Client,
    namespace: Option<&str>,
    resource: &ApiResource,
) -> Api<DynamicObject> {
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// One watch of `api(namespace)` per namespace of `scope` (with the default backoff), merged
/// into the stream of one (see [`merged`]).
pub(crate) fn watch_scope<K>(
    scope: &Scope,
    config: watcher::Config,
    api: impl Fn(Option<&str>) -> Api<K>,
) -> futures::stream::BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let watches = scope
        .watches()
        .into_iter()
        .map(|namespace| watcher(api(namespace), config.clone()).default_backoff())
        .collect();
    merged(watches)
}
