//! Prometheus metrics of the controller.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of a reconcile outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    /// `ok`, or the error category.
    pub result: String,
}

/// The controller's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    /// Reconciles by outcome.
    pub reconciliations: Family<Outcome, Counter>,
    /// How long reconciles take.
    pub reconcile_duration: Histogram,
    /// Workers lost (failed, evicted, disrupted, vanished).
    pub workers_lost: Counter,
    /// Objects written (applied, created or deleted), status writes and events excluded.
    pub writes: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("eto");
        let reconciliations = Family::<Outcome, Counter>::default();
        registry.register(
            "reconciliations",
            "Reconciles of jobs (TrainingJobs and MPIJobs), by outcome",
            reconciliations.clone(),
        );
        let reconcile_duration =
            Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]);
        registry.register(
            "reconcile_duration_seconds",
            "Duration of reconciles",
            reconcile_duration.clone(),
        );
        let workers_lost = Counter::default();
        registry.register(
            "workers_lost",
            "Workers that failed, were evicted or disrupted, or vanished",
            workers_lost.clone(),
        );
        let writes = Counter::default();
        registry.register(
            "child_writes",
            "Children applied, created or deleted",
            writes.clone(),
        );
        Self {
            registry,
            reconciliations,
            reconcile_duration,
            workers_lost,
            writes,
        }
    }
}

impl Metrics {
    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Encoding into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
