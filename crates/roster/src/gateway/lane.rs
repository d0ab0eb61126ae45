//! The fast lane of a client connection (stdio, or an initialize-era HTTP session):
//! `tools/call` and `tools/list` answered on the task that reads the client's messages.
//!
//! rmcp's service loop hands each request to a task of its own, takes the answer back through a
//! channel and writes it from yet another task: three wake-ups between tasks, often of the other
//! worker thread, for every call. The lane sits in the transport under that loop: once the
//! session is open it takes the hot requests as they are read, runs the same handler on them
//! (rmcp's own dispatch, so every check and every answer is the same) concurrently on the
//! reading task, and writes each answer from there. Everything else — the handshake, other
//! requests, notifications, answers to roster's own requests — goes through rmcp as before.
//!
//! The lane learns the handler and the session's peer from the session's first request: it
//! carries a [`LaneLink`] in its extensions, and the handler fills the link with a twin of
//! itself (the same session, watches and end) when rmcp hands it that request. Until then
//! every message takes rmcp's path.
//!
//! Answers roster holds as JSON text — a shared `tools/list` page (the same for every caller,
//! made once), a tool result as the server wrote it — skip rmcp's serializer: the handler
//! leaves the text in the request's [`AnswerSlot`] and answers with a stand-in; over stdio
//! the lane writes the text as the answer's line, over HTTP the front swaps the stand-in for
//! it (rmcp thus neither serializes the text nor keeps a copy of it for a resumed stream).
//!
//! Cancellation: a client's `notifications/cancelled` for a request in the lane cancels its
//! context, as rmcp's loop would. A lane holds at most [`MAX_IN_LANE`] requests; past that, new
//! ones take rmcp's path (nothing waits: the lane never stops reading).
//!
//! Request ids: the lane knows every request of its session in flight, its own and rmcp's (until
//! their answers pass it, or the client cancels them). A request whose id is one of them is
//! answered at once with [`DuplicateRequest`]: rmcp keys a request's cancellation by its id
//! alone, so the first answer would cancel the second request and drop its answer. (Over HTTP
//! the front refuses such a request before rmcp's session routes it; see `http::sessions`.)

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use rmcp::model::{
    ClientNotification, ClientRequest, Extensions, GetExtensions, GetMeta, JsonRpcMessage,
    JsonRpcNotification, JsonRpcRequest, RequestId, RequestMetaObject,
};
use rmcp::service::{RequestContext, RxJsonRpcMessage, Service, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use tokio_util::bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::handler::LaneLink;
use super::stdio::lines::Lines;
use crate::servers::answer::Members;

/// The most requests one lane runs at once.
pub(crate) const MAX_IN_LANE: usize = 4096;

/// A request refused because a request with the same id is in flight in its session; the
/// message names the id (as JSON).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid request: a request with id {0} is already in flight in this session; wait for its \
     answer, or give each request in flight an id of its own"
)]
pub(crate) struct DuplicateRequest(pub(crate) String);

/// Where the handler leaves the JSON text of a request's result (a shared `tools/list` page, a
/// tool result as the server wrote it) for whoever writes the answer: the lane over stdio, the
/// front over HTTP, each puts one in the `tools/list` and `tools/call` requests it hands on.
/// It is filled just before the request is answered with a stand-in, so the writer finds it
/// filled when the stand-in comes.
#[derive(Clone, Default)]
pub(crate) struct AnswerSlot(Arc<Mutex<Option<Bytes>>>);

impl AnswerSlot {
    pub(crate) fn put(&self, text: Bytes) {
        *crate::sync::lock(&self.0) = Some(text);
    }

    /// The text the handler left, if it answered with the stand-in.
    pub(crate) fn take(&self) -> Option<Bytes> {
        crate::sync::lock(&self.0).take()
    }
}

/// The slot the lane or the front put in this request, if any.
pub(crate) fn answer_slot(context: &RequestContext<RoleServer>) -> Option<AnswerSlot> {
    carried(context)
}

/// A `tools/call`'s arguments as the client wrote them (the JSON text of an object), set
/// aside by whoever read the request (the stdio reader, the HTTP front): the request rmcp
/// parses holds `{}` in their place, and they go to the server as they are.
#[derive(Clone, Debug)]
pub(crate) struct ArgumentsText(pub(crate) Bytes);

/// The arguments set aside from this request, if they were.
pub(crate) fn arguments_text(context: &RequestContext<RoleServer>) -> Option<Bytes> {
    carried::<ArgumentsText>(context).map(|text| text.0)
}

/// What the lane (in the request's extensions) or the front (in its HTTP parts') put in this
/// request.
fn carried<T: Clone + Send + Sync + 'static>(context: &RequestContext<RoleServer>) -> Option<T> {
    let lane = context.extensions.get::<T>();
    let front = || {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        parts.and_then(|parts| parts.extensions.get::<T>())
    };
    lane.or_else(front).cloned()
}

/// Just enough of a JSON-RPC message to route it; parsing it also checks the body is JSON.
#[derive(serde::Deserialize, Default)]
pub(crate) struct Probe<'a> {
    #[serde(default)]
    pub(crate) id: Option<Value>,
    #[serde(default)]
    pub(crate) method: Option<String>,
    /// The members of its params as written (read in the same pass).
    #[serde(default, borrow)]
    pub(crate) params: Option<Members<'a>>,
}

impl Probe<'_> {
    /// Where in `body` (this message's text) a `tools/call`'s arguments object is written.
    pub(crate) fn arguments_at(&self, body: &[u8]) -> Option<std::ops::Range<usize>> {
        if self.method.as_deref() != Some("tools/call") || self.id.is_none() {
            return None;
        }
        let text = self.params.as_ref()?.get("arguments")?.get();
        let at = (text.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
        (text.starts_with('{') && at + text.len() <= body.len()).then(|| at..at + text.len())
    }
}

/// `body` with the `tools/call` arguments at `at` set aside (see [`ArgumentsText`]): the
/// body rmcp reads holds `{}` in their place.
pub(crate) fn set_aside(body: Bytes, at: std::ops::Range<usize>) -> (Bytes, ArgumentsText) {
    let text = ArgumentsText(body.slice(at.clone()));
    let mut rest = Vec::with_capacity(body.len() - at.len() + 2);
    rest.extend_from_slice(&body[..at.start]);
    rest.extend_from_slice(b"{}");
    rest.extend_from_slice(&body[at.end..]);
    (rest.into(), text)
}

/// A lane request's answer: a message for the transport, or (where the lane writes lines
/// itself) one already written out as the parts of its JSON-RPC line. Not boxed: each answer
/// is moved once, and a box would be an allocation per answer on the hot path.
#[allow(clippy::large_enum_variant)]
enum Reply {
    Message(TxJsonRpcMessage<RoleServer>),
    Line(Lines, [Bytes; 3]),
}

type Answer = (RequestId, Reply);

/// A transport with the fast lane in it.
pub struct FastLane<T> {
    inner: T,
    link: LaneLink,
    /// Where the lane writes whole lines itself (stdio), if it can.
    lines: Option<Lines>,
    running: FuturesUnordered<BoxFuture<'static, Answer>>,
    writes: FuturesUnordered<BoxFuture<'static, ()>>,
    /// The lane's requests in flight.
    cancels: HashMap<RequestId, CancellationToken>,
    /// The requests handed to rmcp whose answers have not passed yet.
    passed: HashSet<RequestId>,
}

impl<T> FastLane<T> {
    pub(crate) fn new(inner: T) -> Self {
        FastLane {
            inner,
            link: LaneLink::default(),
            lines: None,
            running: FuturesUnordered::new(),
            writes: FuturesUnordered::new(),
            cancels: HashMap::new(),
            passed: HashSet::new(),
        }
    }

    /// The lane writes what it holds as text (a shared `tools/list` page) to `lines` itself.
    pub(crate) fn with_lines(mut self, lines: Lines) -> Self {
        self.lines = Some(lines);
        self
    }
}

/// What comes before the result in the JSON-RPC response answering the request whose id is
/// `id` (as JSON text); `}` closes it.
pub(crate) fn response_head(id: &str) -> Vec<u8> {
    let mut head = Vec::with_capacity(id.len() + 32);
    head.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    head.extend_from_slice(id.as_bytes());
    head.extend_from_slice(br#","result":"#);
    head
}

/// The JSON-RPC line answering `id` with `result` (JSON text), in parts: the result is not
/// copied (a large tool result is written as it came).
fn result_line(id: &RequestId, result: Bytes) -> [Bytes; 3] {
    let id = serde_json::to_string(id).unwrap_or_else(|_| "null".to_owned());
    [
        response_head(&id).into(),
        result,
        Bytes::from_static(b"}\n"),
    ]
}

/// Whether the lane answers this request (the hot ones; the rest keep rmcp's path).
fn in_lane(request: &ClientRequest) -> bool {
    matches!(
        request,
        ClientRequest::CallToolRequest(_) | ClientRequest::ListToolsRequest(_)
    )
}

impl<T> FastLane<T>
where
    T: Transport<RoleServer>,
{
    /// Takes `message` into the lane, answers it (a request whose id is in flight), or gives
    /// it back for rmcp.
    fn take(
        &mut self,
        message: RxJsonRpcMessage<RoleServer>,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        match &message {
            JsonRpcMessage::Request(JsonRpcRequest { id, .. })
                if self.cancels.contains_key(id) || self.passed.contains(id) =>
            {
                let id = id.clone();
                self.refuse(id);
                return None;
            }
            JsonRpcMessage::Notification(JsonRpcNotification {
                notification: ClientNotification::CancelledNotification(cancelled),
                ..
            }) => {
                // rmcp drops a cancelled request's answer: its id is free now.
                if let Some(id) = &cancelled.params.request_id {
                    self.passed.remove(id);
                }
            }
            _ => {}
        }
        let message = self.take_hot(message)?;
        if let JsonRpcMessage::Request(JsonRpcRequest { id, .. }) = &message {
            self.passed.insert(id.clone());
        }
        Some(message)
    }

    /// Answers request `id` with [`DuplicateRequest`].
    fn refuse(&mut self, id: RequestId) {
        let text = serde_json::to_string(&id).unwrap_or_else(|_| id.to_string());
        let error = ErrorData::invalid_request(DuplicateRequest(text).to_string(), None);
        let write = self.inner.send(JsonRpcMessage::error(error, Some(id)));
        self.writes.push(Box::pin(async move {
            if let Err(error) = write.await {
                tracing::debug!(%error, "cannot write an answer to the client");
            }
        }));
    }

    /// Takes a hot request into the lane (see [`in_lane`]), or gives `message` back for rmcp.
    fn take_hot(
        &mut self,
        mut message: RxJsonRpcMessage<RoleServer>,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        let (handler, peer) = match (self.link.get(), &mut message) {
            (Some((handler, peer)), JsonRpcMessage::Request(JsonRpcRequest { request, .. }))
                if in_lane(request) && self.running.len() < MAX_IN_LANE =>
            {
                (handler.clone(), peer.clone())
            }
            (None, JsonRpcMessage::Request(JsonRpcRequest { request, .. })) => {
                request.extensions_mut().insert(self.link.clone());
                return Some(message);
            }
            (
                _,
                JsonRpcMessage::Notification(JsonRpcNotification {
                    notification: ClientNotification::CancelledNotification(cancelled),
                    ..
                }),
            ) => {
                let id = cancelled.params.request_id.as_ref();
                if let Some(ct) = id.and_then(|id| self.cancels.get(id)) {
                    ct.cancel();
                }
                return Some(message);
            }
            _ => return Some(message),
        };
        let JsonRpcMessage::Request(JsonRpcRequest {
            id, mut request, ..
        }) = message
        else {
            return Some(message);
        };
        // As rmcp's loop builds a handler's context.
        let ct = CancellationToken::new();
        self.cancels.insert(id.clone(), ct.clone());
        let mut meta = RequestMetaObject::new();
        let mut extensions = Extensions::new();
        std::mem::swap(&mut meta, request.get_meta_mut());
        std::mem::swap(&mut extensions, request.extensions_mut());
        let mut context = RequestContext::new(id.clone(), peer);
        context.ct = ct;
        context.meta = meta;
        context.extensions = extensions;
        // Where the lane writes lines itself, the handler may leave the answer as text.
        let slot = self.lines.clone().map(|lines| {
            let slot = AnswerSlot::default();
            context.extensions.insert(slot.clone());
            (slot, lines)
        });
        self.running.push(Box::pin(async move {
            let answer = match Service::handle_request(&*handler, request, context).await {
                Ok(result) => match slot.and_then(|(slot, lines)| Some((slot.take()?, lines))) {
                    Some((text, lines)) => Reply::Line(lines, result_line(&id, text)),
                    None => Reply::Message(JsonRpcMessage::response(result, id.clone())),
                },
                Err(error) => Reply::Message(JsonRpcMessage::error(error, Some(id.clone()))),
            };
            (id, answer)
        }));
        None
    }
}

impl<T> Transport<RoleServer> for FastLane<T>
where
    T: Transport<RoleServer> + Send,
    T::Error: Send,
{
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = answered {
            self.passed.remove(id);
        }
        self.inner.send(item)
    }

    /// The next message for rmcp; meanwhile the lane's requests run and their answers are
    /// written. Cancel-safe: what is running stays in the lane when rmcp drops this future.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            tokio::select! {
                biased;
                Some((id, answer)) = self.running.next(), if !self.running.is_empty() => {
                    if let Some(ct) = self.cancels.remove(&id) {
                        // Whatever the request still had running ends with it, as in rmcp.
                        ct.cancel();
                    }
                    match answer {
                        Reply::Line(lines, line) => {
                            let write = lines.write(line);
                            self.writes.push(Box::pin(async move {
                                if let Err(error) = write.await {
                                    tracing::debug!(%error, "cannot write an answer to the client");
                                }
                            }));
                        }
                        Reply::Message(message) => {
                            let write = self.inner.send(message);
                            self.writes.push(Box::pin(async move {
                                if let Err(error) = write.await {
                                    tracing::debug!(%error, "cannot write an answer to the client");
                                }
                            }));
                        }
                    }
                }
                Some(()) = self.writes.next(), if !self.writes.is_empty() => {}
                message = self.inner.receive() => {
                    let Some(message) = message else {
                        // The client is gone (rmcp's loop ends too): answers already being
                        // written go out, requests still running are dropped.
                        while self.writes.next().await.is_some() {}
                        return None;
                    };
                    if let Some(message) = self.take(message) {
                        return Some(message);
                    }
                }
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
