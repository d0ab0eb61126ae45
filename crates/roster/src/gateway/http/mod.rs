//! Streamable HTTP: `/mcp` for MCP (both eras), `GET /healthz`, bearer-token auth, and
//! DNS-rebinding protection (Host and Origin checks).
//!
//! `listener` accepts connections (TCP_NODELAY, a connection cap, a header-read timeout,
//! graceful shutdown); `guard` holds the checks every route shares (Host and Origin, the bearer
//! token); `front` sits before rmcp's service on `/mcp` (session ownership and bounds, status
//! codes, parse errors, plain JSON answers); `sessions` holds the sessions.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use super::{Gateway, GatewayHandler, Refusal, ResourceServer};
use crate::config::GatewayConfig;

mod front;
pub(crate) mod guard;
pub(crate) mod listener;
mod sessions;

use front::Front;
use guard::{Rebinding, bearer, digest, redact};
use sessions::{BoundSessions, SessionLimits};

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
    /// `[gateway] admin_token_env` names a variable that is unset or empty.
    #[error(
        "[gateway] admin_token_env names {0}, but that environment variable is not set (or \
         empty): set it to the admin token, or remove admin_token_env"
    )]
    MissingAdminToken(String),
}

/// The largest request body taken (rmcp's own limit; the front reads bodies first, so it
/// applies it).
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The limits of the HTTP front: those of the `[gateway]` table (`max_connections`, the read
/// timeouts, the session bounds), read from it where they are used.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    gateway: GatewayConfig,
    /// SHA-256 of the admin token that unlocks the full `/healthz` (`None`: nothing does).
    admin_digest: Option<[u8; 32]>,
    /// Where roster's state lives: with the stores replicas share (`[store]`),
    /// initialize-era sessions live there too.
    stores: Option<crate::store::Stores>,
}

impl HttpSettings {
    /// Sessions shared with the other replicas when `stores` are the ones they share.
    pub fn with_stores(mut self, stores: crate::store::Stores) -> Self {
        self.stores = Some(stores);
        self
    }

    /// The settings a `[gateway]` table gives; reads the admin token from its variable.
    pub fn from_gateway(gateway: &GatewayConfig) -> Result<Self, HttpError> {
        let admin_digest = match &gateway.admin_token_env {
            Some(var) => match std::env::var(var) {
                Ok(token) if !token.is_empty() => Some(digest(&token)),
                _ => return Err(HttpError::MissingAdminToken(var.clone())),
            },
            None => None,
        };
        Ok(Self {
            gateway: gateway.clone(),
            stores: None,
            admin_digest,
        })
    }
}

impl Default for HttpSettings {
    /// The `[gateway]` defaults, and no admin token.
    fn default() -> Self {
        Self {
            // Only the HTTP limits are read, and none of them comes from the environment.
            gateway: GatewayConfig::defaults(&|_| None),
            admin_digest: None,
            stores: None,
        }
    }
}

/// A bound, not yet serving, HTTP endpoint (binding first lets callers learn the port).
pub struct HttpEndpoint {
    listener: TcpListener,
    gateway: Arc<Gateway>,
    settings: HttpSettings,
}

impl HttpEndpoint {
    /// Binds `addr` (e.g. `127.0.0.1:8931`, or port 0 for any free port), with default limits.
    pub async fn bind(gateway: Arc<Gateway>, addr: &str) -> Result<Self, HttpError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Bind {
                addr: addr.to_owned(),
                source,
            })?;
        Ok(Self {
            listener,
            gateway,
            settings: HttpSettings::default(),
        })
    }

    /// The same endpoint with these limits.
    pub fn with_settings(mut self, settings: HttpSettings) -> Self {
        self.settings = settings;
        self
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until the gateway's shutdown token is cancelled; requests in flight then are
    /// answered with an error naming the shutdown, and open streams are closed.
    pub async fn serve(self) -> Result<(), HttpError> {
        let shutdown = self.gateway.shutdown_token();
        let limits = listener::ConnectionLimits {
            max_connections: self.settings.gateway.max_connections,
            header_read_timeout: self.settings.gateway.header_read_timeout,
        };
        let router = router(self.gateway, &self.settings);
        listener::serve(self.listener, router, limits, shutdown)
            .await
            .map_err(HttpError::Serve)
    }
}

/// The HTTP routes of the gateway.
pub fn router(gateway: Arc<Gateway>, settings: &HttpSettings) -> Router {
    let rebinding = Rebinding::for_config(&gateway.config());
    let hosts = rebinding.hosts.clone();
    let origins = rebinding.origins.clone();
    let mut mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        // A 2026-07-28 request whose handler sends nothing before its answer gets plain JSON
        // (no event stream to open and frame); one with progress or a question still streams.
        // `front` does the same for initialize-era sessions.
        .with_json_response(true)
        .with_cancellation_token(gateway.shutdown_token().child_token());
    let sessions = BoundSessions::new(SessionLimits {
        max_sessions: settings.gateway.max_sessions,
        max_per_client: settings.gateway.max_sessions_per_client,
        idle_timeout: settings.gateway.session_idle_timeout,
    });
    // With [store], a session any replica made is served here too: rmcp replays its stored
    // `initialize`; a DELETE on any replica ends every replica's copy.
    let shared = settings
        .stores
        .as_ref()
        .and_then(|stores| stores.shared_sessions(settings.gateway.session_idle_timeout))
        .inspect(|shared| {
            mcp_config.session_store = Some(Arc::new(shared.clone()));
            sessions.close_deleted(shared);
        });
    let factory_gateway = gateway.clone();
    let mcp: StreamableHttpService<GatewayHandler, BoundSessions> = StreamableHttpService::new(
        move || Ok(GatewayHandler::new(factory_gateway.clone())),
        sessions.clone(),
        mcp_config,
    );
    let counted = Arc::downgrade(&sessions);
    let metrics = gateway.roster().metrics().clone();
    metrics.count_sessions("initialize", move || counted.upgrade().map(|s| s.count()));
    let front = Arc::new(Front {
        metrics,
        sessions: sessions.clone(),
        shared,
        max_body_bytes: MAX_BODY_BYTES,
        body_read_timeout: settings.gateway.body_read_timeout,
        shutdown: gateway.shutdown_token(),
    });
    let mcp_routes = Router::new()
        .nest_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(front, front::mcp_front))
        .layer(middleware::from_fn_with_state(
            gateway.clone(),
            authenticate,
        ));
    let dashboard = super::ui::routes(gateway.clone(), rebinding.clone(), settings.admin_digest);
    let health = Arc::new(Health {
        gateway,
        sessions,
        rebinding,
        admin_digest: settings.admin_digest,
    });
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_page))
        .route(
            "/.well-known/oauth-protected-resource",
            get(resource_metadata),
        )
        // The form with the resource's path (`/mcp`, or the path of `[auth] audience`).
        .route(
            "/.well-known/oauth-protected-resource/{*path}",
            get(resource_metadata),
        )
        .with_state(health)
        .merge(mcp_routes)
        .merge(dashboard)
}

struct Health {
    gateway: Arc<Gateway>,
    sessions: Arc<BoundSessions>,
    rebinding: Rebinding,
    admin_digest: Option<[u8; 32]>,
}

/// `{"status":"ok"}` (503 while shutting down); the servers' state only for the admin token,
/// and even then with secrets in URLs masked.
async fn healthz(State(health): State<Arc<Health>>, headers: HeaderMap) -> Response {
    if let Err(why) = health.rebinding.check(&headers) {
        return (StatusCode::FORBIDDEN, format!("Forbidden: {why}")).into_response();
    }
    let shutting_down = health.gateway.shutdown_token().is_cancelled();
    let (status, word) = if shutting_down {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down")
    } else {
        (StatusCode::OK, "ok")
    };
    let admin = health
        .admin_digest
        .is_some_and(|expected| bearer(&headers).is_some_and(|t| digest(t) == expected));
    if !admin {
        return (status, axum::Json(serde_json::json!({ "status": word }))).into_response();
    }
    let mut servers = health.gateway.roster().servers_json();
    redact(&mut servers);
    (
        status,
        axum::Json(serde_json::json!({
            "status": word,
            "sessions": health.sessions.count(),
            "starting": health.gateway.roster().starting(),
            "servers": servers,
        })),
    )
        .into_response()
}

/// The metrics page, behind the same Host/Origin checks as `/healthz` and, when an admin token
/// is configured, only for it (as `/healthz`'s full view): the page names every server.
async fn metrics_page(State(health): State<Arc<Health>>, headers: HeaderMap) -> Response {
    if let Err(why) = health.rebinding.check(&headers) {
        return (StatusCode::FORBIDDEN, format!("Forbidden: {why}")).into_response();
    }
    if let Some(expected) = health.admin_digest
        && bearer(&headers).is_none_or(|t| digest(t) != expected)
    {
        let mut response = (
            StatusCode::UNAUTHORIZED,
            "/metrics needs the admin token ([gateway] admin_token_env) as a bearer token\n",
        )
            .into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"roster\""),
        );
        return response;
    }
    crate::metrics::http::page(health.gateway.roster().metrics())
}

/// Attaches the caller's identity, or answers 401 when clients or `[auth]` are configured and
/// the request has no valid bearer token (403 when a verified token lacks a required scope).
async fn authenticate(
    State(gateway): State<Arc<Gateway>>,
    mut request: Request,
    next: Next,
) -> Response {
    let identity = if gateway.requires_token() {
        let token = bearer(request.headers());
        match token.and_then(|t| gateway.authenticate(t)) {
            Some(identity) => identity,
            None => match gateway.resource_server() {
                None => return unauthorized(),
                Some(server) => {
                    let verified = match token {
                        None => Err(Refusal::Missing),
                        Some(token) => {
                            let defaults = gateway.anonymous().subscriptions;
                            server.verify(token, &defaults).await
                        }
                    };
                    match verified {
                        Ok(identity) => identity,
                        Err(refusal) => return refused(&server, &refusal),
                    }
                }
            },
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

/// The answer to a request `[auth]` refuses: 401 (no token, or not a valid one) or 403 (a
/// scope missing), with the `WWW-Authenticate` challenge that names the resource metadata.
fn refused(server: &ResourceServer, refusal: &Refusal) -> Response {
    let (status, error, description) = match refusal {
        Refusal::Missing => (
            StatusCode::UNAUTHORIZED,
            "invalid_request",
            "a bearer token is required: an access token of an authorization server the \
             resource metadata names, or a [[clients]] token"
                .to_owned(),
        ),
        Refusal::Invalid(why) => (StatusCode::UNAUTHORIZED, "invalid_token", why.clone()),
        Refusal::InsufficientScope => (
            StatusCode::FORBIDDEN,
            "insufficient_scope",
            format!(
                "the token lacks a required scope ({})",
                server.config().required_scopes.join(" ")
            ),
        ),
    };
    let mut response = (
        status,
        axum::Json(serde_json::json!({ "error": error, "error_description": description })),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&server.challenge(refusal)) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The protected resource metadata (RFC 9728), at `/.well-known/oauth-protected-resource` and
/// at the form with the resource's path appended (`…/mcp`); 404 without `[auth]`.
async fn resource_metadata(State(health): State<Arc<Health>>, headers: HeaderMap) -> Response {
    if let Err(why) = health.rebinding.check(&headers) {
        return (StatusCode::FORBIDDEN, format!("Forbidden: {why}")).into_response();
    }
    match health.gateway.resource_server() {
        Some(server) => axum::Json(server.metadata()).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "roster is not an OAuth resource server here: no [auth] table is configured\n",
        )
            .into_response(),
    }
}
