//! Finding eto's jobs of every kind, and reading what a person wants to know about them.

use eto_engine::job::{JobRef, Kind};
use eto_engine::kind::OwnedJob;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use serde::Serialize;

use crate::error::{Error, Request, is_not_found};

/// A job of any kind, owned.
pub type Job = OwnedJob;

/// Which kind a `JOB` argument asks for: `NAME` (any), or `KIND/NAME` where `KIND` is one of
/// the kind's aliases (`trainingjob/NAME` or `tj/NAME`, `mpijob/NAME` or `mpij/NAME`).
pub fn parse_job_argument(argument: &str) -> (Option<Kind>, &str) {
    match argument.split_once('/') {
        Some((prefix, name)) => match Kind::of_alias(prefix) {
            Some(kind) => (Some(kind), name),
            None => (None, argument),
        },
        None => (None, argument),
    }
}

/// Decodes `object`, a job of `kind` the API server returned for `request`.
fn decode(kind: Kind, object: DynamicObject, request: &Request<'_>) -> Result<Job, Error> {
    let value = serde_json::to_value(object).unwrap_or_default();
    // What a job names (a TrainJob's runtime) is not read: only the job and its status are shown.
    OwnedJob::parse(kind, value, None).map_err(|error| Error::Undecodable {
        resource: request.resource.to_string(),
        message: error.to_string(),
    })
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
        resource: kind.vocabulary().resource,
        namespace,
    };
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &kind.api_resource()),
        None => Api::all_with(client.clone(), &kind.api_resource()),
    };
    match api.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .map(|object| decode(kind, object, &request))
            .collect::<Result<_, _>>()
            .map(Some),
        Err(error) if is_not_found(&error) => Ok(None),
        Err(error) => Err(request.failed(error)),
    }
}

/// The jobs of `kind` in `namespace`, untyped: for writes that need no decoding.
pub fn api_of(client: &Client, kind: Kind, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &kind.api_resource())
}

/// Every job of every kind in `namespace` (all namespaces when `None`), sorted by namespace,
/// name and kind. Fails when no kind's CRD is installed.
pub async fn list(client: &Client, namespace: Option<&str>) -> Result<Vec<Job>, Error> {
    let mut jobs = Vec::new();
    let mut installed = false;
    for kind in Kind::ALL {
        if let Some(listed) = list_kind(client, kind, namespace).await? {
            installed = true;
            jobs.extend(listed);
        }
    }
    if !installed {
        return Err(Error::NoCrdInstalled);
    }
    jobs.sort_by(|a, b| {
        let key = |job: &Job| {
            let job = job.as_ref();
            (
                job.namespace().to_string(),
                job.name().to_string(),
                job.kind().vocabulary().name,
            )
        };
        key(a).cmp(&key(b))
    });
    Ok(jobs)
}

/// The job `argument` names in `namespace` (see [`parse_job_argument`]). A bare name is looked
/// up as each kind in turn, a TrainingJob first.
pub async fn find(client: &Client, namespace: &str, argument: &str) -> Result<Job, Error> {
    let (kind, name) = parse_job_argument(argument);
    let kinds = match kind {
        Some(kind) => vec![kind],
        None => Kind::ALL.to_vec(),
    };
    let mut installed = false;
    for kind in kinds.iter().copied() {
        let request = Request {
            verb: "get",
            resource: kind.vocabulary().resource,
            namespace: Some(namespace),
        };
        match api_of(client, kind, namespace).get_opt(name).await {
            Ok(Some(object)) => return decode(kind, object, &request),
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
            kind: kind.vocabulary().name,
            crd: kind.vocabulary().resource,
        })
    }
}

/// One line of `kubectl eto get`.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    /// Its goodput ledger, as its status holds it (see [`Summary::goodput_at`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goodput: Option<eto_engine::goodput::Goodput>,
}

impl Summary {
    /// The summary of `job`: counts from its status, bounds from its spec when the status
    /// has none yet (or the spec is invalid: then they are 0 and unbounded).
    pub fn of(job: &Job) -> Self {
        let job = job.as_ref();
        let status = job.status();
        let spec = job.validate().ok();
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
            kind: job.kind().vocabulary().name.into(),
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
            goodput: status.goodput,
        }
    }

    /// The job's productive share at `now` (`96.3%`) and the bucket that took most of the
    /// rest, with its time (`reformation 41s`); `-` for each before eto kept a ledger.
    pub fn goodput_at(&self, now: jiff::Timestamp) -> (String, String) {
        let Some(ledger) = &self.goodput else {
            return ("-".into(), "-".into());
        };
        let seconds = eto_engine::goodput::at(ledger, now);
        let ratio = eto_engine::goodput::ratio(&seconds)
            .map_or("-".into(), |ratio| format!("{:.1}%", 100.0 * ratio));
        let lost = eto_engine::goodput::largest_loss(&seconds).map_or("-".into(), |bucket| {
            format!("{} {:.0}s", bucket.name(), seconds.get(bucket))
        });
        (ratio, lost)
    }
}

/// The name `kubectl` uses for `job`: `trainingjob/NAME` or `mpijob/NAME`.
pub fn qualified_name(job: JobRef<'_>) -> String {
    format!(
        "{}/{}",
        job.kind().vocabulary().name.to_ascii_lowercase(),
        job.name()
    )
}
