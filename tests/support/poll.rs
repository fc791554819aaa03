//! Waiting until something holds, with a time limit: the one polling loop of the tests, for
//! what no watch can tell (a command's output, a metric, several objects at once).

use std::time::Duration;

/// How often [`within`] and [`until`] look again.
pub const INTERVAL: Duration = Duration::from_millis(20);

/// Calls `probe` every [`INTERVAL`] until it returns a value, and returns that value; `None`
/// when `limit` passes first.
pub async fn within<T>(limit: Duration, mut probe: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let polled = tokio::time::timeout(limit, async {
        loop {
            if let Some(value) = probe().await {
                return value;
            }
            tokio::time::sleep(INTERVAL).await;
        }
    });
    polled.await.ok()
}

/// As [`within`], but fails the test, naming `what`, when `limit` passes first.
pub async fn until<T>(what: &str, limit: Duration, probe: impl AsyncFnMut() -> Option<T>) -> T {
    within(limit, probe)
        .await
        .unwrap_or_else(|| panic!("timed out after {limit:?}: {what}"))
}
