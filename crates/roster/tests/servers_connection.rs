//! One connection at a time against real servers: handshake in both eras, paging, calls,
//! notifications, garbage on stdout, the legacy SSE transport, streamable HTTP.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use roster::config::{Era, ServerConfig, TransportConfig};
use roster::servers::{CallOptions, Connection, Notifications, RequestError};
use serde_json::{Value, json};

use common::{args, text_of};

fn dynamic_stdio(era: Era, extra: &[&str]) -> ServerConfig {
    let mut args = vec![
        common::python_fixture("dynamic.py")
            .to_string_lossy()
            .into_owned(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut config = ServerConfig::stdio(common::python().to_string_lossy(), args);
    config.era = era;
    config
}

/// A server config reaching the dynamic fixture on `port` over HTTP: the legacy SSE transport
/// (`sse`) or streamable HTTP, in `era`.
fn dynamic_http(transport: &str, port: u16, era: Era) -> ServerConfig {
    let mut config = ServerConfig::stdio("unused", vec![]);
    config.transport = if transport == "sse" {
        TransportConfig::Sse {
            url: format!("http://127.0.0.1:{port}/sse"),
            headers: Default::default(),
        }
    } else {
        TransportConfig::StreamableHttp {
            url: format!("http://127.0.0.1:{port}/mcp"),
            headers: Default::default(),
        }
    };
    config.era = era;
    config
}

/// A connection named `name` to `config`, without notification listeners or stored tokens.
async fn connect(name: &str, config: &ServerConfig) -> Connection {
    Connection::connect(
        name,
        config,
        Notifications::new(),
        &roster::store::Stores::in_memory().tokens(),
    )
    .await
    .unwrap_or_else(|e| panic!("{name} connects: {e}"))
}

/// The text of `echo`'s answer to `text`; `what` names the call in a failure.
async fn echo(conn: &Connection, text: &str, what: &str) -> String {
    let result = conn
        .call_tool(
            "echo",
            args(json!({ "text": text })),
            CallOptions::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    text_of(&result)
}

/// Waits (at most 100 polls) until the dynamic fixture's `cancelled_count` says 1: the server
/// heard notifications/cancelled and stopped the handler.
async fn assert_cancelled_once(conn: &Connection) {
    let mut cancelled = String::new();
    for _ in 0..100 {
        let count = conn
            .call_tool("cancelled_count", None, CallOptions::default())
            .await
            .expect("cancelled_count answers");
        cancelled = text_of(&count);
        if cancelled == "1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(cancelled, "1");
}

async fn wait_for_method(seen: &Arc<Mutex<Vec<String>>>, method: &str) {
    for _ in 0..200 {
        if seen.lock().expect("lock").iter().any(|m| m == method) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no {method} arrived; got {:?}", seen.lock().expect("lock"));
}

async fn exercise(config: ServerConfig, expect_legacy: bool) {
    let notifications = Notifications::new();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = seen.clone();
    notifications.add_notification_listener(move |event| {
        sink.lock().expect("lock").push(event.method().to_owned());
    });
    let conn = Connection::connect(
        "dyn",
        &config,
        notifications,
        &roster::store::Stores::in_memory().tokens(),
    )
    .await
    .expect("connects");
    assert_eq!(
        conn.negotiated().legacy,
        expect_legacy,
        "{:?}",
        conn.negotiated()
    );

    let listing = conn.list_tools().await.expect("lists");
    let names: Vec<_> = listing.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(!names.contains(&"fresh"));

    assert_eq!(echo(&conn, "hi", "echo answers").await, "dynamic: hi");

    conn.call_tool(
        "add_tool",
        args(json!({"name": "fresh"})),
        CallOptions::default(),
    )
    .await
    .expect("add_tool answers");
    wait_for_method(&seen, "notifications/tools/list_changed").await;
    let listing = conn.list_tools().await.expect("lists again");
    assert!(listing.tools.iter().any(|t| t.name == "fresh"));
}

#[tokio::test]
async fn legacy_era_over_stdio() {
    common::init_tracing();
    exercise(dynamic_stdio(Era::Legacy, &[]), true).await;
}

#[tokio::test]
async fn modern_era_over_stdio() {
    common::init_tracing();
    exercise(dynamic_stdio(Era::Auto, &[]), false).await;
}

#[tokio::test]
async fn garbage_on_stdout_is_dropped() {
    common::init_tracing();
    // It connects despite the banner.
    let conn = connect("junk", &dynamic_stdio(Era::Legacy, &["--garbage"])).await;
    let result = conn
        .call_tool("garbage", None, CallOptions::default())
        .await
        .expect("garbage tool answers");
    assert_eq!(text_of(&result), "wrote garbage");
    let echoed = echo(&conn, "still here", "the connection keeps working").await;
    assert_eq!(echoed, "dynamic: still here");
}

#[tokio::test]
async fn call_timeout_cancels_and_progress_passes_through() {
    common::init_tracing();
    let conn = connect("slow", &dynamic_stdio(Era::Legacy, &[])).await;
    let progress = Arc::new(Mutex::new(Vec::<Value>::new()));
    let sink = progress.clone();
    let err = conn
        .call_tool(
            "slow",
            args(json!({"seconds": 30})),
            CallOptions {
                timeout: Some(Duration::from_millis(800)),
                progress: Some(Arc::new(move |p: &Value| {
                    sink.lock().expect("lock").push(p.clone())
                })),
                ..CallOptions::default()
            },
        )
        .await
        .expect_err("times out");
    assert!(
        matches!(err, roster::servers::RequestError::Timeout(_)),
        "{err}"
    );
    let progress = progress.lock().expect("lock").clone();
    assert_eq!(progress.len(), 1, "{progress:?}");
    // As the server wrote it (a number: 1 or 1.0 alike).
    assert_eq!(progress[0]["progress"].as_f64(), Some(1.0), "{progress:?}");
    assert_cancelled_once(&conn).await;
    // The server is still usable after the cancelled call.
    let echoed = echo(&conn, "after", "echo after a cancelled call").await;
    assert_eq!(echoed, "dynamic: after");
}

#[tokio::test]
async fn legacy_sse_transport() {
    common::init_tracing();
    let (_server, port) = common::spawn_http_fixture("sse", &[]);
    exercise(dynamic_http("sse", port, Era::Legacy), true).await;
}

#[tokio::test]
async fn streamable_http_transport() {
    common::init_tracing();
    let (_server, port) = common::spawn_http_fixture("streamable-http", &[]);
    exercise(dynamic_http("streamable-http", port, Era::Auto), false).await;
}

/// The dynamic fixture over streamable HTTP with `extra` arguments (its `--throttle-*`), and a
/// connection to it in `era` that has listed it.
async fn throttled(extra: &[&str], era: Era) -> (common::KillOnDrop, Connection) {
    let (server, port) = common::spawn_http_fixture("streamable-http", extra);
    let conn = connect("dyn", &dynamic_http("streamable-http", port, era)).await;
    conn.list_tools().await.expect("lists");
    (server, conn)
}

/// `echo`'s answer, or why there was none.
async fn echo_hi(conn: &Connection) -> Result<Value, RequestError> {
    conn.call_tool("echo", args(json!({"text": "hi"})), CallOptions::default())
        .await
}

/// The error ending `echo` at a legacy-era connection to the fixture throttled by `extra`
/// (`what` says why it must fail), with the server and the connection.
async fn refused(extra: &[&str], what: &str) -> (common::KillOnDrop, Connection, String) {
    let (server, conn) = throttled(extra, Era::Legacy).await;
    let error = echo_hi(&conn).await.expect_err(what).to_string();
    (server, conn, error)
}

/// A streamable HTTP server refusing calls for load (429 with `Retry-After: 0` or a past HTTP
/// date; 503 with none, in the other era) gets each call again: two refusals cost the call
/// nothing but the waits. One that refuses every time ends the call after 4 tries with an
/// error naming the status, and the connection goes on (a listing still answers); one that
/// asks for a wait longer than roster gives a call ends it at once, naming the wait.
#[tokio::test]
async fn a_call_refused_for_load_is_sent_again_a_bounded_number_of_times() {
    common::init_tracing();
    for (refusal, era) in [
        (&["--throttle-retry-after", "0"][..], Era::Legacy),
        (&["--throttle-status", "503"][..], Era::Modern),
        // An HTTP date already past: no wait.
        (
            &["--throttle-retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"][..],
            Era::Legacy,
        ),
    ] {
        let (_server, conn) =
            throttled(&[&["--throttle-calls", "2"][..], refusal].concat(), era).await;
        let result = echo_hi(&conn).await.expect("answered at the third try");
        assert_eq!(text_of(&result), "dynamic: hi", "{era:?}");
    }

    let (_server, conn, error) = refused(
        &["--throttle-calls", "1000", "--throttle-retry-after", "0"],
        "refused every time",
    )
    .await;
    assert!(error.contains("429 Too Many Requests, 4 times"), "{error}");
    conn.list_tools().await.expect("the connection goes on");

    // A wait longer than roster gives a call (an HTTP date decades ahead): the call ends at
    // once, naming the wait, rather than sending it again sooner than the server asked.
    let (_server, _conn, error) = refused(
        &[
            "--throttle-calls",
            "1",
            "--throttle-retry-after",
            "Fri, 01 Jan 2100 00:00:00 GMT",
        ],
        "asked to wait decades",
    )
    .await;
    assert!(
        error.contains("429 Too Many Requests and asked to wait"),
        "{error}"
    );
}

#[tokio::test]
async fn process_exit_closes_the_connection() {
    common::init_tracing();
    let conn = connect("dies", &dynamic_stdio(Era::Legacy, &[])).await;
    let pid = conn
        .call_tool("pid", None, CallOptions::default())
        .await
        .expect("pid answers");
    let pid = text_of(&pid);
    let status = std::process::Command::new("kill")
        .args(["-9", &pid])
        .status()
        .expect("run kill");
    assert!(status.success());
    tokio::time::timeout(Duration::from_secs(10), conn.closed())
        .await
        .expect("the connection notices the exit");
    assert!(conn.is_closed());
}

#[tokio::test]
async fn client_cancel_sends_cancelled() {
    common::init_tracing();
    let conn = connect("slow", &dynamic_stdio(Era::Auto, &[])).await;
    let token = tokio_util::sync::CancellationToken::new();
    let canceller = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        canceller.cancel();
    });
    let err = conn
        .call_tool(
            "slow",
            args(json!({"seconds": 30})),
            CallOptions {
                cancel: Some(token),
                ..CallOptions::default()
            },
        )
        .await
        .expect_err("cancelled");
    assert!(
        matches!(err, roster::servers::RequestError::Cancelled),
        "{err}"
    );
    assert_cancelled_once(&conn).await;
}

#[tokio::test]
async fn listing_pages_to_the_end_and_keeps_unknown_fields() {
    common::init_tracing();
    let mut config = ServerConfig::stdio(
        common::python().to_string_lossy(),
        vec![
            common::python_fixture("paged.py")
                .to_string_lossy()
                .into_owned(),
            "8".to_owned(),
        ],
    );
    // `execution` is a 2025-11-25 field (the 2026-07-28 schema moved tasks out of Tool).
    config.era = Era::Legacy;
    let conn = connect("paged", &config).await;
    let listing = conn.list_tools().await.expect("lists");
    assert_eq!(listing.pages, 3);
    let names: Vec<_> = listing.tools.iter().map(|t| t.name.clone()).collect();
    let expected: Vec<_> = (0..8).map(|i| format!("tool_{i:02}")).collect();
    assert_eq!(names, expected);
    // rmcp's typed Tool has no `execution`; roster reads the raw JSON and keeps it.
    for tool in &listing.tools {
        assert_eq!(
            tool.extra.get("execution"),
            Some(&json!({"taskSupport": "optional"})),
            "{tool:?}"
        );
    }
    let result = conn
        .call_tool("tool_07", None, CallOptions::default())
        .await
        .expect("call");
    assert_eq!(text_of(&result), "called tool_07");
}

#[tokio::test]
async fn sse_server_going_away_closes_the_connection() {
    common::init_tracing();
    let (mut server, port) = common::spawn_http_fixture("sse", &[]);
    let conn = connect("web", &dynamic_http("sse", port, Era::Legacy)).await;
    conn.list_tools().await.expect("lists");
    server.0.kill().expect("kill the SSE server");
    let _ = server.0.wait();
    tokio::time::timeout(Duration::from_secs(20), conn.closed())
        .await
        .expect("the end of the event stream closes the connection");
    let err = conn.list_tools().await.expect_err("closed");
    assert!(
        matches!(err, roster::servers::RequestError::Closed),
        "{err}"
    );
}

#[tokio::test]
async fn invalid_utf8_and_a_flood_on_stderr_do_not_block_the_server() {
    let conn = connect("dyn", &dynamic_stdio(Era::Legacy, &[])).await;
    // 256 KiB is four times a Linux pipe buffer: an undrained stderr blocks the server.
    for _ in 0..2 {
        let result = conn
            .call_tool(
                "flood_stderr",
                args(json!({"kib": 256})),
                CallOptions::default(),
            )
            .await
            .expect("flood_stderr answers");
        assert_eq!(text_of(&result), "flooded 256", "{result}");
    }
    let echoed = echo(&conn, "still here", "echo answers after the flood").await;
    assert_eq!(echoed, "dynamic: still here");
}

/// Whether a process is gone (or only a zombie waiting for a reaper that is not roster).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn closing_kills_the_grandchildren_of_a_wrapper() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("grandchild.pid");
    // Like `npx`: a wrapper that starts another long-lived process besides the server.
    let script = format!(
        "sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > \"$0\"; exec {} {}",
        common::toml_str(&common::python().to_string_lossy()),
        common::toml_str(&common::python_fixture("dynamic.py").to_string_lossy()),
    );
    let mut config = ServerConfig::stdio(
        "sh",
        vec![
            "-c".to_owned(),
            script,
            pid_file.to_string_lossy().into_owned(),
        ],
    );
    config.era = Era::Legacy;
    // It connects through the wrapper.
    let conn = connect("wrapped", &config).await;
    let grandchild: u32 = std::fs::read_to_string(&pid_file)
        .expect("the wrapper wrote the grandchild's pid")
        .trim()
        .parse()
        .expect("a pid");
    assert!(!process_gone(grandchild), "the grandchild runs");
    conn.close();
    conn.closed().await;
    drop(conn);
    common::eventually("the grandchild is killed with the server", || {
        process_gone(grandchild)
    })
    .await;
}
