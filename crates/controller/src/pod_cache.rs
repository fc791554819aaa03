//! The pod cache, indexed by the uid of each pod's controller (see [`crate::name_index`]), so
//! that a reconcile finds its job's pods without looking at the pods of every other job. Each
//! watch event reaches the index before the cache: once [`crate::freshness`] sees a created pod
//! in the cache, its job's lookups find it too. A pod's delete event also leaves its last state
//! in [`DepartedPods`], for its job's next reconcile.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use crate::departed_pods::DepartedPods;
use crate::name_index::{NameIndex, NameIndexWriter, name_index};

/// The uid of the controller of `pod`, if it has one.
fn controller_uid(pod: &Pod) -> Option<&str> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.controller == Some(true))
        .map(|owner| owner.uid.as_str())
}

/// The pod cache of eto's own pods (launchers and workers), read by reconciles.
#[derive(Clone)]
pub struct PodCache {
    store: Store<Pod>,
    by_controller: NameIndex<Pod>,
    departed: DepartedPods,
}

/// Fills a [`PodCache`] from the pod watch.
pub struct PodCacheWriter {
    writer: Writer<Pod>,
    by_controller: NameIndexWriter<Pod>,
    departed: DepartedPods,
}

/// An empty pod cache and its writer.
pub fn pod_cache() -> (PodCache, PodCacheWriter) {
    let writer = Writer::default();
    let (index, index_writer) = name_index(controller_uid);
    let departed = DepartedPods::default();
    let cache = PodCache {
        store: writer.as_reader(),
        by_controller: index,
        departed: departed.clone(),
    };
    let writer = PodCacheWriter {
        writer,
        by_controller: index_writer,
        departed,
    };
    (cache, writer)
}

impl PodCache {
    /// The cached pod `key`.
    pub fn get(&self, key: &ObjectRef<Pod>) -> Option<Arc<Pod>> {
        self.store.get(key)
    }

    /// The cached pods in `namespace` whose controller has `uid`. The cost is that of the
    /// pods found, not of the cache.
    pub fn controlled_by(&self, namespace: &str, uid: &str) -> Vec<Arc<Pod>> {
        self.by_controller
            .names(namespace, uid)
            .iter()
            .filter_map(|name| self.store.get(&ObjectRef::new(name).within(namespace)))
            .filter(|pod| self.by_controller.has_key(pod, uid))
            .collect()
    }

    /// The last state of the pods in `namespace` whose controller has `uid` that the watch
    /// saw deleted lately (see [`crate::departed_pods`]).
    pub fn departed_from(&self, namespace: &str, uid: &str) -> Vec<Arc<Pod>> {
        self.departed.controlled_by(namespace, uid)
    }
}

impl PodCache {
    /// The cached pods bound to `node`. The cost is that of the whole cache: for the rare
    /// change of a node's warning only.
    pub fn on_node(&self, node: &str) -> Vec<Arc<Pod>> {
        self.store
            .state()
            .into_iter()
            .filter(|pod| eto_engine::pods::node(pod) == Some(node))
            .collect()
    }
}

impl PodCacheWriter {
    /// Applies one watch event to the index, then to the cache; keeps a deleted pod's last
    /// state.
    pub fn apply_watcher_event(&mut self, event: &watcher::Event<Pod>) {
        self.by_controller.apply_watcher_event(event);
        self.writer.apply_watcher_event(event);
        if let watcher::Event::Delete(pod) = event
            && let Some(controller) = controller_uid(pod)
        {
            self.departed
                .record(pod.clone(), controller, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::listed_pods;

    fn pod(name: &str, controller: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "namespace": "default",
                "ownerReferences": [{
                    "apiVersion": "kai.alibabacloud.com/v1alpha1",
                    "kind": "TrainingJob",
                    "name": controller,
                    "uid": controller,
                    "controller": true,
                }],
            },
        }))
        .unwrap()
    }

    fn unowned(name: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}})).unwrap()
    }

    fn names(pods: Vec<Arc<Pod>>) -> Vec<String> {
        let mut names: Vec<_> = pods
            .iter()
            .map(|pod| pod.metadata.name.clone().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn finds_the_pods_of_one_controller_only() {
        let (cache, _) = listed_pods(vec![
            pod("a-0", "a"),
            pod("b-0", "b"),
            pod("a-1", "a"),
            unowned("c"),
        ]);
        assert_eq!(names(cache.controlled_by("default", "a")), ["a-0", "a-1"]);
        assert_eq!(names(cache.controlled_by("default", "b")), ["b-0"]);
        assert!(cache.controlled_by("default", "c").is_empty());
        assert!(cache.get(&ObjectRef::new("c").within("default")).is_some());
    }

    #[test]
    fn follows_applies_and_deletions() {
        let (cache, mut writer) = listed_pods(vec![pod("a-0", "a")]);
        writer.apply_watcher_event(&watcher::Event::Apply(pod("a-1", "a")));
        assert_eq!(names(cache.controlled_by("default", "a")), ["a-0", "a-1"]);
        writer.apply_watcher_event(&watcher::Event::Delete(pod("a-0", "a")));
        assert_eq!(names(cache.controlled_by("default", "a")), ["a-1"]);
        assert_eq!(
            names(cache.departed_from("default", "a")),
            ["a-0"],
            "its last state is kept for its job"
        );
        writer.apply_watcher_event(&watcher::Event::Delete(pod("a-1", "a")));
        assert!(cache.controlled_by("default", "a").is_empty());
        assert!(
            writer.by_controller.is_empty(),
            "a controller without pods leaves no entry behind"
        );
    }

    #[test]
    fn a_pod_recreated_under_another_controller_moves() {
        let (cache, mut writer) = listed_pods(vec![pod("w-0", "a")]);
        writer.apply_watcher_event(&watcher::Event::Delete(pod("w-0", "a")));
        writer.apply_watcher_event(&watcher::Event::Apply(pod("w-0", "b")));
        assert!(cache.controlled_by("default", "a").is_empty());
        assert_eq!(names(cache.controlled_by("default", "b")), ["w-0"]);
        // Even were its controller to change in place, the old one no longer finds it.
        writer.apply_watcher_event(&watcher::Event::Apply(pod("w-0", "c")));
        assert!(cache.controlled_by("default", "b").is_empty());
        assert_eq!(names(cache.controlled_by("default", "c")), ["w-0"]);
        assert!(
            cache.controlled_by("other", "c").is_empty(),
            "by namespace too"
        );
    }

    #[test]
    fn a_relist_keeps_the_old_index_until_done_then_drops_pods_deleted_meanwhile() {
        let (cache, mut writer) = listed_pods(vec![pod("a-0", "a"), pod("a-1", "a")]);
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitApply(pod("a-1", "a")));
        assert_eq!(
            names(cache.controlled_by("default", "a")),
            ["a-0", "a-1"],
            "until the relist is done, the last complete list holds"
        );
        writer.apply_watcher_event(&watcher::Event::InitApply(pod("a-2", "a")));
        writer.apply_watcher_event(&watcher::Event::InitDone);
        assert_eq!(names(cache.controlled_by("default", "a")), ["a-1", "a-2"]);
        assert!(
            cache
                .get(&ObjectRef::new("a-0").within("default"))
                .is_none()
        );
    }
}
