//! Config files on disk: each bad config gives a clear error naming file, key and expectation;
//! a good `mcpServers` JSON file starts real servers; a server that cannot start hurts no one.

mod common;

use std::path::Path;

use roster::Config;
use roster::config::ConfigError;
use roster::servers::ServerState;

fn load(dir: &Path, file: &str, text: &str) -> Result<Config, ConfigError> {
    let path = dir.join(file);
    std::fs::write(&path, text).expect("write config");
    Config::load(&path)
}

fn error_text(dir: &Path, file: &str, text: &str) -> String {
    let err = load(dir, file, text).expect_err("config must be rejected");
    let message = err.to_string();
    assert!(
        message.contains(&dir.join(file).display().to_string()),
        "names the file: {message}"
    );
    message
}

#[test]
fn unknown_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let message = error_text(
        dir.path(),
        "roster.toml",
        "[servers.fs]\ncommand = \"npx\"\nargz = [\"-y\"]\n",
    );
    assert!(message.contains("argz"), "{message}");
    assert!(message.contains("unknown field"), "{message}");
}

#[test]
fn missing_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let message = error_text(dir.path(), "roster.toml", "[servers.fs]\nargs = [\"-y\"]\n");
    assert!(message.contains("servers.fs.command"), "{message}");
    assert!(message.contains("expected"), "{message}");
}

#[test]
fn bad_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let message = error_text(
        dir.path(),
        "roster.toml",
        "[servers.web]\nurl = \"htp:/nowhere\"\ntransport = \"sse\"\n",
    );
    assert!(message.contains("servers.web.url"), "{message}");
    assert!(message.contains("http:// or https://"), "{message}");
}

#[test]
fn missing_variable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let message = error_text(
        dir.path(),
        "roster.toml",
        "[servers.web]\nurl = \"https://example.com/mcp\"\nheaders = { Authorization = \"Bearer ${ROSTER_TEST_SURELY_UNSET_VAR}\" }\n",
    );
    assert!(
        message.contains("ROSTER_TEST_SURELY_UNSET_VAR"),
        "{message}"
    );
    assert!(
        message.contains("servers.web.headers.Authorization"),
        "{message}"
    );
}

#[test]
fn missing_command_in_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let message = error_text(
        dir.path(),
        "claude_desktop_config.json",
        r#"{"mcpServers": {"fs": {"args": ["x"]}}}"#,
    );
    assert!(message.contains("mcpServers.fs.command"), "{message}");
}

#[test]
fn unreadable_file() {
    let err = Config::load(Path::new("/nonexistent/roster.toml")).expect_err("no file");
    assert!(
        err.to_string().contains("/nonexistent/roster.toml"),
        "{err}"
    );
}

#[tokio::test]
async fn claude_desktop_json_starts_servers_and_a_broken_one_hurts_nobody() {
    common::init_tracing();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = serde_json::json!({
        "mcpServers": {
            "dyn": {
                "command": common::python(),
                "args": [common::python_fixture("dynamic.py"), "--name", "dyn"],
            },
            "broken": {"command": "/nonexistent/mcp-server"},
        }
    });
    let path = dir.path().join("claude_desktop_config.json");
    std::fs::write(&path, json.to_string()).expect("write");
    let config = Config::load(&path).expect("valid JSON config");
    let roster = roster::Roster::start(config).await.expect("starts");
    let status = roster.status();
    let broken = status.iter().find(|s| s.name == "broken").expect("broken");
    assert_ne!(broken.state, ServerState::Connected);
    assert!(
        common::last_error_says(broken, "/nonexistent/mcp-server"),
        "{broken:?}"
    );
    let dyn_status = status.iter().find(|s| s.name == "dyn").expect("dyn");
    assert_eq!(dyn_status.state, ServerState::Connected);
    let result = roster
        .call("dyn__echo", common::args(serde_json::json!({"text": "hi"})))
        .await
        .expect("the healthy server answers");
    assert_eq!(common::text_of(&result), "dyn: hi");
}
