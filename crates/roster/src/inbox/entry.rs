//! What the inbox holds, as its readers see it: a notification ([`Entry`]) and its
//! [`EntryState`]; a confirm ([`ConfirmEntry`]), its [`ConfirmId`] and the [`ConfirmDecision`]
//! it gets. The audit trail's lines and the ring are built from these words.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ConfirmDecision, Seq};

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
    pub(super) fn visible_to(&self, who: &str) -> bool {
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
