//! `GET /metrics` of a real `roster serve --http` fronting two dynamic Python servers while
//! the official Python SDK client calls one of them: the call histogram of that server moves
//! by the number of calls and the other's does not, the official Prometheus Python client's
//! parser accepts the whole page, and `[gateway] metrics_listen` serves the same page without
//! the admin token the main listener asks for.

mod common;

use std::path::Path;
use std::process::Stdio;

use common::{Gateway, call_tools};
use serde_json::{Value, json};

const ADMIN_TOKEN: &str = "metrics-admin-token";

/// `[gateway]` lines, then the servers `dyn` and `other` (both `dynamic.py` over stdio).
fn config(dir: &Path, gateway: &str) -> String {
    format!(
        "[gateway]\nstate_dir = {state:?}\n{gateway}\n\n{}\n{}",
        common::dynamic_server_toml("dyn", "auto", &[]),
        common::dynamic_server_toml("other", "auto", &[]),
        state = dir.join("state"),
    )
}

/// The page at `url` (with `token` as a bearer token if given): its status and text.
async fn get(url: &str, token: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("GET /metrics");
    let status = response.status().as_u16();
    (status, response.text().await.expect("a body"))
}

/// The page as `prometheus_client.parser` reads it (`tests/python/parse_metrics.py`); panics
/// with the parser's complaint and the page when it rejects it.
fn parse(page: &str) -> Value {
    use std::io::Write;
    let mut child = std::process::Command::new(common::python())
        .arg(common::workspace_root().join("tests/python/parse_metrics.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run parse_metrics.py");
    child
        .stdin
        .take()
        .expect("stdin piped")
        .write_all(page.as_bytes())
        .expect("write the page");
    let output = child.wait_with_output().expect("parse_metrics.py ends");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "parse_metrics.py printed no report ({e}); stderr: {}\n(is prometheus-client from \
             tests/python/requirements.txt installed?)",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(
        output.status.success() && report.get("error").is_none(),
        "the Prometheus parser rejects the page: {report}\n{page}"
    );
    report
}

/// The value of the parsed sample `name` whose labels include `labels` (0 when there is none:
/// a series appears with its first observation).
fn sample(parsed: &Value, name: &str, labels: &[(&str, &str)]) -> f64 {
    let matching: Vec<f64> = parsed["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .filter(|s| {
            s[0] == name
                && labels
                    .iter()
                    .all(|(k, v)| s[1].get(*k).and_then(Value::as_str) == Some(*v))
        })
        .filter_map(|s| s[2].as_f64())
        .collect();
    assert!(
        matching.len() <= 1,
        "{name} {labels:?} matches several series: {matching:?}"
    );
    matching.first().copied().unwrap_or(0.0)
}

fn family_type<'a>(parsed: &'a Value, name: &str) -> Option<&'a str> {
    parsed["families"]
        .as_array()?
        .iter()
        .find(|f| f["name"] == name)?["type"]
        .as_str()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_load_moves_its_own_servers_histogram_and_the_whole_page_parses() {
    let metrics_port = common::free_port();
    let gateway = Gateway::start(
        |dir| {
            config(
                dir,
                &format!(
                    "admin_token_env = \"ROSTER_TEST_METRICS_ADMIN\"\n\
                     metrics_listen = \"127.0.0.1:{metrics_port}\"\n\
                     debounce = \"50ms\""
                ),
            )
        },
        &[("ROSTER_TEST_METRICS_ADMIN", ADMIN_TOKEN)],
    );
    let metrics_url = gateway.url.replace("/mcp", "/metrics");
    let separate_url = format!("http://127.0.0.1:{metrics_port}/metrics");

    // The main listener's page is the admin's, like /healthz's full view.
    let (status, _) = get(&metrics_url, None).await;
    assert_eq!(status, 401, "no admin token, no metrics on the MCP port");
    let (status, before) = get(&metrics_url, Some(ADMIN_TOKEN)).await;
    assert_eq!(status, 200, "{before}");
    let before = parse(&before);
    let count = "roster_tool_call_duration_seconds_count";
    let ok_of = |server: &'static str| [("server", server), ("outcome", "ok")];

    let echoes = 5;
    let mut calls: Vec<Value> = (0..echoes)
        .map(|n| json!(["dyn__echo", {"text": format!("hello {n}")}]))
        .collect();
    calls.push(json!(["dyn__add_tool", {"name": "extra"}]));
    calls.push(json!(["wait:list_changed", {}]));
    let report = call_tools(&["--url", &gateway.url], &Value::Array(calls));
    let results = report["results"].as_array().expect("results");
    assert!(
        results[..echoes + 1]
            .iter()
            .all(|r| r.get("isError") != Some(&json!(true)) && r.get("error").is_none()),
        "every call succeeded: {report}"
    );
    assert_eq!(
        results[echoes + 1],
        json!({"list_changed": true}),
        "{report}"
    );

    let (status, after) = get(&metrics_url, Some(ADMIN_TOKEN)).await;
    assert_eq!(status, 200);
    let parsed = parse(&after);
    let calls_made = (echoes + 1) as f64;
    assert_eq!(
        sample(&parsed, count, &ok_of("dyn")) - sample(&before, count, &ok_of("dyn")),
        calls_made,
        "dyn's call histogram counts each call once:\n{after}"
    );
    assert_eq!(
        sample(&parsed, count, &ok_of("other")),
        sample(&before, count, &ok_of("other")),
        "other was not called:\n{after}"
    );
    assert_eq!(
        family_type(&parsed, "roster_tool_call_duration_seconds"),
        Some("histogram")
    );
    let requests = "roster_client_requests_total";
    assert!(
        sample(&parsed, requests, &[("method", "tools/call")])
            - sample(&before, requests, &[("method", "tools/call")])
            >= calls_made,
        "{after}"
    );
    // What the servers did: the added tool is a delta and its list_changed a notification.
    // And each server's listings counted.
    for (counter, labels) in [
        (
            "roster_server_notifications_total",
            [
                ("server", "dyn"),
                ("method", "notifications/tools/list_changed"),
            ],
        ),
        (
            "roster_tool_changes_total",
            [("server", "dyn"), ("change", "added")],
        ),
        (
            "roster_listings_total",
            [("server", "other"), ("outcome", "ok")],
        ),
    ] {
        assert!(
            sample(&parsed, counter, &labels) >= 1.0,
            "{counter} {labels:?}:\n{after}"
        );
    }
    // Gauges read at the scrape: both servers connected, their tools counted.
    for server in ["dyn", "other"] {
        let state = |s: &'static str| [("server", server), ("state", s)];
        assert_eq!(
            sample(&parsed, "roster_server_state", &state("connected")),
            1.0,
            "{after}"
        );
        assert_eq!(
            sample(&parsed, "roster_server_state", &state("crash-loop")),
            0.0
        );
    }
    assert!(
        sample(&parsed, "roster_tools_exposed", &[("server", "dyn")])
            > sample(&parsed, "roster_tools_exposed", &[("server", "other")]),
        "dyn has the added tool too:\n{after}"
    );
    assert!(!after.contains("dyn__echo"), "no tool labels by default");

    // metrics_listen: the same page, plain HTTP, no token.
    let (status, separate) = get(&separate_url, None).await;
    assert_eq!(status, 200, "{separate}");
    let separate = parse(&separate);
    assert_eq!(
        sample(&separate, count, &ok_of("dyn")),
        sample(&parsed, count, &ok_of("dyn"))
    );
    let (status, _) = get(&separate_url.replace("/metrics", "/mcp"), None).await;
    assert_eq!(status, 404, "the metrics listener serves no MCP");
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_labels_are_added_only_when_asked_and_metrics_can_be_off() {
    let labelled = Gateway::start(|dir| config(dir, "metrics_tool_labels = true"), &[]);
    call_tools(
        &["--url", &labelled.url],
        &json!([["dyn__echo", {"text": "x"}], ["no_such_tool", {}]]),
    );
    let (status, page) = get(&labelled.url.replace("/mcp", "/metrics"), None).await;
    assert_eq!(
        status, 200,
        "without an admin token the page is open: {page}"
    );
    let parsed = parse(&page);
    assert_eq!(
        sample(
            &parsed,
            "roster_tool_call_duration_seconds_count",
            &[("server", "dyn"), ("outcome", "ok"), ("tool", "dyn__echo")]
        ),
        1.0,
        "{page}"
    );
    assert_eq!(
        sample(
            &parsed,
            "roster_tool_calls_refused_total",
            &[("reason", "unknown_tool")]
        ),
        1.0,
        "{page}"
    );
    assert!(!page.contains("no_such_tool"), "a refused name is no label");

    let off = Gateway::start(|dir| config(dir, "metrics = false"), &[]);
    let (status, body) = get(&off.url.replace("/mcp", "/metrics"), None).await;
    assert_eq!(status, 404);
    assert!(body.contains("[gateway] metrics = false"), "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_labels_stay_bounded_however_many_tools_are_called() {
    let port = common::free_port();
    let script = common::python_fixture("misbehaving.py");
    let roster = Gateway::start(
        |dir| {
            format!(
                "[gateway]\nstate_dir = {state:?}\nmetrics_tool_labels = true\n\
                 metrics_listen = \"127.0.0.1:{port}\"\n\n\
                 [servers.many]\ncommand = {python:?}\nargs = [{script:?}, \"--tools\", \"1500\"]\n",
                state = dir.join("state"),
                python = common::python(),
            )
        },
        &[],
    );
    let client = common::RawHttp::open(&roster.url, "none", false).await;
    for i in 1..1500u64 {
        let params = json!({"name": format!("many__filler_{i}"), "arguments": {}});
        client.request(10 + i, "tools/call", params).await;
    }
    let (status, page) = get(&format!("http://127.0.0.1:{port}/metrics"), None).await;
    assert_eq!(status, 200);
    let tools: std::collections::HashSet<&str> = page
        .lines()
        .filter(|l| l.starts_with("roster_tool_call_duration_seconds_count{"))
        .filter_map(|l| l.split("tool=\"").nth(1)?.split('"').next())
        .collect();
    // The first hundred names called, and `other` for the 1,399 after them.
    assert_eq!(tools.len(), 101, "{tools:?}");
    assert!(tools.contains("other"), "{tools:?}");
    assert!(page.len() < 400_000, "the page is {} bytes", page.len());
}
