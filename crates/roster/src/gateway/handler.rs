//! The MCP server handler: one per connection (stdio), per HTTP session (initialize era), or per
//! HTTP request (stateless era).

use std::sync::{Arc, OnceLock};

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestParams, CompleteResult, ContentBlock, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, GetSkillRequestParams, GetSkillResult, GetTaskParams, GetTaskResult,
    Implementation, InputRequiredResult, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, PromptsCapability, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ResourceUpdatedNotificationParam, ResourcesCapability, ServerCapabilities,
    ServerConfig, ServerNotification, SubscribeRequestParams, SubscriptionFilter,
    TASKS_EXTENSION_ID, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use roster_core::catalog::Subscriptions;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::caller::{self, Step};
use super::session::Session;
use super::tasks::{Dispatch, TaskCall};
use super::watched::{self, WatchedResources};
use super::{ClientIdentity, Gateway, Outcome, native};
use crate::servers::{InputRequiredOnly, InputRound, LogLevel, ServerLog, relay};

/// roster's MCP server handler.
pub struct GatewayHandler {
    gateway: Arc<Gateway>,
    /// The session of this connection (stdio) or of this `Mcp-Session-Id` (initialize era);
    /// unused by stateless HTTP requests, which share their client's session.
    own: OnceLock<Arc<Session>>,
    /// The resources this connection's session subscribed to (initialize era).
    watched: Arc<WatchedResources>,
    /// Stops this connection's relays (resource updates) when the handler goes.
    relays: CancellationToken,
    _relays_end: DropGuard,
}

impl GatewayHandler {
    /// A handler serving `gateway`.
    pub fn new(gateway: Arc<Gateway>) -> Self {
        let relays = gateway.shutdown_token().child_token();
        Self {
            gateway,
            own: OnceLock::new(),
            watched: Arc::new(WatchedResources::default()),
            _relays_end: relays.clone().drop_guard(),
            relays,
        }
    }

    fn own_session(&self) -> &Arc<Session> {
        self.own.get_or_init(|| {
            Session::open(
                self.gateway.backend().as_ref(),
                &self.gateway.shutdown_token(),
            )
        })
    }

    /// Who sent this request: the identity the HTTP auth layer attached, else the default.
    fn identity(&self, context: &RequestContext<RoleServer>) -> ClientIdentity {
        http_parts(context)
            .and_then(|parts| parts.extensions.get::<ClientIdentity>().cloned())
            .unwrap_or_else(|| self.gateway.anonymous())
    }

    fn session(&self, context: &RequestContext<RoleServer>) -> Arc<Session> {
        // An initialize-era HTTP session names itself in every request; a request without
        // `Mcp-Session-Id` is stateless (2026-07-28) and shares its client's session.
        let stateless_http =
            http_parts(context).is_some_and(|parts| !parts.headers.contains_key("mcp-session-id"));
        if stateless_http {
            self.gateway.stateless_session(&self.identity(context))
        } else {
            self.own_session().clone()
        }
    }

    /// Puts the session's pending change note on `result` as a block of its own after the
    /// server's content (never joined to the server's text; `structuredContent` is left as
    /// the server gave it), unless `who` turned notes off.
    fn carry_note(&self, session: &Session, who: &ClientIdentity, result: &mut CallToolResult) {
        let note = session.take_note();
        if !self.gateway.delta_notes(who) {
            // Notes are off: what was drained is dropped so it cannot surface much later.
            return;
        }
        if let Some(note) = note {
            result.content.push(ContentBlock::text(note));
        }
    }
}

/// A server's answer in rmcp's model; one roster cannot read is an internal error naming it.
pub(super) fn read_answer<T: serde::de::DeserializeOwned>(
    method: &str,
    value: serde_json::Value,
) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| {
        ErrorData::internal_error(
            format!("the server's {method} result cannot be read: {e}"),
            None,
        )
    })
}

/// Sends `notifications/prompts/list_changed` / `resources/list_changed` to an
/// initialize-era client each time the servers' sets change, until the client goes.
fn forward_offering_changes(
    mut changes: tokio::sync::watch::Receiver<crate::servers::OfferingsGeneration>,
    peer: rmcp::service::Peer<RoleServer>,
    stop: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        let mut last = *changes.borrow_and_update();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let now = *changes.borrow_and_update();
                    let sent = async {
                        if now.prompts != last.prompts {
                            peer.notify_prompt_list_changed().await?;
                        }
                        if now.resources != last.resources {
                            peer.notify_resource_list_changed().await?;
                        }
                        Ok::<(), rmcp::service::ServiceError>(())
                    };
                    if sent.await.is_err() {
                        return;
                    }
                    last = now;
                }
            }
        }
    });
}

/// The next generation of a watch; never, when there is none or it closed.
async fn next_offerings(
    offerings: &mut Option<tokio::sync::watch::Receiver<crate::servers::OfferingsGeneration>>,
) -> crate::servers::OfferingsGeneration {
    if let Some(watch) = offerings.as_mut()
        && watch.changed().await.is_ok()
    {
        return *watch.borrow_and_update();
    }
    std::future::pending().await
}

/// The answers a retry after an `input_required` result carries (SEP-2322), if any.
fn input_round(
    responses: Option<rmcp::model::InputResponses>,
    state: Option<String>,
) -> Option<InputRound> {
    if responses.is_none() && state.is_none() {
        return None;
    }
    Some(InputRound {
        responses: responses.unwrap_or_default().into_iter().collect(),
        state,
    })
}

fn http_parts(context: &RequestContext<RoleServer>) -> Option<&axum::http::request::Parts> {
    context.extensions.get::<axum::http::request::Parts>()
}

/// One page of `items` starting at the offset `cursor` encodes.
fn page<T: Clone>(
    items: &[T],
    cursor: Option<&str>,
    size: usize,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= items.len())
            .ok_or_else(|| ErrorData::invalid_params(format!("invalid cursor {c:?}"), None))?,
    };
    let end = (start + size.max(1)).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

impl GatewayHandler {
    fn subscriptions(&self, context: &RequestContext<RoleServer>) -> Subscriptions {
        self.identity(context).subscriptions.into_iter().collect()
    }

    /// Starts a turn and forwards `prompts/get` or `resources/read` of `name` (the prompt or
    /// URI) with the client as the caller and its answers to an earlier `input_required`;
    /// the server's result, or an `input_required` result for a 2026-07-28 client.
    async fn forward_relayed(
        &self,
        context: &RequestContext<RoleServer>,
        method: &'static str,
        name: &str,
        params: serde_json::Value,
        input: Option<InputRound>,
    ) -> Result<Result<serde_json::Value, InputRequiredResult>, ErrorData> {
        let session = self.session(context);
        session.begin_turn().await;
        let target = format!("{method} {name}");
        let backend = self.gateway.backend().clone();
        let work = move |relay| -> futures::future::BoxFuture<'static, Outcome> {
            Box::pin(
                async move { Outcome::Forward(backend.forward_with(method, params, relay).await) },
            )
        };
        let owner = self.identity(context).name;
        let step =
            caller::run_relayed(&self.gateway, context, &session, owner, target, input, work)
                .await?;
        let answer = match step {
            Step::InputRequired(result) => return Ok(Err(result)),
            Step::Done(Outcome::Forward(answer)) => answer?,
            Step::Done(Outcome::Call(_)) => return Err(not_a_call(method)),
        };
        if relay::is_input_required(&answer) {
            return Ok(Err(read_answer(method, answer)?));
        }
        Ok(Ok(answer))
    }
}

/// A request came back as another kind of request: a bug, said as one.
fn not_a_call(method: &str) -> ErrorData {
    ErrorData::internal_error(format!("{method} produced another request's outcome"), None)
}

/// Sends the servers' log messages outside any request to an initialize-era client at the
/// level its session asked for, until the client goes.
fn forward_server_logs(
    mut logs: tokio::sync::broadcast::Receiver<ServerLog>,
    session: Arc<Session>,
    peer: rmcp::service::Peer<RoleServer>,
    stop: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            let log = tokio::select! {
                () = stop.cancelled() => return,
                log = logs.recv() => match log {
                    Ok(log) => log,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                },
            };
            let level = LogLevel::of_message(&log.params).unwrap_or(LogLevel::Emergency);
            if session.log_level().is_none_or(|least| level < least) {
                continue;
            }
            let message = serde_json::json!({"method": relay::LOG_MESSAGE, "params": log.params});
            let Ok(notification) = serde_json::from_value::<ServerNotification>(message) else {
                continue;
            };
            if peer.send_notification(notification).await.is_err() {
                return;
            }
        }
    });
}

/// Not visible and not found must read the same, so this is the one answer for both.
fn unknown_skill_uri(uri: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown skill {uri}"), None)
}

/// Requests 2026-07-28 removed: in that era they are unknown methods (SEP-2575).
const REMOVED_IN_2026_07_28: &[&str] = &[
    "initialize",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Requests of the MCP spec that roster serves: one rmcp could not type had params that do not
/// fit (see `on_custom_request`).
const SPEC_REQUESTS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
    "skills/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

impl ServerHandler for GatewayHandler {
    /// rmcp hands over as "custom" every request it could not type: an unknown method, or a
    /// method of the spec whose params do not fit it (a `tools/call` without a `name`). The
    /// second is the client's mistake in its params, which JSON-RPC calls -32602, not -32601.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        let method = request.method.as_str();
        let removed = caller::is_modern(&context) && REMOVED_IN_2026_07_28.contains(&method);
        if SPEC_REQUESTS.contains(&method) && !removed {
            let why = match method {
                "tools/call" => "`params.name` (the tool's name, a string) is required",
                "prompts/get" => "`params.name` (the prompt's name, a string) is required",
                "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                    "`params.uri` (a string) is required"
                }
                _ => "they do not fit the MCP schema of this method",
            };
            return Err(ErrorData::invalid_params(
                format!("invalid params for `{method}`: {why}"),
                None,
            ));
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("unknown method `{method}`"),
            None,
        ))
    }

    /// A served tool's definition; rmcp checks a 2026-07-28 `tools/call`'s `Mcp-Param-*`
    /// headers against the `x-mcp-header` annotations of its input schema (SEP-2243).
    /// A call by a server's own tool name (an MCP App's) is checked against the tool it
    /// routes to.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let served = self.gateway.served_tools();
        if let Some(tool) = served.get(name) {
            return Some(tool.clone());
        }
        let exposed = self.gateway.backend().route_call(name).ok()?;
        served.get(&exposed).cloned()
    }

    fn get_info(&self) -> ServerConfig {
        let builder = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed();
        // Skills ride on resources (SEP-2640): both are declared only when skill files exist.
        let mut capabilities = if self.gateway.skills().serves_files() {
            builder
                .enable_resources()
                .enable_skills_with_directory_read()
                .build()
        } else {
            builder.build()
        };
        // The servers' prompts, resources and completions are served whatever is connected
        // now: servers come and go, and a list that is empty for a while is still true.
        let mut prompts = PromptsCapability::default();
        prompts.list_changed = Some(true);
        capabilities.prompts = Some(prompts);
        let mut resources = capabilities
            .resources
            .take()
            .unwrap_or_else(ResourcesCapability::default);
        resources.list_changed = Some(true);
        // Declared only while some server can take a subscription.
        if self.gateway.backend().takes_resource_subscriptions() {
            resources.subscribe = Some(true);
        }
        capabilities.resources = Some(resources);
        capabilities.completions = Some(JsonObject::new());
        // Servers' log messages are relayed to the client whose request is in flight.
        #[allow(deprecated)]
        {
            capabilities.logging = Some(JsonObject::new());
        }
        // Any server tool can run as a task (SEP-2663): roster holds the tasks itself.
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("roster", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "roster fronts several MCP servers; their tools are named server__tool. \
             When a tool result ends with a note that tools appeared or vanished, \
             fetch their schemas with tools/list before calling them.",
            )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Initialize-era clients get list_changed on their own stream (stdio, or the HTTP GET
        // stream); the forwarder ends when the session does.
        let mut notices = self.own_session().notices();
        let peer = context.peer.clone();
        let stop = self.gateway.shutdown_token();
        if let Some(changes) = self.gateway.backend().offerings_changed() {
            forward_offering_changes(changes, peer.clone(), stop.clone());
        }
        if let Some(logs) = self.gateway.backend().server_logs() {
            forward_server_logs(logs, self.own_session().clone(), peer.clone(), stop.clone());
        }
        if let Some(updates) = self.gateway.backend().resource_updates() {
            let (watched, peer, stop) = (self.watched.clone(), peer.clone(), self.relays.clone());
            tokio::spawn(async move {
                watched
                    .relay(updates, stop, |uri| {
                        let peer = peer.clone();
                        async move {
                            let update = ResourceUpdatedNotificationParam::new(uri);
                            peer.notify_resource_updated(update).await.is_ok()
                        }
                    })
                    .await;
            });
        }
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    notice = notices.recv() => match notice {
                        Ok(()) | Err(RecvError::Lagged(_)) => {
                            if peer.notify_tool_list_changed().await.is_err() {
                                return;
                            }
                        }
                        Err(RecvError::Closed) => return,
                    }
                }
            }
        });
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if caller::is_modern(&context) {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "logging/setLevel is gone in 2026-07-28: set io.modelcontextprotocol/logLevel \
                 in a request's _meta instead",
                None,
            ));
        }
        let level: LogLevel = serde_json::to_value(request.level)
            .and_then(serde_json::from_value)
            .map_err(|e| ErrorData::invalid_params(format!("unknown log level: {e}"), None))?;
        self.session(&context).set_log_level(level);
        self.gateway.backend().set_log_level(level).await;
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let session = self.session(&context);
        session.begin_turn().await;
        // The list says what any note drained so far would: this session needs none of them.
        let _ = session.take_note();
        let tools = self.gateway.served_tools();
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = page(tools.all(), cursor, self.gateway.config().page_size)?;
        // The tool list is the same for every caller; it can change at any time (clients
        // hear of it through list_changed), so it is never fresh for long.
        let mut result = ListToolsResult::with_all_items(items)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Public);
        result.next_cursor = next;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session = self.session(&context);
        let who = self.identity(&context);
        let arguments = request.arguments.unwrap_or_default();
        if let Some(mut result) = native::call(&self.gateway, &who, &request.name, &arguments) {
            self.carry_note(&session, &who, &mut result);
            return Ok(result.into());
        }
        session.begin_turn().await;
        // From here on the call goes by its exposed name, also when it came by a server's own
        // name (an MCP App's call).
        let name = self
            .gateway
            .backend()
            .route_call(&request.name)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let input = input_round(request.input_responses, request.request_state);
        if let Dispatch::Answered(mut response) = self
            .call_as_task(&name, input.clone(), &arguments, &who, &context)
            .await?
        {
            if let CallToolResponse::Complete(result) = response.as_mut() {
                self.carry_note(&session, &who, result);
            }
            return Ok(*response);
        }
        let backend = self.gateway.backend().clone();
        let target = format!("tools/call {name}");
        let work = move |relay| -> futures::future::BoxFuture<'static, Outcome> {
            Box::pin(
                async move { Outcome::Call(backend.call(&name, Some(arguments), relay).await) },
            )
        };
        let step = caller::run_relayed(
            &self.gateway,
            &context,
            &session,
            who.name.clone(),
            target,
            input,
            work,
        )
        .await?;
        let outcome = match step {
            Step::InputRequired(result) => return Ok(CallToolResponse::InputRequired(result)),
            Step::Done(Outcome::Call(outcome)) => outcome,
            Step::Done(Outcome::Forward(_)) => return Err(not_a_call("tools/call")),
        };
        let mut result = match outcome {
            Ok(CallToolResponse::Complete(result)) => result,
            // A 2026-07-28 server's question for a 2026-07-28 client goes to it untouched.
            Ok(other) => return Ok(other),
            Err(error) => error.into_answer()?,
        };
        self.carry_note(&session, &who, &mut result);
        Ok(result.into())
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let skills = self
            .gateway
            .skills()
            .skill_files(&self.subscriptions(&context));
        // What a caller sees depends on its subscriptions.
        Ok(ListSkillsResult::with_all_items(skills)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        let subscriptions = self.subscriptions(&context);
        let files = self
            .gateway
            .skills()
            .files_for(&request.uri, &subscriptions)
            .ok_or_else(|| unknown_skill_uri(&request.uri))?;
        let found = files.iter().find_map(|f| f.get_skill(&request.uri).ok());
        let mut result = found.ok_or_else(|| unknown_skill_uri(&request.uri))?;
        result.ttl_ms = Some(0);
        result.cache_scope = Some(CacheScope::Private);
        Ok(result)
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        let subscriptions = self.subscriptions(&context);
        let not_found =
            || ErrorData::invalid_params(format!("{} is not a directory", request.uri), None);
        let files = self
            .gateway
            .skills()
            .files_for(&request.uri, &subscriptions)
            .ok_or_else(not_found)?;
        files
            .iter()
            .find_map(|f| f.read_resource_directory(&request.uri).ok())
            .ok_or_else(not_found)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.session(&context).begin_turn().await;
        let prompts = self.gateway.backend().prompts();
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = page(&prompts, cursor, self.gateway.config().page_size)?;
        let mut result = ListPromptsResult::with_all_items(items)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Public);
        result.next_cursor = next;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let params = serde_json::json!({"name": request.name, "arguments": request.arguments});
        let input = input_round(request.input_responses, request.request_state);
        let answer = self
            .forward_relayed(&context, "prompts/get", &request.name, params, input)
            .await?;
        Ok(match answer {
            Ok(result) => {
                GetPromptResponse::Complete(read_answer::<GetPromptResult>("prompts/get", result)?)
            }
            Err(input_required) => GetPromptResponse::InputRequired(input_required),
        })
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.session(&context).begin_turn().await;
        let params = serde_json::to_value(&request)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let answer = self
            .gateway
            .backend()
            .forward("completion/complete", params)
            .await?;
        read_answer("completion/complete", answer)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.session(&context).begin_turn().await;
        let mut resources = self
            .gateway
            .skills()
            .resources(&self.subscriptions(&context));
        resources.extend(self.gateway.backend().resources());
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = page(&resources, cursor, self.gateway.config().page_size)?;
        let mut result = ListResourcesResult::with_all_items(items)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.session(&context).begin_turn().await;
        let templates = self.gateway.backend().resource_templates();
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = page(&templates, cursor, self.gateway.config().page_size)?;
        let mut result = ListResourceTemplatesResult::with_all_items(items)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Public);
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let subscriptions = self.subscriptions(&context);
        let not_found = || {
            ErrorData::resource_not_found(
                format!("resource {} not found", request.uri),
                Some(serde_json::json!({"uri": request.uri})),
            )
        };
        let skill_file = self
            .gateway
            .skills()
            .files_for(&request.uri, &subscriptions)
            .and_then(|files| files.iter().find_map(|f| f.read_resource(&request.uri)));
        let mut result = match skill_file {
            Some(result) => result,
            // roster's own skill:// resources stay roster's; anything else is a server's.
            None if request.uri.starts_with("skill://") => return Err(not_found()),
            None => {
                let params = serde_json::json!({ "uri": request.uri });
                let input = input_round(
                    request.input_responses.clone(),
                    request.request_state.clone(),
                );
                let answer = self
                    .forward_relayed(&context, "resources/read", &request.uri, params, input)
                    .await?;
                return Ok(match answer {
                    Ok(result) => ReadResourceResponse::Complete(
                        read_answer::<ReadResourceResult>("resources/read", result)?,
                    ),
                    Err(input_required) => ReadResourceResponse::InputRequired(input_required),
                });
            }
        };
        result.ttl_ms = Some(0);
        result.cache_scope = Some(CacheScope::Private);
        Ok(result.into())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = requested.supported_by(&self.get_info().capabilities);
        watched::keep_watchable(&mut accepted, self.gateway.backend().as_ref());
        Some(accepted)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.watched
            .watch(self.gateway.backend().as_ref(), &request.uri)
            .await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.watched.unwatch(&request.uri);
        Ok(())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let owner = self.task_owner(&context);
        self.gateway.tasks().get(&owner, &request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.task_owner(&context);
        self.gateway
            .tasks()
            .update(&owner, &request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.task_owner(&context);
        self.gateway.tasks().cancel(&owner, &request.task_id)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // The stream's resource subscriptions last as long as the stream.
        let watched = WatchedResources::default();
        let backend = self.gateway.backend();
        for uri in context.accepted().resource_subscriptions.iter().flatten() {
            if let Err(error) = watched.watch(backend.as_ref(), uri).await {
                tracing::warn!(%uri, %error, "a listen stream's resource subscription failed");
            }
        }
        let relay = async {
            match backend.resource_updates() {
                Some(updates) => {
                    let sink = context.sink().clone();
                    watched
                        .relay(updates, self.relays.clone(), |uri| {
                            let sink = sink.clone();
                            async move { sink.notify_resource_updated(uri).await.is_ok() }
                        })
                        .await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            outcome = self.listen_changes(&context) => outcome,
            // The relay ends only when the client is gone or the gateway stops.
            () = relay => Ok(()),
        }
    }
}

impl GatewayHandler {
    /// Tasks belong to the client identity that created them (everyone anonymous shares).
    fn task_owner(&self, context: &RequestContext<RoleServer>) -> String {
        self.identity(context).name.unwrap_or_default()
    }

    /// The task path of a server tool's call (see [`super::tasks`]).
    async fn call_as_task(
        &self,
        name: &str,
        input: Option<InputRound>,
        arguments: &JsonObject,
        who: &ClientIdentity,
        context: &RequestContext<RoleServer>,
    ) -> Result<Dispatch, ErrorData> {
        let call = TaskCall {
            name,
            arguments,
            input,
            opted_in: context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks()),
            caller: InputRequiredOnly::new(
                context
                    .client_capabilities()
                    .and_then(|c| serde_json::to_value(c).ok())
                    .unwrap_or_default(),
            ),
            cancelled: &context.ct,
        };
        let owner = who.name.clone().unwrap_or_default();
        self.gateway
            .tasks()
            .dispatch(
                self.gateway.backend(),
                &owner,
                call,
                &self.gateway.shutdown_token(),
            )
            .await
    }

    /// The list_changed half of a `subscriptions/listen` stream.
    async fn listen_changes(&self, context: &SubscriptionContext) -> Result<(), ErrorData> {
        let session = self.session(context.request_context());
        let mut notices = session.notices();
        let stop = self.gateway.shutdown_token();
        let mut offerings = self.gateway.backend().offerings_changed();
        let mut last = offerings
            .as_mut()
            .map(|o| *o.borrow_and_update())
            .unwrap_or_default();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                now = next_offerings(&mut offerings) => {
                    // A kind the client's filter did not accept is refused by the sink; that
                    // is no reason to end the stream.
                    if now.prompts != last.prompts {
                        let _ = context.sink().notify_prompt_list_changed().await;
                    }
                    if now.resources != last.resources {
                        let _ = context.sink().notify_resource_list_changed().await;
                    }
                    last = now;
                }
                // Graceful teardown: the final listen result tells the client we are going.
                () = stop.cancelled() => return Ok(()),
                notice = notices.recv() => match notice {
                    Ok(()) | Err(RecvError::Lagged(_)) => {
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(RecvError::Closed) => return Ok(()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::page;

    #[test]
    fn pages_cover_every_item_once_in_order() {
        let items: Vec<u32> = (0..5).collect();
        let (first, next) = page(&items, None, 2).expect("first page");
        assert_eq!(first, vec![0, 1]);
        let (second, next) = page(&items, next.as_deref(), 2).expect("second page");
        assert_eq!(second, vec![2, 3]);
        let (third, next) = page(&items, next.as_deref(), 2).expect("third page");
        assert_eq!((third, next), (vec![4], None));
        assert!(page(&items, Some("9"), 2).is_err());
        assert!(page(&items, Some("x"), 2).is_err());
    }
}
