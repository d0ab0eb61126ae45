//! When each server's listing must be taken: TTL, staleness, backoff after failures, crash loops.
//!
//! A [`ServerSchedule`] is the listing state of one server; a [`Schedule`] holds one per
//! configured server in config order. Nothing here dials anything: the runtime asks
//! [`Schedule::due`] at a turn's start, lists the servers it names, and reports back with
//! [`ServerSchedule::listed`] or [`ServerSchedule::failed`]. Time is always an argument.
//!
//! The rules:
//! - A listing is held until `at + min(refresh_interval, max(server ttl, min_ttl))`: a server's
//!   `ttlMs` shorter than `min_ttl` (0 included) counts as `min_ttl`, so however many requests
//!   come, a server is listed again at most once per `min_ttl` for its TTL.
//! - A turn waits only for what it needs ([`ServerSchedule::turn_waits`]): a server never
//!   listed, or one that announced a change no finished listing answers. A listing that merely
//!   expired is served as held and revalidated in the background (stale-while-revalidate); a
//!   failed server is retried in the background when its backoff allows. A server a turn
//!   waited for in vain ([`ServerSchedule::waited_in_vain`]) is not waited for again until a
//!   listing of it completes (or fails).
//! - A server marked stale is due until it is listed again; marking it stale again before then
//!   costs nothing more, so repeated `refresh_tools` calls cost one listing per server.
//! - A server's `list_changed` marks it stale at once. A listing answers only for the changes
//!   announced before it started: the runtime takes a [`ListingTicket`] as it sends `tools/list`
//!   and hands it back with [`ServerSchedule::listed_with`]; a change announced while the listing
//!   was in flight leaves the server stale, so the next turn lists it again. Prompts and
//!   resources (the *offerings*) keep the same marks of their own.
//! - A server whose listing failed (or whose connection dropped) has no listing. It is due as
//!   soon as its backoff allows, whatever the refresh interval; marking it stale does not cut
//!   the backoff short.
//! - The backoff grows from `initial` by `factor` per consecutive failure up to `max`, with a
//!   deterministic jitter (see [`BackoffConfig::bounds`]).
//! - The failure count resets only once the server has stayed healthy for `stable_period`
//!   after a success: a server that lists fine and then crashes a moment later keeps climbing.
//! - After `crash_loop_after` consecutive failures the server is parked in
//!   [`ListingState::CrashLoop`] and retried only at the longest backoff.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long to wait before retrying a server whose listing failed.
///
/// The wait before attempt `n` (the `n`-th consecutive failure) is built from the *base*
/// `min(initial * factor^(n-1), max)`, scaled by a jitter factor in `[1 - jitter, 1 + jitter)`
/// and never more than `max`. [`BackoffConfig::bounds`] gives the exact interval.
#[derive(Debug, Clone, PartialEq)]
pub struct BackoffConfig {
    /// The wait after the first failure (before jitter). Default 250 ms.
    pub initial: Duration,
    /// The longest wait; also the wait of a server in a crash loop. Default 60 s.
    pub max: Duration,
    /// Growth per consecutive failure. Default 2.0. Values below 1 (or not finite) act as 1.
    pub factor: f64,
    /// Relative jitter: 0.2 means ±20%. Default 0.2. Clamped to `[0, 1]`.
    pub jitter: f64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_millis(250),
            max: Duration::from_secs(60),
            factor: 2.0,
            jitter: 0.2,
        }
    }
}

impl BackoffConfig {
    /// The wait before retry `attempt` (1-based; 0 is treated as 1) without jitter:
    /// `min(initial * factor^(attempt-1), max)`.
    pub fn base(&self, attempt: u32) -> Duration {
        Duration::from_secs_f64(self.base_secs(attempt)).min(self.max)
    }

    /// The interval every jittered wait for `attempt` falls in:
    /// `[base * (1 - jitter), min(base * (1 + jitter), max)]`.
    pub fn bounds(&self, attempt: u32) -> (Duration, Duration) {
        let base = self.base_secs(attempt);
        let jitter = self.effective_jitter();
        (
            self.secs_to_duration(base * (1.0 - jitter)),
            self.secs_to_duration(base * (1.0 + jitter)),
        )
    }

    /// The jittered wait before retry `attempt`. The same `seed` and `attempt` always give the
    /// same wait, so servers with different seeds spread their retries without a random source.
    pub fn delay(&self, attempt: u32, seed: u64) -> Duration {
        let spread = 2.0 * unit_interval(seed, attempt) - 1.0; // in [-1, 1)
        let scale = 1.0 + self.effective_jitter() * spread;
        self.secs_to_duration(self.base_secs(attempt) * scale)
    }

    /// The jittered longest wait, used for a server parked in a crash loop.
    fn parked_delay(&self, attempt: u32, seed: u64) -> Duration {
        let spread = 2.0 * unit_interval(seed, attempt) - 1.0;
        let scale = 1.0 + self.effective_jitter() * spread;
        self.secs_to_duration(self.max.as_secs_f64() * scale)
    }

    fn base_secs(&self, attempt: u32) -> f64 {
        let max = self.max.as_secs_f64();
        let initial = self.initial.as_secs_f64().min(max);
        let factor = if self.factor.is_finite() && self.factor >= 1.0 {
            self.factor
        } else {
            1.0
        };
        // Past 2^31 failures the exponent would overflow `powi`; the cap applies long before.
        let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let base = initial * factor.powi(exponent);
        if base.is_finite() { base.min(max) } else { max }
    }

    fn effective_jitter(&self) -> f64 {
        if self.jitter.is_nan() {
            0.0
        } else {
            self.jitter.clamp(0.0, 1.0)
        }
    }

    fn secs_to_duration(&self, secs: f64) -> Duration {
        let secs = secs.clamp(0.0, self.max.as_secs_f64());
        // Converting back from f64 may round a nanosecond past `max`.
        Duration::from_secs_f64(secs).min(self.max)
    }
}

/// Everything that decides when a server's listing is taken again.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleConfig {
    /// How long a listing is held when the server gives no shorter TTL. Default 1 hour.
    pub refresh_interval: Duration,
    /// Retry waits after failures.
    pub backoff: BackoffConfig,
    /// How long a server must stay healthy after a success before its failure count (and so its
    /// backoff) resets. Default 60 s.
    pub stable_period: Duration,
    /// Consecutive failures (without a stable period between them) after which the server is
    /// parked in a crash loop. Default 5. `0` turns crash-loop parking off.
    pub crash_loop_after: u32,
    /// The shortest a listing is held whatever the server's own `ttlMs` says (a shorter one, 0
    /// included, counts as this): a server is revalidated at most once per `min_ttl` for its
    /// TTL. Default 5 s. The refresh interval still caps the hold.
    pub min_ttl: Duration,
}

/// The default [`ScheduleConfig::min_ttl`].
pub const DEFAULT_MIN_TTL: Duration = Duration::from_secs(5);

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            refresh_interval: Duration::from_secs(60 * 60),
            backoff: BackoffConfig::default(),
            stable_period: Duration::from_secs(60),
            crash_loop_after: 5,
            min_ttl: DEFAULT_MIN_TTL,
        }
    }
}

/// A schedule setting that cannot be used as given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleConfigError {
    /// The backoff factor is below 1 or not a number.
    #[error("backoff factor must be a number of at least 1, got {0}")]
    Factor(f64),
    /// The jitter is outside `[0, 1]` or not a number.
    #[error("backoff jitter must be between 0 and 1 (0.2 means ±20%), got {0}")]
    Jitter(f64),
    /// The first wait is longer than the longest wait.
    #[error("initial backoff ({initial:?}) must not exceed the maximum backoff ({max:?})")]
    InitialAboveMax {
        /// The configured first wait.
        initial: Duration,
        /// The configured longest wait.
        max: Duration,
    },
}

impl ScheduleConfig {
    /// Checks the settings a config file or flag could get wrong. The schedule itself never
    /// panics on a bad setting (it clamps), but a user should hear about one.
    pub fn validate(&self) -> Result<(), ScheduleConfigError> {
        let b = &self.backoff;
        if !(b.factor.is_finite() && b.factor >= 1.0) {
            return Err(ScheduleConfigError::Factor(b.factor));
        }
        if !(0.0..=1.0).contains(&b.jitter) {
            return Err(ScheduleConfigError::Jitter(b.jitter));
        }
        if b.initial > b.max {
            return Err(ScheduleConfigError::InitialAboveMax {
                initial: b.initial,
                max: b.max,
            });
        }
        Ok(())
    }
}

/// Where one server's listing stands.
#[derive(Debug, Clone, PartialEq)]
pub enum ListingState {
    /// No listing was ever taken; due now.
    NeverListed,
    /// Listed at `at` and held until `valid_until` (`at + min(refresh_interval, server ttl)`).
    Listed {
        /// When the listing was taken.
        at: Instant,
        /// When it expires and the server is due again.
        valid_until: Instant,
    },
    /// Must be listed again before its tools are trusted; due now.
    Stale {
        /// When the listing now considered stale was taken, if one ever was.
        last_listed: Option<Instant>,
    },
    /// The last listing failed or the connection dropped: no listing, due at `next_try`.
    Failed {
        /// Consecutive failures so far (1 after the first).
        attempt: u32,
        /// When the backoff allows the next try.
        next_try: Instant,
        /// What went wrong, for status and logs.
        error: String,
    },
    /// Failed `crash_loop_after` times without a stable period: parked, retried only at the
    /// longest backoff (a wait in `[max * (1 - jitter), max]`).
    CrashLoop {
        /// Consecutive failures so far.
        failures: u32,
        /// When the next try is allowed.
        next_try: Instant,
        /// What went wrong last, for status and logs.
        error: String,
    },
}

/// The `ttlMs` a listing is held for, given what the server sent and whether it announces its
/// changes with `notifications/tools/list_changed`.
///
/// SDKs send `ttlMs: 0` ("immediately stale") by default. Honoured literally, a server that
/// also announces every change would be re-listed at every turn — the re-list-on-every-request
/// pattern roster exists to avoid — though its notification already says when the listing
/// goes stale. So a zero TTL from an announcing server is no hint at all (the refresh interval
/// governs); any other TTL, and a zero TTL from a server that announces nothing, is honoured.
pub fn effective_ttl(ttl: Option<Duration>, announces_changes: bool) -> Option<Duration> {
    match ttl {
        Some(ttl) if ttl.is_zero() && announces_changes => None,
        other => other,
    }
}

/// Which announced changes a listing answers for: the count of stale marks when it started.
/// Taken with [`ServerSchedule::listing_ticket`] (or [`ServerSchedule::offerings_ticket`])
/// before the request goes out; tickets order like the marks they count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListingTicket(u64);

/// Stale marks against the listings that answered them. Marks count up; `covered` is the
/// highest ticket of a finished listing, so `marked > covered` says a change is unanswered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Marks {
    marked: u64,
    covered: u64,
    /// A turn waited for a listing and gave up: no turn waits again until one finishes.
    waited_in_vain: bool,
}

impl Marks {
    fn mark(&mut self) {
        self.marked = self.marked.saturating_add(1);
    }

    fn ticket(&self) -> ListingTicket {
        ListingTicket(self.marked)
    }

    fn answered(&mut self, ticket: ListingTicket) {
        self.covered = self.covered.max(ticket.0);
        self.waited_in_vain = false;
    }

    fn covers(&self, ticket: ListingTicket) -> bool {
        self.covered >= ticket.0
    }

    fn unanswered(&self) -> bool {
        self.marked > self.covered
    }
}

/// The listing state of one server and the history that drives its backoff.
#[derive(Debug, Clone)]
pub struct ServerSchedule {
    config: ScheduleConfig,
    jitter_seed: u64,
    state: ListingState,
    failures: u32,
    /// The first success since the last failure; the failure count resets once `stable_period`
    /// has passed since then without a new failure.
    healthy_since: Option<Instant>,
    last_listed: Option<Instant>,
    tools: Marks,
    offerings: Marks,
}

impl ServerSchedule {
    /// A server never listed. `jitter_seed` makes this server's retry jitter deterministic and
    /// different from other servers' (a hash of the server name is a good seed).
    pub fn new(config: ScheduleConfig, jitter_seed: u64) -> Self {
        ServerSchedule {
            config,
            jitter_seed,
            state: ListingState::NeverListed,
            failures: 0,
            healthy_since: None,
            last_listed: None,
            tools: Marks::default(),
            offerings: Marks::default(),
        }
    }

    /// Where the listing stands.
    pub fn state(&self) -> &ListingState {
        &self.state
    }

    /// The settings this server is scheduled with.
    pub fn config(&self) -> &ScheduleConfig {
        &self.config
    }

    /// Whether the server must be listed at `now`: never listed, stale, expired, or failed (or
    /// crash-looping) and past its next try — whatever the refresh interval.
    pub fn needs_listing(&self, now: Instant) -> bool {
        match &self.state {
            ListingState::NeverListed | ListingState::Stale { .. } => true,
            ListingState::Listed { valid_until, .. } => now >= *valid_until,
            ListingState::Failed { next_try, .. } | ListingState::CrashLoop { next_try, .. } => {
                now >= *next_try
            }
        }
    }

    /// Whether a turn that needs this server waits for its listing: never listed, or a change
    /// announced (a `list_changed`, `refresh_tools`) that no finished listing answers — and no
    /// turn waited for it in vain since its last listing. An expired listing is served as held
    /// while it is revalidated in the background, and a failed server is retried in the
    /// background: no turn waits for either.
    pub fn turn_waits(&self) -> bool {
        !self.tools.waited_in_vain
            && matches!(
                self.state,
                ListingState::NeverListed | ListingState::Stale { .. }
            )
    }

    /// Whether a turn that needs this server waits for its prompts and resources: a change of
    /// them was announced that no finished offerings listing answers (and no turn waited for
    /// them in vain since their last listing).
    pub fn turn_waits_for_offerings(&self) -> bool {
        !self.offerings.waited_in_vain && self.offerings.unanswered()
    }

    /// A turn waited for this server's tools listing and gave up: until a listing of it
    /// completes ([`ServerSchedule::listed_with`]) or fails ([`ServerSchedule::failed`]), no
    /// turn waits for it again.
    pub fn waited_in_vain(&mut self) {
        self.tools.waited_in_vain = true;
    }

    /// As [`ServerSchedule::waited_in_vain`], for the prompts and resources: no turn waits for
    /// them again until an offerings listing finishes ([`ServerSchedule::offerings_listed`]).
    pub fn offerings_waited_in_vain(&mut self) {
        self.offerings.waited_in_vain = true;
    }

    /// Whether a turn gave up waiting for this server's tools since its last listing.
    pub fn was_waited_in_vain(&self) -> bool {
        self.tools.waited_in_vain
    }

    /// Sets this server's own [`ScheduleConfig::min_ttl`] (a per-server setting).
    pub fn set_min_ttl(&mut self, min_ttl: Duration) {
        self.config.min_ttl = min_ttl;
    }

    /// When the server becomes due: the expiry of its listing or its next try after a failure.
    /// `None` for a server never listed or stale, which is due whenever asked. The instant may
    /// already have passed; [`ServerSchedule::needs_listing`] is the answer for a given `now`.
    pub fn next_listing(&self) -> Option<Instant> {
        match &self.state {
            ListingState::NeverListed | ListingState::Stale { .. } => None,
            ListingState::Listed { valid_until, .. } => Some(*valid_until),
            ListingState::Failed { next_try, .. } | ListingState::CrashLoop { next_try, .. } => {
                Some(*next_try)
            }
        }
    }

    /// A listing that answers every change announced so far was taken at `now`. It is held for
    /// the refresh interval, or for `ttl` (the server's own `ttlMs`, at least `min_ttl`) when
    /// that is shorter.
    pub fn listed(&mut self, now: Instant, ttl: Option<Duration>) {
        self.listed_with(self.listing_ticket(), now, ttl);
    }

    /// What a listing started now answers for; give it back to [`ServerSchedule::listed_with`].
    pub fn listing_ticket(&self) -> ListingTicket {
        self.tools.ticket()
    }

    /// A listing that started with `ticket` finished at `now`. As [`ServerSchedule::listed`],
    /// except that a change announced after the listing started leaves the server stale: the
    /// listing may have been answered before the server changed.
    pub fn listed_with(&mut self, ticket: ListingTicket, now: Instant, ttl: Option<Duration>) {
        self.settle(now);
        self.tools.answered(ticket);
        self.state = if self.tools.unanswered() {
            ListingState::Stale {
                last_listed: Some(now),
            }
        } else {
            let hold = match ttl {
                Some(ttl) => ttl
                    .max(self.config.min_ttl)
                    .min(self.config.refresh_interval),
                None => self.config.refresh_interval,
            };
            ListingState::Listed {
                at: now,
                valid_until: saturating_add(now, hold),
            }
        };
        self.last_listed = Some(now);
        if self.healthy_since.is_none() {
            self.healthy_since = Some(now);
        }
    }

    /// The listing failed, or the connection dropped or crashed, at `now`. The failure count
    /// grows by one (after resetting if the server had been healthy for the stable period) and
    /// the next try waits out the backoff; at `crash_loop_after` failures the server is parked.
    pub fn failed(&mut self, now: Instant, error: impl Into<String>) {
        self.settle(now);
        // The listing a turn gave up on is over: a turn may wait for the next one.
        self.tools.waited_in_vain = false;
        self.offerings.waited_in_vain = false;
        self.healthy_since = None;
        self.failures = self.failures.saturating_add(1);
        let error = error.into();
        let crash_loop_after = self.config.crash_loop_after;
        self.state = if crash_loop_after > 0 && self.failures >= crash_loop_after {
            let wait = self
                .config
                .backoff
                .parked_delay(self.failures, self.jitter_seed);
            ListingState::CrashLoop {
                failures: self.failures,
                next_try: saturating_add(now, wait),
                error,
            }
        } else {
            let wait = self.config.backoff.delay(self.failures, self.jitter_seed);
            ListingState::Failed {
                attempt: self.failures,
                next_try: saturating_add(now, wait),
                error,
            }
        };
    }

    /// Marks the listing stale so it is taken again at the next turn (a `list_changed`, a
    /// `refresh_tools`). Dials nothing; marking again before the next listing costs nothing
    /// more. A server never listed is due anyway and stays as it is; a failed or crash-looping
    /// server keeps its state, because its backoff still governs. Either way a listing already
    /// in flight does not answer for this mark (see [`ServerSchedule::listed_with`]).
    pub fn mark_stale(&mut self) {
        self.tools.mark();
        if let ListingState::Listed { at, .. } = self.state {
            self.state = ListingState::Stale {
                last_listed: Some(at),
            };
        }
    }

    /// Whether a listing that answers every change up to `ticket` has finished: a turn that
    /// took `ticket` at its start needs no listing of its own after such a one.
    pub fn answers(&self, ticket: ListingTicket) -> bool {
        self.tools.covers(ticket)
    }

    /// The server's prompts or resources changed (`list_changed`): they are listed again at
    /// the next turn. Dials nothing.
    pub fn mark_offerings_stale(&mut self) {
        self.offerings.mark();
    }

    /// What an offerings listing started now answers for.
    pub fn offerings_ticket(&self) -> ListingTicket {
        self.offerings.ticket()
    }

    /// An offerings listing that started with `ticket` finished.
    pub fn offerings_listed(&mut self, ticket: ListingTicket) {
        self.offerings.answered(ticket);
    }

    /// Whether an offerings listing that answers every change up to `ticket` has finished.
    pub fn offerings_answer(&self, ticket: ListingTicket) -> bool {
        self.offerings.covers(ticket)
    }

    /// Whether a prompts or resources change was announced that no finished listing answers.
    pub fn offerings_stale(&self) -> bool {
        self.offerings.unanswered()
    }

    /// Consecutive failures counted so far. The count resets when the next listing or failure
    /// is recorded after the server stayed healthy for the stable period; to ask whether that
    /// has happened by a given time, use [`ServerSchedule::consecutive_failures_at`].
    pub fn consecutive_failures(&self) -> u32 {
        self.failures
    }

    /// Consecutive failures as they stand at `now`: zero if the server has been healthy for the
    /// stable period since its last success.
    pub fn consecutive_failures_at(&self, now: Instant) -> u32 {
        if self.is_stable_at(now) {
            0
        } else {
            self.failures
        }
    }

    /// When the last successful listing was taken, if ever.
    pub fn last_listed(&self) -> Option<Instant> {
        self.last_listed
    }

    /// The error of the last failure while the server is failed or crash-looping.
    pub fn last_error(&self) -> Option<&str> {
        match &self.state {
            ListingState::Failed { error, .. } | ListingState::CrashLoop { error, .. } => {
                Some(error)
            }
            _ => None,
        }
    }

    fn is_stable_at(&self, now: Instant) -> bool {
        self.healthy_since
            .is_some_and(|since| now.saturating_duration_since(since) >= self.config.stable_period)
    }

    fn settle(&mut self, now: Instant) {
        if self.is_stable_at(now) {
            self.failures = 0;
        }
    }
}

/// The listing schedule of every configured server, in config order.
#[derive(Debug, Clone)]
pub struct Schedule {
    config: ScheduleConfig,
    servers: Vec<(String, ServerSchedule)>,
    index: HashMap<String, usize>,
}

impl Schedule {
    /// A schedule for `servers` (config order), none of them listed yet. Each server's jitter
    /// is seeded from its name, so retries of different servers spread out, reproducibly.
    /// A name given twice is kept once, at its first position.
    pub fn new(servers: impl IntoIterator<Item = String>, config: ScheduleConfig) -> Self {
        let mut schedule = Schedule {
            config,
            servers: Vec::new(),
            index: HashMap::new(),
        };
        for name in servers {
            schedule.add_server(name);
        }
        schedule
    }

    /// Adds a server at the end (never listed). Returns `false`, changing nothing, if a server
    /// of that name is already scheduled.
    pub fn add_server(&mut self, name: impl Into<String>) -> bool {
        let name = name.into();
        if self.index.contains_key(&name) {
            return false;
        }
        let seed = xxhash_rust::xxh3::xxh3_64(name.as_bytes());
        self.index.insert(name.clone(), self.servers.len());
        self.servers
            .push((name, ServerSchedule::new(self.config.clone(), seed)));
        true
    }

    /// Removes a server (disabled or dropped from config) and returns its schedule.
    pub fn remove_server(&mut self, name: &str) -> Option<ServerSchedule> {
        let position = self.index.remove(name)?;
        let (_, removed) = self.servers.remove(position);
        for (_, slot) in self.index.iter_mut() {
            if *slot > position {
                *slot -= 1;
            }
        }
        Some(removed)
    }

    /// The schedule of one server.
    pub fn server(&self, name: &str) -> Option<&ServerSchedule> {
        self.index.get(name).map(|&i| &self.servers[i].1)
    }

    /// The schedule of one server, to record a listing or a failure.
    pub fn server_mut(&mut self, name: &str) -> Option<&mut ServerSchedule> {
        self.index.get(name).map(|&i| &mut self.servers[i].1)
    }

    /// Every server with its schedule, in config order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ServerSchedule)> {
        self.servers.iter().map(|(name, s)| (name.as_str(), s))
    }

    /// Marks every listed server stale (the model-callable refresh). Dials nothing; calling it
    /// again before the next listing changes nothing, so it costs one listing per server.
    pub fn mark_all_stale(&mut self) {
        for (_, server) in &mut self.servers {
            server.mark_stale();
        }
    }

    /// The servers that need listing at `now`, in config order.
    pub fn due(&self, now: Instant) -> Vec<&str> {
        self.servers
            .iter()
            .filter(|(_, s)| s.needs_listing(now))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The servers whose prompts or resources changed since their last offerings listing, in
    /// config order.
    pub fn offerings_due(&self) -> Vec<&str> {
        self.servers
            .iter()
            .filter(|(_, s)| s.offerings_stale())
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The earliest [`ServerSchedule::next_listing`] of any server: when a listing expires or a
    /// backoff ends. Servers never listed or stale have no such instant (they are due whenever
    /// asked, see [`Schedule::due`]); `None` if no server has one.
    pub fn next_due(&self) -> Option<Instant> {
        self.servers
            .iter()
            .filter_map(|(_, s)| s.next_listing())
            .min()
    }
}

/// `at + d`, or the latest representable instant on the way there if that would overflow, so
/// a huge configured interval means "practically never" instead of a panic.
pub(crate) fn saturating_add(at: Instant, d: Duration) -> Instant {
    if let Some(sum) = at.checked_add(d) {
        return sum;
    }
    let mut step = d / 2;
    let mut reached = at;
    while !step.is_zero() {
        if let Some(next) = reached.checked_add(step) {
            reached = next;
        } else {
            step /= 2;
        }
    }
    reached
}

/// A number in `[0, 1)` determined by `seed` and `attempt` (splitmix64 finalizer).
fn unit_interval(seed: u64, attempt: u32) -> f64 {
    let mut z = seed ^ u64::from(attempt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // The top 53 bits fill an f64 mantissa exactly.
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn no_jitter() -> ScheduleConfig {
        ScheduleConfig {
            backoff: BackoffConfig {
                jitter: 0.0,
                ..BackoffConfig::default()
            },
            ..ScheduleConfig::default()
        }
    }

    fn server(config: ScheduleConfig) -> ServerSchedule {
        ServerSchedule::new(config, 7)
    }

    #[test]
    fn never_listed_is_due_and_has_no_next_listing() {
        let s = server(ScheduleConfig::default());
        let now = Instant::now();
        assert_eq!(s.state(), &ListingState::NeverListed);
        assert!(s.needs_listing(now));
        assert_eq!(s.next_listing(), None);
    }

    #[test]
    fn listed_is_held_for_the_refresh_interval_then_expires() {
        let config = ScheduleConfig::default();
        let interval = config.refresh_interval;
        let mut s = server(config);
        let t0 = Instant::now();
        s.listed(t0, None);
        assert_eq!(
            s.state(),
            &ListingState::Listed {
                at: t0,
                valid_until: t0 + interval
            }
        );
        assert!(!s.needs_listing(t0));
        assert!(!s.needs_listing(t0 + interval - Duration::from_nanos(1)));
        assert!(s.needs_listing(t0 + interval));
        assert_eq!(s.next_listing(), Some(t0 + interval));
    }

    #[test]
    fn a_shorter_server_ttl_wins_and_a_longer_one_does_not() {
        let config = ScheduleConfig {
            refresh_interval: Duration::from_secs(100),
            ..ScheduleConfig::default()
        };
        let t0 = Instant::now();
        let mut s = server(config);
        s.listed(t0, Some(Duration::from_secs(10)));
        assert_eq!(s.next_listing(), Some(t0 + Duration::from_secs(10)));
        assert!(s.needs_listing(t0 + Duration::from_secs(10)));
        assert!(!s.needs_listing(t0 + Duration::from_secs(9)));

        s.listed(t0, Some(Duration::from_secs(1000)));
        assert_eq!(s.next_listing(), Some(t0 + Duration::from_secs(100)));
    }

    #[test]
    fn stale_is_due_and_remembers_the_last_listing() {
        let mut s = server(ScheduleConfig::default());
        let t0 = Instant::now();
        s.listed(t0, None);
        s.mark_stale();
        assert_eq!(
            s.state(),
            &ListingState::Stale {
                last_listed: Some(t0)
            }
        );
        assert!(s.needs_listing(t0));
        assert_eq!(s.next_listing(), None);
        s.mark_stale();
        assert_eq!(
            s.state(),
            &ListingState::Stale {
                last_listed: Some(t0)
            }
        );
        s.listed(t0 + ms(5), None);
        assert!(!s.needs_listing(t0 + ms(5)));
    }

    #[test]
    fn a_change_announced_during_a_listing_leaves_the_server_stale() {
        let mut s = server(ScheduleConfig::default());
        let t0 = Instant::now();
        s.listed(t0, None);
        let ticket = s.listing_ticket();
        // list_changed arrives while the listing is in flight: its answer may predate it.
        s.mark_stale();
        s.listed_with(ticket, t0 + ms(5), None);
        assert_eq!(
            s.state(),
            &ListingState::Stale {
                last_listed: Some(t0 + ms(5))
            }
        );
        assert!(s.needs_listing(t0 + ms(5)));
        assert!(!s.answers(s.listing_ticket()));

        let after = s.listing_ticket();
        s.listed_with(after, t0 + ms(9), None);
        assert!(matches!(s.state(), ListingState::Listed { .. }));
        assert!(s.answers(after));
    }

    #[test]
    fn a_listing_that_finishes_after_a_newer_one_does_not_make_it_stale_again() {
        let mut s = server(ScheduleConfig::default());
        let t0 = Instant::now();
        let old = s.listing_ticket();
        s.mark_stale();
        let new = s.listing_ticket();
        s.listed_with(new, t0, None);
        s.listed_with(old, t0 + ms(1), None);
        assert!(matches!(s.state(), ListingState::Listed { .. }), "{s:?}");
    }

    #[test]
    fn marks_while_failed_keep_the_backoff_and_are_answered_by_the_next_listing() {
        let mut s = server(no_jitter());
        let t0 = Instant::now();
        s.failed(t0, "down");
        s.mark_stale();
        assert!(matches!(s.state(), ListingState::Failed { .. }));
        assert!(!s.needs_listing(t0 + ms(1)));
        let ticket = s.listing_ticket();
        s.listed_with(ticket, t0 + ms(300), None);
        assert!(matches!(s.state(), ListingState::Listed { .. }));
    }

    #[test]
    fn offerings_are_stale_until_a_listing_started_after_the_change_finishes() {
        let mut schedule = Schedule::new(["a", "b"].map(String::from), ScheduleConfig::default());
        assert!(schedule.offerings_due().is_empty(), "nothing announced yet");
        let a = schedule.server_mut("a").expect("a");
        let early = a.offerings_ticket();
        a.mark_offerings_stale();
        a.mark_offerings_stale();
        assert_eq!(schedule.offerings_due(), vec!["a"]);
        let a = schedule.server_mut("a").expect("a");
        a.offerings_listed(early);
        assert!(
            a.offerings_stale(),
            "a listing from before the change answers nothing"
        );
        let ticket = a.offerings_ticket();
        assert!(!a.offerings_answer(ticket));
        a.offerings_listed(ticket);
        assert!(a.offerings_answer(ticket));
        assert!(schedule.offerings_due().is_empty());
        // Tools and offerings are marked apart.
        assert!(schedule.due(Instant::now()).contains(&"a"), "never listed");
    }

    #[test]
    fn mark_stale_on_never_listed_keeps_it_never_listed() {
        let mut s = server(ScheduleConfig::default());
        s.mark_stale();
        assert_eq!(s.state(), &ListingState::NeverListed);
    }

    #[test]
    fn failed_server_waits_out_its_backoff_whatever_the_interval() {
        // An interval far shorter than the backoff must not make a failed server due early,
        // and one far longer must not hold it back.
        for interval in [Duration::from_millis(1), Duration::from_secs(86_400)] {
            let config = ScheduleConfig {
                refresh_interval: interval,
                ..no_jitter()
            };
            let mut s = server(config);
            let t0 = Instant::now();
            s.listed(t0, None);
            s.failed(t0, "connection refused");
            assert_eq!(
                s.state(),
                &ListingState::Failed {
                    attempt: 1,
                    next_try: t0 + ms(250),
                    error: "connection refused".into()
                }
            );
            assert!(!s.needs_listing(t0 + ms(249)));
            assert!(s.needs_listing(t0 + ms(250)));
            assert_eq!(s.next_listing(), Some(t0 + ms(250)));
            assert_eq!(s.last_error(), Some("connection refused"));
        }
    }

    #[test]
    fn mark_stale_does_not_cut_a_backoff_short() {
        let mut s = server(no_jitter());
        let t0 = Instant::now();
        s.failed(t0, "boom");
        let before = s.state().clone();
        s.mark_stale();
        assert_eq!(s.state(), &before);
        assert!(!s.needs_listing(t0 + ms(100)));
    }

    #[test]
    fn backoff_doubles_from_250ms_and_caps_at_60s() {
        let config = ScheduleConfig {
            crash_loop_after: 0,
            ..no_jitter()
        };
        let mut s = server(config);
        let mut now = Instant::now();
        let expected = [
            250, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000,
        ];
        for (i, &wait) in expected.iter().enumerate() {
            s.failed(now, "down");
            let ListingState::Failed {
                attempt, next_try, ..
            } = s.state().clone()
            else {
                panic!("expected Failed, got {:?}", s.state());
            };
            assert_eq!(attempt, i as u32 + 1);
            assert_eq!(next_try - now, ms(wait), "attempt {attempt}");
            now = next_try;
        }
        assert_eq!(s.consecutive_failures(), 10);
    }

    #[test]
    fn a_success_then_a_failure_within_the_stable_period_keeps_climbing() {
        let mut s = server(no_jitter());
        let t0 = Instant::now();
        s.failed(t0, "a");
        s.failed(t0 + ms(250), "b");
        s.listed(t0 + ms(1_000), None);
        assert_eq!(s.consecutive_failures(), 2);
        // One nanosecond short of the stable period.
        s.failed(
            t0 + ms(1_000) + Duration::from_secs(60) - Duration::from_nanos(1),
            "c",
        );
        assert_eq!(s.consecutive_failures(), 3);
        assert!(matches!(s.state(), ListingState::Failed { attempt: 3, .. }));
    }

    #[test]
    fn the_count_resets_after_the_stable_period() {
        let mut s = server(no_jitter());
        let t0 = Instant::now();
        s.failed(t0, "a");
        s.failed(t0, "b");
        s.failed(t0, "c");
        let healthy = t0 + Duration::from_secs(1);
        s.listed(healthy, None);
        assert_eq!(s.consecutive_failures_at(healthy), 3);
        let stable = healthy + Duration::from_secs(60);
        assert_eq!(s.consecutive_failures_at(stable), 0);
        s.failed(stable, "d");
        assert_eq!(s.consecutive_failures(), 1);
        assert_eq!(
            s.state(),
            &ListingState::Failed {
                attempt: 1,
                next_try: stable + ms(250),
                error: "d".into()
            }
        );
    }

    #[test]
    fn stability_is_counted_from_the_first_success_not_the_latest() {
        let mut s = server(no_jitter());
        let t0 = Instant::now();
        s.failed(t0, "a");
        s.listed(t0 + Duration::from_secs(1), None);
        // Re-listing later must not restart the stable period.
        s.listed(t0 + Duration::from_secs(50), None);
        s.failed(t0 + Duration::from_secs(61), "b");
        assert_eq!(s.consecutive_failures(), 1);
    }

    #[test]
    fn a_later_listing_after_the_stable_period_resets_the_count() {
        let mut s = server(no_jitter());
        let t0 = Instant::now();
        s.failed(t0, "a");
        s.listed(t0, None);
        s.listed(t0 + Duration::from_secs(60), None);
        assert_eq!(s.consecutive_failures(), 0);
    }

    #[test]
    fn crash_loop_after_five_failures_parks_at_the_longest_backoff() {
        let mut s = server(no_jitter());
        let mut now = Instant::now();
        for _ in 0..4 {
            s.failed(now, "crash");
            assert!(matches!(s.state(), ListingState::Failed { .. }));
            now += ms(10);
        }
        s.failed(now, "crash 5");
        assert_eq!(
            s.state(),
            &ListingState::CrashLoop {
                failures: 5,
                next_try: now + Duration::from_secs(60),
                error: "crash 5".into()
            }
        );
        assert!(!s.needs_listing(now + Duration::from_secs(59)));
        assert!(s.needs_listing(now + Duration::from_secs(60)));
        s.mark_stale();
        assert!(matches!(s.state(), ListingState::CrashLoop { .. }));

        // Listing fine and crashing again within the stable period stays parked.
        let up = now + Duration::from_secs(60);
        s.listed(up, None);
        s.failed(up + Duration::from_secs(5), "crash 6");
        assert!(matches!(
            s.state(),
            ListingState::CrashLoop { failures: 6, .. }
        ));

        // Healthy for the stable period: out of the loop.
        let up = up + Duration::from_secs(120);
        s.listed(up, None);
        s.failed(up + Duration::from_secs(60), "once");
        assert!(matches!(s.state(), ListingState::Failed { attempt: 1, .. }));
    }

    #[test]
    fn jittered_waits_differ_between_seeds_and_repeat_for_one_seed() {
        let backoff = BackoffConfig::default();
        let waits: Vec<Duration> = (0..16).map(|seed| backoff.delay(3, seed)).collect();
        assert!(waits.iter().any(|w| *w != waits[0]), "jitter spreads seeds");
        assert_eq!(backoff.delay(3, 42), backoff.delay(3, 42));
    }

    #[test]
    fn schedule_due_in_config_order_and_mark_all_stale_costs_one_listing() {
        let names = ["b", "a", "c"].map(String::from);
        let mut schedule = Schedule::new(names, ScheduleConfig::default());
        let t0 = Instant::now();
        assert_eq!(schedule.due(t0), vec!["b", "a", "c"]);
        assert_eq!(schedule.next_due(), None);
        for name in ["b", "a", "c"] {
            schedule
                .server_mut(name)
                .expect("configured")
                .listed(t0, None);
        }
        assert!(schedule.due(t0).is_empty());
        assert_eq!(
            schedule.next_due(),
            Some(t0 + ScheduleConfig::default().refresh_interval)
        );

        for _ in 0..3 {
            schedule.mark_all_stale();
        }
        let due = schedule.due(t0);
        assert_eq!(due, vec!["b", "a", "c"], "each server due exactly once");
        for name in ["b", "a", "c"] {
            schedule
                .server_mut(name)
                .expect("configured")
                .listed(t0 + ms(1), None);
        }
        assert!(schedule.due(t0 + ms(1)).is_empty());
        assert_eq!(schedule.iter().count(), 3);
    }

    #[test]
    fn schedule_next_due_is_the_earliest_expiry_or_retry() {
        let mut schedule = Schedule::new(
            ["x".to_string(), "y".to_string()],
            ScheduleConfig {
                backoff: BackoffConfig {
                    jitter: 0.0,
                    ..BackoffConfig::default()
                },
                ..ScheduleConfig::default()
            },
        );
        let t0 = Instant::now();
        schedule.server_mut("x").expect("x").listed(t0, None);
        schedule.server_mut("y").expect("y").failed(t0, "refused");
        assert_eq!(schedule.next_due(), Some(t0 + ms(250)));
        assert_eq!(schedule.due(t0 + ms(250)), vec!["y"]);
    }

    #[test]
    fn schedule_add_and_remove_servers() {
        let mut schedule = Schedule::new(
            ["a", "b", "a", "c"].map(String::from),
            ScheduleConfig::default(),
        );
        assert_eq!(
            schedule.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert!(!schedule.add_server("b"));
        assert!(schedule.remove_server("a").is_some());
        assert!(schedule.remove_server("a").is_none());
        assert!(schedule.server("a").is_none());
        schedule
            .server_mut("c")
            .expect("c")
            .listed(Instant::now(), None);
        assert!(matches!(
            schedule.server("c").expect("c").state(),
            ListingState::Listed { .. }
        ));
        assert!(schedule.add_server("a"));
        assert_eq!(schedule.due(Instant::now()), vec!["b", "a"]);
    }

    #[test]
    fn huge_intervals_saturate_instead_of_panicking() {
        let config = ScheduleConfig {
            refresh_interval: Duration::MAX,
            ..ScheduleConfig::default()
        };
        let mut s = server(config);
        let t0 = Instant::now();
        s.listed(t0, None);
        assert!(!s.needs_listing(t0 + Duration::from_secs(365 * 86_400)));
    }

    #[test]
    fn validate_rejects_unusable_settings() {
        assert_eq!(ScheduleConfig::default().validate(), Ok(()));
        let mut c = ScheduleConfig::default();
        c.backoff.factor = 0.5;
        assert_eq!(c.validate(), Err(ScheduleConfigError::Factor(0.5)));
        let mut c = ScheduleConfig::default();
        c.backoff.jitter = 1.5;
        assert!(
            c.validate()
                .expect_err("jitter")
                .to_string()
                .contains("1.5")
        );
        let mut c = ScheduleConfig::default();
        c.backoff.initial = Duration::from_secs(120);
        assert!(matches!(
            c.validate(),
            Err(ScheduleConfigError::InitialAboveMax { .. })
        ));
    }

    proptest! {
        #[test]
        fn jittered_delay_stays_in_its_bounds(
            seed in any::<u64>(),
            attempt in 0u32..200,
            jitter in 0.0f64..=1.0,
            initial_ms in 1u64..5_000,
            max_ms in 1u64..600_000,
            factor in 1.0f64..4.0,
        ) {
            let backoff = BackoffConfig {
                initial: ms(initial_ms),
                max: ms(max_ms),
                factor,
                jitter,
            };
            let (low, high) = backoff.bounds(attempt);
            let wait = backoff.delay(attempt, seed);
            prop_assert!(low <= wait && wait <= high, "{low:?} <= {wait:?} <= {high:?}");
            prop_assert!(wait <= backoff.max);
            let base = backoff.base(attempt);
            prop_assert!(base <= backoff.max);
            prop_assert!(backoff.base(attempt + 1) >= base, "the base never shrinks");
        }

        #[test]
        fn default_jitter_is_within_twenty_percent(seed in any::<u64>(), attempt in 1u32..12) {
            let backoff = BackoffConfig::default();
            let base = backoff.base(attempt).as_secs_f64();
            let wait = backoff.delay(attempt, seed).as_secs_f64();
            prop_assert!(wait >= base * 0.8 - 1e-9 && wait <= base * 1.2 + 1e-9);
        }

        #[test]
        fn a_failed_server_is_due_exactly_when_its_backoff_ends(
            seed in any::<u64>(),
            failures in 1u32..12,
        ) {
            let mut s = ServerSchedule::new(ScheduleConfig::default(), seed);
            let t0 = Instant::now();
            for _ in 0..failures {
                s.failed(t0, "down");
            }
            let next = s.next_listing().expect("a failed server has a next try");
            prop_assert!(next > t0);
            prop_assert!(!s.needs_listing(next - Duration::from_nanos(1)));
            prop_assert!(s.needs_listing(next));
            let crash = failures >= 5;
            prop_assert_eq!(matches!(s.state(), ListingState::CrashLoop { .. }), crash);
            let backoff = BackoffConfig::default();
            let (low, high) = if crash {
                (backoff.max.mul_f64(0.8), backoff.max)
            } else {
                backoff.bounds(failures)
            };
            let wait = next - t0;
            prop_assert!(low <= wait && wait <= high, "{low:?} <= {wait:?} <= {high:?}");
        }
    }

    #[derive(Debug, Clone)]
    enum Event {
        Mark,
        Start,
        /// Finishes the listing started `n`-th among those still in flight (modulo).
        Finish(usize),
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            Just(Event::Mark),
            Just(Event::Start),
            (0usize..8).prop_map(Event::Finish),
        ]
    }

    proptest! {
        /// Stale exactly when some `list_changed` came after the start of every finished
        /// listing (told by the events' positions, not by the counters the schedule keeps).
        #[test]
        fn stale_iff_a_change_came_after_every_finished_listing_started(
            events in proptest::collection::vec(event(), 0..40),
        ) {
            let mut s = ServerSchedule::new(ScheduleConfig::default(), 7);
            let t0 = Instant::now();
            let first = s.listing_ticket();
            s.listed_with(first, t0, None);
            let mut in_flight: Vec<(usize, ListingTicket)> = Vec::new();
            let mut last_mark: Option<usize> = None;
            let mut latest_answered_start: usize = 0;
            for (i, e) in events.iter().enumerate() {
                let position = i + 1;
                match e {
                    Event::Mark => {
                        s.mark_stale();
                        last_mark = Some(position);
                    }
                    Event::Start => in_flight.push((position, s.listing_ticket())),
                    Event::Finish(n) if !in_flight.is_empty() => {
                        let (started, ticket) = in_flight.remove(n % in_flight.len());
                        s.listed_with(ticket, t0 + ms(position as u64), None);
                        latest_answered_start = latest_answered_start.max(started);
                    }
                    Event::Finish(_) => {}
                }
                let stale = last_mark.is_some_and(|m| m > latest_answered_start);
                prop_assert_eq!(
                    matches!(s.state(), ListingState::Stale { .. }),
                    stale,
                    "after {:?}", &events[..=i]
                );
            }
        }
    }

    #[test]
    fn a_zero_ttl_from_a_server_that_announces_changes_is_no_hint() {
        let zero = Some(Duration::ZERO);
        let minute = Some(Duration::from_secs(60));
        assert_eq!(effective_ttl(zero, true), None);
        assert_eq!(effective_ttl(zero, false), zero);
        assert_eq!(effective_ttl(minute, true), minute);
        assert_eq!(effective_ttl(None, true), None);
    }

    #[test]
    fn a_ttl_shorter_than_min_ttl_counts_as_min_ttl_and_the_interval_still_caps() {
        let t0 = Instant::now();
        let mut s = server(ScheduleConfig::default());
        // A ttlMs of 0 from a server that announces nothing: held for min_ttl, not re-listed
        // at every turn.
        s.listed(t0, Some(Duration::ZERO));
        assert_eq!(s.next_listing(), Some(t0 + DEFAULT_MIN_TTL));
        assert!(!s.needs_listing(t0 + DEFAULT_MIN_TTL - ms(1)));
        assert!(s.needs_listing(t0 + DEFAULT_MIN_TTL));
        s.listed(t0, Some(ms(1)));
        assert_eq!(s.next_listing(), Some(t0 + DEFAULT_MIN_TTL));
        s.listed(t0, Some(Duration::from_secs(30)));
        assert_eq!(s.next_listing(), Some(t0 + Duration::from_secs(30)));
        // A server's own min_ttl; the refresh interval still caps every hold.
        s.set_min_ttl(Duration::from_secs(20));
        s.listed(t0, Some(Duration::ZERO));
        assert_eq!(s.next_listing(), Some(t0 + Duration::from_secs(20)));
        let mut short = server(ScheduleConfig {
            refresh_interval: ms(100),
            ..ScheduleConfig::default()
        });
        short.listed(t0, Some(Duration::ZERO));
        assert_eq!(short.next_listing(), Some(t0 + ms(100)));
    }

    #[test]
    fn a_turn_waits_only_for_a_server_never_listed_or_with_an_announced_change() {
        let t0 = Instant::now();
        let mut s = server(no_jitter());
        assert!(s.turn_waits(), "never listed");
        s.listed(t0, Some(Duration::ZERO));
        assert!(!s.turn_waits(), "listed and held");
        let expired = t0 + DEFAULT_MIN_TTL;
        assert!(s.needs_listing(expired), "due for a revalidation");
        assert!(
            !s.turn_waits(),
            "an expired hold is served while it is revalidated"
        );
        s.mark_stale();
        assert!(s.turn_waits(), "an announced change");
        s.failed(expired, "boom");
        assert!(
            !s.turn_waits(),
            "a failed server is retried in the background"
        );
        assert!(s.needs_listing(expired + Duration::from_secs(1)));
    }

    #[test]
    fn a_server_waited_for_in_vain_is_not_waited_for_until_its_listing_ends() {
        let t0 = Instant::now();
        let mut s = server(no_jitter());
        let ticket = s.listing_ticket();
        s.waited_in_vain();
        assert!(s.was_waited_in_vain());
        assert!(!s.turn_waits(), "never listed, but a turn gave up on it");
        s.mark_stale();
        assert!(
            !s.turn_waits(),
            "a new change does not make a turn wait again"
        );
        s.listed_with(ticket, t0, None);
        assert!(
            matches!(s.state(), ListingState::Stale { .. }),
            "the change came during the listing"
        );
        assert!(
            s.turn_waits(),
            "the listing ended: the next turn may wait again"
        );
        s.waited_in_vain();
        s.failed(t0, "timed out");
        assert!(!s.was_waited_in_vain(), "a failed listing ended it too");

        s.mark_offerings_stale();
        assert!(s.turn_waits_for_offerings());
        let offerings = s.offerings_ticket();
        s.offerings_waited_in_vain();
        assert!(!s.turn_waits_for_offerings());
        s.mark_offerings_stale();
        assert!(!s.turn_waits_for_offerings());
        s.offerings_listed(offerings);
        assert!(
            s.turn_waits_for_offerings(),
            "listed, and a change came meanwhile"
        );
    }
}
