//! Streamable HTTP: `/mcp` for MCP (both eras), `GET /healthz`, bearer-token auth, and
//! DNS-rebinding protection (Host and Origin checks).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use super::{Gateway, GatewayHandler};

/// Why the HTTP endpoint could not run.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The address is taken or not ours to bind.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The server loop failed.
    #[error("the HTTP server stopped: {0}")]
    Serve(std::io::Error),
}

/// A bound, not yet serving, HTTP endpoint (binding first lets callers learn the port).
pub struct HttpEndpoint {
    listener: TcpListener,
    gateway: Arc<Gateway>,
}

impl HttpEndpoint {
    /// Binds `addr` (e.g. `127.0.0.1:8931`, or port 0 for any free port).
    pub async fn bind(gateway: Arc<Gateway>, addr: &str) -> Result<Self, HttpError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Bind {
                addr: addr.to_owned(),
                source,
            })?;
        Ok(Self { listener, gateway })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until the gateway's shutdown token is cancelled; open streams are closed then.
    pub async fn serve(self) -> Result<(), HttpError> {
        let shutdown = self.gateway.shutdown_token();
        let router = router(self.gateway);
        axum::serve(self.listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
            .await
            .map_err(HttpError::Serve)
    }
}

/// The HTTP routes of the gateway.
pub fn router(gateway: Arc<Gateway>) -> Router {
    let config = gateway.config();
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(config.allowed_hosts.iter().cloned());
    let mut origins: Vec<String> = vec![
        "http://localhost:*".into(),
        "http://127.0.0.1:*".into(),
        "http://[::1]:*".into(),
    ];
    origins.extend(config.allowed_origins.iter().cloned());
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        // A 2026-07-28 request whose handler sends nothing before its answer gets plain JSON
        // (no event stream to open and frame); one with progress or a question still streams.
        .with_json_response(true)
        .with_cancellation_token(gateway.shutdown_token().child_token());
    let factory_gateway = gateway.clone();
    let mcp: StreamableHttpService<GatewayHandler, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(GatewayHandler::new(factory_gateway.clone())),
            Arc::new(LocalSessionManager::default()),
            mcp_config,
        );
    let mcp_routes = Router::new()
        .nest_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(
            gateway.clone(),
            authenticate,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .with_state(gateway)
        .merge(mcp_routes)
}

async fn healthz(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    axum::Json(serde_json::json!({
        "status": "ok",
        "servers": gateway.backend().status(),
    }))
}

/// Attaches the caller's identity, or answers 401 when clients are configured and the request
/// has no valid bearer token.
async fn authenticate(
    State(gateway): State<Arc<Gateway>>,
    mut request: Request,
    next: Next,
) -> Response {
    let identity = if gateway.requires_token() {
        let token = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        match token.and_then(|t| gateway.authenticate(t)) {
            Some(identity) => identity,
            None => return unauthorized(),
        }
    } else {
        gateway.anonymous()
    };
    request.extensions_mut().insert(identity);
    next.run(request).await
}

fn unauthorized() -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        axum::Json(serde_json::json!({
            "error": "a valid bearer token is required: send Authorization: Bearer <token> for a [[clients]] entry"
        })),
    )
        .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"roster\""),
    );
    response
}
