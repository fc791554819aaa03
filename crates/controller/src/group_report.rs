//! Reading the report of a run's coordinator (see [`eto_engine::group_report`]; a PyTorchJob's
//! rendezvous store, or the Lighthouse of its replica groups) before the job is planned, or,
//! for a job without one, the progress a training pod serves (see
//! [`eto_engine::group_report::progress_source`]); beside a Lighthouse, that progress too (see
//! [`eto_engine::job::ReportingCoordinator::progress_beside`]), in place of its quorum step.
//!
//! `GET /api/v1/namespaces/<ns>/pods/<pod>:<report port>/proxy/report` (a Lighthouse's
//! `/status`), through the API
//! server's pod proxy as the `kubeai` stop signal goes (see [`crate::kubeai_stop`]), while the
//! coordinator runs (the job says where: [`eto_engine::job::ServedJob::group_report_source`]).
//! One request of at most [`READ_TIMEOUT`]: a report that cannot be read is no report; a
//! drain then ends at its deadline as it would without the training's word, and the status
//! keeps the rendezvous it last showed.

use std::time::Duration;

use eto_engine::group_report::{GroupReport, ReportSource};
use eto_engine::job::JobRef;

use crate::context::Context;

/// How long the read may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// The report of `job`'s coordinator at `source` (the job says where:
/// [`eto_engine::job::ServedJob::group_report_source`]), when it answers.
pub async fn read(ctx: &Context, job: JobRef<'_>, source: &ReportSource) -> Option<GroupReport> {
    let client = ctx.pod_proxy.as_ref()?;
    let namespace = job.metadata().namespace.as_deref().unwrap_or_default();
    let request = http::Request::get(source.proxy_path(namespace))
        .body(Vec::new())
        .ok()?;
    let answer = crate::pod_proxy::quietly(tokio::time::timeout(
        READ_TIMEOUT,
        client.request_text(request),
    ))
    .await;
    let text = match answer {
        Ok(Ok(text)) => text,
        Ok(Err(error)) => {
            tracing::debug!(pod = source.pod, %error, "the coordinator's report could not be read");
            return None;
        }
        Err(_) => {
            tracing::debug!(
                pod = source.pod,
                "the coordinator's report did not come in time"
            );
            return None;
        }
    };
    let report = source.read(&text);
    if report.is_none() {
        tracing::debug!(pod = source.pod, "the coordinator's report is not one");
    }
    report
}
