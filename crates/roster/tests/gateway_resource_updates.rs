//! Resource subscriptions through roster: official Python SDK clients (two initialize-era
//! sessions, then a 2026-07-28 `subscriptions/listen` stream) against `roster serve --http`
//! fronting the Python SDK conformance fixture, once spoken to in each era. The fixture reports
//! what it holds, so the tests see roster subscribe at the server once per URI, relay each
//! update only to the sessions that subscribed, and unsubscribe when the last one left.

mod common;

use serde_json::{Value, json};

/// roster in front of `fixture` (takes subscriptions, spoken to in `protocol`) and `plain`
/// (no subscriptions; the one server offering `test://unsubscribable`); the client's report.
fn watch_through_roster(protocol: &str) -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let fixture = common::workspace_root().join("tests/python/conformance_server.py");
    let python = common::python();
    let text = format!(
        "[gateway]\nnaming = \"never\"\nstartup_wait = \"20s\"\nstate_dir = {state:?}\n\n\
         [servers.fixture]\ncommand = {python:?}\nargs = [{fixture:?}]\nprotocol = \"{protocol}\"\n\n\
         [servers.plain]\ncommand = {python:?}\nargs = [{fixture:?}, \"--no-subscribe\"]\n",
        state = dir.path().join("state"),
    );
    let config = dir.path().join("roster.toml");
    std::fs::write(&config, text).expect("write config");
    let roster = common::start_roster_http(&config);
    common::python_client_report("watch_resources.py", &[&roster.url])
}

fn check(report: &Value) {
    const WATCHED: &str = "test://watched-resource";
    const OTHER: &str = "test://watched-other";

    assert_eq!(report["subscribe_capability"], true, "{report}");
    assert_eq!(report["held_before"]["watched"], json!({}), "{report}");
    // A twice and B once on WATCHED, A on OTHER: one subscription each at the server.
    assert_eq!(
        report["held_subscribed"]["watched"],
        json!({ WATCHED: 1, OTHER: 1 }),
        "{report}"
    );
    assert_eq!(
        report["a_first"], true,
        "A heard the first update: {report}"
    );
    assert_eq!(
        report["b_first"], true,
        "B heard the first update: {report}"
    );
    // B still watches WATCHED, so roster stays subscribed after A unsubscribed.
    assert_eq!(
        report["held_after_a_unsubscribed"]["watched"],
        json!({ WATCHED: 1, OTHER: 1 }),
        "{report}"
    );
    assert_eq!(report["a_other"], true, "{report}");
    assert_eq!(report["b_second"], true, "{report}");
    // The second WATCHED update went to B only; A got OTHER's, sent after it.
    assert_eq!(report["a_updates"], json!([WATCHED, OTHER]), "{report}");
    assert_eq!(report["b_updates"], json!([WATCHED, WATCHED]), "{report}");

    assert_eq!(report["unknown"]["code"], -32002, "{report}");
    let refused = &report["unsubscribable"];
    assert_eq!(refused["code"], -32602, "{report}");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("plain") && message.contains("resources.subscribe"),
        "the error names the server and what it lacks: {message}"
    );

    // B's session ended: WATCHED is unsubscribed at the server, OTHER (A's) is not.
    assert_eq!(
        report["held_after_b_left"]["watched"],
        json!({ OTHER: 1 }),
        "{report}"
    );
    assert_eq!(
        report["held_after_all_left"]["watched"],
        json!({}),
        "{report}"
    );

    // 2026-07-28: the listen stream's subscriptions, only those roster can make.
    assert_eq!(report["modern_protocol"], "2026-07-28", "{report}");
    assert_eq!(report["listen_honored"], json!([WATCHED]), "{report}");
    assert_eq!(
        report["listen_held"]["watched"],
        json!({ WATCHED: 1 }),
        "{report}"
    );
    assert_eq!(report["listen_event"], WATCHED, "{report}");
    assert_eq!(
        report["listen_held_after"]["watched"],
        json!({}),
        "{report}"
    );
}

#[test]
fn subscriptions_reach_a_2026_server_as_listen_streams() {
    check(&watch_through_roster("modern"));
}

#[test]
fn subscriptions_reach_an_initialize_era_server_as_resources_subscribe() {
    check(&watch_through_roster("legacy"));
}
