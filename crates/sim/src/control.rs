//! The control endpoint `/sim/v1/...`: fault injection and node management over HTTP, for the
//! `eto-sim` subcommands and demos. This module reads a request into a [`Command`]; the
//! cluster carries it out (`SimCluster::control`), so that this module needs no cluster.
//!
//! | Request | Effect |
//! |---|---|
//! | `POST /sim/v1/nodes` with a [`NodeSpec`] | add a node |
//! | `DELETE /sim/v1/nodes/<name>` | remove a node |
//! | `POST /sim/v1/nodes/<name>/reclaim?graceSeconds=N` | spot-reclaim a node |
//! | `POST /sim/v1/nodes/<name>/reclaim?warningSeconds=M&graceSeconds=N`, optionally with a [`Warning`] | announce a reclaim (with that warning; with no body, Karpenter's taint), reclaim the node `M` s later |
//! | `POST /sim/v1/nodes/<name>/warning` with a [`Warning`] | announce that a node goes away (a taint or a condition) |
//! | `DELETE /sim/v1/nodes/<name>/warning` with a [`Warning`] | withdraw the announcement |
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
use crate::errors::ApiError;
use crate::http::{Body, full};
use crate::nodes::NodeSpec;
use crate::nodes::kubelet::Termination;
use crate::nodes::warnings::Warning;

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
    /// The containers keep failing: those the restart policy restarts wait in
    /// `CrashLoopBackOff`.
    #[serde(default)]
    pub crash_loop: bool,
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
            // A kubelet that evicts a pod marks it as it ends it.
            disruption: (self.pod_reason.as_deref() == Some("Evicted"))
                .then(|| "TerminationByKubelet".to_string()),
            crash_loop: self.crash_loop,
            container_message: None,
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

/// A control request, parsed: what [`crate::cluster::SimCluster`] is asked to do.
#[derive(Clone, Debug)]
pub enum Command {
    /// Add a node.
    AddNode(NodeSpec),
    /// Remove a node.
    RemoveNode(String),
    /// Spot-reclaim a node, its pods getting `grace`, after announcing it `warning` ahead
    /// (none: at once).
    ReclaimNode {
        /// The node.
        name: String,
        /// The pods' termination grace period.
        grace: Duration,
        /// How long ahead the reclaim is announced.
        warning: Duration,
        /// What announces it: a request's [`Warning`], else Karpenter's taint.
        announcement: Warning,
    },
    /// Announce that a node goes away.
    WarnNode {
        /// The node.
        name: String,
        /// The taint or condition that says so.
        warning: Warning,
    },
    /// Withdraw an announcement.
    WithdrawNodeWarning {
        /// The node.
        name: String,
        /// The taint or condition to take off.
        warning: Warning,
    },
    /// End a pod's containers.
    TerminatePod {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// How they end.
        termination: Termination,
    },
    /// Inject an API fault.
    InjectFault(Fault),
    /// Remove every API fault.
    ClearFaults,
    /// End every watch.
    DropWatches,
    /// Restart the API server after `downtime`.
    Restart {
        /// How long it is down.
        downtime: Duration,
    },
}

impl Command {
    /// The answer to a command carried out: its status code and message.
    pub fn done(&self) -> (StatusCode, &'static str) {
        match self {
            Self::AddNode(_) => (StatusCode::CREATED, "node added"),
            Self::RemoveNode(_) => (StatusCode::OK, "node removed"),
            Self::ReclaimNode { .. } => (StatusCode::ACCEPTED, "node reclaim started"),
            Self::WarnNode { .. } => (StatusCode::OK, "node warning put on"),
            Self::WithdrawNodeWarning { .. } => (StatusCode::OK, "node warning withdrawn"),
            Self::TerminatePod { .. } => (StatusCode::OK, "pod terminated"),
            Self::InjectFault(_) => (StatusCode::CREATED, "fault injected"),
            Self::ClearFaults => (StatusCode::OK, "faults cleared"),
            Self::DropWatches => (StatusCode::OK, "watches dropped"),
            Self::Restart { .. } => (StatusCode::ACCEPTED, "restarting"),
        }
    }
}

/// A JSON answer `{"message": ...}` with `code`.
pub fn reply(code: StatusCode, message: &str) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("Content-Type", "application/json")
        .body(full(json!({"message": message}).to_string()))
        .unwrap_or_else(|_| Response::new(full("")))
}

/// The answer to a command the cluster refused.
pub fn refused(error: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(error.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    reply(code, &error.to_string())
}

/// The [`Warning`] a request's `body` holds.
///
/// # Errors
/// Why the body is none: it does not parse, or names neither a taint nor a condition.
fn warning_in(body: &[u8]) -> Result<Warning, String> {
    let warning = serde_json::from_slice::<Warning>(body).map_err(|error| error.to_string())?;
    if !warning.is_valid() {
        return Err("a warning names a taint or a condition".into());
    }
    Ok(warning)
}

/// Reads a `/sim/v1/...` request.
///
/// # Errors
/// The answer to a request that is no command: `404` for an unknown endpoint, `400` for a
/// body that does not parse.
pub async fn parse(
    request: http::Request<hyper::body::Incoming>,
) -> Result<Command, Response<Body>> {
    let (parts, body) = request.into_parts();
    let query: std::collections::HashMap<String, String> = parts
        .uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let body = body
        .collect()
        .await
        .map_err(|error| reply(StatusCode::BAD_REQUEST, &error.to_string()))?
        .to_bytes();
    let path = parts
        .uri
        .path()
        .trim_start_matches("/sim/v1/")
        .trim_end_matches('/')
        .to_string();
    let segments: Vec<&str> = path.split('/').collect();
    let number = |name: &str, default: u64| {
        query
            .get(name)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(default)
    };
    let bad = |error: serde_json::Error| reply(StatusCode::BAD_REQUEST, &error.to_string());
    let bad_warning = |message: String| reply(StatusCode::BAD_REQUEST, &message);
    match (&parts.method, segments.as_slice()) {
        (&Method::POST, ["nodes"]) => Ok(Command::AddNode(
            serde_json::from_slice::<NodeSpec>(&body).map_err(bad)?,
        )),
        (&Method::DELETE, ["nodes", name]) => Ok(Command::RemoveNode((*name).to_string())),
        (&Method::POST, ["nodes", name, "reclaim"]) => {
            // A body chooses the announcement; without one it is Karpenter's taint.
            let announcement = if body.is_empty() {
                Warning::karpenter()
            } else {
                warning_in(&body).map_err(bad_warning)?
            };
            Ok(Command::ReclaimNode {
                name: (*name).to_string(),
                grace: Duration::from_secs(number("graceSeconds", 30)),
                warning: Duration::from_secs(number("warningSeconds", 0)),
                announcement,
            })
        }
        (method @ (&Method::POST | &Method::DELETE), ["nodes", name, "warning"]) => {
            let warning = warning_in(&body).map_err(bad_warning)?;
            let name = (*name).to_string();
            Ok(if method == Method::POST {
                Command::WarnNode { name, warning }
            } else {
                Command::WithdrawNodeWarning { name, warning }
            })
        }
        (&Method::POST, ["namespaces", namespace, "pods", name, "terminate"]) => {
            let request = serde_json::from_slice::<TerminateRequest>(&body).map_err(bad)?;
            Ok(Command::TerminatePod {
                namespace: (*namespace).to_string(),
                name: (*name).to_string(),
                termination: request.termination(),
            })
        }
        (&Method::POST, ["faults"]) => serde_json::from_slice::<FaultRequest>(&body)
            .ok()
            .and_then(|request| request.fault())
            .map(Command::InjectFault)
            .ok_or_else(|| {
                reply(
                    StatusCode::BAD_REQUEST,
                    "a fault needs count and failWith or delayMillis",
                )
            }),
        (&Method::DELETE, ["faults"]) => Ok(Command::ClearFaults),
        (&Method::POST, ["watches", "drop"]) => Ok(Command::DropWatches),
        (&Method::POST, ["restart"]) => Ok(Command::Restart {
            downtime: Duration::from_millis(number("downtimeMillis", 500)),
        }),
        _ => Err(reply(StatusCode::NOT_FOUND, "no such control endpoint")),
    }
}
