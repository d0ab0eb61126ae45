//! A caller's request to a streamable HTTP server, POSTed by roster itself — the streamable HTTP
//! side of [`super::wire::Direct`].
//!
//! rmcp's streamable HTTP transport writes every request from rmcp's typed message and parses
//! every answer into rmcp's types, on a worker task of its own. For the requests roster only
//! forwards (`tools/call`, `prompts/get`, `resources/read`) to a server of the `initialize` era,
//! roster POSTs the request itself, on the calling task: with the session rmcp's transport holds
//! ([`Posting`], as rmcp last sent it), the call's arguments as the client wrote them, and the
//! answer's `result` kept as the server wrote it ([`Received::Result`]). What else comes on the
//! call's response stream (progress, log messages, the server's requests, which name this call
//! as the request they belong to) is handed to rmcp's service as if its transport had read it
//! ([`Injected`]), before the answer is given back, so a call still sees what came before its
//! result. A stream that ends before the answer is resumed from its last event id, as rmcp's
//! transport would.
//!
//! A 2026-07-28 server gets its era's headers with each request (SEP-2243, [`era_headers`]):
//! `Mcp-Method`, `Mcp-Name`, and an `Mcp-Param-*` header for each argument the tool's input
//! schema marks with `x-mcp-header` — the arguments are parsed for that only where the tool
//! has such a mark ([`HttpDirect::set_tools`] keeps the marks of each listing). A POST the
//! server does not take — 401, 403, 404 (a token to refresh, more scope, a session gone) — is
//! sent again through rmcp, which knows what to do with those; the server ran nothing. One it
//! refuses for load — 429, 503 — is sent again after the `Retry-After` it names (seconds or an
//! HTTP date; a wait over 10 s ends the call, naming it), else after 100 ms, doubled at each
//! refusal, [`THROTTLED_TRIES`] times in all.

use crate::sync::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use rmcp::RoleClient;
use rmcp::model::{GetExtensions, JsonRpcMessage, RequestId};
use rmcp::service::{InboundStreamOrigin, RxJsonRpcMessage};
use roster_core::Tool;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::bytes::Bytes;

use super::error::RequestError;
use super::gate::Holding;
use super::sse::EventParser;
use super::wire::{DIRECT_IDS, Received, parse_line};

/// The most bytes of a JSON answer read (the stdio line bound).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// How many times a response stream is resumed in a row without a new message before the call
/// gives up.
const MAX_RESUMES: u32 = 3;

/// How long to wait before resuming a stream whose server named no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_millis(500);

/// The longest wait a server may ask for: its `retry` before a resume, its `Retry-After` before
/// a refused call is sent again (a longer one ends the call).
const MAX_RETRY: Duration = Duration::from_secs(10);

/// How many times a POST refused for load (429 Too Many Requests, 503 Service Unavailable: the
/// server ran nothing) is sent in all before the refusal is the call's error.
const THROTTLED_TRIES: u32 = 4;

/// The wait before sending a refused POST again when the server named none (`Retry-After`):
/// doubled at each refusal.
const THROTTLED_WAIT: Duration = Duration::from_millis(100);

/// How many messages from calls' response streams wait for rmcp's service at most; a call's
/// reader waits while it is full.
pub(crate) const INJECTED_QUEUE: usize = 64;

/// What rmcp's transport last sent with a request after the handshake: the session, the
/// bearer token, and its headers (the configured ones and `MCP-Protocol-Version`).
#[derive(Debug, Clone)]
pub(crate) struct Posting {
    pub(crate) session: Option<Arc<str>>,
    pub(crate) token: Option<String>,
    pub(crate) headers: HashMap<HeaderName, HeaderValue>,
}

/// Where the HTTP client records the last [`Posting`] for roster's own requests to use.
pub(crate) type PostingSlot = Arc<Mutex<Option<Posting>>>;

/// A message for rmcp's service that came on a call's response stream, in order.
pub(crate) enum Injected {
    /// A message for rmcp's service.
    Message(Box<RxJsonRpcMessage<RoleClient>>),
    /// Fired once every message before it was handed to rmcp.
    Barrier(oneshot::Sender<()>),
}

/// Why a POSTed request has no answer.
pub(crate) enum Unposted {
    /// The server did not take it (401, 403, 404): send it through rmcp.
    NotTaken,
    /// It failed.
    Failed(RequestError),
}

/// Roster's own requests to one streamable HTTP server.
#[derive(Clone)]
pub(crate) struct HttpDirect {
    inner: Arc<Inner>,
}

struct Inner {
    server: Arc<str>,
    url: Arc<str>,
    client: reqwest::Client,
    posting: PostingSlot,
    injected: mpsc::Sender<Injected>,
    /// Whether the connection's gate holds a coalesced `list_changed` (see [`Holding`]).
    holding: Holding,
    next: AtomicU64,
    /// The `x-mcp-header` marks of the tools of the last listing that have any, by tool name.
    marked: RwLock<HashMap<Box<str>, Arc<[ParamHeader]>>>,
}

/// An argument a 2026-07-28 request carries in a header too (SEP-2243): where it is in the
/// arguments, and its `Mcp-Param-*` header.
#[derive(Debug, PartialEq)]
struct ParamHeader {
    path: Box<[Box<str>]>,
    header: HeaderName,
}

impl HttpDirect {
    pub(crate) fn new(
        server: Arc<str>,
        url: &str,
        client: reqwest::Client,
        posting: PostingSlot,
        injected: mpsc::Sender<Injected>,
        holding: Holding,
    ) -> Self {
        HttpDirect {
            inner: Arc::new(Inner {
                server,
                url: Arc::from(url),
                client,
                posting,
                injected,
                holding,
                next: AtomicU64::new(DIRECT_IDS),
                marked: RwLock::default(),
            }),
        }
    }

    /// Whether rmcp's transport has sent a request since the handshake (its session is known).
    pub(crate) fn ready(&self) -> bool {
        lock(&self.inner.posting).is_some()
    }

    /// The id the next request goes with (its progress token is chosen from it).
    pub(crate) fn next_id(&self) -> u64 {
        self.inner.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Keeps the `x-mcp-header` marks of a 2026-07-28 server's listed tools (rmcp's transport
    /// already dropped a tool whose marks are not well-formed).
    ///
    /// A tool whose marks break SEP-2243's rules is left out of `tools` first, with a warning
    /// naming it and the rule: a client must not call it (roster could not say which headers
    /// its calls carry), as rmcp's own client does when it reads the listing.
    pub(crate) fn set_tools(&self, server: &str, tools: &mut Vec<Tool>) {
        tools.retain(|tool| match header_marks_problem(&tool.input_schema) {
            None => true,
            Some(problem) => {
                tracing::warn!(server, tool = %tool.name, "tool left out: {problem}");
                false
            }
        });
        let marked = tools
            .iter()
            .filter_map(|tool| {
                let marks = param_headers(&tool.input_schema);
                (!marks.is_empty()).then(|| (Box::from(tool.name.as_str()), marks.into()))
            })
            .collect();
        *self.inner.marked.write().unwrap_or_else(|e| e.into_inner()) = marked;
    }

    /// The headers a 2026-07-28 request of `method` carries (SEP-2243): its protocol version,
    /// `Mcp-Method`, `Mcp-Name` (a tool's or prompt's name, a resource's URI), and for a
    /// marked tool the `Mcp-Param-*` of its marked arguments (`arguments`: the client's text,
    /// else the ones in `params`).
    pub(crate) fn era_headers(
        &self,
        version: &str,
        method: &str,
        params: &Value,
        arguments: Option<&Bytes>,
    ) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let mut insert = |name: HeaderName, value: &str| {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(name, value);
            }
        };
        insert(HeaderName::from_static("mcp-protocol-version"), version);
        insert(HeaderName::from_static("mcp-method"), method);
        let name_key = match method {
            "tools/call" | "prompts/get" => "name",
            "resources/read" => "uri",
            _ => return headers,
        };
        let Some(name) = params.get(name_key).and_then(Value::as_str) else {
            return headers;
        };
        insert(HeaderName::from_static("mcp-name"), &header_value(name));
        if method != "tools/call" {
            return headers;
        }
        let marks = self
            .inner
            .marked
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned();
        let Some(marks) = marks else {
            return headers;
        };
        // Only a marked tool's arguments are parsed here.
        let parsed;
        let arguments = match arguments {
            Some(text) => match serde_json::from_slice::<Value>(text) {
                Ok(value) => {
                    parsed = value;
                    &parsed
                }
                Err(_) => return headers,
            },
            None => match params.get("arguments") {
                Some(arguments) => arguments,
                None => return headers,
            },
        };
        for mark in marks.iter() {
            let value = mark
                .path
                .iter()
                .try_fold(arguments, |value, key| value.get(key.as_ref()));
            let text = match value {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => continue,
            };
            insert(mark.header.clone(), &header_value(&text));
        }
        headers
    }

    /// POSTs request `id` (its JSON text `body`, with `headers`: its trace context) and reads
    /// its answer from the response, handing everything else on it to rmcp's service.
    pub(crate) fn post(
        &self,
        id: u64,
        body: Vec<u8>,
        headers: HeaderMap,
    ) -> BoxFuture<'static, Result<Received, Unposted>> {
        let this = self.clone();
        Box::pin(async move { this.call(id, body, headers).await })
    }

    async fn call(&self, id: u64, body: Vec<u8>, headers: HeaderMap) -> Result<Received, Unposted> {
        let Some(posting) = lock(&self.inner.posting).clone() else {
            return Err(Unposted::NotTaken);
        };
        let body = Bytes::from(body);
        let mut tries = 0;
        // A wait the server asked for that is longer than roster waits (named in the error).
        let mut too_long = None;
        let response = loop {
            tries += 1;
            // The session's headers, then this request's own (few, often none: copied again
            // only for the rare second try).
            let mut all = posted_headers(&posting);
            all.extend(headers.clone());
            let response = self
                .inner
                .client
                .post(self.inner.url.as_ref())
                .header(ACCEPT, "application/json, text/event-stream")
                .header(CONTENT_TYPE, "application/json")
                .headers(all)
                .body(body.clone())
                .send()
                .await
                .map_err(|e| self.failed(e))?;
            // Refused for load, before the server ran anything: sent again after the wait
            // it asks for (up to the resume bound), or a doubling one.
            let wait = match response.status().as_u16() {
                429 | 503 if tries < THROTTLED_TRIES => {
                    retry_after(response.headers()).unwrap_or(THROTTLED_WAIT * 2u32.pow(tries - 1))
                }
                _ => break response,
            };
            if wait > MAX_RETRY {
                too_long = Some(wait);
                break response;
            }
            tracing::debug!(server = %self.inner.server, status = %response.status(), ?wait, "call refused for load; sending it again");
            drop(response);
            tokio::time::sleep(wait).await;
        };
        let status = response.status();
        if matches!(status.as_u16(), 401 | 403 | 404) {
            return Err(Unposted::NotTaken);
        }
        let event_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"));
        if event_stream && status.is_success() {
            return self.read_stream(id, response, &posting).await;
        }
        let body = read_bounded(response)
            .await
            .map_err(|e| Unposted::Failed(RequestError::Unexpected(e)))?;
        match parse_line(&self.inner.server, body) {
            Some(received) if answers(&received, id) => {
                self.before_answer(false).await;
                Ok(received)
            }
            _ if !status.is_success() => Err(Unposted::Failed(RequestError::Unexpected(
                match (tries, too_long) {
                    (_, Some(wait)) => format!(
                        "the server answered HTTP {status} and asked to wait {} s, longer \
                         than roster waits for a call ({} s)",
                        wait.as_secs(),
                        MAX_RETRY.as_secs()
                    ),
                    (1, None) => format!("the server answered HTTP {status}"),
                    (_, None) => format!("the server answered HTTP {status}, {tries} times"),
                },
            ))),
            Some(other) => {
                self.inject(other, id).await;
                Err(Unposted::Failed(no_answer()))
            }
            None => Err(Unposted::Failed(no_answer())),
        }
    }

    /// Reads a call's response stream to its answer, resuming it from its last event id when
    /// it ends first.
    async fn read_stream(
        &self,
        id: u64,
        response: reqwest::Response,
        posting: &Posting,
    ) -> Result<Received, Unposted> {
        let mut parser = EventParser::default();
        let mut events: Vec<super::sse::Event> = Vec::new();
        let mut injected = false;
        let mut stream = response.bytes_stream().boxed();
        let mut resumes = 0;
        loop {
            for event in events.drain(..) {
                // A priming event (an id, no data) is no progress: a server that only sends
                // those before closing again is given up on.
                if event.kind != "message" || event.data.trim().is_empty() {
                    continue;
                }
                resumes = 0;
                let Some(received) = parse_line(&self.inner.server, event.data.into()) else {
                    continue;
                };
                if answers(&received, id) {
                    self.before_answer(injected).await;
                    return Ok(received);
                }
                injected = true;
                self.inject(received, id).await;
            }
            match stream.next().await {
                Some(Ok(chunk)) => {
                    parser.feed(&chunk, &mut events);
                    continue;
                }
                Some(Err(error)) => {
                    tracing::debug!(server = %self.inner.server, %error, "a call's response stream failed");
                }
                None => {}
            }
            let Some(last) = parser.last_id().map(str::to_owned) else {
                return Err(Unposted::Failed(RequestError::Unexpected(
                    "the server ended the call's response stream before answering it".into(),
                )));
            };
            if resumes == MAX_RESUMES {
                return Err(Unposted::Failed(RequestError::Unexpected(format!(
                    "the call's response stream ended {MAX_RESUMES} times without a new message"
                ))));
            }
            resumes += 1;
            tokio::time::sleep(parser.retry().unwrap_or(DEFAULT_RETRY).min(MAX_RETRY)).await;
            let response = self
                .inner
                .client
                .get(self.inner.url.as_ref())
                .headers(posted_headers(posting))
                .header(ACCEPT, "text/event-stream")
                .header("last-event-id", last)
                .send()
                .await
                .map_err(|e| self.failed(e))?;
            if !response.status().is_success() {
                return Err(Unposted::Failed(RequestError::Unexpected(format!(
                    "resuming the call's response stream, the server answered HTTP {}",
                    response.status()
                ))));
            }
            stream = response.bytes_stream().boxed();
        }
    }

    /// Hands a message from a call's response stream to rmcp's service; a request of the
    /// server's names the call as the request it belongs to.
    async fn inject(&self, received: Received, id: u64) {
        let value = received.into_message();
        let mut message = match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(value) {
            Ok(message) => message,
            Err(error) => {
                tracing::warn!(server = %self.inner.server, %error, "dropped a message that is not JSON-RPC");
                return;
            }
        };
        if let JsonRpcMessage::Request(request) = &mut message {
            let origin = InboundStreamOrigin::OutboundRequest(RequestId::Number(id as i64));
            request.request.extensions_mut().insert(origin);
        }
        let _ = self
            .inner
            .injected
            .send(Injected::Message(Box::new(message)))
            .await;
    }

    /// Before a call's answer goes to its caller: waits until rmcp's service took what came
    /// before it on the call's stream (`injected`: something did), and any `list_changed` the
    /// gate holds back (it came before the answer, on whichever stream: the server is stale
    /// by the answer, and the listing the answer leads to answers it too).
    async fn before_answer(&self, injected: bool) {
        if injected || self.inner.holding.any() {
            self.handed_to_rmcp().await;
        }
    }

    /// Waits until rmcp's service took every message handed to it so far.
    async fn handed_to_rmcp(&self) {
        let (done, taken) = oneshot::channel();
        if self
            .inner
            .injected
            .send(Injected::Barrier(done))
            .await
            .is_ok()
        {
            let _ = taken.await;
        }
    }

    fn failed(&self, error: reqwest::Error) -> Unposted {
        tracing::debug!(server = %self.inner.server, %error, "a POST to the server failed");
        Unposted::Failed(RequestError::Unexpected(format!(
            "cannot reach the server: {}",
            error.without_url()
        )))
    }
}

/// The wait a `Retry-After` asks for: seconds, or an HTTP date (one already past: none).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    match value.parse::<u64>() {
        Ok(seconds) => Some(Duration::from_secs(seconds)),
        Err(_) => httpdate::parse_http_date(value).ok().map(|at| {
            at.duration_since(std::time::SystemTime::now())
                .unwrap_or_default()
        }),
    }
}

fn no_answer() -> RequestError {
    RequestError::Unexpected("the server's response to the call held no answer to it".into())
}

/// Whether `received` is the answer to request `id` (or an error naming no request).
fn answers(received: &Received, id: u64) -> bool {
    match received {
        Received::Result { id: answered, .. } => *answered == id,
        Received::Message(message) => {
            message.get("method").is_none()
                && match message.get("id") {
                    Some(Value::Number(answered)) => answered.as_u64() == Some(id),
                    Some(Value::Null) | None => message.get("error").is_some(),
                    Some(_) => false,
                }
        }
    }
}

/// The headers rmcp's transport sends with every request of the connection: its configured
/// ones, the protocol version, the session and the bearer token.
fn posted_headers(posting: &Posting) -> HeaderMap {
    let mut headers: HeaderMap = posting
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    if let Some(session) = &posting.session
        && let Ok(session) = HeaderValue::from_str(session)
    {
        headers.insert(HeaderName::from_static("mcp-session-id"), session);
    }
    if let Some(token) = &posting.token
        && let Ok(mut bearer) = HeaderValue::from_str(&format!("Bearer {token}"))
    {
        bearer.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, bearer);
    }
    headers
}

/// What the HTTP client tells of each request rmcp's transport sends after the handshake
/// ([`crate::telemetry::TracedHttpClient::recording`]), kept in `slot` for roster's own
/// requests to go with. The headers that describe that one request (SEP-2243: its method,
/// name and arguments) are not the connection's: roster's own requests get their own.
pub(crate) fn record_posting(
    slot: PostingSlot,
) -> impl Fn(&Option<Arc<str>>, &Option<String>, &HashMap<HeaderName, HeaderValue>) + Send + Sync + 'static
{
    move |session, token, headers| {
        let headers = headers
            .iter()
            .filter(|(name, _)| !describes_one_request(name))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        *lock(&slot) = Some(Posting {
            session: session.clone(),
            token: token.clone(),
            headers,
        });
    }
}

/// Whether header `name` describes one request rather than the connection: the SEP-2243
/// `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*`.
fn describes_one_request(name: &HeaderName) -> bool {
    let name = name.as_str();
    name == "mcp-method" || name == "mcp-name" || name.starts_with("mcp-param-")
}

/// The `x-mcp-header` marks of an input schema: on properties reached from the root through
/// `properties` alone, nested ones included (SEP-2243).
fn param_headers(schema: &Map<String, Value>) -> Vec<ParamHeader> {
    fn walk<'a>(
        schema: &'a Map<String, Value>,
        path: &mut Vec<&'a str>,
        out: &mut Vec<ParamHeader>,
    ) {
        let Some(Value::Object(properties)) = schema.get("properties") else {
            return;
        };
        for (name, property) in properties {
            let Value::Object(property) = property else {
                continue;
            };
            path.push(name);
            if let Some(Value::String(header)) = property.get("x-mcp-header")
                && let Ok(header) = HeaderName::from_bytes(format!("mcp-param-{header}").as_bytes())
            {
                out.push(ParamHeader {
                    path: path.iter().map(|p| Box::from(*p)).collect(),
                    header,
                });
            }
            walk(property, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(schema, &mut Vec::new(), &mut out);
    out
}

/// Why the `x-mcp-header` marks of an input schema break SEP-2243's rules, if they do: a mark
/// sits only on a property reached from the root through `properties` alone, is a non-empty
/// HTTP token (RFC 9110 `tchar`s), unique whatever its case, and marks a `string`, `integer`
/// or `boolean` property.
fn header_marks_problem(schema: &Map<String, Value>) -> Option<String> {
    /// Whether `value` (a schema, or schemas in a list or a map) holds a mark anywhere; the
    /// values of keys that hold data, not schemas, are not looked into.
    fn holds_mark(value: &Value) -> bool {
        match value {
            Value::Object(map) => map.iter().any(|(key, value)| match key.as_str() {
                "x-mcp-header" => true,
                "default" | "const" | "enum" | "examples" | "dependentRequired" => false,
                _ => holds_mark(value),
            }),
            Value::Array(items) => items.iter().any(holds_mark),
            _ => false,
        }
    }
    /// Checks the marks of `schema`, reached from the root through `properties` at `path`.
    fn check<'a>(
        schema: &'a Map<String, Value>,
        path: &mut Vec<&'a str>,
        seen: &mut std::collections::HashSet<String>,
    ) -> Result<(), String> {
        for (key, value) in schema {
            match key.as_str() {
                "properties" => {
                    let Value::Object(properties) = value else {
                        continue;
                    };
                    for (name, property) in properties {
                        path.push(name);
                        match property {
                            Value::Object(property) => check_property(property, path, seen)?,
                            other if holds_mark(other) => {
                                return Err(format!("`{}`: a mark off a property", path.join(".")));
                            }
                            _ => {}
                        }
                        path.pop();
                    }
                }
                "x-mcp-header" if path.is_empty() => {
                    return Err("a mark on the schema's root, not on a property".to_owned());
                }
                "x-mcp-header" | "default" | "const" | "enum" | "examples"
                | "dependentRequired" => {}
                _ if holds_mark(value) => {
                    let at = if path.is_empty() {
                        "the root".to_owned()
                    } else {
                        path.join(".")
                    };
                    return Err(format!(
                        "a mark under `{key}` of {at}, off the `properties` path from the root"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
    fn check_property<'a>(
        property: &'a Map<String, Value>,
        path: &mut Vec<&'a str>,
        seen: &mut std::collections::HashSet<String>,
    ) -> Result<(), String> {
        if let Some(mark) = property.get("x-mcp-header") {
            let at = path.join(".");
            let Value::String(header) = mark else {
                return Err(format!("`{at}`: x-mcp-header is not a string"));
            };
            let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            if header.is_empty() || !header.chars().all(tchar) {
                return Err(format!(
                    "`{at}`: x-mcp-header {header:?} is not an HTTP token"
                ));
            }
            if !seen.insert(header.to_ascii_lowercase()) {
                return Err(format!("`{at}`: x-mcp-header {header:?} is used twice"));
            }
            let primitive = matches!(
                property.get("type").and_then(Value::as_str),
                Some("string" | "integer" | "boolean")
            );
            if !primitive {
                return Err(format!(
                    "`{at}`: x-mcp-header marks a property that is not a string, integer or boolean"
                ));
            }
        }
        check(property, path, seen)
    }
    check(
        schema,
        &mut Vec::new(),
        &mut std::collections::HashSet::new(),
    )
    .err()
}

/// A header value as SEP-2243 carries it: as it is, or `=?base64?…?=` when it could not travel
/// as it is (space or tab at either end, a control or non-ASCII character, or a value that looks
/// like that wrapping).
fn header_value(value: &str) -> String {
    use base64::Engine;
    const PREFIX: &str = "=?base64?";
    const SUFFIX: &str = "?=";
    let bytes = value.as_bytes();
    let wrap = matches!(bytes.first(), Some(b' ' | b'\t'))
        || matches!(bytes.last(), Some(b' ' | b'\t'))
        || bytes.iter().any(|b| !(0x20..=0x7e).contains(b))
        || (value.starts_with(PREFIX) && value.ends_with(SUFFIX));
    if wrap {
        let encoded = base64::engine::general_purpose::STANDARD.encode(value);
        format!("{PREFIX}{encoded}{SUFFIX}")
    } else {
        value.to_owned()
    }
}

/// A response's whole body, at most [`MAX_BODY_BYTES`].
async fn read_bounded(response: reqwest::Response) -> Result<Bytes, String> {
    let too_large = || format!("the server's answer is larger than {MAX_BODY_BYTES} bytes");
    if response
        .content_length()
        .is_some_and(|n| n > MAX_BODY_BYTES as u64)
    {
        return Err(too_large());
    }
    let mut chunks = Vec::new();
    let mut len = 0;
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("cannot read the server's answer: {e}"))?;
        len += chunk.len();
        if len > MAX_BODY_BYTES {
            return Err(too_large());
        }
        chunks.push(chunk);
    }
    // One chunk (the common case) is kept as it came.
    Ok(match chunks.len() {
        1 => chunks.swap_remove(0),
        _ => chunks.concat().into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_is_the_result_or_error_of_its_own_id() {
        let id = DIRECT_IDS + 7;
        let result = Received::Result {
            id,
            result: Bytes::from_static(b"{}"),
        };
        assert!(answers(&result, id));
        assert!(!answers(&result, id + 1));
        let error = Received::Message(json!({"jsonrpc": "2.0", "id": id, "error": {"code": 1}}));
        assert!(answers(&error, id));
        let unnamed = Received::Message(json!({"jsonrpc": "2.0", "id": null, "error": {}}));
        assert!(answers(&unnamed, id));
        let request = Received::Message(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
        assert!(
            !answers(&request, id),
            "a server's request with the same id"
        );
        let progress =
            Received::Message(json!({"jsonrpc": "2.0", "method": "notifications/progress"}));
        assert!(!answers(&progress, id));
    }

    fn direct() -> HttpDirect {
        let (injected, _) = mpsc::channel(1);
        HttpDirect::new(
            Arc::from("s"),
            "http://127.0.0.1:1/mcp",
            reqwest::Client::new(),
            PostingSlot::default(),
            injected,
            Holding::default(),
        )
    }

    fn tool(name: &str, schema: Value) -> Tool {
        serde_json::from_value(json!({"name": name, "inputSchema": schema})).expect("a tool")
    }

    fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
        headers.get(name).map(|v| v.to_str().expect("ASCII"))
    }

    #[test]
    fn a_value_that_cannot_travel_as_it_is_is_wrapped_in_base64() {
        assert_eq!(header_value("eu-west-1"), "eu-west-1");
        assert_eq!(header_value(""), "");
        assert_eq!(header_value("Zürich"), "=?base64?WsO8cmljaA==?=");
        assert_eq!(header_value(" a"), "=?base64?IGE=?=");
        assert_eq!(header_value("a\t"), "=?base64?YQk=?=");
        assert_eq!(header_value("a\nb"), "=?base64?YQpi?=");
        assert_eq!(header_value("=?base64?x?="), "=?base64?PT9iYXNlNjQ/eD89?=");
    }

    #[test]
    fn marks_are_read_along_properties_only() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "scope": {"type": "object", "properties": {
                    "tenant": {"type": "string", "x-mcp-header": "Tenant"}
                }},
                "list": {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}},
                "bad": {"type": "string", "x-mcp-header": "not a token"},
                "plain": {"type": "string"}
            }
        });
        let tool = tool("t", schema);
        let marks = param_headers(&tool.input_schema);
        let found: Vec<_> = marks
            .iter()
            .map(|m| (m.path.join("."), m.header.as_str().to_owned()))
            .collect();
        assert_eq!(
            found,
            [
                ("region".to_owned(), "mcp-param-region".to_owned()),
                ("scope.tenant".to_owned(), "mcp-param-tenant".to_owned()),
            ]
        );
    }

    #[test]
    fn tools_whose_marks_break_the_rules_are_left_out() {
        let property = |mark: Value, kind: &str| json!({"type": kind, "x-mcp-header": mark});
        let object = |properties: Value| json!({"type": "object", "properties": properties});
        let bad = [
            ("empty", object(json!({"a": property(json!(""), "string")}))),
            (
                "an object",
                object(json!({"a": property(json!({}), "string")})),
            ),
            (
                "a number",
                object(json!({"a": property(json!(7), "string")})),
            ),
            (
                "a space",
                object(json!({"a": property(json!("A B"), "string")})),
            ),
            (
                "a colon",
                object(json!({"a": property(json!("A:B"), "string")})),
            ),
            (
                "not ASCII",
                object(json!({"a": property(json!("Zürich"), "string")})),
            ),
            (
                "a control",
                object(json!({"a": property(json!("A\u{1}"), "string")})),
            ),
            (
                "an array",
                object(json!({"a": property(json!("A"), "array")})),
            ),
            (
                "a null type",
                object(json!({"a": property(json!("A"), "null")})),
            ),
            (
                "a number type",
                object(json!({"a": property(json!("A"), "number")})),
            ),
            (
                "twice, in another case",
                object(
                    json!({"a": property(json!("Id"), "string"), "b": property(json!("ID"), "string")}),
                ),
            ),
            (
                "under items",
                object(json!({"a": {"type": "array", "items": property(json!("A"), "string")}})),
            ),
            (
                "under $defs",
                json!({"type": "object", "$defs": {"x": property(json!("A"), "string")}}),
            ),
            (
                "on the root",
                json!({"type": "object", "x-mcp-header": "A"}),
            ),
        ];
        let good = [
            ("none", object(json!({"a": {"type": "string"}}))),
            (
                "nested",
                object(json!({"a": object(json!({"b": property(json!("B"), "integer")}))})),
            ),
            (
                "a default that looks like one",
                object(json!({"a": {"type": "object", "default": {"x-mcp-header": 1}}})),
            ),
            (
                "distinct",
                object(
                    json!({"a": property(json!("A"), "boolean"), "b": property(json!("B-2_x"), "string")}),
                ),
            ),
        ];
        for (why, schema) in &bad {
            let tool = tool("t", schema.clone());
            assert!(
                header_marks_problem(&tool.input_schema).is_some(),
                "{why}: {schema}"
            );
        }
        for (why, schema) in &good {
            let tool = tool("t", schema.clone());
            assert_eq!(
                header_marks_problem(&tool.input_schema),
                None,
                "{why}: {schema}"
            );
        }
        let http = direct();
        let mut tools: Vec<Tool> = bad
            .iter()
            .chain(&good)
            .map(|(why, schema)| tool(why, schema.clone()))
            .collect();
        http.set_tools("s", &mut tools);
        let kept: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(kept, good.iter().map(|(why, _)| *why).collect::<Vec<_>>());
    }

    #[test]
    fn a_2026_request_names_its_method_its_target_and_its_marked_arguments() {
        let http = direct();
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "flag": {"type": "boolean", "x-mcp-header": "Flag"},
            "gone": {"type": "string", "x-mcp-header": "Gone"}
        }});
        let mut tools = vec![
            tool("marked", schema),
            tool("plain", json!({"type": "object"})),
        ];
        http.set_tools("s", &mut tools);
        assert_eq!(tools.len(), 2, "both are well marked");
        let text = Bytes::from(r#"{"region":"Zürich","count":12,"flag":true,"gone":null}"#);
        let params = json!({"name": "marked"});
        let headers = http.era_headers("2026-07-28", "tools/call", &params, Some(&text));
        assert_eq!(header(&headers, "mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(header(&headers, "mcp-method"), Some("tools/call"));
        assert_eq!(header(&headers, "mcp-name"), Some("marked"));
        assert_eq!(
            header(&headers, "mcp-param-region"),
            Some("=?base64?WsO8cmljaA==?=")
        );
        assert_eq!(header(&headers, "mcp-param-count"), Some("12"));
        assert_eq!(header(&headers, "mcp-param-flag"), Some("true"));
        assert_eq!(
            header(&headers, "mcp-param-gone"),
            None,
            "a null has no header"
        );
        // Arguments roster holds parsed.
        let params = json!({"name": "marked", "arguments": {"region": "eu"}});
        let headers = http.era_headers("2026-07-28", "tools/call", &params, None);
        assert_eq!(header(&headers, "mcp-param-region"), Some("eu"));
        // A tool with no marks: no argument is read (this text is no JSON).
        let params = json!({"name": "plain"});
        let text = Bytes::from_static(b"not json");
        let headers = http.era_headers("2026-07-28", "tools/call", &params, Some(&text));
        assert_eq!(header(&headers, "mcp-name"), Some("plain"));
        assert_eq!(headers.len(), 3, "{headers:?}");
        // A resource by its URI; a new listing forgets the old marks.
        let params = json!({"uri": "file:///a b"});
        let headers = http.era_headers("2026-07-28", "resources/read", &params, None);
        assert_eq!(header(&headers, "mcp-name"), Some("file:///a b"));
        http.set_tools("s", &mut Vec::new());
        let params = json!({"name": "marked", "arguments": {"region": "eu"}});
        let headers = http.era_headers("2026-07-28", "tools/call", &params, None);
        assert_eq!(header(&headers, "mcp-param-region"), None);
    }

    #[test]
    fn a_recorded_posting_keeps_only_the_connection_s_headers() {
        for (name, one) in [
            ("mcp-method", true),
            ("mcp-name", true),
            ("mcp-param-region", true),
            ("mcp-protocol-version", false),
            ("authorization", false),
            ("x-api-key", false),
        ] {
            let name = HeaderName::from_static(name);
            assert_eq!(describes_one_request(&name), one, "{name}");
        }
    }
}
