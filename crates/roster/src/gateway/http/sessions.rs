//! Initialize-era HTTP sessions bound to the client identity that created them, and bounded:
//! in total, per identity, and by an idle timeout.
//!
//! rmcp's `LocalSessionManager` keeps the sessions; [`BoundSessions`] wraps it to learn when
//! each one ends (a DELETE, its idle timeout, or its worker stopping), so the owner record and
//! the counts go with it. The owner is recorded by the HTTP front once `initialize` has been
//! answered with the new `Mcp-Session-Id`; nobody else knows the id before that.
//!
//! It also knows which request ids each session has in flight ([`InFlight`]): rmcp routes an
//! answer by its request id alone, so a second request with the id of one still running would
//! take the first one's answer and leave the first one's stream open for ever. The front refuses
//! such a request instead.

use crate::sync::lock;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;

use crate::gateway::lane::{DuplicateRequest, FastLane};
use rmcp::transport::common::server_side_http::{ServerSseMessage, SessionId};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::RestoreOutcome;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};

/// The session bounds in force.
#[derive(Debug, Clone)]
pub(super) struct SessionLimits {
    pub(super) max_sessions: usize,
    pub(super) max_per_client: usize,
    pub(super) idle_timeout: Duration,
}

/// A bound that refused a new session; its message names the config key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum SessionBound {
    #[error(
        "roster holds {0} HTTP sessions ([gateway] max_sessions); end one with DELETE, let \
         idle ones expire, or raise the limit"
    )]
    Total(usize),
    #[error(
        "this client holds {0} HTTP sessions ([gateway] max_sessions_per_client); end one \
         with DELETE, let idle ones expire, or raise the limit"
    )]
    PerClient(usize),
}

/// Who holds which session, and how many each identity holds (pending `initialize`s
/// included, so concurrent ones cannot overshoot a bound).
#[derive(Default)]
struct Owners {
    /// Every live session; `None` until its `initialize` was answered.
    by_session: HashMap<SessionId, Option<String>>,
    /// Sessions held plus `initialize`s in flight, per identity key.
    per_client: HashMap<String, usize>,
    /// `initialize`s in flight (their sessions may not exist yet).
    pending: usize,
    /// When the shared store last heard a session was used (`[store]` only).
    touched: HashMap<SessionId, std::time::Instant>,
    /// The requests in flight: each one's session and id (as JSON text).
    in_flight: HashSet<(SessionId, Arc<str>)>,
}

/// The session manager of the HTTP front.
pub(super) struct BoundSessions {
    inner: LocalSessionManager,
    owners: Mutex<Owners>,
    limits: SessionLimits,
}

impl BoundSessions {
    pub(super) fn new(limits: SessionLimits) -> Arc<Self> {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(limits.idle_timeout);
        Arc::new(Self {
            inner,
            owners: Mutex::new(Owners::default()),
            limits,
        })
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, Owners> {
        lock(&self.owners)
    }

    /// Whether `id` is a live session of someone other than `client`: such a request must be
    /// answered exactly as for a session that does not exist.
    pub(super) fn foreign(&self, id: &str, client: &str) -> bool {
        let id: SessionId = id.to_owned().into();
        match self.owners().by_session.get(&id) {
            Some(Some(owner)) => owner != client,
            // Not yet claimed: only its creator could know the id, and it has no answer yet.
            Some(None) => true,
            None => false,
        }
    }

    /// Whether `id` is a live session of `client`.
    pub(super) fn owned_by(&self, id: &str, client: &str) -> bool {
        let id: SessionId = id.to_owned().into();
        matches!(self.owners().by_session.get(&id), Some(Some(owner)) if owner == client)
    }

    /// Room for one more session of `client`, held until claimed or dropped.
    pub(super) fn reserve(self: &Arc<Self>, client: &str) -> Result<Reservation, SessionBound> {
        let mut owners = self.owners();
        let held = owners.per_client.get(client).copied().unwrap_or(0);
        let claimed = owners.by_session.values().filter(|o| o.is_some()).count();
        if claimed + owners.pending >= self.limits.max_sessions {
            return Err(SessionBound::Total(self.limits.max_sessions));
        }
        // Without [[clients]] every HTTP client is the one default identity; its bound would
        // only be a second, smaller total.
        if !client.is_empty() && held >= self.limits.max_per_client {
            return Err(SessionBound::PerClient(self.limits.max_per_client));
        }
        owners.pending += 1;
        *owners.per_client.entry(client.to_owned()).or_default() += 1;
        Ok(Reservation {
            sessions: self.clone(),
            client: client.to_owned(),
            done: false,
        })
    }

    /// How many sessions are live (for the admin's `/healthz`).
    pub(super) fn count(&self) -> usize {
        self.owners().by_session.len()
    }

    /// Whether this replica holds (or is making) session `id`.
    pub(super) fn known(&self, id: &str) -> bool {
        let id: SessionId = id.to_owned().into();
        self.owners().by_session.contains_key(&id)
    }

    /// Takes on `client`'s session `id` that another replica made (rmcp restores it at the
    /// request); it counts as held here until it ends.
    pub(super) fn adopt(&self, id: &str, client: &str) {
        let id: SessionId = id.to_owned().into();
        let mut owners = self.owners();
        if owners.by_session.contains_key(&id) {
            return;
        }
        owners.by_session.insert(id, Some(client.to_owned()));
        *owners.per_client.entry(client.to_owned()).or_default() += 1;
    }

    /// An adopted session rmcp could not restore (it ended on every replica).
    pub(super) fn forget_unserved(&self, id: &str) {
        let id: SessionId = id.to_owned().into();
        let held = self.inner.sessions.try_read().map(|s| s.contains_key(&id));
        if matches!(held, Ok(false)) {
            self.forget(&id);
        }
    }

    /// Whether the store should hear that `id` was used (at most four times per idle timeout,
    /// so a session in use on one replica does not expire for the others).
    pub(super) fn touch_due(&self, id: &str) -> bool {
        let id: SessionId = id.to_owned().into();
        let every = self.limits.idle_timeout / 4;
        let mut owners = self.owners();
        if !owners.by_session.contains_key(&id) {
            return false;
        }
        let now = std::time::Instant::now();
        match owners.touched.get(&id) {
            Some(at) if now.duration_since(*at) < every => false,
            _ => {
                owners.touched.insert(id, now);
                true
            }
        }
    }

    /// Ends this replica's copy of every session another replica deleted (`DELETE`), as the
    /// store announces them.
    pub(super) fn close_deleted(self: &Arc<Self>, shared: &crate::store::SharedSessions) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let sessions = Arc::downgrade(self);
        let listening = shared.on_deleted(move |id| {
            let Some(sessions) = sessions.upgrade() else {
                return;
            };
            if id.is_empty() || !sessions.known(id) {
                return;
            }
            let id: SessionId = id.to_owned().into();
            runtime.spawn(async move {
                let _ = sessions.close_session(&id).await;
            });
        });
        if let Err(error) = listening {
            tracing::warn!(%error, "sessions deleted on other replicas will end here only when idle");
        }
    }

    /// Takes request `id` (its JSON text) of session `session` as in flight until its answer
    /// has gone to the client's stream (or nothing holds the returned [`InFlight`] any more).
    /// `Ok(None)`: no such session here (rmcp answers for it). `Err`: a request with that id is
    /// in flight in that session already.
    pub(super) fn begin_request(
        self: &Arc<Self>,
        session: &str,
        id: &str,
    ) -> Result<Option<InFlight>, DuplicateRequest> {
        let mut owners = self.owners();
        let Some((session, _)) = owners.by_session.get_key_value(session) else {
            return Ok(None);
        };
        let key = (session.clone(), Arc::<str>::from(id));
        if !owners.in_flight.insert(key.clone()) {
            return Err(DuplicateRequest(id.to_owned()));
        }
        Ok(Some(InFlight(Arc::new(InFlightId {
            sessions: Arc::downgrade(self),
            key,
            answered: AtomicBool::new(false),
        }))))
    }

    fn forget(&self, id: &SessionId) {
        let mut owners = self.owners();
        owners.touched.remove(id);
        owners.in_flight.retain(|(session, _)| session != id);
        if let Some(Some(owner)) = owners.by_session.remove(id) {
            release(&mut owners.per_client, &owner);
        }
    }
}

fn release(per_client: &mut HashMap<String, usize>, client: &str) {
    if let Some(n) = per_client.get_mut(client) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            per_client.remove(client);
        }
    }
}

/// A request of a session in flight (see [`BoundSessions::begin_request`]). The front puts it in
/// the request's HTTP parts; the session's response stream lets it go once the answer passed,
/// and it goes in any case when the last clone is dropped (the request refused before it reached
/// its session, or its handler done and its stream gone).
#[derive(Clone)]
pub(super) struct InFlight(Arc<InFlightId>);

struct InFlightId {
    sessions: Weak<BoundSessions>,
    key: (SessionId, Arc<str>),
    answered: AtomicBool,
}

impl InFlight {
    /// The request was answered: its id is free again.
    fn answered(&self) {
        self.0.end();
    }
}

impl InFlightId {
    fn end(&self) {
        if self.answered.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(sessions) = self.sessions.upgrade() {
            sessions.owners().in_flight.remove(&self.key);
        }
    }
}

impl Drop for InFlightId {
    fn drop(&mut self) {
        self.end();
    }
}

/// The request's [`InFlight`], if the front marked it.
fn in_flight(message: &ClientJsonRpcMessage) -> Option<InFlight> {
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    let parts = request
        .request
        .extensions()
        .get::<axum::http::request::Parts>()?;
    parts.extensions.get::<InFlight>().cloned()
}

/// A place for one session, taken before `initialize` runs.
pub(super) struct Reservation {
    sessions: Arc<BoundSessions>,
    client: String,
    done: bool,
}

impl Reservation {
    /// The session `id` was created for this client; it now counts as held.
    pub(super) fn claim(mut self, id: &str) {
        let id: SessionId = id.to_owned().into();
        let mut owners = self.sessions.owners();
        owners.pending = owners.pending.saturating_sub(1);
        match owners.by_session.get_mut(&id) {
            Some(owner @ None) => *owner = Some(self.client.clone()),
            // Already gone (it ended before its answer got here), or not ours to claim.
            _ => release(&mut owners.per_client, &self.client),
        }
        self.done = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut owners = self.sessions.owners();
        owners.pending = owners.pending.saturating_sub(1);
        release(&mut owners.per_client, &self.client);
    }
}

impl SessionManager for BoundSessions {
    type Error = LocalSessionManagerError;
    type Transport = FastLane<WorkerTransport<LocalSessionWorker>>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        self.owners().by_session.insert(id.clone(), None);
        Ok((id, FastLane::new(transport)))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        // rmcp calls this for every end of a session (DELETE, idle timeout, worker exit).
        self.forget(id);
        let closed = self.inner.close_session(id).await;
        crate::memory::release_freed_later();
        closed
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let in_flight = in_flight(&message);
        let stream = self.inner.create_stream(id, message).await?;
        // The answer ends the request's stream: once it passed, the id may be used again.
        Ok(stream.inspect(move |event| {
            let answer = event.message.as_deref().is_some_and(|m| {
                matches!(m, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_))
            });
            if answer && let Some(in_flight) = &in_flight {
                in_flight.answered();
            }
        }))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // A session another replica made: the front adopted it for its owner already.
        match self.inner.restore_session(id.clone()).await? {
            RestoreOutcome::Restored(transport) => {
                self.owners().by_session.entry(id).or_insert(None);
                Ok(RestoreOutcome::Restored(FastLane::new(transport)))
            }
            RestoreOutcome::AlreadyPresent => Ok(RestoreOutcome::AlreadyPresent),
            _ => Ok(RestoreOutcome::NotSupported),
        }
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(total: usize, per_client: usize) -> Arc<BoundSessions> {
        BoundSessions::new(SessionLimits {
            max_sessions: total,
            max_per_client: per_client,
            idle_timeout: Duration::from_secs(60),
        })
    }

    #[tokio::test]
    async fn a_session_is_its_creators_and_bounds_count_pending_ones() {
        let s = sessions(3, 2);
        let (id, _t) = s.create_session().await.expect("session");
        let first = s.reserve("alice").expect("room");
        assert!(s.foreign(&id, "alice"), "unclaimed is nobody's");
        first.claim(&id);
        assert!(s.owned_by(&id, "alice"));
        assert!(s.foreign(&id, "bob"));
        assert!(!s.foreign("no-such-session", "bob"));

        let pending = s.reserve("alice").expect("second of two");
        assert_eq!(s.reserve("alice").err(), Some(SessionBound::PerClient(2)));
        let _bob = s.reserve("bob").expect("bob has room");
        assert_eq!(s.reserve("carol").err(), Some(SessionBound::Total(3)));
        drop(pending);
        assert!(
            s.reserve("alice").is_ok(),
            "a dropped reservation frees its place"
        );

        s.close_session(&id).await.expect("close");
        assert!(!s.owned_by(&id, "alice"));
        assert_eq!(s.count(), 0);
    }
}
