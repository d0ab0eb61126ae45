//! Housekeeping: the inbox's background thread expires confirms past their deadline and syncs
//! a quiet audit trail under the interval fsync policy; dropping the inbox stops it.

use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// How often a shared inbox's housekeeper looks whether its log should be cut.
const COMPACTION_EVERY: Duration = Duration::from_secs(60);

use super::trail::Shared;
use super::{ConfirmDecision, Inbox};
use crate::sync::lock;

/// How often the thread wakes: half the fsync interval, at most a second (confirms expire to
/// the second), at least 10 ms.
pub(super) fn tick(interval: Option<Duration>) -> Duration {
    interval
        .map_or(Duration::from_secs(1), |every| {
            (every / 2).min(Duration::from_secs(1))
        })
        .max(Duration::from_millis(10))
}

/// Starts the background thread; `None` (logged) when the thread could not be started.
pub(super) fn start(shared: &Arc<Shared>, tick: Duration) -> Option<JoinHandle<()>> {
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("roster-inbox".into())
        .spawn(move || housekeep(&shared, tick))
        .map_err(|error| {
            // Without the thread, interval syncs still happen on append and confirms
            // still expire on `expire_confirms`; only the idle-time duties are lost.
            tracing::warn!(%error, "could not start the inbox's background thread");
        })
        .ok()
}

/// The thread's loop: every `tick`, expire what is due and sync a quiet trail, until the inbox
/// is dropped.
fn housekeep(shared: &Shared, tick: Duration) {
    let mut last_compaction = Instant::now();
    let mut stop = lock(&shared.stop);
    loop {
        let (guard, _) = shared
            .wake
            .wait_timeout(stop, tick)
            .unwrap_or_else(PoisonError::into_inner);
        stop = guard;
        if *stop {
            return;
        }
        let due = {
            let mut inner = shared.lock();
            // A shared inbox also catches up here (a missed NOTIFY costs at most a tick) and
            // now and then cuts its log.
            inner.catch_up();
            inner.expire(SystemTime::now());
            if last_compaction.elapsed() >= COMPACTION_EVERY {
                last_compaction = Instant::now();
                inner.compact_if_needed();
            }
            inner.trail.take_due_sync()
        };
        if let Some(file) = due
            && let Err(error) = file.sync_data()
        {
            tracing::warn!(%error, "background fsync of the audit trail failed");
        }
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        *lock(&self.shared.stop) = true;
        self.shared.wake.notify_all();
        if let Some(handle) = self.housekeeper.take() {
            let _ = handle.join();
        }
        let mut inner = self.shared.lock();
        if inner.trail.interval().is_some() {
            inner.trail.sync();
        }
        for (_, waiter) in inner.waiters.drain() {
            let _ = waiter.send(ConfirmDecision::Expired);
        }
    }
}
