//! The MCP client behind one request, as the servers see it ([`CallerRelay`]).
//!
//! An initialize-era client is sent each server request (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`) on its own request's response stream, and the server's
//! log messages at the level its session asked for (`logging/setLevel`).
//!
//! A 2026-07-28 client cannot be sent requests. A 2026-07-28 server's `input_required` result
//! goes to it untouched; an initialize-era server's request mid-call **pauses** the call: the
//! client gets an `input_required` result whose `requestState` names the paused call, and its
//! retry with `inputResponses` answers the server and resumes the call. A paused call is held
//! for [`PAUSED_FOR`], at most [`MAX_PAUSED`] at a time; a `requestState` naming none is a
//! `-32602` error that says so.

use crate::sync::lock;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use rmcp::model::{
    CustomRequest, ErrorCode, GetExtensions, InputRequest, InputRequests, InputRequiredResult,
    RequestId, ServerNotification, ServerRequest,
};
use rmcp::service::{OriginatingRequestId, Peer, RequestContext, ServiceError};
use rmcp::{ErrorData, RoleServer};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{CallRelay, Gateway, Outcome, ProgressRelay};
use crate::Session;
use crate::servers::{CallerRelay, InputRound, LogLevel};

/// How long a paused call waits for its client's retry.
pub const PAUSED_FOR: Duration = crate::servers::ELICITATION_WAIT;

/// How many paused calls the gateway holds at once.
pub const MAX_PAUSED: usize = 64;

/// Every `requestState` roster mints starts so; a server's own state passes through untouched.
const PAUSED_STATE: &str = "roster-paused:";

/// A server request waiting for a 2026-07-28 client's answer.
pub(crate) struct Ask {
    method: String,
    params: Value,
    answer: oneshot::Sender<Result<Value, ErrorData>>,
}

/// The client behind one request.
pub(crate) struct ClientCaller {
    peer: Peer<RoleServer>,
    /// The client's request: server requests ride its response stream.
    origin: RequestId,
    capabilities: Value,
    log_level: Option<LogLevel>,
    /// Set for a 2026-07-28 client: server requests wait for its retry.
    asks: Option<mpsc::UnboundedSender<Ask>>,
    /// Log messages go out in order through one task, flushed before the result.
    logs: Mutex<Option<mpsc::UnboundedSender<Value>>>,
    log_task: Mutex<Option<JoinHandle<()>>>,
}

impl ClientCaller {
    /// The caller of an initialize-era request: server requests are sent to it.
    pub(crate) fn initialize_era(
        peer: Peer<RoleServer>,
        origin: RequestId,
        capabilities: Value,
        log_level: Option<LogLevel>,
    ) -> Arc<Self> {
        Arc::new(Self::new(peer, origin, capabilities, log_level, None))
    }

    /// The caller of a 2026-07-28 request, and the receiver its server requests arrive on.
    pub(crate) fn modern(
        peer: Peer<RoleServer>,
        origin: RequestId,
        capabilities: Value,
        log_level: Option<LogLevel>,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<Ask>) {
        let (asks, receiver) = mpsc::unbounded_channel();
        let caller = Self::new(peer, origin, capabilities, log_level, Some(asks));
        (Arc::new(caller), receiver)
    }

    fn new(
        peer: Peer<RoleServer>,
        origin: RequestId,
        capabilities: Value,
        log_level: Option<LogLevel>,
        asks: Option<mpsc::UnboundedSender<Ask>>,
    ) -> Self {
        let (logs, log_task) = match log_level {
            Some(_) => {
                let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
                let peer = peer.clone();
                let task = tokio::spawn(async move {
                    while let Some(params) = rx.recv().await {
                        let message = json!({"method": "notifications/message", "params": params});
                        let Ok(notification) =
                            serde_json::from_value::<ServerNotification>(message)
                        else {
                            continue;
                        };
                        if let Err(error) = peer.send_notification(notification).await {
                            tracing::debug!(%error, "log message not delivered");
                        }
                    }
                });
                (Some(tx), Some(task))
            }
            None => (None, None),
        };
        Self {
            peer,
            origin,
            capabilities,
            log_level,
            asks,
            logs: Mutex::new(logs),
            log_task: Mutex::new(log_task),
        }
    }

    /// Waits until the log messages relayed so far are sent (the result must come after them).
    pub(crate) async fn flush(&self) {
        drop(lock(&self.logs).take());
        let task = lock(&self.log_task).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

/// Aborts a task when the future awaiting it is dropped (the call was cancelled).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl CallerRelay for ClientCaller {
    fn capabilities(&self) -> Value {
        self.capabilities.clone()
    }

    fn ask(&self, method: &str, params: Value) -> BoxFuture<'static, Result<Value, ErrorData>> {
        let method = method.to_owned();
        if let Some(asks) = &self.asks {
            let (answer, answered) = oneshot::channel();
            let sent = asks.send(Ask {
                method: method.clone(),
                params,
                answer,
            });
            return Box::pin(async move {
                let gone = || {
                    ErrorData::internal_error(
                        format!("the client did not answer {method}: its call ended or expired"),
                        None,
                    )
                };
                sent.map_err(|_| gone())?;
                answered.await.unwrap_or_else(|_| Err(gone()))
            });
        }
        let peer = self.peer.clone();
        let origin = self.origin.clone();
        Box::pin(async move {
            let mut request =
                ServerRequest::CustomRequest(CustomRequest::new(method.clone(), Some(params)));
            request
                .extensions_mut()
                .insert(OriginatingRequestId(origin));
            // A task of its own: inside a server connection's handler rmcp would tie the request
            // to that connection's request instead of the client's.
            let task = tokio::spawn(async move { peer.send_request(request).await });
            let _abort = AbortOnDrop(task.abort_handle());
            match task.await {
                Ok(Ok(result)) => serde_json::to_value(result)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
                Ok(Err(ServiceError::McpError(error))) => Err(error),
                Ok(Err(other)) => Err(ErrorData::internal_error(
                    format!("the client did not answer {method}: {other}"),
                    None,
                )),
                Err(error) => Err(ErrorData::internal_error(error.to_string(), None)),
            }
        })
    }

    fn takes_input_required(&self) -> bool {
        self.asks.is_some()
    }

    fn log_level(&self) -> Option<LogLevel> {
        self.log_level
    }

    fn log(&self, params: Value) {
        if let Some(logs) = lock(&self.logs).as_ref() {
            let _ = logs.send(params);
        }
    }
}

/// What a request of a 2026-07-28 client produced: its outcome, or an `input_required` result
/// naming the paused call.
pub(crate) enum Step<T> {
    /// The request finished.
    Done(T),
    /// A server asked something; the client answers by retrying with this `requestState`.
    InputRequired(InputRequiredResult),
}

/// A request's work: polled by the request's own task while the request waits for it (no task
/// hand-off on the common path), moved to a task of its own when it pauses, to outlive the pause.
/// Either way a panic in it ends as an error naming it, not as a lost request.
enum Work<T> {
    Here(BoxFuture<'static, Result<T, String>>),
    Spawned(JoinHandle<Result<T, String>>),
}

impl<T: Send + 'static> Work<T> {
    fn new(work: impl Future<Output = T> + Send + 'static) -> Self {
        let work = crate::telemetry::carried(work);
        Work::Here(Box::pin(
            std::panic::AssertUnwindSafe(work)
                .catch_unwind()
                .map(|outcome| outcome.map_err(|panic| panic_text(panic.as_ref()))),
        ))
    }

    /// The same work on a task of its own.
    fn detach(self) -> Self {
        match self {
            Work::Here(work) => Work::Spawned(tokio::spawn(work)),
            spawned => spawned,
        }
    }
}

impl<T> Future for Work<T> {
    type Output = Result<T, String>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.get_mut() {
            Work::Here(work) => work.as_mut().poll(cx),
            Work::Spawned(task) => std::pin::Pin::new(task)
                .poll(cx)
                .map(|joined| joined.unwrap_or_else(|e| Err(e.to_string()))),
        }
    }
}

/// What a panic said, for the error that replaces its request's answer.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned());
    format!("roster panicked while handling it: {what}")
}

/// A 2026-07-28 client's request; its work outlives a pause (see [`Work`]).
pub(crate) struct Running<T> {
    task: Work<T>,
    asks: mpsc::UnboundedReceiver<Ask>,
    waiting: BTreeMap<String, Ask>,
    asked: usize,
    cancel: CancellationToken,
    caller: Arc<ClientCaller>,
}

impl<T: Send + 'static> Running<T> {
    /// Starts `work` for `caller`; `cancel` is the token `work` stops on.
    pub(crate) fn start(
        caller: Arc<ClientCaller>,
        asks: mpsc::UnboundedReceiver<Ask>,
        cancel: CancellationToken,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Self {
        Self {
            task: Work::new(work),
            asks,
            waiting: BTreeMap::new(),
            asked: 0,
            cancel,
            caller,
        }
    }

    fn take(&mut self, ask: Ask) {
        self.asked += 1;
        let key = format!("{}-{}", ask.method.replace('/', "-"), self.asked);
        self.waiting.insert(key, ask);
    }
}

struct PausedCall<T> {
    owner: Option<String>,
    target: String,
    running: Running<T>,
}

/// The calls paused on a server request, by the `requestState` their client got.
pub(crate) struct Paused<T> {
    calls: Mutex<HashMap<String, PausedCall<T>>>,
}

impl<T: Send + 'static> Paused<T> {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            calls: Mutex::new(HashMap::new()),
        })
    }

    /// Runs the request until it finishes or a server asks something (then it pauses).
    /// `owner` (the client's identity) and `target` (method and name) must match on resume.
    pub(crate) async fn drive(
        self: &Arc<Self>,
        mut running: Running<T>,
        owner: Option<String>,
        target: String,
        client_cancel: &CancellationToken,
    ) -> Result<Step<T>, ErrorData> {
        let mut cancelled = false;
        loop {
            if !running.waiting.is_empty() {
                return self.pause(running, owner, target);
            }
            tokio::select! {
                outcome = &mut running.task => {
                    running.caller.flush().await;
                    return outcome.map(Step::Done).map_err(|e| {
                        ErrorData::internal_error(format!("the request failed: {e}"), None)
                    });
                }
                Some(ask) = running.asks.recv() => {
                    running.take(ask);
                    // Everything the server asked by now goes out in one result.
                    while let Ok(ask) = running.asks.try_recv() {
                        running.take(ask);
                    }
                }
                // Once: then the work's own end (it stops on the cancel) is what ends the loop.
                () = client_cancel.cancelled(), if !cancelled => {
                    cancelled = true;
                    running.cancel.cancel();
                }
            }
        }
    }

    /// Resumes the call a roster `requestState` names with the client's answers. `None` when
    /// the state is not roster's (a server's own, to pass on).
    pub(crate) async fn resume(
        self: &Arc<Self>,
        state: &str,
        owner: Option<String>,
        target: String,
        responses: Option<&Map<String, Value>>,
        client_cancel: &CancellationToken,
    ) -> Option<Result<Step<T>, ErrorData>> {
        if !state.starts_with(PAUSED_STATE) {
            return None;
        }
        let call = {
            let mut calls = lock(&self.calls);
            match calls.remove(state) {
                Some(call) if call.owner == owner && call.target == target => Some(call),
                Some(call) => {
                    // Not this client's call, or another request: it stays for its own.
                    calls.insert(state.to_owned(), call);
                    None
                }
                None => None,
            }
        };
        let Some(call) = call else {
            return Some(Err(ErrorData::invalid_params(
                format!(
                    "requestState {state:?} names no call roster is holding for this request: \
                     it expired (a paused call waits {} s), was answered already, or belongs to \
                     another request; send the request again without requestState",
                    PAUSED_FOR.as_secs()
                ),
                Some(json!({"reason": "unknown_request_state"})),
            )));
        };
        let mut running = call.running;
        let empty = Map::new();
        let responses = responses.unwrap_or(&empty);
        let answered: Vec<String> = running
            .waiting
            .keys()
            .filter(|key| responses.contains_key(*key))
            .cloned()
            .collect();
        for key in answered {
            if let (Some(ask), Some(answer)) = (running.waiting.remove(&key), responses.get(&key)) {
                let _ = ask.answer.send(Ok(answer.clone()));
            }
        }
        // Unanswered requests are asked again with a fresh requestState.
        Some(self.drive(running, owner, target, client_cancel).await)
    }

    fn pause(
        self: &Arc<Self>,
        mut running: Running<T>,
        owner: Option<String>,
        target: String,
    ) -> Result<Step<T>, ErrorData> {
        // From here on the work runs without the request that started it.
        running.task = running.task.detach();
        let mut requests = InputRequests::new();
        let keys: Vec<String> = running.waiting.keys().cloned().collect();
        for key in keys {
            let Some(ask) = running.waiting.get(&key) else {
                continue;
            };
            let request = json!({"method": ask.method, "params": ask.params});
            match serde_json::from_value::<InputRequest>(request) {
                Ok(request) => {
                    requests.insert(key, request);
                }
                Err(error) => {
                    if let Some(ask) = running.waiting.remove(&key) {
                        let _ = ask.answer.send(Err(ErrorData::invalid_params(
                            format!("roster cannot pass this {} on: {error}", ask.method),
                            None,
                        )));
                    }
                }
            }
        }
        let state = format!("{PAUSED_STATE}{}", uuid::Uuid::new_v4().simple());
        {
            let mut calls = lock(&self.calls);
            if calls.len() >= MAX_PAUSED {
                running.cancel.cancel();
                return Err(ErrorData::new(
                    ErrorCode::INTERNAL_ERROR,
                    format!(
                        "roster already holds {MAX_PAUSED} calls waiting for their clients' input; \
                         answer or abandon one, then call again"
                    ),
                    None,
                ));
            }
            calls.insert(
                state.clone(),
                PausedCall {
                    owner,
                    target,
                    running,
                },
            );
        }
        let paused: Weak<Self> = Arc::downgrade(self);
        let expiring = state.clone();
        tokio::spawn(async move {
            tokio::time::sleep(PAUSED_FOR).await;
            let call = paused
                .upgrade()
                .and_then(|p| lock(&p.calls).remove(&expiring));
            if let Some(call) = call {
                tracing::info!(state = %expiring, "a paused call expired; it is cancelled");
                call.running.cancel.cancel();
            }
        });
        Ok(Step::InputRequired(InputRequiredResult::new(
            Some(requests),
            Some(state),
        )))
    }
}

/// Whether a request speaks 2026-07-28 (no server-to-client requests; `input_required`).
pub(crate) fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| !version.has_initialize())
}

/// Runs one client request that reaches a server (`work`, given the relay to its client) with
/// the client as the caller: an initialize-era request to its end; a 2026-07-28 request until
/// it finishes or pauses on a server's question — or, for a retry naming a paused call, resumes
/// that call with the answers. `target` names the request (method and name) for resuming.
pub(crate) async fn run_relayed(
    gateway: &Gateway,
    context: &RequestContext<RoleServer>,
    session: &Session,
    owner: Option<String>,
    target: String,
    input: Option<InputRound>,
    work: impl FnOnce(CallRelay) -> BoxFuture<'static, Outcome>,
) -> Result<Step<Outcome>, ErrorData> {
    let capabilities = context
        .client_capabilities()
        .and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or_else(|| json!({}));
    let progress = context
        .meta
        .get_progress_token()
        .map(|token| ProgressRelay {
            token,
            peer: context.peer.clone(),
        });
    if !is_modern(context) {
        let caller = ClientCaller::initialize_era(
            context.peer.clone(),
            context.id.clone(),
            capabilities,
            session.log_level(),
        );
        let relay = CallRelay {
            cancel: context.ct.clone(),
            progress,
            caller: Some(caller.clone()),
            input,
        };
        let outcome = crate::inbox::on_behalf_of(owner, work(relay)).await;
        caller.flush().await;
        return Ok(Step::Done(outcome));
    }
    let paused = gateway.paused.clone();
    let state = input.as_ref().and_then(|i| i.state.as_deref());
    if let Some(state) = state {
        let responses = input.as_ref().map(|i| &i.responses);
        let resumed = paused
            .resume(state, owner.clone(), target.clone(), responses, &context.ct)
            .await;
        if let Some(step) = resumed {
            return step;
        }
    }
    // 2026-07-28 carries the wanted log level in each request's `_meta`.
    let log_level = serde_json::to_value(&context.meta)
        .ok()
        .and_then(|meta| meta.get("io.modelcontextprotocol/logLevel").cloned())
        .and_then(|level| serde_json::from_value(level).ok());
    let (caller, asks) = ClientCaller::modern(
        context.peer.clone(),
        context.id.clone(),
        capabilities,
        log_level,
    );
    let cancel = gateway.shutdown_token().child_token();
    let relay = CallRelay {
        cancel: cancel.clone(),
        progress,
        caller: Some(caller.clone()),
        input,
    };
    let work = crate::inbox::on_behalf_of(owner.clone(), work(relay));
    let running = Running::start(caller, asks, cancel, work);
    paused.drive(running, owner, target, &context.ct).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_the_work_is_an_error_here_and_after_a_pause() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let boom = || async {
                if true {
                    panic!("boom");
                }
                1
            };
            let here = Work::new(boom()).await.expect_err("the panic is an error");
            assert!(here.contains("boom"), "{here}");
            let spawned = Work::new(boom())
                .detach()
                .await
                .expect_err("still an error");
            assert!(spawned.contains("boom"), "{spawned}");
            assert_eq!(Work::new(async { 7 }).detach().await, Ok(7));
        });
    }

    #[test]
    fn only_roster_states_are_resumed_here() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let paused = Paused::<()>::new();
            let cancel = CancellationToken::new();
            let target = "tools/call t".to_owned();
            assert!(
                paused
                    .resume("server-state", None, target.clone(), None, &cancel)
                    .await
                    .is_none(),
                "a server's own requestState is passed on"
            );
            let unknown = paused
                .resume("roster-paused:gone", None, target, None, &cancel)
                .await;
            let error = match unknown {
                Some(Err(error)) => error,
                _ => panic!("an unknown roster state is an error"),
            };
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
            assert!(error.message.contains("expired"), "{}", error.message);
        });
    }
}
