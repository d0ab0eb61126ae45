//! The inbox per client identity: two `[[clients]]` tokens against a real `roster serve --http`
//! fronting the dynamic Python server, each driven by the official Python SDK client. What the
//! server sent during alice's call is alice's; bob neither sees it nor marks it read for her.
//! Everyone sees a notification that belongs to no call (the server's list_changed).

mod common;

use serde_json::{Value, json};

fn start_gateway() -> common::Gateway {
    common::Gateway::start(
        |dir| {
            format!(
                "[gateway]\nstate_dir = {state:?}\n\n{server}\n\
                 [[clients]]\nname = \"alice\"\ntoken_env = \"ROSTER_TEST_ALICE\"\n\n\
                 [[clients]]\nname = \"bob\"\ntoken_env = \"ROSTER_TEST_BOB\"\n",
                state = dir.join("state"),
                server = common::dynamic_server_toml("dynamic", "legacy", &[]),
            )
        },
        &[
            ("ROSTER_TEST_ALICE", "alice-secret"),
            ("ROSTER_TEST_BOB", "bob-secret"),
        ],
    )
}

/// The Python SDK client's results for `calls`, made with `token`.
fn calls(gateway: &common::Gateway, token: &str, calls: Value) -> Vec<Value> {
    let report = common::call_tools(&["--url", &gateway.url, "--token", token], &calls);
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
