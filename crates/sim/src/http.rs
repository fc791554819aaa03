//! Serving HTTP/1.1 on a TCP listener, with a way to drop every connection at once (an API
//! server restart).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Body of every response.
pub type Body = BoxBody<Bytes, Infallible>;

/// A complete body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

/// A streamed body: every chunk sent on the channel is written as it comes.
pub fn streamed(chunks: tokio::sync::mpsc::Receiver<Bytes>) -> Body {
    let stream = futures::stream::unfold(chunks, |mut chunks| async move {
        let chunk = chunks.recv().await?;
        Some((Ok::<_, Infallible>(Frame::data(chunk)), chunks))
    });
    StreamBody::new(stream).boxed()
}

/// Serves `handler` on `listener` until `stop` is cancelled; cancelling also closes every open
/// connection, in-flight requests and watches included.
pub async fn serve<H, F>(listener: TcpListener, handler: Arc<H>, stop: CancellationToken)
where
    H: Fn(http::Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = http::Response<Body>> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let handler = Arc::clone(&handler);
        let stop = stop.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let response = handler(request);
                async move { Ok::<_, Infallible>(response.await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                () = stop.cancelled() => {}
            }
        });
    }
}
