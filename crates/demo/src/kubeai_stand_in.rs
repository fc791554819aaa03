//! A stand-in for the `kubeai` SDK inside the demo's pods: the simulated pods run no code, so
//! one local listener plays the SDK's part for port 9009 of every pod. Like the SDK, it answers
//! any request with the two bytes `ok`; it counts the `GET /stop` requests it hears.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The listener and what it heard.
pub struct StandIn {
    /// Where it listens, on the loopback interface.
    pub address: SocketAddr,
    stops: Arc<AtomicUsize>,
}

impl StandIn {
    /// Starts listening on a free loopback port.
    ///
    /// # Errors
    /// When no loopback port can be bound.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let stops = Arc::new(AtomicUsize::new(0));
        let heard = Arc::clone(&stops);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let heard = Arc::clone(&heard);
                tokio::spawn(async move {
                    let mut request = [0_u8; 512];
                    let read = stream.read(&mut request).await.unwrap_or(0);
                    if request[..read].starts_with(b"GET /stop ") {
                        heard.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = stream.write_all(b"ok").await;
                });
            }
        });
        Ok(Self { address, stops })
    }

    /// How many `GET /stop` requests it has heard.
    pub fn stops_heard(&self) -> usize {
        self.stops.load(Ordering::Relaxed)
    }
}
