//! Servers that misbehave, as real processes: a notification flood, stray answers during the
//! handshake, too many tools, a server that leaves children behind or outlives its stdin. The
//! misbehaving server is `tests/python/servers/misbehaving.py` (plain JSON lines, no SDK, so it
//! can write what an SDK never would); the well-behaved one is the SDK's dynamic fixture.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    args, dynamic_server_toml, eventually, has_tool, python, python_fixture, test_config, text_of,
};
use roster::servers::gate::DROPPED;
use roster::servers::{NotificationSink, ServerState};
use roster::{Roster, RosterOptions};
use serde_json::{Value, json};

/// `[servers.NAME]` running the misbehaving fixture with `flags` (initialize era: it has no
/// `server/discover`).
fn misbehaving_toml(name: &str, flags: &[&str]) -> String {
    let mut args = vec![common::toml_str(
        &python_fixture("misbehaving.py").to_string_lossy(),
    )];
    args.extend(flags.iter().map(|a| common::toml_str(a)));
    format!(
        "[servers.{name}]\ncommand = {}\nargs = [{}]\nprotocol = \"legacy\"\n",
        common::toml_str(&python().to_string_lossy()),
        args.join(", ")
    )
}

/// What the inbox would record: every notification with its channel.
#[derive(Default)]
struct Recorder(Mutex<Vec<(String, String, Value)>>);

impl NotificationSink for Recorder {
    fn record(&self, channel: &str, method: &str, params: Value, _handled: bool) {
        self.0
            .lock()
            .expect("lock")
            .push((channel.to_owned(), method.to_owned(), params));
    }
}

impl Recorder {
    fn of(&self, channel: &str, method: &str) -> Vec<Value> {
        self.0
            .lock()
            .expect("lock")
            .iter()
            .filter(|(c, m, _)| c == channel && m == method)
            .map(|(_, _, p)| p.clone())
            .collect()
    }

    fn count(&self, channel: &str) -> usize {
        self.0
            .lock()
            .expect("lock")
            .iter()
            .filter(|(c, _, _)| c == channel)
            .count()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_is_dropped_and_counted_while_the_other_server_answers() {
    common::init_tracing();
    let recorder = Arc::new(Recorder::default());
    let servers = format!(
        "{}{}",
        misbehaving_toml("flood", &["--flood", "0"]),
        dynamic_server_toml("calm", "legacy", &[])
    );
    let config = test_config(
        &servers,
        "notification_rate = 50\nnotification_burst = 50\nping_interval = \"0s\"",
    );
    let roster = Roster::start_with(
        config,
        RosterOptions {
            sink: recorder.clone(),
            ..RosterOptions::default()
        },
    )
    .await
    .expect("starts");
    let flood = roster.notifications("flood").expect("flood configured");
    eventually(
        "the flood's notifications are dropped over the rate",
        || flood.dropped() > 0,
    )
    .await;
    // The flood is still going (it never stops): the calm server answers meanwhile, and so
    // does the flooding one, whose answers are never gated.
    for i in 0..20 {
        let text = format!("hello {i}");
        let result = roster
            .call("calm__echo", args(json!({"text": text})))
            .await
            .expect("the calm server answers during the flood");
        assert_eq!(text_of(&result), format!("calm: {text}"));
    }
    let result = roster
        .call("flood__echo", args(json!({"text": "still here"})))
        .await
        .expect("the flooding server's own calls are answered");
    assert_eq!(text_of(&result), "still here");

    let reports = recorder.of("flood", DROPPED);
    let first = reports.first().expect("a drop report in the inbox");
    assert!(first["dropped"].as_u64().is_some_and(|n| n > 0), "{first}");
    assert!(
        first["message"]
            .as_str()
            .is_some_and(|m| m.contains("50 per second") && m.contains("`flood`")),
        "{first}"
    );
    // Only what the rate let through was recorded, plus one report per period: far fewer
    // than were dropped.
    let recorded = recorder.count("flood") as u64;
    assert!(
        recorded < flood.dropped(),
        "recorded {recorded}, dropped {}",
        flood.dropped()
    );
    roster.shutdown();
}

#[tokio::test]
async fn stray_answers_before_the_initialize_answer_are_dropped() {
    common::init_tracing();
    let roster = Roster::start(test_config(
        &misbehaving_toml("stray", &["--garbage-first"]),
        "",
    ))
    .await
    .expect("starts");
    let status = &roster.status()[0];
    assert_eq!(status.state, ServerState::Connected, "{status:?}");
    assert_eq!(status.restarts, 0, "{status:?}");
    let result = roster
        .call("stray__echo", args(json!({"text": "ok"})))
        .await
        .expect("the server is usable");
    assert_eq!(text_of(&result), "ok");
    roster.shutdown();
}

#[tokio::test]
async fn a_listing_past_max_tools_is_cut_and_one_past_max_listing_bytes_fails() {
    common::init_tracing();
    let servers = format!(
        "{}{}",
        misbehaving_toml("many", &["--tools", "50"]),
        dynamic_server_toml("calm", "legacy", &[])
    );
    let roster = Roster::start(test_config(&servers, "max_tools = 10"))
        .await
        .expect("starts");
    let many = roster
        .status()
        .into_iter()
        .find(|s| s.name == "many")
        .expect("many in status");
    assert_eq!(many.tools, 10, "{many:?}");
    assert!(has_tool(&roster, "many__echo"));
    roster.shutdown();

    let roster = Roster::start(test_config(
        &misbehaving_toml("big", &["--tools", "50"]),
        "max_listing_bytes = 1000",
    ))
    .await
    .expect("starts");
    let big = &roster.status()[0];
    assert_eq!(big.tools, 0, "{big:?}");
    let error = big.last_error.clone().unwrap_or_default();
    assert!(error.contains("max_listing_bytes (1000 bytes)"), "{big:?}");
    roster.shutdown();
}

#[tokio::test]
async fn a_call_in_flight_at_shutdown_gets_an_error_naming_the_shutdown() {
    common::init_tracing();
    let recorder = Arc::new(Recorder::default());
    let roster = Roster::start_with(
        test_config(&dynamic_server_toml("dyn", "legacy", &[]), ""),
        RosterOptions {
            sink: recorder.clone(),
            ..RosterOptions::default()
        },
    )
    .await
    .expect("starts");
    let call = {
        let roster = roster.clone();
        tokio::spawn(async move {
            roster
                .call("dyn__slow", args(json!({"seconds": 600})))
                .await
        })
    };
    // `slow` reports progress before it sleeps: then the call is in flight at the server.
    eventually("the slow call reached the server", || {
        !recorder.of("dyn", "notifications/progress").is_empty()
    })
    .await;
    roster.shutdown();
    let error = call
        .await
        .expect("the call task ends")
        .expect_err("no answer came");
    assert!(error.to_string().contains("shutting down"), "{error}");
}

/// Whether a process is gone (a zombie waiting for a reaper counts as gone).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// Polls until `pid` is gone; panics after 30 s (a hang, not a speed requirement).
fn wait_gone(what: &str, pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !process_gone(pid) {
        assert!(
            Instant::now() < deadline,
            "{what} (pid {pid}) is still running"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_pid(file: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} was never written",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `roster serve --http` with one misbehaving server and returns it.
fn roster_with(dir: &Path, flags: &[&str]) -> common::HttpRoster {
    let config = common::write_roster_toml(
        dir,
        &format!(
            "[gateway]\nstate_dir = {}\nkill_grace = \"2s\"\n{}",
            common::toml_str(&dir.join("state").to_string_lossy()),
            misbehaving_toml("kids", flags)
        ),
    );
    let roster = common::start_roster_http(&config);
    healthz(&roster.url);
    roster
}

fn healthz(mcp_url: &str) {
    use std::io::{Read, Write};
    let addr = mcp_url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let mut stream = std::net::TcpStream::connect(&addr).expect("connect to roster");
    write!(
        stream,
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1"), "{answer}");
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {signal} {pid}");
}

fn wait_exit(child: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("try_wait").is_none() {
        assert!(Instant::now() < deadline, "roster did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_servers_grandchild_is_gone_after_roster_exits_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (server_pid, grandchild_pid) = (dir.path().join("server"), dir.path().join("grandchild"));
    let mut roster = roster_with(
        dir.path(),
        &[
            "--pidfile",
            &server_pid.to_string_lossy(),
            "--grandchild",
            &grandchild_pid.to_string_lossy(),
        ],
    );
    let server = read_pid(&server_pid);
    let grandchild = read_pid(&grandchild_pid);
    assert!(!process_gone(grandchild), "the grandchild runs");
    signal(roster.child.0.id(), "-TERM");
    wait_exit(&mut roster.child.0);
    wait_gone("the server", server);
    wait_gone("the server's grandchild", grandchild);
}

#[test]
fn a_grandchild_that_ignores_sigterm_is_killed_after_the_grace_period_at_exit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let grandchild_pid = dir.path().join("grandchild");
    let mut roster = roster_with(
        dir.path(),
        &[
            "--grandchild",
            &grandchild_pid.to_string_lossy(),
            "--grandchild-ignores-term",
        ],
    );
    let grandchild = read_pid(&grandchild_pid);
    assert!(!process_gone(grandchild), "the grandchild runs");
    signal(roster.child.0.id(), "-TERM");
    wait_exit(&mut roster.child.0);
    wait_gone("the grandchild that ignores SIGTERM", grandchild);
}

#[test]
fn a_server_that_ignores_stdin_eof_is_gone_after_kill_9_of_roster() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server_pid = dir.path().join("server");
    let mut roster = roster_with(
        dir.path(),
        &["--ignore-eof", "--pidfile", &server_pid.to_string_lossy()],
    );
    let server = read_pid(&server_pid);
    assert!(!process_gone(server), "the server runs");
    signal(roster.child.0.id(), "-KILL");
    wait_exit(&mut roster.child.0);
    wait_gone("the server", server);
}

#[test]
fn a_servers_grandchild_is_gone_after_kill_9_of_roster() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (server_pid, grandchild_pid) = (dir.path().join("server"), dir.path().join("grandchild"));
    let mut roster = roster_with(
        dir.path(),
        &[
            "--ignore-eof",
            "--pidfile",
            &server_pid.to_string_lossy(),
            "--grandchild",
            &grandchild_pid.to_string_lossy(),
            // Not even SIGTERM would reach it: only the group's SIGKILL does.
            "--grandchild-ignores-term",
        ],
    );
    let server = read_pid(&server_pid);
    let grandchild = read_pid(&grandchild_pid);
    assert!(!process_gone(grandchild), "the grandchild runs");
    signal(roster.child.0.id(), "-KILL");
    wait_exit(&mut roster.child.0);
    wait_gone("the server", server);
    wait_gone("the server's grandchild", grandchild);
}

#[tokio::test]
async fn secrets_in_a_server_url_never_reach_status_or_errors() {
    common::init_tracing();
    // Nothing listens on a port just freed: every attempt fails, with an error that would
    // quote the URL if roster let it.
    let port = common::free_port();
    let servers = format!(
        "[servers.web]\nurl = \"http://user:hunter2@127.0.0.1:{port}/mcp?api_key=s3cr3t\"\n\
         [servers.old]\nurl = \"http://127.0.0.1:{port}/sse?token=s3cr3t\"\ntransport = \"sse\"\n"
    );
    let roster = Roster::start(test_config(&servers, ""))
        .await
        .expect("starts");
    eventually("both servers failed once", || {
        roster.status().iter().all(|s| s.last_error.is_some())
    })
    .await;
    for status in roster.status() {
        let shown = format!("{status:?}");
        assert!(
            !shown.contains("s3cr3t") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
    let old = roster
        .status()
        .into_iter()
        .find(|s| s.name == "old")
        .expect("old in status");
    let error = old.last_error.unwrap_or_default();
    assert!(
        error.contains(&format!("127.0.0.1:{port}/sse?")) && !error.contains("token"),
        "{error}"
    );
    roster.shutdown();
}

#[test]
fn a_servers_stderr_reaches_the_log_escaped_and_cut() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().expect("temp dir");
    let config = common::write_roster_toml(
        dir.path(),
        &format!(
            "[gateway]\nstate_dir = {}\nmax_log_line = 200\n{}",
            common::toml_str(&dir.path().join("state").to_string_lossy()),
            misbehaving_toml("noisy", &["--stderr-junk"])
        ),
    );
    let mut command = common::serve_command(&config);
    command.env("ROSTER_LOG", "info").env("NO_COLOR", "1");
    let (child, stderr) = common::spawn_reading_stderr(&mut command);
    let _roster = common::KillOnDrop(child);
    // Read until the server's line shows up; roster's own lines come before and after it.
    let line = BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .find(|line| line.contains("alert"))
        .expect("the server's stderr line is logged");
    assert!(
        line.contains(r"\u{1b}[31malert\u{1b}[0m nul \u{0} end"),
        "{line}"
    );
    assert!(!line.contains('\u{1b}') && !line.contains('\0'), "{line}");
    assert!(line.contains("past the 200-byte line limit"), "{line}");
    assert!(line.len() < 1000, "cut: {} bytes", line.len());
}

#[tokio::test]
async fn list_changed_over_the_rate_is_coalesced_not_lost() {
    common::init_tracing();
    let recorder = Arc::new(Recorder::default());
    let roster = Roster::start_with(
        test_config(
            &dynamic_server_toml("dyn", "legacy", &[]),
            "notification_rate = 1\nnotification_burst = 1",
        ),
        RosterOptions {
            sink: recorder.clone(),
            ..RosterOptions::default()
        },
    )
    .await
    .expect("starts");
    let heard = || recorder.of("dyn", "notifications/tools/list_changed").len();
    // A storm empties the bucket: one list_changed passes, the other 99 are held as one and
    // handed on before the next answer of the server (the bucket would take a second to
    // refill): the call's, or before it the answer to the listing the first one started (the
    // debounce's leading edge), which may hold back some of the storm a second time. By the
    // call's answer all were heard, so a listing the answer leads to answers the whole storm.
    roster
        .call("dyn__storm", args(json!({"count": 100})))
        .await
        .expect("storm answers");
    let storm = heard();
    assert!(
        (2..=3).contains(&storm),
        "the passed list_changed and the coalesced rest: {storm}"
    );
    // The bucket is still refilling: this tool's list_changed is held too (or passes, if a
    // second went by), and is heard before add_tool's answer either way.
    roster
        .call("dyn__add_tool", args(json!({"name": "after_storm"})))
        .await
        .expect("add_tool answers");
    assert!(heard() > storm);
    // No turn is taken here: the debounced re-list lists the server.
    eventually("the tool added after the storm is listed", || {
        has_tool(&roster, "dyn__after_storm")
    })
    .await;
    assert_eq!(roster.notifications("dyn").expect("dyn").dropped(), 0);
    roster.shutdown();
}

/// A storm over the burst, then a turn (the bench's storm figure): the storm costs at most two
/// listings, the leading edge's and the turn's (which answers the rest of the storm). The
/// list_changed the rate held back used to come when the bucket refilled — after the turn's
/// listing — and cost one more. `transport`: `stdio`, or the
/// fixture serving `sse` / `streamable-http` (whose calls roster POSTs itself). Over
/// streamable HTTP the storm goes on the call's own stream: on the session's stream nothing
/// orders it with the answer.
async fn storm_then_turn(transport: &str) {
    common::init_tracing();
    let (_server, servers) = if transport == "stdio" {
        (None, dynamic_server_toml("dyn", "legacy", &[]))
    } else {
        let (server, port) = common::spawn_http_fixture(transport, &[]);
        let (path, kind) = match transport {
            "sse" => ("sse", "sse"),
            _ => ("mcp", "streamable-http"),
        };
        let url = format!("http://127.0.0.1:{port}/{path}");
        let entry = format!(
            "[servers.dyn]\nurl = \"{url}\"\ntransport = \"{kind}\"\nprotocol = \"legacy\"\n"
        );
        (Some(server), entry)
    };
    let recorder = Arc::new(Recorder::default());
    let roster = Roster::start_with(
        // A window wide enough that a loaded machine cannot open a gap inside the storm: the
        // rest of it, held by the rate, is not seen by the debounce until it is handed on.
        test_config(
            &servers,
            "notification_rate = 1\nnotification_burst = 20\ndebounce = \"3s\"",
        ),
        RosterOptions {
            sink: recorder.clone(),
            ..RosterOptions::default()
        },
    )
    .await
    .expect("starts");
    let before = common::listing_count(&roster, "dyn").await;
    let storm = match transport {
        "streamable-http" => "dyn__storm_on_call",
        _ => "dyn__storm",
    };
    roster
        .call(storm, args(json!({"count": 200})))
        .await
        .expect("storm answers");
    // Everything the server said before its answer was heard by the answer: the 20 the burst
    // let through and the rest, held as one (or as two: the listing the first one started at
    // once, the debounce's leading edge, may be answered amid the storm, and what was held
    // goes before that answer too).
    let heard = recorder.of("dyn", "notifications/tools/list_changed").len();
    assert!((21..=22).contains(&heard), "{heard}");
    roster.begin_turn().await;
    let listed = common::listing_count(&roster, "dyn").await - before;
    assert!((1..=2).contains(&listed), "{listed} listings by the turn");
    // Nothing more can come from the storm: once its trailing edge has passed, the server has
    // been listed twice at most.
    eventually("no trailing edge is pending", || {
        roster.status().iter().all(|s| !s.refresh_pending)
    })
    .await;
    let listed = common::listing_count(&roster, "dyn").await - before;
    assert!((1..=2).contains(&listed), "{listed} listings for one storm");
    roster.shutdown();
}

#[tokio::test]
async fn a_storm_over_the_burst_then_a_turn_costs_at_most_two_listings_over_stdio() {
    storm_then_turn("stdio").await;
}

#[tokio::test]
async fn a_storm_over_the_burst_then_a_turn_costs_at_most_two_listings_over_sse() {
    storm_then_turn("sse").await;
}

#[tokio::test]
async fn a_storm_over_the_burst_then_a_turn_costs_at_most_two_listings_over_streamable_http() {
    storm_then_turn("streamable-http").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_server_requests_is_dropped_over_the_rate_too() {
    common::init_tracing();
    let servers = format!(
        "{}{}",
        misbehaving_toml("pinger", &["--flood", "0", "--pings"]),
        dynamic_server_toml("calm", "legacy", &[])
    );
    let roster = Roster::start(test_config(
        &servers,
        "notification_rate = 50\nnotification_burst = 50\nping_interval = \"0s\"",
    ))
    .await
    .expect("starts");
    let pinger = roster.notifications("pinger").expect("pinger configured");
    eventually("the pings over the rate are dropped", || {
        pinger.dropped() > 0
    })
    .await;
    let result = roster
        .call("calm__echo", args(json!({"text": "hi"})))
        .await
        .expect("the calm server answers during the ping flood");
    assert_eq!(text_of(&result), "calm: hi");
    let result = roster
        .call("pinger__echo", args(json!({"text": "pong"})))
        .await
        .expect("the pinging server's own calls are answered");
    assert_eq!(text_of(&result), "pong");
    roster.shutdown();
}

#[test]
fn notifications_written_in_one_burst_are_recorded_in_the_servers_order() {
    const BURST: u64 = 2000;
    let dir = tempfile::tempdir().expect("temp dir");
    let script = common::python_fixture("misbehaving.py");
    let config = common::write_roster_toml(
        dir.path(),
        &format!(
            "[gateway]\nstate_dir = {state:?}\nnotification_rate = 100000\n\
             notification_burst = 100000\n\n\
             [servers.burst]\ncommand = {python:?}\nargs = [{script:?}, \"--burst\", \"{BURST}\"]\n",
            state = dir.path().join("state"),
            python = common::python(),
        ),
    );
    let _roster = common::start_roster_http(&config);
    let audit = dir.path().join("state/audit.jsonl");
    let mut order = Vec::new();
    common::wait_until("the whole burst is recorded", || {
        order = std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|e| e["channel"] == "burst" && e["method"] == "notifications/message")
            .filter_map(|e| e["params"]["data"].as_u64())
            .collect();
        order.len() as u64 == BURST
    });
    let inversions = order.windows(2).filter(|w| w[0] > w[1]).count();
    assert_eq!(inversions, 0, "recorded out of order: {:?}", &order[..40]);
}
