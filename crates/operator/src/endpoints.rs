//! The operator's HTTP endpoints: `/metrics` (Prometheus), `/healthz` and `/readyz`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use eto_controller::Metrics;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Serves the endpoints on `listener` until the process ends.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                    let metrics = Arc::clone(&metrics);
                    async move { Ok::<_, Infallible>(answer(request.uri().path(), &metrics)) }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(path: &str, metrics: &Metrics) -> http::Response<Full<Bytes>> {
    let (code, content_type, body) = match path {
        "/metrics" => (
            200,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        "/healthz" => (200, "text/plain", "ok\n".to_string()),
        // A standby is ready too: it is healthy and waits to take over. The body says which.
        "/readyz" => {
            let role = if metrics.leader.get() == 1 {
                "leading"
            } else {
                "standby"
            };
            (200, "text/plain", format!("ok: {role}\n"))
        }
        _ => (404, "text/plain", "not found\n".to_string()),
    };
    http::Response::builder()
        .status(code)
        .header("Content-Type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| http::Response::new(Full::new(Bytes::new())))
}

/// Binds `address`.
///
/// # Errors
/// The address cannot be bound.
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address).await
}
