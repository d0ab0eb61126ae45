//! What clients see: roster as an MCP server over stdio and streamable HTTP.
//!
//! The gateway is written against [`Backend`], a narrow view of the roster (list the exposed
//! tools, call one, begin a turn for a session, mark everything stale, report status). The
//! runtime's [`crate::Roster`] implements it; tests can put any real implementation behind it.
//!
//! Per client session the gateway keeps the change note drained at a turn until a tool result
//! carries it (as a text block of its own; a `tools/list` of the session drops it, and a
//! `[[clients]]` entry can turn notes off), and sends `notifications/tools/list_changed`
//! upstream only when a non-empty delta arrived — once per batch of deltas drained at one turn
//! (coalesced per session).
//!
//! A `tools/call` goes by exposed name, or by a server's own tool name that exactly one
//! connected server has (MCP Apps call their server's tools so; see [`Backend::route_call`]).
//!
//! Besides tools, prompts and resources, the gateway relays resource updates to the sessions
//! that subscribed (`watched`), and runs slow tool calls as tasks for clients that opted in to
//! the tasks extension (`tasks`, SEP-2663).
//!
//! What a server asks of its client during a request (sampling, elicitation, roots, log
//! messages) goes to the client behind that request, in either era; see `caller` and
//! [`crate::servers::relay`].

use crate::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, JsonObject, ProgressNotificationParam, ProgressToken, Prompt, Resource,
    ResourceTemplate, Tool,
};
use tokio::sync::{broadcast, watch};

use crate::config::TaskSupport;
use crate::servers::{
    CallerRelay, InputRound, LogLevel, OfferingsGeneration, ResourceUpdate, ServerLog,
};
use rmcp::service::Peer;
use tokio_util::sync::CancellationToken;

pub mod admin;
mod auth;
mod caller;
mod handler;
pub mod http;
mod native;
mod roster_backend;
mod session;
mod skills;
pub mod stdio;
mod tasks;
mod watched;

use auth::AdmittedClient;
pub use auth::{ClientEntry, ClientEntryError, ClientIdentity};
pub use handler::GatewayHandler;
pub use roster_backend::RosterBackend;
use session::Session;
pub use skills::Skills;
pub use tasks::TaskSettings;
use tasks::Tasks;

/// The roster as the gateway needs to see it.
///
/// Methods return boxed futures so the gateway can hold any backend as `Arc<dyn Backend>`.
pub trait Backend: Send + Sync + 'static {
    /// The servers' tools under their exposed names, schemas and annotations as the servers
    /// gave them, in a deterministic order. Reads what is known; dials nothing. The same `Arc`
    /// comes back for as long as the tools stay the same, so readers can key copies on it.
    fn tools(&self) -> Arc<Vec<Tool>>;

    /// The exposed name a `tools/call` of `name` reaches: `name` when it is exposed, else the
    /// one server tool whose own name it is (MCP Apps call their server's tools so). An error
    /// says the name is unknown, or names the exposed names of every server that has it.
    fn route_call(&self, name: &str) -> Result<String, roster_core::CallRouteError>;

    /// Calls a server's tool by its exposed name with the client's arguments. The result is
    /// `input_required` only for a caller that takes such results itself.
    fn call<'a>(
        &'a self,
        exposed: &'a str,
        arguments: Option<JsonObject>,
        relay: CallRelay,
    ) -> BoxFuture<'a, Result<CallToolResponse, CallError>>;

    /// The servers' prompts under their exposed names, in a deterministic order.
    fn prompts(&self) -> Vec<Prompt>;

    /// The servers' resources (each URI once, the first server's), in a deterministic order.
    fn resources(&self) -> Vec<Resource>;

    /// The servers' resource templates, in a deterministic order.
    fn resource_templates(&self) -> Vec<ResourceTemplate>;

    /// Forwards `prompts/get`, `resources/read` or `completion/complete` to the owning
    /// server (with its own name); the answer is the server's result, or the JSON-RPC error
    /// the client should get.
    fn forward<'a>(
        &'a self,
        method: &'a str,
        params: serde_json::Value,
    ) -> BoxFuture<'a, Result<serde_json::Value, ErrorData>>;

    /// [`Backend::forward`] of `prompts/get` or `resources/read` for a caller, whose server may
    /// ask it for input (see [`crate::servers::relay`]).
    fn forward_with<'a>(
        &'a self,
        method: &'a str,
        params: serde_json::Value,
        relay: CallRelay,
    ) -> BoxFuture<'a, Result<serde_json::Value, ErrorData>>;

    /// A client asked for log messages at `level` and above: pass it on to the servers.
    fn set_log_level(&self, level: LogLevel) -> BoxFuture<'_, ()>;

    /// Log messages servers send outside any request (`None`: there are none).
    fn server_logs(&self) -> Option<broadcast::Receiver<ServerLog>>;

    /// Changes whenever the prompt set or the resource set changes (`None`: they never do).
    fn offerings_changed(&self) -> Option<watch::Receiver<OfferingsGeneration>>;

    /// Subscribes one session to a server resource's updates (at the server while any session
    /// holds one); the hold lasts until dropped. An error names why the URI cannot be watched.
    fn watch_resource<'a>(&'a self, uri: &'a str)
    -> BoxFuture<'a, Result<ResourceHold, ErrorData>>;

    /// Whether `uri`'s server is connected now and takes subscriptions.
    fn can_watch_resource(&self, uri: &str) -> bool;

    /// Whether any connected server takes resource subscriptions (`resources.subscribe`).
    fn takes_resource_subscriptions(&self) -> bool;

    /// The servers' `notifications/resources/updated` from now on (`None`: there are none).
    fn resource_updates(&self) -> Option<broadcast::Receiver<ResourceUpdate>>;

    /// How a call of this exposed tool may run as a task (`None`: no tool of that name).
    fn task_support(&self, exposed: &str) -> Option<TaskSupport>;

    /// One round of a server tool's call for `caller` with the answer as the server gave it: a
    /// tool result or an `input_required` result (SEP-2322), which the next round answers with
    /// `input`. Cancelling `cancel` cancels the call at the server.
    fn call_round<'a>(
        &'a self,
        exposed: &'a str,
        arguments: Option<JsonObject>,
        input: Option<InputRound>,
        caller: Arc<dyn CallerRelay>,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<serde_json::Value, CallError>>;

    /// Opens the per-session view used for turns and change delivery.
    fn open_session(&self) -> Box<dyn BackendSession>;

    /// Marks every server stale without dialling any; returns how many servers were marked.
    fn refresh(&self) -> usize;

    /// Per-server status as JSON, for `roster status` and `GET /healthz`.
    fn status(&self) -> serde_json::Value;

    /// Stops the servers (child processes) before the gateway exits.
    fn shutdown(&self) -> BoxFuture<'_, ()>;
}

/// One client session as seen by the backend: its queue of deltas.
pub trait BackendSession: Send + Sync + 'static {
    /// Starts a turn: re-lists the servers that need it (within the backend's bounded wait),
    /// then drains this session's queued deltas. Returns the change note for them, if any.
    fn begin_turn(&self) -> BoxFuture<'_, Option<String>>;

    /// Resolves when a non-empty delta is queued for this session (at once while one is; the
    /// gateway waits for the next turn before asking again).
    fn changed(&self) -> BoxFuture<'_, ()>;
}

/// One session's subscription to a server resource (see [`Backend::watch_resource`]).
pub trait HeldResource: Send + Sync + 'static {
    /// The server the resource belongs to: only its updates of the URI are relayed.
    fn server(&self) -> &str;
}

impl HeldResource for crate::servers::ResourceWatch {
    fn server(&self) -> &str {
        crate::servers::ResourceWatch::server(self)
    }
}

/// A [`HeldResource`] as the gateway keeps it.
pub type ResourceHold = Box<dyn HeldResource>;

/// What a forwarded call carries back and forth besides its arguments.
#[derive(Clone)]
pub struct CallRelay {
    /// Cancelled when the client cancels the request or the gateway shuts down.
    pub cancel: CancellationToken,
    /// Where to send the server's progress notifications, if the client asked for progress.
    pub progress: Option<ProgressRelay>,
    /// The client behind the request: it answers what the server asks and gets its log
    /// messages.
    pub caller: Option<Arc<dyn CallerRelay>>,
    /// The client's answers to an earlier `input_required` result (its retry).
    pub input: Option<InputRound>,
}

/// Forwards progress notifications to the client under the client's own progress token.
#[derive(Clone)]
pub struct ProgressRelay {
    token: ProgressToken,
    peer: Peer<RoleServer>,
}

impl ProgressRelay {
    /// Sends one progress update to the client.
    pub async fn send(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let mut param = ProgressNotificationParam::new(self.token.clone(), progress);
        param.total = total;
        param.message = message;
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!("progress notification not delivered: {e}");
        }
    }
}

/// Why a forwarded call produced no server result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// No server offers a tool under this exposed name.
    #[error("unknown tool {0:?}; list the tools again with tools/list")]
    UnknownTool(String),
    /// The owning server could not answer.
    #[error("server {server:?} is unavailable: {reason}")]
    ServerDown {
        /// The server's configured name.
        server: String,
        /// Why, in words a user can act on.
        reason: String,
    },
    /// The server answered the call with a JSON-RPC error; the client gets the same error.
    #[error("the server answered with error {code}: {message}")]
    Server {
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
        /// The error's `data`.
        data: Option<serde_json::Value>,
    },
    /// The client cancelled the call before the server answered.
    #[error("the call was cancelled")]
    Cancelled,
}

/// What a client's request to the servers produced; held while the request is paused on a
/// server's question (see `caller`).
pub(crate) enum Outcome {
    /// A `tools/call`.
    Call(Result<CallToolResponse, CallError>),
    /// A forwarded `prompts/get` or `resources/read`.
    Forward(Result<serde_json::Value, ErrorData>),
}

/// The gateway-surface settings, taken from the `[gateway]` table of `roster.toml`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address for `roster serve --http` when none is given on the command line.
    pub listen: String,
    /// Subscriptions a client holds when it has no token (stdio, or HTTP with no clients).
    pub subscriptions: Vec<String>,
    /// Whether a tool result after a change carries a note naming what appeared and vanished.
    pub delta_notes: bool,
    /// Extra `Host` values accepted over HTTP besides loopback (for a deliberate public bind).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted over HTTP; a request with any other `Origin` is refused.
    pub allowed_origins: Vec<String>,
    /// Page size for `tools/list` and the other list results.
    pub page_size: usize,
    /// How roster runs tool calls as tasks (SEP-2663).
    pub tasks: TaskSettings,
}

impl ServeConfig {
    /// The settings a `[gateway]` table gives.
    pub fn from_gateway(gateway: &crate::config::GatewayConfig) -> Self {
        Self {
            listen: gateway.listen.clone(),
            subscriptions: gateway.subscriptions.clone(),
            delta_notes: gateway.delta_notes,
            allowed_hosts: gateway.allowed_hosts.clone(),
            allowed_origins: gateway.allowed_origins.clone(),
            page_size: gateway.page_size,
            tasks: TaskSettings {
                after: gateway.task_after,
                ttl: gateway.task_ttl,
                max: gateway.max_tasks,
            },
        }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8931".to_owned(),
            subscriptions: Vec::new(),
            delta_notes: true,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            page_size: 200,
            tasks: TaskSettings::default(),
        }
    }
}

/// The gateway's shared state: the backend, who may connect, and the sessions of clients that
/// speak the stateless (2026-07-28) era, keyed by who they are.
pub struct Gateway {
    backend: Arc<dyn Backend>,
    config: ServeConfig,
    clients: Vec<AdmittedClient>,
    skills: Arc<Skills>,
    inbox: Option<Arc<crate::inbox::Inbox>>,
    stateless: Mutex<HashMap<String, Arc<Session>>>,
    paused: Arc<caller::Paused<Outcome>>,
    tasks: Tasks,
    served: Mutex<Option<Arc<ServedTools>>>,
    shutdown: CancellationToken,
}

/// The tools a client is served: native tools first (they win any clash), then the servers'.
/// Built once per change of the servers' tools and shared by every request until the next.
pub(crate) struct ServedTools {
    /// The backend's tools this was built from.
    servers: Arc<Vec<Tool>>,
    tools: Vec<Tool>,
    index: HashMap<String, usize>,
}

impl ServedTools {
    fn build(native: Vec<Tool>, servers: Arc<Vec<Tool>>) -> Self {
        let mut tools = native;
        let native_count = tools.len();
        tools.reserve(servers.len());
        let mut index: HashMap<String, usize> =
            HashMap::with_capacity(native_count + servers.len());
        for tool in &tools {
            index.insert(tool.name.to_string(), index.len());
        }
        for tool in servers.iter() {
            if !index.contains_key(tool.name.as_ref()) {
                index.insert(tool.name.to_string(), tools.len());
                tools.push(tool.clone());
            }
        }
        Self {
            servers,
            tools,
            index,
        }
    }

    /// Every tool, in the order `tools/list` pages them.
    pub(crate) fn all(&self) -> &[Tool] {
        &self.tools
    }

    /// The tool served under `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Tool> {
        self.index.get(name).map(|&i| &self.tools[i])
    }
}

impl Gateway {
    /// A gateway over `backend` with the `[gateway]` settings, `[[clients]]` entries, the skill
    /// catalog and (for `channels`) the inbox; fails when a client's token cannot be read.
    pub fn new(
        backend: Arc<dyn Backend>,
        config: ServeConfig,
        clients: &[ClientEntry],
        skills: Arc<Skills>,
        inbox: Option<Arc<crate::inbox::Inbox>>,
    ) -> Result<Arc<Self>, ClientEntryError> {
        let tasks = Tasks::new(config.tasks.clone());
        Ok(Arc::new(Self {
            backend,
            config,
            clients: auth::admit_all(clients)?,
            skills,
            inbox,
            stateless: Mutex::new(HashMap::new()),
            paused: caller::Paused::new(),
            tasks,
            served: Mutex::new(None),
            shutdown: CancellationToken::new(),
        }))
    }

    /// The backend behind this gateway.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The tools clients are served now; rebuilt only when the servers' tools changed.
    pub(crate) fn served_tools(&self) -> Arc<ServedTools> {
        // Under the lock, so a caller holding an older copy cannot replace a newer one.
        let mut served = lock(&self.served);
        let servers = self.backend.tools();
        if let Some(current) = served.as_ref()
            && Arc::ptr_eq(&current.servers, &servers)
        {
            return current.clone();
        }
        let fresh = Arc::new(ServedTools::build(native::tools(self), servers));
        *served = Some(fresh.clone());
        fresh
    }

    /// The skill catalog served by the native tools and the skills extension.
    pub fn skills(&self) -> &Skills {
        &self.skills
    }

    /// The inbox behind the `channels` tool (absent when another gateway owns the state
    /// directory's inbox; `channels` is then not offered).
    pub fn inbox(&self) -> Option<&crate::inbox::Inbox> {
        self.inbox.as_deref()
    }

    /// The tasks roster runs for its clients.
    pub(crate) fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    /// The `[gateway]` settings in force.
    pub fn config(&self) -> &ServeConfig {
        &self.config
    }

    /// Cancelled when the gateway begins shutting down.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Whether HTTP requests must carry a bearer token.
    pub fn requires_token(&self) -> bool {
        !self.clients.is_empty()
    }

    /// The client a bearer token belongs to, if any.
    pub fn authenticate(&self, token: &str) -> Option<ClientIdentity> {
        auth::authenticate(&self.clients, token)
    }

    /// Whether `who`'s tool results carry the change note: its `[[clients]]` entry's
    /// `delta_notes`, else `[gateway] delta_notes`.
    pub(crate) fn delta_notes(&self, who: &ClientIdentity) -> bool {
        auth::delta_notes(&self.clients, who, self.config.delta_notes)
    }

    /// Who a request without a token is: the `[gateway] subscriptions` default.
    pub fn anonymous(&self) -> ClientIdentity {
        ClientIdentity {
            name: None,
            subscriptions: self.config.subscriptions.clone(),
        }
    }

    fn stateless_session(&self, who: &ClientIdentity) -> Arc<Session> {
        let key = who.name.clone().unwrap_or_default();
        let mut sessions = lock(&self.stateless);
        sessions
            .entry(key)
            .or_insert_with(|| Session::open(self.backend.as_ref(), &self.shutdown))
            .clone()
    }

    /// Begins shutting down: sessions stop, then the servers are stopped.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.tasks.shutdown();
        self.backend.shutdown().await;
    }
}
