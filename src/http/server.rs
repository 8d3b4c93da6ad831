//! The accept loop: one HTTP/1.1 connection task per client, with Nagle off
//! and a small read buffer. Each open stream holds a connection, so what a
//! connection costs at rest is what 10,000 streams cost; hyper's HTTP/1
//! server alone is a fraction of the version-sniffing server axum starts.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};

/// The most a connection buffers of what the client sends: request heads
/// must fit, bodies stream through it. hyper's floor, and its first read size.
const MAX_READ_BUFFER: usize = 8192;

/// How long a client may take to send a request head before it is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// After an accept error that is about the process (out of file
/// descriptors), how long to wait before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` until `shutdown` resolves, then stops
/// accepting, lets idle connections go, and waits for the responses in flight.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) if is_per_connection(&err) => continue,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot accept connections; retrying");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        tune(&stream);
        let connection = http1::Builder::new()
            .max_buf_size(MAX_READ_BUFFER)
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(router.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, "client connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Every token is a small write that must leave at once: with Nagle's
/// algorithm on, each waits for the client's delayed ACK (about 40 ms).
fn tune(stream: &TcpStream) {
    if let Err(err) = stream.set_nodelay(true) {
        tracing::warn!(error = %err, "cannot turn off Nagle's algorithm on a client connection");
    }
}

/// Accept errors that concern one connection, not the listener.
fn is_per_connection(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn client_connections_have_nagle_off() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let _client = TcpStream::connect(addr).await.expect("connect");
        let (accepted, _) = listener.accept().await.expect("accept");
        tune(&accepted);
        assert!(accepted.nodelay().expect("readable option"), "the accepted connection has TCP_NODELAY");
    }
}
