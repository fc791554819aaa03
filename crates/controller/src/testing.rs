//! Fixtures for the controller's unit tests.

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;

use crate::name_index::{KeyOf, NameIndex, name_index};
use crate::pod_cache::{PodCache, PodCacheWriter, pod_cache};

/// `writer` after a first list that found `objects`.
pub(crate) fn listed<K>(mut writer: Writer<K>, objects: Vec<K>) -> Writer<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    writer.apply_watcher_event(&watcher::Event::Init);
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(object));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    writer
}

/// A pod cache after a first list that found `pods`, and its writer.
pub(crate) fn listed_pods(pods: Vec<Pod>) -> (PodCache, PodCacheWriter) {
    let (cache, mut writer) = pod_cache();
    writer.apply_watcher_event(&watcher::Event::Init);
    for pod in pods {
        writer.apply_watcher_event(&watcher::Event::InitApply(pod));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    (cache, writer)
}

/// An index by `key_of` after a first list that found `objects`.
pub(crate) fn listed_index<K>(key_of: KeyOf<K>, objects: &[K]) -> NameIndex<K>
where
    K: Resource + Clone,
{
    let (index, mut writer) = name_index(key_of);
    writer.apply_watcher_event(&watcher::Event::Init);
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(object.clone()));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    index
}
