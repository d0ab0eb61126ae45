//! Requests made on behalf of a client's caller (`tools/call`, `prompts/get`,
//! `resources/read`): progress, timeout, cancellation, and the rounds of an `input_required`
//! result answered for a caller that does not take them itself.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{CancelledNotificationParam, RequestId};
use rmcp::service::RequestHandle;
use serde_json::{Map, Value, json};
use tokio_util::bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::answer::{Answer, RawResult};
use super::client_side::Unanswered;
use super::connection::DirectPath;
use super::connection::{Connection, client_request};
use super::error::RequestError;
use super::http_direct::{HttpDirect, Unposted};
use super::notifications::ProgressListener;
use super::relay::{self, CallerRelay, InFlightGuard};
use super::wire::Direct;
use super::wire::{DirectCall, DirectRequest, RawResults, Received, WireError};
use futures::future::BoxFuture;

/// A round's request on its way: through rmcp's service, or past it.
enum Sent {
    Rmcp(Box<RequestHandle<RoleClient>>),
    Direct(DirectCall),
    /// POSTed by roster (its id, and the POST with its answer).
    Http(u64, BoxFuture<'static, Result<Received, Unposted>>),
}

/// Where roster writes a caller's request itself.
#[derive(Clone, Copy)]
enum Writer<'a> {
    Wire(&'a Direct),
    Http(&'a HttpDirect),
}

/// What became of a round's request.
enum Outcome {
    /// The server's answer, or why there is none.
    Answer(Result<Answer, RequestError>),
    /// The server did not take roster's own POST: it goes again through rmcp.
    ThroughRmcp,
}

impl Sent {
    fn id(&self) -> RequestId {
        match self {
            Sent::Rmcp(handle) => handle.id.clone(),
            Sent::Direct(call) => RequestId::Number(call.id as i64),
            Sent::Http(id, _) => RequestId::Number(*id as i64),
        }
    }

    /// The progress token the request carries, as the notification fan-out keys it.
    fn progress_token(&self) -> String {
        match self {
            Sent::Rmcp(handle) => serde_json::to_value(&handle.progress_token.0)
                .map(|t| t.to_string())
                .unwrap_or_default(),
            Sent::Direct(call) => call.id.to_string(),
            Sent::Http(id, _) => id.to_string(),
        }
    }

    /// The server's result, or its error.
    async fn answer(self, raw: &RawResults) -> Outcome {
        let received = match self {
            Sent::Rmcp(handle) => {
                let id = handle.id.clone();
                let answer = match handle.await_response().await {
                    // An answer rmcp reads as another type (say an empty `{}`) is still the
                    // result.
                    Ok(typed) => match raw.take(&id) {
                        Some(raw) => Ok(Answer::Value(raw)),
                        None => serde_json::to_value(typed)
                            .map(Answer::Value)
                            .map_err(|e| RequestError::Unexpected(e.to_string())),
                    },
                    Err(error) => Err(error.into()),
                };
                return Outcome::Answer(answer);
            }
            Sent::Direct(mut call) => call.answer().await.map_err(|_| RequestError::Closed),
            Sent::Http(_, post) => match post.await {
                Ok(received) => Ok(received),
                Err(Unposted::NotTaken) => return Outcome::ThroughRmcp,
                Err(Unposted::Failed(error)) => Err(error),
            },
        };
        Outcome::Answer(received.and_then(answer_of))
    }
}

/// The answer a server's message gives: its result as written, or parsed (an error).
fn answer_of(received: Received) -> Result<Answer, RequestError> {
    match received {
        Received::Result { result, .. } => Ok(Answer::Raw(RawResult::new(result))),
        Received::Message(message) => result_of(message).map(Answer::Value),
    }
}

/// The `result` of a JSON-RPC answer, or its `error` as [`RequestError::Server`].
fn result_of(message: Value) -> Result<Value, RequestError> {
    let Value::Object(mut message) = message else {
        return Err(RequestError::Unexpected(
            "an answer that is not an object".into(),
        ));
    };
    if let Some(result) = message.remove("result") {
        return Ok(result);
    }
    let Some(Value::Object(mut error)) = message.remove("error") else {
        return Err(RequestError::Unexpected(
            "an answer with neither `result` nor `error`".into(),
        ));
    };
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
    let text = match error.remove("message") {
        Some(Value::String(text)) => text,
        _ => String::new(),
    };
    Err(RequestError::Server {
        code: i32::try_from(code).unwrap_or(-32603),
        message: text,
        data: error.remove("data"),
    })
}

/// How a `tools/call` is run.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Give up (and send `notifications/cancelled`) after this long; `None` = wait forever.
    pub timeout: Option<Duration>,
    /// Cancelling this token cancels the call (and sends `notifications/cancelled`).
    pub cancel: Option<CancellationToken>,
    /// Receives the server's `notifications/progress` for this call.
    pub progress: Option<ProgressListener>,
    /// The client behind the call: the server's requests and log messages during it go there
    /// (see [`super::relay`]). `None`: only the inbox answers (elicitation).
    pub caller: Option<Arc<dyn CallerRelay>>,
    /// Answers to the server's `input_required` result of the previous round (SEP-2322).
    pub input: Option<InputRound>,
}

/// What a retried request carries after the server answered `input_required` (SEP-2322): the
/// responses to its `inputRequests`, and its `requestState` echoed back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InputRound {
    /// `inputResponses`: one answer per `inputRequests` key.
    pub responses: Map<String, Value>,
    /// `requestState` as the server sent it, if it sent one.
    pub state: Option<String>,
}

impl InputRound {
    /// Puts the answers into a request's params, replacing an earlier round's.
    pub fn apply(&self, params: &mut Value) {
        let Some(params) = params.as_object_mut() else {
            return;
        };
        params.insert(
            "inputResponses".into(),
            Value::Object(self.responses.clone()),
        );
        match &self.state {
            Some(state) => params.insert("requestState".into(), Value::String(state.clone())),
            None => params.remove("requestState"),
        };
    }
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("timeout", &self.timeout)
            .field("cancel", &self.cancel.is_some())
            .field("progress", &self.progress.is_some())
            .field("caller", &self.caller.is_some())
            .field("input", &self.input)
            .finish()
    }
}

/// A tool call's arguments: parsed, or the JSON text of an object as the client wrote it,
/// which goes as it is to a server roster writes requests to itself (stdio, SSE) and is
/// parsed for any other.
#[derive(Debug, Clone)]
pub enum ToolArguments {
    /// Parsed (none: the call carries no `arguments`).
    Parsed(Option<Map<String, Value>>),
    /// The JSON text of an object, as the client wrote it.
    Text(Bytes),
}

impl From<Option<Map<String, Value>>> for ToolArguments {
    fn from(arguments: Option<Map<String, Value>>) -> Self {
        ToolArguments::Parsed(arguments)
    }
}

impl ToolArguments {
    /// The arguments parsed (text that is not a JSON object is an error naming it).
    pub fn parsed(self) -> Result<Option<Map<String, Value>>, serde_json::Error> {
        match self {
            ToolArguments::Parsed(arguments) => Ok(arguments),
            ToolArguments::Text(text) => serde_json::from_slice(&text).map(Some),
        }
    }
}

impl Connection {
    /// Calls a tool by the server's own name; returns the raw `CallToolResult` JSON (or, for
    /// a caller that takes them, an `input_required` result).
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        options: CallOptions,
    ) -> Result<Value, RequestError> {
        let answer = self
            .call_tool_answer(tool, arguments.into(), options)
            .await?;
        answer.into_value()
    }

    /// [`Connection::call_tool`] with the result as the server wrote it, where roster's own
    /// transport read it (see [`super::answer`]), and the arguments as the client wrote them
    /// where roster writes the request itself.
    pub(crate) async fn call_tool_answer(
        &self,
        tool: &str,
        arguments: ToolArguments,
        options: CallOptions,
    ) -> Result<Answer, RequestError> {
        let mut params = json!({"name": tool});
        // The client's text goes in as it is where roster writes the request itself, and is
        // parsed where the request goes through rmcp's service after all.
        let text = match arguments {
            ToolArguments::Text(text) => Some(text),
            arguments => {
                let parsed = arguments.parsed().map_err(|e| {
                    RequestError::Unexpected(format!(
                        "the call's arguments are no JSON object: {e}"
                    ))
                })?;
                if let Some(arguments) = parsed {
                    params["arguments"] = Value::Object(arguments);
                }
                None
            }
        };
        self.interactive_with("tools/call", params, text, options)
            .await
    }

    /// Sends a request the server may answer with `input_required` (`tools/call`,
    /// `prompts/get`, `resources/read`) on behalf of `options.caller`, and returns the final
    /// result JSON. A caller that takes `input_required` results gets them untouched; for any
    /// other roster answers the input requests (the caller, or the inbox for an elicitation)
    /// and retries, at most [`relay::MAX_INPUT_ROUNDS`] times. `options.timeout` bounds each
    /// wait for the server.
    pub async fn interactive(
        &self,
        method: &str,
        params: Value,
        options: CallOptions,
    ) -> Result<Answer, RequestError> {
        self.interactive_with(method, params, None, options).await
    }

    /// [`Connection::interactive`] with `arguments` (JSON text) to go into `params` as written
    /// (see [`Direct::send`]).
    async fn interactive_with(
        &self,
        method: &str,
        mut params: Value,
        arguments: Option<Bytes>,
        options: CallOptions,
    ) -> Result<Answer, RequestError> {
        if let Some(input) = &options.input {
            input.apply(&mut params);
        }
        let caller = options.caller.clone();
        let in_flight = self.shared.in_flight.enter(caller.clone());
        let cancel = options.cancel.clone().unwrap_or_default();
        for _ in 0..=relay::MAX_INPUT_ROUNDS {
            let span = crate::telemetry::ServerRequest::start(&self.server, method, &mut params);
            let answer = self
                .round(
                    method,
                    &mut params,
                    arguments.as_ref(),
                    &options,
                    &in_flight,
                )
                .await;
            let answer = crate::telemetry::ServerRequest::end(span, answer)?;
            let passes_through = caller.as_ref().is_some_and(|c| c.takes_input_required());
            if !answer.is_input_required() || passes_through {
                return Ok(answer);
            }
            self.fulfil(&answer.into_value()?, caller.as_ref(), &cancel)
                .await?
                .apply(&mut params);
        }
        Err(RequestError::Unexpected(format!(
            "{method} still asked for input after {} rounds",
            relay::MAX_INPUT_ROUNDS
        )))
    }

    /// One request of roster's own (no caller to relay to, no span of its own: the caller's
    /// covers it), answered within `timeout`: past rmcp where roster writes requests itself,
    /// so the answer comes as the server wrote it ([`Answer::Raw`]), through rmcp otherwise.
    pub(super) async fn own_request(
        &self,
        method: &str,
        mut params: Value,
        timeout: Duration,
    ) -> Result<Answer, RequestError> {
        let in_flight = self.shared.in_flight.enter(None);
        let options = CallOptions {
            timeout: Some(timeout),
            ..CallOptions::default()
        };
        if crate::telemetry::on() {
            let mut request = json!({"method": method, "params": params});
            crate::telemetry::inject_current(&mut request);
            params = request["params"].take();
        }
        self.round(method, &mut params, None, &options, &in_flight)
            .await
    }

    /// Where roster writes a caller's request itself now: on its own transports always, to a
    /// streamable HTTP server once rmcp's transport sent a request after the handshake (its
    /// session and headers are known); through rmcp's service otherwise.
    fn writer(&self) -> Option<Writer<'_>> {
        match &self.direct {
            DirectPath::Wire(direct) => Some(Writer::Wire(direct)),
            DirectPath::Http(http) if http.ready() => Some(Writer::Http(http)),
            DirectPath::Http(_) => None,
        }
    }

    /// One request and its answer, with progress, timeout and cancellation.
    async fn round(
        &self,
        method: &str,
        params: &mut Value,
        arguments: Option<&Bytes>,
        options: &CallOptions,
        in_flight: &InFlightGuard<'_>,
    ) -> Result<Answer, RequestError> {
        let mut through_rmcp = false;
        loop {
            let sent = self
                .send_round(method, params, arguments, options, through_rmcp)
                .await?;
            let id = sent.id();
            let watched = matches!(sent, Sent::Rmcp(_));
            in_flight.sent_as(id.clone());
            let token = sent.progress_token();
            if let Some(progress) = options.progress.clone() {
                // Early progress for this token is replayed; the wait below keeps the order.
                self.notifications.watch_progress(token.clone(), progress);
            }
            let cancel = options.cancel.clone().unwrap_or_default();
            let timeout = async {
                match options.timeout {
                    Some(t) => tokio::time::sleep(t).await,
                    None => std::future::pending().await,
                }
            };
            let outcome = tokio::select! {
                outcome = sent.answer(&self.raw) => outcome,
                _ = timeout => {
                    self.send_cancelled(&id, "timed out").await;
                    Outcome::Answer(Err(RequestError::Timeout(options.timeout.unwrap_or_default())))
                }
                _ = cancel.cancelled() => {
                    self.send_cancelled(&id, "cancelled by the client").await;
                    Outcome::Answer(Err(RequestError::Cancelled))
                }
                // Answered now rather than when the transport is torn down, and in words: the
                // caller's client gets an error naming the shutdown, not a silent end.
                () = self.stop.cancelled() => Outcome::Answer(Err(
                    if self.closed_by_roster.load(Ordering::Acquire) {
                        RequestError::ShuttingDown(self.server.to_string())
                    } else {
                        RequestError::Closed
                    },
                )),
            };
            self.awaited_notifications_handled().await;
            self.notifications.unwatch_progress(&token);
            if watched {
                // A request cut short through rmcp leaves its watch: dropped here.
                self.raw.take(&id);
            }
            match outcome {
                Outcome::Answer(answer) => return answer,
                Outcome::ThroughRmcp => through_rmcp = true,
            }
        }
    }

    /// Sends one round of a caller's request: past rmcp where roster writes requests itself
    /// ([`Writer`]), through rmcp's service otherwise (or when `through_rmcp`).
    async fn send_round(
        &self,
        method: &str,
        params: &mut Value,
        arguments: Option<&Bytes>,
        options: &CallOptions,
        through_rmcp: bool,
    ) -> Result<Sent, RequestError> {
        let writer = match self.writer() {
            Some(writer) if !through_rmcp => writer,
            _ => {
                return self
                    .send_through_rmcp(method, params, arguments, options)
                    .await;
            }
        };
        let id = match writer {
            Writer::Wire(direct) => direct.next_id(),
            Writer::Http(http) => http.next_id(),
        };
        if let Some(params) = params.as_object_mut() {
            let meta = params
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if !meta.is_object() {
                *meta = Value::Object(Map::new());
            }
            if let Value::Object(meta) = meta {
                // The request's own id is unique among the requests in flight: its token too.
                meta.insert("progressToken".to_owned(), Value::from(id));
                if !self.negotiated.legacy
                    && let Value::Object(extra) = self.request_meta(options)
                {
                    meta.extend(extra);
                }
            }
        }
        let encode = |e: WireError| match e {
            WireError::Closed => RequestError::Closed,
            WireError::Encode(e) => RequestError::Unexpected(e.to_string()),
        };
        Ok(match writer {
            Writer::Wire(direct) => {
                let call = direct.send(id, method, params, arguments).await;
                Sent::Direct(call.map_err(encode)?)
            }
            Writer::Http(http) => {
                let body = DirectRequest::new(id, method, params)
                    .line(arguments)
                    .map_err(encode)?;
                let mut headers = crate::telemetry::trace_headers_of_params(params);
                if !self.negotiated.legacy {
                    let version = &self.negotiated.protocol_version;
                    headers.extend(http.era_headers(version, method, params, arguments));
                }
                Sent::Http(id, http.post(id, body, headers))
            }
        })
    }

    /// Sends one round through rmcp's service (with arguments given as text parsed into its
    /// params).
    async fn send_through_rmcp(
        &self,
        method: &str,
        params: &Value,
        arguments: Option<&Bytes>,
        options: &CallOptions,
    ) -> Result<Sent, RequestError> {
        let mut request = json!({"method": method, "params": params});
        if let Some(arguments) = arguments {
            let parsed: Value = serde_json::from_slice(arguments).map_err(|e| {
                RequestError::Unexpected(format!("the call's arguments are no JSON object: {e}"))
            })?;
            request["params"]["arguments"] = parsed;
        }
        let request = client_request(request)?;
        let mut request_options = rmcp::service::PeerRequestOptions::no_options();
        if !self.negotiated.legacy {
            let meta = serde_json::from_value(self.request_meta(options)).unwrap_or_default();
            request_options = request_options.with_meta(meta);
        }
        let handle = self
            .peer
            .send_cancellable_request(request, request_options)
            .await?;
        Ok(Sent::Rmcp(Box::new(handle)))
    }

    /// Waits until the notifications a result waits for ([`super::event::AWAITED_BY_RESULTS`])
    /// that arrived before a call's answer are handled. Over streamable HTTP
    /// (rmcp's transport, uncounted) it only lets the handlers already spawned run first.
    async fn awaited_notifications_handled(&self) {
        // Handlers are quick; the bound only keeps a miscount from stalling a call.
        const AT_MOST: Duration = Duration::from_millis(500);
        let seen = self.raw.awaited_seen();
        let mut handled = self.shared.awaited_handled.subscribe();
        if seen == 0 {
            tokio::task::yield_now().await;
            return;
        }
        let _ = tokio::time::timeout(AT_MOST, handled.wait_for(|h| *h >= seen)).await;
    }

    /// The `_meta` a 2026-07-28 server gets with a caller's request: the protocol version and
    /// roster's `clientInfo` (every request of that era carries them), the client capabilities
    /// roster can relay for this caller, and the log level it asked for.
    fn request_meta(&self, options: &CallOptions) -> Value {
        let caller = options.caller.as_ref();
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": self.negotiated.protocol_version,
            "io.modelcontextprotocol/clientInfo": super::client_side::implementation(),
            "io.modelcontextprotocol/clientCapabilities": self.shared.declared_for(caller),
        });
        if let Some(level) = caller.and_then(|c| c.log_level()) {
            meta["io.modelcontextprotocol/logLevel"] = json!(level);
        }
        meta
    }

    /// Answers every input request of an `input_required` result for a caller that does not
    /// take them itself.
    async fn fulfil(
        &self,
        answer: &Value,
        caller: Option<&Arc<dyn CallerRelay>>,
        cancel: &CancellationToken,
    ) -> Result<InputRound, RequestError> {
        let mut responses = Map::new();
        let requests = answer.get("inputRequests").and_then(Value::as_object);
        for (key, request) in requests.into_iter().flatten() {
            let method = request.get("method").and_then(Value::as_str).unwrap_or("");
            let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
            let error = match self
                .shared
                .answer(caller.cloned(), method, params, cancel)
                .await
            {
                Ok(result) => {
                    responses.insert(key.clone(), result);
                    continue;
                }
                Err(Unanswered::Refused(reason)) => relay::missing_capability(method, &reason),
                Err(Unanswered::Failed(error)) => error,
            };
            return Err(RequestError::Input {
                method: method.to_owned(),
                code: error.code.0,
                message: error.message.into_owned(),
                data: error.data,
            });
        }
        Ok(InputRound {
            responses,
            state: answer
                .get("requestState")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }

    async fn send_cancelled(&self, id: &RequestId, reason: &str) {
        let params = CancelledNotificationParam::new(Some(id.clone()), Some(reason.to_owned()));
        if let Err(error) = self.peer.notify_cancelled(params).await {
            tracing::debug!(server = %self.server, %error, "cannot send notifications/cancelled");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_replaces_the_answers_of_the_round_before() {
        let mut params = json!({"name": "t", "requestState": "old", "inputResponses": {"x": 1}});
        let mut responses = Map::new();
        responses.insert("k".into(), json!({"action": "accept"}));
        InputRound {
            responses,
            state: None,
        }
        .apply(&mut params);
        assert_eq!(
            params,
            json!({"name": "t", "inputResponses": {"k": {"action": "accept"}}})
        );
    }
}
