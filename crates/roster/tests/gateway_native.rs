//! Native tools seen from a real client (the official Python SDK over streamable HTTP and
//! stdio): the skill catalog's tools, their errors, and visibility by bearer token — a caller
//! without `pro` cannot list, search, get or resolve a `pro` skill, and what it gets back is
//! byte for byte the not-found answer.

mod common;

use std::path::{Path, PathBuf};

use serde_json::json;

use common::required_text as text;

const PRO_TOKEN: &str = "pro-token";
const FREE_TOKEN: &str = "free-token";

/// roster fronting its own demo server as `demo`, with the example skills.
fn write_config(dir: &Path, gateway_extra: &str, extra: &str) -> PathBuf {
    let text = format!(
        "[gateway]\nstate_dir = {state:?}\n{gateway_extra}\n\n[servers.demo]\ncommand = {bin:?}\nargs = [\"demo-server\"]\n\n[skills]\npaths = [{skills:?}]\n\n{extra}\n",
        state = dir.join("state"),
        bin = common::ROSTER,
        skills = common::workspace_root().join("examples/skills"),
    );
    common::write_roster_toml(dir, &text)
}

fn start_http() -> common::Gateway {
    let clients = "[[clients]]\nname = \"pro\"\ntoken_env = \"ROSTER_TEST_PRO\"\nsubscriptions = [\"pro\"]\n\n[[clients]]\nname = \"free\"\ntoken_env = \"ROSTER_TEST_FREE\"\n";
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), "", clients);
    common::Gateway::serve(
        dir,
        &config,
        &[
            ("ROSTER_TEST_PRO", PRO_TOKEN),
            ("ROSTER_TEST_FREE", FREE_TOKEN),
        ],
    )
}

fn over_http<'a>(gateway: &'a common::Gateway, token: &'a str) -> [&'a str; 4] {
    ["--url", &gateway.url, "--token", token]
}

#[test]
fn a_caller_without_pro_cannot_see_a_pro_skill_and_the_answer_equals_not_found() {
    let gateway = start_http();
    let hidden = "pro/release-notes";
    let calls = json!([
        ["list_skills", {}],
        ["search_skills", {"query": "release notes"}],
        ["get_skill", {"id": hidden}],
        ["resolve_flow_template", {"id": hidden, "parameters": {"version": "1.2.3", "changes": "x"}}],
        ["get_skill", {"id": "pro/no-such-skill"}],
        ["resolve_flow_template", {"id": "pro/no-such-skill", "parameters": {}}],
    ]);
    let free = common::call_tools(&over_http(&gateway, FREE_TOKEN), &calls);
    let pro = common::call_tools(&over_http(&gateway, PRO_TOKEN), &calls);
    let (free, pro) = (&free["results"], &pro["results"]);

    assert!(
        !common::skill_ids(&free[0]).contains(&hidden.to_owned()),
        "{}",
        free[0]
    );
    assert!(
        common::skill_ids(&pro[0]).contains(&hidden.to_owned()),
        "{}",
        pro[0]
    );
    assert!(
        common::skill_ids(&free[0]).contains(&"writing/plain-style".to_owned()),
        "public skills are listed"
    );
    assert!(
        !common::skill_ids(&free[1]).contains(&hidden.to_owned()),
        "{}",
        free[1]
    );
    assert_eq!(
        common::skill_ids(&pro[1]).first().map(String::as_str),
        Some(hidden),
        "{}",
        pro[1]
    );
    assert!(pro[1]["structuredContent"]["skills"][0]["score"].is_number());
    // Entries say nothing about subscriptions.
    assert!(
        pro[0].to_string().find("visibility").is_none(),
        "{}",
        pro[0]
    );

    // Not visible reads exactly as not found: the whole result, byte for byte, once the id
    // the caller typed is the same.
    for (hidden_answer, missing_answer) in [(&free[2], &free[4]), (&free[3], &free[5])] {
        assert_eq!(hidden_answer["isError"], true, "{hidden_answer}");
        let as_missing = missing_answer
            .to_string()
            .replace("pro/no-such-skill", hidden);
        assert_eq!(hidden_answer.to_string(), as_missing);
    }
    assert_eq!(text(&free[2]), format!("skill {hidden:?} not found"));

    assert_eq!(pro[2]["isError"], false, "{}", pro[2]);
    assert_eq!(pro[2]["structuredContent"]["kind"], "flow_template");
    assert!(pro[2]["structuredContent"]["parameters"]["required"].is_array());
    let steps = &pro[3]["structuredContent"]["steps"];
    assert_eq!(steps[0]["tool"], "demo__notes_write", "{}", pro[3]);
    assert_eq!(
        steps[0]["arguments"]["title"], "release 1.2.3",
        "{}",
        pro[3]
    );
}

#[test]
fn skill_tools_answer_errors_as_tool_results_naming_the_problem() {
    let gateway = start_http();
    let calls = json!([
        ["get_skill", {"id": "writing/plain-style"}],
        ["get_skill", {}],
        ["resolve_flow_template", {"id": "demo/save-note", "parameters": {}}],
        ["resolve_flow_template", {"id": "demo/save-note", "parameters": {"title": "", "body": "b"}}],
        ["resolve_flow_template", {"id": "writing/plain-style", "parameters": {}}],
        ["resolve_flow_template", {"id": "demo/save-note", "parameters": {"title": "t", "body": "b"}}],
        ["list_skills", {"kind": "flow_template"}],
        ["list_skills", {"kind": "recipe"}],
        ["search_skills", {"query": "notes", "limit": 0}],
    ]);
    let report = common::call_tools(&over_http(&gateway, FREE_TOKEN), &calls);
    let r = &report["results"];

    assert_eq!(r[0]["structuredContent"]["kind"], "knowledge");
    assert!(
        common::str_contains(&r[0]["structuredContent"]["content"], "Plain style"),
        "{}",
        r[0]
    );
    assert_eq!(r[1]["isError"], true);
    assert!(text(&r[1]).contains("\"id\""), "{}", r[1]);

    let missing = text(&r[2]);
    assert!(
        missing.contains("missing required parameter(s): title, body"),
        "names every missing parameter: {missing}"
    );
    assert_eq!(r[3]["isError"], true, "{}", r[3]);
    assert!(
        text(&r[3]).contains("title"),
        "names the invalid parameter: {}",
        r[3]
    );
    assert!(text(&r[4]).contains("not a flow template"), "{}", r[4]);

    let steps = r[5]["structuredContent"]["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", r[5]));
    assert!(
        steps
            .iter()
            .all(|s| s["tool"].as_str().is_some_and(|t| t.starts_with("demo__"))),
        "{}",
        r[5]
    );
    assert!(
        r[5].to_string().contains("saved by roster"),
        "defaults fill in: {}",
        r[5]
    );

    assert!(
        r[6]["structuredContent"]["skills"]
            .as_array()
            .is_some_and(|s| s.iter().all(|s| s["kind"] == "flow_template")),
        "{}",
        r[6]
    );
    assert_eq!(r[7]["isError"], true);
    assert!(text(&r[7]).contains("recipe"), "{}", r[7]);
    assert_eq!(r[8]["isError"], true);
    assert!(text(&r[8]).contains("limit"), "{}", r[8]);
}

#[test]
fn skill_resources_follow_the_same_visibility() {
    let gateway = start_http();
    let free = common::call_tools(&over_http(&gateway, FREE_TOKEN), &json!([]));
    let pro = common::call_tools(&over_http(&gateway, PRO_TOKEN), &json!([]));
    let uris = common::resource_uris;
    let pro_skill = "skill://pro/release-notes/SKILL.md".to_owned();
    assert!(uris(&pro).contains(&pro_skill), "{pro}");
    assert!(!uris(&free).contains(&pro_skill), "{free}");
    assert!(uris(&free).contains(&"skill://writing/plain-style/SKILL.md".to_owned()));
}

#[test]
fn stdio_uses_the_configured_default_subscriptions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let with_pro = write_config(dir.path(), "subscriptions = [\"pro\"]", "");
    let other = tempfile::tempdir().expect("temp dir");
    let without = write_config(other.path(), "", "");
    let roster = common::roster_bin();
    let roster = roster.to_str().expect("utf-8 path");
    let calls = json!([["get_skill", {"id": "pro/release-notes"}]]);
    let seen = common::call_tools(
        &["--stdio", roster, with_pro.to_str().expect("utf-8")],
        &calls,
    );
    let unseen = common::call_tools(
        &["--stdio", roster, without.to_str().expect("utf-8")],
        &calls,
    );
    assert_eq!(seen["results"][0]["isError"], false, "{seen}");
    assert_eq!(unseen["results"][0]["isError"], true, "{unseen}");
}
