//! One client session: the pending change note and coalesced `list_changed` delivery.
//!
//! A session gets one `notifications/tools/list_changed` per batch of deltas: the first
//! non-empty delta queued after a turn sends it, later ones wait for the next turn to drain
//! them all (and their note rides on the next tool result).

use crate::sync::lock;
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{Backend, BackendSession};
use crate::servers::LogLevel;

/// A client session's gateway-side state.
pub(crate) struct Session {
    backend: Arc<dyn BackendSession>,
    /// Notes drained at a turn that no tool result has carried yet.
    pending_notes: Mutex<Vec<String>>,
    notices: broadcast::Sender<()>,
    /// Counts finished turns, so the watcher knows when a pending delta has been drained.
    turns: watch::Sender<u64>,
    /// The log level an initialize-era client asked for (`logging/setLevel`).
    log_level: Mutex<Option<LogLevel>>,
    _watch: DropGuard,
}

impl Session {
    /// Opens a backend session and starts watching it for changes.
    pub(crate) fn open(backend: &dyn Backend, shutdown: &CancellationToken) -> Arc<Self> {
        let backend: Arc<dyn BackendSession> = Arc::from(backend.open_session());
        let (notices, _) = broadcast::channel(4);
        let stop = shutdown.child_token();
        let (turns, turns_seen) = watch::channel(0);
        tokio::spawn(watch_changes(
            backend.clone(),
            notices.clone(),
            turns_seen,
            stop.clone(),
        ));
        Arc::new(Self {
            backend,
            pending_notes: Mutex::new(Vec::new()),
            notices,
            turns,
            log_level: Mutex::new(None),
            _watch: stop.drop_guard(),
        })
    }

    /// Starts a turn: the backend re-lists what is due and drains this session's deltas; their
    /// note waits here for the next tool result.
    pub(crate) async fn begin_turn(&self) {
        if let Some(note) = self.backend.begin_turn().await {
            self.notes().push(note);
        }
        self.turns.send_modify(|n| *n += 1);
    }

    /// Takes the notes a tool result should carry, joined into one text.
    pub(crate) fn take_note(&self) -> Option<String> {
        let mut notes = self.notes();
        if notes.is_empty() {
            return None;
        }
        let note = notes.join("\n");
        notes.clear();
        Some(note)
    }

    /// The lowest log level this session's client wants (`None`: no log messages).
    pub(crate) fn log_level(&self) -> Option<LogLevel> {
        *lock(&self.log_level)
    }

    /// Records the client's `logging/setLevel`.
    pub(crate) fn set_log_level(&self, level: LogLevel) {
        *lock(&self.log_level) = Some(level);
    }

    /// A stream that yields once per `list_changed` this session should send.
    pub(crate) fn notices(&self) -> broadcast::Receiver<()> {
        self.notices.subscribe()
    }

    fn notes(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        lock(&self.pending_notes)
    }
}

async fn watch_changes(
    backend: Arc<dyn BackendSession>,
    notices: broadcast::Sender<()>,
    mut turns: watch::Receiver<u64>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = backend.changed() => {}
        }
        turns.mark_unchanged();
        // No receiver yet (no GET stream, no listen) is fine: the client still sees the
        // change at its next turn.
        let _ = notices.send(());
        // Coalescing: however many deltas queue up before the session's next turn, they are
        // one pending batch and get one notice. Asking again before that turn would spin.
        tokio::select! {
            () = stop.cancelled() => return,
            changed = turns.changed() => if changed.is_err() { return },
        }
    }
}
