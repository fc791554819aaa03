//! Failures injected into the API server by tests: error responses, latency, dropped watches.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::routes::Verb;

/// What an injected fault does to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this HTTP code (500 as `InternalError`, 429 as `TooManyRequests` with a
    /// `Retry-After: 1` header, 503 as `ServiceUnavailable`, 403 as `Forbidden`, others as
    /// `InternalError`) instead of serving the request.
    Fail(u16),
    /// Serve the request after this delay.
    Delay(Duration),
}

/// A fault for the next `remaining` requests whose method and path match.
#[derive(Clone, Debug)]
pub struct Fault {
    /// What happens to a matching request.
    pub action: FaultAction,
    /// Requests still to be affected.
    pub remaining: u32,
    /// Only requests with this method (`GET`, `PATCH`, ...), if set.
    pub method: Option<String>,
    /// Only requests whose path contains this text, if set.
    pub path_contains: Option<String>,
    /// Only requests with this verb (for example `List`, to delay a list but not the watch
    /// that follows it), if set.
    pub verb: Option<Verb>,
    /// Only requests that change state (`POST`, `PUT`, `PATCH`, `DELETE`), if set.
    pub writes_only: bool,
    /// Matching requests let through before the fault acts: with `skip: 4` the fifth
    /// matching request is the first affected (to fail, say, the fifth write of a reconcile).
    pub skip: u32,
}

impl Fault {
    /// A fault doing `action` to the next `count` requests, whatever they are.
    pub fn every(action: FaultAction, count: u32) -> Self {
        Self {
            action,
            remaining: count,
            method: None,
            path_contains: None,
            verb: None,
            writes_only: false,
            skip: 0,
        }
    }
}

/// Whether a request with `method` changes state.
fn is_write(method: &str) -> bool {
    ["POST", "PUT", "PATCH", "DELETE"]
        .iter()
        .any(|write| write.eq_ignore_ascii_case(method))
}

/// The faults in force, the token that ends every open watch, and counts of what happened.
#[derive(Debug, Default)]
pub struct ApiFaults {
    faults: Mutex<Vec<Fault>>,
    watches: Mutex<CancellationToken>,
    acted: AtomicU64,
    writes: AtomicU64,
    requests: AtomicU64,
}

impl ApiFaults {
    /// Adds a fault.
    pub fn inject(&self, fault: Fault) {
        self.lock_faults().push(fault);
    }

    /// Removes every fault.
    pub fn clear(&self) {
        self.lock_faults().clear();
    }

    /// The actions that apply to a request, consuming one use of each matching fault.
    /// `verb` is `None` for requests that name no resource (discovery, `/version`).
    pub fn take(&self, method: &str, path: &str, verb: Option<Verb>) -> Vec<FaultAction> {
        let write = is_write(method);
        // Counted under the lock: once `clear` returns, every write already counted has met
        // the faults that were in force when it came.
        let mut faults = self.lock_faults();
        self.requests.fetch_add(1, Ordering::Relaxed);
        if write {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
        let mut actions = Vec::new();
        for fault in faults.iter_mut() {
            let matches = fault.remaining > 0
                && fault
                    .method
                    .as_deref()
                    .is_none_or(|m| m.eq_ignore_ascii_case(method))
                && fault
                    .path_contains
                    .as_deref()
                    .is_none_or(|p| path.contains(p))
                && fault.verb.is_none_or(|v| Some(v) == verb)
                && (write || !fault.writes_only);
            if !matches {
                continue;
            }
            if fault.skip > 0 {
                fault.skip -= 1;
                continue;
            }
            fault.remaining -= 1;
            actions.push(fault.action.clone());
        }
        faults.retain(|fault| fault.remaining > 0);
        self.acted
            .fetch_add(actions.len() as u64, Ordering::Relaxed);
        actions
    }

    /// How many times a fault has acted on a request since the server started.
    pub fn acted(&self) -> u64 {
        self.acted.load(Ordering::Relaxed)
    }

    /// How many requests that change state the server has received since it started, served
    /// or failed.
    pub fn writes_received(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// How many requests the server has received since it started, of any kind (a watch
    /// counts once), served or failed.
    pub fn requests_received(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// A token cancelled when watches are dropped.
    pub fn watch_token(&self) -> CancellationToken {
        self.watches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Ends every open watch; clients have to watch again (and may have to list again).
    pub fn drop_watches(&self) {
        let mut token = self
            .watches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        token.cancel();
        *token = CancellationToken::new();
    }

    fn lock_faults(&self) -> std::sync::MutexGuard<'_, Vec<Fault>> {
        self.faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_apply_to_matching_requests_a_limited_number_of_times() {
        let faults = ApiFaults::default();
        faults.inject(Fault {
            action: FaultAction::Fail(500),
            remaining: 2,
            method: Some("PATCH".into()),
            path_contains: Some("/pods/".into()),
            verb: None,
            writes_only: false,
            skip: 0,
        });
        let pod = "/api/v1/namespaces/a/pods/p";
        assert!(faults.take("GET", pod, Some(Verb::Get)).is_empty());
        assert_eq!(
            faults.take("PATCH", pod, Some(Verb::Patch)),
            vec![FaultAction::Fail(500)]
        );
        assert_eq!(
            faults.take("patch", "/api/v1/namespaces/a/pods/q", Some(Verb::Patch)),
            vec![FaultAction::Fail(500)]
        );
        assert!(faults.take("PATCH", pod, Some(Verb::Patch)).is_empty());
    }

    #[test]
    fn a_fault_for_a_verb_leaves_other_verbs_of_the_same_path_alone() {
        let faults = ApiFaults::default();
        faults.inject(Fault {
            action: FaultAction::Delay(Duration::from_secs(1)),
            remaining: 1,
            method: None,
            path_contains: Some("/api/v1/pods".into()),
            verb: Some(Verb::List),
            writes_only: false,
            skip: 0,
        });
        assert!(
            faults
                .take("GET", "/api/v1/pods", Some(Verb::Watch))
                .is_empty()
        );
        assert_eq!(
            faults.take("GET", "/api/v1/pods", Some(Verb::List)),
            vec![FaultAction::Delay(Duration::from_secs(1))]
        );
    }

    #[test]
    fn a_fault_on_writes_skips_reads_and_lets_the_first_writes_through() {
        let faults = ApiFaults::default();
        faults.inject(Fault {
            writes_only: true,
            skip: 2,
            ..Fault::every(FaultAction::Fail(500), 1)
        });
        let pod = "/api/v1/namespaces/a/pods/p";
        assert!(faults.take("GET", pod, Some(Verb::Get)).is_empty());
        assert!(faults.take("PATCH", pod, Some(Verb::Patch)).is_empty());
        assert!(faults.take("POST", pod, Some(Verb::Create)).is_empty());
        assert_eq!(faults.acted(), 0);
        assert_eq!(
            faults.take("DELETE", pod, Some(Verb::Delete)),
            vec![FaultAction::Fail(500)]
        );
        assert!(faults.take("DELETE", pod, Some(Verb::Delete)).is_empty());
        assert_eq!(
            (
                faults.acted(),
                faults.writes_received(),
                faults.requests_received()
            ),
            (1, 4, 5)
        );
    }
}
