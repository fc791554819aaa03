//! Where eto watches: every namespace, or a list of them.
//!
//! A watch covers one namespace or all of them, so a list of namespaces takes one watch each.
//! Their streams feed one cache through [`merged`], which makes them look like the stream of a
//! single watch: one initial list, done once every namespace has listed, and then changes.

use std::collections::HashMap;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::watcher::{self, Event};

/// The namespaces eto manages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace.
    #[default]
    All,
    /// Only these (at least one).
    Namespaces(Vec<String>),
}

impl Scope {
    /// The scope of these namespaces; every namespace when there are none.
    pub fn of(namespaces: Vec<String>) -> Self {
        if namespaces.is_empty() {
            Self::All
        } else {
            Self::Namespaces(namespaces)
        }
    }

    /// The namespaces to watch one by one: `None` for a single watch of all of them.
    pub fn watches(&self) -> Vec<Option<&str>> {
        match self {
            Self::All => vec![None],
            Self::Namespaces(namespaces) => namespaces.iter().map(|n| Some(n.as_str())).collect(),
        }
    }

    /// For logs: the namespaces, or `<all>`.
    pub fn describe(&self) -> String {
        match self {
            Self::All => "<all>".into(),
            Self::Namespaces(namespaces) => namespaces.join(","),
        }
    }
}

type WatchEvent<K> = Result<Event<K>, watcher::Error>;

/// What [`merged`] remembers of one watch.
struct Watched<K> {
    /// Its objects by name, as last seen.
    objects: HashMap<String, K>,
    /// The names seen since it began listing again, while it relists after the first time.
    relisting: Option<HashMap<String, K>>,
    /// Whether its first list is done.
    listed: bool,
}

/// The state of [`merged`] across events.
struct Merge<K> {
    watches: Vec<Watched<K>>,
    /// Whether the merged first list is done.
    listed: bool,
    /// Whether the merged `Init` was sent.
    started: bool,
    /// Objects deleted while the merged first list was under way; a first list cannot remove
    /// what it already sent, so they are deleted right after it.
    deleted_while_listing: Vec<K>,
}

impl<K: Resource + Clone> Merge<K> {
    /// The state before any event of `watches` watches.
    fn new(watches: usize) -> Self {
        Self {
            watches: (0..watches)
                .map(|_| Watched {
                    objects: HashMap::new(),
                    relisting: None,
                    listed: false,
                })
                .collect(),
            listed: false,
            started: false,
            deleted_while_listing: Vec::new(),
        }
    }

    fn on(&mut self, watch: usize, event: WatchEvent<K>) -> Vec<WatchEvent<K>> {
        let event = match event {
            Ok(event) => event,
            Err(error) => return vec![Err(error)],
        };
        let name = |object: &K| object.meta().name.clone().unwrap_or_default();
        let state = &mut self.watches[watch];
        if !self.listed {
            // The merged first list: every watch's objects, done once all have listed.
            return match event {
                Event::Init if self.started => Vec::new(),
                Event::Init => {
                    self.started = true;
                    vec![Ok(Event::Init)]
                }
                Event::InitApply(object) | Event::Apply(object) => {
                    state.objects.insert(name(&object), object.clone());
                    vec![Ok(Event::InitApply(object))]
                }
                Event::Delete(object) => {
                    state.objects.remove(&name(&object));
                    self.deleted_while_listing.push(object);
                    Vec::new()
                }
                Event::InitDone => {
                    state.listed = true;
                    if !self.watches.iter().all(|w| w.listed) {
                        return Vec::new();
                    }
                    self.listed = true;
                    let mut events = vec![Ok(Event::InitDone)];
                    for object in std::mem::take(&mut self.deleted_while_listing) {
                        let key = name(&object);
                        let namespace = object.meta().namespace.clone();
                        let back = self.watches.iter().any(|w| {
                            w.objects
                                .get(&key)
                                .is_some_and(|o| o.meta().namespace == namespace)
                        });
                        if !back {
                            events.push(Ok(Event::Delete(object)));
                        }
                    }
                    events
                }
            };
        }
        // After the first list, a watch that lists again (after a 410 Gone, say) turns into
        // changes: what it lists is applied, what it no longer has is deleted.
        match event {
            Event::Init => {
                state.relisting = Some(HashMap::new());
                Vec::new()
            }
            Event::InitApply(object) => {
                let key = name(&object);
                if let Some(relisting) = state.relisting.as_mut() {
                    relisting.insert(key.clone(), object.clone());
                }
                state.objects.insert(key, object.clone());
                vec![Ok(Event::Apply(object))]
            }
            Event::InitDone => {
                let Some(relisted) = state.relisting.take() else {
                    return Vec::new();
                };
                let gone: Vec<K> = state
                    .objects
                    .iter()
                    .filter(|(key, _)| !relisted.contains_key(*key))
                    .map(|(_, object)| object.clone())
                    .collect();
                state.objects = relisted;
                gone.into_iter()
                    .map(|object| Ok(Event::Delete(object)))
                    .collect()
            }
            Event::Apply(object) => {
                state.objects.insert(name(&object), object.clone());
                vec![Ok(Event::Apply(object))]
            }
            Event::Delete(object) => {
                state.objects.remove(&name(&object));
                vec![Ok(Event::Delete(object))]
            }
        }
    }
}

/// The streams of several watches (one per namespace) as the stream of one: a single first
/// list (`Init`, every object, `InitDone` once all watches have listed), then changes. A
/// watch that lists again later becomes `Apply` of what it lists and `Delete` of what it no
/// longer has, so the cache fed by the stream keeps the other namespaces' objects. One watch
/// passes through unchanged.
pub fn merged<K, S>(watches: Vec<S>) -> futures::stream::BoxStream<'static, WatchEvent<K>>
where
    K: Resource + Clone + Send + 'static,
    S: Stream<Item = WatchEvent<K>> + Send + 'static,
{
    if watches.len() == 1 {
        return watches
            .into_iter()
            .next()
            .map(StreamExt::boxed)
            .unwrap_or_else(|| futures::stream::empty().boxed());
    }
    let mut merge = Merge::new(watches.len());
    let tagged = watches
        .into_iter()
        .enumerate()
        .map(|(index, stream)| stream.map(move |event| (index, event)).boxed());
    futures::stream::select_all(tagged)
        .flat_map(move |(index, event)| futures::stream::iter(merge.on(index, event)))
        .boxed()
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;
    use futures::stream;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(namespace: &str, name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    /// The events as `Kind name` strings.
    fn shown(events: Vec<WatchEvent<Pod>>) -> Vec<String> {
        events
            .into_iter()
            .map(|event| match event {
                Ok(Event::Init) => "Init".into(),
                Ok(Event::InitApply(p)) => format!("InitApply {}", p.metadata.name.unwrap()),
                Ok(Event::InitDone) => "InitDone".into(),
                Ok(Event::Apply(p)) => format!("Apply {}", p.metadata.name.unwrap()),
                Ok(Event::Delete(p)) => format!("Delete {}", p.metadata.name.unwrap()),
                Err(_) => "Err".into(),
            })
            .collect()
    }

    fn feed(steps: Vec<(usize, Event<Pod>)>) -> Vec<String> {
        let mut merge = Merge::new(2);
        shown(
            steps
                .into_iter()
                .flat_map(|(watch, event)| merge.on(watch, Ok(event)))
                .collect(),
        )
    }

    #[test]
    fn the_first_list_ends_when_every_namespace_has_listed() {
        let events = feed(vec![
            (0, Event::Init),
            (0, Event::InitApply(pod("a", "a-1"))),
            (1, Event::Init),
            (0, Event::InitDone),
            (1, Event::InitApply(pod("b", "b-1"))),
            (1, Event::InitDone),
            (0, Event::Apply(pod("a", "a-2"))),
        ]);
        assert_eq!(
            events,
            [
                "Init",
                "InitApply a-1",
                "InitApply b-1",
                "InitDone",
                "Apply a-2"
            ]
        );
    }

    #[test]
    fn an_object_deleted_during_the_first_list_is_deleted_after_it() {
        let events = feed(vec![
            (0, Event::Init),
            (0, Event::InitApply(pod("a", "a-1"))),
            (0, Event::InitDone),
            (1, Event::Init),
            (0, Event::Delete(pod("a", "a-1"))),
            (1, Event::InitDone),
        ]);
        assert_eq!(events, ["Init", "InitApply a-1", "InitDone", "Delete a-1"]);
    }

    #[test]
    fn a_namespace_listing_again_applies_what_it_has_and_deletes_what_it_lost() {
        let events = feed(vec![
            (0, Event::Init),
            (0, Event::InitApply(pod("a", "a-1"))),
            (0, Event::InitApply(pod("a", "a-2"))),
            (0, Event::InitDone),
            (1, Event::Init),
            (1, Event::InitApply(pod("b", "b-1"))),
            (1, Event::InitDone),
            // Namespace a's watch expired and lists again; a-2 went away meanwhile.
            (0, Event::Init),
            (0, Event::InitApply(pod("a", "a-1"))),
            (0, Event::InitDone),
        ]);
        assert_eq!(
            events[5..],
            ["Apply a-1", "Delete a-2"],
            "b-1 is untouched: {events:?}"
        );
    }

    #[test]
    fn one_watch_passes_through_unchanged() {
        let events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(pod("a", "a-1"))),
            Ok(Event::InitDone),
            Ok(Event::Init),
        ];
        let merged = merged(vec![stream::iter(events)]);
        assert_eq!(
            shown(block_on(merged.collect())),
            ["Init", "InitApply a-1", "InitDone", "Init"]
        );
    }

    #[test]
    fn scopes_name_their_watches() {
        assert_eq!(Scope::of(Vec::new()).watches(), [None]);
        assert_eq!(
            Scope::of(vec!["a".into(), "b".into()]).watches(),
            [Some("a"), Some("b")]
        );
    }
}
