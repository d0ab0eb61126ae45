//! The per-server notification rate: what keeps one chatty server from taking the gateway down.
//!
//! Every notification a server sends costs roster a handler task, the inbox ring and an audit
//! line. A server writing them in a tight loop used to make that work pile up without bound
//! (gigabytes of queued handlers, every worker busy). The [`NotificationGate`] sits in the
//! transport, before rmcp sees a message, so a notification over the rate costs one parse and
//! a counter:
//!
//! - A token bucket per server: `notification_rate` per second, `notification_burst` at once.
//! - Over the rate, a `list_changed` is coalesced (one pending per kind, delivered when the
//!   bucket refills, or before the next answer to one of roster's requests, whichever comes
//!   first: the server is stale either way); any other notification is dropped.
//! - Drops are counted, and one `notifications/roster/dropped` entry per [`REPORT_PERIOD`] says
//!   how many (in the inbox, like any notification of that server, and in the log).
//! - A chatty server pays for its own chatter: past its rate, roster still reads it (its answers
//!   come among the notifications) but drops at most [`drop_pace`] of them a second, and stops
//!   reading it in between ([`NotificationGate::pause_after_drop`]). A server writing in a tight
//!   loop then blocks on its own full pipe or stream instead of costing roster a core; its own
//!   answers wait behind what it wrote (a call of it slows down), nobody else's do.
//!
//! What passes of the notifications roster itself acts on (log messages, progress, the
//! `list_changed`s, resource updates) is handled right there, on the reader, in the order the
//! server wrote it ([`NotificationGate::deliver`]): rmcp runs a task per notification, and a
//! burst handled that way reached the inbox out of order. The others (a cancellation of a
//! request of the server's, what the protocol's lifecycle uses) still go to rmcp.
//!
//! A server's requests (`ping`, `sampling/createMessage`, …) count against the same bucket:
//! each costs a handler task and an answer to write, and a server asking more than its rate
//! is flooding; one over the rate is dropped unanswered and counted. Responses are never
//! gated: they answer roster's own requests, so their number is roster's to bound.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::event::{ListKind, ServerEvent};
use super::notifications::Notifications;

/// How often at most a drop report is made while a server is over its rate.
pub const REPORT_PERIOD: Duration = Duration::from_secs(1);

/// The method of roster's own report of dropped notifications (recorded in the inbox under
/// the server's channel).
pub const DROPPED: &str = "notifications/roster/dropped";

/// How many notifications over its rate a server's reader drops a second at most before it
/// pauses: ten times the rate, at least [`MIN_DROP_PACE`]. Fast enough that an answer behind a
/// pipe full of notifications (64 KiB, some 400 of them) waits a fraction of a second; slow
/// enough that dropping costs roster about 1% of a core.
pub fn drop_pace(rate: NotificationRate) -> u32 {
    rate.per_second.saturating_mul(10).max(MIN_DROP_PACE)
}

/// The least [`drop_pace`].
pub const MIN_DROP_PACE: u32 = 2_000;

/// A paused reader reads again once this many drops' worth of time has passed: one timer per
/// slice, not one per notification.
const DROP_SLICE: u32 = 64;

/// The notifications that are coalesced instead of dropped.
pub(super) const COALESCED: [&str; 3] = [
    ListKind::ALL[0].method(),
    ListKind::ALL[1].method(),
    ListKind::ALL[2].method(),
];

/// How many notifications per second a server may send (`rate`), and at once (`burst`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NotificationRate {
    /// Sustained notifications per second.
    pub per_second: u32,
    /// How many may come at once after a quiet spell.
    pub burst: u32,
}

/// Where the notifications that pass a gate are handled (the connection's client side).
pub(crate) type Deliver = Arc<dyn Fn(&ServerEvent) + Send + Sync>;

/// The notifications handled where they are read ([`NotificationGate::deliver`]): those
/// roster acts on, whose order people and callers see.
const DELIVERED: [&str; 6] = [
    super::relay::LOG_MESSAGE,
    super::event::PROGRESS,
    super::event::RESOURCES_UPDATED,
    ListKind::ALL[0].method(),
    ListKind::ALL[1].method(),
    ListKind::ALL[2].method(),
];

/// What the gate says of one notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Hand it on.
    Pass,
    /// Held back: a `list_changed` to be delivered once the rate allows.
    Coalesced,
    /// Over the rate: counted and dropped.
    Dropped,
}

/// A token bucket for one connection's notifications, with the coalesced `list_changed`s and
/// the drop count since the last report.
pub(crate) struct NotificationGate {
    server: Arc<str>,
    rate: NotificationRate,
    tokens: f64,
    refilled: Instant,
    pending: BTreeSet<&'static str>,
    /// Whether `pending` holds anything, for those who answer past the gate ([`Holding`]).
    holding: Holding,
    dropped: u64,
    first_drop: Option<Instant>,
    /// Drops allowed before the reader pauses ([`drop_pace`] a second, a slice at once).
    drop_tokens: f64,
    drops_refilled: Instant,
    /// Until when the reader leaves this server's messages where they are.
    paused_until: Option<Instant>,
    /// Where what passes is handled, in order (`None`: rmcp's handler does, as for tests).
    deliver: Option<Deliver>,
    notifications: Arc<Notifications>,
}

/// Whether a gate holds a coalesced `list_changed`: read where an answer reaches its caller
/// without passing the gate (a call roster POSTs itself to a streamable HTTP server, whose
/// notifications may come on another stream), so that the answer waits until the gate handed
/// it on ([`super::http_direct`]). One atomic load per answer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Holding(Arc<AtomicBool>);

impl Holding {
    /// Whether a coalesced `list_changed` is held.
    pub(crate) fn any(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn set(&self, holding: bool) {
        self.0.store(holding, Ordering::Release);
    }
}

impl NotificationGate {
    pub(crate) fn new(
        server: Arc<str>,
        rate: NotificationRate,
        notifications: Arc<Notifications>,
    ) -> Self {
        NotificationGate {
            server,
            rate,
            tokens: f64::from(rate.burst.max(1)),
            refilled: Instant::now(),
            pending: BTreeSet::new(),
            holding: Holding::default(),
            dropped: 0,
            first_drop: None,
            drop_tokens: f64::from(DROP_SLICE),
            drops_refilled: Instant::now(),
            paused_until: None,
            deliver: None,
            notifications,
        }
    }

    /// Where this server's notifications go (what roster says about the server, too).
    pub(crate) fn notifications(&self) -> Arc<Notifications> {
        self.notifications.clone()
    }

    /// Handles what passes this gate with `deliver`, on the reader, in the server's order.
    pub(crate) fn deliver_to(&mut self, deliver: Deliver) {
        self.deliver = Some(deliver);
    }

    /// Whether what passes is handled where it is read ([`NotificationGate::deliver_to`]).
    pub(crate) fn delivering(&self) -> bool {
        self.deliver.is_some()
    }

    /// Whether a notification of `method` that passed is handled here, where it was read
    /// ([`NotificationGate::deliver`]), rather than by rmcp.
    pub(crate) fn delivers(&self, method: &str) -> bool {
        self.deliver.is_some() && DELIVERED.contains(&method)
    }

    /// Handles a notification that passed, where it was read.
    pub(crate) fn deliver(&self, event: &ServerEvent) {
        if let Some(deliver) = &self.deliver {
            deliver(event);
        }
    }

    /// Resolves when the reader may read this server again: at once, unless drops past
    /// [`drop_pace`] paused it ([`NotificationGate::pause_after_drop`]).
    pub(crate) fn paused(&self) -> impl Future<Output = ()> + Send + use<> {
        let until = self.paused_until;
        async move {
            if let Some(at) = until {
                tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
            }
        }
    }

    /// After a drop at `now`: when the reader may read this server again, if it must pause
    /// first (past [`drop_pace`] drops a second). Pausing leaves the rest in the server's pipe
    /// or stream, where it waits at no cost to roster.
    fn pause_after_drop(&mut self, now: Instant) -> Option<Instant> {
        let pace = f64::from(drop_pace(self.rate));
        let elapsed = now
            .saturating_duration_since(self.drops_refilled)
            .as_secs_f64();
        self.drops_refilled = now;
        self.drop_tokens = (self.drop_tokens + elapsed * pace).min(f64::from(DROP_SLICE));
        self.drop_tokens -= 1.0;
        if self.drop_tokens >= 0.0 {
            return None;
        }
        // Sleep until a whole slice is back (the debt included).
        let missing = f64::from(DROP_SLICE) - self.drop_tokens;
        Some(now + Duration::from_secs_f64(missing / pace))
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        let cap = f64::from(self.rate.burst.max(1));
        self.tokens = (self.tokens + elapsed * f64::from(self.rate.per_second)).min(cap);
    }

    fn take(&mut self) -> bool {
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Decides one notification of `method` arriving at `now`.
    pub(crate) fn admit(&mut self, method: &str, now: Instant) -> Admit {
        self.refill(now);
        if self.take() {
            return Admit::Pass;
        }
        if let Some(kind) = COALESCED.iter().find(|m| **m == method) {
            self.pending.insert(kind);
            self.holding.set(true);
            return Admit::Coalesced;
        }
        self.dropped += 1;
        self.first_drop.get_or_insert(now);
        self.paused_until = self.pause_after_drop(now);
        Admit::Dropped
    }

    /// When [`NotificationGate::tick`] has something to do: a coalesced `list_changed` to
    /// deliver, or a drop report to make. `None` when idle.
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        let report = self.first_drop.map(|at| at + REPORT_PERIOD);
        let release = (!self.pending.is_empty()).then(|| {
            let missing = (1.0 - self.tokens).max(0.0);
            let per_second = f64::from(self.rate.per_second.max(1));
            self.refilled + Duration::from_secs_f64(missing / per_second)
        });
        match (report, release) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Resolves at [`NotificationGate::wake_at`]; never while the gate is idle.
    pub(crate) fn until_wake(&self) -> impl Future<Output = ()> + Send + use<> {
        let wake = self.wake_at();
        async move {
            match wake {
                Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
                None => std::future::pending().await,
            }
        }
    }

    /// A coalesced `list_changed` method to hand on now, whatever the rate: an answer to one
    /// of roster's requests comes next, and what the server said before answering is seen
    /// before the answer — a listing the answer leads to (the next turn's) then answers it
    /// too, instead of a second listing when the bucket refills. At most one per kind.
    pub(crate) fn release_before_answer(&mut self) -> Option<&'static str> {
        self.release()
    }

    /// Whether this gate holds a coalesced `list_changed`, as others can ask.
    pub(crate) fn holding(&self) -> Holding {
        self.holding.clone()
    }

    fn release(&mut self) -> Option<&'static str> {
        let method = self.pending.pop_first();
        self.holding.set(!self.pending.is_empty());
        method
    }

    /// Makes a due drop report, and returns a coalesced `list_changed` method when the rate
    /// allows one now.
    pub(crate) fn tick(&mut self, now: Instant) -> Option<&'static str> {
        if self
            .first_drop
            .is_some_and(|at| now.saturating_duration_since(at) >= REPORT_PERIOD)
        {
            self.report(now);
        }
        if self.pending.is_empty() {
            return None;
        }
        self.refill(now);
        if !self.take() {
            return None;
        }
        self.release()
    }

    fn report(&mut self, now: Instant) {
        let dropped = std::mem::take(&mut self.dropped);
        let Some(since) = self.first_drop.take() else {
            return;
        };
        if dropped == 0 {
            return;
        }
        let period = now.saturating_duration_since(since);
        let message = format!(
            "server `{}` sent notifications faster than its limit of {} per second \
             (burst {}); roster dropped {dropped} of them in the last {:.1} s",
            self.server,
            self.rate.per_second,
            self.rate.burst,
            period.as_secs_f64()
        );
        tracing::warn!(server = %self.server, dropped, limit = self.rate.per_second, "{message}");
        self.notifications.count_dropped(dropped);
        let params: Value = json!({
            "dropped": dropped,
            "periodMs": u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
            "limitPerSecond": self.rate.per_second,
            "burst": self.rate.burst,
            "message": message,
        });
        self.notifications.dispatch_notification(DROPPED, &params);
    }
}

impl Drop for NotificationGate {
    /// A connection that ends mid-flood still says what it dropped.
    fn drop(&mut self) {
        self.report(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn gate(per_second: u32, burst: u32) -> (NotificationGate, Arc<Mutex<Vec<Value>>>) {
        let notifications = Notifications::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        notifications.add_notification_listener(move |event| {
            if event.method() == DROPPED {
                sink.lock().expect("lock").push(event.params().clone());
            }
        });
        let rate = NotificationRate { per_second, burst };
        (
            NotificationGate::new(Arc::from("chatty"), rate, notifications),
            seen,
        )
    }

    #[test]
    fn a_held_list_changed_goes_before_an_answer_whatever_the_rate() {
        use super::super::event::TOOLS_LIST_CHANGED;
        let (mut gate, _) = gate(1, 1);
        let start = gate.refilled;
        let holding = gate.holding();
        assert_eq!(gate.admit(TOOLS_LIST_CHANGED, start), Admit::Pass);
        assert!(!holding.any());
        assert_eq!(gate.release_before_answer(), None);
        assert_eq!(gate.admit(TOOLS_LIST_CHANGED, start), Admit::Coalesced);
        assert!(holding.any(), "others see that the gate holds one");
        // The bucket is empty, yet an answer takes it.
        assert_eq!(gate.release_before_answer(), Some(TOOLS_LIST_CHANGED));
        assert!(!holding.any());
        assert_eq!(gate.release_before_answer(), None);
        assert_eq!(gate.wake_at(), None, "nothing left to release later");
    }

    #[test]
    fn a_burst_passes_then_the_rest_is_dropped_and_reported_once_per_period() {
        let (mut gate, seen) = gate(10, 5);
        let start = gate.refilled;
        let passed = (0..1000)
            .filter(|_| gate.admit("notifications/message", start) == Admit::Pass)
            .count();
        assert_eq!(passed, 5);
        assert!(seen.lock().expect("lock").is_empty());
        assert_eq!(gate.wake_at(), Some(start + REPORT_PERIOD));
        assert_eq!(gate.tick(start + REPORT_PERIOD), None);
        let reports = seen.lock().expect("lock").clone();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert_eq!(reports[0]["dropped"], 995);
        assert!(
            reports[0]["message"]
                .as_str()
                .is_some_and(|m| m.contains("chatty") && m.contains("10 per second")),
            "{reports:?}"
        );
        assert_eq!(gate.wake_at(), None);
        assert_eq!(gate.notifications.dropped(), 995);
        // The bucket refilled meanwhile: 10 per second for the second that passed (capped at 5).
        let later = start + REPORT_PERIOD;
        assert_eq!(gate.admit("notifications/message", later), Admit::Pass);
    }

    #[test]
    fn list_changed_over_the_rate_is_coalesced_and_delivered_once_the_bucket_refills() {
        let (mut gate, seen) = gate(2, 1);
        let start = gate.refilled;
        assert_eq!(
            gate.admit(super::super::event::TOOLS_LIST_CHANGED, start),
            Admit::Pass
        );
        for _ in 0..100 {
            assert_eq!(
                gate.admit(super::super::event::TOOLS_LIST_CHANGED, start),
                Admit::Coalesced
            );
        }
        let wake = gate.wake_at().expect("a release is due");
        assert_eq!(wake, start + Duration::from_millis(500));
        assert_eq!(gate.tick(start), None, "not before the bucket refills");
        assert_eq!(
            gate.tick(wake),
            Some(super::super::event::TOOLS_LIST_CHANGED)
        );
        assert_eq!(
            gate.tick(wake + Duration::from_secs(5)),
            None,
            "one per storm"
        );
        assert!(seen.lock().expect("lock").is_empty(), "nothing was dropped");
    }

    #[test]
    fn a_gate_dropped_mid_flood_still_reports() {
        let (mut gate, seen) = gate(1, 1);
        let start = gate.refilled;
        for _ in 0..3 {
            gate.admit("notifications/progress", start);
        }
        drop(gate);
        assert_eq!(seen.lock().expect("lock")[0]["dropped"], 2);
    }
}
