//! What `/mcp` adds in front of rmcp's streamable HTTP service:
//!
//! - sessions bound to their client identity (another identity's session answers 404, exactly
//!   as an unknown one), bounded in number (`initialize` over a bound: 503 naming it);
//! - `DELETE` of a session answers 204, of an unknown one 404;
//! - a body that is not JSON answers 400 with JSON-RPC `-32700`, a body that is JSON but not
//!   a JSON-RPC message 400 with `-32600`, and a body sent too slowly 408;
//! - an answer streamed as SSE whose first real event is the response itself is sent as plain
//!   JSON when the client accepts it (anything sent before the response, or an answer slower
//!   than `JSON_ANSWER_WAIT`, keeps the stream);
//! - a request in flight when roster shuts down is answered with a JSON-RPC error naming it;
//! - a request whose id is that of a request still in flight in its session is answered with a
//!   JSON-RPC error (`-32600`) naming the id, and the first one goes on;
//! - an answer roster holds as text (a `tools/list` page every caller shares, a tool result as
//!   the server wrote it) is written from that text: the request carries an [`AnswerSlot`],
//!   the handler leaves the text there and answers with a stand-in, and the stand-in is
//!   swapped for the text here (as JSON, or in the stream).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::sessions::BoundSessions;
use crate::gateway::ClientIdentity;
use crate::gateway::lane::{AnswerSlot, Probe, response_head, set_aside};
use crate::servers::answer::members;
use crate::store::SharedSessions;

const SESSION_HEADER: &str = "mcp-session-id";

/// The most of an SSE answer held back while looking for its first message. An answer whose
/// first message is larger is streamed as it is.
const FIRST_EVENT_LIMIT: usize = 16 * 1024 * 1024;

/// How long an answer is held back to be sent as plain JSON. A slower one is streamed after
/// all: clients time out a response that sends nothing (the Python SDK after 300 s), while a
/// stream carries keep-alives. Shorter than rmcp's 15 s keep-alive period, so a client sees
/// bytes no later than it would from rmcp itself.
const JSON_ANSWER_WAIT: Duration = Duration::from_secs(10);

/// The state the front needs.
pub(super) struct Front {
    pub(super) metrics: crate::metrics::Metrics,
    pub(super) sessions: Arc<BoundSessions>,
    /// Sessions shared with other replicas (`[store]`).
    pub(super) shared: Option<SharedSessions>,
    pub(super) max_body_bytes: usize,
    pub(super) body_read_timeout: Duration,
    pub(super) shutdown: CancellationToken,
}

/// The identity key sessions are bound to (the `[[clients]]` name; "" for the default).
fn client_key(request: &Request) -> String {
    request
        .extensions()
        .get::<ClientIdentity>()
        .and_then(|who| who.name.clone())
        .unwrap_or_default()
}

fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The `/mcp` middleware; runs after `authenticate`.
pub(super) async fn mcp_front(
    State(front): State<Arc<Front>>,
    request: Request,
    next: Next,
) -> Response {
    let client = client_key(&request);
    let session = session_id(request.headers());
    if let (Some(shared), Some(id)) = (&front.shared, &session)
        && let Err(response) = adopt_shared(&front.sessions, shared, id, &client).await
    {
        return response;
    }
    let response = serve(&front, client, session.clone(), request, next).await;
    if let (Some(shared), Some(id)) = (&front.shared, &session) {
        if response.status() == StatusCode::NOT_FOUND {
            // Adopted, but rmcp could not restore it (it ended meanwhile).
            front.sessions.forget_unserved(id);
        } else if front.sessions.touch_due(id) {
            let (shared, id) = (shared.clone(), id.clone());
            tokio::spawn(async move {
                if let Err(error) = shared.touch(&id).await {
                    tracing::warn!(%error, "could not mark a shared session as used");
                }
            });
        }
    }
    response
}

/// A session this replica does not hold but the store does: taken on when it is `client`'s
/// (rmcp then restores it), answered as not found when it is someone else's.
async fn adopt_shared(
    sessions: &BoundSessions,
    shared: &SharedSessions,
    id: &str,
    client: &str,
) -> Result<(), Response> {
    if sessions.known(id) {
        return Ok(());
    }
    match shared.owner(id).await {
        Ok(Some(Some(owner))) if owner == client => {
            sessions.adopt(id, client);
            Ok(())
        }
        Ok(Some(_)) => Err(session_not_found()),
        // Unknown everywhere: rmcp says so.
        Ok(None) => Ok(()),
        Err(error) => {
            tracing::warn!(%error, "cannot read shared sessions");
            Err(plain(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("roster cannot reach the store that holds this session: {error}"),
            ))
        }
    }
}

async fn serve(
    front: &Front,
    client: String,
    session: Option<String>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::DELETE
        && session
            .as_deref()
            .is_some_and(|id| front.sessions.foreign(id, &client))
    {
        return session_not_found();
    }
    match *request.method() {
        Method::DELETE => {
            match &session {
                Some(id) if front.sessions.owned_by(id, &client) => {}
                // Without an id rmcp says what is missing.
                None => return next.run(request).await,
                Some(_) => return session_not_found(),
            }
            let mut response = next.run(request).await;
            if response.status() == StatusCode::ACCEPTED {
                // The Python SDK takes only 200 or 204 as a successful termination.
                *response.status_mut() = StatusCode::NO_CONTENT;
                *response.body_mut() = Body::empty();
                response.headers_mut().remove(header::CONTENT_TYPE);
                response.headers_mut().remove(header::CONTENT_LENGTH);
            }
            response
        }
        Method::POST => post(front, client, session, request, next).await,
        _ => next.run(request).await,
    }
}

async fn post(
    front: &Front,
    client: String,
    session: Option<String>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let bytes = match read_body(body, front.max_body_bytes, front.body_read_timeout).await {
        Ok(bytes) => bytes,
        Err(response) => return response,
    };
    let (probe, arguments) = match serde_json::from_slice::<Probe<'_>>(&bytes) {
        Ok(probe) => {
            let arguments = probe.arguments_at(&bytes);
            let Probe { id, method, .. } = probe;
            let probe = Probe {
                id,
                method,
                params: None,
            };
            (probe, arguments)
        }
        // An array (a batch) or another JSON value: rmcp judges it.
        Err(_) if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok() => {
            (Probe::default(), None)
        }
        Err(e) => {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                None,
                -32700,
                &format!("parse error: the request body is not JSON ({e})"),
            );
        }
    };
    let is_request = probe.method.is_some() && probe.id.is_some();
    if let (true, Some(method)) = (is_request, &probe.method) {
        front.metrics.request(method);
    }
    let reservation = match (&session, probe.method.as_deref()) {
        (None, Some("initialize")) => match front.sessions.reserve(&client) {
            Ok(reservation) => Some(reservation),
            Err(bound) => {
                return jsonrpc_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    probe.id,
                    -32000,
                    &bound.to_string(),
                );
            }
        },
        _ => None,
    };
    // A request whose id is in flight in its session already is refused: rmcp would send the
    // first one's answer to this one's stream and leave the first one's open for ever.
    if let (true, Some(session), Some(id)) = (is_request, &session, &probe.id) {
        match front.sessions.begin_request(session, &id.to_string()) {
            Ok(Some(in_flight)) => {
                parts.extensions.insert(in_flight);
            }
            Ok(None) => {}
            Err(duplicate) => {
                return jsonrpc_error(StatusCode::OK, probe.id, -32600, &duplicate.to_string());
            }
        }
    }
    let accepts_json = accepts_json(&parts.headers);
    let sent_json = is_json(&parts.headers);
    // A page of tools or a tool result may come as text (see the module's words).
    let texts = matches!(probe.method.as_deref(), Some("tools/list" | "tools/call"));
    let page = (is_request && accepts_json && texts).then(AnswerSlot::default);
    if let Some(slot) = &page {
        parts.extensions.insert(slot.clone());
    }
    // A call in a session goes to its server with its arguments as written. (A 2026-07-28
    // call is checked against its `Mcp-Param-*` headers by rmcp, which reads its arguments.)
    let bytes = match arguments.filter(|_| session.is_some()) {
        Some(at) => {
            let (rest, text) = set_aside(bytes, at);
            parts.extensions.insert(text);
            rest
        }
        None => bytes,
    };
    let request = Request::from_parts(parts, Body::from(bytes));
    let response = tokio::select! {
        response = next.run(request) => response,
        _ = front.shutdown.cancelled() => return shutting_down(probe.id),
    };
    if let Some(reservation) = reservation
        && response.status().is_success()
        && let Some(id) = session_id(response.headers())
    {
        reservation.claim(&id);
        // Before the client has the id: its next request may land on another replica.
        if let Some(shared) = &front.shared
            && let Err(error) = shared.claim(&id, &client).await
        {
            tracing::warn!(%error, "a new session could not be shared with the other replicas");
        }
    }
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE && sent_json {
        // rmcp's answer to JSON that is no JSON-RPC message.
        return jsonrpc_error(
            StatusCode::BAD_REQUEST,
            probe.id,
            -32600,
            "invalid request: the body is JSON but not a JSON-RPC 2.0 message",
        );
    }
    if is_request && accepts_json && is_event_stream(response.headers()) {
        return unwrap_first_event(response, probe.id, &front.shutdown, page).await;
    }
    match page.as_ref().and_then(AnswerSlot::take) {
        // A stand-in answered as JSON (a 2026-07-28 request).
        Some(text) if is_json(response.headers()) => json_page(response, text).await,
        _ => response,
    }
}

/// The JSON answer `response` (a stand-in) with the page `text` in place of its result.
async fn json_page(response: Response, text: Bytes) -> Response {
    let (mut parts, body) = response.into_parts();
    match axum::body::to_bytes(body, FIRST_EVENT_LIMIT).await {
        Ok(answer) => {
            let answer = page_answer(&String::from_utf8_lossy(&answer), text);
            let body = answer_body(answer, &mut parts.headers);
            Response::from_parts(parts, body)
        }
        Err(error) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the answer could not be read: {error}"),
        ),
    }
}

/// The body, read within `timeout` and `limit`; else the answer to give.
async fn read_body(body: Body, limit: usize, timeout: Duration) -> Result<Bytes, Response> {
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            if too_large {
                Err(plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("Payload Too Large: request body exceeds {limit} bytes"),
                ))
            } else {
                Err(plain(
                    StatusCode::BAD_REQUEST,
                    format!("the request body could not be read: {e}"),
                ))
            }
        }
        Err(_) => Err(plain(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} ([gateway] body_read_timeout)",
                humantime::format_duration(timeout)
            ),
        )),
    }
}

/// Reads an SSE answer up to its first message. A response or error goes back as plain JSON
/// with the same headers; anything else (progress, a log message, a question for the client)
/// keeps the stream, with what was read put back in front. With a `page` slot that was filled,
/// the stand-in answer is swapped for the page.
async fn unwrap_first_event(
    response: Response,
    request_id: Option<Value>,
    shutdown: &CancellationToken,
    page: Option<AnswerSlot>,
) -> Response {
    let (mut parts, body) = response.into_parts();
    let mut stream = body.into_data_stream();
    let mut held: Vec<u8> = Vec::new();
    // Where the next unparsed event starts in `held`.
    let mut scanned = 0;
    let wait = tokio::time::sleep(JSON_ANSWER_WAIT);
    tokio::pin!(wait);
    loop {
        let chunk = tokio::select! {
            chunk = stream.next() => chunk,
            _ = shutdown.cancelled() => return shutting_down(request_id),
            _ = &mut wait => {
                let page = page.map(|slot| (slot, scanned));
                return restream(parts, held, stream, request_id, shutdown, page);
            }
        };
        let chunk = match chunk {
            Some(Ok(chunk)) => chunk,
            Some(Err(e)) => {
                tracing::debug!("an SSE answer failed before its first message: {e}");
                break;
            }
            None => break,
        };
        held.extend_from_slice(&chunk);
        while let Some(end) = event_end(&held[scanned..]) {
            let event = &held[scanned..scanned + end.0];
            match first_message(event) {
                Event::Skip => scanned += end.1,
                Event::Answer(message) => {
                    parts.headers.insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    parts.headers.remove(header::CACHE_CONTROL);
                    parts.headers.remove(header::CONTENT_LENGTH);
                    parts.headers.remove("x-accel-buffering");
                    let body = match page.as_ref().and_then(AnswerSlot::take) {
                        Some(text) => answer_body(page_answer(&message, text), &mut parts.headers),
                        None => Body::from(message),
                    };
                    return Response::from_parts(parts, body);
                }
                Event::Other => {
                    let page = page.map(|slot| (slot, scanned));
                    return restream(parts, held, stream, request_id, shutdown, page);
                }
            }
        }
        if held.len() > FIRST_EVENT_LIMIT {
            let page = page.map(|slot| (slot, scanned));
            return restream(parts, held, stream, request_id, shutdown, page);
        }
    }
    // The stream ended with no message: at shutdown, say so; otherwise pass on what came.
    if shutdown.is_cancelled() {
        return shutting_down(request_id);
    }
    Response::from_parts(parts, Body::from(held))
}

/// The stream as it came, what was read put back in front. Should shutdown begin before the
/// stream ends (the answer would then never come), an SSE event with the JSON-RPC error naming
/// it ends the stream. With a `page` slot (and where in `held` its events begin), the
/// stand-in answer is swapped for the page as it passes.
fn restream(
    parts: axum::http::response::Parts,
    held: Vec<u8>,
    rest: impl futures::Stream<Item = Result<Bytes, axum::Error>> + Send + Unpin + 'static,
    request_id: Option<Value>,
    shutdown: &CancellationToken,
    page: Option<(AnswerSlot, usize)>,
) -> Response {
    let (head, swap) = match page {
        Some((slot, scanned)) => {
            let mut swap = SwapPage {
                slot,
                held: Vec::new(),
                swapped: false,
            };
            let mut head = held[..scanned].to_vec();
            head.extend(swap.feed(&held[scanned..]));
            (head, Some(swap))
        }
        None => (held, None),
    };
    let head = futures::stream::once(async move { Ok::<_, axum::Error>(Bytes::from(head)) });
    let shutdown = shutdown.clone();
    let tail = futures::stream::unfold(Some((rest, request_id, swap)), move |state| {
        let shutdown = shutdown.clone();
        async move {
            let (mut rest, request_id, mut swap) = state?;
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => {
                    let event = format!("event: message\ndata: {}\n\n", shutdown_error(request_id));
                    Some((Ok(Bytes::from(event)), None))
                }
                item = rest.next() => match item {
                    Some(Ok(chunk)) if swap.is_some() => {
                        let chunk = swap.as_mut().map(|s| s.feed(&chunk)).unwrap_or_default();
                        Some((Ok(Bytes::from(chunk)), Some((rest, request_id, swap))))
                    }
                    Some(item) => Some((item, Some((rest, request_id, swap)))),
                    // The stream ended: what a swap still holds (no whole event) goes as it is.
                    None => swap.map(|swap| (Ok(Bytes::from(swap.held)), None)),
                },
            }
        }
    });
    Response::from_parts(parts, Body::from_stream(head.chain(tail)))
}

/// The JSON-RPC answer with the page `text` for the stand-in `answer` (its id kept), in its
/// parts: the text is not copied.
fn page_answer(answer: &str, text: Bytes) -> [Bytes; 3] {
    let id = serde_json::from_str::<Value>(answer)
        .ok()
        .and_then(|answer| answer.get("id").map(Value::to_string))
        .unwrap_or_else(|| "null".to_owned());
    [response_head(&id).into(), text, Bytes::from_static(b"}")]
}

/// A JSON answer's body of `parts` written one after the other, its length in `headers`:
/// a page or a tool result is sent from the text roster holds, not from a copy of it.
fn answer_body(parts: [Bytes; 3], headers: &mut HeaderMap) -> Body {
    let length = parts.iter().map(Bytes::len).sum::<usize>();
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    let parts = parts.map(Ok::<_, std::convert::Infallible>);
    Body::from_stream(futures::stream::iter(parts))
}

/// Swaps the stand-in answer for its page in an SSE stream, event by event.
struct SwapPage {
    slot: AnswerSlot,
    /// The start of an event not yet whole.
    held: Vec<u8>,
    /// The page went out: the rest of the stream passes as it comes.
    swapped: bool,
}

impl SwapPage {
    /// What can go out of what came so far and `chunk`: every whole event, the answer swapped.
    fn feed(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.swapped {
            return chunk.to_vec();
        }
        self.held.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(self.held.len());
        let mut at = 0;
        while let Some((end, next)) = event_end(&self.held[at..]) {
            let event = &self.held[at..at + end];
            let text = match first_message(event) {
                Event::Answer(answer) => self.slot.take().map(|text| (answer, text)),
                _ => None,
            };
            match text {
                Some((answer, text)) => {
                    // The event's other fields (its id, its type) stay; its data is the page.
                    let event = String::from_utf8_lossy(event);
                    for line in event.split('\n').map(|l| l.trim_end_matches('\r')) {
                        if !line.starts_with("data:") {
                            out.extend_from_slice(line.as_bytes());
                            out.push(b'\n');
                        }
                    }
                    out.extend_from_slice(b"data: ");
                    for part in page_answer(&answer, text) {
                        out.extend_from_slice(&part);
                    }
                    out.extend_from_slice(b"\n\n");
                    out.extend_from_slice(&self.held[at + next..]);
                    self.held.clear();
                    self.swapped = true;
                    return out;
                }
                None => out.extend_from_slice(&self.held[at..at + next]),
            }
            at += next;
        }
        self.held.drain(..at);
        out
    }
}

/// The length of the first complete event in `buf` and where the next one starts.
fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < buf.len() {
        if buf[i] == b'\n' {
            if buf.get(i + 1) == Some(&b'\n') {
                return Some((i, i + 2));
            }
            if buf.get(i + 1) == Some(&b'\r') && buf.get(i + 2) == Some(&b'\n') {
                return Some((i, i + 3));
            }
        }
        if buf[i] == b'\r' && buf.get(i + 1) == Some(&b'\r') {
            return Some((i, i + 2));
        }
        i += 1;
    }
    None
}

enum Event {
    /// A priming event (no data), a keep-alive comment, or only a `retry:`.
    Skip,
    /// The JSON-RPC response or error, as its JSON text.
    Answer(String),
    /// A notification or request before the answer.
    Other,
}

fn first_message(event: &[u8]) -> Event {
    let Ok(text) = std::str::from_utf8(event) else {
        return Event::Other;
    };
    let mut data = String::new();
    let mut has_data = false;
    for line in text.split('\n').map(|l| l.trim_end_matches('\r')) {
        if let Some(value) = line.strip_prefix("data:") {
            if has_data {
                data.push('\n');
            }
            data.push_str(value.strip_prefix(' ').unwrap_or(value));
            has_data = true;
        }
    }
    if data.trim().is_empty() {
        return Event::Skip;
    }
    // Only the top-level members are looked at: the result itself (a tool's output, a page
    // of tools) is skipped, not built.
    let Some(members) = members(&data) else {
        return Event::Other;
    };
    let has = |name: &str| members.iter().any(|(key, _)| key == name);
    if has("id") && !has("method") && (has("result") || has("error")) {
        Event::Answer(data)
    } else {
        Event::Other
    }
}

fn media_types(headers: &HeaderMap, name: header::HeaderName) -> impl Iterator<Item = String> {
    headers
        .get_all(name)
        .into_iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter(|range| {
            // `;q=0` excludes the range.
            !range.split(';').skip(1).any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
            })
        })
        .map(|range| {
            range
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .collect::<Vec<_>>()
        .into_iter()
}

fn accepts_json(headers: &HeaderMap) -> bool {
    media_types(headers, header::ACCEPT)
        .any(|t| t == "application/json" || t == "application/*" || t == "*/*")
}

fn is_json(headers: &HeaderMap) -> bool {
    media_types(headers, header::CONTENT_TYPE).any(|t| t == "application/json")
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    media_types(headers, header::CONTENT_TYPE).any(|t| t == "text/event-stream")
}

/// rmcp's own answer for a session it does not hold, byte for byte, so another identity's
/// session cannot be told apart from one that does not exist.
fn session_not_found() -> Response {
    plain(StatusCode::NOT_FOUND, "Not Found: Session not found".into())
}

fn plain(status: StatusCode, text: String) -> Response {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response
}

fn jsonrpc_error(status: StatusCode, id: Option<Value>, code: i64, message: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": { "code": code, "message": message },
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

const SHUTDOWN_MESSAGE: &str =
    "roster is shutting down; the request was not completed (retry it once roster is back)";

fn shutdown_error(id: Option<Value>) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": { "code": -32000, "message": SHUTDOWN_MESSAGE },
    })
}

/// A request still in flight when shutdown began. A JSON-RPC error (HTTP 200) reaches the
/// client's caller as an error it can read, where a 5xx status would be a transport failure.
fn shutting_down(id: Option<Value>) -> Response {
    let mut response = jsonrpc_error(StatusCode::OK, id, -32000, SHUTDOWN_MESSAGE);
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priming_and_keep_alive_events_are_skipped_and_the_answer_found() {
        assert!(matches!(
            first_message(b"id: 0\nretry: 3000\ndata: "),
            Event::Skip
        ));
        assert!(matches!(first_message(b":"), Event::Skip));
        let answer = br#"id: 1
data: {"jsonrpc":"2.0","id":3,"result":{}}"#;
        assert!(matches!(first_message(answer), Event::Answer(a) if a.contains("\"id\":3")));
        let progress = br#"data: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#;
        assert!(matches!(first_message(progress), Event::Other));
        let question = br#"data: {"jsonrpc":"2.0","id":0,"method":"roots/list"}"#;
        assert!(matches!(first_message(question), Event::Other));
        // Only top-level keys count: a result that holds a `method` is still the answer.
        let nested =
            br#"data: {"jsonrpc":"2.0","id":"a","result":{"method":"x","id":[1,{"y":null}]}}"#;
        assert!(matches!(first_message(nested), Event::Answer(_)));
        let null_id = br#"data: {"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}"#;
        assert!(matches!(first_message(null_id), Event::Answer(_)));
        for other in [
            &br#"data: [1,2,3,4]"#[..],
            br#"data: {"jsonrpc":"2.0","id":1}"#,
            b"data: {",
        ] {
            assert!(matches!(first_message(other), Event::Other));
        }
    }

    #[test]
    fn events_end_at_a_blank_line() {
        assert_eq!(event_end(b"data: x\n\ndata: y"), Some((7, 9)));
        assert_eq!(event_end(b"data: x\r\n\r\n"), Some((8, 11)));
        assert_eq!(event_end(b"data: x\n"), None);
    }

    #[test]
    fn accept_ranges_with_zero_quality_do_not_count() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json;q=0"),
        );
        assert!(!accepts_json(&headers));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        assert!(accepts_json(&headers));
    }

    #[test]
    fn a_streamed_page_stand_in_is_swapped_for_the_page_wherever_the_chunks_break() {
        let before: &[u8] = b"id: 0\nretry: 3000\ndata: \n\n\
            data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n\
            : keep-alive\n\n";
        let stand_in = br#"id: 7
data: {"jsonrpc":"2.0","id":"req-1","result":{}}

"#;
        // What follows the answer passes as it comes.
        let after: &[u8] = b": keep-alive\n\n";
        let stream = &[before, stand_in, after].concat()[..];
        let page = r#"{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"2"}"#;
        let expected = [
            before,
            b"id: 7\ndata: ",
            br#"{"jsonrpc":"2.0","id":"req-1","result":"#,
            page.as_bytes(),
            b"}\n\n",
            after,
        ]
        .concat();
        for cut in 0..=stream.len() {
            let slot = AnswerSlot::default();
            slot.put(page.into());
            let mut swap = SwapPage {
                slot: slot.clone(),
                held: Vec::new(),
                swapped: false,
            };
            let mut out = swap.feed(&stream[..cut]);
            out.extend(swap.feed(&stream[cut..]));
            assert!(swap.held.is_empty(), "cut at {cut}: nothing left over");
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&expected),
                "cut at {cut}"
            );
            assert!(slot.take().is_none(), "the page is used once");
        }
        // A slot the lane left empty (the answer was not the stand-in): the stream as it came.
        let mut swap = SwapPage {
            slot: AnswerSlot::default(),
            held: Vec::new(),
            swapped: false,
        };
        assert_eq!(swap.feed(stream), stream);
    }

    #[test]
    fn a_page_answer_keeps_the_stand_in_s_id() {
        let text = r#"{"tools":[]}"#;
        for (stand_in, id) in [
            (r#"{"jsonrpc":"2.0","id":12,"result":{}}"#, "12"),
            (r#"{"jsonrpc":"2.0","id":"x\"y","result":{}}"#, r#""x\"y""#),
        ] {
            let answer = page_answer(stand_in, Bytes::from_static(text.as_bytes())).concat();
            let answer: Value = serde_json::from_slice(&answer).expect("JSON");
            assert_eq!(answer["id"].to_string(), id);
            assert_eq!(answer["result"], json!({"tools": []}));
            assert_eq!(answer["jsonrpc"], "2.0");
        }
    }
}
