//! [`Backend`] for the runtime's [`Roster`]: the gateway's view of the live registry.

use crate::sync::lock;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, CallToolResult, ErrorCode, InputRequiredResult, JsonObject, Prompt, Resource,
    ResourceTemplate, Tool,
};
use roster_core::CallRouteError;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Backend, BackendSession, CallError, CallRelay, ResourceHold};
use crate::config::TaskSupport;
use crate::inbox::{Attribution, HeldRequest, current_client};
use crate::servers::{
    CallOptions, CallerRelay, InputRound, LogLevel, OfferingsGeneration, RequestError,
    ResourceUpdate, RouteError, ServerLog, relay,
};
use crate::{Roster, Session, ToolEntry};
use tokio_util::sync::CancellationToken;

/// A [`Roster`] serving as the gateway's backend.
pub struct RosterBackend {
    roster: Roster,
    /// The tools in rmcp's model, with the registry version they were converted at.
    tools: Mutex<Option<(u64, Arc<Vec<Tool>>)>>,
    /// Where a tool call says whose it is while it runs, so the inbox records what its server
    /// sends meanwhile as that client's.
    attribution: Option<Attribution>,
}

impl RosterBackend {
    /// Serves `roster`; a turn waits for listings as long as the
    /// roster's turn wait allows, then is answered from what is known.
    pub fn new(roster: Roster) -> Self {
        Self {
            roster,
            tools: Mutex::new(None),
            attribution: None,
        }
    }

    /// Tool calls hold `attribution` for their server and client identity while they run.
    pub fn with_attribution(mut self, attribution: Attribution) -> Self {
        self.attribution = Some(attribution);
        self
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

    /// The roster behind this backend.
    pub fn roster(&self) -> &Roster {
        &self.roster
    }
}

/// The server's tool definition in rmcp's model under its exposed name. The input schema is
/// shared with the registry's copy, not duplicated; the rest goes through rmcp's own reading.
fn to_rmcp(entry: ToolEntry) -> Option<Tool> {
    let ToolEntry {
        exposed_name,
        mut tool,
        ..
    } = entry;
    let schema = std::mem::take(&mut tool.input_schema);
    tool.name = exposed_name;
    let value = serde_json::to_value(&tool).ok()?;
    match serde_json::from_value::<Tool>(value) {
        Ok(mut served) => {
            served.input_schema = schema;
            Some(served)
        }
        Err(e) => {
            tracing::warn!("tool {:?} cannot be served: {e}", tool.name);
            None
        }
    }
}

/// A server's item in rmcp's model; one that does not read is left out (and logged).
fn typed<T: serde::de::DeserializeOwned>(kind: &str, item: Value) -> Option<T> {
    match serde_json::from_value::<T>(item.clone()) {
        Ok(typed) => Some(typed),
        Err(e) => {
            tracing::warn!(%item, "a server's {kind} cannot be served: {e}");
            None
        }
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

fn route_error(error: RouteError) -> ErrorData {
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

impl Backend for RosterBackend {
    fn prompts(&self) -> Vec<Prompt> {
        self.roster
            .prompts()
            .iter()
            .filter_map(|entry| typed("prompt", entry.exposed_prompt()))
            .collect()
    }

    fn resources(&self) -> Vec<Resource> {
        self.roster
            .resources()
            .into_iter()
            .filter_map(|(_, item)| typed("resource", item))
            .collect()
    }

    fn resource_templates(&self) -> Vec<ResourceTemplate> {
        self.roster
            .resource_templates()
            .into_iter()
            .filter_map(|(_, item)| typed("resource template", item))
            .collect()
    }

    fn forward<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> BoxFuture<'a, Result<Value, ErrorData>> {
        Box::pin(async move {
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
        })
    }

    fn forward_with<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        relay: CallRelay,
    ) -> BoxFuture<'a, Result<Value, ErrorData>> {
        Box::pin(async move {
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
        })
    }

    fn set_log_level(&self, level: LogLevel) -> BoxFuture<'_, ()> {
        Box::pin(self.roster.set_log_level(level))
    }

    fn server_logs(&self) -> Option<tokio::sync::broadcast::Receiver<ServerLog>> {
        Some(self.roster.server_logs())
    }

    fn offerings_changed(&self) -> Option<tokio::sync::watch::Receiver<OfferingsGeneration>> {
        Some(self.roster.offerings_changed())
    }

    fn watch_resource<'a>(
        &'a self,
        uri: &'a str,
    ) -> BoxFuture<'a, Result<ResourceHold, ErrorData>> {
        Box::pin(async move {
            let watch = self.roster.watch_resource(uri).await.map_err(route_error)?;
            Ok(Box::new(watch) as ResourceHold)
        })
    }

    fn can_watch_resource(&self, uri: &str) -> bool {
        self.roster.can_watch_resource(uri)
    }

    fn takes_resource_subscriptions(&self) -> bool {
        self.roster.takes_resource_subscriptions()
    }

    fn resource_updates(&self) -> Option<tokio::sync::broadcast::Receiver<ResourceUpdate>> {
        Some(self.roster.resource_updates())
    }

    fn task_support(&self, exposed: &str) -> Option<TaskSupport> {
        self.roster.task_support(exposed)
    }

    fn call_round<'a>(
        &'a self,
        exposed: &'a str,
        arguments: Option<JsonObject>,
        input: Option<InputRound>,
        caller: Arc<dyn CallerRelay>,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<Value, CallError>> {
        Box::pin(async move {
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
        })
    }

    fn route_call(&self, name: &str) -> Result<String, CallRouteError> {
        self.roster.route_call(name)
    }

    fn tools(&self) -> Arc<Vec<Tool>> {
        let mut converted = lock(&self.tools);
        let known = converted.as_ref().map(|(version, _)| *version);
        let (version, changed) = self.roster.tools_since(known);
        if let Some(entries) = changed {
            let tools = entries.into_iter().filter_map(to_rmcp).collect();
            *converted = Some((version, Arc::new(tools)));
        }
        match converted.as_ref() {
            Some((_, tools)) => tools.clone(),
            None => Arc::default(),
        }
    }

    fn call<'a>(
        &'a self,
        exposed: &'a str,
        arguments: Option<JsonObject>,
        relay: CallRelay,
    ) -> BoxFuture<'a, Result<CallToolResponse, CallError>> {
        Box::pin(async move {
            let (options, forwarder) = call_options(relay);
            let held = self.hold(exposed);
            let outcome = self.roster.call_with(exposed, arguments, options).await;
            drop(held);
            finish(forwarder).await;
            let mut value = outcome.map_err(call_error)?;
            let unreadable = |e: serde_json::Error| CallError::ServerDown {
                server: self.server_of(exposed),
                reason: format!("it sent a tool result roster cannot read: {e}"),
            };
            if relay::is_input_required(&value) {
                let result: InputRequiredResult =
                    serde_json::from_value(value).map_err(unreadable)?;
                return Ok(CallToolResponse::InputRequired(result));
            }
            complete_when_untyped(&mut value);
            let result: CallToolResult = serde_json::from_value(value).map_err(unreadable)?;
            Ok(CallToolResponse::Complete(result))
        })
    }

    fn open_session(&self) -> Box<dyn BackendSession> {
        Box::new(RosterSession {
            session: self.roster.subscribe_session(),
        })
    }

    fn refresh(&self) -> usize {
        self.roster.refresh();
        self.roster.status().len()
    }

    fn status(&self) -> Value {
        self.roster.servers_json()
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.roster.shutdown_and_wait())
    }
}

impl RosterBackend {
    fn server_of(&self, exposed: &str) -> String {
        self.roster
            .with_registry(|r| {
                r.route_call(exposed)
                    .map(|route| route.server.to_owned())
                    .ok()
            })
            .unwrap_or_default()
    }
}

/// The runtime's options for a relayed request; the progress forwarder (if any) must be
/// [`finish`]ed once the request is done, so the last updates go out before the result.
fn call_options(relay: CallRelay) -> (CallOptions, Option<tokio::task::JoinHandle<()>>) {
    let mut options = CallOptions {
        cancel: Some(relay.cancel.clone()),
        caller: relay.caller,
        input: relay.input,
        ..CallOptions::default()
    };
    let Some(progress) = relay.progress else {
        return (options, None);
    };
    // The listener is synchronous and runs on the connection's reader; a channel hands each
    // update to a task so nothing waits on the reader (and order holds).
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    options.progress = Some(Arc::new(move |params: &Value| {
        let _ = tx.send(params.clone());
    }));
    let forwarder = tokio::spawn(async move {
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
    (options, Some(forwarder))
}

/// Waits for a progress forwarder; its sender went with the options, so it ends.
async fn finish(forwarder: Option<tokio::task::JoinHandle<()>>) {
    if let Some(forwarder) = forwarder {
        let _ = forwarder.await;
    }
}

fn call_error(error: crate::CallError) -> CallError {
    match error {
        crate::CallError::UnknownTool(name) => CallError::UnknownTool(name),
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

struct RosterSession {
    session: Session,
}

impl BackendSession for RosterSession {
    /// Lists what is due (bounded by the roster's turn wait; a listing that outlasts it goes
    /// on in the background and its delta waits for this session's next turn), then drains.
    fn begin_turn(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move { self.session.begin_turn().await.note })
    }

    fn changed(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.session.delta_arrived())
    }
}
