//! The first run: `examples/roster.toml` (roster fronting `roster demo-server` as `demo`, and
//! the example skills), driven by the official Python SDK client over stdio; and the `channels`
//! tool reading the inbox that run filled.
//!
//! The example starts the demo server through `cargo run`; under `cargo test` that would wait
//! on the build lock, so the test runs the example file with only `command`/`args`/`cwd` of
//! `[servers.demo]` pointed at the built binary. Every other line is the example's own.

mod common;

use serde_json::json;

#[test]
fn the_example_serves_the_demo_tools_its_skills_and_a_live_tool_change() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = common::example_config(dir.path());
    let calls = json!([
        ["demo__add", {"a": 2, "b": 3}],
        ["demo__notes_write", {"title": "t", "body": "hello"}],
        ["demo__notes_read", {"title": "t"}],
        ["list_skills", {"tags": ["demo"]}],
        ["demo__toggle_tool", {}],
        ["wait:list_changed", {}],
        ["demo__echo", {"text": "after"}],
        ["demo__surprise", {}],
        ["channels", {"action": "list", "channel": "demo"}],
        ["channels", {"action": "shout"}],
    ]);
    let report = common::call_tools(
        &[
            "--stdio",
            env!("CARGO_BIN_EXE_roster"),
            &config.to_string_lossy(),
        ],
        &calls,
    );
    let r = &report["results"];
    assert_eq!(r[0]["structuredContent"], json!({"sum": 5}), "{report}");
    assert_eq!(r[2]["content"][0]["text"], "hello", "{report}");
    let demo_skills = r[3]["structuredContent"]["skills"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"));
    assert!(!demo_skills.is_empty(), "{report}");
    assert!(
        demo_skills.iter().all(|s| s["available"] == true),
        "the demo skills' tools exist: {report}"
    );
    assert_eq!(r[5]["list_changed"], true, "{report}");
    let echo = &r[6]["content"];
    assert_eq!(echo[0]["text"], "after", "{report}");
    assert!(
        common::str_contains(&echo[1]["text"], "demo__surprise"),
        "the note names the new tool: {report}"
    );
    assert_eq!(r[7]["isError"], false, "the new tool is callable: {report}");

    // The inbox recorded the server's list_changed, which roster handled itself.
    let entries = r[8]["structuredContent"]["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("channels list: {report}"));
    assert!(
        entries.iter().any(|e| e["channel"] == "demo"
            && e["method"] == "notifications/tools/list_changed"
            && e["state"] == "handled"),
        "{report}"
    );
    assert!(
        common::str_contains(
            &r[8]["structuredContent"]["text"],
            "notifications/tools/list_changed"
        ),
        "{report}"
    );
    assert_eq!(r[9]["isError"], true, "{report}");
    assert!(common::str_contains(&r[9]["content"][0]["text"], "shout"));
}
