//! The listener hub: every notification a server sends, as a [`ServerEvent`], fanned out to
//! roster's listeners.
//!
//! [`Notifications`] belongs to a server, not to a connection: a listener added once keeps
//! hearing the server across restarts. Progress goes to the call that asked for it, early
//! progress included; log messages outside any request go to the log fallback.

use crate::sync::{lock, read, write};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::Value;

use super::event::ServerEvent;
use crate::inbox::ConfirmRequest;

/// A notification listener: called with every notification the server sends. It runs on the
/// connection's reader, so it must not wait for the server.
pub type NotificationListener = Arc<dyn Fn(&ServerEvent) + Send + Sync>;

/// Receives `notifications/progress` for one call: `(progress params)`.
pub type ProgressListener = Arc<dyn Fn(&Value) + Send + Sync>;

/// Asks a person to decide one server request (the inbox, through
/// [`super::NotificationSink::confirm`]).
pub type Confirmer = Arc<dyn Fn(ConfirmRequest) -> super::ConfirmFuture + Send + Sync>;

/// Receives the params of a server's `notifications/message` sent while no request was in
/// flight to it (runs on the connection's reader: it must not wait).
pub type LogFallback = Arc<dyn Fn(&Value) + Send + Sync>;

/// Identifies a listener so it can be removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(u64);

/// The notification fan-out of one server; shared by all its successive connections.
#[derive(Default)]
pub struct Notifications {
    next: AtomicU64,
    listeners: RwLock<Vec<(ListenerId, NotificationListener)>>,
    progress: Mutex<Progress>,
    confirmer: RwLock<Option<Confirmer>>,
    log_fallback: RwLock<Option<LogFallback>>,
    /// Notifications dropped over the server's rate, over all its connections.
    dropped: AtomicU64,
}

/// Progress listeners by token, and progress that arrived before its call registered (rmcp
/// picks the token while sending, so a quick server can report before the listener exists).
#[derive(Default)]
struct Progress {
    listeners: HashMap<String, ProgressListener>,
    early: std::collections::VecDeque<(std::time::Instant, String, Value)>,
}

/// How many early progress notifications are kept, and for how long.
const EARLY_PROGRESS_KEPT: usize = 64;
const EARLY_PROGRESS_FOR: Duration = Duration::from_secs(5);

impl std::fmt::Debug for Notifications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifications").finish_non_exhaustive()
    }
}

impl Notifications {
    /// A fan-out with no listeners.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Adds a listener for every notification of this server.
    pub fn add_notification_listener(
        &self,
        listener: impl Fn(&ServerEvent) + Send + Sync + 'static,
    ) -> ListenerId {
        let id = ListenerId(self.next.fetch_add(1, Ordering::Relaxed));
        write(&self.listeners).push((id, Arc::new(listener)));
        id
    }

    /// Sets who decides this server's `elicitation/create` requests that no caller can take;
    /// without a confirmer they are declined.
    pub fn set_confirmer(&self, confirmer: Option<Confirmer>) {
        *write(&self.confirmer) = confirmer;
    }

    pub(super) fn confirmer(&self) -> Option<Confirmer> {
        read(&self.confirmer).clone()
    }

    /// Sets where this server's log messages go when no request is in flight to it (the
    /// gateway hands them to the sessions that asked for log messages).
    pub fn set_log_fallback(&self, fallback: Option<LogFallback>) {
        *write(&self.log_fallback) = fallback;
    }

    pub(super) fn log_fallback(&self) -> Option<LogFallback> {
        read(&self.log_fallback).clone()
    }

    /// How many of this server's notifications were dropped over its rate so far (see
    /// [`super::gate`]).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(crate) fn count_dropped(&self, dropped: u64) {
        self.dropped.fetch_add(dropped, Ordering::Relaxed);
    }

    /// Removes a listener; unknown ids are ignored.
    pub fn remove_notification_listener(&self, id: ListenerId) {
        write(&self.listeners).retain(|(l, _)| *l != id);
    }

    /// Delivers a notification of `method` with `params` as if the server had sent it (roster's
    /// own reports; tests inject notifications this way).
    pub fn dispatch_notification(&self, method: &str, params: &Value) {
        self.dispatch(&ServerEvent::new(method, params.clone()));
    }

    /// Delivers one event to every listener (and progress to the call that asked for it).
    pub fn dispatch(&self, event: &ServerEvent) {
        if let ServerEvent::Progress {
            token: Some(key),
            params,
        } = event
        {
            let listener = {
                let mut progress = lock(&self.progress);
                let listener = progress.listeners.get(key).cloned();
                if listener.is_none() {
                    let now = std::time::Instant::now();
                    progress
                        .early
                        .retain(|(at, _, _)| now.duration_since(*at) < EARLY_PROGRESS_FOR);
                    if progress.early.len() >= EARLY_PROGRESS_KEPT {
                        progress.early.pop_front();
                    }
                    progress.early.push_back((now, key.clone(), params.clone()));
                }
                listener
            };
            if let Some(listener) = listener {
                listener(params);
            }
        }
        // Clone out of the lock so a listener may add or remove listeners.
        let listeners: Vec<NotificationListener> = read(&self.listeners)
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        for listener in listeners {
            listener(event);
        }
    }

    pub(super) fn watch_progress(&self, token: String, listener: ProgressListener) {
        let early: Vec<Value> = {
            let mut progress = lock(&self.progress);
            progress.listeners.insert(token.clone(), listener.clone());
            let (mine, others): (Vec<_>, Vec<_>) =
                progress.early.drain(..).partition(|(_, t, _)| *t == token);
            progress.early = others.into();
            mine.into_iter().map(|(_, _, params)| params).collect()
        };
        for params in &early {
            listener(params);
        }
    }

    pub(super) fn unwatch_progress(&self, token: &str) {
        lock(&self.progress).listeners.remove(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn progress_before_registration_is_replayed_once() {
        let notifications = Notifications::new();
        let params = json!({"progressToken": 7, "progress": 1});
        notifications.dispatch_notification("notifications/progress", &params);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        notifications.watch_progress(
            json!(7).to_string(),
            Arc::new(move |p: &Value| sink.lock().expect("lock").push(p.clone())),
        );
        let later = json!({"progressToken": 7, "progress": 2});
        notifications.dispatch_notification("notifications/progress", &later);
        assert_eq!(*seen.lock().expect("lock"), vec![params, later]);
        let other = json!({"progressToken": 8, "progress": 1});
        notifications.dispatch_notification("notifications/progress", &other);
        assert_eq!(seen.lock().expect("lock").len(), 2);
    }
}
