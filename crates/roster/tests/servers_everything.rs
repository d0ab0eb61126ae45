//! `@modelcontextprotocol/server-everything` (npm, the TypeScript SDK) through the `Roster`
//! façade, over stdio and over streamable HTTP.

mod common;

use common::{args, eventually, has_tool, test_config, text_of, toml_str};
use roster::Roster;
use roster::servers::ServerState;
use serde_json::json;

async fn check_everything(roster: &Roster) {
    let status = &roster.status()[0];
    assert_eq!(status.state, ServerState::Connected, "{status:?}");
    let names: Vec<String> = roster.tools().into_iter().map(|t| t.exposed_name).collect();
    for expected in [
        "everything__echo",
        "everything__get-sum",
        "everything__get-tiny-image",
        "everything__trigger-long-running-operation",
    ] {
        assert!(
            names.contains(&expected.to_owned()),
            "{expected} in {names:?}"
        );
    }
    // Registered in the server's `oninitialized`, after the handshake.
    eventually("the post-initialization tool is listed", || {
        has_tool(roster, "everything__simulate-research-query")
    })
    .await;
    let result = roster
        .call("everything__echo", args(json!({"message": "routed"})))
        .await
        .expect("echo answers");
    assert!(text_of(&result).contains("routed"), "{result}");
    let sum = roster
        .call("everything__get-sum", args(json!({"a": 2, "b": 40})))
        .await
        .expect("get-sum answers");
    assert!(text_of(&sum).contains("42"), "{sum}");
}

#[tokio::test]
async fn server_everything_over_stdio() {
    common::init_tracing();
    let server = format!(
        "[servers.everything]\ncommand = {}\nargs = [{}, \"stdio\"]\n",
        toml_str(&common::node22().to_string_lossy()),
        toml_str(&common::server_everything().to_string_lossy()),
    );
    let roster = Roster::start(test_config(&server, ""))
        .await
        .expect("starts");
    check_everything(&roster).await;
}

#[tokio::test]
async fn server_everything_over_streamable_http() {
    common::init_tracing();
    let port = common::free_port();
    let child = std::process::Command::new(common::node22())
        .arg(common::server_everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start server-everything");
    let _guard = common::KillOnDrop(child);
    common::wait_for_port(port);
    let server = format!("[servers.everything]\nurl = \"http://127.0.0.1:{port}/mcp\"\n");
    let roster = Roster::start(test_config(&server, ""))
        .await
        .expect("starts");
    check_everything(&roster).await;
}
