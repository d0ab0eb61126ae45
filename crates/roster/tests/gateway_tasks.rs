//! Tasks (SEP-2663) through roster: an rmcp client against `roster serve --http` fronting the
//! Python SDK conformance fixture, which knows nothing of tasks. roster turns slow calls into
//! tasks for a client that opted in, reports them on `tasks/get`, turns a server's
//! `input_required` result into the task's input requests (answered with `tasks/update`),
//! cancels the server's call on `tasks/cancel` or when the task outlives its TTL, bounds how
//! many run, and keeps each client's tasks to itself.

mod common;

use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ClientConfig, CreateTaskResult, DetailedTask, GetTaskParams, Implementation, TaskPayload,
    TaskStatus, UpdateTaskParams,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, RoleClient, ServiceError};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ClientConfig>;

const FIXTURE_TASKS: &str = "tasks.required = [\"failing_job\", \"test_tool_with_task\"]\n";

/// roster fronting the fixture (`server_extra` lines in its table), `gateway_extra` lines in
/// `[gateway]`, `tail` appended (e.g. `[[clients]]`).
fn roster(
    gateway_extra: &str,
    server_extra: &str,
    tail: &str,
) -> (tempfile::TempDir, common::HttpRoster) {
    let dir = tempfile::tempdir().expect("temp dir");
    let fixture = common::workspace_root().join("tests/python/conformance_server.py");
    let text = format!(
        "[gateway]\nnaming = \"never\"\nstartup_wait = \"20s\"\nstate_dir = {state:?}\n{gateway_extra}\n\
         [servers.fixture]\ncommand = {python:?}\nargs = [{fixture:?}]\n{server_extra}\n{tail}",
        state = dir.path().join("state"),
        python = common::python(),
    );
    let config = dir.path().join("roster.toml");
    std::fs::write(&config, text).expect("write config");
    let roster = common::start_roster_http(&config);
    (dir, roster)
}

/// A client of roster: opted in to tasks or not, an initialize-era session or 2026-07-28
/// requests, with a bearer token or none.
async fn client(url: &str, tasks: bool, modern: bool, token: Option<&str>) -> Client {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    let capabilities = if tasks {
        ClientCapabilities::builder().enable_tasks().build()
    } else {
        ClientCapabilities::default()
    };
    let info = ClientConfig::new(capabilities, Implementation::new("tasks-test", "1"));
    let mode = if modern {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        }
    } else {
        ClientLifecycleMode::Initialize
    };
    rmcp::serve_client_with_lifecycle(info, transport, mode)
        .await
        .expect("connect to roster")
}

async fn call(
    client: &Client,
    name: &str,
    arguments: Value,
) -> Result<CallToolResponse, ServiceError> {
    let arguments = arguments.as_object().cloned().unwrap_or_default();
    client
        .peer()
        .call_tool_once(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await
}

async fn start_task(client: &Client, name: &str, arguments: Value) -> CreateTaskResult {
    match call(client, name, arguments).await {
        Ok(CallToolResponse::Task(created)) => created,
        other => panic!("{name} did not become a task: {other:?}"),
    }
}

async fn answered(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    match call(client, name, arguments).await {
        Ok(CallToolResponse::Complete(result)) => result,
        other => panic!("{name} was not answered in place: {other:?}"),
    }
}

async fn get(client: &Client, task_id: &str) -> Result<DetailedTask, ServiceError> {
    let result = client
        .peer()
        .get_task(GetTaskParams::new(task_id.to_owned()))
        .await?;
    Ok(result.task)
}

/// Polls `tasks/get` until `done` holds; panics after 30 s (a hang, not a speed requirement).
async fn until(
    client: &Client,
    task_id: &str,
    done: impl Fn(&DetailedTask) -> bool,
) -> DetailedTask {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let task = get(client, task_id).await.expect("tasks/get");
        if done(&task) {
            return task;
        }
        assert!(
            Instant::now() < deadline,
            "task {task_id} stayed {:?}",
            task.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn terminal(client: &Client, task_id: &str) -> DetailedTask {
    until(client, task_id, |t| t.status().is_terminal()).await
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

fn completed(task: &DetailedTask) -> CallToolResult {
    match &task.payload {
        TaskPayload::Completed { result } => {
            serde_json::from_value(Value::Object(result.clone())).expect("a tool result")
        }
        other => panic!("task did not complete: {other:?}"),
    }
}

fn error_code(error: ServiceError) -> (i32, Option<Value>) {
    match error {
        ServiceError::McpError(e) => (e.code.0, e.data),
        other => panic!("not a JSON-RPC error: {other}"),
    }
}

/// A `slow_compute` task of `seconds`, labelled `label`, as it was created.
async fn slow_created(client: &Client, seconds: u32, label: &str) -> CreateTaskResult {
    let arguments = json!({"seconds": seconds, "label": label});
    start_task(client, "slow_compute", arguments).await
}

/// A `slow_compute` call of `seconds`, labelled `label`, answered in place.
async fn slow_answered(client: &Client, seconds: u32, label: &str) -> CallToolResult {
    let arguments = json!({"seconds": seconds, "label": label});
    answered(client, "slow_compute", arguments).await
}

/// A `slow_compute` task of `seconds`, labelled `label`; its id.
async fn slow_task(client: &Client, seconds: u32, label: &str) -> String {
    slow_created(client, seconds, label).await.task.task_id
}

async fn cancel(client: &Client, task_id: &str) -> Result<(), ServiceError> {
    client
        .peer()
        .cancel_task(CancelTaskParams::new(task_id.to_owned()))
        .await
}

/// `tasks/update` answering one input request.
async fn answer(client: &Client, task_id: &str, key: &str, response: Value) {
    let responses = [(key.to_owned(), response)].into_iter().collect();
    client
        .peer()
        .update_task(UpdateTaskParams::new(task_id.to_owned(), responses))
        .await
        .expect("update ack");
}

/// The labels of the fixture's `slow_compute` calls that were cancelled.
async fn cancelled_calls(client: &Client) -> Vec<String> {
    let result = answered(client, "test_cancelled_calls", json!({})).await;
    serde_json::from_str(&text(&result)).expect("a JSON list")
}

async fn until_cancelled_at_server(client: &Client, label: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cancelled_calls(client).await.iter().any(|l| l == label) {
        assert!(
            Instant::now() < deadline,
            "the server never saw {label} cancelled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn slow_calls_become_tasks_that_complete_fail_ask_or_get_cancelled() {
    let (_dir, roster) = roster("", FIXTURE_TASKS, "");
    let client = client(&roster.url, true, false, None).await;

    // Quick answers come back as they are, even for a client that opted in.
    assert_eq!(
        text(&answered(&client, "greet", json!({"name": "Ada"})).await),
        "Hello, Ada!"
    );
    answered(&client, "slow_compute", json!({"seconds": 0})).await;

    // A slow call becomes a task at once observable, with roster's TTL; it completes.
    let created = slow_created(&client, 1, "done").await;
    assert_eq!(created.task.ttl_ms, Some(3_600_000));
    assert!(created.task.poll_interval_ms.is_some());
    let id = created.task.task_id;
    assert!(
        !get(&client, &id)
            .await
            .expect("the task exists")
            .status()
            .is_terminal()
    );
    let done = terminal(&client, &id).await;
    assert_eq!(text(&completed(&done)), "computed done after 1.0s");

    // A tool error completes the task with isError; a JSON-RPC error fails it.
    let failing = start_task(&client, "failing_job", json!({}))
        .await
        .task
        .task_id;
    let failed_tool = completed(&terminal(&client, &failing).await);
    assert_eq!(failed_tool.is_error, Some(true), "{failed_tool:?}");
    let broken = start_task(&client, "protocol_error_job", json!({}))
        .await
        .task
        .task_id;
    match terminal(&client, &broken).await.payload {
        TaskPayload::Failed { error } => {
            assert_eq!(error["code"], -32603);
            assert!(common::str_contains(&error["message"], "protocol level"));
        }
        other => panic!("protocol_error_job did not fail: {other:?}"),
    }

    // tasks/cancel cancels the server's call; the task settles cancelled.
    let long = slow_task(&client, 60, "cancel-me").await;
    cancel(&client, &long).await.expect("cancel ack");
    assert_eq!(
        terminal(&client, &long).await.status(),
        TaskStatus::Cancelled
    );
    until_cancelled_at_server(&client, "cancel-me").await;

    // A server's input_required result becomes the task's input requests.
    let confirm = start_task(&client, "confirm_delete", json!({"filename": "a.txt"}))
        .await
        .task
        .task_id;
    let asking = until(&client, &confirm, |t| {
        t.status() == TaskStatus::InputRequired
    })
    .await;
    let TaskPayload::InputRequired { input_requests } = &asking.payload else {
        panic!("no input requests: {asking:?}")
    };
    let request = serde_json::to_value(&input_requests["confirm"]).expect("serializable");
    assert_eq!(request["method"], "elicitation/create", "{request}");
    let yes = json!({"action": "accept", "content": {"confirm": true}});
    answer(&client, &confirm, "confirm", yes).await;
    assert_eq!(
        text(&completed(&terminal(&client, &confirm).await)),
        "deleted a.txt"
    );

    // Two questions at once: answered one at a time, the task waits for both.
    let multi = start_task(&client, "multi_input", json!({}))
        .await
        .task
        .task_id;
    until(&client, &multi, |t| t.status() == TaskStatus::InputRequired).await;
    let named = |name: &str| json!({"action": "accept", "content": {"name": name}});
    answer(&client, &multi, "first", named("ann")).await;
    let half = get(&client, &multi).await.expect("tasks/get");
    let TaskPayload::InputRequired { input_requests } = &half.payload else {
        panic!("the task stopped waiting after one answer: {half:?}")
    };
    assert_eq!(input_requests.keys().collect::<Vec<_>>(), vec!["second"]);
    answer(&client, &multi, "second", named("bob")).await;
    assert_eq!(
        text(&completed(&terminal(&client, &multi).await)),
        "first=ann, second=bob"
    );

    // Input asked for at once stays a synchronous exchange (MRTR); the slow call after it with
    // the answer becomes the task, whose result carries the answer (2026-07-28 requests).
    let modern = self::client(&roster.url, true, true, None).await;
    let needed = match call(&modern, "test_tool_with_task", json!({})).await {
        Ok(CallToolResponse::InputRequired(needed)) => needed,
        other => panic!("round one did not ask for input: {other:?}"),
    };
    let key = needed
        .input_requests
        .as_ref()
        .and_then(|r| r.keys().next().cloned())
        .expect("an input request");
    let mut retry = CallToolRequestParams::new("test_tool_with_task").with_input_responses(
        [(
            key,
            json!({"action": "accept", "content": {"name": "Alice"}}),
        )]
        .into_iter()
        .collect(),
    );
    retry.request_state = needed.request_state;
    let created = match modern.peer().call_tool_once(retry).await {
        Ok(CallToolResponse::Task(created)) => created,
        other => panic!("round two did not become a task: {other:?}"),
    };
    let greeting = completed(&terminal(&modern, &created.task.task_id).await);
    assert_eq!(text(&greeting), "Hello, Alice!");

    let (code, _) = error_code(get(&client, "no-such-task").await.expect_err("unknown"));
    assert_eq!(code, -32602);

    // A client that did not opt in: calls are answered in place, a required tool is refused.
    let plain = self::client(&roster.url, false, false, None).await;
    let result = slow_answered(&plain, 1, "plain").await;
    assert_eq!(text(&result), "computed plain after 1.0s");
    let (code, data) = error_code(
        call(&plain, "failing_job", json!({}))
            .await
            .expect_err("refused"),
    );
    assert_eq!(code, -32021);
    let data = data.expect("error data");
    assert!(
        data["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "{data}"
    );
    let (code, _) = error_code(
        get(&plain, &id)
            .await
            .expect_err("no tasks without the extension"),
    );
    assert_eq!(code, -32021);
}

#[tokio::test]
async fn tasks_belong_to_the_client_that_started_them() {
    let clients = "[[clients]]\nname = \"a\"\ntoken_sha256 = \"ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb\"\n\n\
                   [[clients]]\nname = \"b\"\ntoken_sha256 = \"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d\"\n";
    let (_dir, roster) = roster("", FIXTURE_TASKS, clients);
    // 2026-07-28 requests, opting in per request.
    let a = client(&roster.url, true, true, Some("a")).await;
    let b = client(&roster.url, true, true, Some("b")).await;
    let id = slow_task(&a, 60, "a-owns").await;
    assert!(get(&a, &id).await.is_ok());
    let (code, _) = error_code(get(&b, &id).await.expect_err("not b's task"));
    assert_eq!(code, -32602);
    let (code, _) = error_code(cancel(&b, &id).await.expect_err("b cannot cancel it"));
    assert_eq!(code, -32602);
    cancel(&a, &id).await.expect("cancel ack");
    assert_eq!(terminal(&a, &id).await.status(), TaskStatus::Cancelled);
}

#[tokio::test]
async fn past_max_tasks_a_slow_call_is_answered_in_place() {
    // The fixture spoken to in the initialize era declares failing_job's taskSupport itself.
    let (_dir, roster) = roster("max_tasks = 1", "protocol = \"legacy\"\n", "");
    let client = client(&roster.url, true, false, None).await;
    let first = slow_task(&client, 60, "first").await;
    let second = slow_answered(&client, 1, "second").await;
    assert_eq!(text(&second), "computed second after 1.0s");
    cancel(&client, &first).await.expect("cancel ack");
    terminal(&client, &first).await;

    let plain = self::client(&roster.url, false, false, None).await;
    let (code, _) = error_code(
        call(&plain, "failing_job", json!({}))
            .await
            .expect_err("refused"),
    );
    assert_eq!(
        code, -32021,
        "the server's own execution.taskSupport = required"
    );
}

#[tokio::test]
async fn a_task_past_its_ttl_fails_and_its_call_is_cancelled() {
    let (_dir, roster) = roster("task_ttl = \"1s\"", FIXTURE_TASKS, "");
    let client = client(&roster.url, true, false, None).await;
    let created = slow_created(&client, 60, "expired").await;
    assert_eq!(created.task.ttl_ms, Some(1000));
    let task = terminal(&client, &created.task.task_id).await;
    assert_eq!(task.status(), TaskStatus::Failed, "{task:?}");
    until_cancelled_at_server(&client, "expired").await;
}
