//! Gauges of the jobs eto manages, read from its job caches at each scrape: jobs by kind and
//! phase, and each job's desired, ready and pending workers. A standby has no caches and so
//! no such series.

use std::sync::RwLock;

use kube::api::DynamicObject;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

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

/// Reads the job caches of a running controller when scraped.
#[derive(Debug, Default)]
pub struct JobGauges {
    caches: RwLock<Vec<(&'static str, Store<DynamicObject>)>>,
}

impl JobGauges {
    /// Reports the jobs of these caches (kind name and cache) from now on.
    pub fn show(&self, caches: Vec<(&'static str, Store<DynamicObject>)>) {
        *self
            .caches
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = caches;
    }

    /// Reports nothing from now on (the controller stopped).
    pub fn clear(&self) {
        self.show(Vec::new());
    }
}

impl Collector for JobGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let jobs = Family::<JobPhaseLabels, Gauge>::default();
        let workers = Family::<JobWorkerLabels, Gauge>::default();
        let caches = self
            .caches
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (kind, cache) in caches.iter() {
            for job in cache.state() {
                let status = &job.data["status"];
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
        workers.encode(described)
    }
}
