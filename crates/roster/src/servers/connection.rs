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

use crate::sync::{lock, read, write};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rmcp::model::{
    CancelledNotificationParam, ClientCapabilities, ClientRequest, ClientResult, CustomResult,
    ElicitResult, ElicitationAction, ErrorCode, ErrorData, Implementation, InitializeRequestParams,
    ProtocolVersion, RequestId, RequestMetaObject, ServerNotification, ServerRequest, ServerResult,
    SubscriptionFilter,
};
use rmcp::service::{
    InboundStreamOrigin, NotificationContext, RequestContext, RunningService, Subscription,
    SubscriptionEnd,
};
use rmcp::{ClientLifecycleMode, RoleClient, Service, ServiceError};
use roster_core::Tool;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::gate::{GatedTransport, NotificationGate, NotificationRate};
use super::relay::{self, CallerRelay, InFlight, InFlightGuard, LogLevel};
use super::stdio::{ChildGuard, SpawnError};
use super::wire::RawResults;
use crate::config::{Era, ServerConfig, ServerLimits, TransportConfig};
use crate::inbox::{ConfirmDecision, ConfirmRequest};

/// A notification listener: called with the method and params of every notification the
/// server sends. It runs on the connection's reader, so it must not wait for the server.
pub type NotificationListener = Arc<dyn Fn(&str, &Value) + Send + Sync>;

/// Receives `notifications/progress` for one call: `(progress params)`.
pub type ProgressListener = Arc<dyn Fn(&Value) + Send + Sync>;

/// Asks a person to decide one server request (the inbox, through
/// [`super::NotificationSink::confirm`]).
pub type Confirmer = Arc<dyn Fn(ConfirmRequest) -> super::ConfirmFuture + Send + Sync>;

/// Receives the params of a server's `notifications/message` sent while no request was in
/// flight to it (runs on the connection's reader: it must not wait).
pub type LogFallback = Arc<dyn Fn(&Value) + Send + Sync>;

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
    log_fallback: RwLock<Option<LogFallback>>,
    /// Notifications dropped over the server's rate, over all its connections.
    dropped: AtomicU64,
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
        write(&self.listeners).push((id, Arc::new(listener)));
        id
    }

    /// Sets who decides this server's `elicitation/create` requests that no caller can take;
    /// without a confirmer they are declined.
    pub fn set_confirmer(&self, confirmer: Option<Confirmer>) {
        *write(&self.confirmer) = confirmer;
    }

    fn confirmer(&self) -> Option<Confirmer> {
        read(&self.confirmer).clone()
    }

    /// Sets where this server's log messages go when no request is in flight to it (the
    /// gateway hands them to the sessions that asked for log messages).
    pub fn set_log_fallback(&self, fallback: Option<LogFallback>) {
        *write(&self.log_fallback) = fallback;
    }

    fn log_fallback(&self) -> Option<LogFallback> {
        read(&self.log_fallback).clone()
    }

    /// How many of this server's notifications were dropped over its rate so far (see
    /// [`super::gate`]).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(crate) fn count_dropped(&self, dropped: u64) {
        self.dropped.fetch_add(dropped, Ordering::Relaxed);
    }

    /// Removes a listener; unknown ids are ignored.
    pub fn remove_notification_listener(&self, id: ListenerId) {
        write(&self.listeners).retain(|(l, _)| *l != id);
    }

    /// Delivers one notification to every listener (and a progress notification to the call
    /// that asked for it). Used by the transports; public so tests can inject notifications.
    pub fn dispatch_notification(&self, method: &str, params: &Value) {
        if method == "notifications/progress"
            && let Some(token) = params.get("progressToken")
        {
            let key = token.to_string();
            let listener = {
                let mut progress = lock(&self.progress);
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
        let listeners: Vec<NotificationListener> = read(&self.listeners)
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        for listener in listeners {
            listener(method, params);
        }
    }

    fn watch_progress(&self, token: String, listener: ProgressListener) {
        let early: Vec<Value> = {
            let mut progress = lock(&self.progress);
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
        lock(&self.progress).listeners.remove(token);
    }
}

/// roster's side of the rmcp client: answers the requests a server sends (relaying them to the
/// caller in flight, see [`super::relay`]) and turns every notification into
/// `(method, params)` for [`Notifications`].
struct ClientSide {
    shared: Arc<ClientShared>,
}

/// What the rmcp client side and the [`Connection`] share: the requests in flight with their
/// callers, and who decides what no caller can.
struct ClientShared {
    server: Arc<str>,
    notifications: Arc<Notifications>,
    in_flight: InFlight,
    /// How many log messages and progress updates were handled (see [`super::wire`]).
    call_notifications_handled: watch::Sender<u64>,
}

/// Why a server's request got no result.
enum Unanswered {
    /// Nobody could be asked: no caller, or one without the capability (the reason says which).
    Refused(String),
    /// The caller was asked and answered with this error.
    Failed(ErrorData),
}

impl Service<RoleClient> for ClientSide {
    async fn handle_request(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        match request {
            ServerRequest::PingRequest(_) => Ok(ClientResult::empty(())),
            // rmcp runs each request handler on its own task, so waiting here for the client
            // or a person does not stall the reader.
            ServerRequest::CreateMessageRequest(_)
            | ServerRequest::ElicitRequest(_)
            | ServerRequest::ListRootsRequest(_) => {
                let value = serde_json::to_value(&request).unwrap_or_default();
                let method = method_of(&value).to_owned();
                let params = value.get("params").cloned().unwrap_or_else(|| json!({}));
                // Streamable HTTP names the request whose response stream carried this one.
                let origin = match context.extensions.get::<InboundStreamOrigin>() {
                    Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id.clone()),
                    _ => None,
                };
                let caller = self.shared.in_flight.caller(origin.as_ref());
                match self
                    .shared
                    .answer(caller, &method, params, &context.ct)
                    .await
                {
                    Ok(result) => Ok(ClientResult::CustomResult(CustomResult(result))),
                    Err(Unanswered::Refused(reason)) => Err(ErrorData::invalid_request(
                        format!(
                            "roster cannot relay `{method}` from server `{}`: {reason}",
                            self.shared.server
                        ),
                        None,
                    )),
                    Err(Unanswered::Failed(error)) => Err(error),
                }
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
        match serde_json::to_value(&notification) {
            Ok(value) => {
                let params = value.get("params").cloned().unwrap_or(Value::Null);
                let method = method_of(&value);
                if method == relay::LOG_MESSAGE {
                    self.shared.relay_log(&params);
                }
                self.shared
                    .notifications
                    .dispatch_notification(method, &params);
                if super::wire::CALL_NOTIFICATIONS.contains(&method) {
                    self.shared
                        .call_notifications_handled
                        .send_modify(|handled| *handled += 1);
                }
            }
            Err(error) => tracing::warn!(%error, "cannot read a server notification"),
        }
        Ok(())
    }

    fn get_info(&self) -> InitializeRequestParams {
        // What roster can relay to its clients (elicitation also to the inbox). A 2026-07-28
        // server hears each caller's own capabilities with every request instead.
        let capabilities: ClientCapabilities = serde_json::from_value(json!({
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
            "roots": {},
        }))
        .unwrap_or_default();
        let mut info = InitializeRequestParams::new(
            capabilities,
            Implementation::new("roster", env!("CARGO_PKG_VERSION")),
        );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }
}

impl ClientShared {
    /// Answers one server request: the caller when it declared the capability, else the inbox
    /// for an elicitation; sampling and roots without a caller are refused.
    async fn answer(
        &self,
        caller: Option<Arc<dyn CallerRelay>>,
        method: &str,
        params: Value,
        cancelled: &CancellationToken,
    ) -> Result<Value, Unanswered> {
        let refused = match caller {
            Some(caller) => match relay::refusal(&caller.capabilities(), method, &params) {
                None => {
                    return tokio::select! {
                        answer = caller.ask(method, params) => answer.map_err(Unanswered::Failed),
                        _ = cancelled.cancelled() => Err(Unanswered::Failed(ErrorData::new(
                            ErrorCode::INTERNAL_ERROR,
                            format!("the {method} request was cancelled before the client answered"),
                            None,
                        ))),
                    };
                }
                Some(reason) => reason,
            },
            None => "no client request is in flight to this server".to_owned(),
        };
        if method == relay::ELICITATION {
            tracing::info!(server = %self.server, reason = %refused, "elicitation goes to the inbox");
            let result = self.elicit(params, cancelled).await;
            return serde_json::to_value(result)
                .map_err(|e| Unanswered::Failed(ErrorData::internal_error(e.to_string(), None)));
        }
        Err(Unanswered::Refused(refused))
    }

    /// Gives a log message to the caller in flight when it asked for that level; one sent
    /// outside any request goes to the log fallback.
    fn relay_log(&self, params: &Value) {
        if self.in_flight.is_empty() {
            if let Some(fallback) = self.notifications.log_fallback() {
                fallback(params);
            }
            return;
        }
        let Some(caller) = self.in_flight.caller(None) else {
            return;
        };
        let wanted = caller.log_level().is_some_and(|least| {
            LogLevel::of_message(params).unwrap_or(LogLevel::Emergency) >= least
        });
        if wanted {
            caller.log(params.clone());
        }
    }

    /// What a 2026-07-28 server is told the client can do, for one request of `caller`: the
    /// caller's relayable capabilities; for an initialize-era caller (or none) also form
    /// elicitation when the inbox can ask a person.
    fn declared_for(&self, caller: Option<&Arc<dyn CallerRelay>>) -> Value {
        let mut capabilities = caller
            .map(|c| relay::relayable(&c.capabilities()))
            .unwrap_or_default();
        let passes_through = caller.is_some_and(|c| c.takes_input_required());
        if !passes_through && self.notifications.confirmer().is_some() {
            capabilities
                .entry("elicitation")
                .or_insert_with(|| json!({"form": {}}));
        }
        Value::Object(capabilities)
    }

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
    /// roster is shutting down (or replacing the connection) while the request was in flight.
    #[error("roster is shutting down; the request to server `{0}` was abandoned")]
    ShuttingDown(String),
    /// The listing's pages add up to more than `max_listing_bytes`.
    #[error(
        "the server's tool listing exceeds max_listing_bytes ({limit} bytes) at page {pages}; \
         raise `max_listing_bytes` in [gateway] if the server really needs it"
    )]
    ListingTooLarge {
        /// The bound.
        limit: usize,
        /// The page that crossed it.
        pages: usize,
    },
    /// The server answered with something that is not the expected result.
    #[error("the server sent an unexpected answer: {0}")]
    Unexpected(String),
    /// The server needed input from the client (an `input_required` result) that roster could
    /// not get: the caller lacks the capability, or answered with an error.
    #[error("the server asked the client for `{method}`, which failed: {message}")]
    Input {
        /// The input request's method (`sampling/createMessage`, …).
        method: String,
        /// The JSON-RPC error code the caller should get.
        code: i32,
        /// Why, in words.
        message: String,
        /// The error's `data`, if any.
        data: Option<Value>,
    },
}

impl RequestError {
    /// The JSON-RPC error (code, message, data) the server answered with, or that the client
    /// gave when asked on the server's behalf; any other failure comes back as it was.
    pub fn into_jsonrpc(self) -> Result<(i32, String, Option<Value>), RequestError> {
        match self {
            RequestError::Server {
                code,
                message,
                data,
            }
            | RequestError::Input {
                code,
                message,
                data,
                ..
            } => Ok((code, message, data)),
            other => Err(other),
        }
    }
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
    /// The pages' tools as JSON, in bytes (bounded by `max_listing_bytes`).
    pub bytes: usize,
    /// The server listed more than `max_tools`: only the first `max_tools` are here.
    pub cut: bool,
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
    /// The client behind the call: the server's requests and log messages during it go there
    /// (see [`super::relay`]). `None`: only the inbox answers (elicitation).
    pub caller: Option<Arc<dyn CallerRelay>>,
    /// Answers to the server's `input_required` result of the previous round (SEP-2322).
    pub input: Option<InputRound>,
}

/// What a retried request carries after the server answered `input_required` (SEP-2322): the
/// responses to its `inputRequests`, and its `requestState` echoed back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InputRound {
    /// `inputResponses`: one answer per `inputRequests` key.
    pub responses: Map<String, Value>,
    /// `requestState` as the server sent it, if it sent one.
    pub state: Option<String>,
}

impl InputRound {
    /// Puts the answers into a request's params, replacing an earlier round's.
    pub fn apply(&self, params: &mut Value) {
        let Some(params) = params.as_object_mut() else {
            return;
        };
        params.insert(
            "inputResponses".into(),
            Value::Object(self.responses.clone()),
        );
        match &self.state {
            Some(state) => params.insert("requestState".into(), Value::String(state.clone())),
            None => params.remove("requestState"),
        };
    }
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("timeout", &self.timeout)
            .field("cancel", &self.cancel.is_some())
            .field("progress", &self.progress.is_some())
            .field("caller", &self.caller.is_some())
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
    shared: Arc<ClientShared>,
    raw: RawResults,
    negotiated: Negotiated,
    listing: tokio::sync::Mutex<()>,
    list_timeout: Duration,
    limits: ServerLimits,
    /// Set by [`Connection::close`]: a request cut short then names the shutdown, not a lost
    /// server (`stop` is also cancelled when a listen stream ends).
    closed_by_roster: std::sync::atomic::AtomicBool,
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
        let raw = RawResults::new();
        let rate = NotificationRate {
            per_second: config.limits.notification_rate,
            burst: config.limits.notification_burst,
        };
        let gate = NotificationGate::new(name.clone(), rate, notifications.clone());
        let shared = Arc::new(ClientShared {
            server: name.clone(),
            notifications: notifications.clone(),
            in_flight: InFlight::default(),
            call_notifications_handled: watch::channel(0).0,
        });
        let client = ClientSide {
            shared: shared.clone(),
        };
        let mode = lifecycle(config.era);
        // An HTTP library's error may quote the URL, token and all.
        let url = match &config.transport {
            TransportConfig::StreamableHttp { url, .. } | TransportConfig::Sse { url, .. } => {
                Some(url.as_str())
            }
            TransportConfig::Stdio { .. } => None,
        };
        let handshake = |e: rmcp::service::ClientInitializeError| {
            let text = e.to_string();
            ConnectError::Handshake(match url {
                Some(url) => crate::config::redact_url_in(&text, url),
                None => text,
            })
        };
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
                    super::stdio::Spawn {
                        server: name.clone(),
                        command,
                        args,
                        env,
                        cwd: cwd.as_ref(),
                        limits: &config.limits,
                    },
                    raw.clone(),
                    gate,
                )?;
                let running = rmcp::serve_client_with_lifecycle(client, transport, mode)
                    .await
                    .map_err(handshake)?;
                (running, Guard::Child(child))
            }
            TransportConfig::Sse { url, headers } => {
                let (transport, sse) =
                    super::sse::connect(name.clone(), url, headers, raw.clone(), gate).await?;
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
                let transport = GatedTransport::new(
                    StreamableHttpClientTransport::from_config(
                        StreamableHttpClientTransportConfig::with_uri(url.as_str())
                            .custom_headers(custom),
                    ),
                    gate,
                );
                let running = rmcp::serve_client_with_lifecycle(client, transport, mode)
                    .await
                    .map_err(handshake)?;
                (running, Guard::None)
            }
        };

        raw.handshake_done();
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
                    tracing::warn!(server, %error, "subscriptions/listen refused; only the list_changed it sends unasked will be heard");
                }
            }
        }

        Ok(Connection {
            server: name,
            peer,
            stop,
            closed: closed_rx,
            notifications,
            shared,
            raw,
            negotiated,
            listing: tokio::sync::Mutex::new(()),
            list_timeout: config.list_timeout,
            limits: config.limits.clone(),
            closed_by_roster: std::sync::atomic::AtomicBool::new(false),
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

    /// For a stdio server, a receiver that turns [`super::stdio::ChildExit::Exited`] once its
    /// process is gone (and its group signalled); `None` for HTTP and SSE servers.
    pub fn child_exit(&self) -> Option<watch::Receiver<super::stdio::ChildExit>> {
        match &self._guard {
            Guard::Child(child) => Some(child.exit()),
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
            bytes: 0,
            cut: false,
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
            listing.bytes += raw
                .as_ref()
                .and_then(|r| r.get("tools"))
                .map_or_else(|| json_size(&typed.tools), json_size);
            if listing.bytes > self.limits.max_listing_bytes {
                return Err(RequestError::ListingTooLarge {
                    limit: self.limits.max_listing_bytes,
                    pages: listing.pages + 1,
                });
            }
            // One past what is kept, so a cut is seen; the rest of the page is never built.
            let room = (self.limits.max_tools + 1).saturating_sub(listing.tools.len());
            let page_tools = match raw.as_ref().and_then(|r| r.get("tools")) {
                Some(raw_tools) => parse_tools(raw_tools, room)?,
                None => typed
                    .tools
                    .iter()
                    .take(room)
                    .map(|t| {
                        serde_json::to_value(t)
                            .and_then(serde_json::from_value::<Tool>)
                            .map_err(|e| RequestError::Unexpected(e.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            };
            listing.tools.extend(page_tools);
            listing.pages += 1;
            if listing.tools.len() >= self.limits.max_tools {
                // Cut rather than refused: the first tools stay usable, and the bound is said.
                if listing.tools.len() > self.limits.max_tools
                    || typed.next_cursor.as_ref().is_some_and(|c| !c.is_empty())
                {
                    tracing::warn!(
                        server = %self.server,
                        max_tools = self.limits.max_tools,
                        "the server lists more tools than max_tools allows; roster keeps the first {}",
                        self.limits.max_tools
                    );
                    listing.cut = true;
                }
                listing.tools.truncate(self.limits.max_tools);
                return Ok(listing);
            }
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

    /// Asks an initialize-era server that advertises `logging` to send log messages at `level`
    /// and above (`logging/setLevel`); a 2026-07-28 server hears the level with each request.
    pub async fn set_log_level(&self, level: LogLevel) -> Result<(), RequestError> {
        if !self.negotiated.legacy || !self.advertises("logging") {
            return Ok(());
        }
        self.request("logging/setLevel", json!({ "level": level }))
            .await
            .map(drop)
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

    /// Calls a tool by the server's own name; returns the raw `CallToolResult` JSON (or, for
    /// a caller that takes them, an `input_required` result).
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
        self.interactive("tools/call", params, options).await
    }

    /// Sends a request the server may answer with `input_required` (`tools/call`,
    /// `prompts/get`, `resources/read`) on behalf of `options.caller`, and returns the final
    /// result JSON. A caller that takes `input_required` results gets them untouched; for any
    /// other roster answers the input requests (the caller, or the inbox for an elicitation)
    /// and retries, at most [`relay::MAX_INPUT_ROUNDS`] times. `options.timeout` bounds each
    /// wait for the server.
    pub async fn interactive(
        &self,
        method: &str,
        mut params: Value,
        options: CallOptions,
    ) -> Result<Value, RequestError> {
        if let Some(input) = &options.input {
            input.apply(&mut params);
        }
        let caller = options.caller.clone();
        let in_flight = self.shared.in_flight.enter(caller.clone());
        let cancel = options.cancel.clone().unwrap_or_default();
        for _ in 0..=relay::MAX_INPUT_ROUNDS {
            let answer = self.round(method, &params, &options, &in_flight).await?;
            let passes_through = caller.as_ref().is_some_and(|c| c.takes_input_required());
            if !relay::is_input_required(&answer) || passes_through {
                return Ok(answer);
            }
            self.fulfil(&answer, caller.as_ref(), &cancel)
                .await?
                .apply(&mut params);
        }
        Err(RequestError::Unexpected(format!(
            "{method} still asked for input after {} rounds",
            relay::MAX_INPUT_ROUNDS
        )))
    }

    /// One request and its answer, with progress, timeout and cancellation.
    async fn round(
        &self,
        method: &str,
        params: &Value,
        options: &CallOptions,
        in_flight: &InFlightGuard<'_>,
    ) -> Result<Value, RequestError> {
        let request = client_request(json!({"method": method, "params": params}))?;
        let mut request_options = rmcp::service::PeerRequestOptions::no_options();
        if !self.negotiated.legacy {
            request_options = request_options.with_meta(self.request_meta(options));
        }
        let handle = self
            .peer
            .send_cancellable_request(request, request_options)
            .await?;
        let id = handle.id.clone();
        in_flight.sent_as(id.clone());
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
            // Answered now rather than when the transport is torn down, and in words: the
            // caller's client gets an error naming the shutdown, not a silent end.
            () = self.stop.cancelled() => Err(if self.closed_by_roster.load(Ordering::Acquire) {
                RequestError::ShuttingDown(self.server.to_string())
            } else {
                RequestError::Closed
            }),
        };
        self.handled_call_notifications().await;
        self.notifications.unwatch_progress(&token);
        let raw = self.raw.take(&id);
        let typed = outcome?;
        match raw {
            Some(raw) => Ok(raw),
            // An answer rmcp reads as another type (say an empty `{}`) is still the result.
            None => {
                serde_json::to_value(typed).map_err(|e| RequestError::Unexpected(e.to_string()))
            }
        }
    }

    /// Waits until the log messages and progress updates that arrived before a call's answer
    /// are handled, so they reach the call's caller before its result. Over streamable HTTP
    /// (rmcp's transport, uncounted) it only lets the handlers already spawned run first.
    async fn handled_call_notifications(&self) {
        // Handlers are quick; the bound only keeps a miscount from stalling a call.
        const AT_MOST: Duration = Duration::from_millis(500);
        let seen = self.raw.call_notifications_seen();
        let mut handled = self.shared.call_notifications_handled.subscribe();
        if seen == 0 {
            tokio::task::yield_now().await;
            return;
        }
        let _ = tokio::time::timeout(AT_MOST, handled.wait_for(|h| *h >= seen)).await;
    }

    /// The `_meta` a 2026-07-28 server gets with a caller's request: the client capabilities
    /// roster can relay for this caller, and the log level it asked for.
    fn request_meta(&self, options: &CallOptions) -> RequestMetaObject {
        let caller = options.caller.as_ref();
        let mut meta = json!({
            "io.modelcontextprotocol/clientCapabilities": self.shared.declared_for(caller),
        });
        if let Some(level) = caller.and_then(|c| c.log_level()) {
            meta["io.modelcontextprotocol/logLevel"] = json!(level);
        }
        serde_json::from_value(meta).unwrap_or_default()
    }

    /// Answers every input request of an `input_required` result for a caller that does not
    /// take them itself.
    async fn fulfil(
        &self,
        answer: &Value,
        caller: Option<&Arc<dyn CallerRelay>>,
        cancel: &CancellationToken,
    ) -> Result<InputRound, RequestError> {
        let mut responses = Map::new();
        let requests = answer.get("inputRequests").and_then(Value::as_object);
        for (key, request) in requests.into_iter().flatten() {
            let method = request.get("method").and_then(Value::as_str).unwrap_or("");
            let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
            let error = match self
                .shared
                .answer(caller.cloned(), method, params, cancel)
                .await
            {
                Ok(result) => {
                    responses.insert(key.clone(), result);
                    continue;
                }
                Err(Unanswered::Refused(reason)) => relay::missing_capability(method, &reason),
                Err(Unanswered::Failed(error)) => error,
            };
            return Err(RequestError::Input {
                method: method.to_owned(),
                code: error.code.0,
                message: error.message.into_owned(),
                data: error.data,
            });
        }
        Ok(InputRound {
            responses,
            state: answer
                .get("requestState")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }

    async fn send_cancelled(&self, id: &RequestId, reason: &str) {
        let params = CancelledNotificationParam::new(Some(id.clone()), Some(reason.to_owned()));
        if let Err(error) = self.peer.notify_cancelled(params).await {
            tracing::debug!(server = %self.server, %error, "cannot send notifications/cancelled");
        }
    }

    /// Ends the connection on roster's behalf (shutdown): the child process is ended, and
    /// requests still in flight fail with [`RequestError::ShuttingDown`].
    pub fn close(&self) {
        self.closed_by_roster.store(true, Ordering::Release);
        self.stop.cancel();
    }

    /// Ends a connection found lost (its process, stream or listen stream gone): the child is
    /// ended, and a request still in flight fails with [`RequestError::Closed`].
    pub(crate) fn end_lost(&self) {
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

/// The length of `value` as compact JSON, counted without building the text.
fn json_size(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

fn client_request(value: Value) -> Result<ClientRequest, RequestError> {
    serde_json::from_value(value).map_err(|e| RequestError::Unexpected(e.to_string()))
}

fn parse_tools(raw: &Value, at_most: usize) -> Result<Vec<Tool>, RequestError> {
    let Some(items) = raw.as_array() else {
        return Err(RequestError::Unexpected(
            "tools/list result has no `tools` array".to_owned(),
        ));
    };
    let mut tools = Vec::with_capacity(items.len().min(at_most));
    for item in items {
        if tools.len() >= at_most {
            break;
        }
        match serde_json::from_value::<Tool>(item.clone()) {
            Ok(tool) => tools.push(tool),
            // One malformed entry should not hide the server's other tools.
            Err(error) => tracing::warn!(
                %error,
                tool = %super::wire::log_line(&item.to_string(), 300),
                "skipped a malformed tool"
            ),
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
    fn a_round_replaces_the_answers_of_the_round_before() {
        let mut params = json!({"name": "t", "requestState": "old", "inputResponses": {"x": 1}});
        let mut responses = Map::new();
        responses.insert("k".into(), json!({"action": "accept"}));
        InputRound {
            responses,
            state: None,
        }
        .apply(&mut params);
        assert_eq!(
            params,
            json!({"name": "t", "inputResponses": {"k": {"action": "accept"}}})
        );
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
