//! Gauges of the jobs eto manages, read from its job caches at each scrape: jobs by kind and
//! phase, each job's desired, ready and pending workers, and its goodput ledger (seconds by
//! bucket, counted to the scrape, and the productive share). A standby has no caches and so
//! no such series.

use std::sync::RwLock;

use eto_engine::goodput::{self, Goodput, GoodputBucket};
use kube::api::DynamicObject;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Unit;

/// Labels of a count of jobs.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobPhaseLabels {
    /// `TrainingJob` or `MPIJob`.
    pub kind: String,
    /// The job's phase; `Pending` before eto wrote one.
    pub phase: String,
}

/// Labels of a job's count of workers in one state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobWorkerLabels {
    /// `TrainingJob` or `MPIJob`.
    pub kind: String,
    /// The job's namespace.
    pub namespace: String,
    /// The job's name.
    pub job: String,
    /// `desired`, `ready` or `pending`.
    pub state: String,
}

/// Labels of a job's seconds in one bucket of its goodput ledger.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobBucketLabels {
    /// The job's kind.
    pub kind: String,
    /// The job's namespace.
    pub namespace: String,
    /// The job's name.
    pub job: String,
    /// The bucket: `productive`, `waiting`, `startUp`, `reformation`, `checkpoint`,
    /// `retrained` or `other`.
    pub bucket: String,
}

/// Labels of a job's productive share.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
    /// The job's kind.
    pub kind: String,
    /// The job's namespace.
    pub namespace: String,
    /// The job's name.
    pub job: String,
}

/// The time the ledgers are counted to, the controller's clock.
pub type Clock = std::sync::Arc<dyn Fn() -> jiff::Timestamp + Send + Sync>;

/// The job caches a running controller reports, and its clock.
#[derive(Default)]
struct Shown {
    caches: Vec<(&'static str, Store<DynamicObject>)>,
    clock: Option<Clock>,
}

/// Reads the job caches of a running controller when scraped.
#[derive(Default)]
pub struct JobGauges {
    shown: RwLock<Shown>,
}

impl std::fmt::Debug for JobGauges {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("JobGauges").finish_non_exhaustive()
    }
}

impl JobGauges {
    /// Reports the jobs of these caches (kind name and cache) from now on, their ledgers
    /// counted up to `clock`'s time at each scrape.
    pub fn show(&self, caches: Vec<(&'static str, Store<DynamicObject>)>, clock: Clock) {
        *self
            .shown
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Shown {
            caches,
            clock: Some(clock),
        };
    }

    /// Reports nothing from now on (the controller stopped).
    pub fn clear(&self) {
        *self
            .shown
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Shown::default();
    }
}

impl Collector for JobGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let jobs = Family::<JobPhaseLabels, Gauge>::default();
        let workers = Family::<JobWorkerLabels, Gauge>::default();
        let buckets =
            Family::<JobBucketLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        let ratios = Family::<JobLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        let shown = self
            .shown
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = shown.clock.as_ref().map(|clock| clock());
        for (kind, cache) in shown.caches.iter() {
            for job in cache.state() {
                let status = &job.data["status"];
                let ledger =
                    now.zip(serde_json::from_value::<Goodput>(status["goodput"].clone()).ok());
                if let Some((now, ledger)) = ledger {
                    let labels = JobLabels {
                        kind: (*kind).into(),
                        namespace: job.metadata.namespace.clone().unwrap_or_default(),
                        job: job.metadata.name.clone().unwrap_or_default(),
                    };
                    let seconds = goodput::at(&ledger, now);
                    for bucket in GoodputBucket::ALL {
                        buckets
                            .get_or_create(&JobBucketLabels {
                                kind: labels.kind.clone(),
                                namespace: labels.namespace.clone(),
                                job: labels.job.clone(),
                                bucket: bucket.name().into(),
                            })
                            .inc_by(seconds.get(bucket));
                    }
                    if let Some(ratio) = goodput::ratio(&seconds) {
                        ratios.get_or_create(&labels).set(ratio);
                    }
                }
                let phase = status["phase"].as_str().unwrap_or("Pending");
                jobs.get_or_create(&JobPhaseLabels {
                    kind: (*kind).into(),
                    phase: phase.into(),
                })
                .inc();
                for state in ["desired", "ready", "pending"] {
                    let Some(count) = status["workers"][state].as_i64() else {
                        continue;
                    };
                    workers
                        .get_or_create(&JobWorkerLabels {
                            kind: (*kind).into(),
                            namespace: job.metadata.namespace.clone().unwrap_or_default(),
                            job: job.metadata.name.clone().unwrap_or_default(),
                            state: state.into(),
                        })
                        .set(count);
                }
            }
        }
        let described = encoder.encode_descriptor(
            "jobs",
            "Jobs by kind and phase",
            None,
            jobs.metric_type(),
        )?;
        jobs.encode(described)?;
        let described = encoder.encode_descriptor(
            "job_workers",
            "Workers of each job: desired, ready (listed by host discovery) and pending",
            None,
            workers.metric_type(),
        )?;
        workers.encode(described)?;
        let described = encoder.encode_descriptor(
            "job_goodput",
            "Seconds of each job's life by where they went (its status.goodput ledger): productive, waiting, startUp, reformation, checkpoint, retrained, other",
            Some(&Unit::Seconds),
            buckets.metric_type(),
        )?;
        buckets.encode(described)?;
        let ratio = Unit::Other("ratio".into());
        let described = encoder.encode_descriptor(
            "job_goodput",
            "Share of each job's life that was productive (new training steps), 0 to 1",
            Some(&ratio),
            ratios.metric_type(),
        )?;
        ratios.encode(described)
    }
}
