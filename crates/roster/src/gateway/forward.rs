//! Requests the gateway forwards to a server: tool calls (in one go, or round by round for a
//! task), `prompts/get`, `resources/read` and `completion/complete`. Each holds the inbox
//! attribution of its server for the client behind it while it runs, relays progress, and
//! turns the runtime's errors into what the client should get.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult, ErrorCode, InputRequiredResult, JsonObject};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{CallError, CallRelay, Gateway, ProgressRelay, ToolAnswer};
use crate::inbox::{HeldRequest, current_client};
use crate::servers::answer::RawResult;
use crate::servers::{
    Answer, CallOptions, CallerRelay, InputRound, RequestError, RouteError, ToolArguments,
};
use crate::sync::lock;

impl Gateway {
    /// Calls a server's tool by its exposed name with the client's arguments. The result is
    /// `input_required` only for a caller that takes such results itself.
    pub(crate) async fn call(
        &self,
        exposed: &str,
        arguments: ToolArguments,
        relay: CallRelay,
    ) -> Result<ToolAnswer, CallError> {
        let (options, forwarder) = call_options(relay);
        let held = self.hold(exposed);
        let outcome = self.roster.call_answer(exposed, arguments, options).await;
        drop(held);
        finish(forwarder).await;
        let answer = outcome.map_err(call_error)?;
        let unreadable = |e: serde_json::Error| self.unreadable(exposed, e);
        if answer.is_input_required() {
            let value = answer
                .into_value()
                .map_err(|e| self.unreadable(exposed, e))?;
            let result: InputRequiredResult = serde_json::from_value(value).map_err(unreadable)?;
            return Ok(ToolAnswer::Typed(CallToolResponse::InputRequired(result)));
        }
        match answer {
            Answer::Raw(raw) => Ok(ToolAnswer::Raw(raw)),
            Answer::Value(value) => self
                .complete_result(exposed, value)
                .map(|result| ToolAnswer::Typed(CallToolResponse::Complete(result))),
        }
    }

    /// A raw tool result ([`ToolAnswer::Raw`]) of `exposed` parsed.
    pub(crate) fn typed_result(
        &self,
        exposed: &str,
        raw: RawResult,
    ) -> Result<CallToolResult, CallError> {
        let value = Answer::Raw(raw)
            .into_value()
            .map_err(|e| self.unreadable(exposed, e))?;
        self.complete_result(exposed, value)
    }

    fn complete_result(
        &self,
        exposed: &str,
        mut value: Value,
    ) -> Result<CallToolResult, CallError> {
        complete_when_untyped(&mut value);
        serde_json::from_value(value).map_err(|e| self.unreadable(exposed, e))
    }

    fn unreadable(&self, exposed: &str, error: impl std::fmt::Display) -> CallError {
        CallError::ServerDown {
            server: self.server_of(exposed),
            reason: format!("it sent a tool result roster cannot read: {error}"),
        }
    }

    /// One round of a server tool's call for `caller` with the answer as the server gave it: a
    /// tool result or an `input_required` result (SEP-2322), which the next round answers with
    /// `input`. Cancelling `cancel` cancels the call at the server.
    pub(crate) async fn call_round(
        &self,
        exposed: &str,
        arguments: Option<JsonObject>,
        input: Option<InputRound>,
        caller: Arc<dyn CallerRelay>,
        cancel: CancellationToken,
    ) -> Result<Value, CallError> {
        let _held = self.hold(exposed);
        let options = CallOptions {
            cancel: Some(cancel),
            input,
            caller: Some(caller),
            ..CallOptions::default()
        };
        let outcome = self.roster.call_with(exposed, arguments, options).await;
        let mut answer = outcome.map_err(call_error)?;
        complete_when_untyped(&mut answer);
        Ok(answer)
    }

    /// Forwards `prompts/get`, `resources/read` or `completion/complete` to the owning server
    /// (with its own name); the answer is the server's result, or the JSON-RPC error the
    /// client should get.
    pub(crate) async fn forward(&self, method: &str, params: Value) -> Result<Value, ErrorData> {
        let text = |key: &str| {
            params
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let outcome = match method {
            "prompts/get" => {
                let arguments = params.get("arguments").and_then(Value::as_object).cloned();
                self.roster.get_prompt(&text("name"), arguments).await
            }
            "resources/read" => self.roster.read_resource(&text("uri")).await,
            "completion/complete" => self.roster.complete(params.clone()).await,
            other => {
                return Err(ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    format!("roster does not forward {other}"),
                    None,
                ));
            }
        };
        let mut answer = outcome.map_err(route_error)?;
        complete_when_untyped(&mut answer);
        Ok(answer)
    }

    /// [`Gateway::forward`] of `prompts/get` or `resources/read` for a caller, whose server
    /// may ask it for input (see [`crate::servers::relay`]).
    pub(crate) async fn forward_with(
        &self,
        method: &str,
        params: Value,
        relay: CallRelay,
    ) -> Result<Value, ErrorData> {
        let (options, forwarder) = call_options(relay);
        let _held = self.hold_forwarded(method, &params);
        let outcome = match method {
            "prompts/get" => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or("");
                let arguments = params.get("arguments").and_then(Value::as_object).cloned();
                self.roster.get_prompt_with(name, arguments, options).await
            }
            "resources/read" => {
                let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
                self.roster.read_resource_with(uri, options).await
            }
            _ => {
                drop(options);
                return self.forward(method, params).await;
            }
        };
        finish(forwarder).await;
        let mut answer = outcome.map_err(route_error)?;
        complete_when_untyped(&mut answer);
        Ok(answer)
    }

    /// [`hold`](Self::hold) for a forwarded `prompts/get` or `resources/read`, by the server
    /// that offers the prompt or resource.
    fn hold_forwarded(&self, method: &str, params: &Value) -> Option<HeldRequest> {
        let attribution = self.attribution.as_ref()?;
        let key = |k: &str| params.get(k).and_then(Value::as_str);
        let server = match method {
            "prompts/get" => {
                let name = key("name")?;
                self.roster
                    .prompts()
                    .into_iter()
                    .find(|p| p.exposed_name == name)
                    .map(|p| p.server)
            }
            "resources/read" => {
                let uri = key("uri")?;
                self.roster
                    .resources()
                    .into_iter()
                    .find(|(_, r)| r.get("uri").and_then(Value::as_str) == Some(uri))
                    .map(|(server, _)| server)
            }
            _ => None,
        }?;
        let who = current_client().unwrap_or_default();
        Some(attribution.hold(&server, &who))
    }

    /// Marks a call of `exposed` as in flight for the client identity the current work runs
    /// for, until the returned guard is dropped.
    fn hold(&self, exposed: &str) -> Option<HeldRequest> {
        let attribution = self.attribution.as_ref()?;
        let who = current_client().unwrap_or_default();
        Some(attribution.hold(&self.server_of(exposed), &who))
    }

    fn server_of(&self, exposed: &str) -> String {
        self.roster.server_of(exposed)
    }
}

/// An initialize-era server's result has no `resultType`; the spec reads that as `complete`,
/// and a 2026-07-28 client must be told so (rmcp strips it again for initialize-era clients).
fn complete_when_untyped(result: &mut Value) {
    if let Some(object) = result.as_object_mut() {
        object
            .entry("resultType")
            .or_insert_with(|| Value::String("complete".to_owned()));
    }
}

/// The JSON-RPC error a client gets for a request the runtime could not route or forward.
pub(crate) fn route_error(error: RouteError) -> ErrorData {
    match error {
        RouteError::UnknownPrompt(_) | RouteError::UnknownReference(_) => {
            ErrorData::invalid_params(error.to_string(), None)
        }
        RouteError::UnknownResource(ref uri) => {
            let data = json!({ "uri": uri });
            ErrorData::resource_not_found(error.to_string(), Some(data))
        }
        RouteError::NotSubscribable {
            ref server,
            ref uri,
        } => {
            let data = json!({ "uri": uri, "server": server });
            ErrorData::invalid_params(error.to_string(), Some(data))
        }
        RouteError::Request { source, server } => match source.into_jsonrpc() {
            Ok((code, message, data)) => ErrorData::new(ErrorCode(code), message, data),
            Err(other) => {
                let error = RouteError::Request {
                    server,
                    source: Box::new(other),
                };
                ErrorData::internal_error(error.to_string(), None)
            }
        },
        other => ErrorData::internal_error(other.to_string(), None),
    }
}

/// The runtime's options for a relayed request; the progress forwarder (if any) must be
/// [`finish`]ed once the request is done, so the last updates go out before the result.
fn call_options(relay: CallRelay) -> (CallOptions, Forwarder) {
    let mut options = CallOptions {
        cancel: Some(relay.cancel.clone()),
        caller: relay.caller,
        input: relay.input,
        ..CallOptions::default()
    };
    let forwarder = Forwarder::default();
    let Some(progress) = relay.progress else {
        return (options, forwarder);
    };
    // The listener is synchronous and runs on the connection's reader; a channel hands each
    // update to a task so nothing waits on the reader (and order holds). Most calls send no
    // progress: the task starts with the first update. A client that reads slower than the
    // server reports misses updates past the backlog, never more than that is held.
    let slot = forwarder.0.clone();
    options.progress = Some(Arc::new(move |params: &Value| {
        let mut slot = lock(&slot);
        let (tx, _) = slot.get_or_insert_with(|| forward_progress(progress.clone()));
        if tx.try_send(params.clone()).is_err() {
            tracing::debug!(
                "a progress update was dropped: the client reads slower than the server reports"
            );
        }
    }));
    (options, forwarder)
}

/// The most progress updates of one call waiting for its client.
const PROGRESS_BACKLOG: usize = 256;

/// The task that sends a call's progress updates to its client, in order.
fn forward_progress(progress: ProgressRelay) -> (mpsc::Sender<Value>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Value>(PROGRESS_BACKLOG);
    let task = tokio::spawn(async move {
        while let Some(params) = rx.recv().await {
            let Some(value) = params.get("progress").and_then(Value::as_f64) else {
                continue;
            };
            let total = params.get("total").and_then(Value::as_f64);
            let message = params
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned);
            progress.send(value, total, message).await;
        }
    });
    (tx, task)
}

/// A call's progress forwarder, once its first update came.
type ForwarderSlot = Option<(mpsc::Sender<Value>, tokio::task::JoinHandle<()>)>;

#[derive(Default)]
struct Forwarder(Arc<std::sync::Mutex<ForwarderSlot>>);

/// Waits until the progress forwarder (if one started) has sent every update.
async fn finish(forwarder: Forwarder) {
    let started = lock(&forwarder.0).take();
    if let Some((tx, task)) = started {
        // The sender goes: the task ends once it has sent what it holds.
        drop(tx);
        let _ = task.await;
    }
}

fn call_error(error: crate::CallError) -> CallError {
    match error {
        crate::CallError::UnknownTool(name) => CallError::UnknownTool(name),
        crate::CallError::Withheld(why) => CallError::Withheld(why),
        crate::CallError::AmbiguousTool(error) => CallError::Server {
            code: ErrorCode::INVALID_PARAMS.0,
            message: error.to_string(),
            data: None,
        },
        crate::CallError::Unavailable { server, .. } => CallError::ServerDown {
            server,
            reason: "it is not connected right now (starting, restarting or disconnected)"
                .to_owned(),
        },
        crate::CallError::Request { server, source, .. } => match source.into_jsonrpc() {
            Ok((code, message, data)) => CallError::Server {
                code,
                message,
                data,
            },
            Err(RequestError::Cancelled) => CallError::Cancelled,
            Err(other) => CallError::ServerDown {
                server,
                reason: other.to_string(),
            },
        },
    }
}
