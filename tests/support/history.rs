//! A record of every change of the pods of a namespace, for tests that check the order of
//! what the operator did.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;

use crate::env::Env;

/// Records every change of the pods of the default namespace, with when it arrived, until
/// dropped.
pub struct PodHistory {
    changes: Arc<Mutex<Vec<(Instant, Pod)>>>,
    task: tokio::task::JoinHandle<()>,
}

/// A point in a [`PodHistory`]: the resourceVersion of a change, and when it arrived.
pub type Seen = (u64, Instant);

impl PodHistory {
    /// Starts recording the pods of the default namespace of `env`.
    pub async fn start(env: &Env) -> Self {
        let changes = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&changes);
        let mut stream = watcher(env.pods(), watcher::Config::default()).boxed();
        // The first event comes once the initial list is in: later changes are all seen.
        let _ = stream.next().await;
        let task = tokio::spawn(async move {
            while let Some(Ok(event)) = stream.next().await {
                if let watcher::Event::Apply(pod) | watcher::Event::Delete(pod) = event {
                    recorded
                        .lock()
                        .expect("the recorder does not panic")
                        .push((Instant::now(), pod));
                }
            }
        });
        Self { changes, task }
    }

    /// The names of every pod recorded, sorted.
    pub fn names(&self) -> std::collections::BTreeSet<String> {
        let changes = self.changes.lock().expect("the recorder does not panic");
        changes
            .iter()
            .filter_map(|(_, pod)| pod.metadata.name.clone())
            .collect()
    }

    /// The first recorded change of a pod that satisfies `matches`.
    fn first(&self, what: &str, matches: impl Fn(&Pod) -> bool) -> Seen {
        let changes = self.changes.lock().expect("the recorder does not panic");
        let (arrived, pod) = changes
            .iter()
            .find(|(_, pod)| matches(pod))
            .unwrap_or_else(|| panic!("no change where {what}"));
        let rv = pod
            .metadata
            .resource_version
            .as_deref()
            .expect("watched objects have a resourceVersion");
        (
            rv.parse().expect("eto-sim's resourceVersions are numbers"),
            *arrived,
        )
    }

    /// When the launcher of `job` first showed a hostfile without `worker`, and when `worker`
    /// was first marked for deletion.
    pub fn left_discovery_then_deleted(&self, job: &str, worker: &str) -> (Seen, Seen) {
        let launcher = format!("{job}-launcher");
        let left = self.first("the launcher's hostfile lost the worker", |pod| {
            pod.metadata.name.as_deref() == Some(launcher.as_str())
                && pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("eto.dev/hostfile"))
                    .is_some_and(|hostfile| !hostfile.contains(worker))
        });
        let deleted = self.first("the worker is being deleted", |pod| {
            pod.metadata.name.as_deref() == Some(worker)
                && pod.metadata.deletion_timestamp.is_some()
        });
        (left, deleted)
    }
}

impl Drop for PodHistory {
    fn drop(&mut self) {
        self.task.abort();
    }
}
