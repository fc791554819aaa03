//! Sending eto's orders to the coordinator of a group that re-forms (see
//! [`eto_engine::group_orders`]; a PyTorchJob's rendezvous store).
//!
//! `POST /api/v1/namespaces/<ns>/pods/<pod>:<report port>/proxy/orders` with the orders as
//! JSON, through the API server's pod proxy as the coordinator's report is read (see
//! [`crate::group_report`]); it needs RBAC `create` on `pods/proxy`.
//!
//! # Guarantees
//! - It never holds up a reconcile: the orders go in a task of their own once the plan is
//!   written, one request of at most [`SEND_TIMEOUT`].
//! - Orders that did not arrive are not lost: the next reconcile reads the report, finds the
//!   coordinator holding other orders, and plans them again.

use std::time::Duration;

use eto_engine::group_orders::ORDERS_PATH;
use eto_engine::group_report::GroupOrders;
use eto_engine::group_report::ReportSource;
use eto_engine::pods;
use kube::Client;

use crate::context::Context;

/// How long one request may take.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// What became of orders sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The coordinator took them.
    Taken,
    /// The request failed, as the API server or the pod said.
    Refused(String),
    /// No answer within [`SEND_TIMEOUT`].
    NoAnswer,
}

/// Sends `orders` to the coordinator at `source` in `namespace`, in a task of its own.
pub fn spawn(ctx: &Context, namespace: &str, source: &ReportSource, orders: &GroupOrders) {
    let Some(client) = ctx.pod_proxy.clone() else {
        return;
    };
    let Some(request) = request(namespace, source, orders) else {
        return;
    };
    let pod = source.pod.clone();
    tokio::spawn(async move {
        match send(&client, request).await {
            Outcome::Taken => tracing::debug!(pod, "the coordinator took eto's orders"),
            outcome => tracing::debug!(pod, ?outcome, "the coordinator did not take its orders"),
        }
    });
}

/// The request that carries `orders` to the coordinator at `source` in `namespace`.
pub fn request(
    namespace: &str,
    source: &ReportSource,
    orders: &GroupOrders,
) -> Option<http::Request<Vec<u8>>> {
    let path = pods::proxy_path(namespace, &source.pod, source.port, ORDERS_PATH);
    let body = serde_json::to_vec(orders).ok()?;
    http::Request::post(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)
        .ok()
}

/// Sends `request` through `client`.
pub async fn send(client: &Client, request: http::Request<Vec<u8>>) -> Outcome {
    let answer = crate::pod_proxy::quietly(tokio::time::timeout(
        SEND_TIMEOUT,
        client.request_text(request),
    ))
    .await;
    match answer {
        Ok(Ok(_)) => Outcome::Taken,
        Ok(Err(error)) => Outcome::Refused(error.to_string()),
        Err(_) => Outcome::NoAnswer,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    type Handle = tower_test::mock::Handle<
        http::Request<kube::client::Body>,
        http::Response<kube::client::Body>,
    >;

    fn orders() -> GroupOrders {
        GroupOrders {
            departed: vec!["ddp-worker-1".into()],
            expected: vec!["ddp-worker-0".into(), "ddp-worker-2".into()],
            min_nodes: 2,
            max_nodes: 3,
            dead_after: 15,
            join_wait: 15,
        }
    }

    /// Takes the next request, which must carry [`orders`] to the store of `ddp`, and answers
    /// it with `code`.
    async fn answer(handle: &mut Handle, code: u16) {
        let (request, send) = handle.next_request().await.expect("the orders");
        assert_eq!(
            format!("{} {}", request.method(), request.uri()),
            "POST /api/v1/namespaces/team/pods/ddp-rdzv:29401/proxy/orders"
        );
        assert_eq!(
            request.headers()[http::header::CONTENT_TYPE],
            "application/json"
        );
        let body = request.into_body().collect_bytes().await.unwrap();
        let sent: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            sent,
            serde_json::json!({"departed": ["ddp-worker-1"],
                               "expected": ["ddp-worker-0", "ddp-worker-2"], "min_nodes": 2,
                               "max_nodes": 3, "dead_after": 15, "join_wait": 15})
        );
        let body = if code == 200 {
            serde_json::json!({"recorded": true})
        } else {
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "ServiceUnavailable", "code": code, "message": "no endpoints"})
        };
        send.send_response(
            http::Response::builder()
                .status(code)
                .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
                .unwrap(),
        );
    }

    #[tokio::test]
    async fn the_orders_go_to_the_stores_report_port_as_json_and_a_refusal_is_an_outcome() {
        let source = ReportSource {
            pod: "ddp-rdzv".into(),
            port: 29401,
            path: eto_engine::group_report::REPORT_PATH,
            read: eto_engine::group_report::read_json,
        };
        for (code, taken) in [(200, true), (503, false)] {
            let (service, mut handle) = tower_test::mock::pair();
            let client = Client::new(service, "default");
            let request = request("team", &source, &orders()).unwrap();
            let sending = tokio::spawn(async move { send(&client, request).await });
            answer(&mut handle, code).await;
            let outcome = sending.await.unwrap();
            assert_eq!(outcome == Outcome::Taken, taken, "{code}: {outcome:?}");
        }
    }
}
