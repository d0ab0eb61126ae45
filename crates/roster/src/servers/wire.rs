//! The message pump shared by roster's own transports (stdio, legacy SSE).
//!
//! Those transports move `serde_json::Value`s; this module turns them into rmcp's typed
//! messages at the edge. Doing the conversion here, rather than letting rmcp decode bytes,
//! buys two things rmcp's typed path loses:
//!
//! - **Raw results.** rmcp's `Tool` has no field for what a newer spec adds (`execution`, …),
//!   so a typed `tools/list` result would silently drop it. The raw `result` of every
//!   `tools/list` and `tools/call` is kept by request id in [`RawResults`], and the connection
//!   builds [`roster_core::Tool`] (which keeps unknown fields) from it.
//! - **Garbage tolerance.** A line that is not JSON-RPC is logged and dropped instead of
//!   ending the connection.
//! - **Order.** rmcp hands each notification to its handler on a task of its own but settles a
//!   response at once, so a server's last log message, progress update or `list_changed`
//!   before its result could be handled after the call ended. The count of such notifications
//!   seen on the wire lets a call wait until they are handled ([`RawResults::awaited_seen`]).

use crate::sync::lock;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use futures::stream::BoxStream;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::bytes::Bytes;

use super::event::{AWAITED_BY_RESULTS, ServerEvent};
use super::gate::{Admit, NotificationGate};

/// Methods whose raw result a connection wants to read itself.
const RAW_METHODS: [&str; 2] = ["tools/list", "tools/call"];

/// Raw `result` objects of watched requests, by the request id's JSON text.
#[derive(Debug, Default, Clone)]
pub(crate) struct RawResults {
    inner: Arc<Mutex<RawInner>>,
}

#[derive(Debug, Default)]
struct RawInner {
    watched: HashSet<String>,
    results: HashMap<String, Value>,
    awaited: u64,
    /// Until the handshake is over: the id of the request rmcp waits for (its handshake sends
    /// one request at a time). rmcp fails a handshake on any other response, so a stray answer
    /// (an id roster never used, or a late answer to an abandoned `server/discover` probe) is
    /// dropped here first, as rmcp itself drops one after the handshake.
    handshake: Option<Option<String>>,
}

impl RawResults {
    fn lock(&self) -> std::sync::MutexGuard<'_, RawInner> {
        lock(&self.inner)
    }

    /// A fresh bookkeeping for one connection, in its handshake.
    pub(crate) fn new() -> Self {
        let raw = RawResults::default();
        raw.lock().handshake = Some(None);
        raw
    }

    /// The handshake is over: from now on rmcp drops answers to nobody itself.
    pub(crate) fn handshake_done(&self) {
        self.lock().handshake = None;
    }

    fn note_outgoing(&self, message: &Value) {
        let method = message.get("method").and_then(Value::as_str);
        let (Some(method), Some(id)) = (method, message.get("id")) else {
            return;
        };
        let mut inner = self.lock();
        if let Some(awaited) = inner.handshake.as_mut() {
            *awaited = Some(id.to_string());
        }
        if RAW_METHODS.contains(&method) {
            inner.watched.insert(id.to_string());
        }
    }

    /// Whether an incoming response answers nothing roster asked during the handshake
    /// (then it is dropped before rmcp sees it). Errors without an id still reach rmcp.
    fn stray_in_handshake(&self, message: &Value) -> bool {
        if message.get("method").is_some() {
            return false;
        }
        let Some(id) = message.get("id").filter(|id| !id.is_null()) else {
            return false;
        };
        self.lock()
            .handshake
            .as_ref()
            .is_some_and(|awaited| awaited.as_deref() != Some(id.to_string().as_str()))
    }

    fn note_incoming(&self, message: &Value) {
        // A request from the server (a ping, say) shares the id space of nobody's answers:
        // its id may equal one of ours that is still waiting for its raw result.
        if let Some(method) = message.get("method").and_then(Value::as_str) {
            if message.get("id").is_none() && AWAITED_BY_RESULTS.contains(&method) {
                self.count_awaited();
            }
            return;
        }
        let (Some(id), Some(result)) = (message.get("id"), message.get("result")) else {
            if let Some(id) = message.get("id") {
                self.lock().watched.remove(&id.to_string());
            }
            return;
        };
        let key = id.to_string();
        let mut inner = self.lock();
        if inner.watched.remove(&key) {
            inner.results.insert(key, result.clone());
        }
    }

    /// One more notification a result waits for reaches rmcp.
    pub(crate) fn count_awaited(&self) {
        let mut inner = self.lock();
        // No call waits for what came during the handshake, whether or not rmcp hands it to a
        // handler: counted, it could leave the count ahead for good.
        if inner.handshake.is_none() {
            inner.awaited += 1;
        }
    }

    /// How many notifications a result waits for ([`super::event::AWAITED_BY_RESULTS`]) arrived
    /// on this connection so far.
    pub(crate) fn awaited_seen(&self) -> u64 {
        self.lock().awaited
    }

    /// Takes the raw result of the request with this id, when it was watched and answered.
    pub(crate) fn take(&self, id: &rmcp::model::RequestId) -> Option<Value> {
        let key = serde_json::to_value(id).ok()?.to_string();
        let mut inner = self.lock();
        inner.watched.remove(&key);
        inner.results.remove(&key)
    }
}

/// Why a message could not be handed to the transport.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The transport's writer has stopped (the process exited or the stream closed).
    #[error("the connection to the server is closed")]
    Closed,
    /// rmcp produced a message that does not serialize (a bug, reported rather than hidden).
    #[error("cannot encode a message for the server: {0}")]
    Encode(#[from] serde_json::Error),
}

/// Where a transport's messages go: a channel to a writer task, or straight into a byte
/// stream (a child's stdin) as newline-delimited JSON, written by the sending task itself.
pub(crate) enum Outgoing {
    /// A task on the other end writes each message.
    Channel(mpsc::Sender<Outbound>),
    /// One line per message; the lock keeps concurrent sends whole and in order.
    Lines(Arc<tokio::sync::Mutex<Pin<Box<dyn AsyncWrite + Send>>>>),
}

/// A message for a writer task: its value (whose `_meta` gives the trace headers) and, when it
/// carries text to go as it is (a client's arguments), the whole message as that text.
pub(crate) struct Outbound {
    pub(crate) value: Value,
    pub(crate) text: Option<Bytes>,
}

impl Outbound {
    /// The message as it goes out.
    pub(crate) fn body(&self) -> Bytes {
        match &self.text {
            Some(text) => text.clone(),
            None => self.value.to_string().into(),
        }
    }
}

impl Outgoing {
    /// Writes each message as one line to `writer`.
    pub(crate) fn lines(writer: impl AsyncWrite + Send + 'static) -> Self {
        Outgoing::Lines(Arc::new(tokio::sync::Mutex::new(Box::pin(writer))))
    }

    fn share(&self) -> Self {
        match self {
            Outgoing::Channel(tx) => Outgoing::Channel(tx.clone()),
            Outgoing::Lines(writer) => Outgoing::Lines(writer.clone()),
        }
    }

    /// Hands one message to the server: as a value to the channel's writer, or as one line.
    /// `text`, when given, is the whole message as it goes out (its line, newline included).
    async fn write(
        &self,
        server: &str,
        message: &impl serde::Serialize,
        text: Option<Vec<u8>>,
    ) -> Result<(), WireError> {
        match self {
            Outgoing::Channel(tx) => {
                let value = serde_json::to_value(message)?;
                let text = text.map(Bytes::from);
                tx.send(Outbound { value, text })
                    .await
                    .map_err(|_| WireError::Closed)
            }
            Outgoing::Lines(writer) => {
                let line = match text {
                    Some(line) => line,
                    None => {
                        let mut line = serde_json::to_vec(message)?;
                        line.push(b'\n');
                        line
                    }
                };
                let mut writer = writer.lock().await;
                let written = async {
                    writer.write_all(&line).await?;
                    writer.flush().await
                };
                written.await.map_err(|error| {
                    tracing::debug!(server, %error, "cannot write to the server");
                    WireError::Closed
                })
            }
        }
    }
}

/// The first id of roster's own requests on a connection: far above the ids rmcp counts up
/// from zero, so the two never meet, and still exact as a JavaScript number.
pub(crate) const DIRECT_IDS: u64 = 1 << 40;

/// Requests roster writes to the server itself and whose answers the connection's reader hands
/// straight back — the requests made for a caller (`tools/call`, `prompts/get`,
/// `resources/read`), which roster only forwards. They skip rmcp's service (its channel, its
/// task per message, its typed parse of the request and of the answer); everything else the
/// server says (its notifications and requests, answers to rmcp's own requests) still goes
/// through rmcp.
#[derive(Clone)]
pub(crate) struct Direct {
    inner: Arc<DirectInner>,
}

struct DirectInner {
    server: Arc<str>,
    outgoing: Outgoing,
    next: AtomicU64,
    /// Waiting requests by id; `None` once the connection is closed.
    pending: Mutex<Option<HashMap<u64, oneshot::Sender<Received>>>>,
}

/// One request sent by [`Direct::send`]: its answer, or the end of the connection. Dropped
/// unanswered (cancelled, timed out), it stops waiting for the answer.
pub(crate) struct DirectCall {
    direct: Direct,
    /// The JSON-RPC id it was sent with.
    pub(crate) id: u64,
    answer: oneshot::Receiver<Received>,
}

#[derive(serde::Serialize)]
pub(crate) struct DirectRequest<'a> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: &'a Value,
}

impl<'a> DirectRequest<'a> {
    pub(crate) fn new(id: u64, method: &'a str, params: &'a Value) -> Self {
        DirectRequest {
            jsonrpc: "2.0",
            id,
            method,
            params,
        }
    }

    /// The request's line (newline included), with `arguments` (JSON text of an object) as
    /// its params' `arguments`, copied in as they are.
    pub(crate) fn line(&self, arguments: Option<&Bytes>) -> Result<Vec<u8>, WireError> {
        match arguments {
            Some(arguments) => with_arguments(self, arguments),
            None => {
                let mut line = serde_json::to_vec(self)?;
                line.push(b'\n');
                Ok(line)
            }
        }
    }
}

/// The line of `request` with `arguments` (JSON text of an object) as its params' last member,
/// copied in as it is: `params` is the request's last member, so its object closes the line.
fn with_arguments(request: &DirectRequest<'_>, arguments: &[u8]) -> Result<Vec<u8>, WireError> {
    if !request.params.is_object() {
        return Err(WireError::Encode(serde::ser::Error::custom(
            "a request's arguments go in an object of params",
        )));
    }
    let mut line = serde_json::to_vec(request)?;
    line.reserve(arguments.len() + 16);
    // `…"params":{…}}`: the params object's `}` and the request's close the line.
    line.truncate(line.len() - 2);
    if request.params.as_object().is_some_and(|p| !p.is_empty()) {
        line.push(b',');
    }
    line.extend_from_slice(br#""arguments":"#);
    line.extend_from_slice(arguments);
    line.extend_from_slice(b"}}\n");
    Ok(line)
}

impl Direct {
    fn new(server: Arc<str>, outgoing: Outgoing) -> Self {
        Direct {
            inner: Arc::new(DirectInner {
                server,
                outgoing,
                next: AtomicU64::new(DIRECT_IDS),
                pending: Mutex::new(Some(HashMap::new())),
            }),
        }
    }

    /// The id the next request will be sent with (a progress token is chosen from it before
    /// the request is written).
    pub(crate) fn next_id(&self) -> u64 {
        self.inner.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Writes request `id` (from [`Direct::next_id`]) to the server; its answer is awaited
    /// with [`DirectCall::answer`].
    /// Writes the request `id` (`method` with `params`) and returns the call waiting for its
    /// answer. `arguments`, the JSON text of an object, goes into `params` as its `arguments`
    /// as it is.
    pub(crate) async fn send(
        &self,
        id: u64,
        method: &str,
        params: &Value,
        arguments: Option<&Bytes>,
    ) -> Result<DirectCall, WireError> {
        let (tx, answer) = oneshot::channel();
        match lock(&self.inner.pending).as_mut() {
            Some(pending) => pending.insert(id, tx),
            None => return Err(WireError::Closed),
        };
        let call = DirectCall {
            direct: self.clone(),
            id,
            answer,
        };
        let request = DirectRequest::new(id, method, params);
        let text = match arguments {
            Some(arguments) => Some(with_arguments(&request, arguments)?),
            None => None,
        };
        self.inner
            .outgoing
            .write(&self.inner.server, &request, text)
            .await?;
        Ok(call)
    }

    /// Takes `message` when it answers one of roster's own requests (and hands it to the
    /// waiting call); otherwise gives it back.
    fn answer(&self, message: Received) -> Option<Value> {
        let id = match &message {
            Received::Result { id, .. } => Some(*id),
            Received::Message(message) => match message.get("id") {
                Some(Value::Number(id)) if message.get("method").is_none() => id.as_u64(),
                _ => None,
            },
        };
        let id = match (id.filter(|id| *id >= DIRECT_IDS), message) {
            (Some(id), message) => (id, message),
            (None, Received::Message(message)) => return Some(message),
            // Only read as one for an id of roster's.
            (None, Received::Result { .. }) => return None,
        };
        let (id, message) = id;
        let waiting = lock(&self.inner.pending)
            .as_mut()
            .and_then(|p| p.remove(&id));
        match waiting {
            Some(tx) => {
                let _ = tx.send(message);
            }
            None => {
                tracing::debug!(server = %self.inner.server, id, "dropped an answer to a request nobody waits for")
            }
        }
        None
    }

    /// The connection ended: every waiting call gets [`WireError::Closed`].
    fn close(&self) {
        lock(&self.inner.pending).take();
    }

    fn forget(&self, id: u64) {
        if let Some(pending) = lock(&self.inner.pending).as_mut() {
            pending.remove(&id);
        }
    }
}

impl DirectCall {
    /// The server's answer (its `result` as written, or the whole message with its `error`),
    /// or [`WireError::Closed`] when the connection ended first.
    pub(crate) async fn answer(&mut self) -> Result<Received, WireError> {
        (&mut self.answer).await.map_err(|_| WireError::Closed)
    }
}

impl Drop for DirectCall {
    fn drop(&mut self) {
        self.direct.forget(self.id);
    }
}

/// Where a transport's messages come from, in order. Polled only from `receive`, which rmcp
/// may drop between messages: the stream keeps whatever it had read so far.
pub(crate) type Incoming = BoxStream<'static, Received>;

/// A message from a server, read once.
#[derive(Debug)]
pub(crate) enum Received {
    /// The answer to one of roster's own requests ([`Direct`]) with a result: the result's
    /// JSON text as the server wrote it (see [`super::answer`]).
    Result { id: u64, result: Bytes },
    /// Anything else, parsed.
    Message(Value),
}

impl Received {
    /// Whether this answers a request (of roster's or of rmcp's).
    fn answers(&self) -> bool {
        match self {
            Received::Result { .. } => true,
            Received::Message(value) => value.get("method").is_none() && value.get("id").is_some(),
        }
    }

    /// The message as one value (a kept result parsed back into its answer).
    pub(crate) fn into_message(self) -> Value {
        match self {
            Received::Result { id, result } => {
                let result: Value = serde_json::from_slice(&result).expect("json");
                json!({"jsonrpc": "2.0", "id": id, "result": result})
            }
            Received::Message(value) => value,
        }
    }
}

/// The messages of a channel, as [`Incoming`].
pub(crate) fn incoming_channel(rx: mpsc::Receiver<Received>) -> Incoming {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) }).boxed()
}

/// An rmcp [`Transport`] over JSON values, with the raw-result bookkeeping of this module.
pub(crate) struct WireTransport {
    server: Arc<str>,
    outgoing: Outgoing,
    incoming: Incoming,
    raw: RawResults,
    gate: NotificationGate,
    direct: Direct,
    /// An answer waiting for a coalesced `list_changed` handed on before it
    /// ([`NotificationGate::release_before_answer`]).
    held: Option<Received>,
}

impl WireTransport {
    pub(crate) fn new(
        server: Arc<str>,
        outgoing: Outgoing,
        incoming: Incoming,
        raw: RawResults,
        gate: NotificationGate,
    ) -> Self {
        let direct = Direct::new(server.clone(), outgoing.share());
        WireTransport {
            server,
            outgoing,
            incoming,
            raw,
            gate,
            direct,
            held: None,
        }
    }

    /// The way to send requests past rmcp on this transport (see [`Direct`]).
    pub(crate) fn direct(&self) -> Direct {
        self.direct.clone()
    }

    /// The next message to hand to rmcp: what the server sent, minus the notifications over
    /// its rate and stray handshake answers, plus the coalesced `list_changed`s the rate lets
    /// through again (or an answer does: they come before it). Cancel-safe: a message is
    /// taken from the stream only when it is returned or done with (or held in `held`).
    async fn next_message(&mut self) -> Option<Value> {
        loop {
            // Every message counts against the task's budget, so a server that writes faster
            // than roster reads is read in slices and the worker's other tasks get their turn.
            tokio::task::coop::consume_budget().await;
            if let Some(method) = self.gate.tick(Instant::now()) {
                if self.gate.delivers(method) {
                    self.gate.deliver(&ServerEvent::new(method, Value::Null));
                    continue;
                }
                return Some(json!({"jsonrpc": "2.0", "method": method}));
            }
            let received = match self.held.take() {
                Some(received) => received,
                None => {
                    let sleep = self.gate.until_wake();
                    let paused = self.gate.paused();
                    let incoming = &mut self.incoming;
                    // A flood paced past its rate waits in the pipe or stream, unread.
                    tokio::select! {
                        received = async {
                            paused.await;
                            incoming.next().await
                        } => received?,
                        () = sleep => continue,
                    }
                }
            };
            if received.answers()
                && let Some(method) = self.gate.release_before_answer()
            {
                self.held = Some(received);
                if self.gate.delivers(method) {
                    self.gate.deliver(&ServerEvent::new(method, Value::Null));
                    continue;
                }
                return Some(json!({"jsonrpc": "2.0", "method": method}));
            }
            let value = match received {
                Received::Message(value) => value,
                result => {
                    // No request of rmcp's is answered this way, in the handshake or after.
                    self.direct.answer(result);
                    continue;
                }
            };
            if let Some(method) = value.get("method").and_then(Value::as_str)
                && self.gate.admit(method, Instant::now()) != Admit::Pass
            {
                continue;
            }
            if self.raw.stray_in_handshake(&value) {
                tracing::warn!(
                    server = %self.server,
                    message = %truncate(&value.to_string()),
                    "dropped an answer to no request of roster's during the handshake"
                );
                continue;
            }
            let Some(mut value) = self.direct.answer(Received::Message(value)) else {
                continue;
            };
            // A notification is handled here, in the order the server wrote it.
            if value.get("id").is_none()
                && let Some(method) = value.get("method").and_then(Value::as_str)
                && self.gate.delivers(method)
            {
                let method = method.to_owned();
                let params = value.get_mut("params").map_or(Value::Null, Value::take);
                self.gate.deliver(&ServerEvent::new(&method, params));
                continue;
            }
            return Some(value);
        }
    }
}

impl Drop for WireTransport {
    fn drop(&mut self) {
        self.direct.close();
    }
}

impl Transport<RoleClient> for WireTransport {
    type Error = WireError;

    fn name() -> Cow<'static, str> {
        Cow::Borrowed("roster-wire")
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let outgoing = self.outgoing.share();
        let raw = self.raw.clone();
        let server = self.server.clone();
        async move {
            let value = serde_json::to_value(&item)?;
            raw.note_outgoing(&value);
            match outgoing {
                Outgoing::Channel(tx) => {
                    let outbound = Outbound { value, text: None };
                    tx.send(outbound).await.map_err(|_| WireError::Closed)
                }
                lines => lines.write(&server, &value, None).await,
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        {
            loop {
                let value = self.next_message().await?;
                match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(value.clone()) {
                    // Counted only once rmcp will see it: a dropped notification is never
                    // handled, and a call must not wait for it.
                    Ok(message) => {
                        self.raw.note_incoming(&value);
                        return Some(message);
                    }
                    Err(error) => tracing::warn!(
                        server = %self.server,
                        %error,
                        message = %truncate(&value.to_string()),
                        "dropped a message that is not JSON-RPC"
                    ),
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming = futures::stream::empty().boxed();
        self.direct.close();
        Ok(())
    }
}

/// The configured headers as an HTTP header map; `Err` names the first key (or its value)
/// that is not valid HTTP. Shared by the streamable HTTP and SSE transports.
pub(crate) fn header_map(
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<reqwest::header::HeaderMap, String> {
    use reqwest::header::{HeaderName, HeaderValue};
    let mut map = reqwest::header::HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| k.clone())?;
        let value = HeaderValue::from_str(v).map_err(|_| k.clone())?;
        map.insert(name, value);
    }
    Ok(map)
}

/// Parses one line from a server; `None` (after a warning) when it is not JSON. A result kept
/// as text shares `bytes` (no copy) when they are UTF-8.
pub(crate) fn parse_line(server: &str, bytes: Bytes) -> Option<Received> {
    let text = String::from_utf8_lossy(&bytes);
    let line = text.trim();
    if line.is_empty() {
        return None;
    }
    if let Ok(message) = serde_json::from_str::<Message<'_>>(line) {
        return Some(match message {
            Message::Result { id, raw } => {
                let raw = raw.get().as_bytes();
                let result = match &text {
                    Cow::Borrowed(_) => bytes.slice_ref(raw),
                    Cow::Owned(_) => Bytes::copy_from_slice(raw),
                };
                Received::Result { id, result }
            }
            Message::Parsed(value) => Received::Message(value),
        });
    }
    match serde_json::from_str::<Value>(line) {
        Ok(value) if value.is_array() => Some(Received::Message(value)),
        Ok(_) | Err(_) => {
            tracing::warn!(server, line = %truncate(line), "dropped a line that is not JSON-RPC");
            None
        }
    }
}

/// A JSON object from a server read in one pass: the `result` of an answer to one of roster's
/// own requests is kept as its text, everything else parsed.
enum Message<'a> {
    Result { id: u64, raw: &'a RawValue },
    Parsed(Value),
}

impl<'de> serde::Deserialize<'de> for Message<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Message<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Message<'de>, A::Error> {
                let mut object = serde_json::Map::new();
                // `Some(direct)` once the id was read: whether it is one of roster's.
                let mut direct: Option<Option<u64>> = None;
                let mut raw: Option<&'de RawValue> = None;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "result" && direct != Some(None) {
                        raw = Some(map.next_value()?);
                        // Its place, should it be parsed after all.
                        object.insert(key.into_owned(), Value::Null);
                        continue;
                    }
                    let value: Value = map.next_value()?;
                    if key == "id" {
                        direct = Some(value.as_u64().filter(|id| *id >= DIRECT_IDS));
                    }
                    object.insert(key.into_owned(), value);
                }
                match (direct, raw) {
                    (Some(Some(id)), Some(raw)) if !object.contains_key("method") => {
                        return Ok(Message::Result { id, raw });
                    }
                    (_, Some(raw)) => {
                        let result =
                            serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?;
                        object.insert("result".to_owned(), result);
                    }
                    (_, None) => {}
                }
                Ok(Message::Parsed(Value::Object(object)))
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// A server's message as roster quotes it in a warning: at most 300 bytes, escaped.
fn truncate(text: &str) -> Cow<'_, str> {
    log_line(text, 300)
}

/// A line of a server's output as roster logs it: at most `max` bytes (cut at a character
/// boundary, with the number of bytes left out), control characters escaped as `\u{1b}` so a
/// server cannot move the cursor of, or hide text in, the terminal reading roster's log.
pub(crate) fn log_line(text: &str, max: usize) -> Cow<'_, str> {
    let needs_escape = text.chars().any(|c| c.is_control() && c != '\t');
    if text.len() <= max && !needs_escape {
        return Cow::Borrowed(text);
    }
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + 16);
    for c in text[..end].chars() {
        if c.is_control() && c != '\t' {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    if end < text.len() {
        out.push_str(&format!(
            "… ({} more bytes past the {max}-byte line limit)",
            text.len() - end
        ));
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_written_as_text_close_the_params_of_the_line() {
        let text = br#"{"n":123456789012345678901234567890,"s":"}\"{"}"#;
        for (params, expected) in [
            (
                json!({"name": "t", "_meta": {"progressToken": 9}}),
                r#""params":{"name":"t","_meta":{"progressToken":9},"arguments":{"n":123456789012345678901234567890,"s":"}\"{"}}}"#,
            ),
            (
                json!({}),
                r#""params":{"arguments":{"n":123456789012345678901234567890,"s":"}\"{"}}}"#,
            ),
        ] {
            let request = DirectRequest {
                jsonrpc: "2.0",
                id: 1 << 40,
                method: "tools/call",
                params: &params,
            };
            let line = with_arguments(&request, text).expect("a line");
            let line = String::from_utf8(line).expect("UTF-8");
            let head = r#"{"jsonrpc":"2.0","id":1099511627776,"method":"tools/call","#;
            assert_eq!(line, format!("{head}{expected}\n"));
        }
        let not_an_object = json!(["x"]);
        let request = DirectRequest {
            jsonrpc: "2.0",
            id: 1,
            method: "tools/call",
            params: &not_an_object,
        };
        assert!(with_arguments(&request, text).is_err());
    }

    #[test]
    fn raw_result_is_kept_only_for_watched_requests() {
        let raw = RawResults::default();
        raw.note_outgoing(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
        raw.note_outgoing(&json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}));
        raw.note_incoming(&json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": [{"x": 1}]}}));
        raw.note_incoming(&json!({"jsonrpc": "2.0", "id": 4, "result": {}}));
        let got = raw.take(&rmcp::model::RequestId::Number(3));
        assert_eq!(got, Some(json!({"tools": [{"x": 1}]})));
        assert_eq!(raw.take(&rmcp::model::RequestId::Number(4)), None);
        assert_eq!(raw.take(&rmcp::model::RequestId::Number(3)), None);
    }

    #[test]
    fn a_server_request_with_a_watched_id_keeps_the_watch() {
        let raw = RawResults::default();
        raw.note_outgoing(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}));
        raw.note_incoming(&json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}));
        raw.note_incoming(&json!({"jsonrpc": "2.0", "id": 5, "result": {"tools": []}}));
        assert_eq!(
            raw.take(&rmcp::model::RequestId::Number(5)),
            Some(json!({"tools": []}))
        );
    }

    #[test]
    fn during_the_handshake_only_the_awaited_answer_passes() {
        let raw = RawResults::new();
        raw.note_outgoing(&json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover"}));
        raw.note_outgoing(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"}));
        let late = json!({"jsonrpc": "2.0", "id": 0, "result": {}});
        let stray = json!({"jsonrpc": "2.0", "id": 77, "error": {"code": 1, "message": "x"}});
        let anonymous = json!({"jsonrpc": "2.0", "id": null, "error": {"code": 1, "message": "x"}});
        let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
        let answer = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
        assert!(raw.stray_in_handshake(&late));
        assert!(raw.stray_in_handshake(&stray));
        assert!(!raw.stray_in_handshake(&anonymous));
        assert!(!raw.stray_in_handshake(&ping));
        assert!(!raw.stray_in_handshake(&answer));
        raw.handshake_done();
        assert!(
            !raw.stray_in_handshake(&stray),
            "rmcp drops those itself afterwards"
        );
    }

    #[test]
    fn header_map_names_the_bad_key() {
        let mut headers = std::collections::BTreeMap::new();
        headers.insert("Authorization".to_owned(), "Bearer x".to_owned());
        let map = header_map(&headers).expect("valid headers");
        assert_eq!(map["authorization"], "Bearer x");
        headers.insert("Bad Name".to_owned(), "v".to_owned());
        assert_eq!(header_map(&headers).expect_err("invalid name"), "Bad Name");
        headers.remove("Bad Name");
        headers.insert("X-Ok".to_owned(), "line\nbreak".to_owned());
        assert_eq!(header_map(&headers).expect_err("invalid value"), "X-Ok");
    }

    #[test]
    fn log_lines_escape_control_characters_and_stop_at_the_bound() {
        assert_eq!(
            log_line("plain text\twith a tab", 100),
            "plain text\twith a tab"
        );
        assert_eq!(
            log_line("red \u{1b}[31malert\u{1b}[0m nul \0 end", 100),
            "red \\u{1b}[31malert\\u{1b}[0m nul \\u{0} end"
        );
        let long = format!("é{}", "z".repeat(100));
        let cut = log_line(&long, 10);
        assert!(cut.starts_with("ézzzzzzzz…"), "{cut}");
        assert!(
            cut.contains("92 more bytes past the 10-byte line limit"),
            "{cut}"
        );
        // A cut inside a character backs off to its start.
        assert!(log_line("ééé", 3).starts_with("é…"));
    }

    #[test]
    fn garbage_lines_are_dropped() {
        let line = |text: &'static str| Bytes::from_static(text.as_bytes());
        assert!(parse_line("s", line("Starting server on stdio...")).is_none());
        assert!(parse_line("s", line("42")).is_none());
        assert!(parse_line("s", line("")).is_none());
        assert!(parse_line("s", line(r#"{"jsonrpc":"2.0","method":"x"}"#)).is_some());
    }

    #[test]
    fn only_the_result_of_an_answer_to_roster_s_own_request_stays_text() {
        let id = DIRECT_IDS + 7;
        // Its result as written, whichever member comes first.
        for line in [
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[ {{"text":"a\"b"}} ]}}}}"#
            ),
            format!(
                r#"{{"result":{{"content":[ {{"text":"a\"b"}} ]}},"id":{id},"jsonrpc":"2.0"}}"#
            ),
        ] {
            match parse_line("s", line.clone().into()) {
                Some(Received::Result { id: got, result }) => {
                    assert_eq!(got, id);
                    assert_eq!(&result[..], br#"{"content":[ {"text":"a\"b"} ]}"#);
                }
                other => panic!("{line}: {other:?}"),
            }
        }
        // Anything else is parsed, members and their order kept.
        for value in [
            json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": [{"name": "t"}]}}),
            json!({"result": {"tools": []}, "id": 3, "jsonrpc": "2.0"}),
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -1, "message": "no"}}),
            json!({"jsonrpc": "2.0", "id": id, "method": "ping", "result": 1}),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse"}}),
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}),
            json!([{"jsonrpc": "2.0", "method": "x"}]),
        ] {
            let line = value.to_string();
            match parse_line("s", line.clone().into()) {
                Some(Received::Message(parsed)) => {
                    assert_eq!(parsed, value);
                    assert_eq!(parsed.to_string(), line, "in the order written");
                }
                other => panic!("{line}: {other:?}"),
            }
        }
    }
}
