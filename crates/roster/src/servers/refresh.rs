//! [`RefreshHook`]: on `notifications/tools/list_changed`, a debounced re-list of one server.
//!
//! The listener that hears the notification runs on the connection's reader; it only tells
//! the core [`Debouncer`] and wakes the hook's own task. That task waits for the trailing edge
//! and runs the re-list there, so a re-list (a round-trip to the server) never runs on the
//! reader — which would stall the very pump its answer has to come through.
//!
//! For servers the runtime records the notification as staleness in the schedule first (the
//! next turn lists the server and answers fresh); the hook's re-list there takes only what is
//! still stale when it fires, so it is the background re-list for when no turn comes. Servers'
//! hooks fire on the leading edge too ([`RefreshHook::leading`]): a `list_changed` that comes
//! when no re-list runs is listed at once (up to the core's leading budget per window), and its
//! delta announced as soon as it is known.
//! The skill refresh uses the hook as it is.

use crate::sync::lock;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roster_core::{DebounceError, Debouncer};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::event::ServerEvent;
use super::notifications::{ListenerId, Notifications};

/// What the hook runs on the trailing edge: re-list that one server.
pub type Relist = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// The hook could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RefreshHookError {
    /// The debounce window is negative, NaN or too large.
    #[error("invalid debounce window: {0}")]
    Window(#[from] DebounceError),
    /// There is no tokio runtime to run the hook's task on.
    #[error("a RefreshHook must be created inside a tokio runtime")]
    NoRuntime,
}

struct Inner {
    debouncer: Mutex<Debouncer>,
    wake: Notify,
    stop: CancellationToken,
    cancelled: AtomicBool,
}

impl Inner {
    fn debouncer(&self) -> std::sync::MutexGuard<'_, Debouncer> {
        lock(&self.debouncer)
    }
}

/// A debounced re-list of one server on `notifications/tools/list_changed`.
///
/// Cheap to clone; all clones drive the same hook. Every method is safe to call from any
/// thread; [`RefreshHook::cancel`] is idempotent and stops the hook for good.
#[derive(Clone)]
pub struct RefreshHook {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RefreshHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefreshHook")
            .field("refresh_count", &self.refresh_count())
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl RefreshHook {
    /// The default trailing-edge window.
    pub const DEFAULT_WINDOW: Duration = Duration::from_millis(500);

    /// A hook with a window in seconds (as config and flags give it); negative is an error.
    pub fn new(window_secs: f64, relist: Relist) -> Result<Self, RefreshHookError> {
        let debouncer = Debouncer::from_secs_f64(window_secs)?;
        Self::start(debouncer, relist)
    }

    /// A hook with a window given as a [`Duration`].
    pub fn with_window(window: Duration, relist: Relist) -> Result<Self, RefreshHookError> {
        Self::start(Debouncer::new(window), relist)
    }

    /// A hook that re-lists at once (the leading edge) when no re-list runs and the leading
    /// budget of the last `window` is not spent, and coalesces the rest into one trailing
    /// re-list: a change is announced as soon as it is listed, a storm that comes faster than
    /// a listing costs two listings, a slower one at most four per window.
    pub fn leading(window: Duration, relist: Relist) -> Result<Self, RefreshHookError> {
        let mut debouncer = Debouncer::new(window);
        debouncer.set_leading(true);
        Self::start(debouncer, relist)
    }

    /// How much longer than the window a storm that never subsides may postpone its re-list:
    /// a server sending `list_changed` more often than the window still gets re-listed at
    /// least once every `MAX_WAIT_WINDOWS` windows.
    pub const MAX_WAIT_WINDOWS: u32 = 10;

    fn start(mut debouncer: Debouncer, relist: Relist) -> Result<Self, RefreshHookError> {
        let max_wait = debouncer.window().saturating_mul(Self::MAX_WAIT_WINDOWS);
        debouncer.set_max_wait(Some(max_wait));
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| RefreshHookError::NoRuntime)?;
        let inner = Arc::new(Inner {
            debouncer: Mutex::new(debouncer),
            wake: Notify::new(),
            stop: CancellationToken::new(),
            cancelled: AtomicBool::new(false),
        });
        runtime.spawn(run(inner.clone(), relist));
        Ok(RefreshHook { inner })
    }

    /// Listens to a server's notifications: each `list_changed` (tools, prompts or resources)
    /// schedules a re-list.
    pub fn subscribe(&self, notifications: &Notifications) -> ListenerId {
        let hook = self.clone();
        notifications.add_notification_listener(move |event| {
            if let ServerEvent::ListChanged { .. } = event {
                hook.schedule();
            }
        })
    }

    /// Schedules a re-list at the trailing edge (pushing back a pending one).
    pub fn schedule(&self) {
        if self.is_cancelled() {
            return;
        }
        self.inner.debouncer().on_notification(now().into_std());
        self.inner.wake.notify_one();
    }

    /// How many re-lists have fired.
    pub fn refresh_count(&self) -> u64 {
        self.inner.debouncer().refresh_count()
    }

    /// How many `list_changed` caused no re-list of their own: the debounce folded them into
    /// another's.
    pub fn coalesced_count(&self) -> u64 {
        self.inner.debouncer().coalesced_count()
    }

    /// Whether a re-list is waiting for its trailing edge.
    pub fn is_pending(&self) -> bool {
        self.inner.debouncer().is_pending()
    }

    /// Stops the hook: a pending re-list is dropped and later notifications are ignored.
    pub fn cancel(&self) {
        if self.inner.cancelled.swap(true, Ordering::SeqCst) {
            return;
        }
        self.inner.debouncer().cancel();
        self.inner.stop.cancel();
    }

    /// Whether [`RefreshHook::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }
}

/// Now on tokio's clock (the system clock, unless a test paused it). The hook keeps time on
/// tokio's clock so its sleeps and a paused test agree; the core debouncer takes plain
/// instants, converted where they are handed over.
fn now() -> Instant {
    Instant::now()
}

async fn run(inner: Arc<Inner>, relist: Relist) {
    loop {
        let deadline = inner.debouncer().deadline().map(Instant::from_std);
        let woken = async {
            match deadline {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = inner.wake.notified() => {}
                    }
                }
                None => inner.wake.notified().await,
            }
        };
        tokio::select! {
            _ = woken => {}
            _ = inner.stop.cancelled() => return,
        }
        let fire = inner.debouncer().poll(now().into_std());
        if let Some(fire) = fire {
            tracing::debug!(
                notifications = fire.notifications,
                "list_changed settled; re-listing"
            );
            tokio::select! {
                _ = relist() => {}
                _ = inner.stop.cancelled() => return,
            }
            inner.debouncer().completed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn counting() -> (Relist, Arc<AtomicU32>) {
        let count = Arc::new(AtomicU32::new(0));
        let c = count.clone();
        let relist: Relist = Arc::new(move || {
            let c = c.clone();
            Box::pin(async move {
                c.fetch_add(1, Ordering::SeqCst);
            })
        });
        (relist, count)
    }

    #[tokio::test]
    async fn negative_window_is_an_error() {
        let (relist, _) = counting();
        let err = RefreshHook::new(-0.5, relist).expect_err("negative window");
        assert!(matches!(err, RefreshHookError::Window(_)), "{err}");
    }

    #[test]
    fn needs_a_runtime() {
        let (relist, _) = counting();
        let err = RefreshHook::new(0.1, relist).expect_err("no runtime");
        assert!(matches!(err, RefreshHookError::NoRuntime));
    }

    // Time is paused in these tests: tokio's clock moves only when every task waits, so
    // after a sleep everything due by then has run, and nothing else could have.

    #[tokio::test(start_paused = true)]
    async fn a_burst_from_other_threads_fires_once() {
        let (relist, count) = counting();
        let window = Duration::from_millis(200);
        let hook = RefreshHook::with_window(window, relist).expect("hook");
        let notifications = Notifications::new();
        hook.subscribe(&notifications);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let n = notifications.clone();
                tokio::task::spawn_blocking(move || {
                    for _ in 0..50 {
                        n.dispatch_notification(
                            crate::servers::TOOLS_LIST_CHANGED,
                            &serde_json::Value::Null,
                        );
                        n.dispatch_notification("notifications/message", &serde_json::Value::Null);
                    }
                })
            })
            .collect();
        for t in threads {
            t.await.expect("thread");
        }
        assert!(hook.is_pending());
        // Paused time stood still while the threads ran: the trailing edge is one window on.
        tokio::time::advance(window - Duration::from_millis(1)).await;
        assert_eq!(
            count.load(Ordering::SeqCst),
            0,
            "not before the trailing edge"
        );
        assert!(hook.is_pending());
        tokio::time::sleep(window * 5).await;
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert_eq!(hook.refresh_count(), 1);
        assert!(!hook.is_pending());
    }

    #[tokio::test(start_paused = true)]
    async fn a_storm_longer_than_max_wait_still_relists() {
        let (relist, count) = counting();
        let window = Duration::from_millis(100);
        let hook = RefreshHook::with_window(window, relist).expect("hook");
        // Notifications every 10 ms keep the trailing edge away for the whole storm, which
        // lasts three times max_wait.
        let max_wait = window * RefreshHook::MAX_WAIT_WINDOWS;
        let started = tokio::time::Instant::now();
        while started.elapsed() < max_wait * 3 {
            hook.schedule();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            count.load(Ordering::SeqCst) >= 2,
            "a never-ending storm re-lists at least once per max_wait"
        );
        hook.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_is_idempotent_and_drops_the_pending_relist() {
        let (relist, count) = counting();
        let window = Duration::from_millis(100);
        let hook = RefreshHook::with_window(window, relist).expect("hook");
        hook.schedule();
        hook.cancel();
        hook.cancel();
        hook.schedule();
        tokio::time::sleep(window * 10).await;
        assert_eq!(count.load(Ordering::SeqCst), 0);
        assert_eq!(hook.refresh_count(), 0);
        assert!(hook.is_cancelled());
    }
}
