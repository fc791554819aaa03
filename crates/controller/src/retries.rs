//! How soon a failed reconcile is tried again: per object, sooner after a first failure than
//! after many.
//!
//! Two layers retry. The API client retries a request answered `429 Too Many Requests`,
//! `503 Service Unavailable` or `504 Gateway Timeout` itself, honouring `Retry-After` (kube's
//! server-aware retry policy). Any other failure fails the reconcile, which is tried again
//! after [`delay`]: [`FIRST_RETRY`] after the first failure in a row, doubling with each
//! further one up to [`MAX_RETRY`], so that a blip costs a fraction of a second and a broken
//! API server or a missing permission costs one request per object every half minute. A
//! reconcile that succeeds starts the count again.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The wait after the first failure in a row.
pub const FIRST_RETRY: Duration = Duration::from_millis(200);

/// The longest wait between two tries.
pub const MAX_RETRY: Duration = Duration::from_secs(30);

/// How long to wait after the `failures`th failure in a row (counted from 1).
pub fn delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_RETRY.saturating_mul(1 << doublings).min(MAX_RETRY)
}

/// The key of the object of `kind` with `metadata` in [`Retries`].
pub fn key(kind: &str, metadata: &ObjectMeta) -> String {
    format!(
        "{kind}/{}/{}",
        metadata.namespace.as_deref().unwrap_or_default(),
        metadata.name.as_deref().unwrap_or_default()
    )
}

/// The failures in a row of every object whose last reconcile failed.
#[derive(Debug, Default)]
pub struct Retries {
    failures: Mutex<HashMap<String, u32>>,
}

impl Retries {
    /// Records one more failure of the object `key`; returns how long to wait before trying
    /// it again.
    pub fn failed(&self, key: &str) -> Duration {
        let mut failures = self.lock();
        let count = failures.entry(key.to_string()).or_default();
        *count = count.saturating_add(1);
        delay(*count)
    }

    /// Forgets the failures of the object `key`: its reconcile succeeded.
    pub fn succeeded(&self, key: &str) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_the_first_retry_up_to_the_longest() {
        let waits: Vec<u64> = (1..=10)
            .map(|n| u64::try_from(delay(n).as_millis()).unwrap_or(u64::MAX))
            .collect();
        assert_eq!(
            waits,
            [
                200, 400, 800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000
            ]
        );
        assert_eq!(delay(u32::MAX), MAX_RETRY);
    }

    #[test]
    fn a_success_starts_the_count_again_for_that_object_only() {
        let retries = Retries::default();
        retries.failed("a");
        retries.failed("b");
        assert_eq!(retries.failed("a"), Duration::from_millis(400));
        retries.succeeded("a");
        assert_eq!(retries.failed("a"), FIRST_RETRY);
        assert_eq!(retries.failed("b"), Duration::from_millis(400));
    }
}
