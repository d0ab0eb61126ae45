//! Search mode (`tools_mode = "search"`) with real peers: the official Python SDK client finds,
//! reads and calls a real filesystem server's tool among 5,000 others, finds a tool a server
//! adds at its next turn, and per-client modes show each client its own list.

mod common;

use serde_json::{Value, json};

/// The servers of these tests: the real filesystem server over `files`, the dynamic Python
/// server (`dyn`, which adds tools on request) and five servers of 1,000 filler tools each.
fn servers(files: &str) -> String {
    let py = common::toml_str(&common::python().to_string_lossy());
    let many = common::toml_str(&common::python_fixture("many_tools.py").to_string_lossy());
    let mut out = format!(
        "[servers.fs]\ncommand = {node}\nargs = [{fs}, {files}]\n\n{dynamic}\n",
        node = common::toml_str(&common::node22().to_string_lossy()),
        fs = common::toml_str(
            &common::npm_bin("@modelcontextprotocol/server-filesystem").to_string_lossy()
        ),
        files = common::toml_str(files),
        dynamic = common::dynamic_server_toml("dyn", "auto", &[]),
    );
    for domain in ["crm", "billing", "tickets", "calendar", "warehouse"] {
        out.push_str(&format!(
            "[servers.{domain}]\ncommand = {py}\nargs = [{many}, \"{domain}\", \"1000\"]\n\n"
        ));
    }
    out
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn a_python_client_finds_and_calls_a_tool_among_5000_and_finds_one_added_at_its_next_turn() {
    let files = tempfile::tempdir().expect("temp dir");
    let notes = files.path().join("notes.txt");
    std::fs::write(&notes, "the text inside notes.txt").expect("write notes");
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("roster.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nstartup_wait = \"60s\"\nturn_wait = \"30s\"\nstate_dir = {state:?}\n\
             tools_mode = \"search\"\nalways = [\"dyn__echo\"]\n\n{servers}",
            state = dir.path().join("state"),
            servers = servers(&files.path().to_string_lossy()),
        ),
    )
    .expect("write config");
    let roster = env!("CARGO_BIN_EXE_roster");
    let report = common::python_client_report(
        "search_tools.py",
        &[
            "--stdio",
            roster,
            &config.to_string_lossy(),
            "--query",
            "read a text file",
            "--want",
            "fs__read_text_file",
            "--arguments",
            &json!({"path": notes}).to_string(),
            "--add",
            "zebra_striper",
        ],
    );

    // The list: roster's own tools, the three search tools and the one `always` tool; none of
    // the 5,000 others.
    let listed = names(&report["listed"]);
    for name in [
        "search_tools",
        "describe_tools",
        "call_tool",
        "refresh_tools",
        "dyn__echo",
    ] {
        assert!(listed.contains(&name), "{name} is listed: {listed:?}");
    }
    assert!(!listed.contains(&"fs__read_text_file"), "{listed:?}");
    assert!(listed.len() < 20, "a short list: {listed:?}");

    // Found first among 5,000, described with its schema, and called both ways.
    let hits = names(&report["hits"]);
    assert_eq!(hits.first(), Some(&"fs__read_text_file"), "{hits:?}");
    let described = &report["described"]["tools"][0];
    assert_eq!(described["name"], "fs__read_text_file");
    assert!(
        described["inputSchema"]["properties"]["path"].is_object(),
        "{described}"
    );
    for how in ["through_call_tool", "direct"] {
        let text = common::text_of(&report[how]);
        assert!(
            text.contains("the text inside notes.txt"),
            "{how}: {}",
            report[how]
        );
    }

    // A tool the dynamic server added (it sent list_changed) is found at the next turn.
    assert!(
        common::text_of(&report["added"]).contains("zebra_striper"),
        "{}",
        report["added"]
    );
    assert_eq!(
        names(&report["found_after_add"]).first(),
        Some(&"dyn__zebra_striper"),
        "{report}"
    );
}

#[test]
fn a_stateless_era_client_searches_calls_and_finds_an_added_tool_with_no_session_state() {
    let files = tempfile::tempdir().expect("temp dir");
    let notes = files.path().join("notes.txt");
    std::fs::write(&notes, "stateless notes").expect("write notes");
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("roster.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nstartup_wait = \"60s\"\nturn_wait = \"30s\"\nstate_dir = {state:?}\n\
             tools_mode = \"search\"\n\n[servers.fs]\ncommand = {node}\nargs = [{fs}, {files}]\n\n\
             {dynamic}",
            state = dir.path().join("state"),
            node = common::toml_str(&common::node22().to_string_lossy()),
            fs = common::toml_str(
                &common::npm_bin("@modelcontextprotocol/server-filesystem").to_string_lossy()
            ),
            files = common::toml_str(&files.path().to_string_lossy()),
            dynamic = common::dynamic_server_toml("dyn", "auto", &[]),
        ),
    )
    .expect("write config");
    let report = common::python_client_report(
        "search_tools.py",
        &[
            "--stdio",
            env!("CARGO_BIN_EXE_roster"),
            &config.to_string_lossy(),
            "--mode",
            "auto",
            "--query",
            "read a text file",
            "--want",
            "fs__read_text_file",
            "--arguments",
            &json!({"path": notes}).to_string(),
            "--add",
            "quagga_counter",
        ],
    );
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    // Among fs's 14 tools alone, its deprecated twin fs__read_file may rank first; both answer.
    assert!(
        names(&report["hits"])[..2].contains(&"fs__read_text_file"),
        "{report}"
    );
    assert!(
        common::text_of(&report["through_call_tool"]).contains("stateless notes"),
        "{report}"
    );
    assert_eq!(
        names(&report["found_after_add"]).first(),
        Some(&"dyn__quagga_counter"),
        "{report}"
    );
}

#[test]
fn each_client_gets_its_own_mode_and_all_mode_has_no_search_tools() {
    let files = tempfile::tempdir().expect("temp dir");
    let files_dir = files.path().to_string_lossy().into_owned();
    let gateway = common::Gateway::start(
        |dir| {
            format!(
                "[gateway]\nstartup_wait = \"60s\"\nturn_wait = \"30s\"\nstate_dir = {state:?}\n\
                 tools_mode = \"search\"\n\n\
                 [servers.fs]\ncommand = {node}\nargs = [{fs}, {files}]\n\n\
                 [[clients]]\nname = \"searcher\"\ntoken_env = \"ROSTER_TEST_SEARCHER\"\n\
                 always = [\"fs__list_*\"]\ntools.deny = [\"fs__list_allowed_directories\"]\n\n\
                 [[clients]]\nname = \"lister\"\ntoken_env = \"ROSTER_TEST_LISTER\"\n\
                 tools_mode = \"all\"\n",
                state = dir.join("state"),
                node = common::toml_str(&common::node22().to_string_lossy()),
                fs = common::toml_str(
                    &common::npm_bin("@modelcontextprotocol/server-filesystem").to_string_lossy()
                ),
                files = common::toml_str(&files_dir),
            )
        },
        &[
            ("ROSTER_TEST_SEARCHER", "searcher-token"),
            ("ROSTER_TEST_LISTER", "lister-token"),
        ],
    );
    let view = |token: &str, calls: Value| {
        common::python_client_report(
            "identity_view.py",
            &[
                "--url",
                gateway.url.as_str(),
                "--token",
                token,
                "--calls",
                &calls.to_string(),
            ],
        )
    };
    let search = json!(["search_tools", {"query": "list the allowed directories"}]);

    // The searcher: its own `always` tools, less what it may not use; search hides those too.
    let searcher = view("searcher-token", json!([search]));
    let listed = names(&searcher["tools"]);
    assert!(listed.contains(&"search_tools"), "{listed:?}");
    assert!(listed.contains(&"fs__list_directory"), "{listed:?}");
    assert!(
        !listed.contains(&"fs__list_allowed_directories"),
        "{listed:?}"
    );
    assert!(!listed.contains(&"fs__read_text_file"), "{listed:?}");
    assert_eq!(searcher["tools_cache_scope"], "private", "{searcher}");
    let hits = &searcher["calls"][0]["structuredContent"]["tools"];
    let found: Vec<&str> = hits
        .as_array()
        .map(|h| h.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(!found.is_empty(), "{searcher}");
    assert!(
        !found.contains(&"fs__list_allowed_directories"),
        "{found:?}"
    );

    // The lister: every tool, no search tools, and search_tools is unknown to it.
    let lister = view("lister-token", json!([search]));
    let listed = names(&lister["tools"]);
    assert!(listed.contains(&"fs__read_text_file"), "{listed:?}");
    assert!(
        listed.contains(&"fs__list_allowed_directories"),
        "{listed:?}"
    );
    assert!(!listed.contains(&"search_tools"), "{listed:?}");
    assert!(
        lister["calls"][0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("search_tools")),
        "{lister}"
    );
}

#[test]
fn a_reload_into_search_mode_indexes_the_tools_already_held() {
    let files = tempfile::tempdir().expect("temp dir");
    let files_dir = files.path().to_string_lossy().into_owned();
    let config = move |dir: &std::path::Path, mode: &str| {
        format!(
            "[gateway]\nstartup_wait = \"60s\"\nturn_wait = \"30s\"\nstate_dir = {state:?}\n\
             tools_mode = \"{mode}\"\n\n\
             [servers.fs]\ncommand = {node}\nargs = [{fs}, {files}]\n",
            state = dir.join("state"),
            node = common::toml_str(&common::node22().to_string_lossy()),
            fs = common::toml_str(
                &common::npm_bin("@modelcontextprotocol/server-filesystem").to_string_lossy()
            ),
            files = common::toml_str(&files_dir),
        )
    };
    let gateway = common::Gateway::start(|dir| config(dir, "all"), &[]);
    let search = json!([["search_tools", {"query": "create a new directory"}]]);
    let view = || {
        common::python_client_report(
            "identity_view.py",
            &[
                "--url",
                gateway.url.as_str(),
                "--calls",
                &search.to_string(),
            ],
        )
    };
    let before = view();
    assert!(
        names(&before["tools"]).contains(&"fs__create_directory"),
        "{before}"
    );
    assert!(before["calls"][0]["error"].is_object(), "{before}");

    let path = gateway.dir.path().join("roster.toml");
    std::fs::write(&path, config(gateway.dir.path(), "search")).expect("write");
    let said = common::cli(["reload"]).config(&path).stdout();
    assert!(said.contains("gateway.tools_mode"), "{said}");

    let after = view();
    let listed = names(&after["tools"]);
    assert!(listed.contains(&"search_tools"), "{after}");
    assert!(!listed.contains(&"fs__create_directory"), "{after}");
    assert_eq!(
        after["calls"][0]["structuredContent"]["tools"][0]["name"], "fs__create_directory",
        "{after}"
    );
}
