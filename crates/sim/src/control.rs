//! The control endpoint `/sim/v1/...`: fault injection and node management over HTTP, for the
//! `eto-sim` subcommands and demos.
//!
//! | Request | Effect |
//! |---|---|
//! | `POST /sim/v1/nodes` with a [`NodeSpec`] | add a node |
//! | `DELETE /sim/v1/nodes/<name>` | remove a node |
//! | `POST /sim/v1/nodes/<name>/reclaim?graceSeconds=N` | spot-reclaim a node |
//! | `POST /sim/v1/namespaces/<ns>/pods/<name>/terminate` with a [`TerminateRequest`] | end a pod's containers |
//! | `POST /sim/v1/faults` with a [`FaultRequest`] | inject an API fault |
//! | `DELETE /sim/v1/faults` | clear API faults |
//! | `POST /sim/v1/watches/drop` | end every watch |
//! | `POST /sim/v1/restart?downtimeMillis=N` | restart the API server |

use std::time::Duration;

use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::apiserver::faults::{Fault, FaultAction};
use crate::apiserver::routes::Verb;
use crate::cluster::SimCluster;
use crate::errors::ApiError;
use crate::http::{Body, full};
use crate::nodes::NodeSpec;
use crate::nodes::kubelet::Termination;

/// How a pod's containers end, as the control endpoint takes it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminateRequest {
    /// Exit code.
    pub exit_code: i32,
    /// Container reason; defaults to `Completed` for 0 and `Error` otherwise.
    #[serde(default)]
    pub reason: Option<String>,
    /// Pod-level reason, such as `Evicted`.
    #[serde(default)]
    pub pod_reason: Option<String>,
    /// Pod-level message.
    #[serde(default)]
    pub message: Option<String>,
    /// End the pod whatever its restart policy.
    #[serde(default, rename = "final")]
    pub final_: bool,
}

impl TerminateRequest {
    /// The termination it asks for.
    pub fn termination(&self) -> Termination {
        let default_reason = if self.exit_code == 0 {
            "Completed"
        } else {
            "Error"
        };
        Termination {
            exit_code: self.exit_code,
            reason: self.reason.clone().unwrap_or_else(|| default_reason.into()),
            pod_reason: self.pod_reason.clone(),
            message: self.message.clone(),
            final_: self.final_ || self.pod_reason.is_some(),
        }
    }
}

/// An API fault, as the control endpoint takes it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRequest {
    /// Answer with this HTTP code instead of serving.
    #[serde(default)]
    pub fail_with: Option<u16>,
    /// Serve after this many milliseconds.
    #[serde(default)]
    pub delay_millis: Option<u64>,
    /// How many requests to affect.
    pub count: u32,
    /// Only this method.
    #[serde(default)]
    pub method: Option<String>,
    /// Only paths containing this.
    #[serde(default)]
    pub path_contains: Option<String>,
    /// Only this verb (`list`, `watch`, `patch`, ...).
    #[serde(default)]
    pub verb: Option<Verb>,
    /// Only requests that change state.
    #[serde(default)]
    pub writes_only: bool,
    /// Matching requests let through before the fault acts.
    #[serde(default)]
    pub skip: u32,
}

impl FaultRequest {
    /// The fault it asks for, or `None` when it names no action.
    pub fn fault(&self) -> Option<Fault> {
        let action = match (self.fail_with, self.delay_millis) {
            (Some(code), _) => FaultAction::Fail(code),
            (None, Some(millis)) => FaultAction::Delay(Duration::from_millis(millis)),
            (None, None) => return None,
        };
        Some(Fault {
            action,
            remaining: self.count,
            method: self.method.clone(),
            path_contains: self.path_contains.clone(),
            verb: self.verb,
            writes_only: self.writes_only,
            skip: self.skip,
        })
    }
}

fn reply(code: StatusCode, message: &str) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("Content-Type", "application/json")
        .body(full(json!({"message": message}).to_string()))
        .unwrap_or_else(|_| Response::new(full("")))
}

fn api_error(error: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(error.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    reply(code, &error.to_string())
}

/// Answers a `/sim/v1/...` request.
pub async fn handle(
    cluster: &SimCluster,
    request: http::Request<hyper::body::Incoming>,
) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let query: std::collections::HashMap<String, String> = parts
        .uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => return reply(StatusCode::BAD_REQUEST, &error.to_string()),
    };
    let path = parts
        .uri
        .path()
        .trim_start_matches("/sim/v1/")
        .trim_end_matches('/')
        .to_string();
    let segments: Vec<&str> = path.split('/').collect();
    let seconds = |name: &str, default: u64| {
        query
            .get(name)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(default)
    };
    match (&parts.method, segments.as_slice()) {
        (&Method::POST, ["nodes"]) => match serde_json::from_slice::<NodeSpec>(&body) {
            Ok(node) => cluster.add_node(&node).map_or_else(
                |e| api_error(&e),
                |()| reply(StatusCode::CREATED, "node added"),
            ),
            Err(error) => reply(StatusCode::BAD_REQUEST, &error.to_string()),
        },
        (&Method::DELETE, ["nodes", name]) => cluster.remove_node(name).map_or_else(
            |e| api_error(&e),
            |()| reply(StatusCode::OK, "node removed"),
        ),
        (&Method::POST, ["nodes", name, "reclaim"]) => cluster
            .reclaim_node(name, Duration::from_secs(seconds("graceSeconds", 30)))
            .map_or_else(
                |e| api_error(&e),
                |()| reply(StatusCode::ACCEPTED, "node reclaim started"),
            ),
        (&Method::POST, ["namespaces", namespace, "pods", name, "terminate"]) => {
            match serde_json::from_slice::<TerminateRequest>(&body) {
                Ok(request) => cluster
                    .terminate_pod(namespace, name, &request.termination())
                    .map_or_else(
                        |e| api_error(&e),
                        |()| reply(StatusCode::OK, "pod terminated"),
                    ),
                Err(error) => reply(StatusCode::BAD_REQUEST, &error.to_string()),
            }
        }
        (&Method::POST, ["faults"]) => match serde_json::from_slice::<FaultRequest>(&body)
            .ok()
            .and_then(|r| r.fault())
        {
            Some(fault) => {
                cluster.inject(fault);
                reply(StatusCode::CREATED, "fault injected")
            }
            None => reply(
                StatusCode::BAD_REQUEST,
                "a fault needs count and failWith or delayMillis",
            ),
        },
        (&Method::DELETE, ["faults"]) => {
            cluster.clear_faults();
            reply(StatusCode::OK, "faults cleared")
        }
        (&Method::POST, ["watches", "drop"]) => {
            cluster.drop_watches();
            reply(StatusCode::OK, "watches dropped")
        }
        (&Method::POST, ["restart"]) => {
            // The restart closes this very connection: answer first, restart just after.
            let cluster = cluster.clone();
            let downtime = Duration::from_millis(seconds("downtimeMillis", 500));
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = cluster.restart(downtime).await;
            });
            reply(StatusCode::ACCEPTED, "restarting")
        }
        _ => reply(StatusCode::NOT_FOUND, "no such control endpoint"),
    }
}
