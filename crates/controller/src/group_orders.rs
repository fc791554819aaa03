//! Sending eto's orders to the coordinator of a group that re-forms (see
//! [`eto_engine::group_orders`]; a PyTorchJob's rendezvous store).
//!
//! `POST /api/v1/namespaces/<ns>/pods/<pod>:<report port>/proxy/orders` with the orders as
//! JSON, through the API server's pod proxy as the coordinator's report is read (see
//! [`crate::group_report`]); it needs RBAC `create` on `pods/proxy`.
//!
//! # Guarantees
//! - It never holds up a reconcile: the orders go in a task of their own once the plan is
//!   written, at most [`SEND_TIMEOUT`].
//! - Orders that did not arrive are not lost: the next reconcile reads the report, finds the
//!   coordinator holding other orders, and plans them again.

use std::time::Duration;

use eto_engine::group_orders::{GroupOrders, ORDERS_PATH};
use eto_engine::group_report::ReportSource;
use eto_engine::pods;

use crate::context::Context;

/// How long one request may take.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// Sends `orders` to the coordinator at `source` in `namespace`, in a task of its own.
pub fn spawn(ctx: &Context, namespace: &str, source: &ReportSource, orders: &GroupOrders) {
    let Some(client) = ctx.pod_proxy.clone() else {
        return;
    };
    let path = pods::proxy_path(namespace, &source.pod, source.port, ORDERS_PATH);
    let body = match serde_json::to_vec(orders) {
        Ok(body) => body,
        Err(error) => {
            tracing::warn!(%error, "the coordinator's orders could not be written");
            return;
        }
    };
    let pod = source.pod.clone();
    tokio::spawn(async move {
        let Ok(request) = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
        else {
            return;
        };
        let answer = crate::pod_proxy::quietly(tokio::time::timeout(
            SEND_TIMEOUT,
            client.request_text(request),
        ))
        .await;
        match answer {
            Ok(Ok(_)) => tracing::debug!(pod, "the coordinator took eto's orders"),
            Ok(Err(error)) => {
                tracing::debug!(pod, %error, "the coordinator's orders could not be sent");
            }
            Err(_) => tracing::debug!(pod, "the coordinator did not take its orders in time"),
        }
    });
}
