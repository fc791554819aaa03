//! Watches: newline-delimited JSON events over a streamed response.
//!
//! A watch starts from `resourceVersion` (changes after it), or, when that is empty or `0` or
//! `sendInitialEvents=true`, with synthetic `ADDED` events for every matching object. A
//! `MODIFIED` change that makes an object start or stop matching the selectors is sent as
//! `ADDED` or `DELETED`, as kube-apiserver's watch cache does. With `allowWatchBookmarks`,
//! `BOOKMARK` events carry the current resourceVersion every [`BOOKMARK_INTERVAL`]. A
//! resourceVersion older than the retained history ends the watch with an `ERROR` event
//! (`410 Expired`). The watch ends after `timeoutSeconds`, when the client goes away, or when
//! a test drops every watch.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::events_view;
use super::table;
use crate::errors::ApiError;
use crate::resources::ResourceType;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{Change, ChangeKind, Store};

/// How often bookmarks are sent to watches that asked for them.
pub const BOOKMARK_INTERVAL: Duration = Duration::from_secs(2);

/// How watched objects are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rendering {
    /// As stored.
    Native,
    /// Stored core Events shown as `events.k8s.io/v1` Events.
    EventsV1,
    /// As single-row Tables (`kubectl get --watch`).
    Table,
}

/// What a watch request asked for.
pub struct WatchRequest {
    /// The watched resource (for `events.k8s.io`, the core events it is stored as).
    pub resource: Arc<ResourceType>,
    /// Only this namespace, if set.
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// Start after this resourceVersion; `None` starts with synthetic ADDED events.
    pub resource_version: Option<u64>,
    /// `sendInitialEvents=true`: ADDED events for the current state, then a bookmark.
    pub send_initial_events: bool,
    /// Send bookmarks.
    pub bookmarks: bool,
    /// End the watch after this long.
    pub timeout: Duration,
    /// How to render objects.
    pub rendering: Rendering,
}

impl WatchRequest {
    fn matches(&self, object: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| object["metadata"]["namespace"].as_str() == Some(ns))
            && self.labels.matches(object["metadata"].get("labels"))
            && self.fields.matches(object)
    }

    fn render(&self, event_type: &str, change_json: Option<Bytes>, object: &Value) -> Bytes {
        let object_json = match (self.rendering, change_json) {
            (Rendering::Native, Some(json)) => json,
            (Rendering::Native, None) => {
                Bytes::from(serde_json::to_vec(object).unwrap_or_default())
            }
            (Rendering::EventsV1, _) => {
                Bytes::from(serde_json::to_vec(&events_view::from_core(object)).unwrap_or_default())
            }
            (Rendering::Table, _) => {
                let rv = object["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default();
                Bytes::from(
                    serde_json::to_vec(&table::table(&self.resource, &[object], rv, false))
                        .unwrap_or_default(),
                )
            }
        };
        let mut line = Vec::with_capacity(object_json.len() + 32);
        line.extend_from_slice(br#"{"type":""#);
        line.extend_from_slice(event_type.as_bytes());
        line.extend_from_slice(br#"","object":"#);
        line.extend_from_slice(&object_json);
        line.extend_from_slice(b"}\n");
        Bytes::from(line)
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let (api_version, kind) = match self.rendering {
            Rendering::EventsV1 => ("events.k8s.io/v1".to_string(), self.resource.kind.clone()),
            _ => (self.resource.api_version(), self.resource.kind.clone()),
        };
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata});
        Bytes::from(format!(
            "{}\n",
            json!({"type": "BOOKMARK", "object": object})
        ))
    }

    /// The event a change produces for this watch, if any.
    fn event_for(&self, change: &Change) -> Option<Bytes> {
        if change.resource != self.resource.id {
            return None;
        }
        let now_matches = self.matches(&change.object);
        match change.kind {
            ChangeKind::Added => now_matches
                .then(|| self.render("ADDED", Some(change.object_json()), &change.object)),
            ChangeKind::Deleted => now_matches
                .then(|| self.render("DELETED", Some(change.object_json()), &change.object)),
            ChangeKind::Modified => {
                let matched = change
                    .previous
                    .as_ref()
                    .is_some_and(|previous| self.matches(previous));
                match (matched, now_matches) {
                    (true, true) => {
                        Some(self.render("MODIFIED", Some(change.object_json()), &change.object))
                    }
                    (false, true) => {
                        Some(self.render("ADDED", Some(change.object_json()), &change.object))
                    }
                    (true, false) => {
                        let mut gone = change.previous.as_deref().cloned().unwrap_or_default();
                        gone["metadata"]["resourceVersion"] = json!(change.rv.to_string());
                        Some(self.render("DELETED", None, &gone))
                    }
                    (false, false) => None,
                }
            }
        }
    }
}

/// Streams the events of `request` into `sink` until the watch ends.
pub async fn run(
    store: Arc<Store>,
    request: WatchRequest,
    sink: mpsc::Sender<Bytes>,
    dropped: CancellationToken,
) {
    let mut changed = store.subscribe();
    let mut cursor = match request.resource_version {
        Some(rv) if !request.send_initial_events => rv,
        _ => {
            let (objects, rv) = store.read(|state| {
                let objects: Vec<Arc<Value>> = state
                    .list(&request.resource.id, request.namespace.as_deref())
                    .map(|(_, object)| Arc::clone(object))
                    .filter(|object| request.matches(object))
                    .collect();
                (objects, state.resource_version())
            });
            for object in objects {
                if sink
                    .send(request.render("ADDED", None, &object))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            if request.send_initial_events && sink.send(request.bookmark(rv, true)).await.is_err() {
                return;
            }
            rv
        }
    };
    let deadline = tokio::time::Instant::now() + request.timeout;
    let mut bookmarks = tokio::time::interval_at(
        tokio::time::Instant::now() + BOOKMARK_INTERVAL,
        BOOKMARK_INTERVAL,
    );
    loop {
        changed.borrow_and_update();
        let batch = store.read(|state| {
            state
                .changes_since(cursor)
                .map(|changes| (changes, state.resource_version()))
        });
        match batch {
            Err(oldest) => {
                let status = ApiError::Expired {
                    requested: cursor,
                    oldest,
                }
                .to_status();
                let _ = sink
                    .send(Bytes::from(format!(
                        "{}\n",
                        json!({"type": "ERROR", "object": status})
                    )))
                    .await;
                return;
            }
            Ok((changes, latest)) => {
                for change in changes {
                    if let Some(event) = request.event_for(&change)
                        && sink.send(event).await.is_err()
                    {
                        return;
                    }
                }
                cursor = latest;
            }
        }
        tokio::select! {
            result = changed.changed() => if result.is_err() { return },
            _ = bookmarks.tick(), if request.bookmarks => {
                if sink.send(request.bookmark(cursor, false)).await.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep_until(deadline) => return,
            () = dropped.cancelled() => return,
            () = sink.closed() => return,
        }
    }
}
