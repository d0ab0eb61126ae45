//! `GET /metrics`: the page as an HTTP response, and the separate plain-HTTP listener of
//! `[gateway] metrics_listen` (only `/metrics`, no MCP, no auth: bind it where only your
//! scraper reaches). The main listener's `/metrics` is routed in [`crate::gateway::http`],
//! behind its Host/Origin checks and the admin token.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::Metrics;

/// The metrics page as a response: 200 in the Prometheus text format, or 404 naming the key
/// when metrics are off.
pub fn page(metrics: &Metrics) -> Response {
    match metrics.encode() {
        Some(page) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], page).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "metrics are off ([gateway] metrics = false)\n",
        )
            .into_response(),
    }
}

async fn scrape(State(metrics): State<Metrics>) -> Response {
    page(&metrics)
}

/// A bound `metrics_listen` endpoint, not yet serving (binding first lets callers learn the
/// port, and a taken address fail at start).
pub struct MetricsEndpoint {
    listener: TcpListener,
    metrics: Metrics,
}

/// `metrics_listen` could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen for metrics on {addr} ([gateway] metrics_listen): {source}")]
pub struct MetricsListenError {
    addr: String,
    source: std::io::Error,
}

impl MetricsEndpoint {
    /// Binds `addr` for `metrics`.
    pub async fn bind(metrics: Metrics, addr: &str) -> Result<Self, MetricsListenError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| MetricsListenError {
                addr: addr.to_owned(),
                source,
            })?;
        Ok(Self { listener, metrics })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves `GET /metrics` until `shutdown` is cancelled.
    pub async fn serve(self, shutdown: CancellationToken) -> std::io::Result<()> {
        let router = Router::new()
            .route("/metrics", get(scrape))
            .with_state(self.metrics);
        axum::serve(self.listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
    }
}

/// Serves `[gateway] metrics_listen` for `metrics` (a gateway's roster's) in the background,
/// if it is set, until `shutdown` (the gateway's) is cancelled. An address that cannot be
/// bound is a warning, not a stop: a second `roster serve` on the same config (another stdio
/// client) serves MCP without the metrics listener.
pub async fn spawn_listener(metrics: &Metrics, shutdown: CancellationToken, listen: Option<&str>) {
    let Some(addr) = listen else {
        return;
    };
    let endpoint = match MetricsEndpoint::bind(metrics.clone(), addr).await {
        Ok(endpoint) => endpoint,
        Err(error) => {
            tracing::warn!("{error}; metrics are served at /metrics of the HTTP listener only");
            return;
        }
    };
    if let Some(bound) = endpoint.local_addr() {
        eprintln!("roster: serving metrics on {bound} (GET /metrics)");
    }
    tokio::spawn(async move {
        if let Err(error) = endpoint.serve(shutdown).await {
            tracing::warn!(%error, "the metrics listener stopped");
        }
    });
}
