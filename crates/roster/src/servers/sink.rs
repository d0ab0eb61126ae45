//! Where every server notification is recorded, and where a server request that needs a
//! person's decision (`elicitation/create`) goes: the inbox plugs in here.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::inbox::{ConfirmDecision, ConfirmRequest};

/// A person's decision on a server request, once there is one.
pub type ConfirmFuture = Pin<Box<dyn Future<Output = ConfirmDecision> + Send>>;

/// Receives every notification any server sends, after roster decided whether it acted on it.
///
/// The inbox implements this (a bounded ring mirrored to a JSONL audit file). `channel` is the
/// server's configured name; `handled` is `true` when roster acted on the notification (a
/// `list_changed` that scheduled a re-list, a progress update routed to its call) and `false`
/// when it is only kept for reading (counted as unread). Called on the connection's reader:
/// implementations must not block on I/O for long.
pub trait NotificationSink: Send + Sync + 'static {
    /// Records one notification.
    fn record(&self, channel: &str, method: &str, params: Value, handled: bool);

    /// Whether [`NotificationSink::confirm`] reaches a person. Only then do roster's
    /// connections declare the `elicitation` capability to their servers.
    fn can_confirm(&self) -> bool {
        false
    }

    /// Asks a person to decide a request from server `channel`. Must not block: the decision
    /// comes through the returned future (awaited off the connection's reader). The default,
    /// for sinks with nobody to ask, declines at once.
    fn confirm(&self, channel: &str, request: ConfirmRequest) -> ConfirmFuture {
        let _ = (channel, request);
        Box::pin(std::future::ready(ConfirmDecision::Declined))
    }
}

/// A sink that only logs (at DEBUG), for embedders without an inbox.
#[derive(Debug, Default, Clone, Copy)]
pub struct LogSink;

impl NotificationSink for LogSink {
    fn record(&self, channel: &str, method: &str, params: Value, handled: bool) {
        tracing::debug!(server = channel, method, handled, %params, "server notification");
    }
}

/// The inbox records every notification: a bounded ring plus the JSONL audit trail.
impl NotificationSink for crate::inbox::Inbox {
    fn record(&self, channel: &str, method: &str, params: Value, handled: bool) {
        crate::inbox::Inbox::record(self, channel, method, params, handled);
    }

    fn can_confirm(&self) -> bool {
        true
    }

    /// Kept as a pending confirm that `roster inbox confirm` (or [`crate::inbox::Inbox::confirm`])
    /// decides; it expires after the request's `ttl`.
    fn confirm(&self, channel: &str, request: ConfirmRequest) -> ConfirmFuture {
        Box::pin(self.record_pending_confirm(channel, request).decision())
    }
}
