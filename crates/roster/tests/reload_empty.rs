//! A reload that would remove every server — an editor's half-saved file, a file emptied by
//! mistake — is refused on every path (`watch_config`, `SIGHUP`, `roster reload`): the running
//! configuration stays, the refusal is in the log and in the inbox, and `roster reload
//! --allow-empty` is how a person says they mean it. Through a real `roster serve --http` with
//! the dynamic Python SDK server.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `roster --config CONFIG ARGS` on the gateway's state directory (named outright: an empty
/// file names none).
fn roster(gateway: &common::Gateway, args: &[&str]) -> common::Cli {
    common::cli(args)
        .config(gateway.dir.path().join("roster.toml"))
        .state_dir(gateway.state())
}

/// The servers `roster status --json` shows.
fn servers(gateway: &common::Gateway) -> Vec<String> {
    let out = roster(gateway, &["status", "--json"]).stdout();
    let status: Value = serde_json::from_str(&out).expect("status is JSON");
    status["servers"]
        .as_array()
        .or_else(|| status.as_array())
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str().map(str::to_owned))
        .collect()
}

/// The failed reloads the inbox's audit trail holds, oldest first.
fn reload_failures(state: &Path) -> Vec<Value> {
    std::fs::read_to_string(state.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|record| record["method"] == "roster/reload_failed")
        .collect()
}

/// Waits until the inbox holds a failed reload by `trigger`, and returns it.
fn refusal_by(state: &Path, trigger: &str) -> Value {
    let mut found = None;
    common::wait_until(
        &format!("a failed reload by {trigger} in the inbox"),
        || {
            found = reload_failures(state)
                .into_iter()
                .find(|r| r["params"]["trigger"] == trigger);
            found.is_some()
        },
    );
    found.unwrap_or_default()
}

fn assert_refused_naming_the_way_out(error: &str) {
    assert!(
        error.contains("names no server")
            && error.contains("remove every running server (a)")
            && error.contains("roster reload --allow-empty"),
        "{error}"
    );
}

#[test]
fn a_file_that_names_no_server_is_refused_by_every_reload_until_a_person_allows_it() {
    let config = |dir: &Path| {
        format!(
            "[gateway]\nwatch_config = true\nstate_dir = {:?}\n\n{}",
            dir.join("state"),
            common::dynamic_server_toml("a", "legacy", &[])
        )
    };
    let gateway = common::Gateway::start(config, &[]);
    gateway.wait_for_admin();
    let path = gateway.dir.path().join("roster.toml");
    assert_eq!(servers(&gateway), ["a"]);

    // Emptied while the gateway watches it: refused, in the inbox, nothing removed.
    std::fs::write(&path, "").expect("empty the file");
    let watched = refusal_by(&gateway.state(), "the file changed");
    assert_refused_naming_the_way_out(watched["params"]["error"].as_str().unwrap_or_default());
    assert_eq!(watched["channel"], "config");
    assert_eq!(servers(&gateway), ["a"], "the running configuration stays");

    // SIGHUP on the same file: refused the same way.
    let hup = Command::new("kill")
        .args(["-HUP", &gateway.child.0.id().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(hup.success());
    let signalled = refusal_by(&gateway.state(), "SIGHUP");
    assert_refused_naming_the_way_out(signalled["params"]["error"].as_str().unwrap_or_default());
    assert_eq!(servers(&gateway), ["a"]);

    // Saved half-way (the `[gateway]` table, no server yet): `roster reload` fails, says why.
    let half = config(gateway.dir.path());
    let half = &half[..half.find("[servers.").expect("a server table")];
    std::fs::write(&path, half).expect("write half the file");
    let said = roster(&gateway, &["reload"]).fails_with(1);
    assert!(said.contains("the running configuration stays"), "{said}");
    assert_refused_naming_the_way_out(&said);
    assert_eq!(servers(&gateway), ["a"]);
    let status =
        String::from_utf8_lossy(&roster(&gateway, &["status"]).output().stdout).into_owned();
    assert!(
        status.contains("--allow-empty"),
        "the last reload: {status}"
    );

    // A person who means it.
    let said = roster(&gateway, &["reload", "--allow-empty"]).stdout();
    assert!(said.contains("removed a"), "{said}");
    assert!(servers(&gateway).is_empty(), "every server removed");
}
