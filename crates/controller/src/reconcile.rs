//! One reconcile: observe, plan, apply.

use std::sync::Arc;
use std::time::{Duration, Instant};

use eto_engine::group_report::GroupReport;
use eto_engine::job::{Kind, Referenced};
use eto_engine::kind::OwnedJob;
use eto_engine::plan::{plan, plan_undecodable};
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use tracing::Instrument;

use crate::apply::{self, Target};
use crate::context::Context;
use crate::error::Error;
use crate::freshness::Written;
use crate::lookups;
use crate::metrics::Outcome;
use crate::ownership::Owner;
use crate::retries;
use crate::{group_orders, group_report, observe};

/// How many taken names one reconcile finds and plans around; the next reconcile finds any
/// others.
const MAX_TAKEN_NAMES: usize = 8;

/// How soon a job whose named object (a TrainJob's runtime) is missing is read again.
const MISSING_REFERENCE_RETRY: Duration = Duration::from_secs(15);

/// How soon a job is planned again when its pod cache was found behind the API server.
const CACHE_BEHIND_RETRY: Duration = Duration::from_millis(500);

/// How long a job may go unreconciled when nothing happens to it, at least (see
/// [`resync_after`]).
pub const RESYNC: Duration = Duration::from_secs(10 * 60);

/// The window over which the periodic reconciles of jobs are spread (see [`resync_after`]).
pub const RESYNC_SPREAD: Duration = Duration::from_secs(2 * 60);

/// When a job with nothing to do is reconciled again: [`RESYNC`] plus an offset in
/// [`RESYNC_SPREAD`] that the job's uid fixes. Jobs created together (or all found at the
/// operator's start) would otherwise be reconciled again together, every [`RESYNC`]; with
/// the offset they come a few at a time, and a job keeps its place from one resync to the next.
pub fn resync_after(uid: &str) -> Duration {
    // FNV-1a: stable across runs and builds, unlike the standard library's hasher.
    let hash = uid.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let window = u64::try_from(RESYNC_SPREAD.as_millis()).unwrap_or(u64::MAX);
    RESYNC + Duration::from_millis(hash % window)
}
/// How long a reconcile may take before it is abandoned (the default of
/// [`crate::Settings::reconcile_timeout`]). A reconcile makes a few API calls and may wait
/// [`crate::freshness::CACHE_WAIT`] for the caches; one that takes this long is stuck.
pub const RECONCILE_TIMEOUT: Duration = Duration::from_secs(120);

/// Reconciles one job of `kind`: reads it and its children from the caches, asks the engine
/// what to do, and does it. Returns when to look again.
///
/// An MPIJob whose `runPolicy.managedBy` names another controller is left alone entirely: no
/// write, no event.
///
/// The job is watched as a dynamic object and decoded here, so that a job that does not fit
/// eto's types (possible with a CRD installed without validation) gets a status condition
/// naming the field instead of breaking the watch of every job.
///
/// The controller starts reconciles only once every cache has completed its first list
/// (see [`crate::run()`]); a reconcile never waits for that.
///
/// # Errors
/// The first write that failed, or [`Error::TimedOut`] when the reconcile did not finish
/// within [`Context::reconcile_timeout`] (it is then dropped, in the middle of whatever it
/// was waiting for). Either way the reconcile is retried (see [`crate::retries`]): every write is
/// idempotent, and the engine recovers from a reconcile cut short as from an operator crash.
pub async fn reconcile(
    kind: Kind,
    object: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let started = Instant::now();
    // Every line logged while reconciling names the job.
    let span = tracing::info_span!(
        "reconcile",
        kind = kind.vocabulary().name,
        namespace = object.metadata.namespace.as_deref().unwrap_or_default(),
        job = object.metadata.name.as_deref().unwrap_or_default(),
    );
    let reconciled = reconcile_job(kind, &object, &ctx).instrument(span);
    let result = tokio::time::timeout(ctx.reconcile_timeout, reconciled)
        .await
        .unwrap_or(Err(Error::TimedOut(ctx.reconcile_timeout)));
    ctx.metrics
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    let outcome = match &result {
        Ok(_) => {
            ctx.retries
                .succeeded(&retries::key(kind.vocabulary().name, &object.metadata));
            "ok"
        }
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

async fn reconcile_job(kind: Kind, object: &DynamicObject, ctx: &Context) -> Result<Action, Error> {
    if object.metadata.name.is_none() || object.metadata.namespace.is_none() {
        return Err(Error::MissingIdentity);
    }
    if object.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes the children with the job.
        return Ok(Action::await_change());
    }
    if !kind.managed_by_eto(&object.data) {
        tracing::debug!(
            namespace = object.metadata.namespace.as_deref().unwrap_or_default(),
            job = object.metadata.name.as_deref().unwrap_or_default(),
            "managed by another controller; left alone"
        );
        return Ok(Action::await_change());
    }
    let now = (ctx.clock)();
    let value = serde_json::to_value(object).map_err(|source| Error::Serialize {
        what: "the job",
        source,
    })?;
    let referenced = match kind.reference(&value) {
        Some(reference) => Some(lookups::referenced(ctx, &reference).await?),
        None => None,
    };
    let decoded = OwnedJob::parse(kind, value.clone(), referenced.as_ref());
    let namespace = object.metadata.namespace.as_deref().unwrap_or_default();
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let resource = kind.api_resource();
    let target = Target {
        object,
        resource: &resource,
    };
    let mut written = Written::default();
    let requeue = match &decoded {
        Ok(job) => {
            let job = job.as_ref();
            let children = observe::children(&ctx.stores, job);
            if lookups::workers_behind(ctx, &children, job).await? {
                tracing::debug!(
                    namespace,
                    job = name,
                    "a worker missing from the pod cache still exists; waiting for the cache"
                );
                return Ok(Action::requeue(CACHE_BEHIND_RETRY));
            }
            // When the pods last changed, for the latency of the discovery this plan writes;
            // taken only by a reconcile that plans, so that one waiting for the cache keeps it.
            let pods_changed =
                ctx.metrics
                    .pod_changes
                    .take(kind.vocabulary().name, namespace, name);
            let secret = lookups::ssh_secret(ctx, job).await?;
            let owner = Owner::of(&children, job);
            // Names found taken while writing: the job is planned again knowing them, so that
            // it reports them and writes around them (see crate::ownership).
            let mut taken = Vec::new();
            // A pod the API server refused: planned again once, creating no pod, so that the
            // job reports it (one condition and event, not a failed reconcile per worker).
            let mut rejected_pod = None;
            // The nodes that announced they go away (see eto_engine::node_warnings).
            let node_warnings = ctx.stores.warned_nodes.all();
            // The word of the training code that it saved, while workers wait for it, and its
            // progress: from the run's coordinator, else from a pod that serves it.
            let pods: Vec<&k8s_openapi::api::core::v1::Pod> =
                children.pods.iter().map(AsRef::as_ref).collect();
            let source = job.report_source(&pods);
            let report = match &source {
                Some(source) => group_report::read(ctx, job, source).await,
                None => None,
            };
            // Where the coordinator knows only a step it saw, the training's own progress.
            let report = match job.progress_beside(&pods) {
                Some(beside) => GroupReport::with_served_progress(
                    report,
                    group_report::read(ctx, job, &beside).await,
                ),
                None => report,
            };
            // The latest progress an earlier reconcile read, for when the pods that served
            // it are gone with their word; this read is kept for the next.
            let uid = object.metadata.uid.as_deref().unwrap_or_default();
            let earlier_progress = ctx.progress_reads.latest(uid);
            if let Some(progress) = report.as_ref().and_then(|report| report.progress.as_ref()) {
                ctx.progress_reads.keep(uid, progress, now);
            }
            loop {
                let mut observed =
                    children.observed(job, secret, &taken, rejected_pod.as_ref(), ctx.gang());
                observed.node_warnings = &node_warnings;
                observed.group_report = report.as_ref();
                observed.earlier_progress = earlier_progress.as_ref();
                let mut plan = plan(&observed, now);
                let requeue = plan.requeue_after;
                let orders = plan.group_orders.take();
                let writes_discovery = plan.apply.iter().any(apply::is_discovery_data);
                match apply::execute(ctx, kind, &target, &owner, plan, &mut written).await {
                    Err(Error::NameTaken(held))
                        if taken.len() < MAX_TAKEN_NAMES && !taken.contains(&held) =>
                    {
                        taken.push(held);
                    }
                    Err(error) if rejected_pod.is_none() && error.rejected_pod().is_some() => {
                        tracing::debug!(namespace, job = name, %error, "a pod was rejected");
                        rejected_pod = error.rejected_pod();
                    }
                    result => {
                        result?;
                        if let Some((source, orders)) = source.as_ref().zip(orders.as_ref()) {
                            group_orders::spawn(ctx, namespace, source, orders);
                        }
                        if let Some(seen) = pods_changed.filter(|_| writes_discovery) {
                            ctx.metrics
                                .discovery_latency
                                .observe(seen.elapsed().as_secs_f64());
                        }
                        break requeue;
                    }
                }
            }
        }
        Err(error) => {
            let status = value
                .get("status")
                .cloned()
                .and_then(|status| kind.stored_status(status));
            // Nothing of the job's host discovery is written: a pod change waits for no one.
            ctx.metrics
                .pod_changes
                .take(kind.vocabulary().name, namespace, name);
            let plan = plan_undecodable(kind, &object.metadata, status, error, now);
            let requeue = plan.requeue_after;
            let owner = Owner {
                job: object.metadata.uid.clone().unwrap_or_default(),
                launcher_job: None,
            };
            apply::execute(ctx, kind, &target, &owner, plan, &mut written).await?;
            requeue
        }
    };
    if !ctx.stores.show(&written, ctx.cache_wait).await {
        tracing::warn!(
            namespace,
            job = name,
            "the caches did not show this reconcile's writes in time; the next reconcile may act on older state"
        );
    }
    let mut resync = resync_after(object.metadata.uid.as_deref().unwrap_or(name));
    if referenced == Some(Referenced::Missing) {
        // Nothing watches what a job names: the object may be created after the job (a
        // GitOps tool applying both at once), and the job waits for it.
        resync = resync.min(MISSING_REFERENCE_RETRY);
    }
    Ok(Action::requeue(
        requeue.map_or(resync, |after| after.min(resync)),
    ))
}

/// What to do after a failed reconcile of a job of `kind`: log it and try again, sooner after
/// a first failure than after many (see [`crate::retries`]). An abandoned reconcile is logged
/// as an error (something is stuck), other failures as warnings (the API server refused a
/// write; the retry usually succeeds).
pub fn error_policy(kind: Kind, object: &DynamicObject, error: &Error, ctx: &Context) -> Action {
    let namespace = object.metadata.namespace.as_deref().unwrap_or_default();
    let job = object.metadata.name.as_deref().unwrap_or_default();
    let category = error.category();
    if matches!(error, Error::TimedOut(_)) {
        tracing::error!(namespace, job, category, %error, "reconcile abandoned");
    } else {
        tracing::warn!(namespace, job, category, %error, "reconcile failed");
    }
    Action::requeue(
        ctx.retries
            .failed(&retries::key(kind.vocabulary().name, &object.metadata)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resyncs_of_many_jobs_spread_over_the_window_and_each_keeps_its_own() {
        let uids: Vec<String> = (0..1000)
            .map(|i| format!("3f6c1e2a-{i:04}-4000-8000-00000000beef"))
            .collect();
        let mut per_ten_seconds = [0_u32; 12];
        for uid in &uids {
            let after = resync_after(uid);
            assert!(
                after >= RESYNC && after < RESYNC + RESYNC_SPREAD,
                "{after:?}"
            );
            assert_eq!(resync_after(uid), after, "the same uid, the same offset");
            let slot = (after - RESYNC).as_secs() / 10;
            per_ten_seconds[usize::try_from(slot).unwrap_or_default()] += 1;
        }
        // About 83 a slot when spread evenly; all at once would put 1,000 in one.
        assert!(
            per_ten_seconds.iter().all(|&n| (40..=130).contains(&n)),
            "{per_ten_seconds:?}"
        );
    }
}
