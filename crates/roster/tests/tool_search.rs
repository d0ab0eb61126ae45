//! Search mode (`tools_mode = "search"`) with real peers: the official Python SDK client finds,
//! reads and calls a real filesystem server's tool among 5,000 others, finds a tool a server
//! adds at its next turn, and per-client modes show each client its own list.

mod common;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// `[servers.fs]`: the real filesystem server, with access to `files`.
fn fs_server(files: &Path) -> String {
    format!(
        "[servers.fs]\ncommand = {node}\nargs = [{fs}, {files}]\n",
        node = common::toml_str(&common::node22().to_string_lossy()),
        fs = common::toml_str(
            &common::npm_bin("@modelcontextprotocol/server-filesystem").to_string_lossy()
        ),
        files = common::toml_str(&files.to_string_lossy()),
    )
}

/// A config with its state in `dir/state`, `tools_mode` `mode`, startup and turn waits long
/// enough for the filler servers, more `[gateway]` lines `gateway`, and then `rest` (servers
/// and clients).
fn config_text(dir: &Path, mode: &str, gateway: &str, rest: &str) -> String {
    format!(
        "[gateway]\nstartup_wait = \"60s\"\nturn_wait = \"30s\"\nstate_dir = {state:?}\n\
         tools_mode = \"{mode}\"\n{gateway}\n\n{rest}",
        state = dir.join("state"),
    )
}

/// A temp dir for the filesystem server holding `notes.txt` with `text`, and that file.
fn notes(text: &str) -> (tempfile::TempDir, PathBuf) {
    let files = tempfile::tempdir().expect("temp dir");
    let notes = files.path().join("notes.txt");
    std::fs::write(&notes, text).expect("write notes");
    (files, notes)
}

/// `search_tools.py`'s report from a session over stdio with `roster serve` on `config` (in
/// `dir`): it searches for a way to read a text file, wants `fs__read_text_file`, reads `notes`
/// with it, and has the dynamic server add `add`; `extra` are more of its flags.
fn search_over_stdio(dir: &Path, config: &str, notes: &Path, add: &str, extra: &[&str]) -> Value {
    let path = dir.join("roster.toml");
    std::fs::write(&path, config).expect("write config");
    let path = path.to_string_lossy();
    let arguments = json!({ "path": notes }).to_string();
    let mut args = vec!["--stdio", env!("CARGO_BIN_EXE_roster"), &path];
    args.extend(extra);
    args.extend([
        "--query",
        "read a text file",
        "--want",
        "fs__read_text_file",
        "--arguments",
        &arguments,
        "--add",
        add,
    ]);
    common::python_client_report("search_tools.py", &args)
}

/// The servers of these tests: the real filesystem server over `files`, the dynamic Python
/// server (`dyn`, which adds tools on request) and five servers of 1,000 filler tools each.
fn servers(files: &Path) -> String {
    let py = common::toml_str(&common::python().to_string_lossy());
    let many = common::toml_str(&common::python_fixture("many_tools.py").to_string_lossy());
    let mut out = format!(
        "{}\n{}\n",
        fs_server(files),
        common::dynamic_server_toml("dyn", "auto", &[]),
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
    let (files, notes) = notes("the text inside notes.txt");
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config_text(
        dir.path(),
        "search",
        "always = [\"dyn__echo\"]",
        &servers(files.path()),
    );
    let report = search_over_stdio(dir.path(), &config, &notes, "zebra_striper", &[]);

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
    let (files, notes) = notes("stateless notes");
    let dir = tempfile::tempdir().expect("temp dir");
    let servers = format!(
        "{}\n{}",
        fs_server(files.path()),
        common::dynamic_server_toml("dyn", "auto", &[]),
    );
    let config = config_text(dir.path(), "search", "", &servers);
    let report = search_over_stdio(
        dir.path(),
        &config,
        &notes,
        "quagga_counter",
        &["--mode", "auto"],
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
    let rest = format!(
        "{fs}\n\
         [[clients]]\nname = \"searcher\"\ntoken_env = \"ROSTER_TEST_SEARCHER\"\n\
         always = [\"fs__list_*\"]\ntools.deny = [\"fs__list_allowed_directories\"]\n\n\
         [[clients]]\nname = \"lister\"\ntoken_env = \"ROSTER_TEST_LISTER\"\n\
         tools_mode = \"all\"\n",
        fs = fs_server(files.path()),
    );
    let gateway = common::Gateway::start(
        |dir| config_text(dir, "search", "", &rest),
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
        common::str_contains(&lister["calls"][0]["error"]["message"], "search_tools"),
        "{lister}"
    );
}

#[test]
fn a_reload_into_search_mode_indexes_the_tools_already_held() {
    let files = tempfile::tempdir().expect("temp dir");
    let fs = fs_server(files.path());
    let config = |dir: &Path, mode: &str| config_text(dir, mode, "", &fs);
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
