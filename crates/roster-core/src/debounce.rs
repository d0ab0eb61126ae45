//! A debouncer for one server's `notifications/tools/list_changed`.
//!
//! A server that changes many tools at once tends to send a storm of notifications; roster
//! re-lists once, after the storm subsides. Each notification (re)starts the countdown; when
//! `window` passes without another one, [`Debouncer::poll`] returns one [`Fire`].
//!
//! With the leading edge on ([`Debouncer::set_leading`]), a notification fires at once when
//! no refresh is running and fewer than [`LEADING_BUDGET`] fired at once in the last window —
//! a change is announced as soon as it is listed, not a window later, and so is the next one a
//! client makes after seeing it. What arrives while a refresh runs (the caller says when it is
//! done with [`Debouncer::completed`]), or past the budget, is coalesced into one trailing
//! fire: a storm that arrives faster than a listing costs two refreshes, a slower one at most
//! [`LEADING_BUDGET`] + 1 per window (more only when it outlasts `max_wait`).
//!
//! The window is captured when a refresh is scheduled (the first notification of a storm):
//! changing it with [`Debouncer::set_window`] while a countdown runs affects the next storm,
//! not the running one. Time is an argument, so the runtime drives this from a tokio timer set
//! to [`Debouncer::deadline`] and tests drive it without sleeping.

use std::time::{Duration, Instant};

use crate::schedule::saturating_add;

/// The window used when the config sets none: 500 ms.
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(500);

/// How many refreshes may fire on the leading edge within one window.
pub const LEADING_BUDGET: usize = 3;

/// A debounce window that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DebounceError {
    /// The window is below zero.
    #[error("debounce window must be a non-negative number of seconds, got {0}")]
    Negative(f64),
    /// The window is NaN or infinite.
    #[error("debounce window must be a finite number of seconds, got {0}")]
    NotFinite(f64),
    /// The window does not fit a duration.
    #[error("debounce window of {0} seconds is too large")]
    TooLarge(f64),
}

/// One refresh to run: the storm it coalesces has subsided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fire {
    /// How many notifications this refresh coalesces (at least 1).
    pub notifications: u64,
    /// When the first notification of the storm arrived.
    pub first: Instant,
    /// When the last notification of the storm arrived.
    pub last: Instant,
}

/// A countdown that is running.
#[derive(Debug, Clone, Copy)]
struct Pending {
    window: Duration,
    max_wait: Option<Duration>,
    first: Instant,
    last: Instant,
    notifications: u64,
    /// The leading edge: fires at `first`, whatever follows before it is polled.
    leading: bool,
}

impl Pending {
    fn deadline(&self) -> Instant {
        if self.leading {
            return self.first;
        }
        let trailing = saturating_add(self.last, self.window);
        match self.max_wait {
            Some(max_wait) => trailing.min(saturating_add(self.first, max_wait)),
            None => trailing,
        }
    }
}

/// Debounce state for one server: trailing edge, and the leading edge when set.
#[derive(Debug, Clone)]
pub struct Debouncer {
    window: Duration,
    max_wait: Option<Duration>,
    leading: bool,
    /// When the last [`LEADING_BUDGET`] leading fires were, each with the window it had.
    leading_fires: [Option<(Instant, Duration)>; LEADING_BUDGET],
    /// A fired refresh has not [`Debouncer::completed`] yet.
    in_flight: bool,
    pending: Option<Pending>,
    refreshes: u64,
    coalesced: u64,
}

impl Default for Debouncer {
    /// A debouncer with the default 500 ms window.
    fn default() -> Self {
        Debouncer::new(DEFAULT_WINDOW)
    }
}

impl Debouncer {
    /// A debouncer with `window` and nothing pending.
    pub fn new(window: Duration) -> Self {
        Debouncer {
            window,
            max_wait: None,
            leading: false,
            leading_fires: [None; LEADING_BUDGET],
            in_flight: false,
            pending: None,
            refreshes: 0,
            coalesced: 0,
        }
    }

    /// A debouncer with a window given in seconds, as config files and flags give it.
    /// A negative, NaN, infinite or overflowing value is an error naming the value.
    pub fn from_secs_f64(secs: f64) -> Result<Self, DebounceError> {
        Ok(Debouncer::new(window_from_secs_f64(secs)?))
    }

    /// The window the next storm will be scheduled with.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Changes the window for storms scheduled from now on; a running countdown keeps the
    /// window it was scheduled with.
    pub fn set_window(&mut self, window: Duration) {
        self.window = window;
    }

    /// The longest a storm may postpone its refresh, counted from its first notification
    /// (`None`, the default, means a storm that never subsides never fires). Captured, like
    /// the window, when a refresh is scheduled.
    pub fn max_wait(&self) -> Option<Duration> {
        self.max_wait
    }

    /// Sets [`Debouncer::max_wait`] for storms scheduled from now on.
    pub fn set_max_wait(&mut self, max_wait: Option<Duration>) {
        self.max_wait = max_wait;
    }

    /// Turns the leading edge on or off (off by default): on, a notification fires at once
    /// when no refresh is running and the leading budget of the last window is not spent; the
    /// rest waits for the trailing edge.
    pub fn set_leading(&mut self, leading: bool) {
        self.leading = leading;
    }

    /// Whether the leading edge is on.
    pub fn leading(&self) -> bool {
        self.leading
    }

    /// A notification arrived at `now`: schedules a refresh `window` later, or pushes the
    /// running countdown back to `now + window` (the window it was scheduled with). With the
    /// leading edge on, no refresh running and budget left, the refresh is due at once.
    pub fn on_notification(&mut self, now: Instant) {
        match &mut self.pending {
            Some(pending) => {
                // Keep `last` monotone should a caller hand in an earlier instant.
                pending.last = pending.last.max(now);
                pending.notifications = pending.notifications.saturating_add(1);
            }
            None => {
                let leading = self.leading && !self.in_flight && self.leading_budget_left(now);
                self.pending = Some(Pending {
                    window: self.window,
                    max_wait: self.max_wait,
                    first: now,
                    last: now,
                    notifications: 1,
                    leading,
                });
            }
        }
    }

    /// Whether fewer than [`LEADING_BUDGET`] refreshes fired on the leading edge within the
    /// window before `now`.
    fn leading_budget_left(&self, now: Instant) -> bool {
        self.leading_fires
            .iter()
            .any(|fire| fire.is_none_or(|(at, window)| now >= saturating_add(at, window)))
    }

    /// The refresh a fire started is done: a notification from now on may fire at once again.
    /// A caller using the leading edge calls this after each refresh it runs.
    pub fn completed(&mut self) {
        self.in_flight = false;
    }

    /// When the pending refresh fires, if one is pending: set a timer for it and then
    /// [`Debouncer::poll`].
    pub fn deadline(&self) -> Option<Instant> {
        self.pending.as_ref().map(Pending::deadline)
    }

    /// Whether a refresh is scheduled.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// The refresh to run at `now`, once: `Some` when `now` has reached the deadline, after
    /// which nothing is pending until the next notification.
    pub fn poll(&mut self, now: Instant) -> Option<Fire> {
        let pending = self.pending?;
        if now < pending.deadline() {
            return None;
        }
        self.pending = None;
        self.in_flight = true;
        if pending.leading {
            // The oldest leading fire gives its place to this one.
            let oldest = self
                .leading_fires
                .iter_mut()
                .min_by_key(|fire| fire.map(|(at, _)| at))
                .expect("the budget is not empty");
            *oldest = Some((now, pending.window));
        }
        self.refreshes = self.refreshes.saturating_add(1);
        self.coalesced = self
            .coalesced
            .saturating_add(pending.notifications.saturating_sub(1));
        Some(Fire {
            notifications: pending.notifications,
            first: pending.first,
            last: pending.last,
        })
    }

    /// Drops a pending refresh (the server disconnected or is being re-listed anyway).
    /// Idempotent; fired refreshes stay counted.
    pub fn cancel(&mut self) {
        self.pending = None;
    }

    /// How many refreshes have fired.
    pub fn refresh_count(&self) -> u64 {
        self.refreshes
    }

    /// How many notifications caused no refresh of their own: each fired refresh coalesced
    /// all but one of its storm's notifications (a cancelled storm counts nothing).
    pub fn coalesced_count(&self) -> u64 {
        self.coalesced
    }
}

/// A window from seconds, rejecting what a user could mistype: negative, NaN, infinite, huge.
pub fn window_from_secs_f64(secs: f64) -> Result<Duration, DebounceError> {
    if secs.is_nan() || secs.is_infinite() {
        return Err(DebounceError::NotFinite(secs));
    }
    if secs < 0.0 {
        return Err(DebounceError::Negative(secs));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| DebounceError::TooLarge(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_storm_counts_all_but_its_one_refresh_as_coalesced() {
        let mut d = Debouncer::default();
        let t0 = Instant::now();
        d.on_notification(t0);
        assert!(d.poll(t0 + ms(500)).is_some());
        assert_eq!(d.coalesced_count(), 0, "a lone notification saves nothing");
        for n in 0..5 {
            d.on_notification(t0 + ms(1000 + n));
        }
        assert!(d.poll(t0 + ms(2000)).is_some());
        assert_eq!((d.refresh_count(), d.coalesced_count()), (2, 4));
        d.on_notification(t0 + ms(3000));
        d.on_notification(t0 + ms(3001));
        d.cancel();
        assert_eq!(d.coalesced_count(), 4, "a cancelled storm fired nothing");
    }

    #[test]
    fn one_notification_fires_once_after_the_window() {
        let mut d = Debouncer::default();
        let t0 = Instant::now();
        assert_eq!(d.deadline(), None);
        assert_eq!(d.poll(t0), None);
        d.on_notification(t0);
        assert_eq!(d.deadline(), Some(t0 + ms(500)));
        assert_eq!(d.poll(t0 + ms(499)), None);
        let fire = d.poll(t0 + ms(500)).expect("fires at the deadline");
        assert_eq!(fire.notifications, 1);
        assert_eq!((fire.first, fire.last), (t0, t0));
        assert_eq!(d.poll(t0 + ms(10_000)), None, "fires once");
        assert_eq!(d.refresh_count(), 1);
        assert!(!d.is_pending());
    }

    #[test]
    fn each_notification_pushes_the_deadline_back() {
        let mut d = Debouncer::new(ms(100));
        let t0 = Instant::now();
        d.on_notification(t0);
        d.on_notification(t0 + ms(90));
        assert_eq!(d.deadline(), Some(t0 + ms(190)));
        assert_eq!(d.poll(t0 + ms(100)), None);
        let fire = d.poll(t0 + ms(190)).expect("fires after the last");
        assert_eq!(fire.notifications, 2);
        assert_eq!(fire.last, t0 + ms(90));
    }

    #[test]
    fn a_running_countdown_keeps_the_window_it_was_scheduled_with() {
        let mut d = Debouncer::new(ms(500));
        let t0 = Instant::now();
        d.on_notification(t0);
        d.set_window(ms(2_000));
        assert_eq!(d.window(), ms(2_000));
        d.on_notification(t0 + ms(100));
        assert_eq!(d.deadline(), Some(t0 + ms(600)));
        assert!(d.poll(t0 + ms(600)).is_some());
        d.on_notification(t0 + ms(700));
        assert_eq!(
            d.deadline(),
            Some(t0 + ms(2_700)),
            "the next storm uses the new one"
        );
    }

    #[test]
    fn max_wait_bounds_an_endless_storm() {
        let mut d = Debouncer::new(ms(100));
        d.set_max_wait(Some(ms(1_000)));
        let t0 = Instant::now();
        let mut fired = Vec::new();
        for i in 0..30u64 {
            let now = t0 + ms(i * 50);
            if let Some(fire) = d.poll(now) {
                fired.push((now, fire.notifications));
            }
            d.on_notification(now);
        }
        assert_eq!(fired[0], (t0 + ms(1_000), 20));
        assert_eq!(fired.len(), 1);
        assert_eq!(d.max_wait(), Some(ms(1_000)));
    }

    #[test]
    fn without_max_wait_an_endless_storm_keeps_postponing() {
        let mut d = Debouncer::new(ms(100));
        let t0 = Instant::now();
        for i in 0..100u64 {
            let now = t0 + ms(i * 50);
            assert_eq!(d.poll(now), None);
            d.on_notification(now);
        }
        assert_eq!(d.refresh_count(), 0);
    }

    #[test]
    fn cancel_is_idempotent_and_drops_the_pending_fire() {
        let mut d = Debouncer::default();
        let t0 = Instant::now();
        d.cancel();
        d.on_notification(t0);
        d.cancel();
        d.cancel();
        assert_eq!(d.deadline(), None);
        assert_eq!(d.poll(t0 + ms(1_000)), None);
        assert_eq!(d.refresh_count(), 0);
        d.on_notification(t0 + ms(1_000));
        let fire = d
            .poll(t0 + ms(1_500))
            .expect("a new storm after cancel fires");
        assert_eq!(
            fire.notifications, 1,
            "cancelled notifications are not carried over"
        );
        d.cancel();
        assert_eq!(d.refresh_count(), 1);
    }

    #[test]
    fn a_zero_window_fires_at_the_notification_instant() {
        let mut d = Debouncer::from_secs_f64(0.0).expect("zero is allowed");
        let t0 = Instant::now();
        d.on_notification(t0);
        assert!(d.poll(t0).is_some());
    }

    #[test]
    fn bad_windows_are_errors_naming_the_value() {
        let err = Debouncer::from_secs_f64(-0.5).expect_err("negative");
        assert_eq!(
            err.to_string(),
            "debounce window must be a non-negative number of seconds, got -0.5"
        );
        let err = Debouncer::from_secs_f64(f64::NAN).expect_err("NaN");
        assert!(err.to_string().contains("NaN"), "{err}");
        let err = Debouncer::from_secs_f64(f64::INFINITY).expect_err("infinite");
        assert!(err.to_string().contains("inf"), "{err}");
        let err = Debouncer::from_secs_f64(f64::NEG_INFINITY).expect_err("-infinite");
        assert!(err.to_string().contains("-inf"), "{err}");
        let err = Debouncer::from_secs_f64(1e30).expect_err("too large");
        assert!(
            err.to_string().contains("1000000000000000000000000000000"),
            "{err}"
        );
        let d = Debouncer::from_secs_f64(-0.0).expect("negative zero is zero");
        assert_eq!(d.window(), Duration::ZERO);
        let d = Debouncer::from_secs_f64(0.25).expect("a quarter second");
        assert_eq!(d.window(), ms(250));
    }

    #[test]
    fn with_the_leading_edge_a_quiet_server_fires_at_once_and_a_fast_storm_costs_two() {
        let mut d = Debouncer::new(ms(500));
        d.set_leading(true);
        let t0 = Instant::now();
        d.on_notification(t0);
        assert_eq!(d.deadline(), Some(t0), "a lone change is due at once");
        d.on_notification(t0);
        let fire = d.poll(t0).expect("the leading edge");
        assert_eq!(
            fire.notifications, 2,
            "what came before the fire rides on it"
        );
        // The rest of the storm arrives while that refresh runs: one trailing fire.
        for i in 1..=1000u64 {
            d.on_notification(t0 + Duration::from_micros(i * 100));
        }
        d.completed();
        let last = t0 + Duration::from_micros(100_000);
        assert_eq!(d.deadline(), Some(last + ms(500)));
        assert_eq!(d.poll(last + ms(499)), None);
        let fire = d.poll(last + ms(500)).expect("the trailing edge");
        assert_eq!(fire.notifications, 1000);
        assert_eq!(d.refresh_count(), 2, "a fast storm costs two refreshes");
        d.completed();
        // The next change, once that refresh is done, fires at once.
        let later = last + ms(1_000);
        d.on_notification(later);
        assert_eq!(d.deadline(), Some(later));
    }

    #[test]
    fn changes_one_after_another_fire_at_once_up_to_the_budget_per_window() {
        let mut d = Debouncer::new(ms(500));
        d.set_leading(true);
        let t0 = Instant::now();
        // A client sees each change, and the server makes the next one 5 ms later.
        for round in 0..LEADING_BUDGET as u64 {
            let at = t0 + ms(round * 5);
            d.on_notification(at);
            assert_eq!(d.deadline(), Some(at), "change {round} is due at once");
            assert!(d.poll(at).is_some());
            d.completed();
        }
        // The budget of this window is spent: the next change waits for the trailing edge.
        let past = t0 + ms(LEADING_BUDGET as u64 * 5);
        d.on_notification(past);
        assert_eq!(d.deadline(), Some(past + ms(500)));
        assert!(d.poll(past + ms(500)).is_some());
        d.completed();
        // A window after the first leading fire, its place in the budget is free again.
        let next = past + ms(501);
        d.on_notification(next);
        assert_eq!(d.deadline(), Some(next));
    }

    #[test]
    fn a_change_during_a_refresh_waits_for_the_trailing_edge() {
        let mut d = Debouncer::new(ms(500));
        d.set_leading(true);
        let t0 = Instant::now();
        d.on_notification(t0);
        assert!(d.poll(t0).is_some());
        d.on_notification(t0 + ms(1));
        assert_eq!(
            d.deadline(),
            Some(t0 + ms(501)),
            "the running refresh may not have seen it"
        );
    }

    proptest! {
        #[test]
        fn a_storm_within_the_window_fires_exactly_one_refresh(
            window_ms in 1u64..5_000,
            gaps in prop::collection::vec(0.0f64..1.0, 0..200),
        ) {
            let window = ms(window_ms);
            let mut d = Debouncer::new(window);
            let t0 = Instant::now();
            let mut now = t0;
            d.on_notification(now);
            for fraction in &gaps {
                // Every gap is strictly shorter than the window.
                now += window.mul_f64(*fraction).min(window - Duration::from_nanos(1));
                prop_assert_eq!(d.poll(now), None);
                d.on_notification(now);
            }
            let deadline = d.deadline().expect("pending");
            prop_assert_eq!(deadline, now + window);
            prop_assert_eq!(d.poll(deadline - Duration::from_nanos(1)), None);
            let fire = d.poll(deadline).expect("fires once the storm subsides");
            prop_assert_eq!(fire.notifications, gaps.len() as u64 + 1);
            prop_assert_eq!((fire.first, fire.last), (t0, now));
            prop_assert_eq!(d.poll(deadline + window), None);
            prop_assert_eq!(d.refresh_count(), 1);
        }

        #[test]
        fn notifications_further_apart_than_the_window_fire_separately(
            window_ms in 0u64..5_000,
            extra_ms in prop::collection::vec(0u64..5_000, 1..50),
        ) {
            let window = ms(window_ms);
            let mut d = Debouncer::new(window);
            let mut now = Instant::now();
            d.on_notification(now);
            for extra in &extra_ms {
                now += window + ms(*extra);
                let fire = d.poll(now).expect("the previous one fired");
                prop_assert_eq!(fire.notifications, 1);
                d.on_notification(now);
            }
            prop_assert!(d.poll(now + window).is_some());
            prop_assert_eq!(d.refresh_count(), extra_ms.len() as u64 + 1);
        }

        #[test]
        fn negative_windows_are_rejected(secs in -1e9f64..-1e-12) {
            let err = Debouncer::from_secs_f64(secs).expect_err("negative");
            prop_assert!(err.to_string().contains(&secs.to_string()));
        }
    }
}
