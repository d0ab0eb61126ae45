//! The audit trail's line format: one [`AuditRecord`] per line of `audit.jsonl`.
//!
//! The file is the inbox's memory across restarts, so everything that changes what a replay must
//! show is itself a record: entries, acknowledgements, pending confirms and their decisions, and
//! checkpoints (written at the head of every fresh file, so a file read alone still knows where
//! `seq` stands and what was acknowledged or purged).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ConfirmDecision, Entry, EntryState, Seq};

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

impl From<RecordedEntry> for Entry {
    fn from(recorded: RecordedEntry) -> Self {
        Entry {
            seq: recorded.seq,
            at: recorded.at,
            channel: recorded.channel,
            method: recorded.method,
            params: recorded.params,
            state: match recorded.state {
                RecordedState::Handled => EntryState::Handled,
                RecordedState::Unread => EntryState::Unread,
            },
            owners: recorded.owners,
        }
    }
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
