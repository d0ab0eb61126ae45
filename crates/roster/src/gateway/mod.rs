//! What clients see: roster as an MCP server over stdio and streamable HTTP.
//!
//! The gateway serves the runtime's [`crate::Roster`] directly: the servers' tools (with the
//! native tools first), their prompts and resources, and each client's [`crate::Session`].
//!
//! Each client session keeps the change note drained at a turn until a tool result carries it (as a text block of its own; a `tools/list` of the session drops it, and a
//! `[[clients]]` entry can turn notes off), and sends `notifications/tools/list_changed`
//! upstream only when a non-empty delta arrived — once per batch of deltas drained at one turn
//! (coalesced per session).
//!
//! A `tools/call` goes by exposed name, or by a server's own tool name that exactly one
//! connected server has (MCP Apps call their server's tools so; see
//! [`crate::Roster::route_call`]).
//!
//! Besides tools, prompts and resources, the gateway relays resource updates to the sessions
//! that watch them (`watches`), and runs slow tool calls as tasks for clients that opted in to
//! the tasks extension (`tasks`, SEP-2663).
//!
//! What a server asks of its client during a request (sampling, elicitation, roots, log
//! messages) goes to the client behind that request, in either era; see `caller` and
//! [`crate::servers::relay`].

use crate::sync::{lock, read, write};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use tokio_util::sync::CancellationToken;

use crate::config::{AlwaysListed, PageLimits, ToolsMode};
use crate::inbox::Attribution;
use crate::servers::answer::RawResult;
use crate::servers::{CallerRelay, InputRound};
use crate::{Roster, Session};

pub mod admin;
mod auth;
mod caller;
mod forward;
mod handler;
pub mod http;
mod inbox_request;
pub(crate) mod lane;
mod native;
pub mod reload;
mod resource_server;
mod served;
pub mod stdio;
mod tasks;
pub mod ui;
mod watches;

pub use crate::skills::Skills;
use auth::AdmittedClient;
pub use auth::{ClientEntry, ClientEntryError, ClientIdentity};
pub use handler::GatewayHandler;
pub(crate) use resource_server::{Refusal, ResourceServer};
use served::ServedTools;
pub use tasks::TaskSettings;
use tasks::Tasks;

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
    /// The tool is withheld until a person approves its definition; the text says why and
    /// which command decides.
    #[error("{0}")]
    Withheld(String),
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

/// A server tool's answer for the client.
pub(crate) enum ToolAnswer {
    /// Parsed: an `input_required` result, or a result read by rmcp.
    Typed(CallToolResponse),
    /// A complete result as the server wrote it ([`crate::servers::answer`]): it goes to the
    /// client as it is where nothing must change inside it, else parsed
    /// ([`Gateway::typed_result`]).
    Raw(RawResult),
}

/// What a client's request to the servers produced; held while the request is paused on a
/// server's question (see `caller`).
pub(crate) enum Outcome {
    /// A `tools/call`.
    Call(Result<ToolAnswer, CallError>),
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
    /// How `tools/list` and the other list results are cut into pages.
    pub pages: PageLimits,
    /// `tools_mode` and `always` of clients whose `[[clients]]` entry sets neither.
    pub tools_mode: ToolsMode,
    /// In search mode, the tools that stay listed.
    pub always: Arc<AlwaysListed>,
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
            pages: gateway.pages(),
            tools_mode: gateway.tools_mode,
            always: Arc::new(gateway.always.clone()),
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
            pages: PageLimits::default(),
            tools_mode: ToolsMode::All,
            always: Arc::default(),
            tasks: TaskSettings::default(),
        }
    }
}

/// How many client identities keep a stateless-era session at once; past it, the least recently
/// used one's session ends (its next request opens a new one).
pub const MAX_STATELESS_IDENTITIES: usize = 4096;

/// The `NOTIFY` channel of refreshes (`refresh_tools`); the payload is the replica that asked.
const REFRESH_CHANNEL: &str = "roster_refresh";

/// How this replica's refreshes reach the others.
struct Fanout {
    stores: crate::store::Stores,
    /// This replica's id, so it does not refresh twice on its own notice.
    origin: String,
}

/// The gateway's shared state: the roster it serves, who may connect, and the sessions of
/// clients that speak the stateless (2026-07-28) era, keyed by who they are.
pub struct Gateway {
    roster: Roster,
    /// Where a request to a server says whose it is while it runs, so the inbox records what
    /// the server sends meanwhile as that client's (present with the inbox).
    attribution: Option<Attribution>,
    /// The settings in force and the admitted `[[clients]]`; a reload replaces both at once.
    live: std::sync::RwLock<Live>,
    skills: Arc<Skills>,
    inbox: Option<Arc<crate::inbox::Inbox>>,
    /// By identity name, with when each was last used: at most [`MAX_STATELESS_IDENTITIES`]
    /// (verified tokens bring identities from outside; the least recently used goes first).
    stateless: Mutex<HashMap<String, (Arc<Session>, std::time::Instant)>>,
    paused: Arc<caller::Paused<Outcome>>,
    tasks: Arc<Tasks>,
    served: Mutex<Option<Arc<ServedTools>>>,
    shutdown: CancellationToken,
    /// Reloads the configuration file (`roster serve` sets it; an embedder may not).
    /// With `[store]`: how a refresh reaches the other replicas.
    fanout: std::sync::OnceLock<Fanout>,
    reloader: std::sync::OnceLock<Arc<reload::Reloader>>,
    /// Who may use the dashboard (`/ui`): its sessions and one-time tokens, shared by every
    /// listener that serves it.
    ui: ui::Access,
}

/// What a reload can change while clients are connected: the `[gateway]` settings (of which
/// `subscriptions`, `delta_notes`, `page_size` and `page_bytes` follow a reload; the rest are read once) and
/// who may connect.
struct Live {
    config: Arc<ServeConfig>,
    clients: Arc<Vec<AdmittedClient>>,
    /// `[auth]`: the JWT access tokens taken besides the clients' tokens.
    auth: Option<Arc<ResourceServer>>,
}

impl Live {
    /// Whether any client may be shown search mode: the search index is kept only then.
    fn searches(&self) -> bool {
        self.config.tools_mode == ToolsMode::Search
            || self
                .clients
                .iter()
                .any(|c| c.tools_mode() == Some(ToolsMode::Search))
    }
}

/// A new `[gateway]` table and `[[clients]]` list checked and ready to take the place of the
/// running ones ([`Gateway::admit`], then [`Gateway::apply`]).
pub struct Admitted {
    gateway: crate::config::GatewayConfig,
    clients: Vec<AdmittedClient>,
    auth: Option<crate::config::AuthConfig>,
}

impl Gateway {
    /// A gateway serving `roster` with the `[gateway]` settings, `[[clients]]` entries, the
    /// `[auth]` table, the skill catalog and (for `channels`, and to attribute what servers
    /// send during a request) the inbox; fails when a client's token cannot be read.
    pub fn new(
        roster: Roster,
        config: ServeConfig,
        clients: &[ClientEntry],
        auth: Option<&crate::config::AuthConfig>,
        skills: Arc<Skills>,
        inbox: Option<Arc<crate::inbox::Inbox>>,
    ) -> Result<Arc<Self>, ClientEntryError> {
        let tasks = Arc::new(Tasks::new(config.tasks.clone()));
        let gateway = Arc::new(Self {
            roster,
            attribution: inbox.as_ref().map(|inbox| inbox.attribution()),
            live: std::sync::RwLock::new(Live {
                config: Arc::new(config),
                clients: Arc::new(auth::admit_all(clients)?),
                auth: auth.map(ResourceServer::new),
            }),
            skills,
            inbox,
            stateless: Mutex::new(HashMap::new()),
            paused: caller::Paused::new(),
            tasks,
            served: Mutex::new(None),
            shutdown: CancellationToken::new(),
            reloader: std::sync::OnceLock::new(),
            fanout: std::sync::OnceLock::new(),
            ui: ui::Access::default(),
        });
        gateway
            .roster
            .set_tool_search(read(&gateway.live).searches());
        crate::metrics::watch_gateway(gateway.roster.metrics(), &gateway);
        Ok(gateway)
    }

    /// Who may use the dashboard.
    pub(crate) fn ui_access(&self) -> &ui::Access {
        &self.ui
    }

    /// The roster this gateway serves.
    pub fn roster(&self) -> &Roster {
        &self.roster
    }

    /// The tools clients are served now; rebuilt only when the servers' tools changed.
    pub(crate) fn served_tools(&self) -> Arc<ServedTools> {
        // Under the lock, so a caller holding an older copy cannot replace a newer one.
        let mut served = lock(&self.served);
        let known = served.as_ref().map(|current| current.version);
        let (version, changed) = self.roster.tools_since(known);
        if let (Some(current), None) = (served.as_ref(), &changed) {
            return current.clone();
        }
        let entries = changed.unwrap_or_default();
        let fresh = Arc::new(ServedTools::build(native::tools(self), version, entries));
        *served = Some(fresh.clone());
        fresh
    }

    /// Marks every server stale without dialling any; returns how many servers are
    /// configured (what `refresh_tools` and `roster refresh` report).
    pub(crate) fn refresh(&self) -> usize {
        self.roster.refresh();
        if let (Some(fanout), Ok(runtime)) =
            (self.fanout.get(), tokio::runtime::Handle::try_current())
        {
            let (stores, origin) = (fanout.stores.clone(), fanout.origin.clone());
            runtime.spawn(async move {
                let sent = stores.tell(REFRESH_CHANNEL, origin).await;
                if let Err(error) = sent {
                    tracing::warn!(%error, "the other replicas did not hear of this refresh");
                }
            });
        }
        self.roster.status().len()
    }

    /// The skill catalog served by the native tools and the skills extension.
    pub fn skills(&self) -> &Skills {
        &self.skills
    }

    /// Gives this gateway the reloader of its configuration file (`roster reload`, the status
    /// line); the first one set stays.
    pub fn set_reloader(&self, reloader: Arc<reload::Reloader>) {
        let _ = self.reloader.set(reloader);
    }

    /// The reloader of this gateway's configuration file, if it has one.
    pub fn reloader(&self) -> Option<&Arc<reload::Reloader>> {
        self.reloader.get()
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

    /// Shares this gateway with the other replicas of `[store]` (its sessions and inbox are
    /// shared where they are made: the HTTP front, `Inbox::open`): its tasks; a server's
    /// `list_changed` another replica recorded re-lists this replica's own copy of that server
    /// (debounced); a `refresh_tools` on any replica marks every replica's servers stale.
    /// Nothing to share unless `stores` are the ones replicas share.
    pub fn share(
        self: &Arc<Self>,
        stores: &crate::store::Stores,
    ) -> Result<(), crate::store::StoreError> {
        let Some(tasks) = stores.shared_tasks() else {
            return Ok(());
        };
        self.tasks.share(tasks)?;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Ok(());
        };
        if let Some(inbox) = &self.inbox {
            let pending = Arc::new(Mutex::new(std::collections::HashSet::<String>::new()));
            let roster = self.roster.clone();
            let debounce = self.roster.running_gateway().debounce;
            let rt = runtime.clone();
            inbox.on_remote_change(Arc::new(move |server, _method| {
                if !lock(&pending).insert(server.to_owned()) {
                    return;
                }
                let (roster, pending, server) = (roster.clone(), pending.clone(), server.to_owned());
                rt.spawn(async move {
                    tokio::time::sleep(debounce).await;
                    lock(&pending).remove(&server);
                    if let Err(error) = roster.relist(&server).await {
                        tracing::debug!(%server, %error, "re-list after another replica's list_changed failed");
                    }
                });
            }));
        }
        let origin = uuid::Uuid::new_v4().to_string();
        let weak = Arc::downgrade(self);
        let own = origin.clone();
        stores.follow(&[REFRESH_CHANNEL], move |_, payload| {
            if payload.is_empty() || payload == own {
                return;
            }
            if let Some(gateway) = weak.upgrade() {
                gateway.roster.refresh();
            }
        })?;
        let _ = self.fanout.set(Fanout {
            stores: stores.clone(),
            origin,
        });
        Ok(())
    }

    /// The `[gateway]` settings in force.
    pub fn config(&self) -> Arc<ServeConfig> {
        read(&self.live).config.clone()
    }

    fn clients(&self) -> Arc<Vec<AdmittedClient>> {
        read(&self.live).clients.clone()
    }

    /// Checks a reloaded configuration's `[[clients]]` (every token readable) without changing
    /// anything: a client that cannot be admitted fails the reload before any server is touched.
    pub fn admit(config: &crate::config::Config) -> Result<Admitted, ClientEntryError> {
        Ok(Admitted {
            gateway: config.gateway.clone(),
            clients: auth::admit_all(&config.clients)?,
            auth: config.auth.clone(),
        })
    }

    /// Puts a reloaded `[gateway]` table's live settings (`subscriptions`, `delta_notes`,
    /// `page_size`, `page_bytes`), `[[clients]]` (with their permissions) and `[auth]` in force: the next
    /// request is authenticated against the new tokens (a removed client's sessions end at their next request) and served with the
    /// new settings.
    pub fn apply(&self, admitted: Admitted) {
        let mut live = write(&self.live);
        let mut config = (*live.config).clone();
        config.pages = admitted.gateway.pages();
        config.subscriptions = admitted.gateway.subscriptions;
        config.delta_notes = admitted.gateway.delta_notes;
        config.tools_mode = admitted.gateway.tools_mode;
        config.always = Arc::new(admitted.gateway.always.clone());
        live.config = Arc::new(config);
        live.clients = Arc::new(admitted.clients);
        self.roster.set_tool_search(live.searches());
        // A table that did not change keeps its resource server, and with it the keys fetched.
        let same = live.auth.as_ref().map(|a| a.config()) == admitted.auth.as_ref();
        if !same {
            live.auth = admitted.auth.as_ref().map(ResourceServer::new);
        }
    }

    /// The `[auth]` resource server in force, if `[auth]` is configured.
    pub(crate) fn resource_server(&self) -> Option<Arc<ResourceServer>> {
        read(&self.live).auth.clone()
    }

    /// Cancelled when the gateway begins shutting down.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Whether HTTP requests must carry a bearer token (`[[clients]]` or `[auth]` configured).
    pub fn requires_token(&self) -> bool {
        let live = read(&self.live);
        !live.clients.is_empty() || live.auth.is_some()
    }

    /// The client a bearer token belongs to, if any.
    pub fn authenticate(&self, token: &str) -> Option<ClientIdentity> {
        auth::authenticate(&self.clients(), token)
    }

    /// Whether `who`'s tool results carry the change note: its `[[clients]]` entry's
    /// `delta_notes`, else `[gateway] delta_notes`.
    pub(crate) fn delta_notes(&self, who: &ClientIdentity) -> bool {
        let live = read(&self.live);
        auth::delta_notes(&live.clients, who, live.config.delta_notes)
    }

    /// How `who` is shown the servers' tools: its `[[clients]]` entry's `tools_mode` and
    /// `always`, else `[gateway]`'s.
    pub(crate) fn tool_view(&self, who: &ClientIdentity) -> auth::ToolView {
        let live = read(&self.live);
        let default = auth::ToolView {
            mode: live.config.tools_mode,
            always: live.config.always.clone(),
            own: false,
        };
        auth::tool_view(&live.clients, who, &default)
    }

    /// Who a request without a token is: the `[gateway] subscriptions` default.
    pub fn anonymous(&self) -> ClientIdentity {
        ClientIdentity {
            name: None,
            subscriptions: read(&self.live).config.subscriptions.clone(),
            permissions: Arc::default(),
        }
    }

    fn stateless_session(&self, who: &ClientIdentity) -> Arc<Session> {
        let key = who.name.clone().unwrap_or_default();
        let now = std::time::Instant::now();
        let mut sessions = lock(&self.stateless);
        if let Some((session, used)) = sessions.get_mut(&key) {
            *used = now;
            return session.clone();
        }
        if sessions.len() >= MAX_STATELESS_IDENTITIES {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(name, _)| name.clone());
            if let Some(oldest) = oldest {
                sessions.remove(&oldest);
            }
        }
        let session = self.roster.open_client_session();
        sessions.insert(key, (session.clone(), now));
        session
    }

    /// Begins shutting down: sessions stop, then the servers are stopped.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.tasks.shutdown();
        self.roster.shutdown_and_wait().await;
    }
}

/// What the metrics read of a gateway at each scrape.
impl crate::metrics::GatewaySource for Gateway {
    fn inbox(&self) -> Option<&crate::inbox::Inbox> {
        self.inbox.as_deref()
    }

    fn skills_by_availability(&self) -> (u64, u64) {
        let (mut available, mut unavailable) = (0u64, 0u64);
        for (_, availability) in self.skills.read().registry().iter() {
            match availability {
                roster_core::skills::Availability::Available => available += 1,
                _ => unavailable += 1,
            }
        }
        (available, unavailable)
    }

    fn stateless_sessions(&self) -> usize {
        lock(&self.stateless).len()
    }
}
