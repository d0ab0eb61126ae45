//! The MCP server handler: one per connection (stdio), per HTTP session (initialize era), or per
//! HTTP request (stateless era).
//!
//! This file holds the handler, the session and identity a request belongs to, and the
//! `ServerHandler` impl, which hands each request to the module of its job: `tools` (tools and
//! calls), `offerings` (prompts, resources, completions, skill files, resource watches),
//! `streams` (what goes to a client unasked) and `era` (requests rmcp could not type, and
//! requests a protocol era removed).

use std::sync::{Arc, OnceLock};

#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams,
    GetSkillResult, GetTaskParams, GetTaskResult, Implementation, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, PromptsCapability, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult, ReadResourceRequestParams, ReadResourceResponse,
    ResourcesCapability, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, TASKS_EXTENSION_ID, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::model::{CustomRequest, CustomResult, InitializeRequestParams, InitializeResult};
use rmcp::service::{NotificationContext, Peer, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use roster_core::catalog::Subscriptions;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::watches::SessionWatches;
use super::{ClientIdentity, Gateway};
use crate::Session;
use crate::config::PageLimits;
use crate::servers::{InputRound, json_size};

/// `Ok` with the page of `$items` that `$request`'s cursor asks for, as a `$result` list
/// result. Lists change at any time (clients hear of it through `list_changed`), so none is
/// fresh for long (`ttlMs` 0); `$scope` says whether it depends on who asks.
macro_rules! list_page {
    ($handler:expr, $result:ty, $items:expr, $request:expr, $scope:expr) => {{
        let cursor = $request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = super::page($items, cursor, $handler.gateway.config().pages)?;
        let mut result = <$result>::with_all_items(items)
            .with_ttl_ms(0)
            .with_cache_scope($scope);
        result.next_cursor = next;
        Ok(result)
    }};
}

mod era;
mod offerings;
mod streams;
mod tools;
mod traced;

/// Where a connection's fast lane learns its session's handler and peer: the lane puts one in
/// its session's first request, and the handler fills it with a twin of itself (see
/// [`super::lane`]).
#[derive(Clone, Default)]
pub(crate) struct LaneLink(Arc<OnceLock<(Arc<GatewayHandler>, Peer<RoleServer>)>>);

impl LaneLink {
    /// Gives the lane `handler` (a twin of the one rmcp serves) and the session's peer.
    pub(crate) fn fill(&self, handler: impl FnOnce() -> GatewayHandler, peer: &Peer<RoleServer>) {
        self.0.get_or_init(|| (Arc::new(handler()), peer.clone()));
    }

    /// The handler and peer the lane was given, once the handler filled the link.
    pub(crate) fn get(&self) -> Option<&(Arc<GatewayHandler>, Peer<RoleServer>)> {
        self.0.get()
    }
}

/// roster's MCP server handler.
pub struct GatewayHandler {
    gateway: Arc<Gateway>,
    /// The session of this connection (stdio) or of this `Mcp-Session-Id` (initialize era);
    /// unused by stateless HTTP requests, which share their client's session.
    own: Arc<OnceLock<Arc<Session>>>,
    /// The resources this connection's session watches (initialize era).
    watches: Arc<SessionWatches>,
    /// Cancelled when this connection's session ends (rmcp drops the handler it serves) or the
    /// gateway stops: every task the session spawns stops on it, so nothing the session made
    /// (its peer, its [`Session`], its watches) outlives it.
    session_end: CancellationToken,
    /// `None` in a [twin](GatewayHandler::twin): the session ends with the handler rmcp serves.
    _session_end_guard: Option<DropGuard>,
}

impl GatewayHandler {
    /// A handler serving `gateway`.
    pub fn new(gateway: Arc<Gateway>) -> Self {
        let session_end = gateway.shutdown_token().child_token();
        Self {
            gateway,
            own: Arc::default(),
            watches: Arc::new(SessionWatches::default()),
            _session_end_guard: Some(session_end.clone().drop_guard()),
            session_end,
        }
    }

    /// A handler of the same connection: its session, watches and end are this one's.
    fn twin(&self) -> Self {
        Self {
            gateway: self.gateway.clone(),
            own: self.own.clone(),
            watches: self.watches.clone(),
            session_end: self.session_end.clone(),
            _session_end_guard: None,
        }
    }

    /// Hands a twin of this handler to the connection's fast lane, when the request carries
    /// the lane's link (see [`super::lane`]).
    fn link_lane(&self, context: &RequestContext<RoleServer>) {
        if let Some(link) = context.extensions.get::<LaneLink>() {
            link.fill(|| self.twin(), &context.peer);
        }
    }

    fn own_session(&self) -> &Arc<Session> {
        self.own
            .get_or_init(|| self.gateway.roster().open_client_session())
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

/// A request came back as another kind of request: a bug, said as one.
fn not_a_call(method: &str) -> ErrorData {
    ErrorData::internal_error(format!("{method} produced another request's outcome"), None)
}

fn http_parts(context: &RequestContext<RoleServer>) -> Option<&axum::http::request::Parts> {
    context.extensions.get::<axum::http::request::Parts>()
}

/// One page of `items` starting at the offset `cursor` encodes, cut as `limits` say.
fn page<T: Clone + serde::Serialize>(
    items: &[T],
    cursor: Option<&str>,
    limits: PageLimits,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let start = page_start(items.len(), cursor)?;
    let end = limits.end(start, items.len(), |i| json_size(&items[i]));
    Ok((items[start..end].to_vec(), next_cursor(end, items.len())))
}

/// Where the page `cursor` asks for starts in a list of `len` items.
pub(super) fn page_start(len: usize, cursor: Option<&str>) -> Result<usize, ErrorData> {
    match cursor {
        None => Ok(0),
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= len)
            .ok_or_else(|| ErrorData::invalid_params(format!("invalid cursor {c:?}"), None)),
    }
}

/// The cursor of the page after one ending at `end` in a list of `len` items.
pub(super) fn next_cursor(end: usize, len: usize) -> Option<String> {
    (end < len).then(|| end.to_string())
}

impl GatewayHandler {
    fn subscriptions(&self, context: &RequestContext<RoleServer>) -> Subscriptions {
        self.identity(context).subscriptions.into_iter().collect()
    }
}

/// Trait methods that hand a request and its context to the handler's method of the same job.
macro_rules! hand_over {
    ($($(#[$attr:meta])* $name:ident($request:ty) -> $answer:ty => $to:ident;)*) => {$(
        $(#[$attr])*
        async fn $name(
            &self,
            request: $request,
            context: RequestContext<RoleServer>,
        ) -> Result<$answer, ErrorData> {
            self.link_lane(&context);
            let trace = self.trace(stringify!($name), &request, &context);
            crate::telemetry::within(trace, self.$to(request, context)).await
        }
    )*};
}

impl ServerHandler for GatewayHandler {
    hand_over! {
        on_custom_request(CustomRequest) -> CustomResult => custom_request;
        #[allow(deprecated)]
        set_level(SetLevelRequestParams) -> () => set_level_for;
        list_tools(Option<PaginatedRequestParams>) -> ListToolsResult => tools_page;
        call_tool(CallToolRequestParams) -> CallToolResponse => call;
        list_prompts(Option<PaginatedRequestParams>) -> ListPromptsResult => prompts_page;
        get_prompt(GetPromptRequestParams) -> GetPromptResponse => prompt;
        complete(CompleteRequestParams) -> CompleteResult => completion;
        list_resources(Option<PaginatedRequestParams>) -> ListResourcesResult => resources_page;
        list_resource_templates(Option<PaginatedRequestParams>) -> ListResourceTemplatesResult
            => templates_page;
        read_resource(ReadResourceRequestParams) -> ReadResourceResponse => resource;
        list_skills(Option<PaginatedRequestParams>) -> ListSkillsResult => skills_page;
        get_skill(GetSkillRequestParams) -> GetSkillResult => skill;
        read_resource_directory(ReadResourceDirectoryRequestParams) -> ReadResourceDirectoryResult
            => skill_directory;
        subscribe(SubscribeRequestParams) -> () => watch;
        unsubscribe(UnsubscribeRequestParams) -> () => unwatch;
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.served_tool(name)
    }

    /// rmcp's own `initialize`; the lane is linked here, so it takes the session's requests
    /// from the first one after the handshake.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.link_lane(&context);
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.watchable_filter(requested)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.open_streams(context).await
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.listen_stream(context).await
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
        // Declared only while some server can take a watch (`resources.subscribe`), or may:
        // one still starting has not said yet (roster answers before its servers are up).
        let roster = self.gateway.roster();
        if roster.takes_resource_watches() || !roster.starting().is_empty() {
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

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let owner = self.task_owner(&context);
        self.gateway.tasks().get(&owner, &request.task_id).await
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
            .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.task_owner(&context);
        self.gateway.tasks().cancel(&owner, &request.task_id).await
    }
}

impl GatewayHandler {
    /// Tasks belong to the client identity that created them (everyone anonymous shares).
    fn task_owner(&self, context: &RequestContext<RoleServer>) -> String {
        self.identity(context).name.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::{PageLimits, page};

    #[test]
    fn pages_cover_every_item_once_in_order() {
        let items: Vec<u32> = (0..5).collect();
        let two = PageLimits {
            size: 2,
            bytes: 1 << 20,
        };
        let (first, next) = page(&items, None, two).expect("first page");
        assert_eq!(first, vec![0, 1]);
        let (second, next) = page(&items, next.as_deref(), two).expect("second page");
        assert_eq!(second, vec![2, 3]);
        let (third, next) = page(&items, next.as_deref(), two).expect("third page");
        assert_eq!((third, next), (vec![4], None));
        assert!(page(&items, Some("9"), two).is_err());
        assert!(page(&items, Some("x"), two).is_err());
    }

    #[test]
    fn a_page_ends_before_the_item_that_passes_its_bytes() {
        // Each item is 5 bytes of JSON ("aaa" with its quotes): 3 fit in 16 bytes.
        let items = vec!["aaa"; 7];
        let limits = PageLimits {
            size: 100,
            bytes: 16,
        };
        let (first, next) = page(&items, None, limits).expect("first page");
        assert_eq!((first.len(), next.as_deref()), (3, Some("3")));
        let (last, next) = page(&items, Some("6"), limits).expect("last page");
        assert_eq!((last.len(), next), (1, None));
    }
}
