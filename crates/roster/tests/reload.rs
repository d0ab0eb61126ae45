//! Reloading the configuration without a restart: the `Roster::reload` façade against the
//! dynamic Python server, and a real `roster serve --http` reloaded by `SIGHUP` and
//! `roster reload` while the official Python SDK client keeps one session open
//! (`tests/python/clients/pin_steps.py` runs the person's commands between its steps).

mod common;

use std::path::Path;

use common::{args, dynamic_server_toml, test_config, text_of};
use serde_json::{Value, json};

use common::ROSTER;

fn names(roster: &roster::Roster) -> Vec<String> {
    roster.tools().into_iter().map(|t| t.exposed_name).collect()
}

async fn pid(roster: &roster::Roster, server: &str) -> u64 {
    let result = roster
        .call(&format!("{server}__pid"), None)
        .await
        .expect("pid answers");
    text_of(&result).parse().expect("a pid")
}

#[tokio::test]
async fn a_reload_adds_removes_and_reconnects_only_the_servers_that_changed() {
    common::init_tracing();
    let a = dynamic_server_toml("a", "legacy", &[]);
    let b = dynamic_server_toml("b", "legacy", &[]);
    let c = dynamic_server_toml("c", "legacy", &[]);
    let roster = roster::Roster::start(test_config(&format!("{a}{b}"), ""))
        .await
        .expect("starts");
    let session = roster.open_session();
    session.begin_turn().await;
    let (a_pid, b_pid) = (pid(&roster, "a").await, pid(&roster, "b").await);

    // b leaves, c arrives, a is the same entry: a keeps its process.
    let changes = roster
        .reload(test_config(&format!("{a}{c}"), ""))
        .await
        .expect("reloads");
    assert_eq!(changes.added, ["c"]);
    assert_eq!(changes.removed, ["b"]);
    assert!(changes.changed.is_empty(), "{changes:?}");
    let now = names(&roster);
    assert!(now.contains(&"c__echo".to_owned()), "{now:?}");
    assert!(!now.iter().any(|n| n.starts_with("b__")), "{now:?}");
    assert_eq!(pid(&roster, "a").await, a_pid, "a was left alone");
    let delta = session
        .begin_turn()
        .await
        .delta
        .expect("the session is told");
    assert!(delta.added.contains(&"c__echo".to_owned()), "{delta:?}");
    assert!(delta.removed.contains(&"b__echo".to_owned()), "{delta:?}");
    let err = roster.call("b__pid", None).await.expect_err("b is gone");
    assert!(matches!(err, roster::CallError::UnknownTool(_)), "{err}");
    assert!(
        roster.status().iter().all(|s| s.name != "b"),
        "a removed server leaves the status"
    );
    let page = roster
        .metrics()
        .encode()
        .expect("metrics are on by default");
    assert!(
        !page.contains("server=\"b\""),
        "a removed server leaves the metrics page"
    );
    assert!(page.contains("server=\"c\""), "an added one is on it");
    assert_eq!(
        roster.tool_lookup().presence("b__echo"),
        roster::core::ToolPresence::Missing,
        "a skill that needs a removed server's tool is unavailable"
    );

    // c's entry changes: c alone reconnects (a new process), a stays.
    let c_pid = pid(&roster, "c").await;
    let c2 = dynamic_server_toml("c", "legacy", &["--echo-description", "Echo, again."]);
    let changes = roster
        .reload(test_config(&format!("{a}{c2}"), ""))
        .await
        .expect("reloads");
    assert_eq!(changes.changed, ["c"]);
    assert_ne!(pid(&roster, "c").await, c_pid, "c reconnected");
    assert_eq!(pid(&roster, "a").await, a_pid);
    let echo = roster
        .tools()
        .into_iter()
        .find(|t| t.exposed_name == "c__echo")
        .expect("c's echo");
    assert_eq!(echo.tool.description.as_deref(), Some("Echo, again."));
    assert_ne!(b_pid, 0);

    // Nothing changed: nothing happens.
    let changes = roster
        .reload(test_config(&format!("{a}{c2}"), ""))
        .await
        .expect("reloads");
    assert!(!changes.touches_servers(), "{changes:?}");
    assert_eq!(pid(&roster, "a").await, a_pid);
    let _ = args(json!({}));
}

fn config(dir: &Path, servers: &[&str]) -> String {
    let mut text = format!(
        "[gateway]\ndebounce = \"50ms\"\nstate_dir = {:?}\n\n",
        dir.join("state")
    );
    for name in servers {
        text.push_str(&dynamic_server_toml(name, "legacy", &[]));
    }
    text
}

use common::session_steps as steps;

fn listed(result: &Value) -> Vec<String> {
    result["tools"]
        .as_object()
        .expect("a list step")
        .keys()
        .cloned()
        .collect()
}

#[test]
fn sighup_gives_a_connected_client_the_new_server_and_a_broken_file_changes_nothing() {
    let gateway = common::Gateway::start(|dir| config(dir, &["a"]), &[]);
    let path = gateway.dir.path().join("roster.toml");
    let with_b = gateway.dir.path().join("with_b.toml");
    std::fs::write(&with_b, config(gateway.dir.path(), &["a", "b"])).expect("write");
    let broken = gateway.dir.path().join("broken.toml");
    std::fs::write(
        &broken,
        config(gateway.dir.path(), &["a", "b"]).replace("debounce = \"50ms\"", "debounce = \"7x\""),
    )
    .expect("write");
    let pid = gateway.child.0.id().to_string();
    let replace_and_hup = format!(
        "cp {} {} && kill -HUP {pid}",
        with_b.display(),
        path.display()
    );
    let replace = format!("cp {} {}", broken.display(), path.display());
    let config_arg = path.display().to_string();
    let results = steps(
        &gateway,
        json!([
            ["list"],
            ["run", ["sh", "-c", replace_and_hup]],
            ["wait:list_changed"],
            ["list"],
            ["call", "b__echo", {"text": "hi"}],
            ["run", ["sh", "-c", replace]],
            ["run", [ROSTER, "--config", config_arg, "reload"]],
            ["list"],
            ["run", [ROSTER, "--config", config_arg, "status"]],
        ]),
    );
    assert!(!listed(&results[0]).contains(&"b__echo".to_owned()));
    assert_eq!(results[1]["code"], 0, "{}", results[1]);
    assert_eq!(results[2]["list_changed"], true, "the session is told");
    assert!(
        listed(&results[3]).contains(&"b__echo".to_owned()),
        "the same session sees b's tools: {:?}",
        results[3]
    );
    assert_eq!(text_of(&results[4]), "b: hi");

    // A broken file: `roster reload` fails naming the key, and nothing changes.
    let reload = &results[6];
    assert_eq!(reload["code"], 1, "{reload}");
    let said = reload["stderr"].as_str().unwrap_or_default();
    assert!(
        said.contains("debounce") && said.contains("roster.toml") && said.contains("stays"),
        "{said}"
    );
    assert_eq!(listed(&results[7]), listed(&results[3]), "nothing changed");
    let status = results[8]["stdout"].as_str().unwrap_or_default();
    assert!(
        status.contains("last reload") && status.contains("reload failed"),
        "{status}"
    );
}

#[test]
fn with_watch_config_an_edited_file_is_applied_without_a_signal() {
    let watched = |dir: &Path, servers: &[&str]| {
        config(dir, servers).replace("[gateway]\n", "[gateway]\nwatch_config = true\n")
    };
    let gateway = common::Gateway::start(|dir| watched(dir, &["a"]), &[]);
    let path = gateway.dir.path().join("roster.toml");
    let with_b = gateway.dir.path().join("with_b.toml");
    std::fs::write(&with_b, watched(gateway.dir.path(), &["a", "b"])).expect("write");
    let results = steps(
        &gateway,
        json!([
            ["list"],
            [
                "run",
                [
                    "cp",
                    with_b.display().to_string(),
                    path.display().to_string()
                ]
            ],
            ["wait:list_changed"],
            ["list"],
        ]),
    );
    assert!(!listed(&results[0]).contains(&"b__echo".to_owned()));
    assert_eq!(results[2]["list_changed"], true);
    assert!(
        listed(&results[3]).contains(&"b__echo".to_owned()),
        "{:?}",
        results[3]
    );
}

#[test]
fn a_reload_puts_new_client_tokens_in_force_and_one_it_cannot_read_changes_nothing() {
    let with_clients = |dir: &Path, clients: &[&str]| {
        let mut text = config(dir, &["a"]);
        for name in clients {
            text.push_str(&format!(
                "\n[[clients]]\nname = \"{name}\"\ntoken_env = \"ROSTER_TEST_{}\"\n",
                name.to_uppercase()
            ));
        }
        text
    };
    let env = [
        ("ROSTER_TEST_ONE", "one-secret"),
        ("ROSTER_TEST_TWO", "two-secret"),
    ];
    let gateway = common::Gateway::start(|dir| with_clients(dir, &["one"]), &env);
    let path = gateway.dir.path().join("roster.toml");
    let reload = |clients: &[&str]| {
        std::fs::write(&path, with_clients(gateway.dir.path(), clients)).expect("write");
        common::cli(["reload"]).config(&path).output()
    };
    let status = |token| common::post_initialize(&gateway.url, Some(token));
    assert_eq!(status("one-secret"), 200);
    assert_eq!(status("two-secret"), 401);

    // A second client: its token works from the next request, the first one's still does.
    let added = reload(&["one", "two"]);
    let said = String::from_utf8_lossy(&added.stdout);
    assert!(
        added.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&added.stderr)
    );
    assert!(said.contains("in force now: clients"), "{said}");
    assert!(!said.contains("takes a restart"), "{said}");
    assert_eq!(status("two-secret"), 200);
    assert_eq!(status("one-secret"), 200);

    // A client whose token variable the gateway does not have: the reload fails naming it, and
    // both tokens keep working.
    let failed = reload(&["one", "two", "three"]);
    assert_eq!(failed.status.code(), Some(1));
    let said = String::from_utf8_lossy(&failed.stderr);
    assert!(
        said.contains("ROSTER_TEST_THREE") && said.contains("three"),
        "{said}"
    );
    assert_eq!(status("two-secret"), 200);
    assert_eq!(status("one-secret"), 200);

    // The first client removed: its token is refused from the next request.
    assert!(reload(&["two"]).status.success());
    assert_eq!(status("one-secret"), 401);
    assert_eq!(status("two-secret"), 200);
}
