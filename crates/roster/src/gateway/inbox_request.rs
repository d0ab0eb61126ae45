//! What the admin socket and the dashboard ask of a gateway's inbox: the operations of
//! `roster inbox` ([`InboxRequest`]), carried out by [`run_inbox`] with the same calls
//! `roster inbox` makes when it owns the trail itself.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::inbox::{ConfirmId, Inbox, Seq};

/// What an admin client can ask of the gateway's inbox: the operations of `roster inbox`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum InboxRequest {
    /// The most recent entries, newest first: a list of [`crate::inbox::Entry`].
    List {
        /// Only this server's entries.
        channel: Option<String>,
        /// At most this many.
        limit: usize,
    },
    /// Unread entries, oldest first: a list of [`crate::inbox::Entry`].
    Unread,
    /// Acknowledge up to `up_to` (or everything): `{"acknowledged": N}`.
    Ack {
        /// The last seq to mark read.
        up_to: Option<Seq>,
    },
    /// Pending confirms, oldest first: a list of [`crate::inbox::ConfirmEntry`].
    Pending,
    /// Decide a pending confirm: `{"decision": "confirmed" | "declined"}`.
    Confirm {
        /// The confirm.
        id: ConfirmId,
        /// Yes confirms, otherwise declines.
        yes: bool,
    },
    /// Clear the inbox (with `all` also the audit trail):
    /// `{"cleared": N, "declined_confirms": N, "partial_warning": null | "..."}`.
    Clear {
        /// Purge the audit trail too.
        all: bool,
    },
}

/// Why a gateway cannot answer an inbox request.
pub(crate) const NO_INBOX: &str =
    "this gateway runs without an inbox (another roster process owns it; see the gateway's log)";

/// Carries out an inbox request on `inbox` with the same calls `roster inbox` makes when it
/// owns the trail itself; errors are the inbox's own sentences.
pub(crate) fn run_inbox(inbox: &Inbox, request: InboxRequest) -> Result<Value, String> {
    let encode = |value: Result<Value, serde_json::Error>| value.map_err(|e| e.to_string());
    match request {
        InboxRequest::List { channel, limit } => {
            encode(serde_json::to_value(inbox.list(channel.as_deref(), limit)))
        }
        InboxRequest::Unread => encode(serde_json::to_value(inbox.unread())),
        InboxRequest::Ack { up_to } => Ok(json!({"acknowledged": inbox.ack(up_to)})),
        InboxRequest::Pending => encode(serde_json::to_value(inbox.pending_confirms())),
        InboxRequest::Confirm { id, yes } => match inbox.confirm(id, yes) {
            Ok(decision) => Ok(json!({"decision": decision})),
            Err(e) => Err(e.to_string()),
        },
        InboxRequest::Clear { all } => {
            let report = inbox.clear(all);
            Ok(json!({
                "cleared": report.cleared,
                "declined_confirms": report.declined_confirms,
                "partial_warning": report.partial_warning,
            }))
        }
    }
}
