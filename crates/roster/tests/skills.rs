//! Skills seen from outside: real skill directories on disk, the SQLite store, and the
//! `roster skills check` binary.

mod common;

use std::path::PathBuf;

use {
    roster::core::catalog::{ListFilter, Subscriptions},
    roster::core::skills::{Availability, SkillError, SkillKind},
    roster::core::{ToolLookup, ToolPresence},
    roster::store::{
        CatalogStore, DEFAULT_MAX_SKILL_FILE_SIZE, IndexStats, SqliteStore, index_dir, load_catalog,
    },
    serde_json::json,
    std::collections::HashMap,
    std::sync::Arc,
};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn examples() -> PathBuf {
    workspace().join("examples/skills")
}

fn invalid_fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/skills-invalid")
}

/// The demo server's tools as the tool registry would answer for them once it is listed.
struct DemoTools {
    gone: Vec<&'static str>,
}

impl ToolLookup for DemoTools {
    fn presence(&self, reference: &str) -> ToolPresence {
        const DEMO: [&str; 7] = [
            "demo__echo",
            "demo__add",
            "demo__word_count",
            "demo__notes_write",
            "demo__notes_read",
            "demo__notes_list",
            "demo__toggle_tool",
        ];
        match reference.split_once("__") {
            Some(("demo", _)) if DEMO.contains(&reference) && !self.gone.contains(&reference) => {
                ToolPresence::Present
            }
            Some(("demo", _)) => ToolPresence::Missing,
            _ => ToolPresence::Unknown,
        }
    }
}

fn indexed(root: &std::path::Path) -> SqliteStore {
    let mut store = SqliteStore::open_in_memory().expect("in-memory sqlite");
    let (_, scan) =
        index_dir(root, DEFAULT_MAX_SKILL_FILE_SIZE, &mut store).expect("skills dir is readable");
    assert!(scan.unreadable.is_empty(), "{:?}", scan.unreadable);
    store
}

#[test]
fn the_example_skills_load_from_disk_through_the_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("catalog.sqlite");
    let mut store = SqliteStore::open(&db).expect("open sqlite file");
    // Indexed twice: the second run finds every skill unchanged.
    let added = IndexStats {
        added: 6,
        ..IndexStats::default()
    };
    let unchanged = IndexStats {
        unchanged: 6,
        ..IndexStats::default()
    };
    for expected in [added, unchanged] {
        let (stats, _) = index_dir(&examples(), DEFAULT_MAX_SKILL_FILE_SIZE, &mut store)
            .expect("index examples");
        assert_eq!(stats, expected);
    }
    drop(store);

    let (catalog, invalid) = load_catalog(&SqliteStore::open(&db).expect("reopen")).expect("load");
    assert!(invalid.is_empty(), "{invalid:?}");
    let everyone = Subscriptions::none();
    let page = catalog.list(&everyone, &ListFilter::default());
    let ids: Vec<_> = page.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        vec![
            "demo/save-note",
            "demo/sum-and-report",
            "general/commit-messages",
            "writing/note-taking",
            "writing/plain-style"
        ]
    );
    let pro: Subscriptions = ["pro"].into_iter().collect();
    assert_eq!(catalog.list(&pro, &ListFilter::default()).entries.len(), 6);

    let plain = catalog
        .get(&everyone, "general/commit-messages")
        .expect("plain agent skill");
    assert_eq!(plain.skill.kind, SkillKind::Knowledge);
    assert!(plain.skill.content.starts_with("# Commit messages"));
    assert_eq!(plain.skill.license.as_deref(), Some("Apache-2.0"));
}

#[test]
fn example_flow_templates_resolve_with_defaults_and_types() {
    let (catalog, _) = load_catalog(&indexed(&examples())).expect("load");
    let everyone = Subscriptions::none();
    let steps = catalog
        .resolve_flow(
            &everyone,
            "demo/save-note",
            &json!({"title": "groceries", "body": "milk, eggs"}),
        )
        .expect("resolves");
    let calls: Vec<_> = steps
        .iter()
        .map(|s| (s.tool.as_str(), json!(s.arguments)))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("demo__word_count", json!({"text": "milk, eggs"})),
            (
                "demo__notes_write",
                json!({"title": "groceries", "body": "milk, eggs\n\n-- saved by roster"})
            ),
            ("demo__notes_read", json!({"title": "groceries"})),
        ]
    );
    let steps = catalog
        .resolve_flow(&everyone, "demo/sum-and-report", &json!({"a": 2}))
        .expect("resolves");
    assert_eq!(json!(steps[0].arguments), json!({"a": 2, "b": 0}));
    assert_eq!(
        steps[1].arguments["text"],
        json!("sum: 2 + 0 (the result of the first step); braces are written {like this}")
    );
    let error = catalog
        .resolve_flow(&everyone, "demo/save-note", &json!({}))
        .expect_err("missing");
    assert_eq!(
        error.to_string(),
        "skill \"demo/save-note\": missing required parameter(s): title, body"
    );

    let hidden = catalog
        .resolve_flow(&everyone, "pro/release-notes", &json!({}))
        .expect_err("hidden");
    assert_eq!(
        hidden,
        SkillError::SkillNotFound {
            id: "pro/release-notes".into()
        }
    );
    let pro: Subscriptions = ["pro"].into_iter().collect();
    let error = catalog
        .resolve_flow(
            &pro,
            "pro/release-notes",
            &json!({"version": "one", "changes": "x"}),
        )
        .expect_err("bad");
    assert!(error.to_string().contains("/version"), "{error}");
}

#[test]
fn example_skills_refresh_against_the_demo_tools() {
    let (mut catalog, _) = load_catalog(&indexed(&examples())).expect("load");
    catalog
        .registry_mut()
        .set_tool_lookup(Arc::new(DemoTools { gone: vec![] }));
    assert_eq!(
        catalog.registry_mut().refresh_all().to_summary(),
        "refreshed: 6, failed: 0, skipped: 0"
    );

    catalog.registry_mut().set_tool_lookup(Arc::new(DemoTools {
        gone: vec!["demo__notes_read"],
    }));
    let result = catalog.registry_mut().refresh_all();
    assert_eq!(result.to_summary(), "refreshed: 4, failed: 2, skipped: 0");
    let failed: HashMap<_, _> = result
        .failed
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        failed,
        HashMap::from([
            ("demo/save-note", "missing tool(s): demo__notes_read"),
            ("writing/note-taking", "missing tool(s): demo__notes_read"),
        ])
    );
    let entry = catalog
        .search(&Subscriptions::none(), "note-taking", 1)
        .into_iter()
        .next()
        .expect("exact name is found");
    assert_eq!(entry.entry.id, "writing/note-taking");
    assert_eq!(
        entry.entry.availability,
        Availability::Unavailable {
            reason: "missing tool(s): demo__notes_read".into()
        }
    );
}

#[test]
fn an_invalid_skill_is_reported_and_skipped() {
    let (mut catalog, invalid) = load_catalog(&indexed(&invalid_fixture())).expect("load");
    let reasons: Vec<String> = invalid.iter().map(ToString::to_string).collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[0]
            .starts_with("bad-flow/SKILL.md: step 1 (demo__notes_write) uses placeholder {body}"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].starts_with(
            "broken/SKILL.md: `name` is \"not-broken\" but the directory is \"broken\""
        ),
        "{reasons:?}"
    );
    assert_eq!(catalog.len(), 3, "good, loop-a and loop-b load");
    catalog
        .registry_mut()
        .set_tool_lookup(Arc::new(DemoTools { gone: vec![] }));
    let result = catalog.registry_mut().refresh_all();
    assert_eq!(result.refreshed, vec!["good"]);
    assert_eq!(
        result.failed.get("loop-a").map(String::as_str),
        Some("include cycle: loop-a → loop-b → loop-a")
    );
}

#[test]
fn the_store_forgets_a_removed_skill_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    for name in ["one", "two"] {
        std::fs::create_dir_all(dir.path().join("ns").join(name)).expect("mkdir");
        std::fs::write(
            dir.path().join("ns").join(name).join("SKILL.md"),
            format!("---\nname: {name}\ndescription: skill {name}\n---\n"),
        )
        .expect("write");
    }
    // A skill directory's own subdirectories are its resources, not skills.
    std::fs::create_dir_all(dir.path().join("ns/one/references/inner")).expect("mkdir");
    std::fs::write(
        dir.path().join("ns/one/references/inner/SKILL.md"),
        "not a skill",
    )
    .expect("write");
    let mut store = SqliteStore::open_in_memory().expect("sqlite");
    index_dir(dir.path(), DEFAULT_MAX_SKILL_FILE_SIZE, &mut store).expect("index");
    let dirs: Vec<_> = store
        .sources()
        .expect("read")
        .into_iter()
        .map(|s| s.dir)
        .collect();
    assert_eq!(dirs, vec!["ns/one", "ns/two"]);
    std::fs::remove_dir_all(dir.path().join("ns/two")).expect("rm");
    let (stats, _) =
        index_dir(dir.path(), DEFAULT_MAX_SKILL_FILE_SIZE, &mut store).expect("re-index");
    assert_eq!(
        stats,
        IndexStats {
            removed: 1,
            unchanged: 1,
            ..IndexStats::default()
        }
    );
}

#[test]
fn skills_check_passes_on_the_examples() {
    let stdout =
        common::cli(["skills", "check", examples().to_str().expect("utf-8 path")]).stdout();
    assert!(
        stdout.contains("ok       demo/save-note (flow_template)"),
        "{stdout}"
    );
    assert!(stdout.contains("6 valid, 0 invalid"), "{stdout}");
}

#[test]
fn skills_check_reports_each_invalid_skill_and_exits_1() {
    let root = invalid_fixture();
    let out = common::cli(["skills", "check", root.to_str().expect("utf-8 path")]).output();
    let stdout = String::from_utf8(out.stdout).expect("utf-8 stdout");
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let invalid: Vec<_> = stdout
        .lines()
        .filter(|l| l.starts_with("invalid"))
        .collect();
    assert_eq!(invalid.len(), 4, "{stdout}");
    let broken = root.join("broken/SKILL.md");
    assert!(
        stdout.contains(&format!("{}: `name` is \"not-broken\"", broken.display())),
        "{stdout}"
    );
    assert!(
        stdout.contains("bad-flow/SKILL.md: step 1 (demo__notes_write) uses placeholder {body}"),
        "{stdout}"
    );
    assert!(
        stdout.contains("loop-a/SKILL.md: include cycle: loop-a → loop-b → loop-a"),
        "{stdout}"
    );
    assert!(stdout.contains("ok       good (knowledge)"), "{stdout}");
    assert!(stdout.contains("1 valid, 4 invalid"), "{stdout}");
}

#[test]
fn skills_check_exits_2_when_the_path_cannot_be_read() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("nope");
    let stderr =
        common::cli(["skills", "check", missing.to_str().expect("utf-8 path")]).fails_with(2);
    assert!(
        stderr.contains("cannot read skills directory") && stderr.contains("nope"),
        "{stderr}"
    );
}

/// `get_skill` of `id` through a running gateway, as the Python SDK client calls it: the
/// skill's description, or the error text.
fn described(gateway: &common::Gateway, id: &str) -> String {
    let report = common::call_tools(
        &["--url", &gateway.url],
        &serde_json::json!([["get_skill", {"id": id}]]),
    );
    let result = &report["results"][0];
    match result["structuredContent"]["description"].as_str() {
        Some(description) => description.to_owned(),
        None => common::text_of(result),
    }
}

fn skill_md(description: &str) -> String {
    format!("---\nname: guide\ndescription: {description}\n---\n\nRead the guide.\n")
}

#[test]
fn edited_skills_are_served_without_a_restart_and_a_broken_edit_keeps_the_last_good_one() {
    let gateway = common::Gateway::start(
        |dir| {
            let guide = dir.join("skills/team/guide/SKILL.md");
            std::fs::create_dir_all(guide.parent().expect("a parent")).expect("mkdir");
            std::fs::write(&guide, skill_md("The first version.")).expect("write");
            format!(
                "[gateway]\nstate_dir = {:?}\n\n[skills]\npaths = [{:?}]\n",
                dir.join("state"),
                dir.join("skills")
            )
        },
        &[],
    );
    let skills = gateway.dir.path().join("skills/team");
    assert_eq!(described(&gateway, "team/guide"), "The first version.");

    std::fs::write(
        skills.join("guide/SKILL.md"),
        skill_md("The second version."),
    )
    .expect("edit");
    common::wait_until("the edit is served", || {
        described(&gateway, "team/guide") == "The second version."
    });

    // Broken: the last good version stays, and the inbox says why.
    std::fs::write(skills.join("guide/SKILL.md"), "---\nname: [unclosed\n---\n").expect("break");
    let config = gateway.dir.path().join("roster.toml");
    let mut problem = serde_json::Value::Null;
    common::wait_until("the broken edit is reported in the inbox", || {
        let out = common::cli(["inbox", "list", "--json"])
            .config(&config)
            .stdout();
        problem = common::json_lines(&out)
            .into_iter()
            .find(|e| e["method"] == "roster/skill_problem")
            .unwrap_or_default();
        !problem.is_null()
    });
    let message = problem["params"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("team/guide/SKILL.md") && message.contains("last good version"),
        "{problem}"
    );
    assert_eq!(described(&gateway, "team/guide"), "The second version.");

    // Added, then removed.
    let extra = skills.join("extra/SKILL.md");
    std::fs::create_dir_all(extra.parent().expect("a parent")).expect("mkdir");
    std::fs::write(
        &extra,
        skill_md("An added skill.").replace("name: guide", "name: extra"),
    )
    .expect("add");
    common::wait_until("the added skill is served", || {
        described(&gateway, "team/extra") == "An added skill."
    });
    std::fs::remove_dir_all(skills.join("extra")).expect("remove");
    common::wait_until("the removed skill is gone", || {
        described(&gateway, "team/extra") != "An added skill."
    });
    // Mended: served again as written.
    std::fs::write(
        skills.join("guide/SKILL.md"),
        skill_md("The third version."),
    )
    .expect("mend");
    common::wait_until("the mended skill is served", || {
        described(&gateway, "team/guide") == "The third version."
    });

    // A client in a session hears of an edit: resources/list_changed.
    let calls = serde_json::json!([
        ["get_skill", {"id": "team/guide"}],
        ["wait:resources_list_changed", {}]
    ]);
    let report = common::call_tools_while(&gateway.url, &calls, |n| {
        std::fs::write(
            skills.join("guide/SKILL.md"),
            skill_md(&format!("Edit {n}.")),
        )
        .expect("edit");
    });
    assert_eq!(
        report["results"][1]["list_changed"], true,
        "the client got resources/list_changed: {report}"
    );
}
