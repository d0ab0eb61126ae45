//! The accept loop: one HTTP/1 connection per accepted socket, with `TCP_NODELAY`, a cap on
//! connections held at once, a header-read timeout, and a graceful end on shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// How long open connections get, once shutdown began, to finish what they are answering.
/// In-flight MCP requests are answered with a shutdown error at once (see `front`), so this
/// only bounds a client that is slow to read its answer.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How often the "connection cap reached" warning may be logged; a flood of refused
/// connections must not become a flood of log lines.
const REFUSAL_LOG_PERIOD: Duration = Duration::from_secs(10);

/// The address of the client a request came from (the peer of its TCP connection), in every
/// request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientAddr(pub(crate) SocketAddr);

/// The limits the accept loop enforces.
#[derive(Debug, Clone)]
pub(super) struct ConnectionLimits {
    pub(super) max_connections: usize,
    pub(super) header_read_timeout: Duration,
}

/// Serves `router` on `listener` with the listener limits of `gateway` until the gateway
/// shuts down (the dashboard's own listeners).
pub(crate) async fn serve_router(
    listener: TcpListener,
    router: Router,
    gateway: &crate::config::GatewayConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let limits = ConnectionLimits {
        max_connections: gateway.max_connections,
        header_read_timeout: gateway.header_read_timeout,
    };
    serve(listener, router, limits, shutdown).await
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then lets open connections
/// finish (bounded by [`SHUTDOWN_GRACE`]).
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(RefusalLog::new());
    loop {
        let (socket, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) if is_transient(&e) => {
                    // Out of descriptors or a connection reset before accept: keep serving the
                    // connections we hold; a short pause stops a tight error loop.
                    tracing::warn!("accepting an HTTP connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => return Err(e),
            },
        };
        // Without it a keep-alive client pays Nagle's algorithm against its delayed ACK:
        // ~40 ms on every request after the first.
        if let Err(e) = socket.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY for {peer}: {e}");
        }
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refusals.refused(limits.max_connections);
            refuse(socket, limits.max_connections);
            continue;
        };
        // Each request carries the address it came from (the dashboard's login limits by it).
        let service = TowerToHyperService::new(router.clone());
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ClientAddr(peer));
            service.call(request)
        });
        let shutdown = shutdown.clone();
        let header_read_timeout = limits.header_read_timeout;
        tokio::spawn(async move {
            let _permit = permit;
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .keep_alive(true);
            let connection = builder.serve_connection(TokioIo::new(socket), service);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!("HTTP connection from {peer} ended: {e}");
                    }
                    return;
                }
                _ = shutdown.cancelled() => {}
            }
            connection.as_mut().graceful_shutdown();
            if let Ok(Err(e)) = tokio::time::timeout(SHUTDOWN_GRACE, connection).await {
                tracing::debug!("HTTP connection from {peer} ended at shutdown: {e}");
            }
        });
    }
    drop(listener);
    // Every permit back means every connection task has ended.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE * 2, permits.acquire_many(all)).await;
    Ok(())
}

/// Errors of `accept` that concern one connection or a passing shortage, not the listener.
fn is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    ) || e.raw_os_error().is_some_and(|code| {
        // EMFILE, ENFILE, ENOBUFS, ENOMEM
        matches!(code, 24 | 23 | 105 | 12)
    })
}

/// Answers a connection over the cap with a 503 naming the bound, without waiting for it:
/// a write that would block is skipped and the socket closed.
fn refuse(socket: TcpStream, max_connections: usize) {
    let body = format!(
        "{{\"error\":\"roster already holds {max_connections} HTTP connections \
         ([gateway] max_connections); retry later or raise the limit\"}}"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = socket.try_write(response.as_bytes());
    drop(socket);
}

/// Logs refused connections at most once per [`REFUSAL_LOG_PERIOD`], with how many.
struct RefusalLog {
    start: Instant,
    /// Milliseconds since `start` of the last warning, plus one (0: never warned).
    last: AtomicU64,
    since_last: AtomicU64,
}

impl RefusalLog {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last: AtomicU64::new(0),
            since_last: AtomicU64::new(0),
        }
    }

    fn refused(&self, max_connections: usize) {
        let count = self.since_last.fetch_add(1, Ordering::Relaxed) + 1;
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX) + 1;
        let last = self.last.load(Ordering::Relaxed);
        let period = u64::try_from(REFUSAL_LOG_PERIOD.as_millis()).unwrap_or(u64::MAX);
        if (last == 0 || now.saturating_sub(last) >= period)
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.since_last.store(0, Ordering::Relaxed);
            tracing::warn!(
                "refused {count} HTTP connection(s): roster holds {max_connections} \
                 ([gateway] max_connections)"
            );
        }
    }
}
