//! Sessions that end, requests that share an id, and logins that guess, seen from outside:
//! `roster serve --http` as a real process, driven with raw HTTP.
//!
//! - A closed session gives its memory back: after sessions ended by DELETE or by the idle
//!   timeout, roster's RSS stays where it was after the first ones (the tasks a session spawns
//!   end with it).
//! - A request whose id is in flight in its session already is refused with a JSON-RPC error
//!   naming the id, and the first request completes: over HTTP and over stdio.
//! - The dashboard's login is rate-limited (429 with `Retry-After`, whatever the token), and the
//!   right token works once the limit clears.

mod common;

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use common::mcp_http;

const ADMIN: &str = "hardening-admin-token";

/// A running `roster serve --http` with the admin token, `[gateway]` lines and `extra` TOML.
fn start(gateway: &str, extra: &str) -> common::Gateway {
    common::Gateway::start(
        |dir| {
            format!(
                "[gateway]\nstate_dir = {state:?}\nadmin_token_env = \"ROSTER_TEST_ADMIN\"\n\
                 {gateway}\n\n{extra}\n",
                state = dir.join("state"),
            )
        },
        &[("ROSTER_TEST_ADMIN", ADMIN)],
    )
}

fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> reqwest::RequestBuilder {
    mcp_http::post(http, url, None, session, body)
}

/// Opens an initialize-era session with `capabilities` and returns its id.
async fn open_session(http: &reqwest::Client, url: &str, capabilities: Value) -> String {
    mcp_http::open_session(http, url, None, "sessions_hardening", capabilities).await
}

/// A session's whole life as a client that never sets a log level lives it: opened, a
/// `tools/list`, then (`delete`) ended by DELETE, or left to the idle timeout.
async fn live_a_session(http: &reqwest::Client, url: &str, delete: bool) {
    let session = open_session(http, url, json!({})).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    let listed = post(http, url, Some(&session), &list)
        .send()
        .await
        .expect("POST tools/list");
    assert_eq!(listed.status(), 200);
    let _ = listed.bytes().await;
    if delete {
        let ended = mcp_http::delete(http, url, None, &session).await;
        assert_eq!(ended.status(), 204);
    }
}

/// `count` sessions, 8 at a time; then waits until `/healthz` reports none.
async fn sessions(roster: &common::Gateway, count: usize, delete: bool) {
    let http = reqwest::Client::new();
    futures::stream::iter(0..count)
        .for_each_concurrent(8, |_| live_a_session(&http, &roster.url, delete))
        .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let health = roster.health(ADMIN).await;
        if health["sessions"] == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "sessions never ended: {health}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// roster returns what ended sessions freed to the system up to two seconds after they end
/// (`memory::release_freed_later`, once per burst): the least RSS seen over three seconds.
async fn settled_kib(pid: u32) -> u64 {
    let until = Instant::now() + Duration::from_secs(3);
    let mut least = common::proc_kib(pid, "VmRSS");
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        least = least.min(common::proc_kib(pid, "VmRSS"));
    }
    least
}

/// Sessions leaked ~17 KB each (the forwarders of a session that never set a log level held
/// its peer for ever). After a first round has grown roster's pools, 2,000 more sessions may
/// not grow it by more than 12 MB once their memory is given back: a leak of that size costs
/// ~34 MB, and never comes back.
#[tokio::test]
async fn closed_sessions_give_their_memory_back() {
    const BOUND_KIB: u64 = 12 * 1024;
    for delete in [true, false] {
        let roster = start("session_idle_timeout = \"1s\"\nmax_sessions = 3000", "");
        let pid = roster.child.0.id();
        sessions(&roster, 500, delete).await;
        let after_first = settled_kib(pid).await;
        for _ in 0..4 {
            sessions(&roster, 500, delete).await;
        }
        // Waits for the memory to come back (the trim after the last sessions ended), failing
        // if it has not within ten seconds.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut after_all = common::proc_kib(pid, "VmRSS");
        while after_all.saturating_sub(after_first) > BOUND_KIB && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            after_all = after_all.min(common::proc_kib(pid, "VmRSS"));
        }
        let grown = after_all.saturating_sub(after_first);
        let how = if delete { "DELETE" } else { "the idle timeout" };
        eprintln!(
            "ended by {how}: {after_first} KiB after 500 sessions, {after_all} KiB after 2,500"
        );
        assert!(
            grown <= BOUND_KIB,
            "2,000 sessions ended by {how} grew roster from {after_first} KiB to {after_all} KiB"
        );
    }
}

/// The JSON messages of an SSE stream, as they come.
struct Events {
    body: futures::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    held: String,
}

impl Events {
    fn of(response: reqwest::Response) -> Self {
        Self {
            body: Box::pin(response.bytes_stream()),
            held: String::new(),
        }
    }

    /// The next message; panics when the stream ends or nothing comes for 60 s (a hang).
    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.held.find("\n\n") {
                let event: String = self.held.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                match serde_json::from_str(&data.join("\n")) {
                    Ok(message) => return message,
                    Err(_) => continue,
                }
            }
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.body.next())
                .await
                .expect("the stream stayed silent for 60 s")
                .expect("the stream ended before its answer")
                .expect("the stream failed");
            self.held
                .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
        }
    }
}

/// rmcp routes an answer by its request id alone: a second request with the id of one still
/// in flight took the first one's route, and the first one's stream stayed open for ever.
#[tokio::test]
async fn a_request_whose_id_is_in_flight_is_refused_and_the_first_completes() {
    let server = common::dynamic_server_toml("dynamic", "legacy", &[]);
    let roster = start("", &server);
    let http = reqwest::Client::new();
    let url = &roster.url;
    let session = open_session(&http, url, json!({"elicitation": {}})).await;

    // The call waits on a question for this client: in flight until the client answers.
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "dynamic__confirm_delete", "arguments": {"path": "/tmp/x"}}});
    let first = post(&http, url, Some(&session), &call)
        .send()
        .await
        .expect("POST tools/call");
    assert_eq!(first.status(), 200);
    let mut first = Events::of(first);
    let question = first.next().await;
    assert_eq!(question["method"], "elicitation/create", "{question}");

    let again = json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {}});
    let refused = post(&http, url, Some(&session), &again)
        .send()
        .await
        .expect("POST ping");
    assert_eq!(refused.status(), 200);
    let refused: Value = refused.json().await.expect("a JSON-RPC answer");
    assert_eq!(refused["id"], 7, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("id 7") && message.contains("in flight"),
        "{refused}"
    );

    let answer = json!({"jsonrpc": "2.0", "id": question["id"],
                        "result": {"action": "accept", "content": {"confirm": true}}});
    let taken = post(&http, url, Some(&session), &answer)
        .send()
        .await
        .expect("POST the elicitation's answer");
    assert_eq!(taken.status(), 202);
    let done = loop {
        let message = first.next().await;
        if message.get("method").is_none() {
            break message;
        }
    };
    assert_eq!(done["id"], 7, "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "accept confirm=True",
        "{done}"
    );

    // Answered, the id is free again.
    let reused = post(&http, url, Some(&session), &again)
        .send()
        .await
        .expect("POST ping");
    let reused: Value = reused.json().await.expect("a JSON-RPC answer");
    assert_eq!(reused, json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
}

/// One stdio client's view of `roster serve`: JSON lines written and read.
struct Stdio(common::JsonLines);

impl Stdio {
    fn serve(config: &std::path::Path) -> Self {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_roster"));
        command
            .arg("--config")
            .arg(config)
            .arg("serve")
            .env_remove("ROSTER_STATE_DIR");
        Self(common::JsonLines::spawn(command))
    }

    async fn send(&mut self, message: Value) {
        self.0.send(&message).await;
    }

    /// The next message roster writes that `wanted` picks; panics when roster stays silent for
    /// 60 s (a hang).
    async fn next_where(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        self.0.next_where(Duration::from_secs(60), wanted).await.1
    }

    /// The answer to request `id`.
    async fn answer(&mut self, id: u64) -> Value {
        self.next_where(|m| m["id"] == id && m.get("method").is_none())
            .await
    }
}

/// Over stdio rmcp keys a request's cancellation by its id alone: the first of two requests
/// with one id to be answered cancelled the other and dropped its answer.
#[tokio::test]
async fn over_stdio_a_request_whose_id_is_in_flight_is_refused_and_the_first_completes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("roster.toml");
    let server = common::dynamic_server_toml("dynamic", "legacy", &[]);
    let state = dir.path().join("state");
    std::fs::write(
        &config,
        format!("[gateway]\nstate_dir = {state:?}\n\n{server}\n"),
    )
    .expect("write config");
    let mut roster = Stdio::serve(&config);
    roster
        .send(mcp_http::initialize(
            1,
            "sessions_hardening",
            json!({"elicitation": {}}),
        ))
        .await;
    let opened = roster.answer(1).await;
    assert!(opened.get("result").is_some(), "{opened}");
    roster
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    roster
        .send(
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "dynamic__confirm_delete", "arguments": {"path": "/tmp/x"}}}),
        )
        .await;
    let question = roster
        .next_where(|m| m["method"] == "elicitation/create")
        .await;
    roster
        .send(json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {}}))
        .await;
    let refused = roster.answer(7).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("id 7") && message.contains("in flight"),
        "{refused}"
    );

    roster
        .send(json!({"jsonrpc": "2.0", "id": question["id"],
                     "result": {"action": "accept", "content": {"confirm": true}}}))
        .await;
    let done = roster.answer(7).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "accept confirm=True",
        "{done}"
    );
    roster
        .send(json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {}}))
        .await;
    assert_eq!(
        roster.answer(7).await,
        json!({"jsonrpc": "2.0", "id": 7, "result": {}})
    );
}

/// 500 wrong tokens went through in 0.2 s. Now a client is held back after a few, with a
/// `Retry-After`; held back, even the right token is refused alike; once the wait is over,
/// the right token logs in.
#[tokio::test]
async fn login_attempts_are_rate_limited_and_the_right_token_works_after() {
    let roster = start("", "");
    let base = roster.url.trim_end_matches("/mcp").to_owned();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let login = |token: &str| {
        http.post(format!("{base}/ui/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={token}"))
            .send()
    };
    let mut wrong = 0;
    let limited = loop {
        let answer = login("guess").await.expect("POST /ui/login");
        if answer.status() == 429 {
            break answer;
        }
        assert_eq!(answer.status(), 401);
        wrong += 1;
        assert!(wrong < 100, "100 wrong tokens in a row were all taken");
    };
    assert!(wrong >= 1, "the first attempt was refused as too many");
    let wait: u64 = limited
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After in seconds");
    assert!(wait >= 1);
    let page = limited.text().await.expect("body");
    assert!(page.contains("Too many login attempts"), "{page}");
    let held = login(ADMIN).await.expect("POST /ui/login");
    assert_eq!(held.status(), 429, "the right token is held back alike");

    // The wait the answer named, then the right token logs in.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut wait = Duration::from_secs(wait);
    loop {
        tokio::time::sleep(wait).await;
        let answer = login(ADMIN).await.expect("POST /ui/login");
        if answer.status() == 303 {
            assert!(answer.headers().get("set-cookie").is_some());
            break;
        }
        assert_eq!(answer.status(), 429);
        assert!(Instant::now() < deadline, "the limit never cleared");
        let seconds = answer
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        wait = Duration::from_secs(seconds);
    }
}
