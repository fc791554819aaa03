//! The rendezvous eto runs for an elastic PyTorchJob: a store of its own, off the workers.
//!
//! training-operator v1 points every torchrun agent at `<job>-worker-0`, whose agent then
//! hosts torchrun's c10d store (its host name is the endpoint's): losing worker 0 loses the
//! rendezvous, and every other worker with it. eto instead runs the store in a pod of its own,
//! `<job>-rdzv`, asking for no accelerator and placed as launchers are (off spot capacity and
//! off nodes that announced they go). Every agent is a client of it (`is_host=false`), so any
//! worker, worker 0 included, may go without ending the rendezvous. The store is the one pod
//! the run cannot lose: losing it ends the run as losing a launcher does (see
//! `plan/run/launcher_loss.rs`), and the next run resumes from the checkpoint.
//!
//! Each run has a rendezvous id of its own (`<rdzvId, else the job's uid>-<run>`), so that a
//! resumed or restarted run never meets the closed or half-finished rendezvous of an earlier
//! one, even on a store that outlived it.
//!
//! The pods reach each other through one headless Service, `<job>-workers`, that publishes
//! every pod of the job, ready or not: each pod's host name is its own name in that
//! subdomain, so the store is `<job>-rdzv.<job>-workers` and the address torchrun's rank 0
//! advertises (its fully qualified host name) resolves for the others.
//!
//! eto hosts the rendezvous of a job that is elastic, has no Master, and leaves the rendezvous
//! to it: no `rdzvHost`, `rdzvBackend` unset or `c10d`, and not `standalone`. A job that sets
//! any of these runs with v1's wiring, as written, and gives up what the store buys.

use std::collections::BTreeMap;

use eto_api::PyTorchJob;
use eto_api::job_status::NodeCooldown;
use eto_api::pytorch_job::PYTORCH_CONTAINER;
use eto_api::well_known::RUN_LABEL;
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, Pod, PodSpec, ResourceRequirements, Service, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::Defaulted;
use crate::builders::place_launcher;
use crate::job::JobContext;

/// The port the store listens on unless `rdzvPort` names another: torchrun's default for
/// the c10d backend.
pub const DEFAULT_STORE_PORT: i32 = 29400;

/// The value of the replica-type label on the store's pod: neither `master` nor `worker`, so
/// that tools counting a job's Masters and Workers do not count it.
pub const STORE_REPLICA_TYPE: &str = "rendezvous";

/// The program the store's pod runs (`store_program.py`): a `TCPStore` server from the
/// training image's own PyTorch, serving until it is stopped, and beside it the store's report
/// (see [`crate::group_report`]) over HTTP on the report port: `POST /saved` records that the
/// training code saved the checkpoint a notice asked for, `GET /report` answers the latest of
/// those, the state of the run's rendezvous as torchrun's c10d backend keeps it (each agent
/// with its host and how long ago its heartbeat came, the latest rounds that formed) and the
/// orders it holds; `POST /orders` takes eto's orders (see [`crate::group_orders`]), which it
/// applies to the rendezvous every 0.2 s.
const STORE_PROGRAM: &str = include_str!("store_program.py");

/// How long torchrun's agents of `job` go without a heartbeat before the others take them
/// for dead: `keep_alive_interval` times `keep_alive_max_attempt` of its `rdzvConf`, torchrun's
/// 5 s and 3 where unset (or unreadable: torchrun then fails at start, and the value does
/// not matter).
pub fn heartbeat_timeout(job: &PyTorchJob) -> std::time::Duration {
    let conf = |key: &str| {
        job.spec
            .elastic_policy
            .as_ref()?
            .rdzv_conf
            .iter()
            .flatten()
            .find(|entry| entry.key.as_deref() == Some(key))?
            .value
            .as_deref()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|value| value.is_finite() && *value > 0.0)
    };
    let interval = conf("keep_alive_interval").unwrap_or(5.0);
    let attempts = conf("keep_alive_max_attempt").unwrap_or(3.0);
    std::time::Duration::from_secs_f64((interval * attempts).min(86_400.0))
}

/// The rendezvous eto hosts for a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostedRendezvous {
    /// The job's name.
    pub job: String,
    /// The store's port.
    pub port: i32,
    /// What the run id is made of: `rdzvId`, else the job's uid.
    pub id_prefix: String,
}

impl HostedRendezvous {
    /// The rendezvous of `job`, if eto hosts it (see the module documentation).
    pub fn of(job: &PyTorchJob) -> Option<Self> {
        let defaulted = Defaulted::of(job);
        let policy = defaulted.elastic?.policy;
        let leaves_it_to_eto = defaulted.master.is_none()
            && defaulted.worker.is_some()
            && policy.rdzv_host.is_none()
            && policy.rdzv_backend.as_deref().is_none_or(|b| b == "c10d")
            && policy.standalone != Some(true)
            && policy.replica_groups.is_none();
        leaves_it_to_eto.then(|| Self {
            job: job.metadata.name.clone().unwrap_or_default(),
            port: policy.rdzv_port.unwrap_or(DEFAULT_STORE_PORT),
            id_prefix: policy
                .rdzv_id
                .clone()
                .or_else(|| job.metadata.uid.clone())
                .unwrap_or_default(),
        })
    }

    /// The store's pod: `<job>-rdzv`.
    pub fn store_name(&self) -> String {
        store_name(&self.job)
    }

    /// The headless Service that names every pod of the job: `<job>-workers`.
    pub fn service_name(&self) -> String {
        service_name(&self.job)
    }

    /// The store's host name: `<job>-rdzv.<job>-workers`.
    pub fn host(&self) -> String {
        format!("{}.{}", self.store_name(), self.service_name())
    }

    /// Where the agents find the store: `<job>-rdzv.<job>-workers:<port>`.
    pub fn endpoint(&self) -> String {
        format!("{}:{}", self.host(), self.port)
    }

    /// The rendezvous id of run `run`.
    pub fn run_id(&self, run: i32) -> String {
        format!("{}-{run}", self.id_prefix)
    }

    /// The port of the store's report: the one after the store's (before it, for 65535).
    pub fn report_port(&self) -> i32 {
        if self.port < 65535 {
            self.port + 1
        } else {
            self.port - 1
        }
    }

    /// What the agents of run `run` are told of it.
    pub fn of_run(&self, run: i32) -> RunRendezvous {
        RunRendezvous {
            endpoint: self.endpoint(),
            id: self.run_id(run),
            saved_url: format!(
                "http://{}:{}{}",
                self.host(),
                self.report_port(),
                crate::group_report::SAVED_PATH
            ),
        }
    }
}

/// The rendezvous of one run, as its agents are told of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRendezvous {
    /// `host:port` of the store.
    pub endpoint: String,
    /// The run's rendezvous id.
    pub id: String,
    /// Where the training code says it saved a checkpoint (`ETO_SAVED_URL`).
    pub saved_url: String,
}

/// The store's pod of job `job`: `<job>-rdzv`.
pub fn store_name(job: &str) -> String {
    format!("{job}-rdzv")
}

/// The headless Service naming every pod of job `job`: `<job>-workers`.
pub fn service_name(job: &str) -> String {
    format!("{job}-workers")
}

/// The store's pod of `job`'s current run, placed as a launcher is and away from the nodes
/// `avoided`; `None` without a Worker template.
///
/// It runs [`STORE_PROGRAM`] with the image of the Workers' `pytorch` container (so the store
/// speaks the Workers' own PyTorch version), as every pod [`beside_the_workers`] is. It never
/// restarts in place (a restarted store would have forgotten the rendezvous): its end is the
/// run's loss.
pub fn store_pod(
    job: JobContext<'_>,
    hosted: &HostedRendezvous,
    avoided: &[NodeCooldown],
) -> Option<Pod> {
    let container = Container {
        name: "rendezvous".into(),
        command: Some(vec![
            "/bin/sh".into(),
            "-c".into(),
            r#"command -v python3 >/dev/null && exec python3 -c "$0" "$@"; exec python -c "$0" "$@""#
                .into(),
            STORE_PROGRAM.into(),
            hosted.port.to_string(),
            hosted.report_port().to_string(),
            hosted.run_id(job.run),
        ]),
        ports: Some(vec![
            tcp_port("rendezvous", hosted.port),
            tcp_port("report", hosted.report_port()),
        ]),
        ..Container::default()
    };
    beside_the_workers(
        job,
        hosted.store_name(),
        STORE_REPLICA_TYPE,
        container,
        avoided,
    )
}

/// A pod of `job`'s current run that serves its Workers and trains nothing (the rendezvous
/// store, the Lighthouse): pod `name` running `container` with the image, pull policy and
/// security context of the Workers' `pytorch` container, under the Workers' scheduling
/// constraints, pull secrets, security context and DNS settings, without their volumes,
/// other containers or resources: it asks for a tenth of a CPU and 256 MiB. Its host name is
/// its name in the Service that names every pod of the job, its replica type `replica_type`,
/// and it is placed as a launcher is, away from the nodes `avoided`. It never restarts in
/// place. `None` without a Worker template.
pub(super) fn beside_the_workers(
    job: JobContext<'_>,
    name: String,
    replica_type: &str,
    mut container: Container,
    avoided: &[NodeCooldown],
) -> Option<Pod> {
    let template = job.job_ref.worker_template()?;
    let workers = template.spec.clone().unwrap_or_default();
    let first = workers
        .containers
        .iter()
        .find(|c| c.name == PYTORCH_CONTAINER)
        .or_else(|| workers.containers.first())?;
    container.image.clone_from(&first.image);
    container
        .image_pull_policy
        .clone_from(&first.image_pull_policy);
    container
        .security_context
        .clone_from(&first.security_context);
    container.resources = Some(ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity("100m".into())),
            ("memory".to_string(), Quantity("256Mi".into())),
        ])),
        ..ResourceRequirements::default()
    });
    let mut spec = PodSpec {
        containers: vec![container],
        restart_policy: Some("Never".into()),
        hostname: Some(name.clone()),
        subdomain: Some(service_name(job.name())),
        node_selector: workers.node_selector,
        affinity: workers.affinity,
        tolerations: workers.tolerations,
        image_pull_secrets: workers.image_pull_secrets,
        security_context: workers.security_context,
        service_account_name: workers.service_account_name,
        priority_class_name: workers.priority_class_name,
        runtime_class_name: workers.runtime_class_name,
        host_network: workers.host_network,
        dns_policy: workers.dns_policy,
        dns_config: workers.dns_config,
        ..PodSpec::default()
    };
    place_launcher(&job, &mut spec, avoided);
    let mut labels = job.labels();
    labels.insert(
        job.kind().vocabulary().role_label.into(),
        replica_type.into(),
    );
    labels.insert(RUN_LABEL.into(), job.run.to_string());
    let mut metadata = job.metadata(name);
    metadata.labels = Some(labels);
    Some(Pod {
        metadata,
        spec: Some(spec),
        status: None,
    })
}

/// A TCP port `name` of a container.
pub(super) fn tcp_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }
}

/// The headless Service `<job>-workers` of `job`: it selects every pod of the job and
/// publishes them ready or not, so that each pod's `<name>.<job>-workers` resolves from its
/// creation on.
pub fn service(job: JobContext<'_>) -> Service {
    let selector = BTreeMap::from([(
        job.kind().vocabulary().job_name_label.to_string(),
        job.name().to_string(),
    )]);
    Service {
        metadata: job.metadata(service_name(job.name())),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector),
            publish_not_ready_addresses: Some(true),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}
