//! Where every server notification is recorded: the inbox plugs in here.

use serde_json::Value;

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
}
