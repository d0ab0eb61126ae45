//! Tasks (SEP-2663, extension `io.modelcontextprotocol/tasks`) that roster runs for its
//! clients, in front of servers that know nothing of tasks.
//!
//! A client opts in per request (`_meta` client capabilities) or for its session. Then a call
//! of a tool whose [`TaskSupport`] is not `forbidden` starts at its server as usual; if the
//! server answers within `task_after`, the client gets that answer as it is (a result, or an
//! `input_required` result: the MRTR exchange before a task stays synchronous, as the SEP
//! asks). If not, roster answers with a `CreateTaskResult` and the call goes on in the
//! background: `tasks/get` reports it, a server's later `input_required` result becomes the
//! task's `inputRequests` (answered with `tasks/update`, then roster calls the server again
//! with the answers), and `tasks/cancel` cancels the call at the server. A tool that is
//! `required` is refused (`-32021`) to a client that did not opt in.
//!
//! Tasks are held per client identity (a token's client, or everyone anonymous), kept for
//! `task_ttl` (their `ttlMs`), and at most `max_tasks` run at once: past that, a slow call is
//! answered in place instead.

use crate::sync::lock;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, CreateTaskResult, ErrorCode,
    GetTaskResult, InputRequiredResult, InputResponses, JsonObject, TaskStatus,
};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use serde_json::Value;
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

use super::{CallError, Gateway, native};
use crate::config::TaskSupport;
use crate::servers::{CallerRelay, InputRound};
use crate::store::{SharedTasks, TaskOp};

/// How often a client is asked to poll `tasks/get`.
const POLL_INTERVAL_MS: u64 = 500;

/// How many client identities hold tasks at once before those with none running are dropped.
const MAX_OWNERS: usize = 4096;

/// How many `input_required` rounds one task goes through before roster gives up on it.
const MAX_INPUT_ROUNDS: usize = 16;

/// How roster runs calls as tasks (the `[gateway]` keys `task_after`, `task_ttl`,
/// `max_tasks`).
#[derive(Debug, Clone)]
pub struct TaskSettings {
    /// A call of a client that opted in becomes a task once it outlasts this.
    pub after: Duration,
    /// How long a task is kept (`ttlMs`).
    pub ttl: Duration,
    /// How many tasks may run at once.
    pub max: usize,
}

impl Default for TaskSettings {
    fn default() -> Self {
        TaskSettings {
            after: Duration::from_millis(500),
            ttl: Duration::from_secs(3600),
            max: 1000,
        }
    }
}

/// One tool call as the task path sees it.
pub(crate) struct TaskCall<'a> {
    /// The exposed tool name.
    pub(crate) name: &'a str,
    /// The client's arguments.
    pub(crate) arguments: &'a JsonObject,
    /// The client's answers to an earlier `input_required` result of this call, if any.
    pub(crate) input: Option<InputRound>,
    /// Whether the client opted in to tasks for this request.
    pub(crate) opted_in: bool,
    /// The client, as the server sees it (its capabilities; `input_required` goes back to it).
    pub(crate) caller: Arc<dyn CallerRelay>,
    /// Cancelled when the client cancels the request.
    pub(crate) cancelled: &'a CancellationToken,
}

/// What the task path did with a call.
pub(crate) enum Dispatch {
    /// Nothing: the call is not one for tasks, the ordinary call path answers it.
    InPlace,
    /// Answered: the server's own answer within `task_after`, or a `CreateTaskResult`.
    Answered(Box<CallToolResponse>),
}

/// The tasks of every client.
pub(crate) struct Tasks {
    settings: TaskSettings,
    by_owner: Mutex<HashMap<String, TaskManager>>,
    running: Arc<AtomicUsize>,
    /// With `[store]`: tasks every replica answers for (see `crate::store::tasks`).
    shared: std::sync::OnceLock<SharedTasks>,
}

impl Tasks {
    pub(crate) fn new(settings: TaskSettings) -> Self {
        Tasks {
            settings,
            by_owner: Mutex::new(HashMap::new()),
            running: Arc::new(AtomicUsize::new(0)),
            shared: std::sync::OnceLock::new(),
        }
    }

    /// Shares tasks with the other replicas through `shared`: this replica publishes the
    /// state of the tasks it runs, answers `tasks/get` for theirs, and carries out the
    /// `tasks/cancel` and `tasks/update` they pass on for its own.
    pub(crate) fn share(
        self: &Arc<Self>,
        shared: SharedTasks,
    ) -> Result<(), crate::store::StoreError> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Ok(());
        };
        let tasks = Arc::downgrade(self);
        shared.on_op(move |op| {
            if let Some(tasks) = tasks.upgrade() {
                runtime.spawn(async move { tasks.carry_out(op) });
            }
        })?;
        let _ = self.shared.set(shared);
        Ok(())
    }

    /// A request another replica passed on, for a task that runs here (else not ours).
    fn carry_out(&self, op: TaskOp) {
        let (owner, id) = match &op {
            TaskOp::Cancel { owner, id } | TaskOp::Update { owner, id, .. } => {
                (owner.clone(), id.clone())
            }
        };
        let (owner, id) = (owner.as_str(), id.as_str());
        let Some(manager) = self.manager(owner) else {
            return;
        };
        if manager.get_task(id).is_err() {
            return;
        }
        let done = match op {
            TaskOp::Cancel { .. } => manager.cancel_task(id),
            TaskOp::Update { responses, .. } => {
                match serde_json::from_value::<InputResponses>(responses) {
                    Ok(responses) => manager.update_task(id, responses),
                    Err(e) => Err(ErrorData::invalid_params(e.to_string(), None)),
                }
            }
        };
        if let Err(error) = done {
            tracing::warn!(task = %id, %error, "a task request from another replica failed");
        }
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, TaskManager>> {
        lock(&self.by_owner)
    }

    /// The owner's task store, if it ever had a task.
    fn manager(&self, owner: &str) -> Option<TaskManager> {
        self.owners().get(owner).cloned()
    }

    /// Runs a call the task way, or says it is not one for tasks.
    pub(crate) async fn dispatch(
        &self,
        gateway: &Arc<Gateway>,
        owner: &str,
        call: TaskCall<'_>,
        shutdown: &CancellationToken,
    ) -> Result<Dispatch, ErrorData> {
        let Some(support) = gateway.roster().task_support(call.name) else {
            return Ok(Dispatch::InPlace);
        };
        match (support, call.opted_in) {
            (TaskSupport::Forbidden, _) | (TaskSupport::Optional, false) => {
                return Ok(Dispatch::InPlace);
            }
            (TaskSupport::Required, false) => {
                return Err(ErrorData::missing_required_client_capability(
                    ClientCapabilities::builder().enable_tasks().build(),
                ));
            }
            (_, true) => {}
        }
        let cancel = shutdown.child_token();
        let arguments = Some(call.arguments.clone());
        let caller = call.caller;
        let mut round = start_round(
            gateway,
            owner,
            call.name,
            arguments.clone(),
            call.input,
            &caller,
            &cancel,
        );
        let early = tokio::select! {
            joined = &mut round => Some(joined),
            () = tokio::time::sleep(self.settings.after) => None,
            () = call.cancelled.cancelled() => {
                cancel.cancel();
                Some((&mut round).await)
            }
        };
        if let Some(joined) = early {
            return answer_now(joined).map(|a| Dispatch::Answered(Box::new(a)));
        }
        if self.running.load(Ordering::SeqCst) >= self.settings.max {
            tracing::warn!(
                max = self.settings.max,
                "as many tasks run as max_tasks allows; answering this call in place"
            );
            return answer_now(round.await).map(|a| Dispatch::Answered(Box::new(a)));
        }
        let work = TaskWork {
            gateway: gateway.clone(),
            owner: owner.to_owned(),
            name: call.name.to_owned(),
            arguments,
            caller,
            cancel,
            _running: Running::start(&self.running),
        };
        let options = TaskOptions::new()
            .with_ttl_ms(u64::try_from(self.settings.ttl.as_millis()).unwrap_or(u64::MAX))
            .with_poll_interval_ms(POLL_INTERVAL_MS);
        let manager = {
            let mut owners = self.owners();
            if !owners.contains_key(owner) && owners.len() >= MAX_OWNERS {
                // Verified tokens bring owners from outside: past the bound, owners with nothing
                // running go (with their finished tasks' results).
                owners.retain(|_, manager| manager.running_task_count() > 0);
            }
            owners.entry(owner.to_owned()).or_default().clone()
        };
        let task = manager.spawn(options, move |context| {
            Box::pin(crate::telemetry::carried(work.run(round, context)))
        });
        if let Some(shared) = self.shared.get() {
            let publisher = Publisher {
                manager,
                owner: owner.to_owned(),
                id: task.task_id.clone(),
                shared: shared.clone(),
                ttl: self.settings.ttl,
                last: String::new(),
            };
            // Published before the client has the id: its next request may land elsewhere.
            tokio::spawn(publisher.start().await);
        }
        Ok(Dispatch::Answered(Box::new(CallToolResponse::Task(
            CreateTaskResult::new(task),
        ))))
    }

    /// The owner's task runs here.
    fn local(&self, owner: &str, task_id: &str) -> Option<TaskManager> {
        self.manager(owner)
            .filter(|manager| manager.get_task(task_id).is_ok())
    }

    /// `tasks/get`: the task with its result, error or pending input requests (one another
    /// replica runs, as it last published it).
    pub(crate) async fn get(&self, owner: &str, task_id: &str) -> Result<GetTaskResult, ErrorData> {
        if let Some(manager) = self.local(owner, task_id) {
            return Ok(GetTaskResult::new(manager.get_task(task_id)?));
        }
        let state = self.elsewhere(owner, task_id).await?;
        serde_json::from_str(&state).map_err(|e| {
            ErrorData::internal_error(format!("a task's shared state is unreadable: {e}"), None)
        })
    }

    /// A task another replica runs, as it last published it.
    async fn elsewhere(&self, owner: &str, task_id: &str) -> Result<String, ErrorData> {
        let Some(shared) = self.shared.get() else {
            return Err(unknown_task(task_id));
        };
        match shared.get(owner, task_id).await {
            Ok(Some(state)) => Ok(state),
            Ok(None) => Err(unknown_task(task_id)),
            Err(e) => Err(ErrorData::internal_error(
                format!("roster cannot reach the store that holds this task: {e}"),
                None,
            )),
        }
    }

    /// Passes `op` to the replica running the task, which must be one of the store's.
    async fn pass_on(&self, owner: &str, task_id: &str, op: TaskOp) -> Result<(), ErrorData> {
        self.elsewhere(owner, task_id).await?;
        let shared = self.shared.get().ok_or_else(|| unknown_task(task_id))?;
        match shared.send(&op).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(ErrorData::invalid_params(
                "these answers are too large to pass to the replica running the task",
                None,
            )),
            Err(e) => Err(ErrorData::internal_error(
                format!("roster cannot reach the store that holds this task: {e}"),
                None,
            )),
        }
    }

    /// `tasks/update`: answers to the task's input requests (unknown keys are ignored).
    pub(crate) async fn update(
        &self,
        owner: &str,
        task_id: &str,
        responses: InputResponses,
    ) -> Result<(), ErrorData> {
        if let Some(manager) = self.local(owner, task_id) {
            return manager.update_task(task_id, responses);
        }
        let responses = serde_json::to_value(responses)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let op = TaskOp::Update {
            owner: owner.to_owned(),
            id: task_id.to_owned(),
            responses,
        };
        self.pass_on(owner, task_id, op).await
    }

    /// `tasks/cancel`: the call is cancelled at its server; the task settles `cancelled`.
    pub(crate) async fn cancel(&self, owner: &str, task_id: &str) -> Result<(), ErrorData> {
        if let Some(manager) = self.local(owner, task_id) {
            return manager.cancel_task(task_id);
        }
        let op = TaskOp::Cancel {
            owner: owner.to_owned(),
            id: task_id.to_owned(),
        };
        self.pass_on(owner, task_id, op).await
    }

    /// Drops every task (their calls are cancelled with them).
    pub(crate) fn shutdown(&self) {
        for manager in self.owners().values() {
            manager.shutdown();
        }
    }
}

/// How often the replica running a task looks whether its state changed, to publish it.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// Publishes a task's state to the store each time it changes, until it settles (or is gone).
struct Publisher {
    manager: TaskManager,
    owner: String,
    id: String,
    shared: SharedTasks,
    ttl: Duration,
    /// What was published last.
    last: String,
}

impl Publisher {
    /// Publishes the state now; then the rest is to run in the background.
    async fn start(mut self) -> impl std::future::Future<Output = ()> {
        self.step().await;
        async move {
            while !self.step().await {
                tokio::time::sleep(PUBLISH_EVERY).await;
            }
        }
    }

    /// Publishes the state if it changed; whether the task is settled (or gone) and published.
    async fn step(&mut self) -> bool {
        let Ok(task) = self.manager.get_task(&self.id) else {
            return true;
        };
        let settled = matches!(
            task.status(),
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        );
        let state = serde_json::to_string(&GetTaskResult::new(task)).unwrap_or_default();
        if state != self.last {
            match self
                .shared
                .publish(&self.owner, &self.id, state.clone(), self.ttl)
                .await
            {
                Ok(()) => self.last = state,
                Err(error) => {
                    tracing::warn!(task = %self.id, %error, "could not publish a task's state to the store");
                    return false;
                }
            }
        }
        settled
    }
}

fn unknown_task(task_id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown task: {task_id}"), None)
}

/// Counts a running task until dropped (its work ended, or was dropped with an expired task).
struct Running(Arc<AtomicUsize>);

impl Running {
    fn start(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Running(count.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

type Round = JoinHandle<Result<Value, CallError>>;

/// Calls the server once, on its own task so the call outlives the client's request.
/// `owner` is the client identity the call runs for: what its server sends meanwhile is theirs.
fn start_round(
    gateway: &Arc<Gateway>,
    owner: &str,
    name: &str,
    arguments: Option<JsonObject>,
    input: Option<InputRound>,
    caller: &Arc<dyn CallerRelay>,
    cancel: &CancellationToken,
) -> Round {
    let (gateway, name, cancel) = (gateway.clone(), name.to_owned(), cancel.clone());
    let caller = caller.clone();
    tokio::spawn(crate::inbox::on_behalf_of(
        Some(owner.to_owned()),
        async move {
            gateway
                .call_round(&name, arguments, input, caller, cancel)
                .await
        },
    ))
}

fn joined(outcome: Result<Result<Value, CallError>, JoinError>) -> Result<Value, CallError> {
    outcome.unwrap_or_else(|e| {
        Err(CallError::ServerDown {
            server: String::new(),
            reason: format!("the call ended abnormally: {e}"),
        })
    })
}

fn needs_input(answer: &Value) -> bool {
    answer.get("resultType").and_then(Value::as_str) == Some("input_required")
}

/// The client's answer to a call the server answered within `task_after`.
fn answer_now(
    outcome: Result<Result<Value, CallError>, JoinError>,
) -> Result<CallToolResponse, ErrorData> {
    let answer = match joined(outcome) {
        Ok(answer) => answer,
        Err(error) => return error.into_answer().map(CallToolResponse::from),
    };
    if needs_input(&answer) {
        let needed: InputRequiredResult = super::handler::read_answer("tools/call", answer)?;
        return Ok(CallToolResponse::InputRequired(needed));
    }
    super::handler::read_answer::<CallToolResult>("tools/call", answer).map(CallToolResponse::from)
}

/// A call running as a task.
struct TaskWork {
    gateway: Arc<Gateway>,
    /// The client identity the task belongs to.
    owner: String,
    name: String,
    arguments: Option<JsonObject>,
    caller: Arc<dyn CallerRelay>,
    cancel: CancellationToken,
    _running: Running,
}

impl TaskWork {
    /// Waits for the server's answers, turning each `input_required` into the task's input
    /// requests and calling again with the client's answers, until a result or an error.
    async fn run(self, mut round: Round, task: TaskContext) -> Result<CallToolResult, TaskExit> {
        // Dropped with the task (expiry, shutdown): the call at the server is cancelled too.
        let _cancel_on_drop = self.cancel.clone().drop_guard();
        let mut shown_keys = HashSet::new();
        for _ in 0..MAX_INPUT_ROUNDS {
            let outcome = tokio::select! {
                outcome = &mut round => outcome,
                () = task.cancelled() => return Err(TaskExit::Cancelled),
            };
            let answer = match joined(outcome) {
                Ok(answer) => answer,
                Err(CallError::Cancelled) => return Err(TaskExit::Cancelled),
                Err(error) => return error.into_answer().map_err(TaskExit::Error),
            };
            if !needs_input(&answer) {
                return Ok(super::handler::read_answer("tools/call", answer)?);
            }
            let needed: InputRequiredResult = super::handler::read_answer("tools/call", answer)?;
            let asks =
                needed
                    .input_requests
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(key, request)| {
                        let shown = unique_key(&mut shown_keys, &key);
                        let task = task.clone();
                        async move { (key, task.request_input(shown, request).await) }
                    });
            let mut responses = serde_json::Map::new();
            for (key, answer) in futures::future::join_all(asks).await {
                responses.insert(key, answer?);
            }
            let input = InputRound {
                responses,
                state: needed.request_state,
            };
            round = start_round(
                &self.gateway,
                &self.owner,
                &self.name,
                self.arguments.clone(),
                Some(input),
                &self.caller,
                &self.cancel,
            );
        }
        Err(TaskExit::Error(ErrorData::internal_error(
            format!(
                "the server asked for input {MAX_INPUT_ROUNDS} times without finishing; roster gave up"
            ),
            None,
        )))
    }
}

/// An input request key unique over the task's life (a server may reuse its keys in later
/// rounds; the client must see each key once).
fn unique_key(shown: &mut HashSet<String>, key: &str) -> String {
    if shown.insert(key.to_owned()) {
        return key.to_owned();
    }
    (2..)
        .map(|n| format!("{key}.{n}"))
        .find(|candidate| shown.insert(candidate.clone()))
        .unwrap_or_else(|| key.to_owned())
}

impl CallError {
    /// What the client gets for a call that failed this way: an unknown tool or a server's
    /// JSON-RPC error as that error, a server that is down or a cancelled call as a tool
    /// error result.
    pub(crate) fn into_answer(self) -> Result<CallToolResult, ErrorData> {
        match self {
            CallError::UnknownTool(name) => Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}; list the tools again with tools/list"),
                None,
            )),
            CallError::Server {
                code,
                message,
                data,
            } => Err(ErrorData::new(ErrorCode(code), message, data)),
            e @ (CallError::ServerDown { .. } | CallError::Withheld(_) | CallError::Cancelled) => {
                Ok(native::error(e.to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::unique_key;
    use std::collections::HashSet;

    #[test]
    fn input_keys_stay_unique_over_rounds() {
        let mut shown = HashSet::new();
        assert_eq!(unique_key(&mut shown, "confirm"), "confirm");
        assert_eq!(unique_key(&mut shown, "name"), "name");
        assert_eq!(unique_key(&mut shown, "confirm"), "confirm.2");
        assert_eq!(unique_key(&mut shown, "confirm"), "confirm.3");
    }
}
