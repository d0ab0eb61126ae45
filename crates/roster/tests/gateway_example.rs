//! The first run: `examples/roster.toml` (roster fronting `roster demo-server` as `demo`, and
//! the example skills), driven by the official Python SDK client over stdio; and the `channels`
//! tool reading the inbox that run filled.
//!
//! The example starts the demo server through `cargo run`; under `cargo test` that would wait
//! on the build lock, so the test runs the example file with only `command`/`args`/`cwd` of
//! `[servers.demo]` pointed at the built binary. Every other line is the example's own.

mod common;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

fn example_config(dir: &std::path::Path) -> PathBuf {
    let root = common::workspace_root();
    let text = std::fs::read_to_string(root.join("examples/roster.toml")).expect("example config");
    let mut table: toml::Table = text.parse().expect("the example is valid TOML");
    let demo = table
        .get_mut("servers")
        .and_then(|s| s.get_mut("demo"))
        .and_then(|d| d.as_table_mut())
        .expect("the example has [servers.demo]");
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
    let skills = table
        .get_mut("skills")
        .and_then(|s| s.as_table_mut())
        .expect("the example has [skills]");
    skills.insert(
        "paths".into(),
        toml::Value::Array(vec![toml::Value::String(
            root.join("examples/skills").display().to_string(),
        )]),
    );
    let gateway = table
        .get_mut("gateway")
        .and_then(|g| g.as_table_mut())
        .expect("the example has [gateway]");
    gateway.insert(
        "state_dir".into(),
        toml::Value::String(dir.join("state").display().to_string()),
    );
    let path = dir.join("roster.toml");
    std::fs::write(&path, table.to_string()).expect("write config");
    path
}

#[test]
fn the_example_serves_the_demo_tools_its_skills_and_a_live_tool_change() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = example_config(dir.path());
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
    let output = Command::new(common::python())
        .arg(common::workspace_root().join("tests/python/clients/call_tools.py"))
        .arg("--stdio")
        .arg(env!("CARGO_BIN_EXE_roster"))
        .arg(&config)
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
        echo[1]["text"]
            .as_str()
            .is_some_and(|t| t.contains("demo__surprise")),
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
        r[8]["structuredContent"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("notifications/tools/list_changed")),
        "{report}"
    );
    assert_eq!(r[9]["isError"], true, "{report}");
    assert!(
        r[9]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("shout"))
    );
}
