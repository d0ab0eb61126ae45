//! The HTTP front seen from outside: `roster serve --http` as a real process on 127.0.0.1,
//! driven with raw HTTP (reqwest, or a TcpStream where the exact bytes matter) and with the
//! official Python SDK client. Plain JSON answers in the initialize era, DELETE status codes,
//! sessions bound to their client and bounded, the header-read timeout, the connection cap,
//! `/healthz`, parse errors, the bearer scheme, and the answer to a request cut by shutdown.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use common::mcp_http::{self, ACCEPT_BOTH, VERSION};

/// A running `roster serve --http`: `[gateway]` lines, then `extra` TOML (servers, clients);
/// `env` for the process.
fn start(gateway: &str, extra: &str, env: &[(&str, &str)]) -> common::Gateway {
    common::Gateway::start(
        |dir| {
            format!(
                "[gateway]\nstate_dir = {state:?}\n{gateway}\n\n{extra}\n",
                state = dir.join("state"),
            )
        },
        env,
    )
}

/// With the dynamic Python server as `dynamic`.
fn with_dynamic(gateway: &str, extra: &str, env: &[(&str, &str)]) -> common::Gateway {
    let server = common::dynamic_server_toml("dynamic", "legacy", &[]);
    start(gateway, &format!("{server}\n{extra}"), env)
}

/// Opens a session on a gateway fronting the dynamic server and calls its `slow` tool
/// (`seconds` long), with a progress token when `progress` names one; the response is the
/// caller's to read.
async fn slow_call(
    roster: &common::Gateway,
    id: u64,
    seconds: Value,
    progress: Option<&str>,
) -> reqwest::Response {
    let session = open_session(&roster.url, None).await;
    let mut params = json!({"name": "dynamic__slow", "arguments": {"seconds": seconds}});
    if let Some(token) = progress {
        params["_meta"] = json!({"progressToken": token});
    }
    post(
        &roster.url,
        None,
        Some(&session),
        &request(id, "tools/call", params),
    )
    .send()
    .await
    .expect("tools/call")
}

fn clients(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("[[clients]]\nname = {n:?}\ntoken_env = \"ROSTER_TEST_TOKEN_{n}\"\n"))
        .collect()
}

fn post(
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    body: &Value,
) -> reqwest::RequestBuilder {
    mcp_http::post(&reqwest::Client::new(), url, token, session, body)
}

fn initialize_body(id: u64) -> Value {
    mcp_http::initialize(id, "gateway_http", json!({}))
}

/// Opens a session for `token`'s client and returns its id.
async fn open_session(url: &str, token: Option<&str>) -> String {
    let http = reqwest::Client::new();
    mcp_http::open_session(&http, url, token, "gateway_http", json!({})).await
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// The JSON messages of an SSE body, in order.
fn sse_messages(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .collect();
            serde_json::from_str(&data.join("\n")).ok()
        })
        .collect()
}

async fn delete(url: &str, token: Option<&str>, session: &str) -> reqwest::Response {
    mcp_http::delete(&reqwest::Client::new(), url, token, session).await
}

#[tokio::test]
async fn initialize_era_answers_are_plain_json_when_nothing_precedes_them() {
    let roster = with_dynamic("", "", &[]);
    let response = post(&roster.url, None, None, &initialize_body(1))
        .send()
        .await
        .expect("initialize");
    assert_eq!(content_type(&response), "application/json");
    assert!(response.headers().contains_key("mcp-session-id"));
    let answer: Value = response.json().await.expect("JSON body");
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["protocolVersion"], VERSION);

    let session = open_session(&roster.url, None).await;
    let call = request(
        2,
        "tools/call",
        json!({"name": "dynamic__echo", "arguments": {"text": "hi"}}),
    );
    let response = post(&roster.url, None, Some(&session), &call)
        .send()
        .await
        .expect("tools/call");
    assert_eq!(response.status(), 200);
    assert_eq!(content_type(&response), "application/json");
    let answer: Value = response.json().await.expect("JSON body");
    assert_eq!(answer["id"], 2);
    assert_eq!(
        common::text_of(&answer["result"]),
        "dynamic: hi",
        "{answer}"
    );
}

#[tokio::test]
async fn a_call_that_reports_progress_first_still_streams_everything() {
    let roster = with_dynamic("", "", &[]);
    let response = slow_call(&roster, 7, json!(0.05), Some("p7")).await;
    assert_eq!(content_type(&response), "text/event-stream");
    let body = response.text().await.expect("SSE body");
    let messages = sse_messages(&body);
    let progress = messages
        .iter()
        .position(|m| m["method"] == "notifications/progress")
        .unwrap_or_else(|| panic!("no progress in {body}"));
    let answer = messages
        .iter()
        .position(|m| m["id"] == 7)
        .unwrap_or_else(|| panic!("no answer in {body}"));
    assert!(progress < answer, "{body}");
    assert_eq!(messages[progress]["params"]["progressToken"], "p7");
    assert_eq!(
        common::text_of(&messages[answer]["result"]),
        "done",
        "{body}"
    );
}

#[tokio::test]
async fn a_call_slower_than_the_json_wait_streams_so_the_client_sees_keep_alives() {
    let roster = with_dynamic("", "", &[]);
    // No progress token: the server sends nothing before its answer, 12 s later (past the
    // front's 10 s wait for a plain JSON answer).
    let response = slow_call(&roster, 8, json!(12), None).await;
    assert_eq!(content_type(&response), "text/event-stream");
    let body = response.text().await.expect("SSE body");
    let messages = sse_messages(&body);
    assert!(
        messages.iter().all(|m| m.get("method").is_none()),
        "nothing but the answer was sent, so only the wait made it a stream: {body}"
    );
    let answer = messages
        .into_iter()
        .find(|m| m["id"] == 8)
        .unwrap_or_else(|| panic!("no answer in {body}"));
    assert_eq!(common::text_of(&answer["result"]), "done", "{body}");
}

#[tokio::test]
async fn delete_answers_204_and_an_unknown_session_404() {
    let roster = start("", "", &[]);
    let session = open_session(&roster.url, None).await;
    assert_eq!(delete(&roster.url, None, &session).await.status(), 204);
    assert_eq!(delete(&roster.url, None, &session).await.status(), 404);
    assert_eq!(
        delete(&roster.url, None, "no-such-session").await.status(),
        404
    );
    let list = request(2, "tools/list", json!({}));
    let after = post(&roster.url, None, Some(&session), &list)
        .send()
        .await
        .expect("POST after DELETE");
    assert_eq!(after.status(), 404);
}

/// The official Python SDK client ends its session with DELETE on leaving its context and
/// logs a warning when the answer is not 200 or 204.
const PYTHON_SESSION: &str = r#"
import logging, sys
import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)

async def main():
    async with streamable_http_client(sys.argv[1]) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            tools = await session.list_tools()
            print(len(tools.tools))

anyio.run(main)
"#;

#[test]
fn the_python_sdk_ends_its_session_without_a_warning() {
    let roster = start("", "", &[]);
    for python in [common::python(), common::python_mcp1()] {
        let output = Command::new(&python)
            .args(["-c", PYTHON_SESSION, &roster.url])
            .output()
            .unwrap_or_else(|e| panic!("run the Python SDK client {python:?}: {e}"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{python:?} failed: {stderr}");
        let listed: usize = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no tool count from {python:?}; stderr: {stderr}"));
        assert!(listed > 0, "the native tools are listed");
        // The DELETE went out (debug logging shows the request) and was taken.
        assert!(
            stderr.contains("DELETE"),
            "{python:?} sent no DELETE: {stderr}"
        );
        assert!(!stderr.contains("Session termination failed"), "{stderr}");
    }
}

#[tokio::test]
async fn a_session_answers_only_the_client_that_opened_it() {
    let env = [
        ("ROSTER_TEST_TOKEN_alice", "alice-token"),
        ("ROSTER_TEST_TOKEN_bob", "bob-token"),
    ];
    let roster = start("", &clients(&["alice", "bob"]), &env);
    let alice = Some("alice-token");
    let bob = Some("bob-token");
    let session = open_session(&roster.url, alice).await;
    let list = request(2, "tools/list", json!({}));

    let unknown = post(&roster.url, bob, Some("no-such-session"), &list)
        .send()
        .await
        .expect("POST");
    let (unknown_status, unknown_body) = (unknown.status(), unknown.text().await.expect("body"));
    assert_eq!(unknown_status, 404);
    let foreign = post(&roster.url, bob, Some(&session), &list)
        .send()
        .await
        .expect("POST");
    assert_eq!(foreign.status(), unknown_status);
    assert_eq!(foreign.text().await.expect("body"), unknown_body);

    let stream = reqwest::Client::new()
        .get(&roster.url)
        .bearer_auth("bob-token")
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", VERSION)
        .send()
        .await
        .expect("GET");
    assert_eq!(stream.status(), 404);
    assert_eq!(delete(&roster.url, bob, &session).await.status(), 404);

    let own = post(&roster.url, alice, Some(&session), &list)
        .send()
        .await
        .expect("POST");
    assert_eq!(own.status(), 200, "alice's session survived bob's attempts");
    assert_eq!(delete(&roster.url, alice, &session).await.status(), 204);
}

#[tokio::test]
async fn initialize_over_a_session_bound_is_refused_with_503_naming_it() {
    let env = [
        ("ROSTER_TEST_TOKEN_alice", "alice-token"),
        ("ROSTER_TEST_TOKEN_bob", "bob-token"),
    ];
    let roster = start(
        "max_sessions = 3\nmax_sessions_per_client = 2",
        &clients(&["alice", "bob"]),
        &env,
    );
    let alice = Some("alice-token");
    let first = open_session(&roster.url, alice).await;
    open_session(&roster.url, alice).await;
    let refused = post(&roster.url, alice, None, &initialize_body(9))
        .send()
        .await
        .expect("initialize");
    assert_eq!(refused.status(), 503);
    let error: Value = refused.json().await.expect("a JSON-RPC error");
    assert_eq!(error["id"], 9);
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("max_sessions_per_client"), "{error}");

    open_session(&roster.url, Some("bob-token")).await;
    let refused = post(&roster.url, Some("bob-token"), None, &initialize_body(10))
        .send()
        .await
        .expect("initialize");
    assert_eq!(refused.status(), 503);
    let error: Value = refused.json().await.expect("a JSON-RPC error");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("[gateway] max_sessions)"), "{error}");

    // Ending a session makes room again.
    assert_eq!(delete(&roster.url, alice, &first).await.status(), 204);
    open_session(&roster.url, alice).await;
}

#[tokio::test]
async fn an_idle_session_expires_and_its_place_is_freed() {
    let env = [("ROSTER_TEST_ADMIN", "admin-token")];
    let roster = start(
        "session_idle_timeout = \"1s\"\nmax_sessions = 1\nadmin_token_env = \"ROSTER_TEST_ADMIN\"",
        "",
        &env,
    );
    let session = open_session(&roster.url, None).await;
    let ping = request(2, "ping", json!({}));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = post(&roster.url, None, Some(&session), &ping)
            .send()
            .await
            .expect("ping")
            .status();
        if status == 404 {
            break;
        }
        assert_eq!(status, 200);
        assert!(Instant::now() < deadline, "the idle session never expired");
        // Each ping is traffic; wait longer than the idle timeout between them.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let health = roster.health("admin-token").await;
    assert_eq!(health["sessions"], 0, "{health}");
    // With max_sessions = 1, a new session proves the expired one's place was given back.
    open_session(&roster.url, None).await;
}

/// Reads from `stream` until the server closes it (bounded: a hang fails the test).
fn read_until_closed(stream: &mut TcpStream) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server never closed the connection: {e}"),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn a_connection_that_trickles_its_headers_is_closed() {
    let roster = start("header_read_timeout = \"1s\"", "", &[]);
    let mut stream = TcpStream::connect(roster.addr()).expect("connect");
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .expect("write part of the headers");
    // Never finish the headers: the server must give up and close.
    read_until_closed(&mut stream);
}

#[test]
fn a_body_that_never_arrives_gets_408_naming_the_bound() {
    let roster = start("body_read_timeout = \"1s\"", "", &[]);
    let mut stream = TcpStream::connect(roster.addr()).expect("connect");
    stream
        .write_all(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n\
              accept: application/json, text/event-stream\r\ncontent-length: 100\r\n\r\n{\"jsonrpc\"",
        )
        .expect("write the headers and part of the body");
    let answer = read_until_closed(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_read_timeout"), "{answer}");
}

#[test]
fn connections_over_the_cap_are_refused_naming_it() {
    let roster = start(
        "max_connections = 2\nheader_read_timeout = \"60s\"",
        "",
        &[],
    );
    let healthz = |stream: &mut TcpStream| {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .expect("write");
        let mut buf = [0u8; 512];
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let n = stream.read(&mut buf).expect("read an answer");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    // Two held connections, each shown to be served (so both hold a place).
    let mut first = TcpStream::connect(roster.addr()).expect("connect");
    assert!(healthz(&mut first).starts_with("HTTP/1.1 200"));
    let mut second = TcpStream::connect(roster.addr()).expect("connect");
    assert!(healthz(&mut second).starts_with("HTTP/1.1 200"));

    let mut third = TcpStream::connect(roster.addr()).expect("connect");
    let answer = read_until_closed(&mut third);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("max_connections"), "{answer}");

    drop(first);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut next = TcpStream::connect(roster.addr()).expect("connect");
        if healthz(&mut next).starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the freed place was never given back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn healthz_shows_only_ok_without_the_admin_token_and_never_a_secret() {
    let server =
        "[servers.web]\nurl = \"http://user:pw-s3cret@127.0.0.1:1/mcp?api_key=k3y-s3cret\"\n";
    let env = [("ROSTER_TEST_ADMIN", "admin-token")];
    let roster = start(
        "admin_token_env = \"ROSTER_TEST_ADMIN\"\nstartup_wait = \"0s\"",
        server,
        &env,
    );
    let client = reqwest::Client::new();
    let get = |token: Option<&str>, host: Option<&str>, origin: Option<&str>| {
        let mut request = client.get(roster.healthz());
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    for token in [None, Some("wrong")] {
        let response = get(token, None, None).await.expect("healthz");
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.expect("body"), r#"{"status":"ok"}"#);
    }
    let foreign = get(None, Some("evil.example"), None)
        .await
        .expect("healthz");
    assert_eq!(foreign.status(), 403);
    let foreign = get(Some("admin-token"), None, Some("http://evil.example"))
        .await
        .expect("healthz");
    assert_eq!(foreign.status(), 403);

    // The admin sees the servers once the unreachable one has failed, never its secrets.
    let deadline = Instant::now() + Duration::from_secs(30);
    let full = loop {
        let response = get(Some("admin-token"), None, None).await.expect("healthz");
        assert_eq!(response.status(), 200);
        let text = response.text().await.expect("body");
        let full: Value = serde_json::from_str(&text).expect("JSON");
        if full["servers"][0]["last_error"].is_string() {
            break text;
        }
        assert!(Instant::now() < deadline, "the server never failed: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(full.contains("\"web\""), "{full}");
    assert!(!full.contains("s3cret"), "a secret leaked: {full}");
}

#[tokio::test]
async fn a_body_that_is_not_json_gets_a_parse_error() {
    let roster = start("", "", &[]);
    let response = reqwest::Client::new()
        .post(&roster.url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .body("{\"jsonrpc\": \"2.0\", garbage")
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), 400);
    assert_eq!(content_type(&response), "application/json");
    let error: Value = response.json().await.expect("JSON-RPC error");
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert_eq!(error["id"], Value::Null);
}

#[tokio::test]
async fn a_known_method_with_unfit_params_is_invalid_params_and_an_unknown_one_not_found() {
    let roster = start("", "", &[]);
    let session = open_session(&roster.url, None).await;
    for (body, code, names) in [
        (request(2, "tools/call", json!({})), -32602, "params.name"),
        (
            request(3, "tools/call", json!({"name": 7, "arguments": {}})),
            -32602,
            "params.name",
        ),
        (
            request(4, "no/such/method", json!({})),
            -32601,
            "no/such/method",
        ),
    ] {
        let response = post(&roster.url, None, Some(&session), &body)
            .send()
            .await
            .expect("POST");
        let answer: Value = response.json().await.expect("JSON-RPC error");
        assert_eq!(answer["error"]["code"], code, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(names), "{answer}");
    }
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let env = [("ROSTER_TEST_TOKEN_alice", "alice-token")];
    let roster = start("", &clients(&["alice"]), &env);
    for scheme in ["BEARER", "bearer", "Bearer"] {
        let response = reqwest::Client::new()
            .post(&roster.url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .header("authorization", format!("{scheme} alice-token"))
            .body(initialize_body(1).to_string())
            .send()
            .await
            .expect("POST");
        assert_eq!(response.status(), 200, "{scheme}");
    }
    let response = reqwest::Client::new()
        .post(&roster.url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("authorization", "Basic alice-token")
        .body(initialize_body(1).to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), 401);
}

#[tokio::test]
async fn a_request_in_flight_at_shutdown_is_answered_with_an_error_naming_it() {
    let roster = with_dynamic("", "", &[]);
    let response = slow_call(&roster, 5, json!(120), Some("p5")).await;
    let mut body = response.bytes_stream();
    let mut text = String::new();
    // The progress event shows the call is running at the server.
    while !text.contains("notifications/progress") {
        let chunk = body
            .next()
            .await
            .expect("the stream ended before progress")
            .expect("a chunk");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let pid = roster.child.0.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("send SIGTERM");
    assert!(killed.success());
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => text.push_str(&String::from_utf8_lossy(&chunk)),
            Err(e) => panic!("the answer was cut instead of answered: {e}; so far: {text}"),
        }
    }
    let answer = sse_messages(&text)
        .into_iter()
        .find(|m| m["id"] == 5)
        .unwrap_or_else(|| panic!("no answer to the call: {text}"));
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("shutting down"), "{answer}");
}

/// The threads of process `pid` tokio runs (its workers, and any blocking threads: tokio names
/// them alike).
fn runtime_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the process's threads")
        .filter_map(Result::ok)
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.starts_with("tokio-r"))
        })
        .count()
}

/// `--workers N` serves on N worker threads; 0 is refused with an error naming the flag.
#[tokio::test]
async fn serve_runs_on_the_worker_threads_asked_for() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = common::write_roster_toml(
        dir.path(),
        &format!("[gateway]\nstate_dir = {:?}\n", dir.path().join("state")),
    );
    let refused = common::serve_command(&config)
        .args(["--workers", "0"])
        .output()
        .expect("roster runs");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--workers"), "{stderr}");
    let mut command = common::serve_command(&config);
    command
        .args(["--workers", "3"])
        .env_remove("TOKIO_WORKER_THREADS");
    let (child, url) = common::serve_http(command);
    let gateway = common::KillOnDrop(child);
    let threads = runtime_threads(gateway.0.id());
    assert!(threads >= 3, "{threads} runtime threads");
    let health = url.replace("/mcp", "/healthz");
    let body = reqwest::get(&health)
        .await
        .expect("GET /healthz")
        .text()
        .await
        .expect("its body");
    assert!(body.contains("\"ok\""), "{body}");
}
