//! One server never holds or taxes another's requests: `roster serve --http` as a real process
//! beside servers that misbehave as real ones do — PyPI's `mcp-server-time` (the Python SDK
//! 2.x: `ttlMs: 0` on every listing, no change announced), a server that never answers
//! `tools/list` (`misbehaving.py --hang-listing`), and one that writes `notifications/message`
//! in a tight loop (`misbehaving.py --flood 0`) — driven by the official Python SDK clients.
//!
//! Times are bounds with wide margins (a loaded two-core machine, a debug build): each tells a
//! request that waited for another server (seconds: `turn_wait`) from one that did not
//! (milliseconds). Negatives are proven by events, never by a sleep.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A request that waited for nobody takes milliseconds; one that waited out `turn_wait` (set
/// to [`TURN_WAIT`] here) takes seconds. The bound sits between, far from both.
const NOT_HELD: f64 = 2.5;
/// The `turn_wait` of these tests.
const TURN_WAIT: f64 = 4.0;

fn toml_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| common::toml_str(s)).collect();
    format!("[{}]", quoted.join(", "))
}

/// A `[servers.NAME]` entry running `tests/python/servers/misbehaving.py` with `flags`.
fn misbehaving(name: &str, flags: &[&str]) -> String {
    let script = common::python_fixture("misbehaving.py");
    let mut args = vec![script.to_str().expect("utf-8 path")];
    args.extend_from_slice(flags);
    format!(
        "[servers.{name}]\ncommand = {}\nargs = {}\n",
        common::toml_str(common::python().to_str().expect("utf-8 path")),
        toml_list(&args),
    )
}

/// Serves `servers` with the admin token `admin` and `gateway` lines, at once (whatever the
/// servers do).
fn serve(gateway: &str, servers: &str) -> common::Gateway {
    common::Gateway::start_at_once(
        |dir: &Path| {
            format!(
                "[gateway]\nstate_dir = {state:?}\nadmin_token_env = \"ROSTER_TEST_ADMIN\"\n\
                 turn_wait = \"{TURN_WAIT}s\"\n{gateway}\n\n{servers}\n",
                state = dir.join("state"),
            )
        },
        &[("ROSTER_TEST_ADMIN", "admin")],
    )
}

/// Runs `turns.py` (the 2.x `Client` in `mode`) or `turns_mcp1.py` (1.x) with `steps`; the
/// report's `steps` and `seconds`.
fn run_steps(gateway: &common::Gateway, client: &str, steps: &Value) -> (Vec<Value>, Vec<f64>) {
    let steps = steps.to_string();
    let report = match client {
        "mcp1" => common::python_client_report_with(
            &common::python_mcp1(),
            "turns_mcp1.py",
            &["--url", &gateway.url, "--steps", &steps],
        ),
        mode => common::python_client_report(
            "turns.py",
            &["--mode", mode, "--url", &gateway.url, "--steps", &steps],
        ),
    };
    let seen = report["steps"].as_array().expect("steps").clone();
    let seconds = report["seconds"]
        .as_array()
        .expect("seconds")
        .iter()
        .map(|s| s.as_f64().expect("a number"))
        .collect();
    (seen, seconds)
}

fn echo(text: &str) -> Value {
    json!(["call", "e__echo", {"text": text}])
}

fn assert_echoed(seen: &Value, text: &str) {
    assert_eq!(seen["content"][0]["text"], text, "{seen}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_never_answers_its_listing_holds_nobody_else() {
    let servers = format!(
        "{}\n{}",
        misbehaving("e", &[]),
        misbehaving("h", &["--hang-listing"])
    );
    // The hung listing stays in flight far longer than this test runs.
    let gateway = serve("list_timeout = \"120s\"", &servers);

    // Serving started without waiting: the hung server is still starting (its first listing
    // cannot have ended) when /healthz answers.
    let health = gateway.health("admin").await;
    assert_eq!(health["status"], "ok", "{health}");
    assert!(
        health["starting"]
            .as_array()
            .is_some_and(|s| s.iter().any(|n| n == "h")),
        "the hung server is still starting: {health}"
    );

    // Calls while the hung server is starting, before anything listed the tools, in each era
    // (raw: an SDK client lists the tools at its first call, to check the result's schema).
    for (id, modern) in [(2, false), (3, true)] {
        let client = common::RawHttp::open(&gateway.url, "none", modern).await;
        let started = Instant::now();
        let answer = client
            .request(
                id,
                "tools/call",
                json!({"name": "e__echo", "arguments": {"text": "raw"}}),
            )
            .await;
        let held = started.elapsed().as_secs_f64();
        let answer: Value = serde_json::from_str(&answer).expect("JSON");
        assert_echoed(&answer["result"], "raw");
        assert!(
            held < NOT_HELD,
            "a call (modern: {modern}) was held {held:.2} s"
        );
    }

    // A list waits for the hung server once (the first list of all), then never again while
    // that listing is in flight; no call of the healthy server waits for it.
    for client in ["auto", "legacy", "mcp1"] {
        let steps = json!([["list"], echo("one"), echo("two"), ["list"], echo("three"),]);
        let (seen, seconds) = run_steps(&gateway, client, &steps);
        for (i, text) in [(1, "one"), (2, "two"), (4, "three")] {
            assert_echoed(&seen[i], text);
            assert!(
                seconds[i] < NOT_HELD,
                "{client}: a call of the healthy server was held {:.2} s",
                seconds[i]
            );
        }
        let listed = seen[0].as_array().expect("tool names");
        assert!(listed.iter().any(|n| n == "e__echo"), "{listed:?}");
        if client == "auto" {
            assert!(
                seconds[0] >= TURN_WAIT - 0.5,
                "the first list waited for the server never listed: {:.2} s",
                seconds[0]
            );
        } else {
            assert!(
                seconds[0] < NOT_HELD,
                "{client}: a list waited again for the hung server: {:.2} s",
                seconds[0]
            );
        }
        assert!(
            seconds[3] < NOT_HELD,
            "{client}: a list waited again for the hung server: {:.2} s",
            seconds[3]
        );
    }
}

/// The `roster_listings_total` of `server` (successful listings) on a `/metrics` page.
fn listings(page: &str, server: &str) -> u64 {
    let label = format!("server=\"{server}\"");
    page.lines()
        .filter(|l| l.starts_with("roster_listings_total{"))
        .filter(|l| l.contains(&label) && l.contains("outcome=\"ok\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|n| n as u64)
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_with_ttl_zero_is_revalidated_once_per_min_ttl_in_the_background() {
    let time_server = common::python().with_file_name("mcp-server-time");
    assert!(
        time_server.exists(),
        "`pip install -r tests/python/requirements.txt` into .venv (it has mcp-server-time)"
    );
    let metrics_port = common::free_port();
    let servers = format!(
        "[servers.ev]\ncommand = {node}\nargs = [{everything}, \"stdio\"]\n\n\
         [servers.time]\ncommand = {time}\n",
        node = common::toml_str(&common::node22().to_string_lossy()),
        everything = common::toml_str(&common::server_everything().to_string_lossy()),
        time = common::toml_str(&time_server.to_string_lossy()),
    );
    let gateway = serve(
        &format!("min_ttl = \"2s\"\nmetrics_listen = \"127.0.0.1:{metrics_port}\""),
        &servers,
    );
    let metrics = format!("http://127.0.0.1:{metrics_port}/metrics");
    let page = || async {
        reqwest::get(&metrics)
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("the page")
    };
    // A first list waits for both servers' first listings.
    let (seen, _) = run_steps(&gateway, "auto", &json!([["list"]]));
    let names = seen[0].as_array().expect("names");
    assert!(
        names.iter().any(|n| n == "time__get_current_time"),
        "{names:?}"
    );
    let before = listings(&page().await, "time");
    assert!(before >= 1, "the time server was listed");

    let started = Instant::now();
    let steps: Vec<Value> = (0..300)
        .map(|i| json!(["call", "ev__echo", {"message": format!("x{i}")}]))
        .collect();
    let (seen, _) = run_steps(&gateway, "auto", &Value::Array(steps));
    let elapsed = started.elapsed();
    assert_echoed(&seen[299], "Echo: x299");
    let during = listings(&page().await, "time") - before;
    // One revalidation per min_ttl at most (and one the session's own list may take), not one
    // per call (300 before min_ttl).
    let bound = elapsed.as_secs() / 2 + 2;
    assert!(
        during <= bound,
        "the time server was listed {during} times during 300 calls in {elapsed:?} (at most {bound})"
    );
}

/// CPU seconds (user + system) `pid` has used, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc stat");
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks = |i: usize| fields[i].parse::<f64>().expect("ticks");
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the command.
    (ticks(11) + ticks(12)) / 100.0
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flooding_server_pays_for_its_own_chatter() {
    let servers = format!(
        "{}\n{}",
        misbehaving("e", &[]),
        misbehaving("flood", &["--flood", "0"])
    );
    let gateway = serve("", &servers);
    let pid = gateway.child.0.id();
    let inbox = gateway.state().join("audit.jsonl");
    common::wait_until("the flood's drops are reported", || {
        std::fs::read_to_string(&inbox)
            .is_ok_and(|text| text.contains("notifications/roster/dropped"))
    });
    let (cpu0, rss0, t0) = (
        cpu_seconds(pid),
        common::proc_kib(pid, "VmRSS"),
        Instant::now(),
    );
    let steps: Vec<Value> = (0..20).map(|i| echo(&format!("c{i}"))).collect();
    let (seen, seconds) = run_steps(&gateway, "auto", &Value::Array(steps));
    // At least three seconds of flood are measured, whatever the calls took.
    while t0.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cpu = (cpu_seconds(pid) - cpu0) / t0.elapsed().as_secs_f64();
    let grown = common::proc_kib(pid, "VmRSS").saturating_sub(rss0);
    assert_echoed(&seen[19], "c19");
    for (i, s) in seconds.iter().enumerate() {
        assert!(*s < NOT_HELD, "call {i} of the calm server took {s:.2} s");
    }
    // Reading as fast as the server writes cost ~1.8 cores; paced, ~1% (the Python client's
    // calls of the calm server are most of what remains). Half a core is the margin.
    assert!(
        cpu < 0.5,
        "roster used {:.0}% of a core during the flood",
        cpu * 100.0
    );
    assert!(
        grown < 20 * 1024,
        "roster grew {grown} KiB during the flood"
    );
}
