//! The HTTP/1.1 server clients talk to, baton's own over `httparse`: the
//! accept loop here, one task per connection (`connection`), heads read
//! and written in `head`, bodies read in `read` and answers written in
//! `write`. Each open stream holds a connection, so what a connection costs
//! at rest is what 10,000 streams cost: hyper's server kept an 8 KiB read
//! buffer and an 8 KiB write buffer for every one; this one keeps none
//! while it waits or streams, and writes each piece of an answer with its
//! framing in one vectored write.

mod connection;
mod date;
#[cfg(test)]
mod fuzz;
mod head;
mod read;
mod refusal;
mod target;
mod write;

pub use read::BodyError;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use std::sync::Arc;

use axum::Router;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{Semaphore, watch};

use super::stall::ClientStall;
use crate::observe::Metrics;

/// Connections the kernel may queue before they are accepted (it caps this
/// at `net.core.somaxconn`). The usual 128 overflows when a few thousand
/// clients connect at once, and each connection that overflows waits a
/// second or more for its SYN to be retried.
const LISTEN_BACKLOG: u32 = 4096;

/// After an accept error that is about the process (out of file
/// descriptors), how long to wait before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How long a connection turned away at the cap may take to hear why.
const TURN_AWAY_TIMEOUT: Duration = Duration::from_secs(1);

/// What every client connection is held to, shared by the worker threads.
#[derive(Clone)]
pub struct ConnectionLimits {
    /// One permit per connection served; none left means turn the next away.
    slots: Arc<Semaphore>,
    /// How long a write to a client may wait for the client to read.
    stall_timeout: Duration,
    metrics: Arc<Metrics>,
}

impl ConnectionLimits {
    /// At most `max_connections` at once, each dropped when its client
    /// leaves a write waiting for `stall_timeout`.
    pub fn new(max_connections: usize, stall_timeout: Duration, metrics: Arc<Metrics>) -> Self {
        let slots = Arc::new(Semaphore::new(max_connections.min(Semaphore::MAX_PERMITS)));
        ConnectionLimits { slots, stall_timeout, metrics }
    }
}

/// A listener on `addr` with room for bursts of connections.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves `router` on `listener` from `workers` threads, each with a
/// single-threaded runtime accepting from the one listening socket, until
/// `stop` turns true. A connection, its provider connection and every
/// wake-up of its stream stay on the thread that accepted it, as in nginx's
/// worker processes: tokio's work-stealing runtime, which hands tasks
/// between threads, spent 19–25 % more CPU per stream.
pub fn serve_threads(
    listener: std::net::TcpListener,
    router: Router,
    limits: ConnectionLimits,
    workers: usize,
    stop: tokio::sync::watch::Receiver<bool>,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let threads = (0..workers.max(1))
        .map(|worker| {
            let (listener, router, limits, mut stop) =
                (listener.try_clone()?, router.clone(), limits.clone(), stop.clone());
            std::thread::Builder::new().name(format!("baton-worker-{worker}")).spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(listener)?;
                    serve(listener, router, limits, async move {
                        let _ = stop.wait_for(|stop| *stop).await;
                    })
                    .await
                })
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    drop(listener);
    threads
        .into_iter()
        .try_for_each(|thread| thread.join().unwrap_or_else(|_| Err(io::Error::other("a worker thread panicked"))))
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops
/// accepting, lets idle connections go, and waits for the responses in
/// flight. Past the connection cap a new client is answered 503 at once.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let (stop, stopping) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    let mut accept_errors = 0u64;
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) if is_per_connection(&err) => continue,
                Err(err) => {
                    // Logged once per burst: the first error, then the count when accepting works again.
                    if accept_errors == 0 {
                        tracing::warn!(error = %err, "cannot accept connections; retrying");
                    }
                    accept_errors = accept_errors.saturating_add(1);
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if accept_errors > 0 {
            tracing::info!(failed_accepts = accept_errors, "accepting connections again");
            accept_errors = 0;
        }
        tune(&stream);
        let Ok(slot) = Arc::clone(&limits.slots).try_acquire_owned() else {
            limits.metrics.client_fault("connection_cap");
            tokio::spawn(turn_away(stream));
            continue;
        };
        serve_connection(stream, &router, &limits, stopping.clone(), slot);
    }
    drop(listener);
    drop(stopping);
    let _ = stop.send(true);
    // Every connection holds a receiver: once the last one ends, none is left.
    stop.closed().await;
    Ok(())
}

/// Serves one client connection on its own task, holding its `slot` of the
/// cap until it ends; each request on it knows the connection's stall flag.
fn serve_connection(
    stream: TcpStream,
    router: &Router,
    limits: &ConnectionLimits,
    stopping: watch::Receiver<bool>,
    slot: tokio::sync::OwnedSemaphorePermit,
) {
    let serving = connection::Serving { router: router.clone(), stall_timeout: limits.stall_timeout, stopping };
    let metrics = Arc::clone(&limits.metrics);
    tokio::spawn(async move {
        let stall = ClientStall::default();
        if let Err(err) = connection::serve(stream, serving, stall.clone()).await {
            if err.kind() == io::ErrorKind::TimedOut && stall.happened() {
                metrics.client_fault("client_stalled");
            }
            tracing::debug!(error = %err, "client connection ended with an error");
        }
        drop(slot);
    });
}

/// Answers a connection past the cap with a 503 in the OpenAI error shape,
/// then closes it as a refused request is closed; never waits long.
async fn turn_away(stream: TcpStream) {
    let body = r#"{"error":{"message":"too many connections: this gateway is at its max_connections; retry shortly","type":"unavailable_error","code":"too_many_connections"}}"#;
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (read, mut write) = stream.into_split();
    let answer = async {
        write.write_all(response.as_bytes()).await?;
        connection::close(&mut write, Some(read::Reader::new(read))).await
    };
    let _ = tokio::time::timeout(TURN_AWAY_TIMEOUT, answer).await;
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

    /// A burst of connections far past the usual backlog of 128 all connect
    /// at once, before any is accepted, instead of waiting for SYN retries.
    #[tokio::test]
    async fn a_burst_of_connections_queues_without_waiting() {
        let listener = bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let connects = (0..400).map(|_| tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr)));
        let connected = futures_util::future::join_all(connects).await;
        let waited = connected.iter().filter(|c| !matches!(c, Ok(Ok(_)))).count();
        assert_eq!(waited, 0, "connections that did not connect at once, with none accepted yet");
        let again = bind(addr).map(|_| ()).map_err(|err| err.kind());
        assert_eq!(again, Err(io::ErrorKind::AddrInUse), "a second proxy on the same address is refused");
        drop(listener);
    }
}
