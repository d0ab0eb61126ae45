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
//!
//! This file holds [`Roster`] and its life: start, reload, sessions, status, restarts and
//! shutdown; `tools` its live tools (listing, search, routing, calls) and `offerings` the
//! servers' prompts, resources and completions.

use crate::sync::lock;
use std::sync::Arc;

use roster_core::{Delta, NamingError, ScheduleConfigError};
use serde_json::Value;

use crate::config::{Config, ConfigChanges};
use crate::servers::listing::Relisting;
use crate::servers::pinning::Pinning;
use crate::servers::runtime::{ReconcileHook, Runtime};
use crate::servers::{
    LogLevel, LogSink, NotificationSink, Notifications, RefreshHookError, RelistError, ServerLog,
    ServerStatus,
};
use crate::session::{Session, Turn};

mod offerings;
mod tools;

pub use tools::{CallError, HIT_DESCRIPTION_CHARS, ToolEntry, ToolHit};

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

/// Settings for [`Roster::start_with`].
#[derive(Clone)]
pub struct RosterOptions {
    /// Where every server notification is recorded (the inbox). Default: [`LogSink`].
    pub sink: Arc<dyn NotificationSink>,
    /// Called with `(server, delta)` after every non-empty delta (plug
    /// `SkillRegistry::refresh_all` in here, with [`Roster::tool_lookup`] as its lookup).
    pub on_reconcile: Option<ReconcileHook>,
    /// Where roster's state lives (see [`crate::store::Stores`]): tool pins and OAuth tokens
    /// (`roster serve` gives `[store]`'s, else `[gateway] state_dir`'s). `None`: nothing is
    /// kept beyond this roster ([`crate::store::Stores::in_memory`]).
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
            .unwrap_or_else(crate::store::Stores::in_memory);
        let rt = Runtime::new(
            config.gateway,
            &config.servers,
            &config.server_order,
            options.sink,
            options.on_reconcile,
            Pinning::new(stores.pins()?)?,
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

    /// The naming that runs (how `roster tools drift` names a waiting tool).
    pub(crate) fn naming(&self) -> roster_core::NamingConfig {
        lock(&self.rt.running).gateway.naming_config()
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
            Some(crate::servers::status::Transport::of(
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
