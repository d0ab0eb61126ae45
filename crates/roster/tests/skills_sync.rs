//! Servers as skill sources (SEP-2640): a server that declares the skills extension adds its
//! skills to roster's catalog as `SERVER/<path at the server>`, served by the skill tools and
//! roster's own `skill://` resources, followed as the server changes them, filtered and made
//! visible as its `[servers.NAME] skills` config says.
//!
//! The skills server is a second roster over stdio (`roster --config upstream.toml serve`),
//! publishing a skills dir of the test's and, where a test needs tools, the demo server as
//! `demo`; the client is the official Python SDK at the front roster over streamable HTTP.

mod common;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use common::resource_uris as uris;

const PRO_TOKEN: &str = "pro-token";
const TEAM_TOKEN: &str = "team-token";
const FREE_TOKEN: &str = "free-token";

/// What `reference.md` beside the upstream's `pdf/forms/SKILL.md` says.
const REFERENCE: &str = "# Field names\n\nname, date, signature\n";

/// Three HTTP clients: `pro` and `team` with that subscription, `free` with none.
const CLIENTS: &str = r#"[[clients]]
name = "pro"
token_env = "ROSTER_TEST_PRO"
subscriptions = ["pro"]

[[clients]]
name = "team"
token_env = "ROSTER_TEST_TEAM"
subscriptions = ["team"]

[[clients]]
name = "free"
token_env = "ROSTER_TEST_FREE"
"#;

/// Writes each `(path, text)` under `root` (which is made even when there is nothing to write).
fn write_files(root: &Path, files: &[(String, String)]) {
    std::fs::create_dir_all(root).expect("mkdir");
    for (path, text) in files {
        write(&root.join(path), text);
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A `SKILL.md` named `name` with `front` (more front matter lines, each ending in `\n`).
fn skill_md(name: &str, description: &str, front: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n{front}---\n\n{body}\n")
}

/// The upstream's `pdf/forms` (it relies on `demo__word_count`) and the file beside it.
fn pdf_forms() -> [(String, String); 2] {
    [
        (
            "pdf/forms/SKILL.md".to_owned(),
            skill_md(
                "forms",
                "Fill in PDF forms.",
                "tools: [demo__word_count]\n",
                "# PDF forms\n\nThe field names are in reference.md.",
            ),
        ),
        ("pdf/forms/reference.md".to_owned(), REFERENCE.to_owned()),
    ]
}

/// The front matter of the upstream's `ops/shout` after `name` and `description`.
const SHOUT_FRONT: &str = r#"kind: flow_template
parameters:
  type: object
  properties:
    text: {type: string, description: What to shout.}
  required: [text]
steps:
  - tool: demo__echo
    arguments:
      text: "{text}!"
"#;

/// The upstream's `ops/shout`: a flow template of one step, the upstream's `demo__echo`.
fn ops_shout() -> (String, String) {
    (
        "ops/shout/SKILL.md".to_owned(),
        skill_md(
            "shout",
            "Echo a text back, louder.",
            SHOUT_FRONT,
            "Run the one step.",
        ),
    )
}

/// A knowledge skill at `<ns>/<name>/SKILL.md`.
fn knowledge(ns: &str, name: &str, description: &str, front: &str) -> (String, String) {
    (
        format!("{ns}/{name}/SKILL.md"),
        skill_md(name, description, front, "Read on."),
    )
}

/// `dir/NAME.toml`: a second roster, the front's server `NAME`, publishing the skills in
/// `dir/upstream-skills` and, with `demo`, exposing roster's demo server as `demo`. Its stdio
/// clients have the `pro` subscription, so it hides none of its skills from the front: who
/// sees a synced skill is the front's business.
fn upstream_toml(dir: &Path, name: &str, demo: bool) -> PathBuf {
    let demo = if demo {
        format!(
            "[servers.demo]\ncommand = {:?}\nargs = [\"demo-server\"]\n",
            common::roster_bin()
        )
    } else {
        String::new()
    };
    let text = format!(
        "[gateway]\nstate_dir = {state:?}\nsubscriptions = [\"pro\"]\ndebounce = \"100ms\"\n\n\
         [skills]\npaths = [{skills:?}]\n\n{demo}",
        state = dir.join(format!("{name}-state")),
        skills = dir.join("upstream-skills"),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).expect("write upstream config");
    path
}

/// `[servers.NAME]` running the upstream roster of [`upstream_toml`] over stdio, then `extra`
/// (keys of that table, such as `skills = false`, or a `[servers.NAME.skills]` table).
fn upstream_server(dir: &Path, name: &str, demo: bool, extra: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = {bin:?}\n\
         args = [\"--config\", {config:?}, \"serve\"]\n{extra}\n\n",
        bin = common::roster_bin(),
        config = upstream_toml(dir, name, demo),
    )
}

/// The front roster in a new temp dir: `upstream` files written under `dir/upstream-skills`,
/// `local` ones under `dir/skills` (its own `[skills] paths`), and `rest(dir)` (its servers,
/// clients) after its `[gateway]` and `[skills]`.
fn start(
    upstream: &[(String, String)],
    local: &[(String, String)],
    rest: impl FnOnce(&Path) -> String,
    env: &[(&str, &str)],
) -> common::Gateway {
    start_debounced("100ms", upstream, local, rest, env)
}

/// [`start`] with the front's `debounce` (how long after a server's `list_changed` the
/// background re-list runs when no turn comes).
fn start_debounced(
    debounce: &str,
    upstream: &[(String, String)],
    local: &[(String, String)],
    rest: impl FnOnce(&Path) -> String,
    env: &[(&str, &str)],
) -> common::Gateway {
    common::Gateway::start(
        |dir| {
            write_files(&dir.join("upstream-skills"), upstream);
            write_files(&dir.join("skills"), local);
            format!(
                "[gateway]\nstate_dir = {state:?}\ndebounce = {debounce:?}\n\n\
                 [skills]\npaths = [{skills:?}]\n\n{rest}",
                state = dir.join("state"),
                skills = dir.join("skills"),
                rest = rest(dir),
            )
        },
        env,
    )
}

/// The Python SDK client's report for `calls` at `front`, as the holder of `token`.
fn call(front: &common::Gateway, token: Option<&str>, calls: &Value) -> Value {
    let mut target = vec!["--url", front.url.as_str()];
    if let Some(token) = token {
        target.extend(["--token", token]);
    }
    common::call_tools(&target, calls)
}

/// The ids `list_skills` answers the holder of `token` now.
fn listed(front: &common::Gateway, token: Option<&str>) -> Vec<String> {
    common::skill_ids(&call(front, token, &json!([["list_skills", {}]]))["results"][0])
}

/// Waits until `list_skills` lists `id` to the holder of `token` (the front has synced).
fn wait_for_skill(front: &common::Gateway, token: Option<&str>, id: &str) {
    common::wait_until(&format!("{id} is listed"), || {
        listed(front, token).iter().any(|i| i == id)
    });
}

/// `get_skill` of `id` at `front`: the skill's description, or the error text.
fn described(front: &common::Gateway, token: Option<&str>, id: &str) -> String {
    let report = call(front, token, &json!([["get_skill", {"id": id}]]));
    let result = &report["results"][0];
    match result["structuredContent"]["description"].as_str() {
        Some(description) => description.to_owned(),
        None => common::text_of(result),
    }
}

/// The text of a `resources/read` result's first contents.
fn read_text(result: &Value) -> &str {
    result["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {result}"))
}

/// Not visible (or not taken) must read exactly as not found: `hidden`, the answer about
/// `hidden_id`, is byte for byte `missing`, the answer about `missing_id`, once the id is the
/// same.
fn assert_reads_as_missing(hidden: &Value, hidden_id: &str, missing: &Value, missing_id: &str) {
    assert!(
        hidden["isError"] == true || hidden.get("error").is_some(),
        "{hidden_id} is not served: {hidden}"
    );
    assert_eq!(
        hidden.to_string(),
        missing.to_string().replace(missing_id, hidden_id),
        "{hidden_id} reads as {missing_id} does"
    );
}

#[test]
fn a_client_finds_reads_and_resolves_a_skill_only_the_upstream_publishes() {
    let mut upstream = pdf_forms().to_vec();
    upstream.push(ops_shout());
    let front = start(
        &upstream,
        &[],
        |dir| upstream_server(dir, "docs", true, ""),
        &[],
    );
    wait_for_skill(&front, None, "docs/pdf/forms");
    // `roster status` counts the server's skills beside its tools.
    front.wait_for_admin();
    let status: Value = serde_json::from_str(
        &common::cli(["status", "--json"])
            .config(front.dir.path().join("roster.toml"))
            .stdout(),
    )
    .expect("status --json");
    let docs = status
        .as_array()
        .and_then(|servers| servers.iter().find(|s| s["name"] == "docs"))
        .unwrap_or_else(|| panic!("no docs in {status}"));
    assert_eq!(docs["skills"], 2, "{docs}");

    let report = call(
        &front,
        None,
        &json!([
            ["list_skills", {}],
            ["search_skills", {"query": "fill in pdf forms"}],
            ["get_skill", {"id": "docs/pdf/forms"}],
            ["read:skill://docs/pdf/forms/reference.md", {}],
            ["read:skill://docs/pdf/forms/SKILL.md", {}],
            ["get_skill", {"id": "docs/ops/shout"}],
            ["resolve_flow_template", {"id": "docs/ops/shout", "parameters": {"text": "hello"}}],
            ["docs__demo__echo", {"text": "hello!"}],
        ]),
    );
    let r = &report["results"];

    let listed = common::skill_ids(&r[0]);
    assert!(
        listed.contains(&"docs/pdf/forms".to_owned())
            && listed.contains(&"docs/ops/shout".to_owned()),
        "{}",
        r[0]
    );
    assert!(
        !listed
            .iter()
            .any(|id| id.starts_with("pdf/") || id.starts_with("ops/")),
        "only namespaced ids: {listed:?}"
    );
    assert!(
        common::skill_ids(&r[1]).contains(&"docs/pdf/forms".to_owned()),
        "search finds it: {}",
        r[1]
    );

    let forms = &r[2]["structuredContent"];
    assert_eq!(r[2]["isError"], false, "{}", r[2]);
    assert_eq!(forms["id"], "docs/pdf/forms");
    assert_eq!(forms["name"], "forms");
    assert_eq!(forms["description"], "Fill in PDF forms.");
    assert_eq!(forms["kind"], "knowledge");
    assert!(
        common::str_contains(&forms["content"], "The field names are in reference.md."),
        "{}",
        r[2]
    );
    // The upstream's own tool name, as the front exposes that tool.
    assert_eq!(
        forms["tools"],
        json!(["docs__demo__word_count"]),
        "{}",
        r[2]
    );

    // The file beside SKILL.md, read through the front at the front's URI.
    assert_eq!(read_text(&r[3]), REFERENCE, "{}", r[3]);
    assert_eq!(
        r[3]["contents"][0]["uri"], "skill://docs/pdf/forms/reference.md",
        "{}",
        r[3]
    );
    assert!(read_text(&r[4]).contains("Fill in PDF forms."), "{}", r[4]);

    let shout = &r[5]["structuredContent"];
    assert_eq!(shout["kind"], "flow_template", "{}", r[5]);
    assert_eq!(shout["available"], true, "{}", r[5]);
    assert_eq!(
        r[6]["structuredContent"]["steps"],
        json!([{"tool": "docs__demo__echo", "arguments": {"text": "hello!"}}]),
        "the step names the front's exposed tool: {}",
        r[6]
    );
    // ... which the client can call as resolved.
    assert_eq!(common::text_of(&r[7]), "hello!", "{}", r[7]);

    let resources = uris(&report);
    for uri in [
        "skill://docs/pdf/forms/SKILL.md",
        "skill://docs/ops/shout/SKILL.md",
    ] {
        assert!(resources.contains(&uri.to_owned()), "{uri}: {resources:?}");
    }
    assert!(
        !resources
            .iter()
            .any(|u| u.starts_with("skill://pdf/") || u.starts_with("skill://ops/")),
        "the upstream's own skill:// resources are not passed through: {resources:?}"
    );
}

#[test]
fn upstream_skills_added_edited_and_removed_reach_a_client_at_its_next_turn() {
    // `auto` settles on 2026-07-28 with a roster upstream: its resources' list changes come
    // on the `subscriptions/listen` stream. No background re-list comes within the test (an
    // hour's debounce): each change is listed by a client's turn.
    upstream_changes_reach_a_client("", "1h");
}

#[test]
fn upstream_skills_added_edited_and_removed_reach_a_client_in_the_initialize_era() {
    // With a short debounce the background re-list runs too, and a client that only waits in
    // its session hears of the change.
    upstream_changes_reach_a_client("protocol = \"legacy\"", "100ms");
}

/// Adds, edits and removes upstream skills on disk and waits for each at the front; the
/// front's server entry has `extra` besides, and the front's `debounce` is `debounce`.
fn upstream_changes_reach_a_client(extra: &str, debounce: &str) {
    let guide = |description: &str| knowledge("ops", "guide", description, "").1;
    let front = start_debounced(
        debounce,
        &[knowledge("ops", "guide", "The first version.", "")],
        &[],
        |dir| upstream_server(dir, "docs", false, extra),
        &[],
    );
    let upstream = front.dir.path().join("upstream-skills");
    wait_for_skill(&front, None, "docs/ops/guide");
    assert_eq!(
        described(&front, None, "docs/ops/guide"),
        "The first version."
    );

    write(
        &upstream.join("ops/guide/SKILL.md"),
        &guide("The second version."),
    );
    common::wait_until("the upstream's edit is served", || {
        described(&front, None, "docs/ops/guide") == "The second version."
    });

    let (extra, text) = knowledge("ops", "extra", "An added skill.", "");
    write(&upstream.join(extra), &text);
    common::wait_until("the upstream's added skill is served", || {
        described(&front, None, "docs/ops/extra") == "An added skill."
    });
    std::fs::remove_dir_all(upstream.join("ops/extra")).expect("remove");
    common::wait_until("the upstream's removed skill is gone", || {
        described(&front, None, "docs/ops/extra") == "skill \"docs/ops/extra\" not found"
    });
    assert!(
        !uris(&call(&front, None, &json!([])))
            .contains(&"skill://docs/ops/extra/SKILL.md".to_owned()),
        "its resource is gone too"
    );

    if debounce == "1h" {
        // One session, and in it only skill tool calls: its get_skill is the turn that lists
        // the server the edit made stale (no tools/list, no background re-list comes).
        let calls = json!([
            ["pause", {"seconds": 8}],
            ["get_skill", {"id": "docs/ops/guide"}]
        ]);
        let report = common::call_tools_while(&front.url, &calls, |n| {
            if n == 1 {
                write(
                    &upstream.join("ops/guide/SKILL.md"),
                    &guide("The third version."),
                );
            }
        });
        assert_eq!(
            report["results"][1]["structuredContent"]["description"], "The third version.",
            "{report}"
        );
        // A client that sends nothing hears of a change only from the background re-list.
        return;
    }
    // A client in a session hears of it: resources/list_changed. Skills are added upstream
    // until the client is done.
    let calls = json!([
        ["get_skill", {"id": "docs/ops/guide"}],
        ["wait:resources_list_changed", {}]
    ]);
    let report = common::call_tools_while(&front.url, &calls, |n| {
        let (path, text) = knowledge("news", &format!("item-{n}"), &format!("News {n}."), "");
        write(&upstream.join(path), &text);
    });
    assert_eq!(
        report["results"][0]["structuredContent"]["description"], "The second version.",
        "{report}"
    );
    assert_eq!(
        report["results"][1]["list_changed"], true,
        "the client got resources/list_changed: {report}"
    );
}

#[test]
fn a_synced_skill_is_seen_only_by_its_subscriptions_and_hidden_reads_as_not_found() {
    let front = start(
        &[
            knowledge("paid", "report", "A pro report.", "visibility: [pro]\n"),
            knowledge("team", "handbook", "The team's handbook.", ""),
        ],
        &[knowledge("local", "guide", "A public local guide.", "")],
        |dir| {
            let docs = upstream_server(
                dir,
                "docs",
                false,
                "\n[servers.docs.skills]\nvisibility = [\"team\"]",
            );
            format!("{docs}{CLIENTS}")
        },
        &[
            ("ROSTER_TEST_PRO", PRO_TOKEN),
            ("ROSTER_TEST_TEAM", TEAM_TOKEN),
            ("ROSTER_TEST_FREE", FREE_TOKEN),
        ],
    );
    wait_for_skill(&front, Some(PRO_TOKEN), "docs/paid/report");

    let (report_id, handbook_id, missing_id) = (
        "docs/paid/report",
        "docs/team/handbook",
        "docs/nothing/here",
    );
    let calls = json!([
        ["list_skills", {}],
        ["get_skill", {"id": report_id}],
        ["get_skill", {"id": handbook_id}],
        ["get_skill", {"id": missing_id}],
        [format!("read:skill://{report_id}/SKILL.md"), {}],
        [format!("read:skill://{handbook_id}/SKILL.md"), {}],
        [format!("read:skill://{missing_id}/SKILL.md"), {}],
    ]);
    // Who sees which synced skill; `local/guide` is everyone's.
    for (token, seen) in [
        (PRO_TOKEN, vec![report_id]),
        (TEAM_TOKEN, vec![handbook_id]),
        (FREE_TOKEN, vec![]),
    ] {
        let report = call(&front, Some(token), &calls);
        let r = &report["results"];
        let listed = common::skill_ids(&r[0]);
        assert!(
            listed.contains(&"local/guide".to_owned()),
            "{token}: {listed:?}"
        );
        let synced: Vec<&str> = listed
            .iter()
            .map(String::as_str)
            .filter(|id| id.starts_with("docs/"))
            .collect();
        assert_eq!(synced, seen, "{token} lists");
        let synced_uris: Vec<String> = uris(&report)
            .into_iter()
            .filter(|u| u.starts_with("skill://docs/"))
            .collect();
        let seen_uris: Vec<String> = seen
            .iter()
            .map(|id| format!("skill://{id}/SKILL.md"))
            .collect();
        assert_eq!(synced_uris, seen_uris, "{token} lists as resources");

        for (id, get, read) in [(report_id, 1, 4), (handbook_id, 2, 5)] {
            if seen.contains(&id) {
                assert_eq!(r[get]["isError"], false, "{token}: {}", r[get]);
                assert_eq!(r[get]["structuredContent"]["id"], id);
                assert!(r[read]["contents"].is_array(), "{token}: {}", r[read]);
            } else {
                assert_reads_as_missing(&r[get], id, &r[3], missing_id);
                assert_reads_as_missing(&r[read], id, &r[6], missing_id);
            }
        }
    }
}

#[test]
fn a_servers_skills_are_taken_as_its_config_says_filtered_or_not_at_all() {
    let mut upstream = pdf_forms().to_vec();
    upstream.push(knowledge("ops", "guide", "An ops guide.", ""));
    let front = start(
        &upstream,
        &[knowledge("local", "guide", "A local guide.", "")],
        |dir| {
            let some = upstream_server(
                dir,
                "some",
                false,
                "\n[servers.some.skills]\ndeny = [\"pdf/*\"]",
            );
            let none = upstream_server(dir, "none", false, "skills = false");
            format!("{some}{none}")
        },
        &[],
    );
    // `some` has synced, and `none` is connected with its tools listed.
    common::wait_until("some/ops/guide is listed and none is connected", || {
        let report = call(
            &front,
            None,
            &json!([["list_skills", {}], ["none__list_skills", {}]]),
        );
        common::skill_ids(&report["results"][0]).contains(&"some/ops/guide".to_owned())
            && report["results"][1]["structuredContent"]["skills"].is_array()
    });

    let report = call(
        &front,
        None,
        &json!([
            ["list_skills", {}],
            ["get_skill", {"id": "some/pdf/forms"}],
            ["get_skill", {"id": "some/nothing/here"}],
            ["read:skill://some/pdf/forms/SKILL.md", {}],
            ["read:skill://some/nothing/here/SKILL.md", {}],
            ["read:skill://some/pdf/forms/reference.md", {}],
            ["get_skill", {"id": "none/ops/guide"}],
        ]),
    );
    let r = &report["results"];
    let mut listed = common::skill_ids(&r[0]);
    listed.sort();
    assert_eq!(
        listed,
        vec!["local/guide", "some/ops/guide"],
        "`pdf/*` is denied at some, and none syncs nothing"
    );
    assert_reads_as_missing(&r[1], "some/pdf/forms", &r[2], "some/nothing/here");
    assert_reads_as_missing(&r[3], "some/pdf/forms", &r[4], "some/nothing/here");
    assert!(
        r[5].get("error").is_some(),
        "a denied skill's files are not served: {}",
        r[5]
    );
    assert_eq!(
        common::text_of(&r[6]),
        "skill \"none/ops/guide\" not found",
        "{}",
        r[6]
    );

    let skill_uris: Vec<String> = uris(&report)
        .into_iter()
        .filter(|u| u.starts_with("skill://"))
        .collect();
    assert_eq!(
        skill_uris,
        vec![
            "skill://local/guide/SKILL.md",
            "skill://some/ops/guide/SKILL.md"
        ],
        "neither denied nor switched-off skills are resources, nor are the servers' own"
    );
}

#[test]
fn a_local_skill_keeps_its_id_and_a_clashing_synced_skill_takes_the_server_name_once_more() {
    let local = skill_md("forms", "The local forms guide.", "", "Ours.");
    let front = start(
        &pdf_forms(),
        &[("docs/pdf/forms/SKILL.md".to_owned(), local)],
        |dir| upstream_server(dir, "docs", false, ""),
        &[],
    );
    wait_for_skill(&front, None, "docs/docs/pdf/forms");

    let report = call(
        &front,
        None,
        &json!([
            ["list_skills", {}],
            ["get_skill", {"id": "docs/pdf/forms"}],
            ["get_skill", {"id": "docs/docs/pdf/forms"}],
            ["read:skill://docs/pdf/forms/SKILL.md", {}],
            ["read:skill://docs/docs/pdf/forms/SKILL.md", {}],
            ["read:skill://docs/docs/pdf/forms/reference.md", {}],
        ]),
    );
    let r = &report["results"];
    let mut listed = common::skill_ids(&r[0]);
    listed.sort();
    assert_eq!(listed, vec!["docs/docs/pdf/forms", "docs/pdf/forms"]);
    assert_eq!(
        r[1]["structuredContent"]["description"], "The local forms guide.",
        "{}",
        r[1]
    );
    assert_eq!(
        r[2]["structuredContent"]["description"], "Fill in PDF forms.",
        "{}",
        r[2]
    );
    assert!(
        read_text(&r[3]).contains("The local forms guide."),
        "{}",
        r[3]
    );
    assert!(read_text(&r[4]).contains("Fill in PDF forms."), "{}", r[4]);
    assert_eq!(read_text(&r[5]), REFERENCE, "{}", r[5]);

    let resources = uris(&report);
    for uri in [
        "skill://docs/pdf/forms/SKILL.md",
        "skill://docs/docs/pdf/forms/SKILL.md",
    ] {
        assert!(resources.contains(&uri.to_owned()), "{uri}: {resources:?}");
    }
}

#[test]
fn a_server_that_only_lists_skill_resources_is_a_skill_source_too() {
    // The Python SDK 1.x's FastMCP, without the skills extension: `skill://guide/SKILL.md` and
    // `skill://guide/notes.md` as plain resources, beside `test://plain`.
    let fixture = common::workspace_root().join("tests/python/servers/skill_resources.py");
    let front = start(
        &[],
        &[],
        |_| {
            format!(
                "[servers.py]\ncommand = {:?}\nargs = [{:?}]\n",
                common::python_mcp1(),
                fixture
            )
        },
        &[],
    );
    wait_for_skill(&front, None, "py/guide");
    let report = call(
        &front,
        None,
        &json!([
            ["get_skill", {"id": "py/guide"}],
            ["read:skill://py/guide/notes.md", {}],
        ]),
    );
    let r = &report["results"];
    assert_eq!(
        r[0]["structuredContent"]["description"], "The first version.",
        "{}",
        r[0]
    );
    assert_eq!(r[0]["structuredContent"]["content"], "See notes.md.\n");
    assert_eq!(read_text(&r[1]), "# Notes\n\nWhat the guide leaves out.\n");
    let listed = uris(&report);
    assert!(
        listed.contains(&"skill://py/guide/SKILL.md".to_owned())
            && listed.contains(&"test://plain".to_owned()),
        "{listed:?}"
    );
    assert!(
        !listed.iter().any(|u| u.starts_with("skill://guide/")),
        "the server's own skill:// resources are not passed through: {listed:?}"
    );

    // Rewritten at the server (no digest says so: the file is read again at the listing its
    // resources/list_changed brings).
    call(
        &front,
        None,
        &json!([["py__rewrite_guide", {"description": "The second version."}]]),
    );
    common::wait_until("the rewritten skill is served", || {
        described(&front, None, "py/guide") == "The second version."
    });
}
