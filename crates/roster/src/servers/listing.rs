//! Listing one server: its tools ([`Runtime::relist`]: pins, reconcile, the delta published) and
//! its offerings ([`Runtime::list_offerings`]: prompts, resources, templates and the skills
//! among them), one listing of each kind per server at a time; and what a failed listing
//! leaves (the schedule's backoff, a wait for a login).
//!
//! Callers that only want a listing when one is due say so with [`Relisting`]: the check is
//! made inside the server's listing lock, so concurrent turns, the debounce and a background
//! revalidation share one listing instead of each taking their own.

use crate::sync::{lock, read};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use roster_core::schedule::effective_ttl;
use roster_core::{Delta, Listing, ListingState, ListingTicket};

use super::connection::Connection;
use super::event::ListKind;
use super::offerings::{Changed, ServerOfferings};
use super::pinning::{DRIFT_CHANNEL, DRIFT_METHOD};
use super::runtime::{NEEDS_LOGIN_CHANNEL, NEEDS_LOGIN_METHOD, Runtime, Slot};
use super::status::ServerState;

/// When [`Runtime::relist`] and [`Runtime::list_offerings`] list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relisting {
    /// Always (a fresh connection, [`crate::Roster::relist`]).
    Always,
    /// Only if the schedule says the server is due and no listing that answers what the turn
    /// knew at its start finished since (a turn: concurrent turns share one listing).
    IfDue {
        /// When the turn started.
        turn_started: Instant,
        /// The server's tools changes the turn knew of at its start.
        tools: ListingTicket,
        /// The server's offerings changes the turn knew of at its start.
        offerings: ListingTicket,
    },
    /// Only if a `list_changed` is still unanswered (the debounce's trailing edge: a turn may
    /// have listed the server already).
    IfStale,
}

/// Why a re-list did not happen.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RelistError {
    /// The server has no live connection (it is starting, restarting or disabled).
    #[error("server `{0}` is not connected")]
    NotConnected(String),
    /// `tools/list` failed; the server is retried at the next turn its backoff allows.
    #[error("listing server `{server}` failed: {error}")]
    Failed {
        /// The server.
        server: String,
        /// What failed.
        error: String,
    },
    /// No server of that name is configured.
    #[error("no server named `{0}` is configured")]
    Unknown(String),
}

impl Runtime {
    /// Lists the prompts, resources and resource templates a server advertises and publishes
    /// what changed: after a `list_changed`, only the lists it named (resources and templates
    /// go together); on a new connection, or stale for no named list, all of them. A kind
    /// whose listing fails keeps what it had. One at a time per server; `when` as for
    /// [`Runtime::relist`].
    pub(crate) async fn list_offerings(&self, slot: &Slot, when: Relisting) {
        let _one_at_a_time = slot.offerings_listing.lock().await;
        let (ticket, lists) = {
            let state = self.state();
            let Some(schedule) = state.schedule.server(&slot.name) else {
                return;
            };
            let skip = match when {
                Relisting::Always => false,
                Relisting::IfDue { offerings, .. } => schedule.offerings_answer(offerings),
                Relisting::IfStale => !schedule.offerings_stale(),
            };
            if skip {
                return;
            }
            let named = std::mem::take(&mut *lock(&slot.stale_offerings));
            (schedule.offerings_ticket(), offerings_to_list(when, named))
        };
        let Some(connection) = slot.connection() else {
            return;
        };
        let mut offerings = lock(&self.offerings)
            .by_server(&slot.name)
            .cloned()
            .unwrap_or_default();
        let kinds: [(ListKind, &str, &str, &str, &mut Vec<serde_json::Value>); 3] = [
            (
                ListKind::Prompts,
                "prompts",
                "prompts/list",
                "prompts",
                &mut offerings.prompts,
            ),
            (
                ListKind::Resources,
                "resources",
                "resources/list",
                "resources",
                &mut offerings.resources,
            ),
            (
                ListKind::Resources,
                "resources",
                "resources/templates/list",
                "resourceTemplates",
                &mut offerings.templates,
            ),
        ];
        let mut resources_listed = false;
        for (list, capability, method, field, items) in kinds {
            if !lists.contains(&list) {
                continue;
            }
            if !connection.advertises(capability) {
                items.clear();
                continue;
            }
            match connection.list_all(method, field).await {
                Ok(listed) => {
                    resources_listed |= method == "resources/list";
                    *items = listed;
                }
                Err(error) => tracing::warn!(server = %slot.name, method, %error, "listing failed"),
            }
        }
        if lists.contains(&ListKind::Resources) {
            self.list_skills(slot, &connection, &mut offerings, resources_listed)
                .await;
        }
        // As for tools: a listing that finished as the server died brings nothing back.
        let current = || {
            slot.connection()
                .is_some_and(|c| Arc::ptr_eq(&c, &connection) && !c.is_closed())
        };
        if !current() {
            return;
        }
        self.set_offerings_if(&slot.name, offerings, current);
        if let Some(schedule) = self.state().schedule.server_mut(&slot.name) {
            schedule.offerings_listed(ticket);
        }
    }

    /// A server's skills, listed with its resources: by `skills/list` when it declares the
    /// extension, else from the `skill://` resources it just listed (`resources_listed`; when
    /// that listing failed the skills stay as they were). roster serves the `skill://` scheme
    /// itself, so a server's own `skill://` resources never pass through as they are.
    async fn list_skills(
        &self,
        slot: &Slot,
        connection: &Connection,
        offerings: &mut ServerOfferings,
        resources_listed: bool,
    ) {
        let sync = &slot.config.skills;
        let by_extension = connection.declares_skills();
        if !sync.enabled || !(by_extension || connection.advertises("resources")) {
            offerings.skills.clear();
        } else if by_extension || resources_listed {
            match super::skills::list_skills(
                connection,
                sync,
                by_extension,
                &offerings.resources,
                &offerings.skills,
            )
            .await
            {
                Ok(skills) => offerings.skills = skills,
                Err(error) => {
                    tracing::warn!(server = %slot.name, %error, "listing skills failed")
                }
            }
        }
        offerings.resources.retain(|r| {
            !r.get("uri")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|uri| uri.starts_with("skill://"))
        });
    }

    /// Replaces one server's offerings and tells whoever follows them: clients (a
    /// `list_changed` per kind that changed) and, when its skills changed, the skill catalog.
    pub(crate) fn set_offerings(&self, server: &str, offerings: ServerOfferings) {
        self.set_offerings_if(server, offerings, || true);
    }

    /// [`Runtime::set_offerings`] if `still` holds when the offerings are taken (checked under
    /// their lock: a listing that finished as its connection died sets nothing).
    fn set_offerings_if(
        &self,
        server: &str,
        offerings: ServerOfferings,
        still: impl FnOnce() -> bool,
    ) {
        let changed = {
            let mut all = lock(&self.offerings);
            if !still() {
                return;
            }
            all.set(server, offerings)
        };
        if changed.skills
            && let Some(hook) = read(&self.skills_hook).clone()
        {
            // One at a time, each with the skills as they are then: whichever runs last
            // hands over the latest.
            let _one_at_a_time = lock(&self.skills_handover);
            let latest = lock(&self.offerings)
                .by_server(server)
                .map(|o| o.skills.clone())
                .unwrap_or_default();
            hook(server, &latest);
        }
        self.publish_offerings(changed);
    }

    pub(crate) fn publish_offerings(&self, changed: Changed) {
        // A server's skills are `skill://` resources to clients.
        let resources = changed.resources || changed.skills;
        if changed.prompts || resources {
            self.offerings_changed.send_modify(|g| {
                g.prompts += u64::from(changed.prompts);
                g.resources += u64::from(resources);
            });
        }
    }

    /// Takes one server's listing and reconciles it. One listing per server at a time.
    pub(crate) async fn relist(&self, slot: &Slot, when: Relisting) -> Result<Delta, RelistError> {
        Ok(self.relist_if(slot, when).await?.unwrap_or_default())
    }

    /// [`Runtime::relist`], saying whether a listing was taken: `None` when `when` found none
    /// due.
    pub(crate) async fn relist_if(
        &self,
        slot: &Slot,
        when: Relisting,
    ) -> Result<Option<Delta>, RelistError> {
        let _one_at_a_time = slot.listing.lock().await;
        let ticket = {
            let state = self.state();
            // Only enabled servers are scheduled; a disabled one is never connected.
            let Some(schedule) = state.schedule.server(&slot.name) else {
                return Err(RelistError::NotConnected(slot.name.clone()));
            };
            let skip = match when {
                Relisting::Always => false,
                Relisting::IfDue {
                    turn_started,
                    tools,
                    ..
                } => {
                    // A listing that finished while this turn waited for the lock is this
                    // turn's listing too (even when a ttlMs of 0 makes the server due again at
                    // once), provided it started after every change the turn knew of.
                    let fresh = schedule.answers(tools)
                        && schedule.last_listed().is_some_and(|at| at >= turn_started);
                    fresh || !schedule.needs_listing(Instant::now())
                }
                Relisting::IfStale => !matches!(schedule.state(), ListingState::Stale { .. }),
            };
            if skip {
                return Ok(None);
            }
            // Taken before the request goes out: a list_changed read after this is not
            // answered by this listing, and leaves the server stale.
            schedule.listing_ticket()
        };
        let Some(connection) = slot.connection() else {
            return Err(RelistError::NotConnected(slot.name.clone()));
        };
        let started = self.metrics.started();
        let listed = connection.list_tools().await;
        self.metrics.listing(&slot.name, started, listed.is_ok());
        match listed {
            Ok(listing) => {
                // Fingerprints are computed here, outside the lock; the copies the reconcile
                // does not keep are freed after the lock is released.
                let permitted: Vec<_> = listing
                    .tools
                    .into_iter()
                    .filter(|t| slot.config.tools.permits(&t.name))
                    .collect();
                // Pins before the registry: a withheld definition never reaches it.
                let gated = self.pinning.gate(&slot.name, &slot.config, permitted);
                let tools: Listing = gated.tools.into_iter().collect();
                let (delta, superseded, join) = {
                    let mut state = self.state();
                    // Checked under the state lock: the death path takes the connection before
                    // it removes the server's tools under this lock, so a listing that
                    // completed as the server died can never bring a dead server's tools back.
                    let current = slot
                        .connection()
                        .is_some_and(|c| Arc::ptr_eq(&c, &connection) && !c.is_closed());
                    if !current {
                        return Err(RelistError::NotConnected(slot.name.clone()));
                    }
                    // The server joins: no listing of it was ever taken.
                    let join = state
                        .schedule
                        .server(&slot.name)
                        .is_some_and(|s| s.last_listed().is_none());
                    if let Some(schedule) = state.schedule.server_mut(&slot.name) {
                        let announces = connection.negotiated().advertises_list_changed;
                        let ttl = effective_ttl(listing.ttl, announces);
                        schedule.listed_with(ticket, Instant::now(), ttl);
                    }
                    let withheld =
                        self.pinning
                            .set_withheld(&slot.name, &gated.withheld, &state.registry);
                    let (mut delta, superseded) =
                        state.registry.reconcile_listing(&slot.name, tools);
                    super::pinning::explain(
                        &mut delta,
                        &slot.name,
                        &gated.flagged,
                        &withheld,
                        &state.registry,
                    );
                    (delta, superseded, join)
                };
                drop(superseded);
                for params in gated.entries {
                    self.sink.record(DRIFT_CHANNEL, DRIFT_METHOD, params, false);
                }
                self.publish_as(&slot.name, &delta, join);
                crate::memory::release_freed_soon();
                Ok(Some(delta))
            }
            Err(super::RequestError::Unauthorized) if slot.config.oauth.is_some() => {
                // Taken without a token (some servers let `initialize` through), refused now.
                let error = self.refused_for_a_login(slot, &connection, "listing");
                Err(RelistError::Failed {
                    server: slot.name.clone(),
                    error,
                })
            }
            Err(error) => {
                let closed = matches!(error, super::RequestError::Closed) || connection.is_closed();
                // Another request on this connection was refused for want of a login, which
                // ends the connection: this one is abandoned with it, and the server waits for
                // the login (recording a failure would hide that it does).
                let refused = lock(&slot.live).state == ServerState::NeedsLogin;
                let error = error.to_string();
                if closed || refused {
                    // The server died under the listing: the supervisor records that crash
                    // once; counting it here too would reach crash-loop twice as fast.
                    tracing::info!(server = %slot.name, %error, "listing ended with the connection");
                    return Err(RelistError::NotConnected(slot.name.clone()));
                }
                tracing::warn!(server = %slot.name, %error, "listing failed");
                self.record_failure(slot, &error);
                // The connection itself is fine; keep showing it as connected.
                if slot.connection().is_some_and(|c| !c.is_closed()) {
                    slot.set_state(ServerState::Connected);
                }
                Err(RelistError::Failed {
                    server: slot.name.clone(),
                    error,
                })
            }
        }
    }

    /// Lists again, at the next turn or now in the background, the servers whose pins a
    /// person decided on in another process (`roster tools approve`/`reject`).
    pub(crate) fn follow_pin_decisions(self: &Arc<Self>) {
        for server in self.pinning.decisions() {
            let Some(slot) = self.slot(&server) else {
                continue;
            };
            self.mark_stale(&server, ListKind::Tools);
            let rt = self.clone();
            tokio::spawn(async move {
                let _ = rt.relist(&slot, Relisting::IfStale).await;
            });
        }
    }

    /// `connection` of an `auth = "oauth"` server had a request refused for want of a token
    /// (401, and no refresh helped: the token was revoked, or the server let the handshake
    /// through without one): the server waits for a login, as when the handshake is refused.
    /// The connection ends; the supervisor sees that and waits for the login. Returns the
    /// error, naming the login to run.
    pub(crate) fn refused_for_a_login(
        &self,
        slot: &Slot,
        connection: &Connection,
        what: &str,
    ) -> String {
        let error = super::ConnectError::NeedsLogin {
            server: slot.name.clone(),
            challenge: None,
        }
        .to_string();
        tracing::warn!(server = %slot.name, %error, "{what} refused; waiting for a login");
        self.record_needs_login(slot, &error);
        connection.close();
        error
    }

    /// `slot` waits for a person's `roster auth login`: shown as `needs-login` and, once per
    /// wait, told in the inbox (on the [`NEEDS_LOGIN_CHANNEL`]); every refusal counts in
    /// `logins_asked`.
    pub(super) fn record_needs_login(&self, slot: &Slot, error: &str) {
        let mut live = lock(&slot.live);
        live.last_error = Some(error.to_owned());
        live.logins_asked += 1;
        if live.state == ServerState::NeedsLogin {
            return;
        }
        live.state = ServerState::NeedsLogin;
        drop(live);
        self.sink.record(
            NEEDS_LOGIN_CHANNEL,
            NEEDS_LOGIN_METHOD,
            serde_json::json!({
                "server": slot.name,
                "message": error,
                "login": format!("roster auth login {}", slot.name),
            }),
            false,
        );
    }

    pub(super) fn record_failure(&self, slot: &Slot, error: &str) {
        let crash_loop = {
            let mut state = self.state();
            match state.schedule.server_mut(&slot.name) {
                Some(schedule) => {
                    schedule.failed(Instant::now(), error);
                    matches!(schedule.state(), ListingState::CrashLoop { .. })
                }
                None => false,
            }
        };
        let mut live = lock(&slot.live);
        live.last_error = Some(error.to_owned());
        live.state = if crash_loop {
            ServerState::CrashLoop
        } else {
            ServerState::Disconnected
        };
    }
}

/// The offerings lists a listing takes: those a `list_changed` named since the last one, or
/// all of them for a new connection (or when stale for no named list).
fn offerings_to_list(when: Relisting, named: BTreeSet<ListKind>) -> BTreeSet<ListKind> {
    if when == Relisting::Always || named.is_empty() {
        BTreeSet::from([ListKind::Prompts, ListKind::Resources])
    } else {
        named
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, ServerConfig};
    use crate::servers::LogSink;
    use crate::servers::pinning::Pinning;

    #[test]
    fn a_list_changed_names_only_its_own_list() {
        let mut config = Config::with_servers(Default::default());
        config
            .servers
            .insert("s".into(), ServerConfig::stdio("true", Vec::new()));
        let rt = Runtime::new(
            config.gateway,
            &config.servers,
            &["s".to_owned()],
            Arc::new(LogSink),
            None,
            Pinning::in_memory(),
            crate::store::Stores::in_memory().tokens(),
        );
        let slot = rt.slot("s").expect("slot");
        rt.mark_stale("s", ListKind::Tools);
        assert!(lock(&slot.stale_offerings).is_empty());
        assert!(
            !rt.state()
                .schedule
                .server("s")
                .expect("s")
                .offerings_stale()
        );
        rt.mark_stale("s", ListKind::Prompts);
        assert!(
            rt.state()
                .schedule
                .server("s")
                .expect("s")
                .offerings_stale()
        );
        let named = std::mem::take(&mut *lock(&slot.stale_offerings));
        assert_eq!(named, BTreeSet::from([ListKind::Prompts]));
        assert_eq!(
            offerings_to_list(Relisting::IfStale, named.clone()),
            BTreeSet::from([ListKind::Prompts])
        );
        let all = BTreeSet::from([ListKind::Prompts, ListKind::Resources]);
        assert_eq!(offerings_to_list(Relisting::Always, named), all);
        assert_eq!(offerings_to_list(Relisting::IfStale, BTreeSet::new()), all);
    }
}
