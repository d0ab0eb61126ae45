//! The runtime behind [`crate::Roster`]: the registry and schedule, one slot per server, the
//! shared listing path for tools and offerings, delta fan-out to sessions, log levels and
//! status. Each enabled server is started, its notifications wired, and its connection kept
//! by its task in [`super::supervisor`].
//!
//! A server's `list_changed` (tools, prompts or resources) is recorded on the connection's
//! reader: it marks the server stale in the core [`Schedule`] (a short lock, nothing dialled)
//! and nudges the server's [`RefreshHook`]. The next turn lists every stale server before it
//! answers; the hook's trailing edge lists a server only if it is still stale then, so the
//! debounce governs just the background re-list when no turn comes.
//!
//! Locks: `state` (registry + schedule) and the per-slot `std` mutexes are never held across an
//! `.await`. `Slot::listing` and `Slot::offerings_listing` (tokio mutexes) make one listing per
//! server in flight at a time; callers that only want a listing when one is due re-check inside
//! them, so concurrent turns share one listing instead of each taking their own.

use crate::sync::{lock, read, write};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::Duration;

use roster_core::{Delta, ListingState, Schedule, ToolRegistry};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::connection::Connection;
use super::event::ListKind;
use super::notifications::Notifications;
use super::offerings::{Offerings, RouteError, ServerOfferings};
use super::pinning::Pinning;

/// The inbox channel a server waiting for an OAuth login is recorded on.
pub const NEEDS_LOGIN_CHANNEL: &str = "auth";
/// The method of a needs-login entry in the inbox.
pub const NEEDS_LOGIN_METHOD: &str = "roster/needs_login";
use super::refresh::RefreshHook;
use super::relay::LogLevel;
use super::sink::NotificationSink;
use super::status::{ServerState, ServerStatus};
use super::stdio::ChildExit;
use super::watches::{ResourceWatch, ResourceWatches};
use crate::config::{GatewayConfig, ServerConfig};

/// How often a running roster looks for a person's pin decisions made by another process.
const PIN_DECISIONS_EVERY: Duration = Duration::from_millis(500);

/// Called with `(server, delta)` after every non-empty delta (a reconcile, or a server's tools
/// removed when it went down), once the delta is queued for the sessions. The skill catalog
/// plugs `SkillRegistry::refresh_all` in here, reading tools through
/// [`crate::Roster::tool_lookup`]. No roster lock is held while it runs.
pub type ReconcileHook = Arc<dyn Fn(&str, &Delta) + Send + Sync>;

/// Called with a server's name and its skills each time they change (an empty list when the
/// server went down or was removed).
pub type SkillsHook = Arc<dyn Fn(&str, &[super::skills::SyncedSkill]) + Send + Sync>;

#[derive(Debug)]
pub(super) struct Live {
    pub(super) state: ServerState,
    pub(super) protocol_version: Option<String>,
    pub(super) restarts: u64,
    pub(super) last_error: Option<String>,
    pub(super) logins_asked: u64,
}

/// Everything roster keeps about one configured server.
pub(crate) struct Slot {
    pub(crate) name: String,
    pub(crate) config: ServerConfig,
    pub(crate) notifications: Arc<Notifications>,
    pub(super) connection: Mutex<Option<Arc<Connection>>>,
    pub(super) live: Mutex<Live>,
    pub(super) listing: tokio::sync::Mutex<()>,
    pub(super) offerings_listing: tokio::sync::Mutex<()>,
    /// The offerings whose `list_changed` came since the last offerings listing began: the
    /// next one lists only those. Taken and marked under the `state` lock, with the ticket.
    pub(super) stale_offerings: Mutex<BTreeSet<ListKind>>,
    /// A background listing of this server runs (a turn's revalidation): turns start no other.
    pub(super) revalidating: AtomicBool,
    refresh: Mutex<Option<RefreshHook>>,
    pub(crate) first_attempt: watch::Sender<bool>,
    /// Cancelled when this server is stopped: at shutdown (a child of roster's token), or
    /// when a reload removes or replaces it.
    pub(super) stop: CancellationToken,
}

impl Slot {
    fn new(name: &str, config: &ServerConfig, shutdown: &CancellationToken) -> Arc<Slot> {
        let (first_attempt, _) = watch::channel(!config.enabled);
        Arc::new(Slot {
            name: name.to_owned(),
            config: config.clone(),
            notifications: Notifications::new(),
            connection: Mutex::new(None),
            live: Mutex::new(Live {
                state: if config.enabled {
                    ServerState::Connecting
                } else {
                    ServerState::Disabled
                },
                protocol_version: None,
                restarts: 0,
                last_error: None,
                logins_asked: 0,
            }),
            listing: tokio::sync::Mutex::new(()),
            offerings_listing: tokio::sync::Mutex::new(()),
            stale_offerings: Mutex::new(BTreeSet::new()),
            revalidating: AtomicBool::new(false),
            refresh: Mutex::new(None),
            first_attempt,
            stop: shutdown.child_token(),
        })
    }

    pub(crate) fn connection(&self) -> Option<Arc<Connection>> {
        lock(&self.connection).clone()
    }

    pub(super) fn set_state(&self, state: ServerState) {
        lock(&self.live).state = state;
    }

    pub(crate) fn refresh_hook(&self) -> Option<RefreshHook> {
        lock(&self.refresh).clone()
    }

    pub(super) fn set_refresh_hook(&self, hook: RefreshHook) {
        *lock(&self.refresh) = Some(hook);
    }
}

/// How often the client-visible prompts and resources have changed; a watcher compares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OfferingsGeneration {
    /// Changes of the prompt set.
    pub prompts: u64,
    /// Changes of the resource or resource template set.
    pub resources: u64,
}

pub(crate) struct State {
    pub(crate) registry: ToolRegistry,
    pub(crate) schedule: Schedule,
}

/// What the runtime tells a client session: each delta, to queue for the session's next turn.
pub(crate) trait DeltaListener: Send + Sync {
    /// Queues `delta`; `join`: it is a server's first listing, news only to a session whose
    /// client listed the tools already.
    fn queue(&self, delta: Delta, join: bool);
}

pub(crate) struct Runtime {
    pub(crate) gateway: GatewayConfig,
    pub(crate) state: Mutex<State>,
    /// Every configured server, by name; a reload adds and removes entries.
    slots: RwLock<BTreeMap<String, Arc<Slot>>>,
    pub(crate) offerings: Mutex<Offerings>,
    /// Bumped per kind when the client-visible prompts or resources change.
    pub(crate) offerings_changed: watch::Sender<OfferingsGeneration>,
    /// Resources subscribed at the servers for client sessions.
    pub(crate) resource_watches: Arc<ResourceWatches>,
    /// Every open session, to queue each delta for its next turn.
    sessions: Mutex<Vec<Weak<dyn DeltaListener>>>,
    pub(super) sink: Arc<dyn NotificationSink>,
    reconcile_hook: RwLock<Option<ReconcileHook>>,
    /// Called with a server's skills each time they change (the skill catalog).
    pub(super) skills_hook: RwLock<Option<SkillsHook>>,
    /// Held while the skills hook runs (see [`Runtime::set_offerings`]).
    pub(super) skills_handover: Mutex<()>,
    /// Pins, reviews and the tools withheld now.
    pub(crate) pinning: Pinning,
    /// The OAuth servers' tokens (from the store's seam).
    pub(crate) tokens: Arc<dyn crate::store::Tokens>,
    /// The configuration that runs: what a reload compares a new one with.
    pub(crate) running: Mutex<crate::config::Config>,
    /// The most verbose log level any client asked for; sent to every initialize-era server
    /// that advertises `logging`, at each connection.
    pub(crate) log_level: Mutex<Option<LogLevel>>,
    /// Log messages servers sent while no request was in flight to them.
    pub(crate) server_logs: broadcast::Sender<ServerLog>,
    pub(crate) shutdown: CancellationToken,
    pub(crate) metrics: crate::metrics::Metrics,
    /// The last [`RECENT_CHANGES`] non-empty deltas, oldest first, for people (the dashboard).
    recent_changes: Mutex<std::collections::VecDeque<Change>>,
}

/// How many deltas [`Runtime::recent_changes`] keeps: a dashboard's page of history, bounded
/// whatever a server does.
pub const RECENT_CHANGES: usize = 200;

/// One server's tools changing, as people read it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Change {
    /// The server.
    pub server: String,
    /// When roster published it, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What changed (exposed names, with reasons for the ones a person set rules for).
    pub delta: Delta,
}

/// A server's log message sent outside any request (`notifications/message` params).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerLog {
    /// The server's configured name.
    pub server: String,
    /// The notification's params (`level`, `logger`, `data`).
    pub params: serde_json::Value,
}

impl Runtime {
    pub(crate) fn new(
        gateway: GatewayConfig,
        servers: &BTreeMap<String, ServerConfig>,
        order: &[String],
        sink: Arc<dyn NotificationSink>,
        reconcile_hook: Option<ReconcileHook>,
        pinning: Pinning,
        tokens: Arc<dyn crate::store::Tokens>,
    ) -> Arc<Runtime> {
        // Config order first; any server the order misses (a hand-built Config) by name.
        let mut ordered: Vec<&String> = order.iter().filter(|n| servers.contains_key(*n)).collect();
        ordered.extend(servers.keys().filter(|n| !order.contains(n)));
        ordered.dedup();
        let enabled: Vec<String> = ordered
            .into_iter()
            .filter(|name| servers.get(*name).is_some_and(|c| c.enabled))
            .cloned()
            .collect();
        let registry = ToolRegistry::new(enabled.clone(), gateway.naming_config());
        let offerings = Offerings::new(enabled.clone(), gateway.naming_config());
        let mut schedule = Schedule::new(enabled, gateway.schedule_config());
        for (name, config) in servers {
            if let Some(server) = schedule.server_mut(name) {
                server.set_min_ttl(config.min_ttl);
            }
        }
        let shutdown = CancellationToken::new();
        let slots = servers
            .iter()
            .map(|(name, config)| (name.clone(), Slot::new(name, config, &shutdown)))
            .collect();
        let metrics = crate::metrics::Metrics::new(&gateway.metrics);
        Arc::new(Runtime {
            metrics,
            gateway,
            state: Mutex::new(State { registry, schedule }),
            slots: RwLock::new(slots),
            offerings: Mutex::new(offerings),
            offerings_changed: watch::channel(OfferingsGeneration::default()).0,
            resource_watches: Arc::default(),
            sessions: Mutex::new(Vec::new()),
            sink,
            reconcile_hook: RwLock::new(reconcile_hook),
            skills_hook: RwLock::new(None),
            skills_handover: Mutex::new(()),
            pinning,
            tokens,
            running: Mutex::new(crate::config::Config::with_servers(servers.clone())),
            log_level: Mutex::new(None),
            server_logs: broadcast::channel(64).0,
            shutdown,
            recent_changes: Mutex::new(std::collections::VecDeque::new()),
        })
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The recent deltas, newest first (at most [`RECENT_CHANGES`]).
    pub(crate) fn recent_changes(&self) -> Vec<Change> {
        lock(&self.recent_changes).iter().rev().cloned().collect()
    }

    /// `hook` gets a server's skills each time they change, and once now for each server
    /// listed already.
    pub(crate) fn set_skills_hook(&self, hook: SkillsHook) {
        *write(&self.skills_hook) = Some(hook.clone());
        let _one_at_a_time = lock(&self.skills_handover);
        let listed: Vec<(String, Vec<super::skills::SyncedSkill>)> = lock(&self.offerings)
            .skills()
            .map(|(server, skills)| (server.to_owned(), skills.to_vec()))
            .collect();
        for (server, skills) in listed {
            hook(&server, &skills);
        }
    }

    pub(crate) fn set_reconcile_hook(&self, hook: Option<ReconcileHook>) {
        *write(&self.reconcile_hook) = hook;
    }

    /// The server called `name`, if one is configured.
    pub(crate) fn slot(&self, name: &str) -> Option<Arc<Slot>> {
        read(&self.slots).get(name).cloned()
    }

    /// Every configured server, by name.
    pub(crate) fn slots(&self) -> Vec<Arc<Slot>> {
        read(&self.slots).values().cloned().collect()
    }

    /// The configured servers' names.
    pub(crate) fn server_names(&self) -> Vec<String> {
        read(&self.slots).keys().cloned().collect()
    }

    /// Makes the slot of a server a reload added (or the new entry of one it changed): listed,
    /// named and scheduled after the servers configured before it. Its supervisor is started
    /// apart ([`Runtime::add_server`]).
    pub(super) fn add_slot(&self, name: &str, config: &ServerConfig) -> Arc<Slot> {
        let slot = Slot::new(name, config, &self.shutdown);
        if config.enabled {
            let mut state = self.state();
            state.schedule.add_server(name);
            if let Some(server) = state.schedule.server_mut(name) {
                server.set_min_ttl(config.min_ttl);
            }
            drop(state);
            lock(&self.offerings).add_server(name);
        }
        write(&self.slots).insert(name.to_owned(), slot.clone());
        slot
    }

    /// Stops a server a reload removed (`gone`), or the old entry of one it changed: its
    /// supervisor ends, its connection closes (a stdio server's process group is ended), and
    /// its tools, prompts and resources leave as a delta like a crash's. A server that is gone
    /// counts as listed with no tools, so a skill that needs one of its tools is unavailable
    /// (not "cannot say yet", as while a server reconnects).
    pub(crate) fn remove_server(&self, name: &str, gone: bool) {
        let Some(slot) = write(&self.slots).remove(name) else {
            return;
        };
        slot.stop.cancel();
        if let Some(hook) = slot.refresh_hook() {
            hook.cancel();
        }
        if let Some(connection) = lock(&slot.connection).take() {
            connection.close();
        }
        let delta = {
            let mut state = self.state();
            state.schedule.remove_server(name);
            if gone {
                state.registry.reconcile(name, Vec::new())
            } else {
                state.registry.remove_server(name)
            }
        };
        self.pinning.forget_server(name);
        self.publish(name, &delta);
        if gone {
            // Its series leave the page; a server reconnected under the same name keeps them.
            self.metrics.forget_server(name);
        }
        self.set_offerings(name, ServerOfferings::default());
    }

    /// Follows a person's pin decisions while no turn comes: reads the store's version every
    /// [`PIN_DECISIONS_EVERY`] (one small query) until roster stops.
    pub(crate) fn watch_pin_decisions(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let stop = self.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(PIN_DECISIONS_EVERY) => {}
                }
                let Some(rt) = weak.upgrade() else { return };
                rt.follow_pin_decisions();
            }
        });
    }

    /// Waits until every enabled server finished its first connection attempt, or `limit`.
    pub(crate) async fn wait_first_attempts(&self, limit: Duration) {
        let waits = self.slots().into_iter().map(|slot| {
            let mut rx = slot.first_attempt.subscribe();
            async move {
                let _ = rx.wait_for(|done| *done).await;
            }
        });
        let _ = tokio::time::timeout(limit, futures::future::join_all(waits)).await;
    }

    /// Lowers the log level servers are asked for to `level` when that is more verbose than
    /// what any client asked before; returns whether it changed.
    pub(crate) fn lower_log_level(&self, level: LogLevel) -> bool {
        let mut current = lock(&self.log_level);
        if current.is_some_and(|c| c <= level) {
            return false;
        }
        *current = Some(level);
        true
    }

    /// A `list_changed` from `server`: that list of it is stale from now on. Takes only short
    /// locks; safe on a connection's reader.
    pub(super) fn mark_stale(&self, server: &str, list: ListKind) {
        let mut state = self.state();
        let Some(schedule) = state.schedule.server_mut(server) else {
            return;
        };
        match list {
            ListKind::Tools => schedule.mark_stale(),
            ListKind::Prompts | ListKind::Resources => {
                schedule.mark_offerings_stale();
                if let Some(slot) = self.slot(server) {
                    lock(&slot.stale_offerings).insert(list);
                }
            }
        }
    }

    /// Queues every delta from now on for `session` (while it lives).
    pub(crate) fn add_session(&self, session: Weak<dyn DeltaListener>) {
        let mut sessions = lock(&self.sessions);
        sessions.retain(|s| s.strong_count() > 0);
        sessions.push(session);
    }

    pub(super) fn publish(&self, server: &str, delta: &Delta) {
        self.publish_as(server, delta, false);
    }

    /// [`Runtime::publish`]; `join`: the delta of the server's first listing (see
    /// [`DeltaListener::queue`]).
    pub(super) fn publish_as(&self, server: &str, delta: &Delta, join: bool) {
        if delta.is_empty() {
            return;
        }
        self.metrics.delta(server, delta);
        {
            let mut recent = lock(&self.recent_changes);
            if recent.len() == RECENT_CHANGES {
                recent.pop_front();
            }
            recent.push_back(Change {
                server: server.to_owned(),
                at_ms: crate::store::now_ms(),
                delta: delta.clone(),
            });
        }
        tracing::info!(
            server,
            added = delta.added.len(),
            changed = delta.changed.len(),
            removed = delta.removed.len(),
            "tools changed"
        );
        lock(&self.sessions).retain(|weak| match weak.upgrade() {
            Some(session) => {
                session.queue(delta.clone(), join);
                true
            }
            None => false,
        });
        let hook = read(&self.reconcile_hook).clone();
        if let Some(hook) = hook {
            hook(server, delta);
        }
    }

    pub(crate) fn status(&self) -> Vec<ServerStatus> {
        let skills: BTreeMap<String, usize> = lock(&self.offerings)
            .skills()
            .map(|(server, skills)| (server.to_owned(), skills.len()))
            .collect();
        let state = self.state();
        let counts: BTreeMap<&str, usize> = state.registry.tool_counts().into_iter().collect();
        self.slots()
            .into_iter()
            .map(|slot| {
                let live = lock(&slot.live);
                let listing = state.schedule.server(&slot.name).map(|s| s.state().clone());
                let connection = slot.connection();
                let mut server_state = live.state;
                if matches!(listing, Some(ListingState::CrashLoop { .. })) && connection.is_none() {
                    server_state = ServerState::CrashLoop;
                }
                ServerStatus {
                    name: slot.name.clone(),
                    state: server_state,
                    starting: slot.config.enabled && !*slot.first_attempt.borrow(),
                    listing,
                    tools: counts.get(slot.name.as_str()).copied().unwrap_or(0),
                    skills: skills.get(&slot.name).copied().unwrap_or(0),
                    protocol_version: live.protocol_version.clone(),
                    restarts: live.restarts,
                    last_error: live.last_error.clone(),
                    logins_asked: live.logins_asked,
                    pid: connection.and_then(|c| c.pid()),
                    refresh_count: slot.refresh_hook().map_or(0, |h| h.refresh_count()),
                    refresh_pending: slot.refresh_hook().is_some_and(|h| h.is_pending()),
                }
            })
            .collect()
    }

    /// Stops every server; returns, for each stdio server, a receiver that turns `Exited`
    /// once its process is gone (see [`Runtime::stop_and_wait`]).
    pub(crate) fn stop(&self) -> Vec<watch::Receiver<ChildExit>> {
        self.shutdown.cancel();
        let mut exits = Vec::new();
        for slot in self.slots() {
            if let Some(hook) = slot.refresh_hook() {
                hook.cancel();
            }
            if let Some(connection) = lock(&slot.connection).take() {
                exits.extend(connection.child_exit());
                connection.close();
            }
        }
        exits
    }

    /// [`Runtime::stop`], then waits (at most `kill_grace` and a second) until every stdio
    /// server's process is gone: the waiter that sends SIGKILL after the grace period, and to
    /// the group of a server that ended, runs on this runtime, which ends when roster returns.
    pub(crate) async fn stop_and_wait(&self) {
        let exits = self.stop();
        let limit = self.gateway.server_limits.kill_grace + Duration::from_secs(1);
        let gone = exits.into_iter().map(|mut exit| async move {
            let _ = exit.wait_for(|e| matches!(e, ChildExit::Exited(_))).await;
        });
        let _ = tokio::time::timeout(limit, futures::future::join_all(gone)).await;
    }
}

/// What the runtime knows for resource watches: which server owns a URI, and its connection.
impl ResourceWatches {
    /// The server that owns `uri`, if it is connected and takes watches
    /// (`resources.subscribe`).
    pub(crate) fn watchable_at(
        rt: &Runtime,
        uri: &str,
    ) -> Result<(String, Arc<Connection>), RouteError> {
        let server = lock(&rt.offerings)
            .resource_owner(uri)
            .ok_or_else(|| RouteError::UnknownResource(uri.to_owned()))?;
        let connection = rt
            .slot(&server)
            .and_then(|slot| slot.connection())
            .ok_or_else(|| RouteError::Unavailable(server.clone()))?;
        if !connection.advertises_subscribe() {
            return Err(RouteError::NotSubscribable {
                server,
                uri: uri.to_owned(),
            });
        }
        Ok((server, connection))
    }

    /// Watches `uri`: at its server, unless some session already watches it.
    pub(crate) async fn watch(rt: &Runtime, uri: &str) -> Result<ResourceWatch, RouteError> {
        rt.resource_watches
            .hold(uri, || Self::watchable_at(rt, uri))
            .await
    }
}
