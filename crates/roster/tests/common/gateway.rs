//! A real `roster serve --http` for a test, with its config and state in a temp dir of its own,
//! and the official Python SDK client (`tests/python/clients/call_tools.py`) calling its tools.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{KillOnDrop, python_client_report, serve_http, workspace_root};

/// `roster --config CONFIG serve --http 127.0.0.1:0`, without the caller's `ROSTER_STATE_DIR`:
/// a test's state lives where its config says, never in the developer's state dir.
pub fn serve_command(config: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_roster"));
    command
        .arg("--config")
        .arg(config)
        .args(["serve", "--http", "127.0.0.1:0"])
        .env_remove("ROSTER_STATE_DIR");
    command
}

/// A running `roster serve --http` whose `roster.toml` and state are in `dir`; killed when
/// dropped (before `dir` goes).
pub struct Gateway {
    /// The gateway process.
    pub child: KillOnDrop,
    /// Its MCP endpoint (`http://127.0.0.1:PORT/mcp`).
    pub url: String,
    /// Holds `roster.toml` and, by the configs these tests write, `state/`.
    pub dir: tempfile::TempDir,
}

impl Gateway {
    /// Writes `config(dir)` as `dir/roster.toml` in a new temp dir and serves it, with `env`
    /// set for the process.
    pub fn start(config: impl FnOnce(&Path) -> String, env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("roster.toml");
        std::fs::write(&path, config(dir.path())).expect("write config");
        Self::serve(dir, &path, env)
    }

    /// Serves `config`, a file the caller wrote (in `dir`, which the gateway keeps), once its
    /// servers have started ([`super::wait_started`]).
    pub fn serve(dir: tempfile::TempDir, config: &Path, env: &[(&str, &str)]) -> Self {
        let gateway = Self::serve_at_once(dir, config, env);
        super::wait_started(config);
        gateway
    }

    /// [`Gateway::start`] without waiting for the servers to start.
    pub fn start_at_once(config: impl FnOnce(&Path) -> String, env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("roster.toml");
        std::fs::write(&path, config(dir.path())).expect("write config");
        Self::serve_at_once(dir, &path, env)
    }

    fn serve_at_once(dir: tempfile::TempDir, config: &Path, env: &[(&str, &str)]) -> Self {
        let mut command = serve_command(config);
        command.envs(env.iter().copied());
        let (child, url) = serve_http(command);
        Self {
            child: KillOnDrop(child),
            url,
            dir,
        }
    }

    /// Waits until the gateway's admin socket (in `dir/state`) answers.
    pub fn wait_for_admin(&self) {
        let socket = self.state().join("admin.sock");
        super::wait_until("the admin socket answers", || {
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        });
    }

    /// `dir/state`, the state dir of every config these tests write.
    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// `127.0.0.1:PORT`, for a raw TCP connection.
    pub fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned()
    }

    /// The `/healthz` URL.
    pub fn healthz(&self) -> String {
        self.url.replace("/mcp", "/healthz")
    }

    /// `/healthz` as the holder of the admin token `token` sees it: the servers' state too.
    pub async fn health(&self, token: &str) -> serde_json::Value {
        reqwest::Client::new()
            .get(self.healthz())
            .bearer_auth(token)
            .send()
            .await
            .expect("GET /healthz")
            .json()
            .await
            .expect("healthz is JSON")
    }

    /// Waits until no server is starting any more (`/healthz` as the admin token `token` sees
    /// it): `roster serve` answers before its servers are up.
    pub async fn started(&self, token: &str) -> serde_json::Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let health = self.health(token).await;
            if health["starting"].as_array().is_some_and(Vec::is_empty) {
                return health;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "servers still starting after 60 s: {health}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// `roster.toml` for a gateway whose state is in `dir/state`, fronting the dynamic Python fixture
/// as `dynamic`: `gateway` and `server` are more lines for `[gateway]` and `[servers.dynamic]`,
/// `extra` more TOML after them.
pub fn dynamic_config(dir: &Path, gateway: &str, server: &str, extra: &str) -> String {
    format!(
        "[gateway]\ndebounce = \"50ms\"\nstate_dir = {state:?}\n{gateway}\n\n[servers.dynamic]\ncommand = {py:?}\nargs = [{fixture:?}]\n{server}\n\n{extra}\n",
        state = dir.join("state"),
        py = super::python(),
        fixture = super::python_fixture("dynamic.py"),
    )
}

/// The Python SDK client's report for `calls` (`[tool, arguments]` pairs) made at `target`
/// (`--url URL [--token T]` or `--stdio ROSTER CONFIG`); see `call_tools.py`.
pub fn call_tools(target: &[&str], calls: &serde_json::Value) -> serde_json::Value {
    let calls = calls.to_string();
    let mut args = target.to_vec();
    args.extend(["--calls", &calls]);
    python_client_report("call_tools.py", &args)
}

/// One Python SDK client session at `gateway` running `steps` (list, call, a person's command,
/// wait for list_changed: see `tests/python/clients/pin_steps.py`); one result per step.
pub fn session_steps(gateway: &Gateway, steps: serde_json::Value) -> Vec<serde_json::Value> {
    let report = python_client_report(
        "pin_steps.py",
        &["--url", &gateway.url, "--steps", &steps.to_string()],
    );
    report["results"]
        .as_array()
        .expect("a result per step")
        .to_owned()
}

/// `examples/roster.toml` written into `dir` as it is, except that `[servers.demo]` runs the
/// built binary (under `cargo test`, the example's `cargo run` would wait on the build lock),
/// the skills are the example's own by absolute path, and the state dir is `dir/state`.
pub fn example_config(dir: &Path) -> PathBuf {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("examples/roster.toml")).expect("example config");
    let mut table: toml::Table = text.parse().expect("the example is valid TOML");
    let demo = table_at(&mut table, &["servers", "demo"]);
    assert_eq!(
        demo.get("args")
            .and_then(|a| a.as_array())
            .and_then(|a| a.last()),
        Some(&toml::Value::String("demo-server".into())),
        "the example runs the built-in demo server"
    );
    demo.insert(
        "command".into(),
        toml::Value::String(env!("CARGO_BIN_EXE_roster").into()),
    );
    demo.insert(
        "args".into(),
        toml::Value::Array(vec![toml::Value::String("demo-server".into())]),
    );
    demo.remove("cwd");
    table_at(&mut table, &["skills"]).insert(
        "paths".into(),
        toml::Value::Array(vec![toml::Value::String(
            root.join("examples/skills").display().to_string(),
        )]),
    );
    table_at(&mut table, &["gateway"]).insert(
        "state_dir".into(),
        toml::Value::String(dir.join("state").display().to_string()),
    );
    let path = dir.join("roster.toml");
    std::fs::write(&path, table.to_string()).expect("write config");
    path
}

/// The example's table at `keys` (`["servers", "demo"]` is `[servers.demo]`).
fn table_at<'a>(table: &'a mut toml::Table, keys: &[&str]) -> &'a mut toml::Table {
    keys.iter().fold(table, |table, key| {
        table
            .get_mut(*key)
            .and_then(|t| t.as_table_mut())
            .unwrap_or_else(|| panic!("the example has [{}]", keys.join(".")))
    })
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// The `Mcp-Session-Id` an `initialize` answer gave.
pub fn session_id(answer: &reqwest::Response) -> String {
    answer
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_owned()
}

/// The HTTP status of an `initialize` POSTed to `url` with `token` as the bearer token.
pub fn post_initialize(url: &str, token: Option<&str>) -> reqwest::StatusCode {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let mut request = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(INITIALIZE);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.expect("POST /mcp").status()
    })
}

/// `roster --config CONFIG ARGS` for `gateway`'s config, as a step a person runs in a
/// [`session_steps`] script (in English, whatever the machine's LANG).
pub fn person(gateway: &Gateway, args: &[&str]) -> serde_json::Value {
    let mut argv = vec![
        "env".to_owned(),
        "ROSTER_LANG=en".to_owned(),
        env!("CARGO_BIN_EXE_roster").to_owned(),
        "--config".to_owned(),
        gateway.dir.path().join("roster.toml").display().to_string(),
    ];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    serde_json::json!(["run", argv])
}
