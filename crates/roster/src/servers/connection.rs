//! One live connection to one server: its lifecycle, and the plain requests roster makes.
//!
//! A [`Connection`] is made by [`Connection::connect`] from a [`ServerConfig`]: it spawns the
//! process or opens the HTTP/SSE stream, runs the lifecycle of the era the server speaks
//! (`server/discover` first, falling back to `initialize`), and on a 2026-07-28 server opens
//! `subscriptions/listen` for `toolsListChanged` (and the prompts' and resources' list
//! changes the server declares). It then offers `tools/list` paged to its end,
//! the offerings' lists, `ping`, and an end on roster's behalf or found lost. Calls on behalf
//! of a caller are in [`super::call`], resource watches in [`super::watches`].
//!
//! Notifications are fanned out through [`Notifications`], which outlives connections: a
//! listener added once keeps hearing the server across restarts.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::model::{ClientRequest, ProtocolVersion, SubscriptionFilter};
use rmcp::service::{RequestHandle, RunningService};
use rmcp::{ClientLifecycleMode, RoleClient};
use roster_core::Tool;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::answer::Answer;
use super::client_side::relay_listen;
use super::client_side::{ClientShared, ClientSide};
use super::error::{ConnectError, RequestError};
use super::event::ServerEvent;
use super::gate::{NotificationGate, NotificationRate};
use super::gated::GatedTransport;
use super::http_direct::HttpDirect;
use super::notifications::{ListenerId, Notifications};
use super::relay::{InFlight, LogLevel};
use super::stdio::ChildGuard;
use super::tools_page::ToolsPage;
use super::wire::{Direct, RawResults};
use crate::config::{Era, ServerConfig, ServerLimits, TransportConfig};
use crate::store::Tokens;

/// One complete `tools/list`: every page, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolListing {
    /// The tools as the server sent them (unknown fields kept on stdio and SSE).
    pub tools: Vec<Tool>,
    /// The shortest `ttlMs` any page carried.
    pub ttl: Option<Duration>,
    /// How many pages it took.
    pub pages: usize,
    /// The pages' results as JSON, in bytes (bounded by `max_listing_bytes`, each page checked
    /// before it is parsed where roster reads the wire itself).
    pub bytes: usize,
    /// The server listed more than `max_tools`: only the first `max_tools` are here.
    pub cut: bool,
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

/// How a caller's requests go past rmcp's service.
pub(super) enum DirectPath {
    /// Written to roster's own transport (stdio, SSE).
    Wire(Direct),
    /// POSTed by roster to a streamable HTTP server (see [`super::http_direct`]).
    Http(HttpDirect),
}

// Held for their Drop: the child is killed, the SSE stream closed, with the connection.
enum Guard {
    Child(ChildGuard),
    Sse(#[allow(dead_code)] super::sse::SseGuard),
    None,
}

/// A live connection to one server.
pub struct Connection {
    pub(super) server: Arc<str>,
    pub(super) peer: rmcp::Peer<RoleClient>,
    pub(super) stop: CancellationToken,
    closed: watch::Receiver<bool>,
    pub(super) notifications: Arc<Notifications>,
    pub(super) shared: Arc<ClientShared>,
    pub(super) raw: RawResults,
    /// Requests for callers past rmcp's service.
    pub(super) direct: DirectPath,
    pub(super) negotiated: Negotiated,
    listing: tokio::sync::Mutex<()>,
    pub(super) list_timeout: Duration,
    limits: ServerLimits,
    /// Set by [`Connection::close`]: a request cut short then names the shutdown, not a lost
    /// server (`stop` is also cancelled when a listen stream ends).
    pub(super) closed_by_roster: std::sync::atomic::AtomicBool,
    pub(super) capabilities: Value,
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

/// rmcp's client on one of roster's own transports, and the way past it ([`Direct`]).
async fn serve_wire(
    client: ClientSide,
    transport: super::wire::WireTransport,
    mode: ClientLifecycleMode,
) -> Result<(RunningService<RoleClient, ClientSide>, Direct), rmcp::service::ClientInitializeError>
{
    let direct = transport.direct();
    let running = rmcp::serve_client_with_lifecycle(client, transport, mode).await?;
    Ok((running, direct))
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
    /// Connects to a server and completes its lifecycle; an OAuth server's tokens are read
    /// from (and refreshed into) `tokens`.
    pub async fn connect(
        server: &str,
        config: &ServerConfig,
        notifications: Arc<Notifications>,
        tokens: &Arc<dyn Tokens>,
    ) -> Result<Connection, ConnectError> {
        let name: Arc<str> = Arc::from(server);
        let raw = RawResults::new();
        let rate = NotificationRate {
            per_second: config.limits.notification_rate,
            burst: config.limits.notification_burst,
        };
        let mut gate = NotificationGate::new(name.clone(), rate, notifications.clone());
        let shared = Arc::new(ClientShared {
            server: name.clone(),
            notifications: notifications.clone(),
            in_flight: InFlight::default(),
            awaited_handled: watch::channel(0).0,
        });
        // Handled on the reader, in the server's order (rmcp would run a task for each).
        let handler = Arc::downgrade(&shared);
        gate.deliver_to(Arc::new(move |event| {
            if let Some(shared) = handler.upgrade() {
                shared.handle(event);
            }
        }));
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
        let handshake_text = |e: rmcp::service::ClientInitializeError| {
            let text = e.to_string();
            match url {
                Some(url) => crate::config::redact_url_in(&text, url),
                None => text,
            }
        };
        let handshake = |e| ConnectError::Handshake(handshake_text(e));
        // Cancelled when the server asks for more scope (step-up): the connection then ends,
        // and the next one waits for the login.
        let step_up = CancellationToken::new();
        // Told each 403 `insufficient_scope`: recorded for the next login, and the connection ends.
        let step_up_hook = || {
            let (server, tokens, seen) = (server.to_owned(), tokens.clone(), step_up.clone());
            move |challenge: &str| {
                crate::oauth::record_step_up(&server, &*tokens, challenge);
                seen.cancel();
            }
        };
        let (running, guard, direct): (RunningService<RoleClient, ClientSide>, Guard, _) =
            match &config.transport {
                TransportConfig::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                    sandbox,
                } => {
                    let (transport, child) = super::stdio::spawn(
                        super::stdio::Spawn {
                            server: name.clone(),
                            command,
                            args,
                            env,
                            cwd: cwd.as_ref(),
                            sandbox: sandbox.as_deref(),
                            limits: &config.limits,
                        },
                        raw.clone(),
                        gate,
                    )?;
                    let (running, direct) = match serve_wire(client, transport, mode).await {
                        Ok(served) => served,
                        Err(error) => {
                            let text = handshake_text(error);
                            return Err(ConnectError::Handshake(match sandbox {
                                None => text,
                                Some(rules) => sandboxed_failure(server, rules, &child, text).await,
                            }));
                        }
                    };
                    (running, Guard::Child(child), DirectPath::Wire(direct))
                }
                TransportConfig::Sse { url, headers } => {
                    let auth = match &config.oauth {
                        Some(oauth) => Some(
                            crate::oauth::authorized(server, url, oauth, tokens, ())
                                .await
                                .map_err(|e| needs_scope(server, e))?,
                        ),
                        None => None,
                    };
                    let on_scope = config
                        .oauth
                        .as_ref()
                        .map(|_| Box::new(step_up_hook()) as Box<dyn Fn(&str) + Send + Sync>);
                    let (transport, sse) = super::sse::connect(
                        name.clone(),
                        url,
                        headers,
                        (auth, on_scope),
                        raw.clone(),
                        gate,
                    )
                    .await
                    .map_err(|e| match e {
                        super::sse::SseError::Unauthorized { challenge, .. } => {
                            ConnectError::NeedsLogin {
                                server: server.to_owned(),
                                challenge,
                            }
                        }
                        other => ConnectError::Sse(other),
                    })?;
                    let (running, direct) = serve_wire(client, transport, mode)
                        .await
                        .map_err(handshake)?;
                    (running, Guard::Sse(sse), DirectPath::Wire(direct))
                }
                TransportConfig::StreamableHttp { url, headers } => {
                    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                    let custom: HashMap<_, _> = super::wire::header_map(headers)
                        .map_err(ConnectError::Header)?
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    let posting = super::http_direct::PostingSlot::default();
                    let http = crate::telemetry::TracedHttpClient::new()
                        .map_err(|e| ConnectError::Handshake(e.to_string()))?
                        .recording(super::http_direct::record_posting(posting.clone()));
                    let (injected, injected_rx) =
                        tokio::sync::mpsc::channel(super::http_direct::INJECTED_QUEUE);
                    let direct = crate::telemetry::TracedHttpClient::keep_alive()
                        .map(|client| {
                            super::http_direct::HttpDirect::new(
                                name.clone(),
                                url,
                                client,
                                posting,
                                injected,
                                gate.holding(),
                            )
                        })
                        .map_err(|e| ConnectError::Handshake(e.to_string()))?;
                    let transport_config =
                        StreamableHttpClientTransportConfig::with_uri(url.as_str())
                            .custom_headers(custom);
                    let running = match &config.oauth {
                        None => {
                            let transport = GatedTransport::new(
                                http.transport(transport_config),
                                gate,
                                injected_rx,
                                raw.clone(),
                            );
                            rmcp::serve_client_with_lifecycle(client, transport, mode).await
                        }
                        Some(oauth) => {
                            let http = http.on_insufficient_scope(step_up_hook());
                            let http = crate::oauth::authorized(server, url, oauth, tokens, http)
                                .await
                                .map_err(|e| needs_scope(server, e))?;
                            let transport = GatedTransport::new(
                                rmcp::transport::StreamableHttpClientTransport::with_client(
                                    http,
                                    transport_config,
                                ),
                                gate,
                                injected_rx,
                                raw.clone(),
                            );
                            rmcp::serve_client_with_lifecycle(client, transport, mode).await
                        }
                    };
                    let running = running.map_err(|e| match auth_challenge(&e) {
                        Some(challenge) => ConnectError::NeedsLogin {
                            server: server.to_owned(),
                            challenge,
                        },
                        None => handshake(e),
                    })?;
                    (running, Guard::None, DirectPath::Http(direct))
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
        let (step_stop, step_server) = (stop.clone(), name.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = step_up.cancelled() => {
                    tracing::warn!(server = %step_server, "the server wants more scope; closing the connection until a login");
                    step_stop.cancel();
                }
                _ = step_stop.cancelled() => {}
            }
        });
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
            // Tools always (a server that does not change them says so by never sending);
            // prompts and resources where the server says their lists change.
            let mut filter = SubscriptionFilter::builder().tools_list_changed().build();
            if let Some(info) = peer.peer_info() {
                let also = SubscriptionFilter::builder()
                    .prompts_list_changed()
                    .resources_list_changed()
                    .build()
                    .supported_by(&info.capabilities);
                filter.prompts_list_changed = also.prompts_list_changed;
                filter.resources_list_changed = also.resources_list_changed;
            }
            let subscription = peer.listen(filter).await;
            match subscription {
                Ok(subscription) => {
                    let (stop_listen, name_listen) = (stop.clone(), name.clone());
                    relay_listen(subscription, shared.clone(), stop.clone(), move |end| {
                        // Without the stream list_changed is never heard again while the
                        // connection looks healthy: end the connection so supervision
                        // reconnects and listens anew.
                        tracing::warn!(server = %name_listen, ?end, "subscriptions/listen ended; closing the connection");
                        stop_listen.cancel();
                    });
                }
                // Over stdio and SSE what the server sends unasked is still heard: a refusal
                // is loud only over streamable HTTP, where nothing else would carry it.
                Err(error)
                    if matches!(config.transport, TransportConfig::StreamableHttp { .. }) =>
                {
                    tracing::warn!(server, %error, "subscriptions/listen refused; its list_changed cannot reach roster, which sees its tools change when their listing expires or on refresh_tools");
                }
                Err(error) => {
                    tracing::info!(server, %error, "subscriptions/listen refused; the list_changed it sends unasked are heard");
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
            direct,
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
        listener: impl Fn(&ServerEvent) + Send + Sync + 'static,
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
        let handle = self.send(json!({"method": "ping"}), timeout).await?;
        handle.await_response().await?;
        Ok(())
    }

    /// Pages `tools/list` to its end. One listing at a time per connection; each page must
    /// come within the server's `list_timeout` (else `notifications/cancelled` is sent).
    pub async fn list_tools(&self) -> Result<ToolListing, RequestError> {
        let mut listing =
            crate::telemetry::ServerRequest::around(&self.server, "tools/list", self.tool_pages())
                .await?;
        if let DirectPath::Http(http) = &self.direct
            && !self.negotiated.legacy
        {
            http.set_tools(&self.server, &mut listing.tools);
        }
        Ok(listing)
    }

    async fn tool_pages(&self) -> Result<ToolListing, RequestError> {
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
            let answer = self
                .own_request("tools/list", params, self.list_timeout)
                .await?;
            // One past what is kept, so a cut is seen; the rest of the page is never built.
            let room = (self.limits.max_tools + 1).saturating_sub(listing.tools.len());
            let page = match answer {
                // As the server wrote it: its size is known before anything is parsed.
                Answer::Raw(raw) => {
                    let text = raw.into_text();
                    listing.bytes += text.len();
                    self.within_listing_bytes(&listing)?;
                    ToolsPage::read(&text, room)?
                }
                Answer::Value(value) => {
                    listing.bytes += json_size(&value);
                    self.within_listing_bytes(&listing)?;
                    ToolsPage::of_value(value, room)?
                }
            };
            listing.tools.extend(page.tools);
            listing.pages += 1;
            if listing.tools.len() >= self.limits.max_tools {
                // Cut rather than refused: the first tools stay usable, and the bound is said.
                if listing.tools.len() > self.limits.max_tools
                    || page.next_cursor.as_ref().is_some_and(|c| !c.is_empty())
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
            if let Some(ttl) = page.ttl_ms {
                let ttl = Duration::from_millis(ttl);
                listing.ttl = Some(listing.ttl.map_or(ttl, |t: Duration| t.min(ttl)));
            }
            match page.next_cursor {
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

    /// Whether the pages read so far stay within `max_listing_bytes`.
    fn within_listing_bytes(&self, listing: &ToolListing) -> Result<(), RequestError> {
        if listing.bytes > self.limits.max_listing_bytes {
            return Err(RequestError::ListingTooLarge {
                limit: self.limits.max_listing_bytes,
                pages: listing.pages + 1,
            });
        }
        Ok(())
    }

    /// Sends one request (`{"method", "params"}`) that must be answered within `timeout`
    /// (past it rmcp sends `notifications/cancelled`).
    async fn send(
        &self,
        mut request: Value,
        timeout: Duration,
    ) -> Result<RequestHandle<RoleClient>, RequestError> {
        crate::telemetry::inject_current(&mut request);
        let request = client_request(request)?;
        let options = rmcp::service::PeerRequestOptions::with_timeout(timeout);
        Ok(self.peer.send_cancellable_request(request, options).await?)
    }

    /// Whether the server advertised `capability` (`prompts`, `resources`, `completions`).
    pub fn advertises(&self, capability: &str) -> bool {
        self.capabilities
            .get(capability)
            .is_some_and(|c| !c.is_null())
    }

    /// Whether the server declared the skills extension (SEP-2640, `skills/list`).
    pub fn declares_skills(&self) -> bool {
        self.capabilities
            .get("extensions")
            .and_then(|e| e.get(rmcp::model::SKILLS_EXTENSION_ID))
            .is_some_and(|s| !s.is_null())
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
    pub async fn request(&self, method: &str, mut params: Value) -> Result<Value, RequestError> {
        let span = crate::telemetry::ServerRequest::start(&self.server, method, &mut params);
        let request = json!({"method": method, "params": params});
        let answer = async {
            let handle = self.send(request, self.list_timeout).await?;
            let result = handle.await_response().await?;
            serde_json::to_value(result).map_err(|e| RequestError::Unexpected(e.to_string()))
        };
        crate::telemetry::ServerRequest::end(span, answer.await.map(Answer::Value))
            .and_then(Answer::into_value)
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

/// A step-up waiting for a login is a login like any other to supervision.
/// The error of a sandboxed server that did not start: `text`, what its launcher said (once
/// its stderr has ended, for at most a second), and which keys loosen the sandbox.
async fn sandboxed_failure(
    server: &str,
    rules: &crate::config::Sandbox,
    child: &super::stdio::ChildGuard,
    text: String,
) -> String {
    let said = child
        .launcher_said(std::time::Duration::from_secs(1))
        .await
        .map_or_else(String::new, |said| format!(" ({said})"));
    format!(
        "{text}{said}; {}",
        super::sandbox::failure_hint(server, rules)
    )
}

fn needs_scope(server: &str, error: crate::oauth::OAuthError) -> ConnectError {
    match error {
        crate::oauth::OAuthError::NeedsScope { challenge, .. } => ConnectError::NeedsLogin {
            server: server.to_owned(),
            challenge: Some(challenge),
        },
        other => ConnectError::OAuth(other),
    }
}

/// The `WWW-Authenticate` challenge (if the server sent one) when a handshake failed because
/// the server refused roster's token or its lack (401, or 403 `insufficient_scope`).
fn auth_challenge(error: &rmcp::service::ClientInitializeError) -> Option<Option<String>> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    // The transport's own error is boxed inside; the box hides it from `source()`.
    let rmcp::service::ClientInitializeError::TransportError { error, .. } = error else {
        return None;
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&*error.error);
    while let Some(e) = source {
        match e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            Some(StreamableHttpError::AuthRequired(auth)) => {
                return Some(Some(auth.www_authenticate_header.clone()));
            }
            Some(StreamableHttpError::InsufficientScope(scope)) => {
                return Some(Some(scope.www_authenticate_header.clone()));
            }
            Some(StreamableHttpError::Auth(rmcp::transport::AuthError::AuthorizationRequired)) => {
                return Some(None);
            }
            _ => {}
        }
        source = e.source();
    }
    None
}

/// The length of `value` as compact JSON, counted without building the text (0 for a value
/// that cannot be written: its own writing reports that).
pub(crate) fn json_size(value: &impl serde::Serialize) -> usize {
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

pub(super) fn client_request(value: Value) -> Result<ClientRequest, RequestError> {
    serde_json::from_value(value).map_err(|e| RequestError::Unexpected(e.to_string()))
}
