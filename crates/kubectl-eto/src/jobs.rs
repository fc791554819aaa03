//! Finding eto's jobs of either kind, and reading what a person wants to know about them.

use eto_api::{MPIJob, TrainingJob};
use eto_engine::kind::{JobRef, Kind};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde::Serialize;

use crate::error::{Error, Request, is_not_found};

/// A job of either kind, owned.
#[derive(Clone, Debug)]
pub enum Job {
    /// A TrainingJob.
    Training(Box<TrainingJob>),
    /// An MPIJob.
    Mpi(Box<MPIJob>),
}

impl Job {
    /// The job, borrowed as the engine takes it.
    pub fn as_ref(&self) -> JobRef<'_> {
        match self {
            Self::Training(job) => JobRef::Training(job),
            Self::Mpi(job) => JobRef::Mpi(job),
        }
    }

    /// The job as its API has it, for `-o json` and `-o yaml`.
    pub fn to_value(&self) -> serde_json::Value {
        let value = match self {
            Self::Training(job) => serde_json::to_value(job),
            Self::Mpi(job) => serde_json::to_value(job),
        };
        value.unwrap_or_default()
    }
}

/// The resource name of `kind` as RBAC and error messages name it.
pub fn resource(kind: Kind) -> &'static str {
    match kind {
        Kind::TrainingJob => "trainingjobs.kai.alibabacloud.com",
        Kind::MpiJob => "mpijobs.kubeflow.org",
    }
}

/// Which kind a `JOB` argument asks for: `NAME` (either), `trainingjob/NAME` or `tj/NAME`,
/// `mpijob/NAME` or `mpij/NAME`.
pub fn parse_job_argument(argument: &str) -> (Option<Kind>, &str) {
    match argument.split_once('/') {
        Some((prefix, name)) => {
            let kind = match prefix.to_ascii_lowercase().as_str() {
                "trainingjob" | "trainingjobs" | "tj" => Some(Kind::TrainingJob),
                "mpijob" | "mpijobs" | "mpij" => Some(Kind::MpiJob),
                _ => None,
            };
            match kind {
                Some(kind) => (Some(kind), name),
                None => (None, argument),
            }
        }
        None => (None, argument),
    }
}

/// Lists the jobs of `kind` in `namespace` (all namespaces when `None`). A kind whose CRD is
/// not installed has no jobs; `Ok(None)` says so.
async fn list_kind(
    client: &Client,
    kind: Kind,
    namespace: Option<&str>,
) -> Result<Option<Vec<Job>>, Error> {
    let request = Request {
        verb: "list",
        resource: resource(kind),
        namespace,
    };
    let params = ListParams::default();
    let listed = match kind {
        Kind::TrainingJob => api::<TrainingJob>(client, namespace)
            .list(&params)
            .await
            .map(|list| {
                list.items
                    .into_iter()
                    .map(|job| Job::Training(Box::new(job)))
                    .collect()
            }),
        Kind::MpiJob => api::<MPIJob>(client, namespace)
            .list(&params)
            .await
            .map(|list| {
                list.items
                    .into_iter()
                    .map(|job| Job::Mpi(Box::new(job)))
                    .collect()
            }),
    };
    match listed {
        Ok(jobs) => Ok(Some(jobs)),
        Err(error) if is_not_found(&error) => Ok(None),
        Err(error) => Err(request.failed(error)),
    }
}

/// The jobs of `kind` in `namespace`, untyped: for writes that need no decoding.
pub fn api_of(client: &Client, kind: Kind, namespace: &str) -> Api<DynamicObject> {
    let resource = match kind {
        Kind::TrainingJob => ApiResource::erase::<TrainingJob>(&()),
        Kind::MpiJob => ApiResource::erase::<MPIJob>(&()),
    };
    Api::namespaced_with(client.clone(), namespace, &resource)
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// Every job of both kinds in `namespace` (all namespaces when `None`), sorted by namespace,
/// name and kind. Fails when neither kind's CRD is installed.
pub async fn list(client: &Client, namespace: Option<&str>) -> Result<Vec<Job>, Error> {
    let training = list_kind(client, Kind::TrainingJob, namespace).await?;
    let mpi = list_kind(client, Kind::MpiJob, namespace).await?;
    if training.is_none() && mpi.is_none() {
        return Err(Error::CrdMissing {
            kind: Kind::TrainingJob.name(),
            crd: resource(Kind::TrainingJob),
        });
    }
    let mut jobs: Vec<Job> = training
        .into_iter()
        .flatten()
        .chain(mpi.into_iter().flatten())
        .collect();
    jobs.sort_by(|a, b| {
        let key = |job: &Job| {
            let job = job.as_ref();
            (
                job.namespace().to_string(),
                job.name().to_string(),
                job.kind().name(),
            )
        };
        key(a).cmp(&key(b))
    });
    Ok(jobs)
}

/// The job `argument` names in `namespace` (see [`parse_job_argument`]). A bare name is looked
/// up as a TrainingJob first, then as an MPIJob.
pub async fn find(client: &Client, namespace: &str, argument: &str) -> Result<Job, Error> {
    let (kind, name) = parse_job_argument(argument);
    let kinds = match kind {
        Some(kind) => vec![kind],
        None => vec![Kind::TrainingJob, Kind::MpiJob],
    };
    let mut installed = false;
    for kind in kinds.iter().copied() {
        let request = Request {
            verb: "get",
            resource: resource(kind),
            namespace: Some(namespace),
        };
        let found = match kind {
            Kind::TrainingJob => api::<TrainingJob>(client, Some(namespace))
                .get_opt(name)
                .await
                .map(|job| job.map(|job| Job::Training(Box::new(job)))),
            Kind::MpiJob => api::<MPIJob>(client, Some(namespace))
                .get_opt(name)
                .await
                .map(|job| job.map(|job| Job::Mpi(Box::new(job)))),
        };
        match found {
            Ok(Some(job)) => return Ok(job),
            // A missing object and a missing API both answer 404: a list tells them apart.
            Ok(None) => installed |= list_kind(client, kind, Some(namespace)).await?.is_some(),
            Err(error) if is_not_found(&error) => {}
            Err(error) => return Err(request.failed(error)),
        }
    }
    if installed {
        Err(Error::JobNotFound {
            namespace: namespace.into(),
            name: name.into(),
        })
    } else {
        let kind = kinds[0];
        Err(Error::CrdMissing {
            kind: kind.name(),
            crd: resource(kind),
        })
    }
}

/// One line of `kubectl eto get`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// `TrainingJob` or `MPIJob`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Phase as eto reports it; empty before eto has seen the job.
    pub phase: String,
    /// Ready workers.
    pub ready: u32,
    /// Workers created but not ready.
    pub pending: u32,
    /// Workers the job asks for.
    pub desired: u32,
    /// Fewest workers it runs with.
    pub min: u32,
    /// Most workers it may have, if bounded.
    pub max: Option<u32>,
    /// Restarts of the whole job.
    pub restarts: u32,
    /// When the job was created.
    pub created: Option<jiff::Timestamp>,
}

impl Summary {
    /// The summary of `job`: counts from its status, bounds from its spec when the status
    /// has none yet (or the spec is invalid: then they are 0 and unbounded).
    pub fn of(job: &Job) -> Self {
        let job = job.as_ref();
        let status = job.status();
        let spec = eto_engine::validation::validate_job(job).ok();
        let workers = status.workers.clone().unwrap_or_default();
        let unsigned = |n: i32| u32::try_from(n).unwrap_or_default();
        let (min, max, desired) = match (&status.workers, &spec) {
            (Some(workers), _) => (
                unsigned(workers.min),
                workers.max.map(unsigned),
                unsigned(workers.desired),
            ),
            (None, Some(spec)) => (spec.workers.min, spec.workers.max, spec.workers.desired),
            (None, None) => (0, None, 0),
        };
        Self {
            kind: job.kind().name().into(),
            namespace: job.namespace().into(),
            name: job.name().into(),
            phase: status.phase.map(|p| format!("{p:?}")).unwrap_or_default(),
            ready: unsigned(workers.ready),
            pending: unsigned(workers.pending),
            desired,
            min,
            max,
            restarts: unsigned(status.restart_count),
            created: job
                .metadata()
                .creation_timestamp
                .as_ref()
                .map(|time| time.0),
        }
    }
}

/// The name `kubectl` uses for `job`: `trainingjob/NAME` or `mpijob/NAME`.
pub fn qualified_name(job: JobRef<'_>) -> String {
    format!("{}/{}", job.kind().name().to_ascii_lowercase(), job.name())
}
