//! [`Session`]: one client session of the roster. It holds everything that is the session's
//! own: its queue of deltas (drained at its turns), the change note a turn drained until a
//! tool result carries it, the coalesced upstream `list_changed` notice, and the log level its
//! client asked for.
//!
//! A session gets one notice per batch of deltas: the first non-empty merged delta queued
//! since its last turn makes one; later ones wait for the next turn, which drains them all
//! (and their note rides on the next tool result). A burst that cancels out (a tool added,
//! then removed) is no change and makes no notice.

use crate::sync::lock;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use roster_core::delta::SchemaSource;
use roster_core::{Delta, DeltaQueue};
use tokio::sync::watch;

use crate::servers::LogLevel;
use crate::servers::Needs;
use crate::servers::runtime::{DeltaListener, Runtime};

/// What a turn found: the session's merged delta since its last turn, and its note for the
/// model (to carry on the next tool result).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    /// Tools added, changed and removed since the session's previous turn.
    pub delta: Option<Delta>,
    /// The text to put on the next tool result, when the delta is non-empty.
    pub note: Option<String>,
}

/// One client session: its own delta queue, drained at its turns. It works while the
/// [`crate::Roster`] it came from is alive (dropping the last `Roster` stops the servers).
pub struct Session {
    rt: Arc<Runtime>,
    queued: Mutex<Queued>,
    /// Bumped for every delta queued, to wake whoever waits for a notice.
    generation: watch::Sender<u64>,
    /// The log level the client asked for (`logging/setLevel`).
    log_level: Mutex<Option<LogLevel>>,
}

/// What waits on a session between its turns.
#[derive(Default)]
struct Queued {
    deltas: DeltaQueue,
    /// What turns drained that no tool result has carried in a note yet, merged: bounded by
    /// the tool set however many turns pass without a tool call, and a tool that came and went
    /// in between is no news.
    unnoted: DeltaQueue,
    /// Notices made so far; a waiter compares it with the count it last saw.
    notices: u64,
    /// Whether the deltas now queued have had their notice (the turn that drains them ends
    /// the batch).
    noticed: bool,
    /// Whether this session's client has listed the tools (always, for the library's
    /// sessions; from its first `tools/list` for a gateway client's, see [`Session::listed`]).
    /// Until it has, a server joining (its first listing, roster answering before its servers
    /// are up) is no news to it: nothing it holds is corrected, and a host that connects and
    /// lists at once would otherwise get a `list_changed` and a note for its own first list.
    listed: bool,
}

impl Queued {
    /// Takes the deltas of the batch; the next one gets its own notice.
    fn drain(&mut self) -> Turn {
        self.noticed = false;
        let delta = self.deltas.drain();
        let note = delta.as_ref().and_then(Delta::note);
        Turn { delta, note }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("pending", &self.has_pending())
            .finish()
    }
}

impl Session {
    /// A new session of `rt`; it sees the deltas queued from now on.
    pub(crate) fn open(rt: Arc<Runtime>) -> Arc<Session> {
        Self::open_listed(rt, true)
    }

    /// A new session of a gateway's client: servers joining are news to it once its client
    /// listed the tools ([`Session::listed`]).
    pub(crate) fn open_for_client(rt: Arc<Runtime>) -> Arc<Session> {
        Self::open_listed(rt, false)
    }

    fn open_listed(rt: Arc<Runtime>, listed: bool) -> Arc<Session> {
        let session = Arc::new(Session {
            rt,
            queued: Mutex::new(Queued {
                listed,
                ..Queued::default()
            }),
            generation: watch::channel(0).0,
            log_level: Mutex::new(None),
        });
        let listener: Arc<dyn DeltaListener> = session.clone();
        session.rt.add_session(Arc::downgrade(&listener));
        session
    }

    fn queued(&self) -> MutexGuard<'_, Queued> {
        lock(&self.queued)
    }

    /// The session's client listed the tools: a server joining is news from now on.
    pub(crate) fn listed(&self) {
        self.queued().listed = true;
    }

    /// Starts a turn for what a list shows: waits (at most `turn_wait`) for the servers that
    /// announced a change or were never listed, starts the other due listings in the
    /// background, then drains this session's deltas.
    pub async fn begin_turn(&self) -> Turn {
        self.begin_turn_for(Needs::Lists).await
    }

    /// [`Session::begin_turn`] for a request that needs only what `needs` names (a call needs
    /// its own server).
    pub async fn begin_turn_for(&self, needs: Needs<'_>) -> Turn {
        self.rt.list_due(needs).await;
        self.drain()
    }

    /// Drains this session's deltas without listing anything.
    pub fn drain(&self) -> Turn {
        self.queued().drain()
    }

    /// [`Session::begin_turn_for`] for a client whose note waits here for its next tool result
    /// (see [`Session::take_note`]).
    pub(crate) async fn begin_turn_keeping_note(&self, needs: Needs<'_>) {
        self.rt.list_due(needs).await;
        let mut queued = self.queued();
        if let Some(delta) = queued.drain().delta {
            queued.unnoted.push(delta);
        }
    }

    /// Takes the note a tool result should carry: what changed since it was last carried.
    pub(crate) fn take_note(&self, source: SchemaSource) -> Option<String> {
        self.queued()
            .unnoted
            .drain()
            .as_ref()
            .and_then(|delta| delta.note_for(source))
    }

    /// Whether deltas are waiting for this session's next turn.
    pub fn has_pending(&self) -> bool {
        !self.queued().deltas.is_empty()
    }

    /// Resolves at this session's next notice: when a non-empty merged delta is waiting that
    /// no notice since the session's last turn covered (at once if one is waiting now). A
    /// batch gets one notice, however many callers wait: a watcher can loop on it without
    /// spinning. Unlike [`Session::delta_arrived`], a burst that cancels out is no change.
    pub async fn changed(self: &Arc<Self>) {
        let seen = self.queued().notices;
        if !self.notices_after(seen).next().await {
            std::future::pending::<()>().await;
        }
    }

    /// Resolves once a delta is waiting for this session (at once if one already is); the
    /// delta itself stays queued until the session's next turn drains it.
    pub async fn delta_arrived(&self) {
        let mut generation = self.generation.subscribe();
        loop {
            if self.has_pending() {
                return;
            }
            if generation.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// This session's notices from now on (each one a `list_changed` to send upstream). A
    /// change already waiting is not news to a stream opened after it: its batch counts as
    /// noticed, and the client learns of it at its next turn. It holds the session weakly: it
    /// ends when the session does.
    pub(crate) fn notices(self: &Arc<Self>) -> Notices {
        let seen = self.notices_made();
        self.notices_after(seen)
    }

    fn notices_after(self: &Arc<Self>, seen: u64) -> Notices {
        Notices {
            generation: self.generation.subscribe(),
            seen,
            session: Arc::downgrade(self),
        }
    }

    /// The notices made so far, making one now when a non-empty merged delta waits that has
    /// had none since the last turn: the one place notices are coalesced.
    fn notices_made(&self) -> u64 {
        let mut queued = self.queued();
        if !queued.noticed && !queued.deltas.is_empty() {
            queued.noticed = true;
            queued.notices += 1;
        }
        queued.notices
    }

    /// The lowest log level this session's client wants (`None`: no log messages).
    pub(crate) fn log_level(&self) -> Option<LogLevel> {
        *lock(&self.log_level)
    }

    /// Records the client's `logging/setLevel`.
    pub(crate) fn set_log_level(&self, level: LogLevel) {
        *lock(&self.log_level) = Some(level);
    }
}

/// One waiter's view of a session's notices (see [`Session::notices`]).
pub(crate) struct Notices {
    session: Weak<Session>,
    generation: watch::Receiver<u64>,
    /// The notices this waiter has been told of.
    seen: u64,
}

impl Notices {
    /// Resolves at the next notice (several made while nobody looked are one); `false` once
    /// the session is gone.
    pub(crate) async fn next(&mut self) -> bool {
        loop {
            let Some(session) = self.session.upgrade() else {
                return false;
            };
            let made = session.notices_made();
            // Not held while waiting: the session ends when its owner drops it.
            drop(session);
            if made > self.seen {
                self.seen = made;
                return true;
            }
            if self.generation.changed().await.is_err() {
                return false;
            }
        }
    }
}

impl DeltaListener for Session {
    /// Queues a delta for this session's next turn: a `join` (a server's first listing) only
    /// once the session's client listed the tools.
    fn queue(&self, delta: Delta, join: bool) {
        {
            let mut queued = self.queued();
            if join && !queued.listed {
                return;
            }
            queued.deltas.push(delta);
        }
        self.generation.send_modify(|g| *g += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::servers::LogSink;
    use futures::FutureExt;

    fn named(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn runtime() -> Arc<Runtime> {
        let config = Config::with_servers(Default::default());
        Runtime::new(
            config.gateway,
            &config.servers,
            &config.server_order,
            Arc::new(LogSink),
            None,
            crate::servers::pinning::Pinning::in_memory(),
            crate::store::Stores::in_memory().tokens(),
        )
    }

    fn added(name: &str) -> Delta {
        Delta {
            added: named(&[name]),
            ..Delta::default()
        }
    }

    #[test]
    fn one_notice_per_batch_until_a_turn_drains_it() {
        let session = Session::open(runtime());
        let mut notices = session.notices();
        session.queue(added("a__x"), false);
        assert_eq!(
            notices.next().now_or_never(),
            Some(true),
            "the first change"
        );
        session.queue(added("a__y"), false);
        assert!(
            notices.next().now_or_never().is_none(),
            "the batch had its notice"
        );
        let turn = session.drain();
        assert!(turn.note.is_some_and(|n| n.contains("a__y")));
        session.queue(added("a__z"), false);
        assert_eq!(notices.next().now_or_never(), Some(true), "a new batch");
        drop(session);
        assert_eq!(
            notices.next().now_or_never(),
            Some(false),
            "the session ended"
        );
    }

    #[test]
    fn a_stream_opened_after_a_change_waits_for_the_next_batch() {
        let session = Session::open(runtime());
        session.queue(added("a__x"), false);
        let mut late = session.notices();
        assert!(late.next().now_or_never().is_none());
        session.drain();
        session.queue(added("a__y"), false);
        assert_eq!(late.next().now_or_never(), Some(true));
    }

    #[test]
    fn changed_fires_only_for_a_non_empty_merged_delta() {
        let session = Session::open(runtime());
        assert!(session.changed().now_or_never().is_none(), "nothing queued");
        session.queue(
            Delta {
                added: named(&["a__x"]),
                ..Delta::default()
            },
            false,
        );
        session.queue(
            Delta {
                removed: named(&["a__x"]),
                ..Delta::default()
            },
            false,
        );
        assert!(
            session.changed().now_or_never().is_none(),
            "a burst that cancels out is no change"
        );
        session.queue(
            Delta {
                added: named(&["a__y"]),
                ..Delta::default()
            },
            false,
        );
        assert!(session.changed().now_or_never().is_some(), "a real change");
        assert!(
            session.changed().now_or_never().is_none(),
            "edge-triggered: the same burst fires once"
        );
    }

    #[test]
    fn a_server_joining_is_news_to_a_client_session_only_once_it_listed_the_tools() {
        let session = Session::open_for_client(runtime());
        session.queue(added("a__joined"), true);
        assert!(!session.has_pending(), "nothing its client holds changed");
        session.queue(added("a__changed"), false);
        assert!(session.has_pending(), "a change of a server is news");
        session.drain();
        session.listed();
        session.queue(added("b__joined"), true);
        assert!(
            session.has_pending(),
            "listed: a server joining changes its list"
        );
        let library = Session::open(runtime());
        library.queue(added("a__joined"), true);
        assert!(
            library.has_pending(),
            "the library's sessions hear every join"
        );
    }

    #[tokio::test]
    async fn the_note_carries_every_turn_since_the_last_tool_result_merged() {
        let session = Session::open(runtime());
        for name in ["a__x", "a__y", "a__z"] {
            session.queue(added(name), false);
            session.begin_turn_keeping_note(Needs::Lists).await;
        }
        session.queue(
            Delta {
                removed: named(&["a__z"]),
                ..Delta::default()
            },
            false,
        );
        session.begin_turn_keeping_note(Needs::Lists).await;
        let note = session
            .take_note(SchemaSource::ToolsList)
            .expect("a note for the turns' changes");
        assert!(note.contains("a__x") && note.contains("a__y"), "{note}");
        assert!(
            !note.contains("a__z"),
            "a tool that came and went is no news: {note}"
        );
        assert_eq!(
            note.matches("The available tools changed.").count(),
            1,
            "one note, however many turns: {note}"
        );
        assert!(
            session.take_note(SchemaSource::ToolsList).is_none(),
            "carried once"
        );
    }
}
