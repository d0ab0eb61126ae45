//! One live connection to one server, on rmcp's client side.
//!
//! A [`Connection`] is made by [`Connection::connect`] from a [`ServerConfig`]: it spawns the
//! process or opens the HTTP/SSE stream, runs the lifecycle of the era the server speaks
//! (`server/discover` first, falling back to `initialize`), and on a 2026-07-28 server opens
//! `subscriptions/listen` for `toolsListChanged`. It then offers `tools/list` paged to its end,
//! `tools/call` with a timeout and cancellation, and `ping`.
//!
//! Notifications are fanned out through [`Notifications`], which outlives connections: a
//! listener added once keeps hearing the server across restarts.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use rmcp::model::{
    CancelledNotificationParam, ClientCapabilities, ClientRequest, ClientResult, ElicitResult,
    ElicitationAction, ElicitationCapability, ErrorCode, ErrorData, FormElicitationCapability,
    Implementation, InitializeRequestParams, ProtocolVersion, RequestId, ServerNotification,
    ServerRequest, ServerResult, SubscriptionFilter,
};
use rmcp::service::{
    NotificationContext, RequestContext, RunningService, Subscription, SubscriptionEnd,
};
use rmcp::{ClientLifecycleMode, RoleClient, Service, ServiceError};
use roster_core::Tool;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::stdio::{ChildGuard, SpawnError};
use super::wire::RawResults;
use crate::config::{Era, ServerConfig, TransportConfig};
use crate::inbox::{ConfirmDecision, ConfirmRequest};

/// A notification listener: called with the method and params of every notification the
/// server sends. It runs on the connection's reader, so it must not wait for the server.
pub type NotificationListener = Arc<dyn Fn(&str, &Value) + Send + Sync>;

/// Receives `notifications/progress` for one call: `(progress params)`.
pub type ProgressListener = Arc<dyn Fn(&Value) + Send + Sync>;

/// Asks a person to decide one server request (the inbox, through
/// [`super::NotificationSink::confirm`]).
pub type Confirmer = Arc<dyn Fn(ConfirmRequest) -> super::ConfirmFuture + Send + Sync>;

/// How long a server's `elicitation/create` waits for a person before it is declined.
pub const ELICITATION_WAIT: Duration = Duration::from_secs(300);

/// Identifies a listener so it can be removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(u64);

/// The notification fan-out of one server; shared by all its successive connections.
#[derive(Default)]
pub struct Notifications {
    next: AtomicU64,
    listeners: RwLock<Vec<(ListenerId, NotificationListener)>>,
    progress: Mutex<Progress>,
    confirmer: RwLock<Option<Confirmer>>,
}

/// Progress listeners by token, and progress that arrived before its call registered (rmcp
/// picks the token while sending, so a quick server can report before the listener exists).
#[derive(Default)]
struct Progress {
    listeners: HashMap<String, ProgressListener>,
    early: std::collections::VecDeque<(std::time::Instant, String, Value)>,
}

/// How many early progress notifications are kept, and for how long.
const EARLY_PROGRESS_KEPT: usize = 64;
const EARLY_PROGRESS_FOR: Duration = Duration::from_secs(5);

impl std::fmt::Debug for Notifications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifications").finish_non_exhaustive()
    }
}

impl Notifications {
    /// A fan-out with no listeners.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Adds a listener for every notification of this server.
    pub fn add_notification_listener(
        &self,
        listener: impl Fn(&str, &Value) + Send + Sync + 'static,
    ) -> ListenerId {
        let id = ListenerId(self.next.fetch_add(1, Ordering::Relaxed));
        self.listeners
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, Arc::new(listener)));
        id
    }

    /// Sets who decides this server's `elicitation/create` requests. Connections made after
    /// this declare the `elicitation` capability; without a confirmer they decline.
    pub fn set_confirmer(&self, confirmer: Option<Confirmer>) {
        *self
            .confirmer
            .write()
            .unwrap_or_else(PoisonError::into_inner) = confirmer;
    }

    fn confirmer(&self) -> Option<Confirmer> {
        self.confirmer
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Removes a listener; unknown ids are ignored.
    pub fn remove_notification_listener(&self, id: ListenerId) {
        self.listeners
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(l, _)| *l != id);
    }

    /// Delivers one notification to every listener (and a progress notification to the call
    /// that asked for it). Used by the transports; public so tests can inject notifications.
    pub fn dispatch_notification(&self, method: &str, params: &Value) {
        if method == "notifications/progress"
            && let Some(token) = params.get("progressToken")
        {
            let key = token.to_string();
            let listener = {
                let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
                let listener = progress.listeners.get(&key).cloned();
                if listener.is_none() {
                    let now = std::time::Instant::now();
                    progress
                        .early
                        .retain(|(at, _, _)| now.duration_since(*at) < EARLY_PROGRESS_FOR);
                    if progress.early.len() >= EARLY_PROGRESS_KEPT {
                        progress.early.pop_front();
                    }
                    progress.early.push_back((now, key, params.clone()));
                }
                listener
            };
            if let Some(listener) = listener {
                listener(params);
            }
        }
        // Clone out of the lock so a listener may add or remove listeners.
        let listeners: Vec<NotificationListener> = self
            .listeners
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        for listener in listeners {
            listener(method, params);
        }
    }

    fn watch_progress(&self, token: String, listener: ProgressListener) {
        let early: Vec<Value> = {
            let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            progress.listeners.insert(token.clone(), listener.clone());
            let (mine, others): (Vec<_>, Vec<_>) =
                progress.early.drain(..).partition(|(_, t, _)| *t == token);
            progress.early = others.into();
            mine.into_iter().map(|(_, _, params)| params).collect()
        };
        for params in &early {
            listener(params);
        }
    }

    fn unwatch_progress(&self, token: &str) {
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .listeners
            .remove(token);
    }
}

/// roster's side of the rmcp client: answers the few requests a server may send and turns
/// every notification into `(method, params)` for [`Notifications`].
struct ClientSide {
    notifications: Arc<Notifications>,
}

impl Service<RoleClient> for ClientSide {
    async fn handle_request(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        match request {
            ServerRequest::PingRequest(_) => Ok(ClientResult::empty(())),
            // rmcp runs each request handler on its own task, so waiting here for a person
            // does not stall the reader.
            ServerRequest::ElicitRequest(request) => {
                let params = serde_json::to_value(&request.params).unwrap_or_default();
                let result = self.elicit(params, &context.ct).await;
                Ok(ClientResult::ElicitResult(result))
            }
            other => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "roster does not serve `{}` to its servers",
                    method_of(&serde_json::to_value(&other).unwrap_or_default())
                ),
                None,
            )),
        }
    }

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        _context: NotificationContext<RoleClient>,
    ) -> Result<(), ErrorData> {
        dispatch_typed(&self.notifications, &notification);
        Ok(())
    }

    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = ClientCapabilities::default();
        if self.notifications.confirmer().is_some() {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        }
        let mut info = InitializeRequestParams::new(
            capabilities,
            Implementation::new("roster", env!("CARGO_PKG_VERSION")),
        );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }
}

impl ClientSide {
    /// A form elicitation becomes a yes/no confirm for a person; URL elicitations, forms whose
    /// required fields have no answer roster can give, and every no or expiry are declined.
    async fn elicit(&self, params: Value, cancelled: &CancellationToken) -> ElicitResult {
        let decline = ElicitResult::new(ElicitationAction::Decline);
        let Some(confirmer) = self.notifications.confirmer() else {
            return decline;
        };
        if params.get("mode").and_then(Value::as_str) == Some("url") {
            tracing::info!(%params, "declined a URL elicitation: roster opens no URLs");
            return decline;
        }
        let Some(content) = confirm_content(params.get("requestedSchema")) else {
            tracing::info!(%params, "declined an elicitation that asks for more than a yes");
            return decline;
        };
        let request = ConfirmRequest {
            method: "elicitation/create".to_owned(),
            params,
            ttl: ELICITATION_WAIT,
        };
        let decision = tokio::select! {
            decision = confirmer(request) => decision,
            _ = cancelled.cancelled() => ConfirmDecision::Expired,
        };
        match decision {
            ConfirmDecision::Confirmed => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content)
            }
            ConfirmDecision::Declined | ConfirmDecision::Expired => decline,
        }
    }
}

/// The content a yes gives: every field's `default`, and `true` for a required boolean
/// without one. `None` when a required field is neither (roster cannot make up text).
fn confirm_content(schema: Option<&Value>) -> Option<Value> {
    let empty = Map::new();
    let properties = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut content = Map::new();
    for (name, property) in properties {
        if let Some(default) = property.get("default") {
            content.insert(name.clone(), default.clone());
        } else if required.contains(&name.as_str()) {
            if property.get("type").and_then(Value::as_str) == Some("boolean") {
                content.insert(name.clone(), Value::Bool(true));
            } else {
                return None;
            }
        }
    }
    if required.iter().any(|r| !content.contains_key(*r)) {
        return None;
    }
    Some(Value::Object(content))
}

fn method_of(value: &Value) -> &str {
    value.get("method").and_then(Value::as_str).unwrap_or("?")
}

fn dispatch_typed(notifications: &Notifications, notification: &ServerNotification) {
    match serde_json::to_value(notification) {
        Ok(value) => {
            let params = value.get("params").cloned().unwrap_or(Value::Null);
            notifications.dispatch_notification(method_of(&value), &params);
        }
        Err(error) => tracing::warn!(%error, "cannot read a server notification"),
    }
}

/// The connection could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The process did not start.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The legacy SSE stream did not open.
    #[error(transparent)]
    Sse(#[from] super::sse::SseError),
    /// A configured header is not valid HTTP.
    #[error("header `{0}` is not a valid HTTP header name or value")]
    Header(String),
    /// The MCP lifecycle (`initialize` or `server/discover`) failed.
    #[error("the server did not complete the MCP handshake: {0}")]
    Handshake(String),
}

/// A request to the server failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The server answered with a JSON-RPC error.
    #[error("the server answered with error {code}: {message}")]
    Server {
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
        /// The error's `data`, if any.
        data: Option<Value>,
    },
    /// No answer within the timeout; `notifications/cancelled` was sent.
    #[error("the server did not answer within {0:?}; the request was cancelled")]
    Timeout(Duration),
    /// The caller cancelled; `notifications/cancelled` was sent.
    #[error("the request was cancelled")]
    Cancelled,
    /// The connection is gone.
    #[error("the connection to the server is closed")]
    Closed,
    /// The server answered with something that is not the expected result.
    #[error("the server sent an unexpected answer: {0}")]
    Unexpected(String),
}

impl From<ServiceError> for RequestError {
    fn from(error: ServiceError) -> Self {
        match error {
            ServiceError::McpError(e) => RequestError::Server {
                code: e.code.0,
                message: e.message.into_owned(),
                data: e.data,
            },
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => RequestError::Closed,
            ServiceError::Timeout { timeout } => RequestError::Timeout(timeout),
            ServiceError::Cancelled { .. } => RequestError::Cancelled,
            other => RequestError::Unexpected(other.to_string()),
        }
    }
}

/// One complete `tools/list`: every page, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolListing {
    /// The tools as the server sent them (unknown fields kept on stdio and SSE).
    pub tools: Vec<Tool>,
    /// The shortest `ttlMs` any page carried.
    pub ttl: Option<Duration>,
    /// How many pages it took.
    pub pages: usize,
}

/// How a `tools/call` is run.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Give up (and send `notifications/cancelled`) after this long; `None` = wait forever.
    pub timeout: Option<Duration>,
    /// Cancelling this token cancels the call (and sends `notifications/cancelled`).
    pub cancel: Option<CancellationToken>,
    /// Receives the server's `notifications/progress` for this call.
    pub progress: Option<ProgressListener>,
    /// Answers to the server's `input_required` result of the previous round (SEP-2322).
    pub input: Option<InputRound>,
}

/// What a retried `tools/call` carries after the server answered `input_required`
/// (SEP-2322): the responses to its `inputRequests`, and its `requestState` echoed back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InputRound {
    /// `inputResponses`: one answer per `inputRequests` key.
    pub responses: Map<String, Value>,
    /// `requestState` as the server sent it, if it sent one.
    pub state: Option<String>,
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("timeout", &self.timeout)
            .field("cancel", &self.cancel.is_some())
            .field("progress", &self.progress.is_some())
            .field("input", &self.input)
            .finish()
    }
}

/// Which lifecycle the connection ended up using.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The protocol version agreed on.
    pub protocol_version: String,
    /// `true` for the `initialize` era, `false` for 2026-07-28 (`server/discover`).
    pub legacy: bool,
    /// The server advertised `tools.listChanged` (informational: roster re-lists on the
    /// notification either way).
    pub advertises_list_changed: bool,
    /// The server's `serverInfo.name`, when given.
    pub server_name: Option<String>,
}

// Held for their Drop: the child is killed, the SSE stream closed, with the connection.
enum Guard {
    Child(ChildGuard),
    Sse(#[allow(dead_code)] super::sse::SseGuard),
    None,
}

/// A live connection to one server.
pub struct Connection {
    server: Arc<str>,
    peer: rmcp::Peer<RoleClient>,
    stop: CancellationToken,
    closed: watch::Receiver<bool>,
    notifications: Arc<Notifications>,
    raw: RawResults,
    negotiated: Negotiated,
    listing: tokio::sync::Mutex<()>,
    list_timeout: Duration,
    capabilities: Value,
    _guard: Guard,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.server)
            .field("negotiated", &self.negotiated)
            .finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn lifecycle(era: Era) -> ClientLifecycleMode {
    match era {
        Era::Legacy => ClientLifecycleMode::Initialize,
        Era::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        Era::Auto => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: None,
        },
    }
}

impl Connection {
    /// Connects to a server and completes its lifecycle.
    pub async fn connect(
        server: &str,
        config: &ServerConfig,
        notifications: Arc<Notifications>,
    ) -> Result<Connection, ConnectError> {
        let name: Arc<str> = Arc::from(server);
        let raw = RawResults::default();
        let client = ClientSide {
            notifications: notifications.clone(),
        };
        let mode = lifecycle(config.era);
        let handshake =
            |e: rmcp::service::ClientInitializeError| ConnectError::Handshake(e.to_string());
        let (running, guard): (RunningService<RoleClient, ClientSide>, Guard) = match &config
            .transport
        {
            TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let (transport, child) = super::stdio::spawn(
                    name.clone(),
                    command,
                    args,
                    env,
                    cwd.as_ref(),
                    raw.clone(),
                )?;
                let running = rmcp::serve_client_with_lifecycle(client, transport, mode)
                    .await
                    .map_err(handshake)?;
                (running, Guard::Child(child))
            }
            TransportConfig::Sse { url, headers } => {
                let (transport, sse) =
                    super::sse::connect(name.clone(), url, headers, raw.clone()).await?;
                let running = rmcp::serve_client_with_lifecycle(client, transport, mode)
                    .await
                    .map_err(handshake)?;
                (running, Guard::Sse(sse))
            }
            TransportConfig::StreamableHttp { url, headers } => {
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                let custom: HashMap<_, _> = super::wire::header_map(headers)
                    .map_err(ConnectError::Header)?
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let transport = StreamableHttpClientTransport::from_config(
                    StreamableHttpClientTransportConfig::with_uri(url.as_str())
                        .custom_headers(custom),
                );
                let running = rmcp::serve_client_with_lifecycle(client, transport, mode)
                    .await
                    .map_err(handshake)?;
                (running, Guard::None)
            }
        };

        let peer = running.peer().clone();
        let capabilities = peer
            .peer_info()
            .and_then(|info| serde_json::to_value(&info.capabilities).ok())
            .unwrap_or(Value::Null);
        let negotiated = match peer.peer_info() {
            Some(info) => Negotiated {
                protocol_version: info.protocol_version.to_string(),
                legacy: info.protocol_version.has_initialize(),
                advertises_list_changed: info
                    .capabilities
                    .tools
                    .as_ref()
                    .and_then(|t| t.list_changed)
                    .unwrap_or(false),
                server_name: info.server_info.as_ref().map(|i| i.name.clone()),
            },
            None => {
                return Err(ConnectError::Handshake(
                    "no server information after the handshake".to_owned(),
                ));
            }
        };
        tracing::info!(
            server,
            protocol = %negotiated.protocol_version,
            "connected"
        );

        let stop = CancellationToken::new();
        let (closed_tx, closed_rx) = watch::channel(false);
        let token = running.cancellation_token();
        let stop_wait = stop.clone();
        let name_wait = name.clone();
        tokio::spawn(async move {
            let waiting = running.waiting();
            tokio::pin!(waiting);
            tokio::select! {
                reason = &mut waiting => {
                    tracing::info!(server = %name_wait, reason = ?reason, "connection ended");
                }
                _ = stop_wait.cancelled() => {
                    token.cancel();
                    let _ = waiting.await;
                }
            }
            let _ = closed_tx.send(true);
        });

        if !negotiated.legacy {
            let subscription = peer
                .listen(SubscriptionFilter::builder().tools_list_changed().build())
                .await;
            match subscription {
                Ok(subscription) => {
                    let (stop_listen, name_listen) = (stop.clone(), name.clone());
                    relay_listen(
                        subscription,
                        notifications.clone(),
                        stop.clone(),
                        move |end| {
                            // Without the stream list_changed is never heard again while the
                            // connection looks healthy: end the connection so supervision
                            // reconnects and listens anew.
                            tracing::warn!(server = %name_listen, ?end, "subscriptions/listen ended; closing the connection");
                            stop_listen.cancel();
                        },
                    );
                }
                Err(error) => {
                    tracing::warn!(server, %error, "subscriptions/listen refused; list_changed will not be heard");
                }
            }
        }

        Ok(Connection {
            server: name,
            peer,
            stop,
            closed: closed_rx,
            notifications,
            raw,
            negotiated,
            listing: tokio::sync::Mutex::new(()),
            list_timeout: config.list_timeout,
            capabilities,
            _guard: guard,
        })
    }

    /// The server's configured name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The child process id, for a stdio server.
    pub fn pid(&self) -> Option<u32> {
        match &self._guard {
            Guard::Child(child) => child.pid(),
            _ => None,
        }
    }

    /// What the handshake agreed on.
    pub fn negotiated(&self) -> &Negotiated {
        &self.negotiated
    }

    /// The notification fan-out this connection delivers to.
    pub fn notifications(&self) -> &Arc<Notifications> {
        &self.notifications
    }

    /// Adds a listener for every notification of this server (it survives reconnects).
    pub fn add_notification_listener(
        &self,
        listener: impl Fn(&str, &Value) + Send + Sync + 'static,
    ) -> ListenerId {
        self.notifications.add_notification_listener(listener)
    }

    /// Delivers a notification as if the server had sent it.
    pub fn dispatch_notification(&self, method: &str, params: &Value) {
        self.notifications.dispatch_notification(method, params);
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// Resolves when the connection ends (process exit, stream drop, shutdown).
    pub async fn closed(&self) {
        let mut closed = self.closed.clone();
        let _ = closed.wait_for(|c| *c).await;
    }

    /// Pings the server; a missing answer within `timeout` is an error.
    pub async fn ping(&self, timeout: Duration) -> Result<(), RequestError> {
        let request = client_request(json!({"method": "ping"}))?;
        let handle = self
            .peer
            .send_cancellable_request(
                request,
                rmcp::service::PeerRequestOptions::with_timeout(timeout),
            )
            .await?;
        handle.await_response().await?;
        Ok(())
    }

    /// Pages `tools/list` to its end. One listing at a time per connection; each page must
    /// come within the server's `list_timeout` (else `notifications/cancelled` is sent).
    pub async fn list_tools(&self) -> Result<ToolListing, RequestError> {
        const MAX_PAGES: usize = 1000;
        let _one_at_a_time = self.listing.lock().await;
        let mut listing = ToolListing {
            tools: Vec::new(),
            ttl: None,
            pages: 0,
        };
        let mut cursor: Option<String> = None;
        let mut seen_cursors = std::collections::HashSet::new();
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let request = client_request(json!({"method": "tools/list", "params": params}))?;
            let handle = self
                .peer
                .send_cancellable_request(
                    request,
                    rmcp::service::PeerRequestOptions::with_timeout(self.list_timeout),
                )
                .await?;
            let id = handle.id.clone();
            let answer = handle.await_response().await;
            let raw = self.raw.take(&id);
            let typed = match answer? {
                ServerResult::ListToolsResult(result) => result,
                other => {
                    return Err(RequestError::Unexpected(format!(
                        "tools/list answered with {}",
                        serde_json::to_value(&other).unwrap_or_default()
                    )));
                }
            };
            let page_tools = match raw.as_ref().and_then(|r| r.get("tools")) {
                Some(raw_tools) => parse_tools(raw_tools)?,
                None => typed
                    .tools
                    .iter()
                    .map(|t| {
                        serde_json::to_value(t)
                            .and_then(serde_json::from_value::<Tool>)
                            .map_err(|e| RequestError::Unexpected(e.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            };
            listing.tools.extend(page_tools);
            listing.pages += 1;
            if let Some(ttl) = typed.ttl_ms {
                let ttl = Duration::from_millis(ttl);
                listing.ttl = Some(listing.ttl.map_or(ttl, |t: Duration| t.min(ttl)));
            }
            match typed.next_cursor {
                Some(next) if !next.is_empty() => {
                    if !seen_cursors.insert(next.clone()) || listing.pages >= MAX_PAGES {
                        return Err(RequestError::Unexpected(format!(
                            "tools/list pagination does not end (cursor {next:?} after {} pages)",
                            listing.pages
                        )));
                    }
                    cursor = Some(next);
                }
                _ => return Ok(listing),
            }
        }
    }

    /// Whether the server advertised `capability` (`prompts`, `resources`, `completions`).
    pub fn advertises(&self, capability: &str) -> bool {
        self.capabilities
            .get(capability)
            .is_some_and(|c| !c.is_null())
    }

    /// Sends one request (`prompts/get`, `resources/read`, …) and returns its result as JSON;
    /// each must come within the server's `list_timeout`.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RequestError> {
        let request = client_request(json!({"method": method, "params": params}))?;
        let handle = self
            .peer
            .send_cancellable_request(
                request,
                rmcp::service::PeerRequestOptions::with_timeout(self.list_timeout),
            )
            .await?;
        let result = handle.await_response().await?;
        serde_json::to_value(result).map_err(|e| RequestError::Unexpected(e.to_string()))
    }

    /// Pages `method` (`prompts/list`, `resources/list`, `resources/templates/list`) to its end
    /// and returns every item of the result's `field` array.
    pub async fn list_all(&self, method: &str, field: &str) -> Result<Vec<Value>, RequestError> {
        const MAX_PAGES: usize = 1000;
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self.request(method, params).await?;
            if let Some(page_items) = page.get(field).and_then(Value::as_array) {
                items.extend(page_items.iter().cloned());
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() && cursor.as_deref() != Some(next) => {
                    cursor = Some(next.to_owned());
                }
                _ => return Ok(items),
            }
        }
        Err(RequestError::Unexpected(format!(
            "{method} pagination does not end after {MAX_PAGES} pages"
        )))
    }

    /// Calls a tool by the server's own name; returns the raw `CallToolResult` JSON.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        options: CallOptions,
    ) -> Result<Value, RequestError> {
        let mut params = json!({"name": tool});
        if let Some(arguments) = arguments {
            params["arguments"] = Value::Object(arguments);
        }
        if let Some(input) = &options.input {
            params["inputResponses"] = Value::Object(input.responses.clone());
            if let Some(state) = &input.state {
                params["requestState"] = Value::String(state.clone());
            }
        }
        let request = client_request(json!({"method": "tools/call", "params": params}))?;
        let handle = self
            .peer
            .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
            .await?;
        let id = handle.id.clone();
        let token = serde_json::to_value(&handle.progress_token.0)
            .map(|t| t.to_string())
            .unwrap_or_default();
        if let Some(progress) = options.progress.clone() {
            // Early progress for this token is replayed; the wait below keeps the order.
            self.notifications.watch_progress(token.clone(), progress);
        }
        let cancel = options.cancel.clone().unwrap_or_default();
        let timeout = async {
            match options.timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            answer = handle.await_response() => answer.map_err(RequestError::from),
            _ = timeout => {
                self.send_cancelled(&id, "timed out").await;
                Err(RequestError::Timeout(options.timeout.unwrap_or_default()))
            }
            _ = cancel.cancelled() => {
                self.send_cancelled(&id, "cancelled by the client").await;
                Err(RequestError::Cancelled)
            }
        };
        self.notifications.unwatch_progress(&token);
        let raw = self.raw.take(&id);
        match outcome? {
            ServerResult::CallToolResult(typed) => match raw {
                Some(raw) => Ok(raw),
                None => {
                    serde_json::to_value(typed).map_err(|e| RequestError::Unexpected(e.to_string()))
                }
            },
            // The server needs input first (SEP-2322): the caller decides what to do with it.
            ServerResult::InputRequiredResult(typed) => match raw {
                Some(raw) => Ok(raw),
                None => {
                    serde_json::to_value(typed).map_err(|e| RequestError::Unexpected(e.to_string()))
                }
            },
            other => match raw {
                // An answer rmcp reads as another type is still a tool result for us
                // (for instance an empty `{}` from a permissive server).
                Some(raw) => Ok(raw),
                None => Err(RequestError::Unexpected(format!(
                    "tools/call answered with {}",
                    serde_json::to_value(&other).unwrap_or_default()
                ))),
            },
        }
    }

    async fn send_cancelled(&self, id: &RequestId, reason: &str) {
        let params = CancelledNotificationParam::new(Some(id.clone()), Some(reason.to_owned()));
        if let Err(error) = self.peer.notify_cancelled(params).await {
            tracing::debug!(server = %self.server, %error, "cannot send notifications/cancelled");
        }
    }

    /// Ends the connection (the child process is killed).
    pub fn close(&self) {
        self.stop.cancel();
    }
}

/// A subscription to one resource's updates on one connection: a `resources/subscribe` sent
/// (initialize era), or a `subscriptions/listen` stream for that URI (2026-07-28), closed when
/// this is dropped or handed to [`Connection::unwatch_resource`].
#[derive(Debug)]
pub enum ServerWatch {
    /// `resources/subscribe` was answered; `resources/unsubscribe` ends it.
    Subscribed,
    /// A listen stream relays the URI's updates into [`Notifications`] until this is dropped.
    Listening(#[allow(dead_code)] tokio_util::sync::DropGuard),
}

impl Connection {
    /// Whether the server declared `resources.subscribe` (on 2026-07-28: that its listen
    /// streams take resource subscriptions).
    pub fn advertises_subscribe(&self) -> bool {
        self.capabilities
            .pointer("/resources/subscribe")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// Subscribes to `uri`'s `notifications/resources/updated`, which then reach this server's
    /// [`Notifications`] like any other notification. Fails when the server refuses or does
    /// not acknowledge the URI within `list_timeout`.
    pub async fn watch_resource(&self, uri: &str) -> Result<ServerWatch, RequestError> {
        if self.negotiated.legacy {
            self.request("resources/subscribe", json!({ "uri": uri }))
                .await?;
            return Ok(ServerWatch::Subscribed);
        }
        let filter = SubscriptionFilter::builder()
            .resource_subscription(uri)
            .build();
        let subscription = tokio::time::timeout(self.list_timeout, self.peer.listen(filter))
            .await
            .map_err(|_| RequestError::Timeout(self.list_timeout))??;
        let accepted = subscription
            .acknowledged()
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.iter().any(|u| u == uri));
        if !accepted {
            return Err(RequestError::Unexpected(format!(
                "the server did not accept a subscription to {uri}"
            )));
        }
        // Cancelling `stop` drops the subscription, which cancels the listen request.
        let stop = self.stop.child_token();
        let (server, uri) = (self.server.clone(), uri.to_owned());
        relay_listen(
            subscription,
            self.notifications.clone(),
            stop.clone(),
            move |end| {
                // Heard again after the next reconnect, which subscribes anew.
                tracing::warn!(%server, %uri, ?end, "the resource's listen stream ended");
            },
        );
        Ok(ServerWatch::Listening(stop.drop_guard()))
    }

    /// Ends a subscription [`Connection::watch_resource`] made (`resources/unsubscribe`, or
    /// the listen stream cancelled). A failure is logged: the server is past caring.
    pub async fn unwatch_resource(&self, uri: &str, watch: ServerWatch) {
        match watch {
            ServerWatch::Subscribed => {
                let params = json!({ "uri": uri });
                if let Err(error) = self.request("resources/unsubscribe", params).await {
                    tracing::debug!(server = %self.server, uri, %error, "resources/unsubscribe failed");
                }
            }
            ServerWatch::Listening(guard) => drop(guard),
        }
    }
}

/// Feeds a `subscriptions/listen` stream's notifications into `fanout` until `stop` is
/// cancelled (the subscription is dropped, which cancels it) or the stream ends (`ended` is
/// told how).
fn relay_listen(
    mut subscription: Subscription,
    fanout: Arc<Notifications>,
    stop: CancellationToken,
    ended: impl FnOnce(Option<&SubscriptionEnd>) + Send + 'static,
) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                next = subscription.next() => match next {
                    Ok(Some(notification)) => dispatch_typed(&fanout, &notification),
                    Ok(None) | Err(_) => {
                        ended(subscription.end());
                        return;
                    }
                },
                () = stop.cancelled() => return,
            }
        }
    });
}

fn client_request(value: Value) -> Result<ClientRequest, RequestError> {
    serde_json::from_value(value).map_err(|e| RequestError::Unexpected(e.to_string()))
}

fn parse_tools(raw: &Value) -> Result<Vec<Tool>, RequestError> {
    let Some(items) = raw.as_array() else {
        return Err(RequestError::Unexpected(
            "tools/list result has no `tools` array".to_owned(),
        ));
    };
    let mut tools = Vec::with_capacity(items.len());
    for item in items {
        match serde_json::from_value::<Tool>(item.clone()) {
            Ok(tool) => tools.push(tool),
            // One malformed entry should not hide the server's other tools.
            Err(error) => tracing::warn!(%error, tool = %item, "skipped a malformed tool"),
        }
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_yes_gives_defaults_and_true_for_required_booleans() {
        let schema = json!({
            "type": "object",
            "properties": {
                "confirm": {"type": "boolean"},
                "note": {"type": "string", "default": "ok"},
                "optional": {"type": "string"}
            },
            "required": ["confirm"]
        });
        assert_eq!(
            confirm_content(Some(&schema)),
            Some(json!({"confirm": true, "note": "ok"}))
        );
        assert_eq!(confirm_content(None), Some(json!({})));
        let needs_text = json!({
            "properties": {"name": {"type": "string"}},
            "required": ["name"]
        });
        assert_eq!(confirm_content(Some(&needs_text)), None);
        let missing = json!({"properties": {}, "required": ["ghost"]});
        assert_eq!(confirm_content(Some(&missing)), None);
    }

    #[test]
    fn progress_before_registration_is_replayed_once() {
        let notifications = Notifications::new();
        let params = json!({"progressToken": 7, "progress": 1});
        notifications.dispatch_notification("notifications/progress", &params);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        notifications.watch_progress(
            json!(7).to_string(),
            Arc::new(move |p: &Value| sink.lock().expect("lock").push(p.clone())),
        );
        let later = json!({"progressToken": 7, "progress": 2});
        notifications.dispatch_notification("notifications/progress", &later);
        assert_eq!(*seen.lock().expect("lock"), vec![params, later]);
        let other = json!({"progressToken": 8, "progress": 1});
        notifications.dispatch_notification("notifications/progress", &other);
        assert_eq!(seen.lock().expect("lock").len(), 2);
    }
}
