//! The gateway driven as a real client would drive it: the official Python SDK client over
//! stdio and over streamable HTTP, in both eras, against `roster serve` fronting the dynamic
//! Python server (`tests/python/servers/dynamic.py`). Plus HTTP auth, `/healthz`, and the admin
//! commands (`roster status|tools|refresh`) against a running gateway.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A config fronting the dynamic Python server as `dynamic`, plus `extra` TOML.
fn write_config(dir: &Path, extra: &str) -> PathBuf {
    write_config_with(dir, "", "", extra)
}

/// Like [`write_config`], with extra lines for `[gateway]` and `[servers.dynamic]`.
fn write_config_with(dir: &Path, gateway: &str, server: &str, extra: &str) -> PathBuf {
    common::write_roster_toml(dir, &common::dynamic_config(dir, gateway, server, extra))
}

fn start_http(extra: &str, env: &[(&str, &str)]) -> common::Gateway {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), extra);
    common::Gateway::serve(dir, &config, env)
}

/// Runs the Python client scenario and returns what it observed.
fn live_tools(mode: &str, target: &[&str]) -> Value {
    let mut args = vec!["--mode", mode];
    args.extend(target);
    common::python_client_report("live_tools.py", &args)
}

/// The scenario over stdio (`roster serve` started by the client) in `mode`.
fn live_tools_over_stdio(mode: &str) -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), "");
    let roster = common::roster_bin();
    live_tools(
        mode,
        &[
            "--stdio",
            roster.to_str().expect("utf-8 path"),
            config.to_str().expect("utf-8 path"),
        ],
    )
}

/// Like [`start_http`], with extra lines for `[gateway]` and `[servers.dynamic]`.
fn start_http_with(gateway: &str, server: &str, env: &[(&str, &str)]) -> common::Gateway {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config_with(dir.path(), gateway, server, "");
    common::Gateway::serve(dir, &config, env)
}

/// The gateway with an admin token (`admin`), which sees the servers in `/healthz`.
fn start_http_with_admin() -> common::Gateway {
    start_http_with(
        "admin_token_env = \"ROSTER_TEST_ADMIN_TOKEN\"",
        "",
        &[("ROSTER_TEST_ADMIN_TOKEN", "admin")],
    )
}

/// `/healthz` as the admin token (`admin`) sees it once every server has started: the servers'
/// state too.
fn admin_health(gateway: &common::Gateway) -> Value {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(gateway.started("admin"))
}

fn names(report: &Value, key: &str) -> Vec<String> {
    report[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} missing in {report}"))
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// What every transport and era must show.
fn assert_live_tools(report: &Value, protocol: &str) {
    assert_eq!(report["protocol_version"], protocol, "{report}");
    assert_eq!(report["list_changed_capability"], true, "{report}");

    let initial = names(report, "initial_tools");
    assert!(initial.contains(&"dynamic__echo".to_owned()), "{initial:?}");
    assert!(initial.contains(&"refresh_tools".to_owned()), "{initial:?}");
    assert!(
        !initial.contains(&"dynamic__fresh".to_owned()),
        "{initial:?}"
    );

    assert_eq!(
        report["list_changed_after_add"], true,
        "no list_changed after add: {report}"
    );
    let echo = names(report, "echo_after_add");
    assert_eq!(
        echo[0], "dynamic: hi",
        "the server's own result comes first: {echo:?}"
    );
    assert_eq!(
        echo.len(),
        2,
        "exactly one note block is appended: {echo:?}"
    );
    assert!(
        echo[1].contains("New tools: dynamic__fresh"),
        "the note names the new tool by its exposed name: {echo:?}"
    );
    assert_eq!(
        names(report, "echo_after_that"),
        vec!["dynamic: again".to_owned()],
        "the note is carried once"
    );

    assert!(names(report, "tools_after_add").contains(&"dynamic__fresh".to_owned()));
    assert_eq!(names(report, "fresh_result"), vec!["I am fresh".to_owned()]);

    assert_eq!(report["list_changed_after_remove"], true, "{report}");
    assert!(!names(report, "tools_after_remove").contains(&"dynamic__fresh".to_owned()));
    let gone = &report["fresh_after_remove"];
    assert_eq!(
        gone["code"], -32602,
        "a removed tool is an unknown tool: {gone}"
    );
    assert!(
        common::str_contains(&gone["message"], "dynamic__fresh"),
        "the error names the tool: {gone}"
    );
    assert_eq!(
        report["refresh_structured"]["servers_marked_stale"], 1,
        "{report}"
    );
    // Coalesced: one notice per change, none for turns without a delta.
    assert_eq!(report["list_changed_total"], 2, "{report}");
}

#[test]
fn stdio_initialize_era_client_sees_tools_appear_and_vanish() {
    let report = live_tools_over_stdio("legacy");
    assert_live_tools(&report, "2025-11-25");
}

#[test]
fn stdio_2026_client_sees_tools_appear_and_vanish_through_listen() {
    let report = live_tools_over_stdio("2026-07-28");
    assert_live_tools(&report, "2026-07-28");
}

#[test]
fn http_session_client_sees_tools_appear_and_vanish() {
    let gateway = start_http("", &[]);
    let report = live_tools("legacy", &["--url", &gateway.url]);
    assert_live_tools(&report, "2025-11-25");
}

#[test]
fn http_stateless_client_sees_tools_appear_and_vanish_through_listen() {
    let gateway = start_http("", &[]);
    let report = live_tools("2026-07-28", &["--url", &gateway.url]);
    assert_live_tools(&report, "2026-07-28");
}

#[test]
fn http_requires_a_valid_bearer_token_when_clients_are_configured() {
    // sha256("hashed-secret")
    let clients = r#"
[[clients]]
name = "ci"
token_sha256 = "4e598f5daafc2fda61641ddbb5956deb23fde6616366dc9dd5a7c9f47da4d787"
subscriptions = ["pro"]

[[clients]]
name = "laptop"
token_env = "ROSTER_TEST_LAPTOP_TOKEN"
"#;
    let gateway = start_http(clients, &[("ROSTER_TEST_LAPTOP_TOKEN", "laptop-secret")]);
    assert_eq!(common::post_initialize(&gateway.url, None), 401);
    assert_eq!(common::post_initialize(&gateway.url, Some("wrong")), 401);
    assert_eq!(
        common::post_initialize(&gateway.url, Some("laptop-secret")),
        200
    );
    assert_eq!(
        common::post_initialize(&gateway.url, Some("hashed-secret")),
        200
    );

    // The Python SDK client gets through with the token and sees the same live tools.
    let report = live_tools(
        "legacy",
        &["--url", &gateway.url, "--token", "laptop-secret"],
    );
    assert_live_tools(&report, "2025-11-25");
}

#[test]
fn healthz_and_admin_commands_report_the_running_gateway() {
    let gateway = start_http_with_admin();
    // The servers' state is shown only to the admin token.
    let health = admin_health(&gateway);
    assert_eq!(health["status"], "ok");
    assert_eq!(health["servers"][0]["name"], "dynamic", "{health}");
    assert_eq!(health["servers"][0]["transport"], "stdio", "{health}");

    let config = gateway.dir.path().join("roster.toml");
    let admin = |args: &[&str]| common::cli(args).config(&config).stdout();
    let status = admin(&["status"]);
    let row = status
        .lines()
        .find(|l| l.starts_with("dynamic"))
        .unwrap_or_else(|| panic!("no row for dynamic in:\n{status}"));
    assert!(row.contains("stdio") && row.contains("connected"), "{row}");

    let tools: Value = serde_json::from_str(&admin(&["tools", "--json"])).expect("tools --json");
    assert!(
        tools
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "dynamic__echo")),
        "{tools}"
    );
    assert!(admin(&["refresh"]).contains("marked 1 server(s) stale"));
    let status: Value = serde_json::from_str(&admin(&["status", "--json"])).expect("status --json");
    assert_eq!(
        status[0]["listing"], "stale",
        "refresh marks the server stale: {status}"
    );
}

fn alive(pid: u64) -> bool {
    // A reaped process has no /proc entry; one not yet reaped is a zombie ("Z"), i.e. gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn sigterm_shuts_the_gateway_down_and_stops_its_servers() {
    let mut gateway = start_http_with_admin();
    // The servers' pids are shown only to the admin token.
    let health = admin_health(&gateway);
    let server_pid = health["servers"][0]["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("no server pid in {health}"));
    assert!(alive(server_pid), "the server runs while the gateway does");

    let status = Command::new("kill")
        .args(["-TERM", &gateway.child.0.id().to_string()])
        .status()
        .expect("send SIGTERM");
    assert!(status.success());
    let exit = gateway.child.0.wait().expect("roster exits after SIGTERM");
    assert!(exit.success(), "a graceful shutdown exits 0: {exit:?}");
    // The child may take a moment to be reaped by its new parent; this bounds a hang only.
    let mut gone = false;
    for _ in 0..100 {
        if !alive(server_pid) {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        gone,
        "the server process {server_pid} was stopped with the gateway"
    );
}

fn call_tools(url: &str, calls: Value) -> Value {
    common::call_tools(&["--url", url], &calls)
}

#[test]
fn a_server_that_stops_answering_gives_a_tool_error_naming_it_and_why() {
    // A call waits for no listing of a server that announced nothing; the call itself gives up
    // after 2s.
    let gateway = start_http_with("", "call_timeout = \"2s\"", &[]);
    let first = call_tools(&gateway.url, serde_json::json!([["dynamic__pid", {}]]));
    let pid = first["results"][0]["structuredContent"]["result"]
        .as_u64()
        .or_else(|| {
            first["results"][0]["content"][0]["text"]
                .as_str()
                .and_then(|t| t.parse().ok())
        })
        .unwrap_or_else(|| panic!("no pid in {first}"));
    let stop = |signal: &str| {
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("signal the server");
        assert!(status.success());
    };
    stop("-STOP");
    let report = call_tools(
        &gateway.url,
        serde_json::json!([["dynamic__echo", {"text": "x"}]]),
    );
    stop("-CONT");
    let result = &report["results"][0];
    assert_eq!(result["isError"], true, "{report}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("\"dynamic\""), "names the server: {text}");
    assert!(
        text.contains("did not answer within 2s"),
        "says why: {text}"
    );
}
