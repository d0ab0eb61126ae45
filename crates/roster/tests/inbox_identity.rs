//! The inbox per client identity: two `[[clients]]` tokens against a real `roster serve --http`
//! fronting the dynamic Python server, each driven by the official Python SDK client. What the
//! server sent during alice's call is alice's; bob neither sees it nor marks it read for her.
//! Everyone sees a notification that belongs to no call (the server's list_changed).

mod common;

use std::process::Command;

use serde_json::{Value, json};

const ROSTER: &str = env!("CARGO_BIN_EXE_roster");

struct Gateway {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_gateway() -> Gateway {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("roster.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nstate_dir = {state:?}\n\n{server}\n\
             [[clients]]\nname = \"alice\"\ntoken_env = \"ROSTER_TEST_ALICE\"\n\n\
             [[clients]]\nname = \"bob\"\ntoken_env = \"ROSTER_TEST_BOB\"\n",
            state = dir.path().join("state"),
            server = common::dynamic_server_toml("dynamic", "legacy", &[]),
        ),
    )
    .expect("write config");
    let mut command = Command::new(ROSTER);
    command
        .arg("--config")
        .arg(&config)
        .args([
            "serve",
            "--http",
            &format!("127.0.0.1:{}", common::free_port()),
        ])
        .env_remove("ROSTER_STATE_DIR")
        .env("ROSTER_TEST_ALICE", "alice-secret")
        .env("ROSTER_TEST_BOB", "bob-secret");
    let (child, url) = common::serve_http(command);
    Gateway {
        child,
        url,
        _dir: dir,
    }
}

/// The Python SDK client's results for `calls`, made with `token`.
fn calls(gateway: &Gateway, token: &str, calls: Value) -> Vec<Value> {
    let output = Command::new(common::python())
        .arg(common::workspace_root().join("tests/python/clients/call_tools.py"))
        .args(["--url", &gateway.url, "--token", token])
        .args(["--calls", &calls.to_string()])
        .output()
        .expect("run the Python client");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no report ({e}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    report["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {report}"))
        .clone()
}

/// What `channels` answered: its entries (structured content).
fn entries(result: &Value) -> Vec<Value> {
    result["structuredContent"]["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("channels answered no entries: {result}"))
        .clone()
}

fn notes(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["method"] == "notifications/message")
        .filter_map(|e| e["params"]["data"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn each_client_reads_and_acknowledges_its_own_inbox() {
    let gateway = start_gateway();
    let alice = calls(
        &gateway,
        "alice-secret",
        json!([
            ["dynamic__note", {"text": "for alice"}],
            ["dynamic__add_tool", {"name": "fresh"}],
            ["channels", {"action": "unread"}]
        ]),
    );
    assert_eq!(common::text_of(&alice[0]), "noted for alice", "{alice:?}");
    assert_eq!(notes(&entries(&alice[2])), ["for alice"], "{alice:?}");

    let bob = calls(
        &gateway,
        "bob-secret",
        json!([
            ["dynamic__note", {"text": "for bob"}],
            ["channels", {"action": "list", "limit": 500}],
            ["channels", {"action": "unread"}],
            ["channels", {"action": "ack"}]
        ]),
    );
    let bob_list = entries(&bob[1]);
    assert_eq!(notes(&bob_list), ["for bob"], "bob sees only his: {bob:?}");
    assert!(
        bob_list
            .iter()
            .any(|e| e["method"] == "notifications/tools/list_changed"),
        "a list_changed is everyone's: {bob_list:?}"
    );
    assert_eq!(notes(&entries(&bob[2])), ["for bob"], "{bob:?}");
    assert_eq!(bob[3]["structuredContent"]["acknowledged"], 1, "{bob:?}");

    // Bob's ack is his own: alice still has hers unread, and now bob has nothing unread.
    let alice = calls(
        &gateway,
        "alice-secret",
        json!([["channels", {"action": "unread"}]]),
    );
    assert_eq!(notes(&entries(&alice[0])), ["for alice"], "{alice:?}");
    let bob = calls(
        &gateway,
        "bob-secret",
        json!([["channels", {"action": "unread"}]]),
    );
    assert!(notes(&entries(&bob[0])).is_empty(), "{bob:?}");
}
