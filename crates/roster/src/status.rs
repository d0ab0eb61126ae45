//! The status JSON of the servers: one shape for `roster status`, the admin socket,
//! `GET /healthz` and [`crate::Roster::status_json`].

use std::time::{Duration, Instant};

use roster_core::ListingState;
use serde_json::{Value, json};

use crate::config::TransportConfig;
use crate::servers::ServerStatus;

/// The word `roster status` shows for a server's transport.
pub(crate) fn transport_name(transport: &TransportConfig) -> &'static str {
    match transport {
        TransportConfig::Stdio { .. } => "stdio",
        TransportConfig::StreamableHttp { .. } => "http",
        TransportConfig::Sse { .. } => "sse",
    }
}

/// Every server's status as a JSON array, instants made relative to `now` in milliseconds.
/// `transport` names each server's transport (`None`: unknown to the caller).
pub(crate) fn servers_json<'a>(
    servers: &[ServerStatus],
    transport: impl Fn(&str) -> Option<&'a str>,
    now: Instant,
) -> Value {
    Value::Array(
        servers
            .iter()
            .map(|s| server_json(s, transport(&s.name), now))
            .collect(),
    )
}

fn server_json(s: &ServerStatus, transport: Option<&str>, now: Instant) -> Value {
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
        "listing": listing,
        "tools": s.tools,
        "listed_ms_ago": listed_ago,
        "next_listing_in_ms": next_in,
        "last_error": s.last_error,
        "protocol_version": s.protocol_version,
        "restarts": s.restarts,
        "pid": s.pid,
        "refresh_count": s.refresh_count,
    })
}
