//! A server as status shows it: its connection state, listing state and counters.

use std::time::{Duration, Instant};

use roster_core::ListingState;

/// A server's connection state, as status shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// `enabled = false`: configured, never started.
    Disabled,
    /// A connection attempt is under way.
    Connecting,
    /// Connected (its listing may still have failed: see [`ServerStatus::listing`]).
    Connected,
    /// Not connected; the next attempt waits out the backoff.
    Disconnected,
    /// Failed too often without a stable period; retried only at the longest backoff.
    CrashLoop,
}

impl ServerState {
    /// The name status prints (`crash-loop`, `connected`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Disabled => "disabled",
            ServerState::Connecting => "connecting",
            ServerState::Connected => "connected",
            ServerState::Disconnected => "disconnected",
            ServerState::CrashLoop => "crash-loop",
        }
    }
}

impl std::fmt::Display for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One server as [`crate::Roster::status`] reports it.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    /// The configured name.
    pub name: String,
    /// Connection state.
    pub state: ServerState,
    /// Listing state from the schedule (`None` for a disabled server).
    pub listing: Option<ListingState>,
    /// Tools of this server in the registry.
    pub tools: usize,
    /// The protocol version of the current connection.
    pub protocol_version: Option<String>,
    /// How often the server was restarted or reconnected after a drop.
    pub restarts: u64,
    /// The last failure (connect, listing, exit, ping).
    pub last_error: Option<String>,
    /// The child process id of a running stdio server.
    pub pid: Option<u32>,
    /// Trailing edges of the `list_changed` debounce (each re-lists the server only if no turn
    /// listed it since).
    pub refresh_count: u64,
    /// Whether a trailing edge is waiting (a `list_changed` came within the debounce window).
    /// While it is not, no background re-list comes without a new `list_changed`.
    pub refresh_pending: bool,
}

impl ServerStatus {
    /// A JSON view: instants become "in N ms" / "N ms ago" relative to `now`.
    pub fn to_json(&self, now: Instant) -> serde_json::Value {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let listing = match &self.listing {
            None => serde_json::json!(null),
            Some(ListingState::NeverListed) => serde_json::json!({"state": "never-listed"}),
            Some(ListingState::Listed { at, valid_until }) => serde_json::json!({
                "state": "listed",
                "listed_ms_ago": ms(now.saturating_duration_since(*at)),
                "valid_for_ms": ms(valid_until.saturating_duration_since(now)),
            }),
            Some(ListingState::Stale { .. }) => serde_json::json!({"state": "stale"}),
            Some(ListingState::Failed {
                attempt,
                next_try,
                error,
            }) => serde_json::json!({
                "state": "failed",
                "attempt": attempt,
                "next_try_in_ms": ms(next_try.saturating_duration_since(now)),
                "error": error,
            }),
            Some(ListingState::CrashLoop {
                failures,
                next_try,
                error,
            }) => serde_json::json!({
                "state": "crash-loop",
                "failures": failures,
                "next_try_in_ms": ms(next_try.saturating_duration_since(now)),
                "error": error,
            }),
        };
        serde_json::json!({
            "name": self.name,
            "state": self.state.as_str(),
            "listing": listing,
            "tools": self.tools,
            "protocol_version": self.protocol_version,
            "restarts": self.restarts,
            "last_error": self.last_error,
            "pid": self.pid,
            "refresh_count": self.refresh_count,
        })
    }
}
