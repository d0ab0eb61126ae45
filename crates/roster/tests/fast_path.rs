//! The forwarding fast path end to end: a client's `tools/call` taken by the connection's lane
//! (stdio, and an initialize-era HTTP session) and sent to a stdio server past rmcp's service
//! keeps what the long way did: a client that cancels its call cancels it at the server, and
//! the server's progress reaches the client under the client's own token before the result.
//! The server is the Python SDK conformance fixture.
//!
//! Behind a streamable HTTP server roster POSTs a caller's request itself: the same holds there
//! (progress on the call's response stream, cancellation under roster's id, results and
//! arguments as written, whether the server answers with an event stream or JSON), a stream the
//! server closes is resumed, a POST the server refuses (a session a redeployed server does not
//! know) goes again through rmcp's transport, and a 2026-07-28 server gets the headers its era
//! asks of a call (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`), which it checks.
//!
//! Over stdio and in an initialize-era HTTP session the lane also answers a `tools/list` page
//! every caller shares from text made once per version of the tools (over HTTP the front
//! writes it in place of the lane's stand-in answer): those pages must be the ones rmcp's typed
//! path gives (a stateless 2026-07-28 HTTP request), in each era's shape, follow a change of
//! the tools, and never share a line with another answer written at the same time.

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
    config_with(dir, "")
}

fn config_with(dir: &std::path::Path, gateway: &str) -> std::path::PathBuf {
    config_of(dir, "tests/python/conformance_server.py", gateway)
}

/// A config serving the Python fixture at `fixture` (from the workspace root) as `fixture`.
fn config_of(dir: &std::path::Path, fixture: &str, gateway: &str) -> std::path::PathBuf {
    let fixture = common::workspace_root().join(fixture);
    let text = format!(
        "[gateway]\nnaming = \"never\"\nstartup_wait = \"20s\"\nstate_dir = {state:?}\n{gateway}\n\
         [servers.fixture]\ncommand = {python:?}\nargs = [{fixture:?}]\n",
        state = dir.join("state"),
        python = common::python(),
    );
    let config = dir.join("roster.toml");
    std::fs::write(&config, text).expect("write config");
    config
}

/// A config serving the server at `url` (streamable HTTP, initialize era) as `fixture`.
fn config_of_url(dir: &std::path::Path, url: &str) -> std::path::PathBuf {
    config_of_url_in(dir, url, "legacy")
}

/// [`config_of_url`] in era `protocol` (`legacy`, `modern`).
fn config_of_url_in(dir: &std::path::Path, url: &str, protocol: &str) -> std::path::PathBuf {
    let text = format!(
        "[gateway]\nnaming = \"never\"\nstartup_wait = \"20s\"\nstate_dir = {state:?}\n\n\
         [servers.fixture]\nurl = {url:?}\nprotocol = {protocol:?}\n",
        state = dir.join("state"),
    );
    let config = dir.join("roster.toml");
    std::fs::write(&config, text).expect("write config");
    config
}

/// The conformance fixture serving streamable HTTP (answering POSTs with JSON when `json`),
/// and its URL.
fn fixture_over_http(json: bool) -> (common::KillOnDrop, String) {
    let port = common::free_port();
    let mut command = std::process::Command::new(common::python());
    command
        .arg(common::workspace_root().join("tests/python/conformance_server.py"))
        .args(["--http", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if json {
        command.arg("--json-response");
    }
    let server = common::KillOnDrop(command.spawn().expect("start the fixture over HTTP"));
    common::wait_for_port(port);
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// `roster serve` over stdio with `config`: the process (killed when dropped) and its pipes.
fn serve_command(config: &std::path::Path) -> tokio::process::Command {
    let mut roster = tokio::process::Command::new(env!("CARGO_BIN_EXE_roster"));
    roster.arg("--config").arg(config).arg("serve");
    roster
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

/// [`walk`] through `roster serve` over stdio with `config`.
async fn walk_over_stdio(config: &std::path::Path, label: &str) {
    let (_child, stdout, stdin) = common::spawn_piped(serve_command(config));
    let listener = Listener::default();
    let client = listener
        .clone()
        .serve((stdout, stdin))
        .await
        .expect("connect to roster over stdio");
    walk(&client, &listener, label).await;
}

#[tokio::test]
async fn over_stdio_a_cancelled_call_is_cancelled_at_the_server_and_progress_arrives() {
    let dir = tempfile::tempdir().expect("temp dir");
    walk_over_stdio(&config(dir.path()), "over-stdio").await;
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

#[tokio::test]
async fn behind_streamable_http_a_cancelled_call_is_cancelled_at_the_server_and_progress_arrives() {
    // roster POSTs the call itself: the progress on its response stream reaches the client
    // before the result, and the client's cancel reaches the server under roster's id.
    let (_server, url) = fixture_over_http(false);
    let dir = tempfile::tempdir().expect("temp dir");
    walk_over_stdio(&config_of_url(dir.path(), &url), "behind-http").await;
}

/// `roster serve` over stdio spoken to line by line, so the test sees each answer's JSON as
/// roster wrote it.
struct RawStdio(common::JsonLines);

impl RawStdio {
    fn start(config: &std::path::Path) -> RawStdio {
        RawStdio(common::JsonLines::spawn(serve_command(config)))
    }

    /// The conformance fixture itself, with no roster in between.
    fn fixture() -> RawStdio {
        let script = common::workspace_root().join("tests/python/conformance_server.py");
        let mut fixture = tokio::process::Command::new(common::python());
        fixture.arg(script);
        RawStdio(common::JsonLines::spawn(fixture))
    }

    /// An initialize-era session, opened.
    async fn initialize(&mut self) {
        let params = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "raw", "version": "1"}});
        self.request(1, "initialize", params).await;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    async fn send(&mut self, message: Value) {
        self.0.send(&message).await;
    }

    /// Sends `message` as it is written.
    async fn send_text(&mut self, message: &str) {
        self.0.send_text(message).await;
    }

    /// The next answer (notifications roster sends in between are passed over), parsed.
    async fn answer(&mut self) -> Value {
        let line = self.answer_line().await;
        serde_json::from_str(&line).expect("checked")
    }

    /// The next answer as its line.
    async fn answer_line(&mut self) -> String {
        let wait = Duration::from_secs(30);
        self.0.next_where(wait, |m| m.get("id").is_some()).await.0
    }

    /// The `result` of a `tools/call` of `tool` as it was written.
    async fn call_text(&mut self, id: u64, tool: &str, arguments: &Value, meta: &Value) -> String {
        let params = json!({"name": tool, "arguments": arguments, "_meta": meta});
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
            .await;
        result_text(&self.answer_line().await, id)
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let answer = self.answer().await;
        assert_eq!(answer["id"], json!(id), "{answer}");
        answer
    }
}

/// Every page of `tools/list` over raw stdio, `meta` in each request's `_meta`.
async fn raw_pages(roster: &mut RawStdio, first_id: u64, meta: &Value) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut cursor = None;
    for id in first_id.. {
        let params = page_params(json!({"_meta": meta}), &cursor);
        let answer = roster.request(id, "tools/list", params).await;
        cursor = keep_page(&answer, &mut pages);
        if cursor.is_none() {
            return pages;
        }
    }
    unreachable!()
}

/// `params` with the cursor of the page to ask for, if it is not the first.
fn page_params(mut params: Value, cursor: &Option<String>) -> Value {
    if let Some(cursor) = cursor {
        params["cursor"] = json!(cursor);
    }
    params
}

/// Keeps the page `answer` holds; the cursor of the next one, none after the last.
fn keep_page(answer: &Value, pages: &mut Vec<Value>) -> Option<String> {
    let result = answer
        .get("result")
        .cloned()
        .unwrap_or_else(|| panic!("tools/list answered {answer}"));
    let cursor = result["nextCursor"].as_str().map(str::to_owned);
    pages.push(result);
    assert!(pages.len() < 100, "the listing ends");
    cursor
}

/// The `result` of the answer `line` to request `id`, as it was written.
fn result_text(line: &str, id: u64) -> String {
    #[derive(serde::Deserialize)]
    struct Answer {
        id: Value,
        result: Option<Box<serde_json::value::RawValue>>,
    }
    let answer: Answer = serde_json::from_str(line).expect("a JSON-RPC answer");
    assert_eq!(answer.id, json!(id), "{line}");
    let result = answer.result.unwrap_or_else(|| panic!("no result: {line}"));
    result.get().to_owned()
}

/// Every page of `tools/list` over HTTP with `token`, each answered as JSON: in an
/// initialize-era session, or (`modern`) as stateless 2026-07-28 requests.
async fn http_pages(url: &str, token: &str, modern: bool) -> Vec<Value> {
    let client = common::RawHttp::open(url, token, modern).await;
    let mut pages = Vec::new();
    let mut cursor = None;
    for id in 2.. {
        let params = page_params(json!({}), &cursor);
        let answer = client.request(id, "tools/list", params).await;
        let answer: Value = serde_json::from_str(&answer).expect("a JSON answer");
        assert_eq!(answer["id"], json!(id), "{answer}");
        cursor = keep_page(&answer, &mut pages);
        if cursor.is_none() {
            return pages;
        }
    }
    unreachable!()
}

fn names(pages: &[Value]) -> Vec<String> {
    pages
        .iter()
        .flat_map(|page| page["tools"].as_array().cloned().unwrap_or_default())
        .map(|tool| tool["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn shared_tools_pages_are_the_typed_pages_in_each_era_and_follow_changes() {
    // Each roster its own state directory (one process holds a directory's inbox).
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("temp dir"))
        .collect();
    let configs: Vec<_> = dirs
        .iter()
        .map(|dir| config_with(dir.path(), "page_size = 4\npage_bytes = 1024\n"))
        .collect();
    // Over HTTP, client `own` may not use a tool no one has: its pages are its own, and so
    // take rmcp's typed path; client `all` gets the pages every caller shares.
    let clients = "\n[[clients]]\nname = \"own\"\n\
        token_sha256 = \"ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb\"\n\
        tools.deny = [\"no_such_tool\"]\n\n\
        [[clients]]\nname = \"all\"\n\
        token_sha256 = \"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d\"\n";
    let text = std::fs::read_to_string(&configs[0]).expect("read config");
    std::fs::write(&configs[0], text + clients).expect("write config");

    // The typed path: rmcp's dispatch and serializer (rmcp's client, token "a").
    let http = common::start_roster_http(&configs[0]);
    let transport = StreamableHttpClientTransport::from_config(
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            http.url.as_str(),
        )
        .auth_header("a"),
    );
    let client = ().serve(transport).await.expect("connect to roster over HTTP");
    let mut typed = Vec::new();
    let mut cursor = None;
    loop {
        let page = client
            .peer()
            .list_tools(Some(
                rmcp::model::PaginatedRequestParams::default().with_cursor(cursor),
            ))
            .await
            .expect("tools/list over HTTP");
        cursor = page.next_cursor.clone();
        typed.push(page);
        if cursor.is_none() {
            break;
        }
    }
    assert!(
        typed.len() >= 4,
        "page_size 4 makes several pages: {}",
        typed.len()
    );
    // A page ends at 4 tools, or before the tool that would take its tools past 1,024 bytes
    // of JSON: some pages here end at the bytes.
    let lengths: Vec<Vec<usize>> = typed
        .iter()
        .map(|page| {
            let tools = page.tools.iter();
            tools
                .map(|t| serde_json::to_vec(t).expect("JSON").len())
                .collect()
        })
        .collect();
    for page in &lengths {
        let bytes: usize = page.iter().sum();
        assert!(
            page.len() <= 4 && (bytes <= 1024 || page.len() == 1),
            "a page of {} tools in {bytes} bytes",
            page.len()
        );
    }
    let cut_by_bytes = lengths
        .iter()
        .zip(lengths.iter().skip(1))
        .any(|(page, next)| page.len() < 4 && page.iter().sum::<usize>() + next[0] > 1024);
    assert!(cut_by_bytes, "no page ended at its bytes: {lengths:?}");

    // An initialize-era session over stdio, and a stateless 2026-07-28 one.
    let mut legacy = RawStdio::start(&configs[1]);
    legacy.initialize().await;
    let legacy_pages = raw_pages(&mut legacy, 2, &json!({})).await;
    let mut modern = RawStdio::start(&configs[2]);
    let modern_pages = raw_pages(&mut modern, 1, &common::modern_meta()).await;
    // An initialize-era HTTP session: the front writes the lane's text.
    let session_pages = http_pages(&http.url, "b", false).await;
    assert_eq!(
        session_pages, legacy_pages,
        "an HTTP session lists what stdio does in its era"
    );

    let stateless_pages = http_pages(&http.url, "b", true).await;
    assert_eq!(
        stateless_pages, modern_pages,
        "2026-07-28 requests over HTTP list what they do over stdio"
    );

    for (era, pages) in [
        ("2025-11-25", &legacy_pages),
        ("2026-07-28", &modern_pages),
        ("2025-11-25 over HTTP", &session_pages),
    ] {
        assert_eq!(
            pages.len(),
            typed.len(),
            "{era}: as many pages as the typed path"
        );
        for (raw, typed) in pages.iter().zip(&typed) {
            let tools = serde_json::to_value(&typed.tools).expect("tools are JSON");
            assert_eq!(
                raw["tools"], tools,
                "{era}: the same tools on the same page"
            );
            assert_eq!(
                raw["nextCursor"].as_str(),
                typed.next_cursor.as_deref(),
                "{era}: the same cursor"
            );
            assert_eq!(raw["cacheScope"], json!("public"), "{era}: {raw}");
            assert_eq!(raw["ttlMs"], json!(0), "{era}: {raw}");
        }
    }
    for page in &legacy_pages {
        assert!(
            page.get("resultType").is_none(),
            "no resultType before 2026-07-28: {page}"
        );
    }
    for page in &modern_pages {
        assert_eq!(page["resultType"], json!("complete"), "{page}");
    }

    // The same pages again (now from the kept text), then a change of the server's tools:
    // the next listing has the new tool.
    assert_eq!(raw_pages(&mut legacy, 100, &json!({})).await, legacy_pages);
    let before = names(&legacy_pages);
    assert!(
        !before.iter().any(|n| n == "test_dynamic_tool"),
        "{before:?}"
    );
    let changed = legacy
        .request(
            200,
            "tools/call",
            json!({"name": "test_trigger_tool_change", "arguments": {}}),
        )
        .await;
    assert!(changed.get("result").is_some(), "{changed}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut id = 300;
    loop {
        let after = names(&raw_pages(&mut legacy, id, &json!({})).await);
        if after.iter().any(|n| n == "test_dynamic_tool") {
            assert_eq!(after.len(), before.len() + 1, "{after:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new tool is never listed: {after:?}"
        );
        id += 100;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Many pages and calls at once: each answer is a line of its own.
    let mut expected = std::collections::BTreeSet::new();
    for i in 0..200u64 {
        let id = 10_000 + i;
        let message = if i % 2 == 0 {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "test_simple_text", "arguments": {}}})
        };
        legacy.send(message).await;
        expected.insert(id);
    }
    while !expected.is_empty() {
        let answer = legacy.answer().await;
        let id = answer["id"].as_u64().expect("a numeric id");
        assert!(answer.get("result").is_some(), "{answer}");
        assert!(expected.remove(&id), "answered once: {id}");
    }
}

/// The fixture's tools whose results the next test compares, with their arguments.
fn result_tools() -> Vec<(&'static str, Value)> {
    vec![
        ("test_simple_text", json!({})),
        ("test_image_content", json!({})),
        ("test_audio_content", json!({})),
        ("test_embedded_resource", json!({})),
        ("test_multiple_content_types", json!({})),
        ("test_error_handling", json!({})),
        (
            "json_schema_2020_12_tool",
            json!({"name": "a \"quoted\" name\n"}),
        ),
    ]
}

/// `result` (an initialize-era result) as a 2026-07-28 client gets it.
fn completed(result: &str) -> Value {
    let mut result: Value = serde_json::from_str(result).expect("json");
    result["resultType"] = json!("complete");
    result
}

#[tokio::test]
async fn tool_results_reach_clients_as_the_server_wrote_them_in_each_era() {
    // What the fixture writes itself, to an initialize-era client.
    let mut fixture = RawStdio::fixture();
    fixture.initialize().await;
    let mut own = Vec::new();
    for (id, (tool, arguments)) in (10..).zip(result_tools()) {
        own.push(fixture.call_text(id, tool, &arguments, &json!({})).await);
    }
    assert!(own[5].contains("\"isError\":true"), "{}", own[5]);

    // roster speaks the same era to the fixture; each roster its own state directory.
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("temp dir"))
        .collect();
    let configs: Vec<_> = dirs
        .iter()
        .map(|dir| {
            let config = config(dir.path());
            let text = std::fs::read_to_string(&config).expect("read config");
            std::fs::write(&config, text + "protocol = \"legacy\"\n").expect("write config");
            config
        })
        .collect();
    let mut legacy = RawStdio::start(&configs[0]);
    legacy.initialize().await;
    let mut modern = RawStdio::start(&configs[1]);
    let http = common::start_roster_http(&configs[2]);
    // The fixture behind streamable HTTP, answering on an event stream and with JSON.
    let behind: Vec<_> = [false, true].map(fixture_over_http).into();
    let behind_dirs: Vec<_> = (0..2)
        .map(|_| tempfile::tempdir().expect("temp dir"))
        .collect();
    let mut over_http = Vec::new();
    for ((_, url), dir) in behind.iter().zip(&behind_dirs) {
        let mut roster = RawStdio::start(&config_of_url(dir.path(), url));
        roster.initialize().await;
        over_http.push(roster);
    }
    let session = common::RawHttp::open(&http.url, "t", false).await;
    let stateless = common::RawHttp::open(&http.url, "t", true).await;
    for (id, ((tool, arguments), own)) in (20..).zip(result_tools().into_iter().zip(&own)) {
        // An initialize-era client gets the server's very bytes, over stdio and over HTTP.
        let text = legacy.call_text(id, tool, &arguments, &json!({})).await;
        assert_eq!(&text, own, "{tool} over stdio");
        for (roster, how) in over_http.iter_mut().zip(["an event stream", "JSON"]) {
            let text = roster.call_text(id, tool, &arguments, &json!({})).await;
            assert_eq!(
                &text, own,
                "{tool} from the server over HTTP, answering with {how}"
            );
        }
        let params = json!({"name": tool, "arguments": arguments});
        let answer = session.request(id, "tools/call", params.clone()).await;
        assert_eq!(&result_text(&answer, id), own, "{tool} in an HTTP session");
        // A 2026-07-28 client is told the result is complete as well.
        let text = modern
            .call_text(id, tool, &arguments, &common::modern_meta())
            .await;
        let sent: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(sent, completed(own), "{tool} over stdio, 2026-07-28");
        let answer = stateless.request(id, "tools/call", params).await;
        let sent: Value = serde_json::from_str(&result_text(&answer, id)).expect("json");
        assert_eq!(sent, completed(own), "{tool} over HTTP, 2026-07-28");
    }
}

#[tokio::test]
async fn a_call_s_arguments_reach_the_server_as_the_client_wrote_them() {
    // A whole number no f64 or i64 holds (a parse into serde_json's numbers rounds it), text
    // with escapes, and `_meta` after the arguments.
    let arguments = r#"{"big":123456789012345678901234567890,"text":"\u00e9 \"q\"\n","nested":{"a":[1,{"b":null}]}}"#;
    let call = |id: u64, meta: &Value| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo_arguments","arguments":{arguments},"_meta":{meta}}}}}"#
        )
    };
    // What the server answers: the arguments it read, as JSON (Python reads the number whole).
    let echoed = |answer: &str| -> String {
        let answer: Value = serde_json::from_str(answer).expect("a JSON answer");
        let text = answer["result"]["content"][0]["text"].as_str();
        text.unwrap_or_else(|| panic!("a text result: {answer}"))
            .to_owned()
    };
    let expected = |echo: &str| {
        assert!(
            echo.contains("\"big\": 123456789012345678901234567890"),
            "the number arrived whole: {echo}"
        );
        let echo: Value = serde_json::from_str(echo).expect("JSON");
        assert_eq!(echo["text"], json!("é \"q\"\n"), "{echo}");
        assert_eq!(echo["nested"], json!({"a": [1, {"b": null}]}), "{echo}");
    };

    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("temp dir"))
        .collect();
    let configs: Vec<_> = dirs
        .iter()
        .map(|dir| config_of(dir.path(), "tests/python/servers/echo_arguments.py", ""))
        .collect();
    // Over stdio in each era.
    let mut legacy = RawStdio::start(&configs[0]);
    legacy.initialize().await;
    legacy.send_text(&call(7, &json!({}))).await;
    expected(&echoed(&legacy.answer_line().await));
    let mut modern = RawStdio::start(&configs[1]);
    modern.send_text(&call(8, &common::modern_meta())).await;
    expected(&echoed(&modern.answer_line().await));
    // In an HTTP session.
    let http = common::start_roster_http(&configs[2]);
    let session = common::RawHttp::open(&http.url, "t", false).await;
    let answer = session
        .post_text("tools/call", Some("echo_arguments"), call(9, &json!({})))
        .await;
    assert_eq!(answer.status(), 200);
    expected(&echoed(&answer.text().await.expect("an answer")));

    // A server behind legacy HTTP+SSE: roster's writer POSTs the arguments as they came.
    let (_server, port) = common::spawn_python_http("echo_arguments.py", "sse", &[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("roster.toml");
    let text = format!(
        "[gateway]\nnaming = \"never\"\nstartup_wait = \"20s\"\nstate_dir = {state:?}\n\n\
         [servers.echo]\nurl = \"http://127.0.0.1:{port}/sse\"\ntransport = \"sse\"\n",
        state = dir.path().join("state"),
    );
    std::fs::write(&config, text).expect("write config");
    let mut sse = RawStdio::start(&config);
    sse.initialize().await;
    sse.send_text(&call(10, &json!({}))).await;
    expected(&echoed(&sse.answer_line().await));

    // A server behind streamable HTTP (answering on an event stream, and with JSON), in each
    // era: roster POSTs the arguments as they came.
    for (id, extra, era) in [
        (11, &[][..], "legacy"),
        (12, &["--json-response"][..], "legacy"),
        (13, &[][..], "modern"),
        (14, &["--json-response"][..], "modern"),
    ] {
        let (_server, port) =
            common::spawn_python_http("echo_arguments.py", "streamable-http", extra);
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("http://127.0.0.1:{port}/mcp");
        let mut roster = RawStdio::start(&config_of_url_in(dir.path(), &url, era));
        roster.initialize().await;
        roster.send_text(&call(id, &json!({}))).await;
        expected(&echoed(&roster.answer_line().await));
    }
}

#[tokio::test]
async fn behind_a_2026_07_28_http_server_a_call_carries_its_era_s_headers() {
    // The fixture speaks 2026-07-28 over HTTP and checks each call's `Mcp-Method`, `Mcp-Name`
    // and `Mcp-Param-Region` (the tool marks `region` with `x-mcp-header`) against its body.
    for json in [false, true] {
        let (_fixture, url) = fixture_over_http(json);
        let dir = tempfile::tempdir().expect("temp dir");
        let mut roster = RawStdio::start(&config_of_url_in(dir.path(), &url, "modern"));
        roster.initialize().await;
        // A plain value, and one that travels Base64-wrapped (non-ASCII, a space at its end).
        for (id, region) in [(5, "eu-west-1"), (6, "Zürich ")] {
            let text = roster
                .call_text(
                    id,
                    "test_custom_header",
                    &json!({"region": region}),
                    &json!({}),
                )
                .await;
            let result: Value = serde_json::from_str(&text).expect("json");
            assert_eq!(
                result["content"][0]["text"],
                json!(format!("region {region}")),
                "json answers {json}: {result}"
            );
        }
        // A tool with no marks: `Mcp-Name` names it.
        let text = roster
            .call_text(7, "test_simple_text", &json!({}), &json!({}))
            .await;
        assert!(text.contains("This is a simple text response"), "{text}");
    }
}

#[tokio::test]
async fn a_call_whose_response_stream_the_server_closes_is_answered_on_the_resumed_stream() {
    // The server closes the call's event stream after a log message (SEP-1699 polling) and
    // answers on the stream roster resumes from the last event id.
    let (_server, port) =
        common::spawn_python_http("echo_arguments.py", "streamable-http", &["--resumable"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut roster = RawStdio::start(&config_of_url(dir.path(), &url));
    roster.initialize().await;
    let text = roster
        .call_text(5, "closes_its_stream", &json!({}), &json!({}))
        .await;
    let result: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        result["content"][0]["text"],
        json!("answered after the stream closed"),
        "{result}"
    );
}

#[tokio::test]
async fn a_server_redeployed_behind_the_same_url_answers_the_next_calls() {
    // The new process knows nothing of roster's session: roster's own POST is refused (404)
    // and the call goes again through rmcp's transport, which opens a new session.
    let port = common::free_port();
    let start = || {
        let child = std::process::Command::new(common::python())
            .arg(common::python_fixture("echo_arguments.py"))
            .args([
                "--transport",
                "streamable-http",
                "--port",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the fixture");
        common::wait_for_port(port);
        common::KillOnDrop(child)
    };
    let server = start();
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut roster = RawStdio::start(&config_of_url(dir.path(), &url));
    roster.initialize().await;
    let arguments = json!({"big": 1, "text": "t", "nested": {}});
    let call = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                               "params": {"name": "echo_arguments", "arguments": arguments}})
    };
    let answered = |answer: &Value| answer["result"]["isError"] == json!(false);
    roster.send(call(2)).await;
    let first = roster.answer().await;
    assert!(answered(&first), "{first}");

    drop(server);
    let _server = start();
    roster.send(call(3)).await;
    let answer = roster.answer().await;
    assert!(
        answered(&answer),
        "the first call after the redeploy: {answer}"
    );
}
