//! `roster inbox` against a running gateway: a real `roster serve --http` fronting the dynamic
//! Python server, driven by the official Python SDK client, while `roster inbox` runs as its own
//! process on the same state directory. The gateway owns the inbox (its lock), so every changing
//! command here only works through the admin socket — above all `roster inbox confirm`, which
//! answers the server's elicitation while the client's call waits.

mod common;

use std::path::Path;
use std::process::Child;

use serde_json::{Value, json};

use common::text_of;

/// A gateway fronting the dynamic server on an `initialize` session: a 2026-07-28 session has
/// no back-channel for the server's elicitation.
fn start_gateway() -> common::Gateway {
    let gateway = common::Gateway::start(
        |dir| common::dynamic_config(dir, "", "protocol = \"legacy\"", ""),
        &[],
    );
    gateway.wait_for_admin();
    gateway
}

/// `roster ARGS` on the gateway's state directory `state`.
fn roster(state: &Path, args: &[&str]) -> common::Cli {
    common::cli(args).state_dir(state)
}

fn report_of(client: Child) -> Value {
    let output = client.wait_with_output().expect("the Python client ends");
    common::client_report("call_tools.py", &output)
}

/// Has the dynamic server add the tool `fresh` (it sends list_changed) through the gateway.
fn add_fresh_tool(gateway: &common::Gateway) {
    let report = call(
        &gateway.url,
        json!([["dynamic__add_tool", {"name": "fresh"}]]),
    );
    assert_eq!(text_of(&report["results"][0]), "added fresh", "{report}");
}

fn call(url: &str, calls: Value) -> Value {
    common::call_tools(&["--url", url], &calls)
}

#[test]
fn the_cli_reads_and_changes_the_running_gateways_inbox() {
    let gateway = start_gateway();
    let state = gateway.state();
    let state = state.as_path();

    // The server's list_changed is consumed by the gateway (a re-list): a handled entry.
    add_fresh_tool(&gateway);
    common::wait_until("the list_changed shows in `roster inbox list`", || {
        common::json_lines(&roster(state, &["inbox", "list", "--json"]).stdout())
            .iter()
            .any(|e| e["method"] == "notifications/tools/list_changed" && e["channel"] == "dynamic")
    });
    let listed = common::json_lines(
        &roster(state, &["inbox", "list", "--channel", "dynamic", "--json"]).stdout(),
    );
    let changed = listed
        .iter()
        .find(|e| e["method"] == "notifications/tools/list_changed")
        .unwrap_or_else(|| panic!("no list_changed in {listed:?}"));
    assert_eq!(changed["state"], "handled", "{changed}");
    let text = roster(state, &["inbox", "list"]).stdout();
    assert!(
        text.contains("notifications/tools/list_changed") && text.contains("handled"),
        "{text}"
    );
    assert!(
        common::json_lines(
            &roster(state, &["inbox", "list", "--channel", "nobody", "--json"]).stdout()
        )
        .is_empty()
    );
    // Handled is never unread; ack changes nothing, and succeeds although the gateway holds
    // the inbox's lock (the direct backend would be refused).
    assert!(common::json_lines(&roster(state, &["inbox", "unread", "--json"]).stdout()).is_empty());
    assert_eq!(
        roster(state, &["inbox", "ack"]).stdout().trim(),
        "acknowledged 0 notifications"
    );
    assert!(
        roster(state, &["inbox", "confirm", "9999", "yes"])
            .fails()
            .contains("no pending confirm has id 9999"),
    );

    for (answer, expected) in [("yes", "accept confirm=True"), ("no", "decline")] {
        let client = common::spawn_call_tools(
            &gateway.url,
            &json!([["dynamic__confirm_delete", {"path": "/tmp/x"}]]),
        );
        let mut pending = Vec::new();
        common::wait_until("the elicitation waits in `roster inbox pending`", || {
            pending = common::json_lines(&roster(state, &["inbox", "pending", "--json"]).stdout());
            !pending.is_empty()
        });
        assert_eq!(pending.len(), 1, "{pending:?}");
        let confirm = &pending[0];
        assert_eq!(confirm["channel"], "dynamic", "{confirm}");
        assert_eq!(confirm["method"], "elicitation/create", "{confirm}");
        assert_eq!(confirm["params"]["message"], "Delete /tmp/x?", "{confirm}");
        assert_eq!(confirm["state"], "pending_confirm", "{confirm}");
        let id = confirm["id"].as_u64().expect("a numeric id").to_string();
        let text = roster(state, &["inbox", "pending"]).stdout();
        assert!(
            text.contains(&format!("#{id} ")) && text.contains("Delete /tmp/x?"),
            "{text}"
        );
        let completed = roster(state, &["__complete", "inbox-confirm"]).stdout();
        assert_eq!(
            completed.lines().next().and_then(|l| l.split('\t').next()),
            Some(id.as_str()),
            "completion offers the live pending id: {completed}"
        );

        // Human-only: neither `roster inbox list`/`unread` nor the model's `channels` shows it.
        let everything = roster(state, &["inbox", "list", "--limit", "1000", "--json"]).stdout();
        for entry in common::json_lines(&everything) {
            assert_ne!(entry["method"], "elicitation/create", "{entry}");
            assert_ne!(entry["seq"].to_string(), id, "{entry}");
        }
        assert!(
            !roster(state, &["inbox", "unread"])
                .stdout()
                .contains("Delete /tmp/x?")
        );
        let model = call(
            &gateway.url,
            json!([
                ["channels", {"action": "list", "limit": 500}],
                ["channels", {"action": "unread"}]
            ]),
        );
        let seen = model["results"].to_string();
        assert!(
            model["results"][0]["content"][0]["text"].is_string(),
            "channels answered: {model}"
        );
        assert!(
            seen.contains("list_changed"),
            "channels lists the inbox: {seen}"
        );
        assert!(
            !seen.contains("Delete /tmp/x") && !seen.contains("elicitation"),
            "a pending confirm is never shown to the model: {seen}"
        );

        let decided = roster(state, &["inbox", "confirm", &id, answer]).stdout();
        let word = if answer == "yes" {
            "confirmed"
        } else {
            "declined"
        };
        assert_eq!(decided.trim(), format!("request {id}: {word}"));
        let report = report_of(client);
        assert_eq!(
            text_of(&report["results"][0]),
            expected,
            "the server got the person's answer: {report}"
        );
        assert!(
            roster(state, &["inbox", "confirm", &id, "yes"])
                .fails()
                .contains(&format!("confirm {id} was already decided: {word}"))
        );
        assert!(
            common::json_lines(&roster(state, &["inbox", "pending", "--json"]).stdout()).is_empty()
        );
    }

    // Clear through the gateway: its live ring is empty afterwards (a replay of the trail,
    // which `clear` leaves on disk, would still show the entries).
    let cleared = roster(state, &["inbox", "clear"]).stdout();
    assert!(cleared.starts_with("cleared "), "{cleared}");
    assert!(common::json_lines(&roster(state, &["inbox", "list", "--json"]).stdout()).is_empty());
}

#[test]
fn with_the_gateway_gone_the_cli_works_on_the_trail_again() {
    let mut gateway = start_gateway();
    let state = gateway.state();
    add_fresh_tool(&gateway);
    common::wait_until("the list_changed is recorded", || {
        !common::json_lines(&roster(&state, &["inbox", "list", "--json"]).stdout()).is_empty()
    });
    // SIGKILL leaves the socket file behind; nothing answers on it any more.
    gateway.child.0.kill().expect("kill the gateway");
    gateway.child.0.wait().expect("the gateway exits");
    assert!(state.join("admin.sock").exists(), "a stale socket remains");
    let listed = common::json_lines(&roster(&state, &["inbox", "list", "--json"]).stdout());
    assert!(
        listed
            .iter()
            .any(|e| e["method"] == "notifications/tools/list_changed"),
        "{listed:?}"
    );
    // A changing command owns the trail now that the gateway's lock is gone; `--all` purges
    // it, so the next replay (every direct read is one) is empty.
    assert!(
        roster(&state, &["inbox", "clear", "--all"])
            .stdout()
            .starts_with("cleared ")
    );
    assert!(common::json_lines(&roster(&state, &["inbox", "list", "--json"]).stdout()).is_empty());
}
