//! Reading the report of a PyTorchJob's rendezvous store (see
//! [`eto_engine::kind::pytorch_job::store_report`]) before the job is planned.
//!
//! `GET /api/v1/namespaces/<ns>/pods/<job>-rdzv:<report port>/proxy/report`, through the API
//! server's pod proxy as the `kubeai` stop signal goes (see [`crate::kubeai_stop`]), while the
//! job's store runs. One request of at most [`READ_TIMEOUT`]: a report that cannot be read is
//! no report; a drain then ends at its deadline as it would without the training's word, and
//! the status keeps the rendezvous it last showed.

use std::time::Duration;

use eto_engine::kind::JobRef;
use eto_engine::kind::pytorch_job::store_report::{self, StoreReport};
use k8s_openapi::api::core::v1::Pod;

use crate::context::Context;

/// How long the read may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// The report of `job`'s store, when there is one to read (see
/// [`store_report::source`]) and it answers.
pub async fn read<'p>(
    ctx: &Context,
    job: JobRef<'_>,
    pods: impl IntoIterator<Item = &'p Pod>,
) -> Option<StoreReport> {
    let source = store_report::source(job, pods)?;
    let client = ctx.pod_proxy.as_ref()?;
    let namespace = job.metadata().namespace.as_deref().unwrap_or_default();
    let request = http::Request::get(source.proxy_path(namespace))
        .body(Vec::new())
        .ok()?;
    let answer = tokio::time::timeout(READ_TIMEOUT, client.request_text(request)).await;
    let text = match answer {
        Ok(Ok(text)) => text,
        Ok(Err(error)) => {
            tracing::debug!(pod = source.pod, %error, "the rendezvous store's report could not be read");
            return None;
        }
        Err(_) => {
            tracing::debug!(
                pod = source.pod,
                "the rendezvous store's report did not come in time"
            );
            return None;
        }
    };
    match serde_json::from_str(&text) {
        Ok(report) => Some(report),
        Err(error) => {
            tracing::debug!(pod = source.pod, %error, "the rendezvous store's report is not one");
            None
        }
    }
}
