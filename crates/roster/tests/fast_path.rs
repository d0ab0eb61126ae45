//! The forwarding fast path end to end: a client's `tools/call` taken by the connection's lane
//! (stdio, and an initialize-era HTTP session) and sent to a stdio server past rmcp's service
//! keeps what the long way did: a client that cancels its call cancels it at the server, and
//! the server's progress reaches the client under the client's own token before the result.
//! The server is the Python SDK conformance fixture.

mod common;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest,
    ProgressNotificationParam, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

/// A client that keeps the progress it is sent.
#[derive(Clone, Default)]
struct Listener {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Listener {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Ok(mut progress) = self.progress.lock() {
            progress.push(params);
        }
    }
}

type Client = RunningService<RoleClient, Listener>;

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let fixture = common::workspace_root().join("tests/python/conformance_server.py");
    let text = format!(
        "[gateway]\nnaming = \"never\"\nstartup_wait = \"20s\"\nstate_dir = {state:?}\n\n\
         [servers.fixture]\ncommand = {python:?}\nargs = [{fixture:?}]\n",
        state = dir.join("state"),
        python = common::python(),
    );
    let config = dir.join("roster.toml");
    std::fs::write(&config, text).expect("write config");
    config
}

fn request(name: &str, arguments: Value) -> ClientRequest {
    let arguments = arguments.as_object().cloned().unwrap_or_default();
    ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new(name.to_owned()).with_arguments(arguments),
    ))
}

async fn answered(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    match client.peer().send_request(request(name, arguments)).await {
        Ok(ServerResult::CallToolResult(result)) => result,
        other => panic!("{name} was not answered: {other:?}"),
    }
}

fn text(result: &CallToolResult) -> String {
    common::text_of(&serde_json::to_value(result).expect("a result is JSON"))
}

/// The client cancels a slow call once the server is working on it; the server sees it
/// cancelled. Then a call with progress: every update arrives before the result.
async fn walk(client: &Client, listener: &Listener, label: &str) {
    // The session's first request links its lane: the calls after it take the fast path.
    assert_eq!(
        text(&answered(client, "greet", json!({"name": "Ada"})).await),
        "Hello, Ada!"
    );
    let slow = client
        .peer()
        .send_cancellable_request(
            request("slow_compute", json!({"seconds": 60, "label": label})),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    // The call must have reached the server for the server to see it cancelled.
    tokio::time::sleep(Duration::from_millis(500)).await;
    slow.cancel(Some("the test cancels it".into()))
        .await
        .expect("cancel sent");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let cancelled = text(&answered(client, "test_cancelled_calls", json!({})).await);
        let cancelled: Vec<String> = serde_json::from_str(&cancelled).expect("a JSON list");
        if cancelled.iter().any(|l| l == label) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server never saw {label} cancelled: {cancelled:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let before = listener.progress.lock().map(|p| p.len()).unwrap_or(0);
    let result = answered(client, "test_tool_with_progress", json!({})).await;
    assert!(result.is_error != Some(true), "{result:?}");
    let progress = listener.progress.lock().map(|p| p.len()).unwrap_or(0) - before;
    assert!(
        progress >= 3,
        "the fixture's three progress updates arrive before its result ({progress} did)"
    );
}

#[tokio::test]
async fn over_stdio_a_cancelled_call_is_cancelled_at_the_server_and_progress_arrives() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config(dir.path());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_roster"))
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start roster");
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        panic!("roster's pipes");
    };
    let listener = Listener::default();
    let client = listener
        .clone()
        .serve((stdout, stdin))
        .await
        .expect("connect to roster over stdio");
    walk(&client, &listener, "over-stdio").await;
}

#[tokio::test]
async fn in_an_http_session_a_cancelled_call_is_cancelled_at_the_server_and_progress_arrives() {
    let dir = tempfile::tempdir().expect("temp dir");
    let roster = common::start_roster_http(&config(dir.path()));
    let listener = Listener::default();
    let client = listener
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(roster.url.as_str()))
        .await
        .expect("connect to roster over HTTP");
    walk(&client, &listener, "over-http").await;
}
