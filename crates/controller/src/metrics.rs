//! Prometheus metrics of the controller.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::job_gauges::JobGauges;

/// Labels of a reconcile outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    /// `ok`, or the error category.
    pub result: String,
}

/// Labels of a write to the API server.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// The kind of the object written, for example `Pod`.
    pub kind: String,
    /// `apply`, `apply-status`, `create` or `delete`.
    pub verb: String,
}

/// Labels of a decision (an event eto records).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// The kind of the job, `TrainingJob` or `MPIJob`.
    pub kind: String,
    /// The event's reason, for example `WorkerLost`, `Suspended` or `Resumed`.
    pub reason: String,
}

/// Labels of a lost worker.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LossLabels {
    /// The kind of the job.
    pub kind: String,
    /// `Failed`, `Evicted`, `Disrupted`, `Completed`, `Deleted` or `Silent`.
    pub reason: String,
}

/// The kind of a job, as a label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// `TrainingJob` or `MPIJob`.
    pub kind: String,
}

/// Labels of a suspend or resume.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// The kind of the job.
    pub kind: String,
    /// `BelowMinWorkers`, `LauncherDisrupted`, or `Suspended` when asked for.
    pub reason: String,
}

/// Labels of a pod that failed on its own.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PodFailureLabels {
    /// The kind of the job.
    pub kind: String,
    /// `Worker`, or the pod that coordinates the job's runs (`Launcher`, `Master`,
    /// `RendezvousStore`, `Lighthouse`).
    pub role: String,
    /// The kubelet's reason: a termination reason (`Error`, `OOMKilled`) or a waiting reason
    /// (`ImagePullBackOff`, `CreateContainerConfigError`, ...).
    pub reason: String,
}

/// Labels of a `kubeai` stop signal sent.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StopLabels {
    /// The kind of the job.
    pub kind: String,
    /// The notice it went with: `Suspend` or `Reclaim`.
    pub notice: String,
    /// `acknowledged`, `unreachable`, `no-answer` or `gone`.
    pub result: String,
}

/// Labels of a finished scaling request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScalingLabels {
    /// `ScaleIn` or `ScaleOut`.
    pub request: String,
    /// `succeeded` or `failed`.
    pub result: String,
}

/// The controller's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    /// Reconciles by outcome.
    pub reconciliations: Family<Outcome, Counter>,
    /// How long reconciles take.
    pub reconcile_duration: Histogram,
    /// Workers lost, by kind of job and kind of loss.
    pub workers_lost: Family<LossLabels, Counter>,
    /// Replacement workers created, by kind of job.
    pub worker_replacements: Family<KindLabels, Counter>,
    /// Pods that failed on their own, or were seen waiting for good, by kind, role and reason.
    pub pod_failures: Family<PodFailureLabels, Counter>,
    /// Workers told that their node announced it goes away, by kind of job.
    pub node_warnings: Family<KindLabels, Counter>,
    /// Suspends, by kind of job and reason.
    pub suspends: Family<ReasonLabels, Counter>,
    /// Resumes, by kind of job and the reason of the suspend they end.
    pub resumes: Family<ReasonLabels, Counter>,
    /// ScaleIn and ScaleOut requests finished, by request kind and result.
    pub scaling_requests: Family<ScalingLabels, Counter>,
    /// Objects written (applied, created or deleted), status writes and events excluded.
    pub writes: Counter,
    /// 1 while this replica leads (or runs without leader election), 0 while it stands by.
    pub leader: Gauge,
    /// Writes to the API server by kind and verb (children, launcher Jobs, Secrets, statuses).
    pub api_writes: Family<WriteLabels, Counter>,
    /// Decisions (the events eto records) by kind of job and reason.
    pub decisions: Family<DecisionLabels, Counter>,
    /// Seconds from a change of a job's pods being seen to the updated discovery data being
    /// written (the launcher's annotation or the job's ConfigMap).
    pub discovery_latency: Histogram,
    /// The jobs in the caches, when scraped.
    pub job_gauges: std::sync::Arc<JobGauges>,
    /// When a change of each job's pods was first seen, until a reconcile of the job takes it.
    pub pod_changes: PodChanges,
    /// The `kubeai` SDK's stop signals sent, by kind of job, notice and result.
    pub kubeai_stops: Family<StopLabels, Counter>,
}

/// When a change of each job's pods was first seen and not yet reconciled: the start of a
/// [`Metrics::discovery_latency`] measurement.
#[derive(Debug, Default)]
pub struct PodChanges(
    std::sync::Mutex<std::collections::HashMap<(&'static str, String, String), std::time::Instant>>,
);

impl PodChanges {
    /// A change of a pod of job `namespace/name` of `kind` is seen now (the first one counts
    /// until a reconcile takes it).
    pub fn seen(&self, kind: &'static str, namespace: &str, name: &str) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry((kind, namespace.into(), name.into()))
            .or_insert_with(std::time::Instant::now);
    }

    /// Takes when a change of the job's pods was first seen since the last take, if any.
    pub fn take(
        &self,
        kind: &'static str,
        namespace: &str,
        name: &str,
    ) -> Option<std::time::Instant> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&(kind, namespace.into(), name.into()))
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("eto");
        let reconciliations = Family::<Outcome, Counter>::default();
        registry.register(
            "reconciliations",
            "Reconciles of jobs, of every kind, by outcome",
            reconciliations.clone(),
        );
        let reconcile_duration =
            Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]);
        registry.register_with_unit(
            "reconcile_duration",
            "Duration of reconciles",
            Unit::Seconds,
            reconcile_duration.clone(),
        );
        let workers_lost = Family::<LossLabels, Counter>::default();
        registry.register(
            "workers_lost",
            "Workers lost, by kind of job and kind of loss (Failed, Evicted, Disrupted, Completed, Deleted, Silent)",
            workers_lost.clone(),
        );
        let worker_replacements = Family::<KindLabels, Counter>::default();
        registry.register(
            "worker_replacements",
            "Replacement workers created for lost ones",
            worker_replacements.clone(),
        );
        let pod_failures = Family::<PodFailureLabels, Counter>::default();
        registry.register(
            "pod_failures",
            "Pods that failed on their own (their code, image or configuration) or were seen waiting for good (ImagePullBackOff, CreateContainerConfigError, ...), by role and the kubelet's reason; their replacements back off",
            pod_failures.clone(),
        );
        let node_warnings = Family::<KindLabels, Counter>::default();
        registry.register(
            "node_warnings",
            "Workers told that their node announced it goes away (an advance warning of a spot reclaim), acted on at once",
            node_warnings.clone(),
        );
        let suspends = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "suspends",
            "Jobs suspended, by reason (BelowMinWorkers, LauncherDisrupted, or Suspended when asked for)",
            suspends.clone(),
        );
        let resumes = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "resumes",
            "Jobs resumed, by the reason of the suspend they end",
            resumes.clone(),
        );
        let scaling_requests = Family::<ScalingLabels, Counter>::default();
        registry.register(
            "scaling_requests",
            "ScaleIn and ScaleOut requests finished, by result",
            scaling_requests.clone(),
        );
        let writes = Counter::default();
        registry.register(
            "child_writes",
            "Children applied, created or deleted",
            writes.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica reconciles (it holds the lease, or runs without leader election), 0 while it stands by",
            leader.clone(),
        );
        let api_writes = Family::<WriteLabels, Counter>::default();
        registry.register(
            "api_writes",
            "Writes to the API server by kind and verb",
            api_writes.clone(),
        );
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "decisions",
            "Decisions (events eto records) by kind of job and reason",
            decisions.clone(),
        );
        let discovery_latency = Histogram::new([
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ]);
        registry.register_with_unit(
            "discovery_update",
            "Time from a change of a job's pods being seen to its discovery data being written",
            Unit::Seconds,
            discovery_latency.clone(),
        );
        let kubeai_stops = Family::<StopLabels, Counter>::default();
        registry.register(
            "kubeai_stops",
            "Stop signals sent to the kubeai SDK in the training pods with a notice, by result (acknowledged, unreachable, no-answer, gone)",
            kubeai_stops.clone(),
        );
        let job_gauges = std::sync::Arc::new(JobGauges::default());
        registry.register_collector(Box::new(std::sync::Arc::clone(&job_gauges)));
        Self {
            registry,
            api_writes,
            decisions,
            discovery_latency,
            job_gauges,
            kubeai_stops,
            pod_changes: PodChanges::default(),
            leader,
            reconciliations,
            reconcile_duration,
            workers_lost,
            worker_replacements,
            pod_failures,
            node_warnings,
            suspends,
            resumes,
            scaling_requests,
            writes,
        }
    }
}

impl Metrics {
    /// Counts a write of a child (applied, created or deleted) of `kind` with `verb`.
    pub fn count_write(&self, kind: &str, verb: &str) {
        self.writes.inc();
        self.api_writes
            .get_or_create(&WriteLabels {
                kind: kind.into(),
                verb: verb.into(),
            })
            .inc();
    }

    /// Counts a write to a job or a request (its status, or its owners) of `kind` with `verb`;
    /// unlike [`Metrics::count_write`], not a child's.
    pub fn count_request_write(&self, kind: &str, verb: &str) {
        self.api_writes
            .get_or_create(&WriteLabels {
                kind: kind.into(),
                verb: verb.into(),
            })
            .inc();
    }

    /// Counts what a carried-out plan of a job of `kind` decided.
    pub fn count_tallies(&self, kind: &str, tallies: &eto_engine::plan::Tallies) {
        for reason in &tallies.lost {
            self.workers_lost
                .get_or_create(&LossLabels {
                    kind: kind.into(),
                    reason: (*reason).into(),
                })
                .inc();
        }
        if tallies.replacements > 0 {
            self.worker_replacements
                .get_or_create(&KindLabels { kind: kind.into() })
                .inc_by(u64::from(tallies.replacements));
        }
        for (role, reason) in &tallies.pod_failures {
            self.pod_failures
                .get_or_create(&PodFailureLabels {
                    kind: kind.into(),
                    role: (*role).into(),
                    reason: reason.clone(),
                })
                .inc();
        }
        if tallies.warned > 0 {
            self.node_warnings
                .get_or_create(&KindLabels { kind: kind.into() })
                .inc_by(u64::from(tallies.warned));
        }
        for (family, reasons) in [
            (&self.suspends, &tallies.suspends),
            (&self.resumes, &tallies.resumes),
        ] {
            for reason in reasons {
                family
                    .get_or_create(&ReasonLabels {
                        kind: kind.into(),
                        reason: reason.clone(),
                    })
                    .inc();
            }
        }
        for (request, succeeded) in &tallies.scaling {
            self.scaling_requests
                .get_or_create(&ScalingLabels {
                    request: request.clone(),
                    result: if *succeeded { "succeeded" } else { "failed" }.into(),
                })
                .inc();
        }
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Encoding into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
