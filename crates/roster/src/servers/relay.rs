//! What a server asks of its client during a request, relayed to the caller behind that request.
//!
//! A server may ask its client for a model completion (`sampling/createMessage`), for the user's
//! input (`elicitation/create`) or for the client's roots (`roots/list`), and may send log
//! messages (`notifications/message`) while it works. roster is that client for every server, so
//! each request a client sends through roster carries a [`CallerRelay`]: the client behind it.
//!
//! - **Who is asked.** Each connection keeps the requests in flight to its server with their
//!   callers ([`InFlight`]). A server request that names the request it belongs to (streamable
//!   HTTP delivers it on that request's response stream) goes to that request's caller. Without
//!   that (stdio and SSE carry no such link) it goes to the caller of the **oldest** request in
//!   flight to that server — with one caller, that caller. The rule is deterministic; with
//!   several clients calling one stdio server at once it can pick the wrong one, so servers that
//!   ask their clients should be reached over streamable HTTP when shared.
//! - **When nobody can answer** (no request in flight, or its caller did not declare the
//!   capability): an elicitation becomes a pending confirm in the inbox, as before relaying
//!   existed — anything that needs a human decision stays the human's; sampling and roots get a
//!   JSON-RPC error naming why.
//! - **Eras.** A 2026-07-28 server does not send requests: it answers with an `input_required`
//!   result. For a caller that speaks 2026-07-28 too ([`CallerRelay::takes_input_required`]),
//!   that result goes to it untouched and its retry reaches the server with the answers. For an
//!   initialize-era caller roster asks it each input request and retries the call with the
//!   answers, up to [`MAX_INPUT_ROUNDS`] rounds, so the caller never sees `input_required`. To
//!   a 2026-07-28 server each request declares the caller's own capabilities (those roster can
//!   relay), so the server asks only what the caller can answer.
//! - **Logs.** A server's `notifications/message` goes to the caller of the request in flight
//!   (chosen as above) when that caller asked for log messages at that level or above
//!   ([`CallerRelay::log_level`]); it is recorded in the inbox either way.

use crate::sync::lock;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::ErrorData;
use rmcp::model::RequestId;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// `sampling/createMessage`: the server asks the client's model for a completion.
pub const SAMPLING: &str = "sampling/createMessage";
/// `elicitation/create`: the server asks the user for input.
pub const ELICITATION: &str = "elicitation/create";
/// `roots/list`: the server asks for the client's roots.
pub const ROOTS: &str = "roots/list";
/// `notifications/message`: a server's log message.
pub const LOG_MESSAGE: &str = "notifications/message";

/// How many `input_required` rounds roster answers for an initialize-era caller before it gives
/// up on the call (a server that keeps asking is looping).
pub const MAX_INPUT_ROUNDS: usize = 10;

/// The JSON-RPC code of an answer that needs a client capability the caller lacks (SEP-2575's
/// `MissingRequiredClientCapability`).
pub const MISSING_CAPABILITY: i32 = -32021;

/// A log message's severity, lowest first (RFC 5424, as MCP's logging uses it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Detailed debugging information.
    Debug,
    /// General information.
    Info,
    /// Normal but significant events.
    Notice,
    /// Warning conditions.
    Warning,
    /// Error conditions.
    Error,
    /// Critical conditions.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    /// The level of a `notifications/message`'s params, if it names a known one.
    pub fn of_message(params: &Value) -> Option<LogLevel> {
        serde_json::from_value(params.get("level")?.clone()).ok()
    }
}

/// The client behind one request sent through roster: what it can answer for the server the
/// request reaches, and where that server's log messages for it go.
///
/// The gateway implements it for its MCP clients; an embedding agent host implements it to
/// answer sampling, elicitation and roots itself, and passes it in
/// [`super::CallOptions::caller`].
pub trait CallerRelay: Send + Sync + 'static {
    /// The client capabilities the caller declared (`ClientCapabilities` as JSON). roster
    /// relays only `sampling`, `elicitation` and `roots` requests, each only when declared.
    fn capabilities(&self) -> Value;

    /// Sends one request (`sampling/createMessage`, `elicitation/create`, `roots/list`) to the
    /// caller; its result, or the JSON-RPC error it answered with.
    fn ask(&self, method: &str, params: Value) -> BoxFuture<'static, Result<Value, ErrorData>>;

    /// `true` for a caller that speaks 2026-07-28 and handles `input_required` results itself:
    /// they are passed to it untouched instead of answered by roster.
    fn takes_input_required(&self) -> bool {
        false
    }

    /// The lowest level of log messages the caller asked for; `None`: it asked for none.
    fn log_level(&self) -> Option<LogLevel> {
        None
    }

    /// Delivers a server's `notifications/message` params at or above
    /// [`CallerRelay::log_level`]. Must not wait for the caller (it runs on the connection's
    /// reader).
    fn log(&self, params: Value) {
        let _ = params;
    }
}

/// The caller of a request roster runs for a client after the client's own request ended (a
/// task, SEP-2663): `input_required` results go back to the client through roster, and nothing
/// can be asked mid-call.
#[derive(Debug, Clone)]
pub struct InputRequiredOnly {
    capabilities: Value,
}

impl InputRequiredOnly {
    /// A caller with the client's declared `capabilities`.
    pub fn new(capabilities: Value) -> Arc<Self> {
        Arc::new(Self { capabilities })
    }
}

impl CallerRelay for InputRequiredOnly {
    fn capabilities(&self) -> Value {
        self.capabilities.clone()
    }

    fn ask(&self, method: &str, _params: Value) -> BoxFuture<'static, Result<Value, ErrorData>> {
        let error = ErrorData::invalid_request(
            format!(
                "roster cannot relay `{method}`: the client is not waiting on this call (it \
                 runs as a task); ask with an input_required result instead"
            ),
            None,
        );
        Box::pin(std::future::ready(Err(error)))
    }

    fn takes_input_required(&self) -> bool {
        true
    }
}

/// Why a caller with these `capabilities` cannot take `method`, in words for the server or the
/// caller; `None` when it can.
pub fn refusal(capabilities: &Value, method: &str, params: &Value) -> Option<String> {
    let declared = |path: &[&str]| {
        let mut at = capabilities;
        for key in path {
            match at.get(key) {
                Some(next) if !next.is_null() => at = next,
                _ => return false,
            }
        }
        true
    };
    match method {
        SAMPLING => {
            if !declared(&["sampling"]) {
                return Some("the calling client did not declare the sampling capability".into());
            }
            let wants_tools = ["tools", "toolChoice"]
                .iter()
                .any(|k| params.get(k).is_some_and(|v| !v.is_null()));
            (wants_tools && !declared(&["sampling", "tools"])).then(|| {
                "the request uses tools, and the calling client did not declare sampling.tools"
                    .into()
            })
        }
        ELICITATION => {
            if !declared(&["elicitation"]) {
                return Some(
                    "the calling client did not declare the elicitation capability".into(),
                );
            }
            let url = params.get("mode").and_then(Value::as_str) == Some("url");
            let modes = ["form", "url"].map(|m| declared(&["elicitation", m]));
            // An empty `elicitation: {}` is the form mode of clients older than the modes.
            let form = modes[0] || !modes[1];
            match (url, modes[1], form) {
                (true, false, _) => {
                    Some("the calling client did not declare URL elicitation".into())
                }
                (false, _, false) => {
                    Some("the calling client did not declare form elicitation".into())
                }
                _ => None,
            }
        }
        ROOTS => (!declared(&["roots"]))
            .then(|| "the calling client did not declare the roots capability".into()),
        other => Some(format!(
            "roster relays no `{other}` requests to its clients"
        )),
    }
}

/// The capabilities a caller may be said to have to a server: its own `sampling`,
/// `elicitation` and `roots`, the only requests roster relays.
pub fn relayable(capabilities: &Value) -> Map<String, Value> {
    ["sampling", "elicitation", "roots"]
        .iter()
        .filter_map(|key| {
            let value = capabilities.get(*key).filter(|v| !v.is_null())?;
            Some(((*key).to_owned(), value.clone()))
        })
        .collect()
}

/// The error a caller gets when a server's `input_required` asks what it cannot answer.
pub fn missing_capability(method: &str, reason: &str) -> ErrorData {
    let capability = match method {
        SAMPLING => "sampling",
        ELICITATION => "elicitation",
        ROOTS => "roots",
        _ => "unknown",
    };
    ErrorData::new(
        rmcp::model::ErrorCode(MISSING_CAPABILITY),
        format!("the server asked for `{method}`, which roster cannot relay: {reason}"),
        Some(json!({ "requiredCapabilities": { capability: {} } })),
    )
}

/// Whether a result is an `input_required` result (2026-07-28).
pub fn is_input_required(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("input_required")
}

/// The requests in flight to one server with their callers, oldest first.
#[derive(Default)]
pub(crate) struct InFlight {
    next: AtomicU64,
    calls: Mutex<BTreeMap<u64, Entry>>,
}

struct Entry {
    /// The JSON-RPC id of the request on the server connection, once sent.
    request: Option<RequestId>,
    caller: Option<Arc<dyn CallerRelay>>,
}

/// Keeps one request in [`InFlight`] until dropped.
pub(crate) struct InFlightGuard<'a> {
    registry: &'a InFlight,
    seq: u64,
}

impl InFlight {
    fn calls(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry>> {
        lock(&self.calls)
    }

    /// Records a request before it is sent, so a server that asks at once finds its caller.
    pub(crate) fn enter(&self, caller: Option<Arc<dyn CallerRelay>>) -> InFlightGuard<'_> {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        self.calls().insert(
            seq,
            Entry {
                request: None,
                caller,
            },
        );
        InFlightGuard {
            registry: self,
            seq,
        }
    }

    /// The caller a server request or log message belongs to: the caller of request `origin`
    /// when the transport named it and it is in flight, else the oldest request's caller.
    pub(crate) fn caller(&self, origin: Option<&RequestId>) -> Option<Arc<dyn CallerRelay>> {
        let calls = self.calls();
        let named = origin.and_then(|id| {
            calls
                .values()
                .find(|entry| entry.request.as_ref() == Some(id))
        });
        named
            .or_else(|| calls.values().next())
            .and_then(|entry| entry.caller.clone())
    }

    /// Whether any request is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.calls().is_empty()
    }
}

impl InFlightGuard<'_> {
    /// Names the JSON-RPC id the request (or its latest round) was sent with.
    pub(crate) fn sent_as(&self, id: RequestId) {
        if let Some(entry) = self.registry.calls().get_mut(&self.seq) {
            entry.request = Some(id);
        }
    }
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.registry.calls().remove(&self.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str);

    impl CallerRelay for Named {
        fn capabilities(&self) -> Value {
            json!({ "name": self.0 })
        }
        fn ask(&self, _: &str, _: Value) -> BoxFuture<'static, Result<Value, ErrorData>> {
            Box::pin(async { Ok(Value::Null) })
        }
    }

    fn name(caller: Option<Arc<dyn CallerRelay>>) -> Option<Value> {
        caller.map(|c| c.capabilities()["name"].clone())
    }

    #[test]
    fn a_named_request_wins_else_the_oldest_caller_is_asked() {
        let in_flight = InFlight::default();
        assert!(in_flight.caller(None).is_none(), "nobody in flight");
        let first = in_flight.enter(Some(Arc::new(Named("first"))));
        let second = in_flight.enter(Some(Arc::new(Named("second"))));
        second.sent_as(RequestId::Number(7));
        assert_eq!(name(in_flight.caller(None)), Some(json!("first")));
        assert_eq!(
            name(in_flight.caller(Some(&RequestId::Number(7)))),
            Some(json!("second"))
        );
        assert_eq!(
            name(in_flight.caller(Some(&RequestId::Number(9)))),
            Some(json!("first")),
            "an id not in flight falls back to the oldest"
        );
        drop(first);
        assert_eq!(name(in_flight.caller(None)), Some(json!("second")));
        let _anonymous = in_flight.enter(None);
        drop(second);
        assert!(
            in_flight.caller(None).is_none(),
            "the oldest request has no caller: nobody is asked"
        );
        assert!(!in_flight.is_empty());
    }

    #[test]
    fn refusals_name_the_missing_capability() {
        let none = json!({});
        let all = json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}});
        assert!(refusal(&all, SAMPLING, &json!({})).is_none());
        assert!(refusal(&none, SAMPLING, &json!({})).is_some_and(|r| r.contains("sampling")));
        assert!(
            refusal(&all, SAMPLING, &json!({"tools": []}))
                .is_some_and(|r| r.contains("sampling.tools"))
        );
        assert!(refusal(&all, ELICITATION, &json!({"message": "hi"})).is_none());
        assert!(
            refusal(&all, ELICITATION, &json!({"mode": "url"})).is_some_and(|r| r.contains("URL"))
        );
        let url_only = json!({"elicitation": {"url": {}}});
        assert!(refusal(&url_only, ELICITATION, &json!({"mode": "url"})).is_none());
        assert!(refusal(&url_only, ELICITATION, &json!({})).is_some_and(|r| r.contains("form")));
        assert!(refusal(&all, ROOTS, &json!({})).is_none());
        assert!(refusal(&json!({"roots": null}), ROOTS, &json!({})).is_some());
        assert!(refusal(&all, "ping", &json!({})).is_some());
        assert_eq!(
            relayable(&json!({"sampling": {}, "experimental": {}, "roots": null})),
            json!({"sampling": {}})
                .as_object()
                .cloned()
                .unwrap_or_default()
        );
    }

    #[test]
    fn log_levels_order_by_severity() {
        assert!(LogLevel::Debug < LogLevel::Info && LogLevel::Alert < LogLevel::Emergency);
        assert_eq!(
            LogLevel::of_message(&json!({"level": "warning", "data": "x"})),
            Some(LogLevel::Warning)
        );
        assert_eq!(LogLevel::of_message(&json!({"level": "loud"})), None);
    }
}
