//! The ScaleIn and ScaleOut controllers.
//!
//! A request's job carries it out in its own reconcile (see [`eto_engine::scaling`]), which
//! reads the requests from the caches. The controller of each kind of request does two things:
//! when a request changes and its TrainingJob exists, it asks for a reconcile of that job; when
//! no TrainingJob of its namespace has the name the request gives, it fails the request and
//! records a Warning event on it. It decides nothing before the TrainingJob cache has completed
//! its first list (it looks again every [`LISTING_RETRY`] until then), so a job is never taken
//! for missing because the cache was still empty.

use std::sync::Arc;

use eto_engine::job::Kind;
use eto_engine::scaling::{self, Scaler, ScalerKind};
use futures::channel::mpsc::UnboundedSender;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;

use crate::apply;
use crate::context::Context;
use crate::error::Error;
use crate::first_lists::Listed;
use crate::resources::JOBS;
use crate::retries;

/// What a request controller needs.
pub struct Requests {
    /// The kind of request it handles.
    pub kind: ScalerKind,
    /// Its resource.
    pub resource: ApiResource,
    /// The TrainingJob resource.
    pub job_resource: ApiResource,
    /// The client, caches, event publisher and clock the job controller uses too.
    pub shared: Arc<Context>,
    /// Asks the job controller for a reconcile of a job.
    pub poke: UnboundedSender<ObjectRef<DynamicObject>>,
    /// Which caches have completed their first list.
    pub listed: Listed,
}

/// How soon a request is looked at again while the TrainingJob cache is still listing.
pub const LISTING_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Handles one request; see the module documentation.
///
/// # Errors
/// Writing a failed request's status failed; it is tried again (see [`crate::retries`]).
pub async fn reconcile(
    object: Arc<DynamicObject>,
    requests: Arc<Requests>,
) -> Result<Action, Error> {
    let key = retries::key(requests.kind.as_str(), &object.metadata);
    let result = handle(object, &requests).await;
    if result.is_ok() {
        requests.shared.retries.succeeded(&key);
    }
    result
}

async fn handle(object: Arc<DynamicObject>, requests: &Requests) -> Result<Action, Error> {
    if !requests.listed.has(&[JOBS]) {
        return Ok(Action::requeue(LISTING_RETRY));
    }
    let value = serde_json::to_value(object.as_ref()).map_err(|source| Error::Serialize {
        what: "the request",
        source,
    })?;
    let scaler = Scaler::read(requests.kind, &value);
    let ctx = &requests.shared;
    let job =
        ObjectRef::new_with(&scaler.job, requests.job_resource.clone()).within(&scaler.namespace);
    if !scaler.job.is_empty()
        && ctx
            .stores
            .jobs(Kind::SCALED_BY_REQUESTS)
            .get(&job)
            .is_some()
    {
        // The job's reconcile carries the request out. The channel closes only when the job
        // controller stops, and then nothing is to be carried out.
        let _ = requests.poke.unbounded_send(job);
        return Ok(Action::await_change());
    }
    let now = (ctx.clock)();
    let (orphaned, requeue) = scaling::orphan(&scaler, false, now);
    if let Some(orphaned) = orphaned {
        let target = apply::Target {
            object: object.as_ref(),
            resource: &requests.resource,
        };
        apply::request_update(ctx, &target, None, &orphaned.update).await?;
        apply::publish(
            ctx,
            &target,
            EventType::Warning,
            scaling::SCALE_FAILED,
            "Scale",
            orphaned.message,
        )
        .await;
    }
    Ok(match requeue {
        Some(at) => Action::requeue(
            std::time::Duration::try_from(at.duration_since(now)).unwrap_or_default(),
        ),
        None => Action::await_change(),
    })
}

/// What to do after a request could not be handled: log it and try again, sooner after a
/// first failure than after many (see [`crate::retries`]).
pub fn error_policy(object: Arc<DynamicObject>, error: &Error, requests: Arc<Requests>) -> Action {
    tracing::warn!(
        namespace = object.metadata.namespace.as_deref().unwrap_or_default(),
        request = object.metadata.name.as_deref().unwrap_or_default(),
        category = error.category(),
        %error,
        "handling a scaling request failed"
    );
    Action::requeue(
        requests
            .shared
            .retries
            .failed(&retries::key(requests.kind.as_str(), &object.metadata)),
    )
}
