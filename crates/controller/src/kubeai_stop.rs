//! Sending the `kubeai` SDK's stop signal that goes with a notice (see [`eto_engine::kubeai`]).
//!
//! # How
//! `GET /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/stop`: through the API server's pod
//! proxy, which reaches the pod whether eto runs in the cluster or outside it, needs no network
//! path from eto's namespace to the training pods, and needs RBAC `get` on `pods/proxy`. The
//! client it goes through does not retry (see [`crate::controllers::Settings::pod_proxy`]): a `503`
//! from the pod proxy is the pod's answer, not the API server's load.
//!
//! # Guarantees
//! - It never holds up a reconcile or another job: the signals of a plan are sent in a task of
//!   their own, concurrently, once the plan has written the notices.
//! - Each request waits at most [`STOP_TIMEOUT`], and a pod that does not acknowledge is asked
//!   at most [`STOP_TRIES`] times, [`RETRY_AFTER`] apart: seconds in all, well within a grace
//!   period, and no storm when nothing listens.
//! - The outcome is one Event per notice (how many pods acknowledged, which did not and why)
//!   and a count by result ([`crate::metrics::Metrics::kubeai_stops`]).
//!
//! # What counts as acknowledged
//! A `2xx` answer, and the SDK's own answer: it replies with the two bytes `ok`, which are not
//! HTTP, so the pod proxy reports "malformed HTTP response \"ok\"" (checked against the SDK
//! on PyPI and kube-apiserver 1.36); the request did reach it.

use std::sync::Arc;
use std::time::Duration;

use eto_api::job_status::NoticeKind;
use eto_engine::kubeai::Stop;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::EventType;

use crate::events::EventPublisher;
use crate::metrics::{Metrics, StopLabels};

/// How long one stop request may take.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(2);
/// The most requests a pod that does not acknowledge gets.
pub const STOP_TRIES: u32 = 3;
/// The wait between two requests to the same pod.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// What became of a stop signal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The SDK (or whatever listens) took it.
    Acknowledged,
    /// Nothing took it: nothing listens, or the pod has no address yet; why, as the API
    /// server said.
    Unreachable(String),
    /// No answer within [`STOP_TIMEOUT`].
    NoAnswer,
    /// The pod is gone.
    Gone,
}

impl Outcome {
    /// The metric label of the outcome.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Acknowledged => "acknowledged",
            Self::Unreachable(_) => "unreachable",
            Self::NoAnswer => "no-answer",
            Self::Gone => "gone",
        }
    }

    /// Whether asking again may change it.
    fn is_final(&self) -> bool {
        matches!(self, Self::Acknowledged | Self::Gone)
    }

    /// How the outcome reads in an event.
    fn describe(&self) -> String {
        match self {
            Self::Acknowledged => "acknowledged".into(),
            Self::Unreachable(why) => format!("unreachable: {why}"),
            Self::NoAnswer => format!("no answer within {}s", STOP_TIMEOUT.as_secs()),
            Self::Gone => "the pod is gone".into(),
        }
    }
}

/// The outcome an answer of the pod proxy means.
pub fn outcome(
    answer: Result<Result<String, kube::Error>, tokio::time::error::Elapsed>,
) -> Outcome {
    match answer {
        Err(_) => Outcome::NoAnswer,
        Ok(Ok(_)) => Outcome::Acknowledged,
        Ok(Err(kube::Error::Api(status))) if status.code == 404 => Outcome::Gone,
        Ok(Err(kube::Error::Api(status)))
            if status.code == 503 && status.message.contains("malformed HTTP response \"ok\"") =>
        {
            Outcome::Acknowledged
        }
        Ok(Err(kube::Error::Api(status))) => Outcome::Unreachable(status.message),
        Ok(Err(error)) => Outcome::Unreachable(error.to_string()),
    }
}

/// Sends `stop` to its pod in `namespace`, asking again while it is not acknowledged, at most
/// [`STOP_TRIES`] times.
///
/// A pod that goes away after failing to answer (deleted at the end of its grace period) is
/// reported by why it did not answer, not as [`Outcome::Gone`]: the pod's silence is what the
/// user needs to hear about.
pub async fn send_one(client: &Client, namespace: &str, stop: &Stop) -> Outcome {
    let path = eto_engine::pods::proxy_path(namespace, &stop.pod, stop.port, "/stop");
    let mut last = Outcome::NoAnswer;
    for attempt in 0..STOP_TRIES {
        if attempt > 0 {
            tokio::time::sleep(RETRY_AFTER).await;
        }
        let request = match http::Request::get(&path).body(Vec::new()) {
            Ok(request) => request,
            Err(error) => return Outcome::Unreachable(error.to_string()),
        };
        let answer = crate::pod_proxy::quietly(tokio::time::timeout(
            STOP_TIMEOUT,
            client.request_text(request),
        ))
        .await;
        let answer = outcome(answer);
        if answer == Outcome::Gone && attempt > 0 {
            break;
        }
        last = answer;
        if last.is_final() {
            break;
        }
    }
    last
}

/// Where the stop signals of a job's plan go, and what reports them.
pub struct Sender {
    /// The client of the pod proxy.
    pub client: Client,
    /// Records the outcome.
    pub events: EventPublisher,
    /// Counts the outcomes.
    pub metrics: Arc<Metrics>,
}

impl Sender {
    /// Sends `stops` to the pods of the job `regarding` (of `kind`) in a task of its own,
    /// concurrently, then records one event per notice and counts the outcomes.
    pub fn spawn(self, kind: &'static str, regarding: ObjectReference, stops: Vec<Stop>) {
        if stops.is_empty() {
            return;
        }
        tokio::spawn(async move {
            let namespace = regarding.namespace.clone().unwrap_or_default();
            let outcomes = futures::future::join_all(
                stops
                    .iter()
                    .map(|stop| send_one(&self.client, &namespace, stop)),
            )
            .await;
            for notice in [NoticeKind::Suspend, NoticeKind::Reclaim] {
                let sent: Vec<(&Stop, &Outcome)> = stops
                    .iter()
                    .zip(&outcomes)
                    .filter(|(stop, _)| stop.notice == notice)
                    .collect();
                if sent.is_empty() {
                    continue;
                }
                for (_, outcome) in &sent {
                    self.metrics
                        .kubeai_stops
                        .get_or_create(&StopLabels {
                            kind: kind.into(),
                            notice: format!("{notice:?}"),
                            result: outcome.label().into(),
                        })
                        .inc();
                }
                let (type_, note) = report(notice, &sent);
                let published = self
                    .events
                    .publish(&regarding, type_, "KubeaiStop", "Stop", note)
                    .await;
                if let Err(error) = published {
                    tracing::warn!(%error, "failed to record the kubeai stop event");
                }
            }
        });
    }
}

/// The event that reports the stop signals `sent` with one `notice`.
pub fn report(notice: NoticeKind, sent: &[(&Stop, &Outcome)]) -> (EventType, String) {
    let acknowledged = sent
        .iter()
        .filter(|(_, outcome)| **outcome == Outcome::Acknowledged)
        .count();
    let missed: Vec<String> = sent
        .iter()
        .filter(|(_, outcome)| **outcome != Outcome::Acknowledged)
        .map(|(stop, outcome)| format!("{} ({})", stop.pod, outcome.describe()))
        .collect();
    let port = sent.first().map_or(0, |(stop, _)| stop.port);
    let pods = match sent.len() {
        1 => "1 pod".to_string(),
        count => format!("{count} pods"),
    };
    let mut note = format!(
        "sent the kubeai stop (GET /stop on port {port}) with the {notice:?} notice to {pods}: {acknowledged} acknowledged"
    );
    if missed.is_empty() {
        (EventType::Normal, note)
    } else {
        note.push_str(&format!("; not acknowledged: {}", missed.join(", ")));
        (EventType::Warning, note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.into(),
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn the_pod_proxys_answers_are_read_as_they_mean() {
        let malformed = "error trying to reach service: net/http: HTTP/1.x transport connection broken: malformed HTTP response \"ok\"";
        let refused =
            "error trying to reach service: dial tcp 10.0.0.5:9009: connect: connection refused";
        assert_eq!(outcome(Ok(Ok("ok".into()))), Outcome::Acknowledged);
        assert_eq!(
            outcome(Ok(Err(status(503, malformed)))),
            Outcome::Acknowledged
        );
        assert_eq!(
            outcome(Ok(Err(status(503, refused)))),
            Outcome::Unreachable(refused.into())
        );
        assert_eq!(
            outcome(Ok(Err(status(404, "pods \"x\" not found")))),
            Outcome::Gone
        );
        assert_eq!(
            outcome(Ok(Err(status(400, "address not allowed")))),
            Outcome::Unreachable("address not allowed".into())
        );
    }

    #[test]
    fn one_event_per_notice_names_the_pods_that_did_not_acknowledge() {
        let stop = |pod: &str| Stop {
            pod: pod.into(),
            port: 9009,
            notice: NoticeKind::Suspend,
        };
        let (a, b) = (stop("job-worker-0"), stop("job-worker-1"));
        let refused = Outcome::Unreachable("connection refused".into());
        let (type_, note) = report(
            NoticeKind::Suspend,
            &[(&a, &Outcome::Acknowledged), (&b, &refused)],
        );
        assert_eq!(type_, EventType::Warning);
        assert_eq!(
            note,
            "sent the kubeai stop (GET /stop on port 9009) with the Suspend notice to 2 pods: 1 acknowledged; not acknowledged: job-worker-1 (unreachable: connection refused)"
        );
        let (type_, note) = report(NoticeKind::Suspend, &[(&a, &Outcome::Acknowledged)]);
        assert_eq!(type_, EventType::Normal);
        assert!(note.ends_with("notice to 1 pod: 1 acknowledged"), "{note}");
    }

    type Handle = tower_test::mock::Handle<
        http::Request<kube::client::Body>,
        http::Response<kube::client::Body>,
    >;

    /// Answers the next request, which must be the stop of `mnist-worker-0`, with `code` and
    /// `message`.
    async fn answer(handle: &mut Handle, code: u16, message: &str) {
        let (request, send) = handle.next_request().await.expect("a stop request");
        assert_eq!(
            format!("{} {}", request.method(), request.uri()),
            "GET /api/v1/namespaces/default/pods/mnist-worker-0:9009/proxy/stop"
        );
        let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "ServiceUnavailable", "code": code, "message": message});
        send.send_response(
            http::Response::builder()
                .status(code)
                .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
                .unwrap(),
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_is_asked_again_until_it_acknowledges_and_at_most_three_times() {
        let stop = Stop {
            pod: "mnist-worker-0".into(),
            port: 9009,
            notice: NoticeKind::Reclaim,
        };
        let refused =
            "error trying to reach service: dial tcp 127.0.0.7:9009: connect: connection refused";
        let malformed = "error trying to reach service: malformed HTTP response \"ok\"";

        let (service, mut handle) = tower_test::mock::pair();
        let client = Client::new(service, "default");
        let sending = tokio::spawn(async move { send_one(&client, "default", &stop).await });
        answer(&mut handle, 503, refused).await;
        answer(&mut handle, 503, malformed).await;
        assert_eq!(sending.await.unwrap(), Outcome::Acknowledged);

        let stop = Stop {
            pod: "mnist-worker-0".into(),
            port: 9009,
            notice: NoticeKind::Reclaim,
        };
        let (service, mut handle) = tower_test::mock::pair();
        let client = Client::new(service, "default");
        let sending = tokio::spawn(async move { send_one(&client, "default", &stop).await });
        for _ in 0..STOP_TRIES {
            answer(&mut handle, 503, refused).await;
        }
        assert_eq!(sending.await.unwrap(), Outcome::Unreachable(refused.into()));
        assert!(handle.next_request().await.is_none(), "no fourth request");
    }
}
