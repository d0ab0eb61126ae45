//! The inbox's trail, the concern of the seam ([`super::Stores::inbox_trail`]): where every
//! change of the inbox is kept, as [`AuditRecord`]s in order, so a restart (or another
//! replica) replays the same inbox. Two backends: `audit.jsonl` in the state dir
//! ([`super::embedded`]), the log replicas share ([`super::postgres`]); in memory, nothing is
//! kept beyond the inbox.
//!
//! The trail is the inbox's memory across restarts, so everything that changes what a replay
//! must show is itself a record: entries, acknowledgements, pending confirms and their
//! decisions, and checkpoints (written at the head of every fresh file, so a file read alone
//! still knows where `seq` stands and what was acknowledged or purged).

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::StoreError;

/// The position of an entry in the inbox; increases by one per recorded notification or
/// pending confirm, across restarts.
pub type Seq = u64;

/// The interval of the default fsync policy.
pub const DEFAULT_FSYNC_INTERVAL: Duration = Duration::from_secs(1);

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

/// `confirmed`, `declined` or `expired`: the state it leaves the confirm in.
impl fmt::Display for ConfirmDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfirmDecision::Confirmed => "confirmed",
            ConfirmDecision::Declined => "declined",
            ConfirmDecision::Expired => "expired",
        })
    }
}

/// One line of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum AuditRecord {
    /// A notification a server pushed.
    Entry(RecordedEntry),
    /// Everything up to and including `up_to` was read by `who` (a client identity, `""` the
    /// local default). Without `who` (lines written before read state was per identity, and
    /// `clear`) it was read by everyone.
    Ack {
        at: String,
        up_to: Seq,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        who: Option<String>,
    },
    /// A server request only a person may decide. Never part of the model's view.
    Confirm {
        seq: Seq,
        at: String,
        channel: String,
        method: String,
        params: Value,
        expires_at: String,
    },
    /// The answer given to a pending confirm.
    Decision {
        seq: Seq,
        at: String,
        decision: ConfirmDecision,
        reason: String,
    },
    /// State carried into a fresh file (after rotation or `clear --all`).
    Checkpoint {
        at: String,
        next_seq: Seq,
        acked_through: Seq,
        purged_through: Seq,
        /// Each identity's own ack watermark, where it is above `acked_through`.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        acked_by: BTreeMap<String, Seq>,
    },
}

/// A notification as its line records it: an [`Entry`] with the state it was recorded in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedEntry {
    pub(crate) seq: Seq,
    pub(crate) at: String,
    pub(crate) channel: String,
    pub(crate) method: String,
    pub(crate) params: Value,
    pub(crate) state: RecordedState,
    /// The client identities it belongs to (see the inbox's module docs); none: everyone's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) owners: Vec<String>,
}

/// The state an entry was recorded with; `read` is derived from acknowledgements on replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RecordedState {
    Unread,
    Handled,
}

impl AuditRecord {
    /// The record as one line, newline included, so a single `write_all` puts it on disk whole.
    pub(crate) fn to_line(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut line = serde_json::to_vec(self)?;
        line.push(b'\n');
        Ok(line)
    }
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

/// Whether the record takes the next seq (a notification or a confirm).
pub(crate) fn takes_seq(record: &AuditRecord) -> bool {
    matches!(record, AuditRecord::Entry(_) | AuditRecord::Confirm { .. })
}

/// Gives a notification or confirm its seq (a log hands it out when it appends).
pub(crate) fn set_seq(record: &mut AuditRecord, to: Seq) {
    match record {
        AuditRecord::Entry(entry) => entry.seq = to,
        AuditRecord::Confirm { seq, .. } => *seq = to,
        _ => {}
    }
}

/// Now, as the trail's records write it (RFC 3339 in UTC, milliseconds).
pub(crate) fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// `at`, as the trail's records write it.
pub(crate) fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// What an append (or a flush of what waited) made ready to apply.
#[derive(Default)]
pub(crate) struct Flushed {
    /// The seq the last record appended took (when it took one and everything was appended).
    pub(crate) seq: Option<Seq>,
    /// Records appended right after the last applied one, in order: to be applied as they are.
    pub(crate) ready: Vec<AuditRecord>,
    /// Others appended in between: a catch-up is due to apply the rest.
    pub(crate) behind: bool,
}

impl Flushed {
    /// A trail only this process appends to: `record` takes `next_seq` (when it takes one),
    /// is handed to `write`, and is ready to apply as it is.
    pub(crate) fn local(
        mut record: AuditRecord,
        next_seq: Seq,
        write: impl FnOnce(&AuditRecord),
    ) -> Flushed {
        set_seq(&mut record, next_seq);
        write(&record);
        Flushed {
            seq: takes_seq(&record).then_some(next_seq),
            ready: vec![record],
            behind: false,
        }
    }
}

/// How the inbox wants its trail kept.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TrailOptions {
    /// Size at which `audit.jsonl` is rotated to `audit.jsonl.1`.
    pub(crate) rotate_bytes: u64,
    /// When appends to `audit.jsonl` are fsynced.
    pub(crate) fsync: FsyncPolicy,
    /// How many records the shared log holds before it is cut.
    pub(crate) retain: usize,
}

/// A trail opened for one inbox, and what it holds (to replay, oldest first).
pub(crate) struct OpenTrail {
    pub(crate) trail: Box<dyn InboxTrail>,
    pub(crate) records: Vec<AuditRecord>,
}

/// Where the inbox's records go, one backend's side, opened by [`super::Stores::inbox_trail`].
/// What only one of them does has a default that does nothing.
pub(crate) trait InboxTrail: Send {
    /// Whether replicas share it: a confirm may be decided on another replica, a purge is a
    /// cut of the log every replica applies.
    fn shared(&self) -> bool {
        false
    }

    /// How often the housekeeper syncs a quiet trail (`None`: it does not).
    fn interval(&self) -> Option<Duration> {
        None
    }

    /// Makes what was appended durable now.
    fn sync(&mut self) {}

    /// A sync that is due, to be done outside the inbox's lock.
    fn take_due_sync(&mut self) -> Option<Arc<File>> {
        None
    }

    /// The last error while appends are failing.
    fn failing(&self) -> Option<&str> {
        None
    }

    /// Appends `record`: a notification or a confirm takes `next_seq` (the view's), or the
    /// log's. `head` is what a fresh file starts with, should this append start one. Returns
    /// what may be applied now.
    fn append(
        &mut self,
        record: AuditRecord,
        next_seq: Seq,
        head: &dyn Fn() -> Vec<AuditRecord>,
    ) -> Flushed;

    /// What waited to be appended, appended now, and what other replicas appended since the
    /// last call (each with whether another replica appended it).
    fn catch_up(&mut self) -> (Flushed, Result<Vec<(AuditRecord, bool)>, StoreError>) {
        (Flushed::default(), Ok(Vec::new()))
    }

    /// The last position of the log this view applied (`None`: no log).
    fn applied(&self) -> Option<i64> {
        None
    }

    /// Whether the log holds more than it keeps.
    fn needs_compaction(&self) -> bool {
        false
    }

    /// Cuts the log: `prepare` gets the records not applied yet and returns the head to write
    /// (the state after every record so far); `Ok(false)`: nothing was cut.
    fn compact(
        &mut self,
        _prepare: &mut dyn FnMut(Vec<AuditRecord>) -> Vec<AuditRecord>,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// Removes what is kept, then appends `checkpoint` (`clear --all` of a trail no replica
    /// shares); what could not be done, in words.
    fn purge(&mut self, _checkpoint: &AuditRecord) -> Vec<String> {
        Vec::new()
    }
}

/// The trail of an inbox kept in memory only ([`super::Stores::in_memory`]): every record is
/// applied as it comes and nothing outlives the inbox.
pub(crate) struct MemoryTrail;

impl InboxTrail for MemoryTrail {
    fn append(
        &mut self,
        record: AuditRecord,
        next_seq: Seq,
        _head: &dyn Fn() -> Vec<AuditRecord>,
    ) -> Flushed {
        Flushed::local(record, next_seq, |_| {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fsync_policy_parses_its_words() {
        assert_eq!("always".parse(), Ok(FsyncPolicy::Always));
        assert_eq!("never".parse(), Ok(FsyncPolicy::Never));
        assert_eq!(
            "interval".parse(),
            Ok(FsyncPolicy::Interval(Duration::from_secs(1)))
        );
        assert_eq!(
            "interval:250ms".parse(),
            Ok(FsyncPolicy::Interval(Duration::from_millis(250)))
        );
        assert!("interval:0s".parse::<FsyncPolicy>().is_err());
        assert!("sometimes".parse::<FsyncPolicy>().is_err());
        let shown = FsyncPolicy::Interval(Duration::from_millis(250)).to_string();
        assert_eq!(
            shown.parse(),
            Ok(FsyncPolicy::Interval(Duration::from_millis(250)))
        );
    }

    #[test]
    fn fsync_policy_reads_from_config_text() {
        let policy: FsyncPolicy = serde_json::from_value(json!("interval:500ms")).expect("parses");
        assert_eq!(policy, FsyncPolicy::Interval(Duration::from_millis(500)));
        assert_eq!(
            serde_json::to_value(FsyncPolicy::Always).expect("encodes"),
            json!("always")
        );
        assert!(serde_json::from_value::<FsyncPolicy>(json!("often")).is_err());
    }
}
