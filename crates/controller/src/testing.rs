//! Fixtures for the controller's unit tests.

use kube::Resource;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;

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
