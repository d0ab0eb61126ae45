//! Fresh at the next turn, calls by a server's own tool name (MCP Apps), and where change notes
//! go. The `Roster` façade and `roster serve` front the dynamic Python server
//! (`tests/python/servers/dynamic.py`), driven by the official Python SDK clients: 2.x
//! (`Client`, `tests/python/clients/turns.py`) and 1.x (`ClientSession`,
//! `tests/python/clients/turns_mcp1.py`).
//!
//! The debounce is set to an hour in these tests, so its trailing edge never fires while they
//! run. Its leading edge lists a quiet server's first `list_changed` at once: a turn finds that
//! listing done, or waits for it (or takes it itself), and a change costs one listing either way.

mod common;

use std::path::{Path, PathBuf};

use common::{args, dynamic_server_toml, has_tool, listing_count, test_config, text_of};
use roster::Roster;
use roster::core::ListingState;
use serde_json::{Value, json};

const NO_TRAILING_EDGE: &str = "debounce = \"1h\"";

fn status_of(roster: &Roster, server: &str) -> roster::servers::ServerStatus {
    roster
        .status()
        .into_iter()
        .find(|s| s.name == server)
        .expect("server in status")
}

async fn the_turn_after_a_list_changed_is_fresh(protocol: &str) {
    common::init_tracing();
    let config = test_config(&dynamic_server_toml("dyn", protocol, &[]), NO_TRAILING_EDGE);
    let roster = Roster::start(config).await.expect("starts");
    assert_eq!(roster.begin_turn().await.delta, None);
    let before = listing_count(&roster, "dyn").await;

    // The server sends list_changed before it answers the call that added the tool.
    roster
        .call("dyn__add_tool", args(json!({"name": "fresh"})))
        .await
        .expect("add_tool answers");
    let turn = roster.begin_turn().await;
    let delta = turn.delta.expect("the very next turn has the change");
    assert_eq!(delta.added, vec!["dyn__fresh".to_owned()]);
    assert!(has_tool(&roster, "dyn__fresh"));
    assert_eq!(listing_count(&roster, "dyn").await, before + 1);

    // Answered: the next turn lists nothing.
    assert_eq!(roster.begin_turn().await.delta, None);
    assert_eq!(listing_count(&roster, "dyn").await, before + 1);

    roster
        .call("dyn__remove_tool", args(json!({"name": "fresh"})))
        .await
        .expect("remove_tool answers");
    let delta = roster.begin_turn().await.delta.expect("the removal");
    assert_eq!(delta.removed, vec!["dyn__fresh".to_owned()]);
    let err = roster.call("dyn__fresh", None).await.expect_err("gone");
    assert!(matches!(err, roster::CallError::UnknownTool(_)), "{err}");
    assert_eq!(
        listing_count(&roster, "dyn").await,
        before + 2,
        "one listing per change, whoever took it"
    );
}

#[tokio::test]
async fn the_turn_after_a_list_changed_is_fresh_legacy() {
    the_turn_after_a_list_changed_is_fresh("legacy").await;
}

#[tokio::test]
async fn the_turn_after_a_list_changed_is_fresh_modern() {
    the_turn_after_a_list_changed_is_fresh("auto").await;
}

#[tokio::test]
async fn a_storm_costs_at_most_two_listings_however_many_turns_follow() {
    common::init_tracing();
    let config = test_config(&dynamic_server_toml("dyn", "legacy", &[]), NO_TRAILING_EDGE);
    let roster = Roster::start(config).await.expect("starts");
    let mut before = listing_count(&roster, "dyn").await;
    for _ in 1..=2 {
        roster
            .call("dyn__storm", args(json!({"count": 50})))
            .await
            .expect("storm answers");
        roster.begin_turn().await;
        roster.begin_turn().await;
        roster.begin_turn().await;
        let after = listing_count(&roster, "dyn").await;
        assert!(
            (before + 1..=before + 2).contains(&after),
            "a storm costs one or two listings (the leading edge, then one for the rest), \
             however many turns follow it: {before} then {after}"
        );
        before = after;
    }
}

#[tokio::test]
async fn a_list_changed_while_a_listing_is_in_flight_leaves_the_server_stale() {
    common::init_tracing();
    // Each listing is answered 3 s late with the tools as they were when it arrived, so the
    // change below lands while the listing is in flight.
    let server = dynamic_server_toml("dyn", "legacy", &["--slow-listing", "3"]);
    let roster = Roster::start(test_config(&server, NO_TRAILING_EDGE))
        .await
        .expect("starts");
    let before = listing_count(&roster, "dyn").await;
    roster.refresh();
    let turn = tokio::spawn({
        let roster = roster.clone();
        async move { roster.begin_turn().await }
    });
    // The server counts a listing as it starts answering it.
    let mut started = before;
    while started == before {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        started = listing_count(&roster, "dyn").await;
    }
    roster
        .call("dyn__add_tool", args(json!({"name": "fresh"})))
        .await
        .expect("add_tool answers");
    let first = turn.await.expect("the turn ends");
    assert_eq!(first.delta, None, "that listing predates the change");
    assert!(
        matches!(
            status_of(&roster, "dyn").listing,
            Some(ListingState::Stale { .. })
        ),
        "a listing that started before the list_changed does not answer it"
    );
    let next = roster.begin_turn().await;
    assert_eq!(
        next.delta.expect("the next turn lists again").added,
        vec!["dyn__fresh".to_owned()]
    );
}

#[tokio::test]
async fn a_prompt_added_with_list_changed_is_there_at_the_next_turn() {
    common::init_tracing();
    let config = test_config(&dynamic_server_toml("dyn", "legacy", &[]), NO_TRAILING_EDGE);
    let roster = Roster::start(config).await.expect("starts");
    let has_prompt = |name: &str| roster.prompts().iter().any(|p| p.exposed_name == name);
    assert!(!has_prompt("dyn__greeting"));
    roster
        .call("dyn__add_prompt", args(json!({"name": "greeting"})))
        .await
        .expect("add_prompt answers");
    roster.begin_turn().await;
    assert!(
        has_prompt("dyn__greeting"),
        "the turn after prompts/list_changed lists the prompts again"
    );
    let prompt = roster
        .get_prompt("dyn__greeting", None)
        .await
        .expect("routed to the server");
    assert!(prompt.to_string().contains("prompt greeting"), "{prompt}");
}

#[tokio::test]
async fn a_call_by_a_servers_own_tool_name() {
    common::init_tracing();
    let servers = format!(
        "{}{}",
        dynamic_server_toml("a", "legacy", &[]),
        dynamic_server_toml("b", "legacy", &[])
    );
    let roster = Roster::start(test_config(&servers, NO_TRAILING_EDGE))
        .await
        .expect("starts");
    roster
        .call("a__add_tool", args(json!({"name": "only_a"})))
        .await
        .expect("add_tool answers");
    roster.begin_turn().await;
    let result = roster
        .call("only_a", None)
        .await
        .expect("one server has it");
    assert_eq!(text_of(&result), "I am only_a");
    assert_eq!(roster.route_call("only_a").expect("routes"), "a__only_a");

    let err = roster
        .call("echo", args(json!({"text": "x"})))
        .await
        .expect_err("two servers have echo");
    let message = err.to_string();
    assert!(
        matches!(err, roster::CallError::AmbiguousTool(_))
            && message.contains("a__echo")
            && message.contains("b__echo"),
        "{message}"
    );
    let result = roster
        .call("b__echo", args(json!({"text": "x"})))
        .await
        .expect("exposed names still route");
    assert_eq!(text_of(&result), "b: x");
}

// ---- through `roster serve`, with the official Python SDK clients ----

/// A config file in `dir` fronting `servers`, with no background re-list.
fn write_config(dir: &Path, servers: &str, extra: &str) -> PathBuf {
    let text = format!(
        "[gateway]\n{NO_TRAILING_EDGE}\nstate_dir = {state:?}\n\n{servers}\n{extra}\n",
        state = dir.join("state"),
    );
    common::write_roster_toml(dir, &text)
}

/// Runs a steps script (see `turns.py`) with `python` and returns its report.
fn run_steps(python: &Path, script: &str, target: &[&str], steps: &Value) -> Value {
    let steps = steps.to_string();
    let mut args = target.to_vec();
    args.extend(["--steps", &steps]);
    common::python_client_report_with(python, script, &args)
}

fn texts(result: &Value) -> Vec<String> {
    result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content in {result}"))
        .iter()
        .filter_map(|c| c["text"].as_str().map(str::to_owned))
        .collect()
}

fn fresh_turn_steps() -> Value {
    json!([
        ["list"],
        ["call", "dynamic__add_tool", {"name": "fresh"}],
        ["list"],
        ["call", "dynamic__fresh", {}],
        ["call", "dynamic__remove_tool", {"name": "fresh"}],
        ["call", "dynamic__fresh", {}],
        ["call", "dynamic__add_tool", {"name": "other"}],
        ["call", "dynamic__listing_count", {}],
        ["call", "echo", {"text": "from an app"}],
    ])
}

/// What a client of either SDK line sees; `notes` also checks where notes went. Both SDK
/// lines list tools by themselves after calling a tool they have no output schema for yet (a
/// list after a change too, which takes the note away); the steps call only tools listed
/// before, except where the 1.x client's validation differs, so notes are checked with 2.x.
fn assert_fresh_turns(report: &Value, notes: bool) {
    let steps = report["steps"].as_array().expect("steps");
    let listed: Vec<&str> = common::strings(&steps[2]);
    assert!(
        listed.contains(&"dynamic__fresh"),
        "the list right after the call that added the tool has it: {listed:?}"
    );
    assert_eq!(texts(&steps[3])[0], "I am fresh", "{}", steps[3]);
    let refused = &steps[5]["error"];
    assert_eq!(
        refused["code"], -32602,
        "a call of the removed tool is refused by roster, not sent on: {}",
        steps[5]
    );
    assert!(
        common::str_contains(&refused["message"], "dynamic__fresh"),
        "{refused}"
    );
    assert_eq!(
        texts(&steps[8]),
        vec!["dynamic: from an app".to_owned()],
        "a call by the server's own tool name reaches it"
    );
    if !notes {
        return;
    }
    assert_eq!(
        texts(&steps[3]),
        vec!["I am fresh".to_owned()],
        "the session listed after the change: no note"
    );
    let counted = &steps[7];
    let parts = texts(counted);
    assert_eq!(
        parts.len(),
        2,
        "the server's text, then the note: {counted}"
    );
    let count: u64 = parts[0]
        .parse()
        .unwrap_or_else(|_| panic!("the server's own text block is untouched: {counted}"));
    assert!(
        parts[1].starts_with("The available tools changed.") && parts[1].contains("dynamic__other"),
        "the note is a block of its own: {counted}"
    );
    assert_eq!(
        counted["structuredContent"],
        json!({"result": count}),
        "structuredContent stays the server's: {counted}"
    );
}

fn dynamic(protocol: &str) -> String {
    dynamic_server_toml("dynamic", protocol, &[])
}

/// What the Python client `script` (run by `python`, with `mode` flags first) saw of
/// [`fresh_turn_steps`] at the dynamic server (speaking `protocol`) behind roster: over stdio
/// (the client starts `roster serve`), or (`http`) at a `roster serve --http`.
fn fresh_turns(python: &Path, script: &str, mode: &[&str], protocol: &str, http: bool) -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), &dynamic(protocol), "");
    let bin = common::roster_bin();
    let mut target = mode.to_vec();
    let gateway;
    if http {
        gateway = common::start_roster_http(&config);
        target.extend(["--url", &gateway.url]);
    } else {
        target.extend([
            "--stdio",
            bin.to_str().expect("utf-8"),
            config.to_str().expect("utf-8"),
        ]);
    }
    run_steps(python, script, &target, &fresh_turn_steps())
}

#[test]
fn python_2x_client_sees_each_change_at_its_next_request_legacy() {
    let mode = ["--mode", "legacy"];
    let report = fresh_turns(&common::python(), "turns.py", &mode, "legacy", false);
    assert_eq!(report["protocol_version"], "2025-11-25", "{report}");
    assert_fresh_turns(&report, true);
}

#[test]
fn python_2x_client_sees_each_change_at_its_next_request_2026_07_28() {
    let mode = ["--mode", "auto"];
    let report = fresh_turns(&common::python(), "turns.py", &mode, "auto", true);
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    assert_fresh_turns(&report, true);
}

#[test]
fn python_1x_client_sees_each_change_at_its_next_request_stdio() {
    let report = fresh_turns(
        &common::python_mcp1(),
        "turns_mcp1.py",
        &[],
        "legacy",
        false,
    );
    assert_fresh_turns(&report, false);
}

#[test]
fn python_1x_client_sees_each_change_at_its_next_request_http() {
    let report = fresh_turns(&common::python_mcp1(), "turns_mcp1.py", &[], "legacy", true);
    assert_fresh_turns(&report, false);
}

#[test]
fn a_call_by_an_own_name_two_servers_have_is_refused_naming_both() {
    let dir = tempfile::tempdir().expect("temp dir");
    let servers = format!(
        "{}{}",
        dynamic_server_toml("a", "legacy", &[]),
        dynamic_server_toml("b", "legacy", &[])
    );
    let config = write_config(dir.path(), &servers, "");
    let gateway = common::start_roster_http(&config);
    let report = run_steps(
        &common::python(),
        "turns.py",
        &["--mode", "legacy", "--url", &gateway.url],
        &json!([
            ["call", "echo", {"text": "x"}],
            ["call", "b__echo", {"text": "x"}],
            ["call", "b__add_tool", {"name": "only_b"}],
            ["call", "only_b", {}],
            ["call", "list_skills", {}],
        ]),
    );
    let steps = report["steps"].as_array().expect("steps");
    let clash = &steps[0]["error"];
    assert_eq!(clash["code"], -32602, "{}", steps[0]);
    let message = clash["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("a__echo") && message.contains("b__echo"),
        "the error names both exposed names: {message}"
    );
    assert_eq!(texts(&steps[1])[0], "b: x");
    assert_eq!(texts(&steps[3])[0], "I am only_b", "{}", steps[3]);
    assert!(
        steps[4].get("structuredContent").is_some(),
        "native tools still answer: {}",
        steps[4]
    );
}

#[test]
fn delta_notes_can_be_turned_off_per_client() {
    let dir = tempfile::tempdir().expect("temp dir");
    let clients = "[[clients]]\nname = \"loud\"\ntoken_env = \"ROSTER_TURNS_LOUD\"\n\n\
                   [[clients]]\nname = \"quiet\"\ntoken_env = \"ROSTER_TURNS_QUIET\"\ndelta_notes = false\n";
    let config = write_config(dir.path(), &dynamic("legacy"), clients);
    let mut command = common::serve_command(&config);
    command
        .env("ROSTER_TURNS_LOUD", "loud-token")
        .env("ROSTER_TURNS_QUIET", "quiet-token");
    let (child, url) = common::serve_http(command);
    let _gateway = common::KillOnDrop(child);
    let echo_after_a_change = |token: &str, tool: &str| {
        let report = run_steps(
            &common::python(),
            "turns.py",
            &["--mode", "legacy", "--url", &url, "--token", token],
            // Listed first: the SDK lists tools by itself after calling one it has no
            // schema for, and a list after the change would rightly take the note away.
            &json!([
                ["list"],
                ["call", "dynamic__add_tool", {"name": tool}],
                ["call", "dynamic__echo", {"text": "hi"}],
            ]),
        );
        texts(&report["steps"][2])
    };
    let loud = echo_after_a_change("loud-token", "for_loud");
    assert_eq!(loud.len(), 2, "{loud:?}");
    assert_eq!(loud[0], "dynamic: hi");
    assert!(loud[1].contains("dynamic__for_loud"), "{loud:?}");
    assert_eq!(
        echo_after_a_change("quiet-token", "for_quiet"),
        vec!["dynamic: hi".to_owned()],
        "delta_notes = false for this client"
    );
}
