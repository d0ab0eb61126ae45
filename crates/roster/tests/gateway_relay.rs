//! What a server asks of its client mid-request — sampling, elicitation, roots, log messages —
//! relayed through `roster serve` to the client behind the request, in every pairing of eras:
//! the official Python SDK client (with sampling, elicitation and roots callbacks,
//! `tests/python/clients/answering_client.py`) over stdio and streamable HTTP, in front of the
//! Python SDK conformance fixture (`tests/python/conformance_server.py`) spoken to in the
//! `initialize` era or in 2026-07-28.
//!
//! - initialize-era client, initialize-era server: the server's requests go to the client.
//! - initialize-era client, 2026-07-28 server: roster answers each `input_required` by asking
//!   the client, and retries; the client never sees `input_required`.
//! - 2026-07-28 client, 2026-07-28 server: `input_required` passes through untouched.
//! - 2026-07-28 client, initialize-era server: the call pauses; the client gets
//!   `input_required` and its retry answers the server.
//! - Nobody to ask: sampling is an error naming why; an elicitation waits in the inbox.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::required_text as text;

/// A config fronting the fixture as `asker`, spoken to in `protocol` (`legacy` | `modern`).
fn write_config(dir: &Path, protocol: &str) -> PathBuf {
    let config = dir.join("roster.toml");
    let text = format!(
        "[gateway]\nnaming = \"never\"\nstate_dir = {state:?}\n\n[servers.asker]\ncommand = {py:?}\nargs = [{fixture:?}]\nprotocol = \"{protocol}\"\n",
        state = dir.join("state"),
        py = common::python(),
        fixture = common::workspace_root().join("tests/python/conformance_server.py"),
    );
    std::fs::write(&config, text).expect("write config");
    config
}

/// How the client reaches roster.
enum Via<'a> {
    Stdio(&'a Path),
    Http(&'a str),
}

fn client_command(via: &Via<'_>, mode: &str, calls: &Value, extra: &[&str]) -> Command {
    let mut command = Command::new(common::python());
    command
        .arg(common::workspace_root().join("tests/python/clients/answering_client.py"))
        .args(["--mode", mode, "--calls", &calls.to_string()])
        .args(extra);
    match via {
        Via::Stdio(config) => {
            command
                .arg("--stdio")
                .arg(env!("CARGO_BIN_EXE_roster"))
                .arg(config);
        }
        Via::Http(url) => {
            command.args(["--url", url]);
        }
    }
    command
}

/// Runs the answering client and returns its report.
fn answering_client(via: Via<'_>, mode: &str, calls: Value, extra: &[&str]) -> Value {
    let output = client_command(&via, mode, &calls, extra)
        .output()
        .expect("run the Python client");
    report_of(&output.stdout, &output.stderr, output.status.success())
}

fn report_of(stdout: &[u8], stderr: &[u8], success: bool) -> Value {
    let stdout = String::from_utf8_lossy(stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "client printed no report ({e}): {stdout}\n{}",
            String::from_utf8_lossy(stderr)
        )
    });
    assert!(
        success && report.get("error").is_none(),
        "client failed: {report}\n{}",
        String::from_utf8_lossy(stderr)
    );
    report
}

/// The calls that need all three kinds of answer.
fn asking_calls() -> Value {
    json!([
        ["test_sampling", {"prompt": "Name a colour"}],
        ["test_elicitation", {"message": "Who are you?"}],
        ["test_input_required_result_multiple_inputs", {}],
    ])
}

/// The client's callbacks were asked, and their answers reached the servers' results.
fn assert_answered(report: &Value) {
    let results = &report["results"];
    assert_eq!(
        text(&results[0]),
        "LLM response: sampled reply to: Name a colour",
        "{report}"
    );
    assert_eq!(
        text(&results[1]),
        r#"User response: action=accept, content={"email": "alice@example.com", "username": "alice"}"#,
        "{report}"
    );
    assert_eq!(
        text(&results[2]),
        "name=Alice; greeting=sampled reply to: Generate a greeting; roots=file:///work/project",
        "{report}"
    );
    assert_eq!(
        report["sampling"],
        json!(["Name a colour", "Generate a greeting"]),
        "{report}"
    );
    assert_eq!(
        report["elicitation"].as_array().map(|e| &e[..2]),
        Some(&[json!("Who are you?"), json!("What is your name?")][..]),
        "{report}"
    );
    assert_eq!(report["roots"], 1, "{report}");
}

#[test]
fn initialize_era_client_answers_an_initialize_era_server_over_stdio() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), "legacy");
    let report = answering_client(Via::Stdio(&config), "legacy", asking_calls(), &[]);
    assert_answered(&report);
}

#[test]
fn through_call_tool_in_search_mode_the_questions_and_log_messages_are_relayed_as_for_a_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), "legacy");
    let text = std::fs::read_to_string(&config).expect("read config");
    std::fs::write(
        &config,
        text.replacen("[gateway]\n", "[gateway]\ntools_mode = \"search\"\n", 1),
    )
    .expect("write config");
    // The same calls as the other relay tests, each made as call_tool {name, arguments}.
    let through = |calls: Value| -> Value {
        calls
            .as_array()
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| json!(["call_tool", {"name": c[0], "arguments": c[1]}]))
                    .collect()
            })
            .unwrap_or_default()
    };
    let report = answering_client(Via::Stdio(&config), "legacy", through(asking_calls()), &[]);
    assert_answered(&report);
    let logging = through(json!([["test_tool_with_logging", {}]]));
    let report = answering_client(
        Via::Stdio(&config),
        "legacy",
        logging,
        &["--log-level", "info"],
    );
    assert_eq!(
        report["logs"],
        json!([
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ]),
        "{report}"
    );
}

#[test]
fn initialize_era_client_answers_an_initialize_era_server_over_http() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gateway = common::start_roster_http(&write_config(dir.path(), "legacy"));
    let report = answering_client(Via::Http(&gateway.url), "legacy", asking_calls(), &[]);
    assert_answered(&report);
}

#[test]
fn initialize_era_client_answers_a_2026_server_whose_input_required_roster_fulfils() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gateway = common::start_roster_http(&write_config(dir.path(), "modern"));
    let report = answering_client(Via::Http(&gateway.url), "legacy", asking_calls(), &[]);
    assert_answered(&report);
    for result in report["results"].as_array().into_iter().flatten() {
        assert!(
            result.get("resultType").is_none_or(|t| t == "complete"),
            "{result}"
        );
    }
}

#[test]
fn a_2026_client_answers_a_2026_server_through_input_required_over_stdio() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), "modern");
    let mut calls = asking_calls();
    calls
        .as_array_mut()
        .expect("a list")
        .push(json!(["prompt:test_input_required_result_prompt", {}]));
    let report = answering_client(Via::Stdio(&config), "2026-07-28", calls, &[]);
    assert_answered(&report);
    assert_eq!(
        report["elicitation"][2], "What context should the prompt use?",
        "{report}"
    );
    let prompt = &report["results"][3]["messages"][0]["content"]["text"];
    assert_eq!(prompt, "Use this context: the tests", "{report}");
}

#[test]
fn a_2026_client_answers_an_initialize_era_server_through_a_paused_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gateway = common::start_roster_http(&write_config(dir.path(), "legacy"));
    let report = answering_client(Via::Http(&gateway.url), "2026-07-28", asking_calls(), &[]);
    assert_answered(&report);
}

#[test]
fn a_paused_call_resumes_only_with_its_own_request_state() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gateway = common::start_roster_http(&write_config(dir.path(), "legacy"));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let post = |params: Value| {
            let url = gateway.url.clone();
            async move {
                let body = json!({
                    "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": params,
                });
                let response = reqwest::Client::new()
                    .post(url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-method", "tools/call")
                    .header("mcp-name", params["name"].as_str().unwrap_or_default())
                    .body(body.to_string())
                    .send()
                    .await
                    .expect("POST /mcp");
                let text = response.text().await.expect("a body");
                let line = text
                    .lines()
                    .rev()
                    .find_map(|l| {
                        l.strip_prefix("data:")
                            .or(Some(l))
                            .filter(|l| l.contains("jsonrpc"))
                    })
                    .unwrap_or_else(|| panic!("no JSON-RPC message in {text}"))
                    .trim()
                    .to_owned();
                serde_json::from_str::<Value>(&line).expect("a JSON-RPC message")
            }
        };
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
        });
        let first = post(json!({
            "name": "test_sampling", "arguments": {"prompt": "hi"}, "_meta": meta,
        }))
        .await;
        let result = &first["result"];
        assert_eq!(result["resultType"], "input_required", "{first}");
        let state = result["requestState"]
            .as_str()
            .expect("a requestState")
            .to_owned();
        let key = result["inputRequests"]
            .as_object()
            .and_then(|r| r.keys().next().cloned())
            .expect("one input request");
        assert_eq!(
            result["inputRequests"][&key]["method"],
            "sampling/createMessage"
        );

        let unknown = post(json!({
            "name": "test_sampling", "arguments": {"prompt": "hi"}, "_meta": meta,
            "inputResponses": {}, "requestState": format!("{state}x"),
        }))
        .await;
        assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
        assert!(
            common::str_contains(
                &unknown["error"]["message"],
                "names no call roster is holding"
            ),
            "{unknown}"
        );

        let answer = json!({
            "role": "assistant", "model": "m", "content": {"type": "text", "text": "hello back"},
        });
        let done = post(json!({
            "name": "test_sampling", "arguments": {"prompt": "hi"}, "_meta": meta,
            "inputResponses": {key.as_str(): answer}, "requestState": state,
        }))
        .await;
        assert_eq!(
            done["result"]["content"][0]["text"], "LLM response: hello back",
            "{done}"
        );
        let again = post(json!({
            "name": "test_sampling", "arguments": {"prompt": "hi"}, "_meta": meta,
            "inputResponses": {key.as_str(): answer}, "requestState": state,
        }))
        .await;
        assert_eq!(
            again["error"]["code"], -32602,
            "a state resumes once: {again}"
        );
    });
}

#[test]
fn without_the_capability_sampling_is_an_error_naming_why() {
    for protocol in ["legacy", "modern"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let gateway = common::start_roster_http(&write_config(dir.path(), protocol));
        let report = answering_client(
            Via::Http(&gateway.url),
            "legacy",
            json!([["test_sampling", {"prompt": "hi"}]]),
            &["--declare", "none"],
        );
        let error = &report["results"][0]["error"];
        // An initialize-era server gets roster's error and passes it on; a 2026-07-28 server's
        // input_required cannot be answered, which is the client's missing capability.
        let code = if protocol == "legacy" { -32600 } else { -32021 };
        assert_eq!(error["code"], code, "{protocol}: {report}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("did not declare the sampling capability"),
            "{protocol}: {message}"
        );
    }
}

fn roster_inbox(state: &Path, args: &[&str]) -> String {
    common::cli(std::iter::once(&"inbox").chain(args))
        .state_dir(state)
        .stdout()
}

#[test]
fn without_a_client_that_can_answer_an_elicitation_waits_in_the_inbox() {
    for protocol in ["legacy", "modern"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let gateway = common::start_roster_http(&write_config(dir.path(), protocol));
        let state = dir.path().join("state");
        let calls = json!([["test_elicitation_sep1034_defaults", {}]]);
        let client: Child = client_command(
            &Via::Http(&gateway.url),
            "legacy",
            &calls,
            &["--declare", "none"],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Python client");
        let deadline = Instant::now() + Duration::from_secs(30);
        let pending = loop {
            let lines = roster_inbox(&state, &["pending", "--json"]);
            if let Some(line) = lines.lines().find(|l| !l.trim().is_empty()) {
                break serde_json::from_str::<Value>(line).expect("a JSON line");
            }
            assert!(Instant::now() < deadline, "{protocol}: no pending confirm");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(pending["channel"], "asker", "{pending}");
        assert_eq!(pending["method"], "elicitation/create", "{pending}");
        let id = pending["id"].as_u64().expect("an id").to_string();
        roster_inbox(&state, &["confirm", &id, "yes"]);
        let output = client.wait_with_output().expect("the client ends");
        let report = report_of(&output.stdout, &output.stderr, output.status.success());
        let answer = text(&report["results"][0]);
        assert!(
            answer.starts_with("Elicitation completed: action=accept")
                && answer.contains(r#""name": "John Doe""#),
            "{protocol}: a yes accepts with the defaults: {answer}"
        );
    }
}

#[test]
fn log_messages_during_a_call_reach_the_client_that_asked_for_them() {
    let calls = json!([["test_tool_with_logging", {}]]);
    let expected = json!([
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed"
    ]);
    for (protocol, mode) in [
        ("legacy", "legacy"),
        ("modern", "legacy"),
        ("modern", "2026-07-28"),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let gateway = common::start_roster_http(&write_config(dir.path(), protocol));
        let quiet = answering_client(Via::Http(&gateway.url), mode, calls.clone(), &[]);
        assert_eq!(
            quiet["logs"],
            json!([]),
            "{protocol}/{mode}: no level asked, no log messages"
        );
        let info = ["--log-level", "info"];
        let report = answering_client(Via::Http(&gateway.url), mode, calls.clone(), &info);
        assert_eq!(report["logs"], expected, "{protocol}/{mode}: {report}");
        let warning = ["--log-level", "warning"];
        let report = answering_client(Via::Http(&gateway.url), mode, calls.clone(), &warning);
        assert_eq!(
            report["logs"],
            json!([]),
            "{protocol}/{mode}: below the level"
        );
    }
}

#[test]
fn log_messages_outside_any_call_reach_the_sessions_that_asked_for_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), "legacy");
    // The server logs at debug, then at warning, after its call returned.
    let calls = json!([
        ["test_log_after_return", {}],
        ["wait:logs", {"count": 1}],
        ["test_simple_text", {}],
    ]);
    let report = answering_client(
        Via::Stdio(&config),
        "legacy",
        calls,
        &["--log-level", "info"],
    );
    assert_eq!(
        report["logs"],
        json!(["logged after the call"]),
        "the warning, not the debug message: {report}"
    );
}

#[test]
fn a_server_over_streamable_http_names_the_request_its_question_belongs_to() {
    // The fixture over streamable HTTP, initialize era: it asks on the response stream of the
    // request its question belongs to, so roster asks that request's client even while an
    // older request (whose client could not answer) is in flight to the same server.
    let port = common::free_port();
    let _server = common::KillOnDrop(
        Command::new(common::python())
            .arg(common::workspace_root().join("tests/python/conformance_server.py"))
            .args(["--http", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the fixture over HTTP"),
    );
    common::wait_for_port(port);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("roster.toml");
    let toml = format!(
        "[gateway]\nnaming = \"never\"\nstate_dir = {state:?}\n\n[servers.asker]\nurl = \"http://127.0.0.1:{port}/mcp\"\nprotocol = \"legacy\"\n",
        state = dir.path().join("state"),
    );
    std::fs::write(&config, toml).expect("write config");
    let gateway = common::start_roster_http(&config);
    let state = dir.path().join("state");

    // The older request: its client declared nothing, so its question waits in the inbox.
    let older: Child = client_command(
        &Via::Http(&gateway.url),
        "legacy",
        &json!([["test_elicitation_sep1034_defaults", {}]]),
        &["--declare", "none"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start the first client");
    let deadline = Instant::now() + Duration::from_secs(30);
    let pending = loop {
        let lines = roster_inbox(&state, &["pending", "--json"]);
        if let Some(line) = lines.lines().find(|l| !l.trim().is_empty()) {
            break serde_json::from_str::<Value>(line).expect("a JSON line");
        }
        assert!(Instant::now() < deadline, "the first call never waited");
        std::thread::sleep(Duration::from_millis(50));
    };

    let report = answering_client(
        Via::Http(&gateway.url),
        "legacy",
        json!([["test_sampling", {"prompt": "Which request?"}]]),
        &[],
    );
    assert_eq!(
        text(&report["results"][0]),
        "LLM response: sampled reply to: Which request?",
        "the younger request's client was asked: {report}"
    );

    let id = pending["id"].as_u64().expect("an id").to_string();
    roster_inbox(&state, &["confirm", &id, "yes"]);
    let output = older.wait_with_output().expect("the first client ends");
    let report = report_of(&output.stdout, &output.stderr, output.status.success());
    assert!(
        text(&report["results"][0]).starts_with("Elicitation completed: action=accept"),
        "{report}"
    );
}
