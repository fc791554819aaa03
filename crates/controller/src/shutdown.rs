//! Stopping: what becomes of the reconciles under way when the operator is told to stop.
//!
//! Once the signal arrives no reconcile starts. Those under way may finish within
//! [`SHUTDOWN_GRACE`]; the controller stops as soon as none is left (at once when none was
//! under way), or when the grace period is over, abandoning the rest. Abandoning a reconcile
//! is safe: every write eto makes is idempotent, and the engine recovers from a reconcile cut
//! short as from an operator crash, so the next start completes what it left.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

/// How long reconciles under way when the signal arrives may go on before they are abandoned.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The number of reconciles under way.
#[derive(Clone, Debug, Default)]
pub struct InFlight(watch::Sender<usize>);

/// Counts one reconcile as under way while it lives; it ends with the reconcile, whether the
/// reconcile finished or was dropped.
struct Entered(watch::Sender<usize>);

impl Drop for Entered {
    fn drop(&mut self) {
        self.0.send_modify(|count| *count -= 1);
    }
}

impl InFlight {
    /// `work`, counted as under way from this call until it completes or is dropped.
    pub fn track<F: Future>(&self, work: F) -> impl Future<Output = F::Output> + use<F> {
        self.0.send_modify(|count| *count += 1);
        let entered = Entered(self.0.clone());
        async move {
            let output = work.await;
            drop(entered);
            output
        }
    }

    /// Resolves once no reconcile is under way.
    async fn drained(&self) {
        // The sender is `self`: the channel cannot close while this waits.
        let _ = self.0.subscribe().wait_for(|count| *count == 0).await;
    }

    /// Resolves when the controller may be dropped after `signal`: once no reconcile is under
    /// way, or [`SHUTDOWN_GRACE`] after the signal. Returns whether reconciles were still
    /// under way then (and so are abandoned).
    pub async fn settled_after(&self, signal: impl Future<Output = ()>) -> bool {
        signal.await;
        tokio::time::timeout(SHUTDOWN_GRACE, self.drained())
            .await
            .is_err()
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn with_nothing_under_way_the_controller_stops_at_once() {
        let started = Instant::now();
        assert!(!InFlight::default().settled_after(async {}).await);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_under_way_may_finish_within_the_grace_period() {
        let in_flight = InFlight::default();
        let reconcile = tokio::spawn(in_flight.track(tokio::time::sleep(Duration::from_secs(2))));
        let started = Instant::now();
        assert!(
            !in_flight.settled_after(async {}).await,
            "nothing abandoned"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        reconcile.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_still_under_way_after_the_grace_period_is_abandoned() {
        let in_flight = InFlight::default();
        let _stuck = in_flight.track(std::future::pending::<()>());
        let started = Instant::now();
        assert!(in_flight.settled_after(async {}).await, "abandoned");
        assert_eq!(started.elapsed(), SHUTDOWN_GRACE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_reconcile_no_longer_counts() {
        let in_flight = InFlight::default();
        let abandoned = in_flight.track(std::future::pending::<()>());
        drop(abandoned);
        let started = Instant::now();
        assert!(!in_flight.settled_after(async {}).await);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
