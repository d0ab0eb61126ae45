//! A server as status shows it: its connection state, listing state and counters, and the one
//! status JSON shape for `roster status`, the admin socket, `GET /healthz` and
//! [`crate::Roster::status_json`].

use std::time::{Duration, Instant};

use roster_core::ListingState;
use serde_json::{Value, json};

use crate::config::TransportConfig;

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
    /// The server wants an OAuth token roster does not hold: it waits, untried, until a
    /// `roster auth login` writes one.
    NeedsLogin,
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
            ServerState::NeedsLogin => "needs-login",
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
    /// Its first connection attempt (connecting, then the first listing) is not over yet:
    /// `roster serve` answers before its servers are up, and they join when ready.
    pub starting: bool,
    /// Listing state from the schedule (`None` for a disabled server).
    pub listing: Option<ListingState>,
    /// Tools of this server in the registry.
    pub tools: usize,
    /// Skills this server serves that roster takes (SEP-2640, `skills`), as last listed.
    pub skills: usize,
    /// The protocol version of the current connection.
    pub protocol_version: Option<String>,
    /// How often the server was restarted or reconnected after a drop.
    pub restarts: u64,
    /// The last failure (connect, listing, exit, ping).
    pub last_error: Option<String>,
    /// How often the server refused roster for want of a login or of scope (each refused
    /// connection or listing; a server waiting for a login is not tried, so this does not
    /// climb on its own).
    pub logins_asked: u64,
    /// The child process id of a running stdio server.
    pub pid: Option<u32>,
    /// Trailing edges of the `list_changed` debounce (each re-lists the server only if no turn
    /// listed it since).
    pub refresh_count: u64,
    /// Whether a trailing edge is waiting (a `list_changed` came within the debounce window).
    /// While it is not, no background re-list comes without a new `list_changed`.
    pub refresh_pending: bool,
}

/// The word `roster status` shows for a server's transport.
pub(crate) fn transport_name(transport: &TransportConfig) -> &'static str {
    match transport {
        TransportConfig::Stdio { .. } => "stdio",
        TransportConfig::StreamableHttp { .. } => "http",
        TransportConfig::Sse { .. } => "sse",
    }
}

/// Every server's status as a JSON array, instants made relative to `now` in milliseconds.
/// `transport` gives each server's transport (`None`: unknown to the caller): its name, and a
/// stdio server's sandbox (`null` when it runs unsandboxed).
pub(crate) fn servers_json(
    servers: &[ServerStatus],
    transport: impl Fn(&str) -> Option<Transport>,
    now: Instant,
) -> Value {
    Value::Array(
        servers
            .iter()
            .map(|s| server_json(s, transport(&s.name), now))
            .collect(),
    )
}

/// A server's transport as status shows it: its name, and a stdio server's sandbox (`null`
/// when it runs unsandboxed).
pub(crate) struct Transport {
    name: &'static str,
    sandbox: Value,
}

impl Transport {
    pub(crate) fn of(config: &TransportConfig) -> Transport {
        Transport {
            name: transport_name(config),
            sandbox: match config {
                TransportConfig::Stdio {
                    sandbox: Some(rules),
                    ..
                } => super::sandbox::status_json(rules),
                _ => Value::Null,
            },
        }
    }
}

fn server_json(s: &ServerStatus, transport: Option<Transport>, now: Instant) -> Value {
    let (transport, sandbox) = match transport {
        Some(t) => (Some(t.name), t.sandbox),
        None => (None, Value::Null),
    };
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let ago = |t: Instant| ms(now.saturating_duration_since(t));
    let until = |t: Instant| ms(t.saturating_duration_since(now));
    let (listing, listed_ago, next_in) = match &s.listing {
        None => ("disabled", None, None),
        Some(ListingState::NeverListed) => ("never-listed", None, Some(0)),
        Some(ListingState::Listed { at, valid_until }) => {
            ("listed", Some(ago(*at)), Some(until(*valid_until)))
        }
        Some(ListingState::Stale { last_listed }) => ("stale", last_listed.map(ago), Some(0)),
        Some(ListingState::Failed { next_try, .. }) => ("failed", None, Some(until(*next_try))),
        Some(ListingState::CrashLoop { next_try, .. }) => {
            ("crash-loop", None, Some(until(*next_try)))
        }
    };
    json!({
        "name": s.name,
        "transport": transport,
        "connection": s.state.as_str(),
        "starting": s.starting,
        "listing": listing,
        "tools": s.tools,
        "skills": s.skills,
        "listed_ms_ago": listed_ago,
        "next_listing_in_ms": next_in,
        "last_error": s.last_error,
        "protocol_version": s.protocol_version,
        "restarts": s.restarts,
        "logins_asked": s.logins_asked,
        "pid": s.pid,
        "refresh_count": s.refresh_count,
        "sandbox": sandbox,
    })
}
