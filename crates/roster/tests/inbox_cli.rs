//! `roster inbox` and `roster completions` as real processes against a temp state directory
//! filled through the library. Every run is a fresh process, so every run is a restart that
//! replays the audit trail.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use roster::inbox::{AUDIT_BACKUP_FILE, EntryState};
use serde_json::{Value, json};

use common::ROSTER;
use common::inbox::{ask, block_the_backup, open, record_list_changed, record_message};

/// `roster ARGS` on the state directory `dir`.
fn roster(dir: &Path, args: &[&str]) -> common::Cli {
    common::cli(args).state_dir(dir)
}

/// Seqs at the start of rendered lines (`#N ...`).
fn shown_seqs(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .filter_map(|l| l.split(' ').next())
        .map(|n| n.parse().expect("a seq"))
        .collect()
}

fn fill(dir: &Path) {
    let inbox = open(dir);
    record_message(&inbox, "files", json!({"data": "one"}));
    record_list_changed(&inbox, "files", true);
    record_message(&inbox, "git", json!({"data": "three"}));
    inbox.record(
        "git",
        "notifications/resources/updated",
        json!({"uri": "file:///x"}),
        false,
    );
    inbox.ack(Some(1));
}

#[test]
fn list_and_unread_replay_what_the_library_recorded() {
    let dir = tempfile::tempdir().expect("temp dir");
    fill(dir.path());

    let listed = roster(dir.path(), &["inbox", "list"]).stdout();
    assert_eq!(shown_seqs(&listed), [4, 3, 2, 1], "{listed}");
    assert!(
        listed.contains("#2 ") && listed.contains(" handled"),
        "{listed}"
    );
    assert!(listed.contains("{\"uri\":\"file:///x\"}"), "{listed}");

    let files = roster(dir.path(), &["inbox", "list", "--channel", "files"]).stdout();
    assert_eq!(shown_seqs(&files), [2, 1]);
    let limited = roster(dir.path(), &["inbox", "list", "--limit", "2"]).stdout();
    assert_eq!(shown_seqs(&limited), [4, 3]);

    let unread = roster(dir.path(), &["inbox", "unread"]).stdout();
    assert_eq!(
        shown_seqs(&unread),
        [3, 4],
        "oldest first, handled and acked left out"
    );

    let json = roster(dir.path(), &["inbox", "unread", "--json"]).stdout();
    let values: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(values.len(), 2);
    assert_eq!(values[0]["seq"], 3);
    assert_eq!(values[0]["state"], "unread");
    assert_eq!(values[1]["channel"], "git");
}

#[test]
fn ack_in_one_process_is_seen_by_the_next_and_by_the_library() {
    let dir = tempfile::tempdir().expect("temp dir");
    fill(dir.path());
    assert_eq!(
        roster(dir.path(), &["inbox", "ack", "3"]).stdout().trim(),
        "acknowledged 1 notification"
    );
    assert_eq!(
        shown_seqs(&roster(dir.path(), &["inbox", "unread"]).stdout()),
        [4]
    );
    assert_eq!(
        roster(dir.path(), &["inbox", "ack"]).stdout().trim(),
        "acknowledged 1 notification"
    );
    assert_eq!(
        roster(dir.path(), &["inbox", "unread"]).stdout().trim(),
        "(no entries)"
    );

    let inbox = open(dir.path());
    assert!(inbox.unread().is_empty());
    let states: Vec<EntryState> = inbox.list(None, 10).iter().map(|e| e.state).collect();
    assert_eq!(
        states,
        [
            EntryState::Read,
            EntryState::Read,
            EntryState::Handled,
            EntryState::Read
        ]
    );
    assert_eq!(
        inbox.record("files", "m", Value::Null, false),
        5,
        "seq continues"
    );
}

#[test]
fn clear_then_restart_replays_but_clear_all_then_restart_is_empty() {
    let dir = tempfile::tempdir().expect("temp dir");
    fill(dir.path());
    let cleared = roster(dir.path(), &["inbox", "clear"]).stdout();
    assert_eq!(cleared.trim(), "cleared 4 notifications");
    assert_eq!(
        shown_seqs(&roster(dir.path(), &["inbox", "list"]).stdout()),
        [4, 3, 2, 1],
        "the trail stayed on disk"
    );
    assert_eq!(
        roster(dir.path(), &["inbox", "unread"]).stdout().trim(),
        "(no entries)"
    );

    roster(dir.path(), &["inbox", "clear", "--all"]).stdout();
    assert_eq!(
        roster(dir.path(), &["inbox", "list"]).stdout().trim(),
        "(no entries)"
    );
    let inbox = open(dir.path());
    assert!(inbox.list(None, 100).is_empty());
    assert_eq!(inbox.record("files", "m", Value::Null, false), 5);
}

#[test]
fn clear_all_with_an_unremovable_backup_fails_loudly_but_drains() {
    let dir = tempfile::tempdir().expect("temp dir");
    fill(dir.path());
    block_the_backup(dir.path());

    let out = roster(dir.path(), &["inbox", "clear", "--all"]).output();
    assert!(!out.status.success(), "a partial purge is not a success");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not fully purged") && stderr.contains(AUDIT_BACKUP_FILE),
        "{stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "cleared 4 notifications"
    );
    // The purge record keeps the active file's old entries from coming back.
    assert_eq!(
        roster(dir.path(), &["inbox", "list"]).stdout().trim(),
        "(no entries)"
    );
    let inbox = open(dir.path());
    assert_eq!(inbox.record("git", "m", Value::Null, false), 5);
    drop(inbox);
    assert_eq!(
        shown_seqs(&roster(dir.path(), &["inbox", "list"]).stdout()),
        [5]
    );
}

#[test]
fn changes_are_refused_while_a_gateway_owns_the_inbox_but_reads_work() {
    let dir = tempfile::tempdir().expect("temp dir");
    fill(dir.path());
    let running = open(dir.path());
    record_message(&running, "git", json!({"data": "live"}));

    let stderr = roster(dir.path(), &["inbox", "ack"]).fails();
    assert!(
        stderr.contains("another roster process owns the inbox"),
        "{stderr}"
    );
    assert_eq!(
        shown_seqs(&roster(dir.path(), &["inbox", "unread"]).stdout()),
        [3, 4, 5]
    );
    assert_eq!(
        running.unread_count(),
        3,
        "nothing was acknowledged behind the owner's back"
    );
}

#[test]
fn pending_confirms_show_only_to_the_person_and_expire_with_the_process() {
    let dir = tempfile::tempdir().expect("temp dir");
    let running = open(dir.path());
    record_message(&running, "files", json!({"data": "one"}));
    let pending = running.record_pending_confirm(
        "files",
        ask(
            json!({"message": "wipe the disk?"}),
            Duration::from_secs(600),
        ),
    );
    assert!(
        !roster(dir.path(), &["inbox", "list"])
            .stdout()
            .contains("wipe the disk")
    );
    assert!(
        !roster(dir.path(), &["inbox", "unread"])
            .stdout()
            .contains("elicitation")
    );
    let shown = roster(dir.path(), &["inbox", "pending"]).stdout();
    assert!(shown.starts_with(&format!("#{} ", pending.id)), "{shown}");
    assert!(shown.contains("wipe the disk"), "{shown}");
    let ids = roster(dir.path(), &["__complete", "inbox-confirm"]).stdout();
    assert_eq!(ids, format!("{}\tfiles elicitation/create\n", pending.id));

    // The gateway goes away without an answer; a later run owns the inbox and the request is
    // expired, which `confirm` says plainly.
    let id = pending.id.to_string();
    drop(running);
    assert_eq!(
        pending.blocking_decision(),
        roster::inbox::ConfirmDecision::Expired
    );
    let stderr = roster(dir.path(), &["inbox", "confirm", &id, "yes"]).fails();
    assert!(stderr.contains("already decided: expired"), "{stderr}");
    assert!(
        roster(dir.path(), &["inbox", "pending"])
            .stdout()
            .contains("no requests are waiting")
    );
}

#[test]
fn complete_lists_live_values() {
    let dir = tempfile::tempdir().expect("temp dir");
    fill(dir.path());
    assert_eq!(
        roster(dir.path(), &["__complete", "inbox-ack"]).stdout(),
        "3\tgit notifications/message\n4\tgit notifications/resources/updated\n"
    );
    assert_eq!(
        roster(dir.path(), &["__complete", "inbox-channel"]).stdout(),
        "files\ngit\n"
    );
    let empty = tempfile::tempdir().expect("temp dir");
    assert_eq!(
        roster(&empty.path().join("missing"), &["__complete", "inbox-ack"]).stdout(),
        ""
    );
}

#[test]
fn completion_scripts_cover_every_subcommand() {
    let dir = tempfile::tempdir().expect("temp dir");
    for shell in ["bash", "zsh", "fish"] {
        let script = roster(dir.path(), &["completions", shell]).stdout();
        for word in [
            "inbox",
            "list",
            "unread",
            "ack",
            "pending",
            "confirm",
            "clear",
            "completions",
            "channel",
            "limit",
            "all",
            "state-dir",
            "json",
        ] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
        assert!(
            script.contains("__complete line --"),
            "{shell} script does not ask roster for live values"
        );
    }
}

/// Completes `words` (the last one is being typed) with the real bash and the real script,
/// `ROSTER_STATE_DIR` set to `dir`.
fn bash_complete(dir: &Path, words: &[&str]) -> Vec<String> {
    bash_complete_in(dir, words, true)
}

/// [`bash_complete`], with `ROSTER_STATE_DIR` unset when not `state_dir_env` (and the default
/// state directory under `dir`, empty).
fn bash_complete_in(dir: &Path, words: &[&str], state_dir_env: bool) -> Vec<String> {
    let script = roster(dir, &["completions", "bash"]).stdout();
    let script_path = dir.join("roster.bash");
    fs::write(&script_path, script).expect("write the script");
    let mut all = vec![ROSTER.to_string()];
    all.extend(words.iter().map(|w| format!("'{w}'")));
    let program = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\n_roster_live '{ROSTER}' '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script_path.display(),
        all.join(" "),
        words.len(),
        words.last().copied().unwrap_or(""),
        if words.len() >= 2 {
            words[words.len() - 2]
        } else {
            ROSTER
        },
    );
    let mut bash = Command::new("bash");
    bash.args(["--norc", "--noprofile", "-c", &program])
        .env("ROSTER_LANG", "en")
        .env_remove("ROSTER_CONFIG");
    if state_dir_env {
        bash.env("ROSTER_STATE_DIR", dir);
    } else {
        bash.env_remove("ROSTER_STATE_DIR")
            .env("XDG_STATE_HOME", dir.join("xdg"))
            .current_dir(dir);
    }
    let out = bash.output().expect("run bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_subcommands_and_live_values() {
    let dir = tempfile::tempdir().expect("temp dir");
    fill(dir.path());
    assert_eq!(bash_complete(dir.path(), &["inb"]), ["inbox"]);
    let commands = bash_complete(dir.path(), &["inbox", ""]);
    for word in ["list", "unread", "ack", "pending", "confirm", "clear"] {
        assert!(commands.iter().any(|c| c == word), "{commands:?}");
    }
    assert_eq!(bash_complete(dir.path(), &["inbox", "ack", ""]), ["3", "4"]);
    assert_eq!(
        bash_complete(dir.path(), &["inbox", "list", "--channel", "g"]),
        ["git"]
    );
    let answers = bash_complete(dir.path(), &["inbox", "confirm", "9", ""]);
    assert!(
        answers.ends_with(&["yes".to_string(), "no".to_string()]),
        "{answers:?}"
    );
    assert_eq!(bash_complete(dir.path(), &["completions", "f"]), ["fish"]);
}

#[test]
fn completion_reads_the_state_of_the_config_and_state_dir_on_the_command_line() {
    let filled = tempfile::tempdir().expect("temp dir");
    fill(filled.path());
    // The shell's directory holds no state and no roster.toml: only the command line's
    // `--config` (or `--state-dir`) leads to the inbox.
    let here = tempfile::tempdir().expect("temp dir");
    let config = here.path().join("elsewhere.toml");
    fs::write(
        &config,
        format!("[gateway]\nstate_dir = {:?}\n", filled.path()),
    )
    .expect("write config");
    let config = config.to_str().expect("UTF-8 path");
    let state = filled.path().to_str().expect("UTF-8 path");
    let complete = |words: &[&str]| bash_complete_in(here.path(), words, false);
    assert_eq!(complete(&["inbox", "ack", ""]), Vec::<String>::new());
    for words in [
        &["--config", config, "inbox", "ack", ""][..],
        // Global options go anywhere; bash splits `--config=FILE` at the `=`.
        &["inbox", "ack", "--config", config, ""],
        &["inbox", "--config", "=", config, "ack", ""],
        &["inbox", "--state-dir", state, "ack", ""],
    ] {
        assert_eq!(complete(words), ["3", "4"], "{words:?}");
    }
    assert_eq!(
        complete(&["--config", config, "inbox", "list", "--channel", "f"]),
        ["files"]
    );
    // Where no live value goes, clap's script completes the word (here: `list`'s options).
    let options = complete(&["--config", config, "inbox", "list", "--limit", "5", ""]);
    assert!(options.iter().any(|o| o == "--json"), "{options:?}");

    // Where no live value goes, `__complete line` says so (exit 1, nothing printed).
    let out = roster(
        filled.path(),
        &[
            "__complete",
            "line",
            "--",
            "roster",
            "inbox",
            "ack",
            "3",
            "",
        ],
    )
    .output();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    let out = roster(
        filled.path(),
        &["__complete", "line", "--", "roster", "inbox", "ack", ""],
    )
    .stdout();
    assert_eq!(
        out,
        "3\tgit notifications/message\n4\tgit notifications/resources/updated\n"
    );
}
