//! Object storage with a global, monotonic resourceVersion and a bounded log of changes.
//!
//! Every committed change gets the next resourceVersion and is appended to the change log;
//! watches read the log from the resourceVersion they resume at. The log keeps a bounded
//! window of recent changes, as kube-apiserver's watch cache does (see [`History`]): a watch
//! that asks for an older resourceVersion gets `410 Gone`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;

use crate::resources::{Registry, ResourceId};

/// Namespace (empty for cluster-scoped objects) and name of an object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The key of `name` in `namespace` (empty for cluster-scoped objects).
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed from storage.
    Deleted,
}

/// One committed change, as watches see it.
#[derive(Debug)]
pub struct Change {
    /// The resourceVersion the change produced.
    pub rv: u64,
    /// The resource of the object.
    pub resource: ResourceId,
    /// What happened.
    pub kind: ChangeKind,
    /// The object after the change (for `Deleted`: the last state, with the new
    /// resourceVersion).
    pub object: Arc<Value>,
    /// The object before a `Modified` change.
    pub previous: Option<Arc<Value>>,
    json: OnceLock<Bytes>,
    /// When it was committed.
    recorded: Instant,
}

/// Which changes the log keeps for watches, as kube-apiserver's watch cache keeps them: at
/// most `most`; of those, the ones older than `fresh_for` only while fewer than
/// [`History::KEPT_ANYWAY`] newer ones exist (the cache doubles while its oldest event is
/// fresh and halves, down to 100, once its newest quarter is stale).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct History {
    /// The most changes kept.
    pub most: usize,
    /// How long a change is kept when more than [`History::KEPT_ANYWAY`] follow it.
    pub fresh_for: Duration,
}

impl History {
    /// How many of the latest changes are kept, however old: the watch cache's lower bound.
    pub const KEPT_ANYWAY: usize = 100;
}

impl Default for History {
    /// kube-apiserver's bounds: 102,400 events (`100 * 1024`), fresh for 75 s (a bookmark
    /// interval and 15 s).
    fn default() -> Self {
        Self {
            most: 100 * 1024,
            fresh_for: Duration::from_secs(75),
        }
    }
}

impl Change {
    /// The object serialized as JSON, computed once and shared by every watch.
    pub fn object_json(&self) -> Bytes {
        self.json
            .get_or_init(|| Bytes::from(serde_json::to_vec(&*self.object).unwrap_or_default()))
            .clone()
    }
}

/// [`State`] shared between request handlers and the simulated components, with change
/// notifications.
#[derive(Debug)]
pub struct Store {
    state: Mutex<State>,
    changed: tokio::sync::watch::Sender<u64>,
    garbage: tokio::sync::Notify,
}

impl Store {
    /// An empty store keeping the changes `history` says for watches.
    pub fn new(history: History) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::new(history)),
            changed: tokio::sync::watch::channel(0).0,
            garbage: tokio::sync::Notify::new(),
        })
    }

    /// Reads the state.
    pub fn read<R>(&self, read: impl FnOnce(&State) -> R) -> R {
        read(&self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Changes the state, then wakes the watches (when something was committed) and the
    /// garbage collector (when it has work).
    pub fn write<R>(&self, write: impl FnOnce(&mut State) -> R) -> R {
        let (result, rv, garbage) = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let result = write(&mut state);
            (result, state.resource_version(), !state.gc_queue.is_empty())
        };
        self.changed.send_if_modified(|latest| {
            let advanced = *latest != rv;
            *latest = rv;
            advanced
        });
        if garbage {
            self.garbage.notify_one();
        }
        result
    }

    /// A receiver that is marked changed whenever a change is committed.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Resolves when the garbage collector may have work.
    pub async fn garbage_queued(&self) {
        self.garbage.notified().await;
    }
}

/// The stored objects, the resource registry and the change log.
#[derive(Debug)]
pub struct State {
    /// Served resource types.
    pub registry: Registry,
    rv: u64,
    objects: HashMap<ResourceId, BTreeMap<ObjectKey, Arc<Value>>>,
    uids: HashMap<String, (ResourceId, ObjectKey)>,
    log: VecDeque<Arc<Change>>,
    history: History,
    compacted_through: u64,
    /// Uids of removed objects whose dependents the garbage collector has yet to handle.
    pub gc_queue: Vec<String>,
    /// How long after it is stored a new CRD is established (and its resource served).
    pub crd_establish_delay: Duration,
    /// CRDs stored but not yet established, by name, with when they will be.
    pub establishing: BTreeMap<String, Instant>,
}

impl State {
    /// Empty storage serving the built-in resources, keeping the changes `history` says.
    pub fn new(history: History) -> Self {
        Self {
            registry: Registry::builtin(),
            rv: 0,
            objects: HashMap::new(),
            uids: HashMap::new(),
            log: VecDeque::new(),
            history: History {
                most: history.most.max(1),
                ..history
            },
            compacted_through: 0,
            gc_queue: Vec::new(),
            crd_establish_delay: Duration::ZERO,
            establishing: BTreeMap::new(),
        }
    }

    /// The resourceVersion of the latest change.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// The object `key` of `resource`.
    pub fn get(&self, resource: &ResourceId, key: &ObjectKey) -> Option<&Arc<Value>> {
        self.objects.get(resource)?.get(key)
    }

    /// The objects of `resource`, in `namespace` when given, ordered by namespace and name.
    pub fn list<'a>(
        &'a self,
        resource: &ResourceId,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Arc<Value>)> + 'a {
        self.objects
            .get(resource)
            .into_iter()
            .flat_map(|objects| objects.iter())
            .filter(move |(key, _)| namespace.is_none_or(|ns| key.namespace == ns))
    }

    /// Where the object with `uid` is stored, if it exists.
    pub fn locate_uid(&self, uid: &str) -> Option<&(ResourceId, ObjectKey)> {
        self.uids.get(uid)
    }

    /// Every stored object, of every resource.
    pub fn all_objects(&self) -> impl Iterator<Item = (&ResourceId, &ObjectKey, &Arc<Value>)> {
        self.objects
            .iter()
            .flat_map(|(resource, objects)| objects.iter().map(move |(key, o)| (resource, key, o)))
    }

    /// Stores `object` (whose metadata is complete but for its resourceVersion) under `key`,
    /// assigning the next resourceVersion, and records the change.
    pub fn put(&mut self, resource: &ResourceId, key: ObjectKey, mut object: Value) -> Arc<Value> {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
        if let Some(uid) = object["metadata"]["uid"].as_str() {
            self.uids
                .insert(uid.to_string(), (resource.clone(), key.clone()));
        }
        let object = Arc::new(object);
        let previous = self
            .objects
            .entry(resource.clone())
            .or_default()
            .insert(key, Arc::clone(&object));
        let kind = if previous.is_some() {
            ChangeKind::Modified
        } else {
            ChangeKind::Added
        };
        self.record(resource, kind, Arc::clone(&object), previous);
        object
    }

    /// Removes `key`, recording a `Deleted` change whose object carries a new resourceVersion.
    pub fn remove(&mut self, resource: &ResourceId, key: &ObjectKey) -> Option<Arc<Value>> {
        let removed = self.objects.get_mut(resource)?.remove(key)?;
        if let Some(uid) = removed["metadata"]["uid"].as_str() {
            self.uids.remove(uid);
        }
        self.rv += 1;
        let mut last = (*removed).clone();
        last["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
        let last = Arc::new(last);
        self.record(resource, ChangeKind::Deleted, Arc::clone(&last), None);
        Some(last)
    }

    /// Drops every object of `resource` without recording changes (its type is unregistered).
    pub fn drop_resource(&mut self, resource: &ResourceId) {
        if let Some(objects) = self.objects.remove(resource) {
            for object in objects.values() {
                if let Some(uid) = object["metadata"]["uid"].as_str() {
                    self.uids.remove(uid);
                }
            }
        }
    }

    fn record(
        &mut self,
        resource: &ResourceId,
        kind: ChangeKind,
        object: Arc<Value>,
        previous: Option<Arc<Value>>,
    ) {
        let now = Instant::now();
        self.log.push_back(Arc::new(Change {
            rv: self.rv,
            resource: resource.clone(),
            kind,
            object,
            previous,
            json: OnceLock::new(),
            recorded: now,
        }));
        let History { most, fresh_for } = self.history;
        while let Some(oldest) = self.log.front() {
            let stale = self.log.len() > History::KEPT_ANYWAY
                && now.duration_since(oldest.recorded) > fresh_for;
            if self.log.len() <= most && !stale {
                break;
            }
            self.compacted_through = oldest.rv;
            self.log.pop_front();
        }
    }

    /// The changes after `rv`, or `Err(oldest available)` when some of them are compacted.
    /// They are complete up to [`State::resource_version`].
    pub fn changes_since(&self, rv: u64) -> Result<Vec<Arc<Change>>, u64> {
        if rv < self.compacted_through {
            return Err(self.compacted_through + 1);
        }
        let start = self.log.partition_point(|change| change.rv <= rv);
        Ok(self.log.range(start..).cloned().collect())
    }

    /// Forgets every recorded change, as an API server restart with a cold watch cache does:
    /// watches must then resume from a resourceVersion at or after the current one.
    pub fn compact(&mut self) {
        self.log.clear();
        self.compacted_through = self.rv;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pods() -> ResourceId {
        ResourceId::new("", "pods")
    }

    #[test]
    fn every_change_gets_the_next_resource_version() {
        let mut state = State::new(History::default());
        let key = ObjectKey::new("ns", "p");
        let created = state.put(
            &pods(),
            key.clone(),
            json!({"metadata": {"name": "p", "uid": "u1"}}),
        );
        let updated = state.put(
            &pods(),
            key.clone(),
            json!({"metadata": {"name": "p", "uid": "u1"}}),
        );
        let deleted = state.remove(&pods(), &key).unwrap();
        assert_eq!(created["metadata"]["resourceVersion"], "1");
        assert_eq!(updated["metadata"]["resourceVersion"], "2");
        assert_eq!(deleted["metadata"]["resourceVersion"], "3");
        let kinds: Vec<ChangeKind> = state
            .changes_since(0)
            .unwrap()
            .iter()
            .map(|c| c.kind)
            .collect();
        assert_eq!(
            kinds,
            [ChangeKind::Added, ChangeKind::Modified, ChangeKind::Deleted]
        );
        assert_eq!(state.changes_since(2).unwrap().len(), 1);
        assert!(state.locate_uid("u1").is_none());
    }

    #[test]
    fn compacted_history_is_reported() {
        let mut state = State::new(History {
            most: 2,
            ..History::default()
        });
        for name in ["a", "b", "c", "d"] {
            state.put(
                &pods(),
                ObjectKey::new("ns", name),
                json!({"metadata": {"name": name}}),
            );
        }
        assert_eq!(state.changes_since(3).unwrap().len(), 1);
        assert_eq!(state.changes_since(2).unwrap().len(), 2);
        assert!(matches!(state.changes_since(1), Err(3)));
        state.compact();
        assert!(state.changes_since(3).is_err());
        assert_eq!(state.changes_since(4).unwrap().len(), 0);
    }

    #[test]
    fn changes_older_than_the_window_go_once_more_than_the_lower_bound_follow() {
        let mut state = State::new(History {
            most: 10_000,
            fresh_for: Duration::ZERO,
        });
        let write = |state: &mut State, count: usize| {
            for index in 0..count {
                state.put(
                    &pods(),
                    ObjectKey::new("ns", &format!("p{index}")),
                    json!({"metadata": {"name": format!("p{index}")}}),
                );
            }
        };
        write(&mut state, History::KEPT_ANYWAY);
        assert_eq!(
            state.changes_since(0).unwrap().len(),
            History::KEPT_ANYWAY,
            "the lower bound keeps stale changes"
        );
        write(&mut state, 50);
        assert!(state.changes_since(0).is_err(), "stale beyond the bound");
        assert_eq!(state.changes_since(50).unwrap().len(), 100);
    }
}
