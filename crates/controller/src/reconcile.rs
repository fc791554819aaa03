//! One reconcile: observe, plan, apply.

use std::sync::Arc;
use std::time::{Duration, Instant};

use eto_api::TrainingJob;
use eto_api::training_job::TrainingJobStatus;
use eto_engine::plan::{plan, plan_undecodable};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::controller::Action;

use crate::apply::{self, JobTarget};
use crate::context::Context;
use crate::error::Error;
use crate::metrics::Outcome;
use crate::observe::{self, Children};

/// How long a job may go unreconciled when nothing happens to it.
pub const RESYNC: Duration = Duration::from_secs(10 * 60);
/// How long after a failed reconcile it is tried again.
pub const RETRY: Duration = Duration::from_secs(5);

/// Reconciles one TrainingJob: reads it and its children from the caches, asks the engine
/// what to do, and does it. Returns when to look again.
///
/// The job is watched as a dynamic object and decoded here, so that a job that does not fit
/// eto's types (possible with a CRD installed without validation) gets a status condition
/// naming the field instead of breaking the watch of every job.
///
/// The controller starts reconciles only once every cache has completed its first list
/// (see [`crate::run`]); a reconcile never waits for that.
///
/// # Errors
/// The first write that failed; the reconcile is retried after [`RETRY`].
pub async fn reconcile(object: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_job(&object, &ctx).await;
    ctx.metrics
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    let outcome = match &result {
        Ok(_) => "ok",
        Err(error) => error.category(),
    };
    ctx.metrics
        .reconciliations
        .get_or_create(&Outcome {
            result: outcome.into(),
        })
        .inc();
    result
}

async fn reconcile_job(object: &DynamicObject, ctx: &Context) -> Result<Action, Error> {
    if object.metadata.name.is_none() || object.metadata.namespace.is_none() {
        return Err(Error::MissingIdentity);
    }
    if object.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes the children with the job.
        return Ok(Action::await_change());
    }
    let now = (ctx.clock)();
    let value = serde_json::to_value(object).map_err(|source| Error::Serialize {
        what: "the job",
        source,
    })?;
    let plan = match eto_engine::parse::parse::<TrainingJob>(value.clone()) {
        Ok(job) => {
            let children = Children::of(&ctx.stores, &job);
            let secret = observe::ssh_secret(ctx, &job).await?;
            plan(&children.observed(&job, secret), now)
        }
        Err(error) => {
            let status = value
                .get("status")
                .cloned()
                .and_then(|s| serde_json::from_value::<TrainingJobStatus>(s).ok());
            plan_undecodable(&object.metadata, status, &error, now)
        }
    };
    let requeue = plan.requeue_after;
    let resource = ApiResource::erase::<TrainingJob>(&());
    let written = apply::execute(
        ctx,
        &JobTarget {
            object,
            resource: &resource,
        },
        plan,
    )
    .await?;
    if !ctx.stores.show(&written, ctx.cache_wait).await {
        tracing::warn!(
            namespace = object.metadata.namespace.as_deref().unwrap_or_default(),
            job = object.metadata.name.as_deref().unwrap_or_default(),
            "the caches did not show this reconcile's writes in time; the next reconcile may act on older state"
        );
    }
    Ok(Action::requeue(
        requeue.map_or(RESYNC, |after| after.min(RESYNC)),
    ))
}

/// What to do after a failed reconcile: log it and try again after [`RETRY`].
pub fn error_policy(object: Arc<DynamicObject>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(
        namespace = object.metadata.namespace.as_deref().unwrap_or_default(),
        job = object.metadata.name.as_deref().unwrap_or_default(),
        category = error.category(),
        %error,
        "reconcile failed"
    );
    Action::requeue(RETRY)
}
