//! One state directory rule for every command: `roster inbox` and `roster status` read
//! `[gateway] state_dir` from the same `--config`, through the real binary.

mod common;

use std::path::Path;

use roster::inbox::{FsyncPolicy, Inbox, InboxConfig};
use serde_json::json;

/// `roster ARGS` from `cwd` with nothing in the environment that names a state directory, so
/// only the configuration can.
fn roster(cwd: &Path, args: &[&str]) -> common::Cli {
    common::cli(args)
        .current_dir(cwd)
        .env_remove("ROSTER_STATE_DIR")
        .env_remove("ROSTER_CONFIG")
        .env("XDG_STATE_HOME", cwd.join("xdg-default"))
}

/// A config at `<tmp>/conf/roster.toml` whose `state_dir` is relative to it, an inbox entry
/// written in that directory, and a working directory elsewhere.
fn setup() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let conf_dir = tmp.path().join("conf");
    std::fs::create_dir(&conf_dir).expect("conf dir");
    let config = conf_dir.join("roster.toml");
    std::fs::write(&config, "[gateway]\nstate_dir = \"state\"\n").expect("write config");
    let state = conf_dir.join("state");
    let inbox = Inbox::open(InboxConfig {
        fsync: FsyncPolicy::Always,
        ..InboxConfig::new(roster::store::Stores::embedded(&state))
    })
    .expect("open inbox");
    inbox.record(
        "weather",
        "notifications/message",
        json!({"level": "info", "data": "storm over the config's state dir"}),
        false,
    );
    drop(inbox);
    let cwd = tmp.path().join("elsewhere");
    std::fs::create_dir(&cwd).expect("cwd");
    (tmp, config, state)
}

#[test]
fn inbox_reads_the_state_dir_of_its_config() {
    let (tmp, config, _) = setup();
    let cwd = tmp.path().join("elsewhere");
    let config = config.to_str().expect("utf-8 path");
    for args in [
        &["inbox", "--config", config, "list"][..],
        &["--config", config, "inbox", "unread"][..],
    ] {
        let stdout = roster(&cwd, args).stdout();
        assert!(
            stdout.contains("storm over the config's state dir"),
            "{args:?}: {stdout}"
        );
    }
    assert!(
        !cwd.join("xdg-default").exists(),
        "nothing may be written at the XDG default"
    );
}

#[test]
fn inbox_and_status_agree_on_the_state_dir() {
    let (tmp, config, state) = setup();
    let cwd = tmp.path().join("elsewhere");
    let config = config.to_str().expect("utf-8 path");
    // No gateway runs: status names the socket it looked for, in the config's state dir.
    let stderr = roster(&cwd, &["--config", config, "status"]).fails();
    let socket = state.join("admin.sock");
    assert!(
        stderr.contains(&socket.display().to_string()),
        "status looked elsewhere than {}: {stderr}",
        socket.display()
    );
    let inbox = roster(&cwd, &["inbox", "--config", config, "list", "--json"]).stdout();
    assert_eq!(inbox.lines().count(), 1);
    // --state-dir still wins over the configuration.
    let other = tmp.path().join("other");
    let flagged = roster(
        &cwd,
        &[
            "inbox",
            "--config",
            config,
            "--state-dir",
            other.to_str().expect("utf-8 path"),
            "list",
            "--json",
        ],
    )
    .stdout();
    assert_eq!(flagged.trim(), "");
}

#[test]
fn a_broken_config_is_reported_by_inbox_as_by_status() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let broken = tmp.path().join("broken.toml");
    std::fs::write(&broken, "[gateway]\nstate_dir = \n").expect("write");
    let broken = broken.to_str().expect("utf-8 path");
    for args in [
        &["--config", broken, "status"][..],
        &["--config", broken, "inbox", "list"][..],
    ] {
        let stderr = roster(tmp.path(), args).fails();
        assert!(
            stderr.contains("configuration has an error") && stderr.contains("broken.toml"),
            "{args:?}: {stderr}"
        );
    }
}
