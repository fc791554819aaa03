//! The pod proxy, `/api/v1/namespaces/<ns>/pods/<name>[:<port>]/proxy/<path>`: a request to a
//! port of a pod, through the API server.
//!
//! Pods here run no containers and have loopback IPs (127.0.0.0/8), which kube-apiserver
//! would refuse to dial ("address not allowed"): what stands for a pod's port is a local
//! address a test chooses ([`PodPorts`]), as a real cluster's network stands between the API
//! server and the pod. The answers are kube-apiserver's: `404` for a pod that does not exist,
//! `400` "address not allowed" for one without an IP (not running yet), `503`
//! ServiceUnavailable "error trying to reach service: ..." when nothing listens or the answer
//! is not HTTP, and otherwise the pod's own status and body. The request's method and path are
//! passed on; headers and bodies of requests are not.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use http::{Response, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::errors::ApiError;
use crate::http::{Body, full};
use crate::resources::ResourceId;
use crate::store::Store;

/// How long the proxy waits for a pod's port to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the ports of pods lead: for one pod's port, or for a port of every pod.
#[derive(Debug, Default)]
pub struct PodPorts {
    one: Mutex<HashMap<(String, String, u16), SocketAddr>>,
    every: Mutex<HashMap<u16, SocketAddr>>,
}

impl PodPorts {
    /// Makes `port` of pod `namespace/pod` lead to `to`.
    pub fn forward(&self, namespace: &str, pod: &str, port: u16, to: SocketAddr) {
        self.one
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((namespace.into(), pod.into(), port), to);
    }

    /// Makes `port` of every pod without a port of its own lead to `to`.
    pub fn forward_every(&self, port: u16, to: SocketAddr) {
        self.every
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(port, to);
    }

    fn of(&self, namespace: &str, pod: &str, port: u16) -> Option<SocketAddr> {
        let one = self.one.lock().unwrap_or_else(PoisonError::into_inner);
        one.get(&(namespace.to_string(), pod.to_string(), port))
            .copied()
            .or_else(|| {
                self.every
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&port)
                    .copied()
            })
    }
}

fn unreachable(detail: &str) -> ApiError {
    ApiError::ServiceUnavailable(format!("error trying to reach service: {detail}"))
}

/// Proxies `method` and `path` to the pod named by `target` (`name` or `name:port`) in
/// `namespace`.
///
/// # Errors
/// As kube-apiserver answers: see the module documentation.
pub async fn proxy(
    store: &Store,
    ports: &PodPorts,
    method: &http::Method,
    namespace: &str,
    target: &str,
    path: &str,
) -> Result<Response<Body>, ApiError> {
    let (name, port) = match target.rsplit_once(':') {
        Some((name, port)) => {
            let port = port
                .parse::<u16>()
                .map_err(|_| ApiError::BadRequest(format!("invalid pod request {target:?}")))?;
            (name, Some(port))
        }
        None => (target, None),
    };
    let pod = store.read(|state| {
        let resource = state.resource(&ResourceId::new("", "pods"))?;
        state.fetch(&resource, namespace, name)
    })?;
    let port = port.or_else(|| {
        pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|container| container["ports"][0]["containerPort"].as_u64())
            .and_then(|port| u16::try_from(port).ok())
    });
    let ip = pod["status"]["podIP"].as_str().unwrap_or_default();
    if ip.is_empty() {
        return Err(ApiError::BadRequest("address not allowed".into()));
    }
    let port = port.unwrap_or(80);
    let Some(to) = ports.of(namespace, name, port) else {
        return Err(unreachable(&format!(
            "dial tcp {ip}:{port}: connect: connection refused"
        )));
    };
    let answer = tokio::time::timeout(ANSWER_TIMEOUT, ask(to, method, ip, port, path)).await;
    match answer {
        Err(_) => Err(unreachable(&format!("dial tcp {ip}:{port}: i/o timeout"))),
        Ok(Err(error)) => Err(unreachable(&format!(
            "dial tcp {ip}:{port}: connect: {error}"
        ))),
        Ok(Ok(bytes)) => answered(&bytes),
    }
}

/// Sends the request to `to` and reads the whole answer.
async fn ask(
    to: SocketAddr,
    method: &http::Method,
    ip: &str,
    port: u16,
    path: &str,
) -> std::io::Result<Vec<u8>> {
    let mut stream = tokio::net::TcpStream::connect(to).await?;
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let request =
        format!("{method} {path} HTTP/1.1\r\nHost: {ip}:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    Ok(answer)
}

/// The pod's answer as the proxy passes it on: its status and body, or kube-apiserver's error
/// for an answer that is not HTTP.
fn answered(bytes: &[u8]) -> Result<Response<Body>, ApiError> {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status_line = head.lines().next().unwrap_or_default();
    let code = status_line
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|code| code.parse::<u16>().ok())
        .and_then(|code| StatusCode::from_u16(code).ok());
    let Some(code) = code else {
        return Err(unreachable(&format!(
            "net/http: HTTP/1.x transport connection broken: malformed HTTP response {status_line:?}"
        )));
    };
    Ok(Response::builder()
        .status(code)
        .body(full(body.to_string()))
        .unwrap_or_else(|_| Response::new(full(""))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_that_is_not_http_is_reported_as_kube_apiserver_reports_it() {
        let error = answered(b"ok").unwrap_err();
        assert_eq!(error.code(), 503);
        assert_eq!(
            error.to_string(),
            "error trying to reach service: net/http: HTTP/1.x transport connection broken: malformed HTTP response \"ok\""
        );
        let fine = answered(b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\nstopped").unwrap();
        assert_eq!(fine.status(), StatusCode::OK);
    }
}
