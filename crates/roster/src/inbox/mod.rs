//! The inbox: every notification a server pushed, in a bounded in-memory ring, mirrored to an
//! append-only JSONL audit trail that survives restarts.
//!
//! - [`Inbox::record`] keeps a notification. One roster consumed itself (a `list_changed` that
//!   triggered a re-list) is recorded as [`EntryState::Handled`] and never counts as unread.
//! - [`Inbox::list`], [`Inbox::unread`] and [`Inbox::ack`] are the one code path behind both the
//!   model's `channels` native tool and `roster inbox`; [`render`] turns entries into the capped
//!   text both show.
//! - [`Inbox::record_pending_confirm`] keeps a server request only a person may decide. It lives
//!   apart from the ring: `list`, `unread` and `render` never see it or its decision. It is
//!   answered by [`Inbox::confirm`], or as [`ConfirmDecision::Expired`] once its deadline passes.
//! - [`Inbox::clear`] empties the ring; with `all` it also purges the audit trail on disk.
//!
//! # On disk
//! `audit.jsonl` in the state directory, one JSON object per line, rotated at a size limit to
//! one backup `audit.jsonl.1`. Acknowledgements, confirm decisions and purges are records too, so
//! a replay on [`Inbox::open`] rebuilds the ring (its last `capacity` entries) with read state
//! intact, and `seq` keeps increasing across restarts, rotations and clears.
//!
//! # Durability
//! Each record is encoded in memory and written with one `write_all` on an `O_APPEND` handle
//! under the inbox's mutex, so concurrent writers never interleave lines and a process crash
//! loses nothing already recorded (the bytes are in the kernel). What a power loss may take
//! depends on [`FsyncPolicy`]: with `Always` nothing that `record` returned from; with
//! `Interval(d)` at most the records of about the last `2 × d` (an append syncs when the last
//! sync is older than `d`, and a background thread syncs a quiet trail); with `Never`, whatever
//! the OS had not written back. A torn last line (a crash mid-write) is skipped on replay with a
//! warning and cut off before new lines are appended.
//!
//! One process owns a state directory at a time: [`Inbox::open`] takes an advisory lock on
//! `inbox.lock` and fails with [`InboxError::Busy`] while another inbox holds it.
//! [`Inbox::snapshot`] reads the trail without the lock and without writing.
//!
//! # Whose notification
//! The view (`list`, `unread`, `ack`) is per client identity: a `[[clients]]` token's name, or
//! [`LOCAL_IDENTITY`] for the local default (stdio clients, HTTP without `[[clients]]`, and
//! `roster inbox`). A notification a server sent while it was answering a request belongs to the
//! client identity of that request: the gateway holds an [`Attribution`] for the server while the
//! request runs, and the notification is recorded with those owners. Servers do not say which
//! request a notification is about, so if requests of several identities are in flight at the
//! same server, it belongs to each of them. A notification sent outside any request (a server's
//! unsolicited log) and every `*/list_changed` (it is about the server, not about a call) belong to
//! nobody in particular: every identity sees it. Each identity acknowledges on its own (one ack
//! watermark per identity, at most [`InboxConfig::max_identities`] of them); `clear` empties the
//! ring for everyone. The trail stays one file: each entry line records its owners and each ack
//! line its identity, so a replay rebuilds every identity's view.

mod attribution;
mod audit;
mod record;
mod render;

use crate::sync::lock;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;

pub use attribution::{Attribution, HeldRequest, current_client, on_behalf_of};
pub use audit::{AUDIT_BACKUP_FILE, AUDIT_FILE};
pub use render::{
    DEFAULT_LIST_LIMIT, DEFAULT_MAX_CHARS, LINE_MAX_CHARS, MORE_PREFIX, NO_ENTRIES, render,
};

use audit::{AuditFile, audit_path, backup_path, read_file};
use record::{AuditRecord, RecordedState};

/// The position of an entry in the inbox; increases by one per recorded notification or
/// pending confirm, across restarts.
pub type Seq = u64;

/// Ring capacity when the config does not say.
pub const DEFAULT_CAPACITY: usize = 1000;
/// Size of `audit.jsonl` at which it is rotated to `audit.jsonl.1`, when the config does not say.
pub const DEFAULT_ROTATE_BYTES: u64 = 10 * 1024 * 1024;
/// The interval of the default fsync policy.
pub const DEFAULT_FSYNC_INTERVAL: Duration = Duration::from_secs(1);
/// File name of the lock that makes one process the owner of a state directory's inbox.
pub const LOCK_FILE: &str = "inbox.lock";
/// How many client identities (besides the local default) keep their own read state, when the
/// config does not say.
pub const DEFAULT_MAX_IDENTITIES: usize = 64;
/// The client identity of the local default: stdio clients, HTTP clients when no `[[clients]]`
/// are configured, and the person at `roster inbox`.
pub const LOCAL_IDENTITY: &str = "";

/// Creates the state directory `dir` (and missing parents) owner-only, or leaves an existing
/// one exactly as it is: roster never changes the mode of a directory it did not create
/// (`state_dir = "."` must not lock anyone out of their working directory).
pub fn ensure_state_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// When appends to the audit trail are fsynced. See the module docs for what each one keeps
/// through a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// After every append, before `record` returns.
    Always,
    /// When the last sync is older than the interval (checked on append and by a background
    /// thread).
    Interval(Duration),
    /// Never; the OS writes back when it likes.
    Never,
}

impl Default for FsyncPolicy {
    fn default() -> Self {
        FsyncPolicy::Interval(DEFAULT_FSYNC_INTERVAL)
    }
}

impl fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsyncPolicy::Always => f.write_str("always"),
            FsyncPolicy::Never => f.write_str("never"),
            FsyncPolicy::Interval(every) => {
                write!(f, "interval:{}", humantime::format_duration(*every))
            }
        }
    }
}

impl Serialize for FsyncPolicy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FsyncPolicy {
    /// The words of [`FsyncPolicy::from_str`], so a config file says `fsync = "interval:500ms"`.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The words [`FsyncPolicy::from_str`] did not understand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "fsync policy {0:?} is not one of: always, never, interval, interval:<duration> (e.g. interval:500ms)"
)]
pub struct ParseFsyncPolicyError(String);

impl FromStr for FsyncPolicy {
    type Err = ParseFsyncPolicyError;

    /// `always`, `never`, `interval` (1 s) or `interval:<duration>` (`interval:250ms`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "always" => Ok(FsyncPolicy::Always),
            "never" => Ok(FsyncPolicy::Never),
            "interval" => Ok(FsyncPolicy::default()),
            other => other
                .strip_prefix("interval:")
                .and_then(|d| crate::config::parse_duration(d).ok())
                .filter(|d| !d.is_zero())
                .map(FsyncPolicy::Interval)
                .ok_or_else(|| ParseFsyncPolicyError(s.to_owned())),
        }
    }
}

/// Where the inbox keeps its audit trail and how big it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxConfig {
    /// The state directory (`audit.jsonl`, `audit.jsonl.1` and `inbox.lock` live here). Created
    /// if missing.
    pub dir: PathBuf,
    /// Entries kept in the ring (and replayed on open); at least 1.
    pub capacity: usize,
    /// Size at which `audit.jsonl` is rotated to `audit.jsonl.1`.
    pub rotate_bytes: u64,
    /// When appends are fsynced.
    pub fsync: FsyncPolicy,
    /// Client identities (besides the local default) whose read state is kept; an ack by one
    /// more is refused with [`InboxError::TooManyIdentities`].
    pub max_identities: usize,
}

impl InboxConfig {
    /// The defaults (capacity 1000, rotation at 10 MiB, fsync every second) in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        InboxConfig {
            dir: dir.into(),
            capacity: DEFAULT_CAPACITY,
            rotate_bytes: DEFAULT_ROTATE_BYTES,
            fsync: FsyncPolicy::default(),
            max_identities: DEFAULT_MAX_IDENTITIES,
        }
    }
}

/// What can go wrong opening or reading the inbox, or deciding a confirm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// The state directory could not be created.
    #[error("could not create the state directory {dir}: {source}")]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The audit file could not be opened for appending.
    #[error("could not open the audit trail {path} for appending: {source}")]
    OpenAudit {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The audit file exists but could not be read.
    #[error("could not read the audit trail {path}: {source}")]
    ReadAudit {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The lock file could not be opened or locked.
    #[error("could not lock {path}: {source}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another process (normally a running gateway) owns the inbox of this state directory.
    #[error(
        "another roster process owns the inbox in {dir} (a gateway is running with this state \
         directory); talk to it, or stop it first"
    )]
    Busy {
        /// The state directory.
        dir: PathBuf,
    },
    /// No pending confirm has this id.
    #[error("no pending confirm has id {id}; `roster inbox pending` lists the open ones")]
    UnknownConfirm {
        /// The id asked for.
        id: ConfirmId,
    },
    /// The confirm was already decided (or expired) and the server has that answer.
    #[error("confirm {id} was already decided: {decision}")]
    ConfirmDecided {
        /// The confirm.
        id: ConfirmId,
        /// The answer the server got.
        decision: ConfirmDecision,
    },
    /// Read state is already kept for as many client identities as allowed.
    #[error(
        "the inbox keeps read state for at most {max} client identities (max_identities) and \
         {who:?} would be one more; raise the limit or remove unused [[clients]]"
    )]
    TooManyIdentities {
        /// The identity that acknowledged.
        who: String,
        /// The bound.
        max: usize,
    },
    /// The decision was recorded, but the server that asked had stopped waiting for it.
    #[error(
        "confirm {id} was recorded as {decision}, but the server that asked is no longer waiting"
    )]
    ConfirmAbandoned {
        /// The confirm.
        id: ConfirmId,
        /// The decision recorded.
        decision: ConfirmDecision,
    },
}

/// The state of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// Not yet acknowledged.
    Unread,
    /// Acknowledged (`ack`).
    Read,
    /// roster consumed it itself (a `list_changed` that triggered a re-list); never unread.
    Handled,
    /// A request waiting for a person's decision. Human-only.
    PendingConfirm,
    /// A person said yes.
    Confirmed,
    /// A person said no (or cleared the inbox).
    Declined,
    /// Nobody decided before the deadline.
    Expired,
}

impl EntryState {
    /// The word used on disk, in JSON and in rendered text.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryState::Unread => "unread",
            EntryState::Read => "read",
            EntryState::Handled => "handled",
            EntryState::PendingConfirm => "pending_confirm",
            EntryState::Confirmed => "confirmed",
            EntryState::Declined => "declined",
            EntryState::Expired => "expired",
        }
    }
}

impl fmt::Display for EntryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One notification a server pushed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Its position; unique and increasing across restarts.
    pub seq: Seq,
    /// When roster received it, RFC 3339 in UTC.
    pub at: String,
    /// The server that sent it (its config name).
    pub channel: String,
    /// The JSON-RPC method, e.g. `notifications/message`.
    pub method: String,
    /// The notification's params (`null` when it had none).
    pub params: Value,
    /// Unread, read or handled, as the identity asking sees it.
    pub state: EntryState,
    /// The client identities it belongs to; empty when it is everyone's (see the module docs).
    /// An identity's view names only itself here, never another identity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<String>,
}

impl Entry {
    fn visible_to(&self, who: &str) -> bool {
        self.owners.is_empty() || self.owners.iter().any(|o| o == who)
    }
}

/// The id of a pending confirm (it shares the inbox's seq numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConfirmId(pub Seq);

impl fmt::Display for ConfirmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for ConfirmId {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim().trim_start_matches('#').parse().map(ConfirmId)
    }
}

/// The answer a pending confirm gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfirmDecision {
    /// A person said yes.
    Confirmed,
    /// A person said no, or cleared the inbox while it was pending.
    Declined,
    /// Nobody decided before the deadline (or roster restarted first).
    Expired,
}

impl ConfirmDecision {
    /// The entry state this decision leaves the confirm in.
    pub fn state(self) -> EntryState {
        match self {
            ConfirmDecision::Confirmed => EntryState::Confirmed,
            ConfirmDecision::Declined => EntryState::Declined,
            ConfirmDecision::Expired => EntryState::Expired,
        }
    }
}

impl fmt::Display for ConfirmDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.state().fmt(f)
    }
}

/// A server request that needs a person's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmRequest {
    /// The request's method, e.g. `elicitation/create`.
    pub method: String,
    /// What the person needs to decide (the request's params, or a summary of them).
    pub params: Value,
    /// How long the request waits before it is answered [`ConfirmDecision::Expired`].
    pub ttl: Duration,
}

/// A confirm as the person deciding it sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfirmEntry {
    /// The id `roster inbox confirm` takes.
    pub id: ConfirmId,
    /// When the request arrived, RFC 3339 in UTC.
    pub at: String,
    /// The server that asked.
    pub channel: String,
    /// The request's method.
    pub method: String,
    /// What is to be decided.
    pub params: Value,
    /// Pending, confirmed, declined or expired.
    pub state: EntryState,
    /// When it expires (or expired), RFC 3339 in UTC.
    pub expires_at: String,
}

/// The servers layer's handle on a pending confirm: the id, and the decision once there is one.
#[derive(Debug)]
pub struct PendingConfirm {
    /// The id a person decides it by.
    pub id: ConfirmId,
    /// When it will be answered [`ConfirmDecision::Expired`] if nobody decides.
    pub expires_at: SystemTime,
    decision: oneshot::Receiver<ConfirmDecision>,
}

impl PendingConfirm {
    /// Waits for the decision. If the inbox goes away first, the answer is `Expired`.
    pub async fn decision(self) -> ConfirmDecision {
        self.decision.await.unwrap_or(ConfirmDecision::Expired)
    }

    /// Waits for the decision on a plain thread (not inside an async runtime).
    pub fn blocking_decision(self) -> ConfirmDecision {
        self.decision
            .blocking_recv()
            .unwrap_or(ConfirmDecision::Expired)
    }

    /// The decision if there is one already, without waiting.
    pub fn try_decision(&mut self) -> Option<ConfirmDecision> {
        match self.decision.try_recv() {
            Ok(decision) => Some(decision),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => Some(ConfirmDecision::Expired),
        }
    }
}

/// What [`Inbox::clear`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClearReport {
    /// Entries removed from the ring.
    pub cleared: usize,
    /// Pending confirms answered `Declined` by the clear.
    pub declined_confirms: usize,
    /// With `all`: what could not be removed from disk. The ring is empty either way and later
    /// appends still land; and because the purge is recorded, a replay still drops the purged
    /// entries if the purge record itself could be written.
    pub partial_warning: Option<String>,
}

fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

struct PendingSlot {
    entry: ConfirmEntry,
    expires: SystemTime,
}

/// The inbox's content, rebuilt by replay and kept current by every change.
struct View {
    capacity: usize,
    ring: VecDeque<Entry>,
    pending: BTreeMap<Seq, PendingSlot>,
    /// Recently decided confirms, for the person's history; never part of the model's view.
    decided: VecDeque<ConfirmEntry>,
    next_seq: Seq,
    /// Read by everyone up to here (`clear`, and acks written before read state was per
    /// identity).
    acked_through: Seq,
    /// Each identity's own ack watermark; the ring keeps entries as recorded (unread or
    /// handled) and an identity's view is derived from this.
    acked_by: BTreeMap<String, Seq>,
    max_identities: usize,
    purged_through: Seq,
}

impl View {
    fn new(capacity: usize, max_identities: usize) -> Self {
        View {
            max_identities,
            acked_by: BTreeMap::new(),
            capacity: capacity.max(1),
            ring: VecDeque::new(),
            pending: BTreeMap::new(),
            decided: VecDeque::new(),
            next_seq: 1,
            acked_through: 0,
            purged_through: 0,
        }
    }

    fn last_seq(&self) -> Seq {
        self.next_seq - 1
    }

    fn push_entry(&mut self, entry: Entry) {
        if self.ring.len() >= self.capacity {
            self.ring.pop_front();
        }
        self.ring.push_back(entry);
    }

    fn push_decided(&mut self, entry: ConfirmEntry) {
        if self.decided.len() >= self.capacity {
            self.decided.pop_front();
        }
        self.decided.push_back(entry);
    }

    fn see_seq(&mut self, seq: Seq) {
        self.next_seq = self.next_seq.max(seq.saturating_add(1));
    }

    fn purge_through(&mut self, seq: Seq) {
        self.purged_through = self.purged_through.max(seq);
        let purged = self.purged_through;
        self.ring.retain(|e| e.seq > purged);
        self.pending.retain(|&s, _| s > purged);
        self.decided.retain(|c| c.id.0 > purged);
    }

    /// Replays one audit record.
    fn apply(&mut self, record: AuditRecord) {
        match record {
            AuditRecord::Entry {
                seq,
                at,
                channel,
                method,
                params,
                state,
                owners,
            } => {
                // Entries are written in seq order; one at or below a seq already seen is a
                // stale copy (or purged) and must not appear twice.
                if seq < self.next_seq || seq <= self.purged_through {
                    return;
                }
                self.see_seq(seq);
                let state = match state {
                    RecordedState::Handled => EntryState::Handled,
                    RecordedState::Unread => EntryState::Unread,
                };
                self.push_entry(Entry {
                    seq,
                    at,
                    channel,
                    method,
                    params,
                    state,
                    owners,
                });
            }
            AuditRecord::Ack { up_to, who, .. } => match who {
                Some(who) => {
                    let mark = self.acked_by.entry(who).or_default();
                    *mark = (*mark).max(up_to);
                }
                None => self.acked_through = self.acked_through.max(up_to),
            },
            AuditRecord::Confirm {
                seq,
                at,
                channel,
                method,
                params,
                expires_at,
            } => {
                self.see_seq(seq);
                // A fresh file repeats what was pending; a copy of one already decided is stale.
                if seq <= self.purged_through || self.decided.iter().any(|c| c.id.0 == seq) {
                    return;
                }
                // An unreadable deadline is already past: the request cannot outlive it.
                let expires =
                    humantime::parse_rfc3339(&expires_at).unwrap_or(SystemTime::UNIX_EPOCH);
                self.pending.insert(
                    seq,
                    PendingSlot {
                        entry: ConfirmEntry {
                            id: ConfirmId(seq),
                            at,
                            channel,
                            method,
                            params,
                            state: EntryState::PendingConfirm,
                            expires_at,
                        },
                        expires,
                    },
                );
            }
            AuditRecord::Decision { seq, decision, .. } => {
                if let Some(mut slot) = self.pending.remove(&seq) {
                    slot.entry.state = decision.state();
                    self.push_decided(slot.entry);
                }
            }
            AuditRecord::Checkpoint {
                next_seq,
                acked_through,
                purged_through,
                acked_by,
                ..
            } => {
                self.next_seq = self.next_seq.max(next_seq);
                self.acked_through = self.acked_through.max(acked_through);
                for (who, up_to) in acked_by {
                    let mark = self.acked_by.entry(who).or_default();
                    *mark = (*mark).max(up_to);
                }
                self.purge_through(purged_through);
            }
        }
    }

    /// Keeps the read state of at most `max_identities` identities after a replay (a trail
    /// may name clients that are no longer configured): those that acknowledged least lose
    /// theirs first, which only shows them more as unread.
    fn settle(&mut self) {
        let others = |view: &View| {
            view.acked_by
                .keys()
                .filter(|w| w.as_str() != LOCAL_IDENTITY)
                .count()
        };
        while others(self) > self.max_identities {
            let Some(least) = self
                .acked_by
                .iter()
                .filter(|(w, _)| w.as_str() != LOCAL_IDENTITY)
                .min_by_key(|(_, seq)| **seq)
                .map(|(w, _)| w.clone())
            else {
                break;
            };
            tracing::warn!(
                identity = %least,
                max = self.max_identities,
                "the audit trail holds read state for more client identities than max_identities; dropping the oldest"
            );
            self.acked_by.remove(&least);
        }
    }

    fn acked_for(&self, who: &str) -> Seq {
        self.acked_by
            .get(who)
            .copied()
            .unwrap_or(0)
            .max(self.acked_through)
    }

    /// The entry as `who` sees it: read once `who` acknowledged it, and naming no other
    /// identity (owners shrink to `who`, or stay empty for everyone's).
    fn seen_by(&self, entry: &Entry, who: &str, acked: Seq) -> Entry {
        let mut seen = entry.clone();
        if seen.state == EntryState::Unread && seen.seq <= acked {
            seen.state = EntryState::Read;
        }
        seen.owners.retain(|o| o == who);
        seen
    }

    fn list(&self, who: &str, channel: Option<&str>, limit: usize) -> Vec<Entry> {
        let acked = self.acked_for(who);
        self.ring
            .iter()
            .rev()
            .filter(|e| e.visible_to(who) && channel.is_none_or(|c| e.channel == c))
            .take(limit)
            .map(|e| self.seen_by(e, who, acked))
            .collect()
    }

    fn unread_iter<'a>(&'a self, who: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        let acked = self.acked_for(who);
        self.ring
            .iter()
            .filter(move |e| e.state == EntryState::Unread && e.seq > acked && e.visible_to(who))
    }

    fn unread(&self, who: &str) -> Vec<Entry> {
        let acked = self.acked_for(who);
        self.unread_iter(who)
            .map(|e| self.seen_by(e, who, acked))
            .collect()
    }

    fn unread_count(&self, who: &str) -> usize {
        self.unread_iter(who).count()
    }

    /// Moves `who`'s watermark to `target`; refused when `who` would be one identity too many.
    fn ack(&mut self, who: &str, target: Seq) -> Result<usize, InboxError> {
        if target <= self.acked_for(who) {
            return Ok(0);
        }
        let known = self.acked_by.contains_key(who);
        let others = self
            .acked_by
            .keys()
            .filter(|w| w.as_str() != LOCAL_IDENTITY)
            .count();
        if !known && who != LOCAL_IDENTITY && others >= self.max_identities {
            return Err(InboxError::TooManyIdentities {
                who: who.to_owned(),
                max: self.max_identities,
            });
        }
        let changed = self.unread_iter(who).filter(|e| e.seq <= target).count();
        self.acked_by.insert(who.to_owned(), target);
        Ok(changed)
    }

    fn pending_confirms(&self) -> Vec<ConfirmEntry> {
        self.pending.values().map(|s| s.entry.clone()).collect()
    }

    fn confirms(&self) -> Vec<ConfirmEntry> {
        let mut all: Vec<ConfirmEntry> = self
            .decided
            .iter()
            .cloned()
            .chain(self.pending_confirms())
            .collect();
        all.sort_by_key(|c| c.id);
        all
    }

    /// The first lines of a fresh audit file: the checkpoint, then every confirm still
    /// pending, so a reader of that file alone (a snapshot after the backup is gone) sees them.
    fn fresh_file_head(&self) -> Vec<AuditRecord> {
        let mut head = vec![self.checkpoint()];
        head.extend(self.pending.values().map(|slot| AuditRecord::Confirm {
            seq: slot.entry.id.0,
            at: slot.entry.at.clone(),
            channel: slot.entry.channel.clone(),
            method: slot.entry.method.clone(),
            params: slot.entry.params.clone(),
            expires_at: slot.entry.expires_at.clone(),
        }));
        head
    }

    fn checkpoint(&self) -> AuditRecord {
        AuditRecord::Checkpoint {
            at: now_rfc3339(),
            next_seq: self.next_seq,
            acked_through: self.acked_through,
            purged_through: self.purged_through,
            acked_by: self
                .acked_by
                .iter()
                .filter(|(_, seq)| **seq > self.acked_through)
                .map(|(w, seq)| (w.clone(), *seq))
                .collect(),
        }
    }
}

/// Replays the backup then the active file. Returns the view and where the active file's last
/// whole line ends.
fn replay(dir: &Path, capacity: usize, max_identities: usize) -> Result<(View, u64), InboxError> {
    let mut view = View::new(capacity, max_identities);
    let backup = backup_path(dir);
    match read_file(&backup) {
        Ok(read) => read.records.into_iter().for_each(|r| view.apply(r)),
        // The backup is history: an unreadable one must not keep the inbox from opening.
        Err(error) => tracing::warn!(
            path = %backup.display(),
            %error,
            "skipping the unreadable audit backup"
        ),
    }
    let active = audit_path(dir);
    let read = read_file(&active).map_err(|source| InboxError::ReadAudit {
        path: active.clone(),
        source,
    })?;
    read.records.into_iter().for_each(|r| view.apply(r));
    view.settle();
    Ok((view, read.valid_len))
}

/// The inbox as the audit trail on disk shows it, read without taking ownership of it.
pub struct InboxSnapshot {
    view: View,
}

impl InboxSnapshot {
    /// The most recent entries the local default identity sees, newest first, optionally of
    /// one channel only.
    pub fn list(&self, channel: Option<&str>, limit: usize) -> Vec<Entry> {
        self.view.list(LOCAL_IDENTITY, channel, limit)
    }

    /// Entries the local default identity has not acknowledged, oldest first.
    pub fn unread(&self) -> Vec<Entry> {
        self.view.unread(LOCAL_IDENTITY)
    }

    /// Confirms recorded as pending. Read from a live gateway's trail these are the ones it
    /// waits on; from a stopped one's, the ones it will expire when it opens.
    pub fn pending_confirms(&self) -> Vec<ConfirmEntry> {
        self.view.pending_confirms()
    }

    /// The highest seq given out so far (0 before the first).
    pub fn last_seq(&self) -> Seq {
        self.view.last_seq()
    }
}

struct Inner {
    view: View,
    attribution: Attribution,
    audit: AuditFile,
    waiters: HashMap<Seq, oneshot::Sender<ConfirmDecision>>,
}

impl Inner {
    fn append(&mut self, record: &AuditRecord) {
        let view = &self.view;
        self.audit
            .append_rotating(record, || view.fresh_file_head());
    }

    fn decide(&mut self, seq: Seq, decision: ConfirmDecision, reason: &str) -> Option<bool> {
        let mut slot = self.view.pending.remove(&seq)?;
        self.append(&AuditRecord::Decision {
            seq,
            at: now_rfc3339(),
            decision,
            reason: reason.to_owned(),
        });
        slot.entry.state = decision.state();
        self.view.push_decided(slot.entry);
        let delivered = self
            .waiters
            .remove(&seq)
            .is_some_and(|waiter| waiter.send(decision).is_ok());
        Some(delivered)
    }

    /// Expires confirms past their deadline, and those whose server stopped waiting (the
    /// [`PendingConfirm`] was dropped), so `pending` never offers a decision nobody receives.
    fn expire(&mut self, now: SystemTime) -> usize {
        let due: Vec<(Seq, &'static str)> = self
            .view
            .pending
            .iter()
            .filter_map(|(&seq, slot)| {
                if slot.expires <= now {
                    Some((seq, "nobody decided before the deadline"))
                } else if self.waiters.get(&seq).is_none_or(|w| w.is_closed()) {
                    Some((seq, "the server stopped waiting"))
                } else {
                    None
                }
            })
            .collect();
        for &(seq, reason) in &due {
            self.decide(seq, ConfirmDecision::Expired, reason);
        }
        due.len()
    }
}

struct Shared {
    inner: Mutex<Inner>,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves whole records behind (each write is one
        // write_all), so the state is still fit to use.
        lock(&self.inner)
    }
}

/// The inbox of one state directory. Share it behind an `Arc`; every method takes `&self`.
pub struct Inbox {
    shared: Arc<Shared>,
    housekeeper: Option<JoinHandle<()>>,
    dir: PathBuf,
    /// Held for the inbox's lifetime; the advisory lock goes with the handle.
    _lock: File,
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

fn take_lock(dir: &Path) -> Result<File, InboxError> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| InboxError::Lock {
            path: path.clone(),
            source,
        })?;
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => Ok(file),
        Err(fs4::TryLockError::WouldBlock) => Err(InboxError::Busy {
            dir: dir.to_path_buf(),
        }),
        Err(fs4::TryLockError::Error(source)) => Err(InboxError::Lock { path, source }),
    }
}

impl Inbox {
    /// Opens (creating if needed) the inbox in `config.dir`, replays its audit trail, and
    /// answers `Expired` on the trail for confirms a previous process left pending (nobody
    /// waits for them any more).
    pub fn open(config: InboxConfig) -> Result<Inbox, InboxError> {
        ensure_state_dir(&config.dir).map_err(|source| InboxError::CreateDir {
            dir: config.dir.clone(),
            source,
        })?;
        let lock = take_lock(&config.dir)?;
        let (view, valid_len) = replay(&config.dir, config.capacity, config.max_identities)?;
        let audit = AuditFile::open(&config.dir, valid_len, config.rotate_bytes, config.fsync)?;
        let mut inner = Inner {
            view,
            attribution: Attribution::default(),
            audit,
            waiters: HashMap::new(),
        };
        let orphans: Vec<Seq> = inner.view.pending.keys().copied().collect();
        for seq in orphans {
            inner.decide(
                seq,
                ConfirmDecision::Expired,
                "roster restarted before anyone decided",
            );
        }
        let tick = inner
            .audit
            .interval()
            .map_or(Duration::from_secs(1), |every| {
                (every / 2).min(Duration::from_secs(1))
            })
            .max(Duration::from_millis(10));
        let shared = Arc::new(Shared {
            inner: Mutex::new(inner),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let housekeeper = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("roster-inbox".into())
                .spawn(move || housekeep(&shared, tick))
                .map_err(|error| {
                    // Without the thread, interval syncs still happen on append and confirms
                    // still expire on `expire_confirms`; only the idle-time duties are lost.
                    tracing::warn!(%error, "could not start the inbox's background thread");
                })
                .ok()
        };
        Ok(Inbox {
            shared,
            housekeeper,
            dir: config.dir,
            _lock: lock,
        })
    }

    /// Reads the audit trail in `dir` as a replay would, without the lock and without writing:
    /// what `roster inbox list` shows when it may not own the trail.
    pub fn snapshot(dir: &Path, capacity: usize) -> Result<InboxSnapshot, InboxError> {
        let (view, _) = replay(dir, capacity, usize::MAX)?;
        Ok(InboxSnapshot { view })
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the gateway says which client identities have requests in flight at a server, so
    /// that what the server sends meanwhile is recorded as theirs.
    pub fn attribution(&self) -> Attribution {
        self.shared.lock().attribution.clone()
    }

    /// Keeps a notification from `channel`. `handled` says roster consumed it itself (it then
    /// never counts as unread). It belongs to the identities with a request in flight at
    /// `channel` (see the module docs). Returns its seq.
    pub fn record(&self, channel: &str, method: &str, params: Value, handled: bool) -> Seq {
        let mut inner = self.shared.lock();
        let owners = if method.ends_with("/list_changed") {
            Vec::new()
        } else {
            inner.attribution.owners(channel)
        };
        let seq = inner.view.next_seq;
        let (recorded, state) = if handled {
            (RecordedState::Handled, EntryState::Handled)
        } else {
            (RecordedState::Unread, EntryState::Unread)
        };
        let entry = Entry {
            seq,
            at: now_rfc3339(),
            channel: channel.to_owned(),
            method: method.to_owned(),
            params,
            state,
            owners,
        };
        inner.append(&AuditRecord::Entry {
            seq,
            at: entry.at.clone(),
            channel: entry.channel.clone(),
            method: entry.method.clone(),
            params: entry.params.clone(),
            state: recorded,
            owners: entry.owners.clone(),
        });
        // Only now: a rotation during the append writes a checkpoint whose next_seq must be
        // this entry's seq, which follows it in the fresh file.
        inner.view.next_seq = seq + 1;
        inner.view.push_entry(entry);
        seq
    }

    /// Keeps a request from `channel` that only a person may decide. It never shows in
    /// [`list`](Self::list), [`unread`](Self::unread) or [`render`]; the returned handle gets
    /// the decision from [`confirm`](Self::confirm), or `Expired` after `request.ttl`.
    pub fn record_pending_confirm(&self, channel: &str, request: ConfirmRequest) -> PendingConfirm {
        let (waiter, decision) = oneshot::channel();
        let now = SystemTime::now();
        let expires = now.checked_add(request.ttl).unwrap_or(now);
        let mut inner = self.shared.lock();
        let seq = inner.view.next_seq;
        let entry = ConfirmEntry {
            id: ConfirmId(seq),
            at: rfc3339(now),
            channel: channel.to_owned(),
            method: request.method,
            params: request.params,
            state: EntryState::PendingConfirm,
            expires_at: rfc3339(expires),
        };
        inner.append(&AuditRecord::Confirm {
            seq,
            at: entry.at.clone(),
            channel: entry.channel.clone(),
            method: entry.method.clone(),
            params: entry.params.clone(),
            expires_at: entry.expires_at.clone(),
        });
        inner.view.next_seq = seq + 1;
        inner
            .view
            .pending
            .insert(seq, PendingSlot { entry, expires });
        inner.waiters.insert(seq, waiter);
        PendingConfirm {
            id: ConfirmId(seq),
            expires_at: expires,
            decision,
        }
    }

    /// A person's decision on a pending confirm: `yes` confirms, otherwise declines. A confirm
    /// past its deadline is expired instead, and reported as already decided.
    pub fn confirm(&self, id: ConfirmId, yes: bool) -> Result<ConfirmDecision, InboxError> {
        let mut inner = self.shared.lock();
        inner.expire(SystemTime::now());
        if let Some(done) = inner.view.decided.iter().rev().find(|c| c.id == id) {
            let decision = match done.state {
                EntryState::Confirmed => ConfirmDecision::Confirmed,
                EntryState::Declined => ConfirmDecision::Declined,
                _ => ConfirmDecision::Expired,
            };
            return Err(InboxError::ConfirmDecided { id, decision });
        }
        let decision = if yes {
            ConfirmDecision::Confirmed
        } else {
            ConfirmDecision::Declined
        };
        match inner.decide(id.0, decision, "decided by a person") {
            None => Err(InboxError::UnknownConfirm { id }),
            Some(true) => Ok(decision),
            Some(false) => Err(InboxError::ConfirmAbandoned { id, decision }),
        }
    }

    /// Answers `Expired` to every pending confirm whose deadline is at or before `now` (and
    /// records as expired those whose waiter is gone); returns how many. The background thread
    /// calls this every second; call it to expire on your own clock.
    pub fn expire_confirms(&self, now: SystemTime) -> usize {
        self.shared.lock().expire(now)
    }

    /// Confirms waiting for a person, oldest first (any past their deadline, or whose server
    /// stopped waiting, are expired first).
    pub fn pending_confirms(&self) -> Vec<ConfirmEntry> {
        let mut inner = self.shared.lock();
        inner.expire(SystemTime::now());
        inner.view.pending_confirms()
    }

    /// Pending and recently decided confirms, by id: the person's history.
    pub fn confirms(&self) -> Vec<ConfirmEntry> {
        self.shared.lock().view.confirms()
    }

    /// The most recent entries the local default identity sees, newest first, optionally of
    /// one channel only. Never includes confirms.
    pub fn list(&self, channel: Option<&str>, limit: usize) -> Vec<Entry> {
        self.list_for(LOCAL_IDENTITY, channel, limit)
    }

    /// The most recent entries client identity `who` sees (its own and everyone's), newest
    /// first, with read state as `who` acknowledged them.
    pub fn list_for(&self, who: &str, channel: Option<&str>, limit: usize) -> Vec<Entry> {
        self.shared.lock().view.list(who, channel, limit)
    }

    /// Entries the local default identity has not acknowledged, oldest first. Handled entries
    /// are never here.
    pub fn unread(&self) -> Vec<Entry> {
        self.unread_for(LOCAL_IDENTITY)
    }

    /// Entries client identity `who` sees and has not acknowledged, oldest first.
    pub fn unread_for(&self, who: &str) -> Vec<Entry> {
        self.shared.lock().view.unread(who)
    }

    /// How many entries the local default identity has unread.
    pub fn unread_count(&self) -> usize {
        self.shared.lock().view.unread_count(LOCAL_IDENTITY)
    }

    /// The highest seq given out so far (0 before the first).
    pub fn last_seq(&self) -> Seq {
        self.shared.lock().view.last_seq()
    }

    /// Marks everything up to `up_to` (or everything so far, with `None`) as read for the local
    /// default identity; returns how many unread entries that changed. A seq beyond the last
    /// one acknowledges up to the last one only, never notifications yet to come.
    pub fn ack(&self, up_to: Option<Seq>) -> usize {
        // The local default's read state always has a place: the bound counts the others.
        self.ack_for(LOCAL_IDENTITY, up_to).unwrap_or(0)
    }

    /// [`ack`](Self::ack) for client identity `who`: marks read for `who` only. Refused with
    /// [`InboxError::TooManyIdentities`] when `who` would be one identity beyond
    /// [`InboxConfig::max_identities`].
    pub fn ack_for(&self, who: &str, up_to: Option<Seq>) -> Result<usize, InboxError> {
        let mut inner = self.shared.lock();
        let last = inner.view.last_seq();
        let target = up_to.map_or(last, |seq| seq.min(last));
        if target <= inner.view.acked_for(who) {
            return Ok(0);
        }
        let changed = inner.view.ack(who, target)?;
        inner.append(&AuditRecord::Ack {
            at: now_rfc3339(),
            up_to: target,
            who: Some(who.to_owned()),
        });
        Ok(changed)
    }

    /// Empties the ring, acknowledges everything and declines pending confirms. The audit trail
    /// stays on disk, so a restart replays it (as read). With `all`, the trail is purged too:
    /// the active file is truncated through the open append handle and the backup removed, and
    /// a purge record keeps a replay from bringing anything back. What fails on disk comes back
    /// as [`ClearReport::partial_warning`]; the in-memory drain always happens and later appends
    /// still land.
    pub fn clear(&self, all: bool) -> ClearReport {
        let mut inner = self.shared.lock();
        let cleared = inner.view.ring.len();
        inner.view.ring.clear();
        inner.view.decided.clear();
        let pending: Vec<Seq> = inner.view.pending.keys().copied().collect();
        for &seq in &pending {
            inner.decide(seq, ConfirmDecision::Declined, "the inbox was cleared");
        }
        inner.view.decided.clear();
        let last = inner.view.last_seq();
        let newly_acked = last > inner.view.acked_through;
        inner.view.acked_through = inner.view.acked_through.max(last);
        let mut partial_warning = None;
        if all {
            inner.view.purged_through = last;
            let problems = inner.audit.purge();
            let checkpoint = inner.view.checkpoint();
            inner.audit.append(&checkpoint);
            inner.audit.sync();
            let mut problems = problems;
            if let Some(failing) = inner.audit.failing() {
                problems.push(format!("could not record the purge: {failing}"));
            }
            if !problems.is_empty() {
                partial_warning = Some(format!(
                    "the inbox is empty, but the audit trail on disk was not fully purged: {}",
                    problems.join("; ")
                ));
            }
        } else if newly_acked {
            inner.append(&AuditRecord::Ack {
                at: now_rfc3339(),
                up_to: last,
                who: None,
            });
        }
        ClearReport {
            cleared,
            declined_confirms: pending.len(),
            partial_warning,
        }
    }

    /// fsyncs the audit trail now, whatever the policy.
    pub fn sync(&self) {
        self.shared.lock().audit.sync();
    }

    /// The last disk error, while writes to the audit trail are failing.
    pub fn audit_error(&self) -> Option<String> {
        self.shared.lock().audit.failing().map(str::to_owned)
    }
}

fn housekeep(shared: &Shared, tick: Duration) {
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
            inner.expire(SystemTime::now());
            inner.audit.take_due_sync()
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
        if inner.audit.interval().is_some() {
            inner.audit.sync();
        }
        for (_, waiter) in inner.waiters.drain() {
            let _ = waiter.send(ConfirmDecision::Expired);
        }
    }
}

#[cfg(test)]
mod tests;
