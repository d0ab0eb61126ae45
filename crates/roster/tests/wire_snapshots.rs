//! What a client sees on the wire, pinned as `insta` snapshots (`tests/snapshots/`): a real
//! `roster serve --http` fronting the example (`examples/roster.toml`: the demo server and the
//! example skills), driven by the official Rust SDK client (rmcp). The `tools/list` result, the
//! change note a tool result carries after a server's tools changed, the error texts of the
//! native tools, and `roster status --json` (read through the admin socket).
//!
//! A change to any of these texts fails here until its snapshot is reviewed and committed
//! (`cargo insta review`, or rename the `.snap.new` insta writes next to the old one). What
//! varies from run to run (ages and other times, pids, paths) is replaced by insta filters.

mod common;

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceError};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// A client that says when roster announced a tool change.
#[derive(Clone, Default)]
struct Listener {
    tools_changed: Arc<Notify>,
}

impl ClientHandler for Listener {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        // notify_one keeps a permit, so a notice that comes before the wait is not lost.
        self.tools_changed.notify_one();
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            Default::default(),
            Implementation::new("wire-snapshots", "1"),
        )
    }
}

type Client = RunningService<RoleClient, Listener>;

/// The example gateway over HTTP and a connected client.
async fn example() -> (common::Gateway, Client, Listener) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = common::example_config(dir.path());
    let gateway = common::Gateway::serve(dir, &config, &[]);
    let listener = Listener::default();
    let transport = StreamableHttpClientTransport::from_uri(gateway.url.as_str());
    let client = rmcp::serve_client(listener.clone(), transport)
        .await
        .expect("connect to roster");
    (gateway, client, listener)
}

/// A tool call's answer as the client got it: the result, or the JSON-RPC error.
async fn call(client: &Client, name: &str, arguments: Value) -> Value {
    let arguments = arguments.as_object().cloned().unwrap_or_default();
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
    match client.peer().call_tool(params).await {
        Ok(result) => serde_json::to_value(result).expect("a result serialises"),
        Err(ServiceError::McpError(error)) => {
            json!({"error": serde_json::to_value(error).expect("an error serialises")})
        }
        Err(other) => panic!("{name}: no answer from roster: {other}"),
    }
}

#[tokio::test]
async fn tools_list_of_the_example() {
    let (_gateway, client, _) = example().await;
    let listed = client.peer().list_tools(None).await.expect("tools/list");
    insta::assert_json_snapshot!("tools_list", listed);
}

#[tokio::test]
async fn the_change_note_after_a_servers_tools_changed() {
    let (_gateway, client, listener) = example().await;
    let toggled = call(&client, "demo__toggle_tool", json!({})).await;
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        listener.tools_changed.notified(),
    )
    .await
    .unwrap_or_else(|_| panic!("no notifications/tools/list_changed after {toggled}"));
    let echoed = call(&client, "demo__echo", json!({"text": "after"})).await;
    insta::assert_json_snapshot!("change_note", echoed);
}

#[tokio::test]
async fn native_tool_errors_for_bad_input() {
    let (_gateway, client, _) = example().await;
    let calls = [
        ("get_skill", json!({"id": "demo/no-such-skill"})),
        ("get_skill", json!({})),
        ("get_skill", json!({"id": 7})),
        (
            "resolve_flow_template",
            json!({"id": "demo/sum-and-report"}),
        ),
        (
            "resolve_flow_template",
            json!({"id": "demo/sum-and-report", "parameters": {"a": "two"}}),
        ),
        (
            "resolve_flow_template",
            json!({"id": "demo/sum-and-report", "parameters": [1]}),
        ),
        (
            "resolve_flow_template",
            json!({"id": "general/commit-messages", "parameters": {}}),
        ),
        ("search_skills", json!({"query": "sum", "limit": 0})),
        ("search_skills", json!({})),
        ("list_skills", json!({"tags": "demo"})),
        ("channels", json!({"action": "shout"})),
        ("no_such_tool", json!({})),
    ];
    let mut answers = Vec::new();
    for (name, arguments) in calls {
        let answer = call(&client, name, arguments.clone()).await;
        answers.push(json!({"call": name, "arguments": arguments, "answer": answer}));
    }
    insta::assert_json_snapshot!("native_tool_errors", answers);
}

#[tokio::test]
async fn status_json_of_the_running_example() {
    let (gateway, client, _) = example().await;
    // A turn first, so the demo server has been listed when status is read.
    client.peer().list_tools(None).await.expect("tools/list");
    let config = gateway.dir.path().join("roster.toml");
    let text = common::cli(["status", "--json"]).config(&config).stdout();
    let status: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("status --json is not JSON ({e}): {text}"));
    let root = regex_escape(&common::workspace_root().display().to_string());
    let dir = regex_escape(&gateway.dir.path().display().to_string());
    insta::with_settings!({filters => vec![
        // Ages, instants and durations are the clock's; pids the kernel's.
        (r#""(\w*(_ms|_secs|_ago|_at|_in|age|uptime|since))": -?[0-9.]+"#, r#""$1": "[time]""#),
        (r#""pid": [0-9]+"#, r#""pid": "[pid]""#),
        (dir.as_str(), "[dir]"),
        (root.as_str(), "[root]"),
    ]}, {
        insta::assert_json_snapshot!("status_json", status);
    });
}

/// `text` as a regex that matches it literally (paths in filters).
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}
