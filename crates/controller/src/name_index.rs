//! An index of cached objects by a key taken from each object (a pod's controller uid, the job
//! a ScaleIn or ScaleOut selects), so that a reconcile finds its job's objects without looking
//! at those of every other job.
//!
//! The index is kept from the same watch events as its cache, and follows them the way the
//! cache does: applies and deletions at once, a relist (`Init`, `InitApply`…, `InitDone`)
//! replacing everything at its end, so objects deleted while the watch was down drop out of
//! both. Each event reaches the index before the cache: a reader between the two updates sees
//! a new name in the index that the cache lacks yet (and skips it), never a cached object the
//! index has not heard of. An entry may outlive its object's key (a key changed in place):
//! readers check the cached object's key, and the next relist drops the entry.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use kube::Resource;
use kube::runtime::watcher;

/// Takes the key of an object, if it has one.
pub type KeyOf<K> = fn(&K) -> Option<&str>;

/// Names of objects by namespace and key.
type Names = HashMap<(String, String), BTreeSet<String>>;

/// Reads the index.
pub struct NameIndex<K> {
    names: Arc<RwLock<Names>>,
    key_of: KeyOf<K>,
}

impl<K> Clone for NameIndex<K> {
    fn clone(&self) -> Self {
        Self {
            names: Arc::clone(&self.names),
            key_of: self.key_of,
        }
    }
}

/// Keeps the index from watch events.
pub struct NameIndexWriter<K> {
    names: Arc<RwLock<Names>>,
    key_of: KeyOf<K>,
    /// The index being rebuilt by a relist, replacing the current one at its end.
    relisted: Names,
}

/// An empty index of objects by the key `key_of` takes, and its writer.
pub fn name_index<K>(key_of: KeyOf<K>) -> (NameIndex<K>, NameIndexWriter<K>) {
    let names = Arc::default();
    let index = NameIndex {
        names: Arc::clone(&names),
        key_of,
    };
    let writer = NameIndexWriter {
        names,
        key_of,
        relisted: Names::default(),
    };
    (index, writer)
}

/// The namespace, key and name of `object`, when it has a key.
fn entry<K: Resource>(key_of: KeyOf<K>, object: &K) -> Option<((String, String), String)> {
    let key = key_of(object)?;
    let meta = object.meta();
    let namespace = meta.namespace.clone().unwrap_or_default();
    Some(((namespace, key.to_string()), meta.name.clone()?))
}

fn insert<K: Resource>(names: &mut Names, key_of: KeyOf<K>, object: &K) {
    if let Some((key, name)) = entry(key_of, object) {
        names.entry(key).or_default().insert(name);
    }
}

fn remove<K: Resource>(names: &mut Names, key_of: KeyOf<K>, object: &K) {
    if let Some((key, name)) = entry(key_of, object)
        && let Some(entries) = names.get_mut(&key)
    {
        entries.remove(&name);
        if entries.is_empty() {
            names.remove(&key);
        }
    }
}

impl<K> NameIndex<K> {
    /// The names of the objects in `namespace` with `key` (check each object found: see the
    /// module documentation).
    pub fn names(&self, namespace: &str, key: &str) -> Vec<String> {
        let names = self.names.read().unwrap_or_else(PoisonError::into_inner);
        names
            .get(&(namespace.to_string(), key.to_string()))
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }

    /// Whether `object` has `key`.
    pub fn has_key(&self, object: &K, key: &str) -> bool {
        (self.key_of)(object) == Some(key)
    }
}

impl<K> NameIndexWriter<K> {
    /// Whether the index holds no entry at all.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.names
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }
}

impl<K: Resource> NameIndexWriter<K> {
    /// Applies one watch event to the index.
    pub fn apply_watcher_event(&mut self, event: &watcher::Event<K>) {
        let mut names = self.names.write().unwrap_or_else(PoisonError::into_inner);
        match event {
            watcher::Event::Apply(object) => insert(&mut names, self.key_of, object),
            watcher::Event::Delete(object) => remove(&mut names, self.key_of, object),
            watcher::Event::Init => self.relisted = Names::default(),
            watcher::Event::InitApply(object) => insert(&mut self.relisted, self.key_of, object),
            watcher::Event::InitDone => *names = std::mem::take(&mut self.relisted),
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, DynamicObject};
    use serde_json::json;

    use crate::observe::selected_job;
    use crate::testing::listed_index;

    fn request(namespace: &str, name: &str, job: &str) -> DynamicObject {
        let resource = ApiResource::erase::<eto_api::ScaleOut>(&());
        let mut request = DynamicObject::new(name, &resource).within(namespace);
        request.data = json!({"spec": {"selector": {"name": job}}});
        request
    }

    #[test]
    fn requests_are_found_by_the_job_they_select_in_their_namespace() {
        let index = listed_index(
            selected_job,
            &[
                request("team-a", "grow", "mnist"),
                request("team-a", "grow-more", "mnist"),
                request("team-a", "other", "bert"),
                request("team-b", "grow", "mnist"),
            ],
        );
        assert_eq!(index.names("team-a", "mnist"), ["grow", "grow-more"]);
        assert_eq!(index.names("team-b", "mnist"), ["grow"]);
        assert!(index.names("team-c", "mnist").is_empty());
        assert!(index.has_key(&request("team-a", "x", "bert"), "bert"));
    }
}
