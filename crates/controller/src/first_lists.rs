//! Which caches have completed their first list, in a form any number of tasks can wait on.
//!
//! kube-runtime's `Store::wait_until_ready` keeps a single waker per store: of several tasks
//! waiting on one store at the same time, only the one that polled last is woken when its list
//! completes, and the others wait forever. kube-runtime's own controllers each wait once on
//! their main store; eto waits for its caches here instead, where waiting is safe for many.
//! Each cache's watch marks the cache listed when its first list is done (the `InitDone` event,
//! seen after the cache applied it), and [`Listed::all`] waits for a set of them.

use std::collections::BTreeSet;

use kube::runtime::watcher;
use tokio::sync::watch;

/// The caches that have completed their first list, by name.
#[derive(Clone, Debug, Default)]
pub struct Listed(watch::Sender<BTreeSet<&'static str>>);

impl Listed {
    /// Marks `cache` listed.
    pub fn mark(&self, cache: &'static str) {
        self.0.send_if_modified(|listed| listed.insert(cache));
    }

    /// Marks `cache` listed when `event` ends its first list (or a later one).
    pub fn observe<K>(
        &self,
        cache: &'static str,
        event: &Result<watcher::Event<K>, watcher::Error>,
    ) {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            self.mark(cache);
        }
    }

    /// Whether every one of `caches` has completed its first list.
    pub fn has(&self, caches: &[&'static str]) -> bool {
        let listed = self.0.borrow();
        caches.iter().all(|cache| listed.contains(cache))
    }

    /// Resolves once every one of `caches` has completed its first list.
    pub async fn all(&self, caches: &[&'static str]) {
        // `self` holds the sender: the channel stays open while this waits.
        let _ = self
            .0
            .subscribe()
            .wait_for(|listed| caches.iter().all(|cache| listed.contains(cache)))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::future::join_all;

    use super::*;

    #[tokio::test]
    async fn every_one_of_many_concurrent_waiters_is_woken() {
        let listed = Listed::default();
        let waiters: Vec<_> = (0..20)
            .map(|_| {
                let listed = listed.clone();
                tokio::spawn(async move { listed.all(&["pods", "secrets"]).await })
            })
            .collect();
        tokio::task::yield_now().await;
        listed.mark("pods");
        assert!(!listed.has(&["pods", "secrets"]));
        listed.mark("secrets");
        let all_woken = tokio::time::timeout(Duration::from_secs(5), join_all(waiters)).await;
        assert!(all_woken.is_ok_and(|results| results.iter().all(Result::is_ok)));
    }

    #[tokio::test]
    async fn the_end_of_a_first_list_marks_the_cache() {
        let listed = Listed::default();
        let apply: Result<watcher::Event<()>, watcher::Error> = Ok(watcher::Event::Init);
        listed.observe("jobs", &apply);
        assert!(!listed.has(&["jobs"]));
        listed.observe("jobs", &Ok(watcher::Event::<()>::InitDone));
        assert!(listed.has(&["jobs"]));
        listed.all(&["jobs"]).await;
    }
}
