//! eto's metrics with a sample in every family.

use eto_controller::Metrics;
use eto_controller::metrics::{DecisionLabels, Outcome, StopLabels};

/// Metrics in which every family has a sample: a labelled family is exposed only once it has
/// one, so a check of names, units or help texts over [`Metrics::encode`] sees them all.
pub fn every_family_sampled() -> Metrics {
    let metrics = Metrics::default();
    metrics
        .reconciliations
        .get_or_create(&Outcome {
            result: "ok".into(),
        })
        .inc();
    metrics.count_write("Pod", "apply");
    metrics
        .decisions
        .get_or_create(&DecisionLabels {
            kind: "TrainingJob".into(),
            reason: "WorkersCreated".into(),
        })
        .inc();
    metrics.count_tallies(
        "TrainingJob",
        &eto_engine::plan::Tallies {
            lost: vec!["Failed"],
            replacements: 1,
            suspends: vec!["BelowMinWorkers".into()],
            resumes: vec!["BelowMinWorkers".into()],
            scaling: vec![("ScaleOut".into(), true)],
            warned: 1,
            pod_failures: vec![("Worker", "Error".into())],
        },
    );
    metrics
        .kubeai_stops
        .get_or_create(&StopLabels {
            kind: "TrainingJob".into(),
            notice: "Suspend".into(),
            result: "acknowledged".into(),
        })
        .inc();
    metrics
}
