//! [`Roster`]: the library façade for agent hosts that embed roster instead of running the
//! gateway. The gateway serves its MCP surface on this same façade.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use roster::{Config, Roster};
//! let roster = Roster::start(Config::load("roster.toml".as_ref())?).await?;
//! let turn = roster.begin_turn().await; // re-lists stale/due servers, drains deltas
//! if let Some(note) = turn.note { println!("{note}"); }
//! for tool in roster.tools() { println!("{}", tool.exposed_name); }
//! let result = roster.call("github__search", None).await?;
//! # let _ = result; Ok(()) }
//! ```
//!
//! A *turn* is one model step that reaches the servers. [`Roster::begin_turn`] (or
//! [`Session::begin_turn`] for one client session) lists every server that is stale or due —
//! one listing per server however many turns start at once — and drains that session's
//! queued deltas. A server's `list_changed` makes it stale the moment it is read, so the turn
//! after it sees the change; the debounced background re-list only covers the time when no
//! turn comes. [`Roster::call`] does not start a turn by itself: the host decides when its
//! turns begin.

use crate::sync::lock;
use std::sync::Arc;

use roster_core::{
    CallRouteError, Delta, NamingError, ScheduleConfigError, Tool, ToolLookup, ToolPresence,
    ToolRegistry,
};
use serde_json::{Map, Value};

use crate::config::{Config, ConfigChanges, TaskSupport};
use crate::servers::listing::Relisting;
use crate::servers::pinning::Pinning;
use crate::servers::runtime::{ReconcileHook, Runtime};
use crate::servers::watches::ResourceWatches;
use crate::servers::{
    Answer, CallOptions, LogLevel, LogSink, NotificationSink, Notifications, OfferingsGeneration,
    PromptEntry, RefreshHookError, RelistError, RequestError, ResourceUpdate, ResourceWatch,
    RouteError, ServerLog, ServerStatus, ToolArguments,
};
use crate::session::{Session, Turn};
use crate::store::PinStore;

/// roster could not start with this configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The naming settings cannot produce valid exposed names.
    #[error("invalid [gateway] naming settings: {0}")]
    Naming(#[from] NamingError),
    /// The schedule settings (backoff, intervals) are inconsistent.
    #[error("invalid [gateway] schedule settings: {0}")]
    Schedule(#[from] ScheduleConfigError),
    /// The refresh hooks could not be started.
    #[error(transparent)]
    RefreshHook(#[from] RefreshHookError),
    /// The tool pins could not be read.
    #[error("cannot read the tool pins: {0}")]
    Pins(#[from] crate::store::StoreError),
}

/// A tool call could not be made or failed on the way.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// No tool is exposed under that name (it may have been removed: list tools again).
    #[error("no tool named `{0}` is available; list the tools again")]
    UnknownTool(String),
    /// Not an exposed name, and more than one server has a tool of that own name; the error
    /// names each one's exposed name.
    #[error(transparent)]
    AmbiguousTool(CallRouteError),
    /// The tool is withheld: its definition changed since a person approved it (or it is new
    /// and new tools need approval), and only a person can let it through.
    #[error("{0}")]
    Withheld(String),
    /// The tool's server is restarting or disconnected.
    #[error("the server `{server}` offering `{tool}` is not connected right now")]
    Unavailable {
        /// The server.
        server: String,
        /// The exposed tool name.
        tool: String,
    },
    /// The request failed (timeout, cancellation, server error, connection lost).
    #[error("calling `{tool}` on server `{server}` failed: {source}")]
    Request {
        /// The server.
        server: String,
        /// The exposed tool name.
        tool: String,
        /// What happened.
        #[source]
        source: RequestError,
    },
}

/// A server could not be restarted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestartError {
    /// No server has that name.
    #[error("no server is named `{0}`")]
    Unknown(String),
    /// The server is configured with `enabled = false`.
    #[error("server `{0}` is disabled (enabled = false), so there is nothing to restart")]
    Disabled(String),
    /// Its refresh hook could not start again.
    #[error("server `{0}` could not start again: {1}")]
    Start(String, String),
}

/// One exposed tool as clients see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    /// The name clients call it by.
    pub exposed_name: String,
    /// The server offering it.
    pub server: String,
    /// The tool as the server listed it (its own name, unknown fields kept).
    pub tool: Tool,
}

/// Settings for [`Roster::start_with`].
#[derive(Clone)]
pub struct RosterOptions {
    /// Where every server notification is recorded (the inbox). Default: [`LogSink`].
    pub sink: Arc<dyn NotificationSink>,
    /// Called with `(server, delta)` after every non-empty delta (plug
    /// `SkillRegistry::refresh_all` in here, with [`Roster::tool_lookup`] as its lookup).
    pub on_reconcile: Option<ReconcileHook>,
    /// The state directory whose store keeps tool pins across restarts (`roster serve` gives
    /// `[gateway] state_dir`). `None`: pins live as long as this roster.
    pub pins_dir: Option<std::path::PathBuf>,
    /// Where roster's state lives (see [`crate::store::Stores`]): OAuth tokens, and pins
    /// when it is the store replicas share (`[store]`; else pins follow `pins_dir`).
    /// `None`: the state dir's (`[gateway] state_dir`).
    pub stores: Option<crate::store::Stores>,
    /// Whether [`Roster::start_with`] waits (at most `[gateway] startup_wait`) for the servers'
    /// first connection attempts. Default `true`. `roster serve` does not: it answers at once,
    /// and a request's turn waits for what it needs of servers still starting (a list, at
    /// most `turn_wait` and once per server; a call, only for its own server).
    pub wait_for_servers: bool,
}

impl Default for RosterOptions {
    fn default() -> Self {
        RosterOptions {
            sink: Arc::new(LogSink),
            on_reconcile: None,
            pins_dir: None,
            stores: None,
            wait_for_servers: true,
        }
    }
}

impl std::fmt::Debug for RosterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RosterOptions")
            .field("on_reconcile", &self.on_reconcile.is_some())
            .finish_non_exhaustive()
    }
}

struct LiveTools(std::sync::Weak<Runtime>);

impl ToolLookup for LiveTools {
    fn presence(&self, reference: &str) -> ToolPresence {
        let Some(rt) = self.0.upgrade() else {
            return ToolPresence::Unknown;
        };
        match rt.state().registry.presence(reference) {
            ToolPresence::Present => ToolPresence::Present,
            _ if rt.pinning.is_withheld(reference) => ToolPresence::Withheld,
            other => other,
        }
    }
}

/// Stops everything when the last [`Roster`] clone is dropped.
struct Lifetime(Arc<Runtime>);

impl Drop for Lifetime {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The running roster: live connections, the tool registry, sessions. Cheap to clone.
#[derive(Clone)]
pub struct Roster {
    rt: Arc<Runtime>,
    /// Where the pin store lives (`RosterOptions::pins_dir`, or the shared store); `None`:
    /// in memory.
    pins_at: Option<crate::store::PinsAt>,
    /// Where roster's state lives.
    stores: crate::store::Stores,
    default_session: Arc<Session>,
    _lifetime: Arc<Lifetime>,
}

impl std::fmt::Debug for Roster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Roster")
            .field("servers", &self.rt.server_names())
            .finish_non_exhaustive()
    }
}

impl Roster {
    /// Starts every enabled server concurrently and waits (at most `gateway.startup_wait`)
    /// for their first connection attempts. A slow or broken server delays nobody else: it
    /// keeps being retried in the background.
    pub async fn start(config: Config) -> Result<Roster, StartError> {
        Self::start_with(config, RosterOptions::default()).await
    }

    /// [`Roster::start`] with an inbox sink and a reconcile hook.
    pub async fn start_with(config: Config, options: RosterOptions) -> Result<Roster, StartError> {
        config.gateway.naming_config().validate()?;
        config.gateway.schedule_config().validate()?;
        let startup_wait = config.gateway.startup_wait;
        let running = config.clone();
        let stores = options
            .stores
            .unwrap_or_else(|| crate::store::Stores::embedded(&config.gateway.state_dir));
        let (store, pins_at) = match (stores.shared(), &options.pins_dir) {
            (Some(pg), _) => (
                PinStore::shared(pg)?,
                Some(crate::store::PinsAt::Shared(pg.clone())),
            ),
            (None, Some(dir)) => (
                PinStore::open(dir)?,
                Some(crate::store::PinsAt::Dir(dir.clone())),
            ),
            (None, None) => (PinStore::open_in_memory()?, None),
        };
        let rt = Runtime::new(
            config.gateway,
            &config.servers,
            &config.server_order,
            options.sink,
            options.on_reconcile,
            Pinning::new(store)?,
            stores.tokens(),
        );
        *lock(&rt.running) = running;
        let lifetime = Arc::new(Lifetime(rt.clone()));
        crate::metrics::watch_runtime(&rt);
        rt.launch()?;
        if options.wait_for_servers && !startup_wait.is_zero() {
            rt.wait_first_attempts(startup_wait).await;
            // The first listings' parsing is over.
            crate::memory::release_freed();
        }
        let default_session = Session::open(rt.clone());
        Ok(Roster {
            rt,
            pins_at,
            stores,
            default_session,
            _lifetime: lifetime,
        })
    }

    /// Applies a new configuration without a restart: servers it adds connect, servers it
    /// removes close and their tools leave as a delta (sessions get `list_changed` and the
    /// note), a server whose effective entry changed is reconnected, and every other server
    /// and every session stay as they are. Waits (at most `startup_wait`) for the new servers'
    /// first connection attempts. Settings only a restart applies are kept as they run and
    /// named in the result's `need_restart`; the gateway's own live settings are named in
    /// `applied` and taken as in force (the gateway puts them there, see
    /// [`crate::gateway::Gateway::apply`]). A configuration that does not validate changes
    /// nothing.
    pub async fn reload(&self, config: Config) -> Result<ConfigChanges, StartError> {
        config.gateway.naming_config().validate()?;
        config.gateway.schedule_config().validate()?;
        let changes = {
            let mut running = lock(&self.rt.running);
            let changes = crate::config::changes(&running, &config);
            // What runs now: the new servers; the rest as it was started until a restart.
            running.servers = config.servers.clone();
            running.server_order = config.server_order.clone();
            // The gateway puts these in force (`Gateway::apply`).
            crate::config::diff::take_live(&mut running, &config);
            changes
        };
        for name in &changes.removed {
            self.rt.remove_server(name, true);
        }
        for name in &changes.changed {
            self.rt.remove_server(name, false);
        }
        let mut started = Vec::new();
        for name in changes.changed.iter().chain(&changes.added) {
            if let Some(server) = config.servers.get(name) {
                self.rt.add_server(name, server)?;
                started.extend(self.rt.slot(name));
            }
        }
        let wait = self.rt.gateway.startup_wait;
        if !wait.is_zero() && !started.is_empty() {
            let firsts = started.iter().map(|slot| {
                let mut first = slot.first_attempt.subscribe();
                async move {
                    let _ = first.wait_for(|done| *done).await;
                }
            });
            let _ = tokio::time::timeout(wait, futures::future::join_all(firsts)).await;
        }
        Ok(changes)
    }

    /// The live tools in their deterministic order: servers in config order, each server's
    /// tools in the order the server listed them.
    pub fn tools(&self) -> Vec<ToolEntry> {
        self.tools_since(None).1.unwrap_or_default()
    }

    /// The registry's version (see [`ToolRegistry::version`]) and, when it is not `known`,
    /// every exposed tool as [`Roster::tools`] gives them: a reader keeps its copy until the
    /// version moves.
    pub fn tools_since(&self, known: Option<u64>) -> (u64, Option<Vec<ToolEntry>>) {
        let state = self.rt.state();
        let version = state.registry.version();
        if known == Some(version) {
            return (version, None);
        }
        let tools = state
            .registry
            .tools()
            .map(|t| ToolEntry {
                exposed_name: t.exposed_name.to_owned(),
                server: t.server.to_owned(),
                tool: t.tool.clone(),
            })
            .collect();
        (version, Some(tools))
    }

    /// Keeps the search index of the live tools (`tools_mode = "search"`), or drops it. Turned
    /// on, it is built once from the tools held now; every reconcile after keeps it.
    pub fn set_tool_search(&self, on: bool) {
        self.rt.state().registry.set_search(on);
    }

    /// The live tools best matching `query`, best first, at most `limit`, among those `accept`
    /// lets through (by exposed name and server); empty while search is off.
    pub fn search_tools(
        &self,
        query: &str,
        limit: usize,
        mut accept: impl FnMut(&str, &str) -> bool,
    ) -> Vec<ToolHit> {
        let state = self.rt.state();
        state
            .registry
            .search(query, limit, |tool| accept(tool.exposed_name, tool.server))
            .into_iter()
            .map(|(tool, score)| ToolHit {
                exposed_name: tool.exposed_name.to_owned(),
                server: tool.server.to_owned(),
                title: tool.tool.title.clone(),
                description: tool
                    .tool
                    .description
                    .as_deref()
                    .map(first_line)
                    .unwrap_or_default(),
                score,
            })
            .collect()
    }

    /// A live [`ToolLookup`] over the registry for the skill catalog: each question reads the
    /// registry as it is at that moment. It holds the roster weakly (everything reports
    /// `Unknown` once the roster is gone).
    pub fn tool_lookup(&self) -> Arc<dyn ToolLookup + Send + Sync> {
        Arc::new(LiveTools(Arc::downgrade(&self.rt)))
    }

    /// Reads the registry (collisions, counts, exposed names).
    pub fn with_registry<R>(&self, read: impl FnOnce(&ToolRegistry) -> R) -> R {
        read(&self.rt.state().registry)
    }

    /// The exposed name a call of `name` reaches: `name` itself when it is exposed, else the
    /// one server's tool that has `name` as its own name (MCP Apps call their server's tools
    /// so; see [`ToolRegistry::route_call`]).
    pub fn route_call(&self, name: &str) -> Result<String, CallRouteError> {
        let state = self.rt.state();
        let routed = state.registry.route_call(name)?;
        Ok(routed.exposed_name.to_owned())
    }

    /// When a call of `name` means a withheld tool: what the caller is told (why, and the
    /// command a person runs to decide).
    pub fn withheld(&self, name: &str) -> Option<String> {
        let (server, w) = self.rt.pinning.withheld(name)?;
        Some(format!(
            "tool `{}` of server `{server}` is {}. Only a person can decide: `roster tools \
             drift` shows what changed and `roster tools approve {}` serves it.",
            w.exposed, w.reason, w.exposed
        ))
    }

    /// Calls a tool by its exposed name (or a server's own name, see [`Roster::route_call`])
    /// with the server's configured timeout.
    pub async fn call(
        &self,
        exposed_name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<Value, CallError> {
        self.call_with(exposed_name, arguments, CallOptions::default())
            .await
    }

    /// Calls a tool with progress and cancellation; `options.timeout` unset means the
    /// server's configured `call_timeout`.
    pub async fn call_with(
        &self,
        exposed_name: &str,
        arguments: Option<Map<String, Value>>,
        options: CallOptions,
    ) -> Result<Value, CallError> {
        let answer = self
            .call_answer(exposed_name, arguments.into(), options)
            .await?;
        answer.into_value().map_err(|source| CallError::Request {
            server: self.server_of(exposed_name),
            tool: exposed_name.to_owned(),
            source,
        })
    }

    /// The server an exposed tool name routes to ("" for none).
    pub(crate) fn server_of(&self, exposed_name: &str) -> String {
        self.with_registry(|r| r.route_call(exposed_name).map(|r| r.server.to_owned()))
            .unwrap_or_default()
    }

    /// [`Roster::call_with`] with the result as the server wrote it, where roster's own
    /// transport read it (see [`crate::servers::answer`]), and the arguments as the client
    /// wrote them where roster writes the request ([`ToolArguments`]).
    pub(crate) async fn call_answer(
        &self,
        exposed_name: &str,
        arguments: ToolArguments,
        mut options: CallOptions,
    ) -> Result<Answer, CallError> {
        let (server, tool) = {
            let state = self.rt.state();
            let route = state
                .registry
                .route_call(exposed_name)
                .map_err(|e| match e {
                    CallRouteError::Unknown(name) => match self.withheld(&name) {
                        Some(why) => CallError::Withheld(why),
                        None => CallError::UnknownTool(name),
                    },
                    ambiguous => CallError::AmbiguousTool(ambiguous),
                })
                .map_err(|e| self.rt.metrics.call_refused(e))?;
            (route.server.to_owned(), route.tool.name.clone())
        };
        let slot = self
            .rt
            .slot(&server)
            .ok_or_else(|| CallError::UnknownTool(exposed_name.to_owned()))?;
        let connection = slot.connection().ok_or_else(|| {
            self.rt.metrics.call_unavailable(&server, exposed_name);
            CallError::Unavailable {
                server: server.clone(),
                tool: exposed_name.to_owned(),
            }
        })?;
        if options.timeout.is_none() {
            options.timeout = Some(slot.config.call_timeout);
        }
        let started = self.rt.metrics.started();
        let outcome = connection.call_tool_answer(&tool, arguments, options).await;
        self.rt
            .metrics
            .call(&server, exposed_name, started, &outcome);
        if matches!(outcome, Err(RequestError::Unauthorized)) && slot.config.oauth.is_some() {
            self.rt.refused_for_a_login(&slot, &connection, "call");
        }
        outcome.map_err(|source| CallError::Request {
            server,
            tool: exposed_name.to_owned(),
            source,
        })
    }

    /// How a call of this exposed tool may run as a task (SEP-2663): the server's
    /// `tasks.required` / `tasks.forbidden` configuration first, then the tool's own
    /// `execution.taskSupport` (servers speaking 2025-11-25 declare it), else optional: roster
    /// can run any tool in the background. `None` for a tool that is not exposed.
    pub fn task_support(&self, exposed_name: &str) -> Option<TaskSupport> {
        let state = self.rt.state();
        let route = state.registry.route_call(exposed_name).ok()?;
        let configured = self
            .rt
            .slot(route.server)
            .and_then(|slot| slot.config.tasks.of(&route.tool.name));
        let declared = || {
            route
                .tool
                .extra
                .get("execution")
                .and_then(|e| e.get("taskSupport"))
                .and_then(Value::as_str)
                .and_then(TaskSupport::parse)
        };
        Some(
            configured
                .or_else(declared)
                .unwrap_or(TaskSupport::Optional),
        )
    }

    /// The servers' prompts under their exposed names (the tools' naming rules), servers in
    /// config order.
    pub fn prompts(&self) -> Vec<PromptEntry> {
        lock(&self.rt.offerings).prompts()
    }

    /// The servers' resources as `(server, resource)`, servers in config order; a URI two
    /// servers list belongs to the first.
    pub fn resources(&self) -> Vec<(String, Value)> {
        lock(&self.rt.offerings).resources()
    }

    /// The servers' resource templates as `(server, template)`, servers in config order.
    pub fn resource_templates(&self) -> Vec<(String, Value)> {
        lock(&self.rt.offerings).templates()
    }

    /// A watch that changes whenever the prompt set or the resource set changes.
    pub fn offerings_changed(&self) -> tokio::sync::watch::Receiver<OfferingsGeneration> {
        self.rt.offerings_changed.subscribe()
    }

    /// `prompts/get` of an exposed prompt, sent to its server under the server's own name;
    /// returns the server's `GetPromptResult` JSON.
    pub async fn get_prompt(
        &self,
        exposed_name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<Value, RouteError> {
        self.get_prompt_with(exposed_name, arguments, CallOptions::default())
            .await
    }

    /// [`Roster::get_prompt`] for a caller (who answers the server's requests, see
    /// [`crate::servers::relay`]); `options.timeout` unset means the server's `list_timeout`.
    pub async fn get_prompt_with(
        &self,
        exposed_name: &str,
        arguments: Option<Map<String, Value>>,
        options: CallOptions,
    ) -> Result<Value, RouteError> {
        let (server, name) = lock(&self.rt.offerings)
            .prompt_route(exposed_name)
            .ok_or_else(|| RouteError::UnknownPrompt(exposed_name.to_owned()))?;
        let mut params = serde_json::json!({ "name": name });
        if let Some(arguments) = arguments {
            params["arguments"] = Value::Object(arguments);
        }
        self.forward_interactive(&server, "prompts/get", params, options)
            .await
    }

    /// `resources/read` of `uri`, sent to the server whose listing holds it (or whose template
    /// matches it); returns the server's `ReadResourceResult` JSON.
    pub async fn read_resource(&self, uri: &str) -> Result<Value, RouteError> {
        self.read_resource_with(uri, CallOptions::default()).await
    }

    /// [`Roster::read_resource`] for a caller, as [`Roster::get_prompt_with`].
    pub async fn read_resource_with(
        &self,
        uri: &str,
        options: CallOptions,
    ) -> Result<Value, RouteError> {
        let server = lock(&self.rt.offerings)
            .resource_owner(uri)
            .ok_or_else(|| RouteError::UnknownResource(uri.to_owned()))?;
        let params = serde_json::json!({ "uri": uri });
        self.forward_interactive(&server, "resources/read", params, options)
            .await
    }

    /// `completion/complete` for a `ref/prompt` (by exposed name, sent under the server's own
    /// name) or a `ref/resource` (by template or URI); returns the server's `CompleteResult`.
    pub async fn complete(&self, mut params: Value) -> Result<Value, RouteError> {
        let reference = params.get("ref").cloned().unwrap_or(Value::Null);
        let unknown = || RouteError::UnknownReference(reference.to_string());
        let kind = reference.get("type").and_then(Value::as_str);
        let server = match kind {
            Some("ref/prompt") => {
                let exposed = reference.get("name").and_then(Value::as_str).unwrap_or("");
                let (server, name) = lock(&self.rt.offerings)
                    .prompt_route(exposed)
                    .ok_or_else(unknown)?;
                params["ref"]["name"] = Value::String(name);
                server
            }
            Some("ref/resource") => {
                let uri = reference.get("uri").and_then(Value::as_str).unwrap_or("");
                lock(&self.rt.offerings)
                    .template_owner(uri)
                    .ok_or_else(unknown)?
            }
            _ => return Err(unknown()),
        };
        self.forward(&server, "completion/complete", params).await
    }

    /// Watches a server resource's updates for one client session: the first watch of a URI
    /// subscribes at the server that owns it (`resources/subscribe`, or a
    /// `subscriptions/listen` stream on a 2026-07-28 server); dropping the last one
    /// unsubscribes there. The updates arrive through [`Roster::resource_updates`].
    pub async fn watch_resource(&self, uri: &str) -> Result<ResourceWatch, RouteError> {
        ResourceWatches::watch(&self.rt, uri).await
    }

    /// Whether a watch of `uri` could be made now: its server is connected and declares
    /// `resources.subscribe`.
    pub fn can_watch_resource(&self, uri: &str) -> bool {
        ResourceWatches::watchable_at(&self.rt, uri).is_ok()
    }

    /// Whether any connected server takes resource watches (declares `resources.subscribe`).
    pub fn takes_resource_watches(&self) -> bool {
        self.rt
            .slots()
            .into_iter()
            .filter_map(|slot| slot.connection())
            .any(|connection| connection.advertises_subscribe())
    }

    /// Every server's `notifications/resources/updated` from now on (a slow reader skips
    /// ahead: it is told how many it missed).
    pub fn resource_updates(&self) -> tokio::sync::broadcast::Receiver<ResourceUpdate> {
        self.rt.resource_watches.updates()
    }

    async fn forward_interactive(
        &self,
        server: &str,
        method: &str,
        params: Value,
        mut options: CallOptions,
    ) -> Result<Value, RouteError> {
        let slot = self
            .rt
            .slot(server)
            .ok_or_else(|| RouteError::Unavailable(server.to_owned()))?;
        let connection = slot
            .connection()
            .ok_or_else(|| RouteError::Unavailable(server.to_owned()))?;
        if options.timeout.is_none() {
            options.timeout = Some(slot.config.list_timeout);
        }
        connection
            .interactive(method, params, options)
            .await
            .and_then(Answer::into_value)
            .map_err(|source| RouteError::Request {
                server: server.to_owned(),
                source: Box::new(source),
            })
    }

    async fn forward(
        &self,
        server: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, RouteError> {
        let connection = self
            .rt
            .slot(server)
            .and_then(|slot| slot.connection())
            .ok_or_else(|| RouteError::Unavailable(server.to_owned()))?;
        connection
            .request(method, params)
            .await
            .map_err(|source| RouteError::Request {
                server: server.to_owned(),
                source: Box::new(source),
            })
    }

    /// A client asked for log messages at `level` and above (`logging/setLevel`). Each
    /// initialize-era server that advertises `logging` is asked for the most verbose level any
    /// client asked for so far (now, and at every reconnect); clients filter their own.
    pub async fn set_log_level(&self, level: LogLevel) {
        if !self.rt.lower_log_level(level) {
            return;
        }
        let connections: Vec<_> = self
            .rt
            .slots()
            .into_iter()
            .filter_map(|s| s.connection())
            .collect();
        let sends = connections.iter().map(|connection| async move {
            if let Err(error) = connection.set_log_level(level).await {
                tracing::warn!(server = connection.server(), %error, "logging/setLevel failed");
            }
        });
        futures::future::join_all(sends).await;
    }

    /// Log messages servers send while no request is in flight to them (each is recorded in
    /// the inbox too). Messages during a request go to that request's caller instead.
    pub fn server_logs(&self) -> tokio::sync::broadcast::Receiver<ServerLog> {
        self.rt.server_logs.subscribe()
    }

    /// Marks every server stale, its tools and its prompts, resources and skills. Dials nothing: the next turn lists each server once, however
    /// often this was called before it. Returns how many servers are scheduled (the enabled
    /// ones); a failed or crash-looping server keeps its backoff.
    pub fn refresh(&self) -> usize {
        let mut state = self.rt.state();
        state.schedule.mark_all_stale();
        let names: Vec<String> = state.schedule.iter().map(|(n, _)| n.to_owned()).collect();
        for name in &names {
            if let Some(schedule) = state.schedule.server_mut(name) {
                schedule.mark_offerings_stale();
            }
        }
        names.len()
    }

    /// Marks one server stale (as [`Roster::refresh`] does for all): the next turn lists it.
    /// `false`: no enabled server has that name.
    pub fn refresh_server(&self, name: &str) -> bool {
        let mut state = self.rt.state();
        match state.schedule.server_mut(name) {
            Some(schedule) => {
                schedule.mark_stale();
                schedule.mark_offerings_stale();
                true
            }
            None => false,
        }
    }

    /// Restarts one server: its connection closes (a stdio server's process group ends), its
    /// tools leave as a reconnect's do, and it connects again with the entry that runs now.
    /// The other servers and every session stay as they are.
    pub fn restart_server(&self, name: &str) -> Result<(), RestartError> {
        let slot = self
            .rt
            .slot(name)
            .ok_or_else(|| RestartError::Unknown(name.to_owned()))?;
        if !slot.config.enabled {
            return Err(RestartError::Disabled(name.to_owned()));
        }
        let config = slot.config.clone();
        drop(slot);
        self.rt.remove_server(name, false);
        self.rt
            .add_server(name, &config)
            .map_err(|e| RestartError::Start(name.to_owned(), e.to_string()))
    }

    /// The `[gateway]` table that runs now.
    pub(crate) fn running_gateway(&self) -> crate::config::GatewayConfig {
        lock(&self.rt.running).gateway.clone()
    }

    /// Where this roster's state lives: what a login made beside it (`roster::oauth`) must
    /// write to for the running servers to see it.
    pub fn stores(&self) -> &crate::store::Stores {
        &self.stores
    }

    /// The pin store a person decides in (`None`: pins live in memory), and the naming that
    /// runs (how `roster tools drift` names a waiting tool).
    pub(crate) fn pins_place(&self) -> (Option<crate::store::PinsAt>, roster_core::NamingConfig) {
        let naming = lock(&self.rt.running).gateway.naming_config();
        (self.pins_at.clone(), naming)
    }

    /// The recent deltas of every server, newest first (at most
    /// [`crate::servers::RECENT_CHANGES`]).
    pub fn recent_changes(&self) -> Vec<crate::servers::Change> {
        self.rt.recent_changes()
    }

    /// Starts a turn for the default session (see [`Session::begin_turn`]).
    pub async fn begin_turn(&self) -> Turn {
        self.default_session.begin_turn().await
    }

    /// A new client session with its own delta queue (it sees deltas from now on).
    pub fn open_session(&self) -> Arc<Session> {
        Session::open(self.rt.clone())
    }

    /// A gateway client's session: it sees deltas from its client's first `tools/list` on.
    pub(crate) fn open_client_session(&self) -> Arc<Session> {
        Session::open_for_client(self.rt.clone())
    }

    /// This roster's Prometheus metrics (see [`crate::metrics`]).
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.rt.metrics
    }

    /// Every configured server's state, in name order.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.rt.status()
    }

    /// [`Roster::status`] as JSON (`{"servers": [...]}`), each server as `roster status`
    /// shows it.
    pub fn status_json(&self) -> Value {
        serde_json::json!({ "servers": self.servers_json() })
    }

    /// Every server's status as the JSON array `roster status`, the admin socket and
    /// `/healthz` show.
    pub(crate) fn servers_json(&self) -> Value {
        let transport = |name: &str| {
            let slot = self.rt.slot(name)?;
            Some(crate::servers::status::transport_name(
                &slot.config.transport,
            ))
        };
        crate::servers::status::servers_json(&self.status(), transport, std::time::Instant::now())
    }

    /// The servers still starting: enabled, their first connection attempt (connecting and
    /// the first listing) not over yet.
    pub fn starting(&self) -> Vec<String> {
        self.status()
            .into_iter()
            .filter(|s| s.starting)
            .map(|s| s.name)
            .collect()
    }

    /// Lists one server now, whatever its schedule says.
    pub async fn relist(&self, server: &str) -> Result<Delta, RelistError> {
        let slot = self
            .rt
            .slot(server)
            .ok_or_else(|| RelistError::Unknown(server.to_owned()))?;
        self.rt.relist(&slot, Relisting::Always).await
    }

    /// Tells clients the `skill://` resources changed (an edited skill directory):
    /// `notifications/resources/list_changed`, as for a server's resources.
    pub fn skill_resources_changed(&self) {
        self.rt
            .publish_offerings(crate::servers::offerings::Changed {
                prompts: false,
                resources: true,
                skills: false,
            });
    }

    /// Follows servers' skills (SEP-2640): `hook` gets a server's skills each time they change,
    /// and once now for every server listed already.
    pub fn set_skills_hook(&self, hook: crate::servers::SkillsHook) {
        self.rt.set_skills_hook(hook);
    }

    /// Every server of the running configuration (enabled or not), in config order.
    pub fn configured_servers(&self) -> Vec<String> {
        lock(&self.rt.running).server_order.clone()
    }

    /// The enabled servers in config order.
    pub fn server_order(&self) -> Vec<String> {
        lock(&self.rt.offerings).order().to_vec()
    }

    /// `resources/read` of one file of a synced skill at the server that serves it.
    pub async fn read_skill_file(&self, server: &str, uri: &str) -> Result<Value, RouteError> {
        self.forward(server, "resources/read", serde_json::json!({ "uri": uri }))
            .await
    }

    /// The notification fan-out of one server (it survives restarts), for listeners of
    /// `(method, params)`.
    pub fn notifications(&self, server: &str) -> Option<Arc<Notifications>> {
        self.rt.slot(server).map(|s| s.notifications.clone())
    }

    /// Replaces the reconcile hook (the skill catalog plugs in here after start).
    pub fn set_reconcile_hook(&self, hook: Option<ReconcileHook>) {
        self.rt.set_reconcile_hook(hook);
    }

    /// Stops every server and hook now (also done when the last clone is dropped).
    pub fn shutdown(&self) {
        self.rt.stop();
    }

    /// [`Roster::shutdown`], then waits until every stdio server's process group has ended:
    /// SIGTERM at once, SIGKILL after `kill_grace` to what is still there. Call it before the
    /// runtime ends, so the grace period is honoured and nothing a server started outlives roster.
    pub async fn shutdown_and_wait(&self) {
        self.rt.stop_and_wait().await;
    }
}

/// One match of [`Roster::search_tools`]: what a model needs to choose a tool, no schemas.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolHit {
    /// The name to call it by.
    #[serde(rename = "name")]
    pub exposed_name: String,
    /// Its title, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The first line of its description, at most [`HIT_DESCRIPTION_CHARS`] characters.
    pub description: String,
    /// The server that offers it.
    pub server: String,
    /// Relevance: higher is better; comparable within one search only.
    pub score: f32,
}

/// How much of a description a search hit carries.
pub const HIT_DESCRIPTION_CHARS: usize = 200;

/// The first non-empty line of `text`, cut to [`HIT_DESCRIPTION_CHARS`] characters (with `…`).
fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    match line.char_indices().nth(HIT_DESCRIPTION_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}
