//! One client session: the pending change note and coalesced `list_changed` delivery.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{Backend, BackendSession};

/// A client session's gateway-side state.
pub(crate) struct Session {
    backend: Arc<dyn BackendSession>,
    /// Notes drained at a turn that no tool result has carried yet.
    pending_notes: Mutex<Vec<String>>,
    /// Set when a `list_changed` went out and the client has not listed the tools since;
    /// while set, further changes send nothing (the client will see them when it lists).
    notice_outstanding: Arc<AtomicBool>,
    notices: broadcast::Sender<()>,
    _watch: DropGuard,
}

impl Session {
    /// Opens a backend session and starts watching it for changes.
    pub(crate) fn open(backend: &dyn Backend, shutdown: &CancellationToken) -> Arc<Self> {
        let backend: Arc<dyn BackendSession> = Arc::from(backend.open_session());
        let (notices, _) = broadcast::channel(4);
        let notice_outstanding = Arc::new(AtomicBool::new(false));
        let stop = shutdown.child_token();
        tokio::spawn(watch(
            backend.clone(),
            notices.clone(),
            notice_outstanding.clone(),
            stop.clone(),
        ));
        Arc::new(Self {
            backend,
            pending_notes: Mutex::new(Vec::new()),
            notice_outstanding,
            notices,
            _watch: stop.drop_guard(),
        })
    }

    /// Starts a turn: the backend re-lists what is due and drains this session's deltas; their
    /// note waits here for the next tool result.
    pub(crate) async fn begin_turn(&self) {
        if let Some(note) = self.backend.begin_turn().await {
            self.notes().push(note);
        }
    }

    /// The client has the current tool list: the next change notifies again.
    pub(crate) fn listed(&self) {
        self.notice_outstanding.store(false, Ordering::SeqCst);
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

    /// A stream that yields once per `list_changed` this session should send.
    pub(crate) fn notices(&self) -> broadcast::Receiver<()> {
        self.notices.subscribe()
    }

    fn notes(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.pending_notes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn watch(
    backend: Arc<dyn BackendSession>,
    notices: broadcast::Sender<()>,
    outstanding: Arc<AtomicBool>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = backend.changed() => {
                if !outstanding.swap(true, Ordering::SeqCst) {
                    // No receiver yet (no GET stream, no listen) is fine: the client will
                    // still see the change at its next turn.
                    let _ = notices.send(());
                }
            }
        }
    }
}
