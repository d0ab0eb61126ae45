//! The inbox seen from outside: its audit trail on disk, replays across reopen, purges.

mod common;

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use roster::inbox::{
    AUDIT_BACKUP_FILE, AUDIT_FILE, ConfirmDecision, EntryState, FsyncPolicy, Inbox, InboxConfig,
    InboxError, render,
};
use serde_json::{Value, json};

use common::inbox::{ask, block_the_backup, config, open, record_list_changed, record_message};

/// An inbox opened in a new temp dir (which the caller keeps until the inbox is gone).
fn fresh() -> (tempfile::TempDir, Inbox) {
    let dir = tempfile::tempdir().expect("temp dir");
    let inbox = open(dir.path());
    (dir, inbox)
}

fn audit_lines(dir: &Path, file: &str) -> Vec<Value> {
    let text = fs::read_to_string(dir.join(file)).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str(line).expect("every audit line is one JSON object"))
        .collect()
}

fn seqs(entries: &[roster::inbox::Entry]) -> Vec<u64> {
    entries.iter().map(|e| e.seq).collect()
}

fn message(n: u64) -> Value {
    json!({"level": "info", "data": format!("message {n}")})
}

/// Records `message(n)` from `files` for each `n`, unhandled.
fn record_messages(inbox: &Inbox, ns: std::ops::RangeInclusive<u64>) {
    for n in ns {
        record_message(inbox, "files", message(n));
    }
}

/// [`config`] rotating the audit trail past `rotate_bytes`.
fn rotating(dir: &Path, rotate_bytes: u64) -> InboxConfig {
    InboxConfig {
        rotate_bytes,
        ..config(dir)
    }
}

/// `inbox.clear(all)`'s report, once the ring it leaves is empty (listed and unread alike).
fn clear(inbox: &Inbox, all: bool) -> roster::inbox::ClearReport {
    let report = inbox.clear(all);
    assert!(inbox.list(None, 10).is_empty(), "the ring is empty");
    assert!(inbox.unread().is_empty());
    report
}

/// Appends `bytes` to the active audit file as they are.
fn append_to_trail(dir: &Path, bytes: &[u8]) {
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(dir.join(AUDIT_FILE))
        .expect("open");
    file.write_all(bytes).expect("write");
}

#[test]
fn reopen_replays_entries_with_their_read_state() {
    let (dir, inbox) = fresh();
    assert_eq!(record_message(&inbox, "files", message(1)), 1);
    assert_eq!(record_list_changed(&inbox, "files", true), 2);
    assert_eq!(record_message(&inbox, "git", message(3)), 3);
    assert_eq!(
        inbox.record(
            "git",
            "notifications/resources/updated",
            json!({"uri": "file:///a"}),
            false
        ),
        4
    );
    assert_eq!(inbox.ack(Some(3)), 2);
    drop(inbox);
    let inbox = open(dir.path());
    let listed = inbox.list(None, 10);
    assert_eq!(seqs(&listed), [4, 3, 2, 1], "newest first");
    let states: Vec<EntryState> = listed.iter().map(|e| e.state).collect();
    assert_eq!(
        states,
        [
            EntryState::Unread,
            EntryState::Read,
            EntryState::Handled,
            EntryState::Read
        ]
    );
    assert_eq!(listed[0].params, json!({"uri": "file:///a"}));
    assert_eq!(listed[0].channel, "git");
    assert!(
        humantime::parse_rfc3339(&listed[0].at).is_ok(),
        "at is RFC 3339: {}",
        listed[0].at
    );
    assert!(listed[0].at.ends_with('Z'), "at is UTC: {}", listed[0].at);
    assert_eq!(seqs(&inbox.unread()), [4]);
    assert_eq!(seqs(&inbox.list(Some("files"), 10)), [2, 1]);
    assert_eq!(seqs(&inbox.list(None, 2)), [4, 3]);
    assert_eq!(record_message(&inbox, "files", message(5)), 5);
}

#[test]
fn seq_keeps_increasing_across_restarts_rotations_and_clears() {
    let dir = tempfile::tempdir().expect("temp dir");
    let small = |dir: &Path| InboxConfig {
        rotate_bytes: 1024,
        capacity: 5,
        ..config(dir)
    };
    let mut last = 0;
    for round in 0..4 {
        let inbox = Inbox::open(small(dir.path())).expect("the inbox opens");
        for _ in 0..20 {
            let seq = record_message(&inbox, "files", message(round));
            assert!(seq > last, "seq {seq} after {last}");
            last = seq;
        }
        if round == 2 {
            inbox.clear(false);
        }
    }
    assert_eq!(last, 80);
    assert!(
        dir.path().join(AUDIT_BACKUP_FILE).exists(),
        "rotation happened"
    );
    let inbox = Inbox::open(small(dir.path())).expect("the inbox opens");
    assert_eq!(inbox.last_seq(), 80);
    assert_eq!(inbox.record("files", "m", Value::Null, false), 81);
}

#[test]
fn rotation_keeps_one_backup_and_replays_across_both_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = InboxConfig {
        capacity: 30,
        ..rotating(dir.path(), 4096)
    };
    {
        let inbox = Inbox::open(cfg.clone()).expect("the inbox opens");
        record_messages(&inbox, 1..=200);
        inbox.ack(Some(190));
    }
    let active = fs::metadata(dir.path().join(AUDIT_FILE))
        .expect("active file")
        .len();
    let backup = fs::metadata(dir.path().join(AUDIT_BACKUP_FILE))
        .expect("backup file")
        .len();
    assert!(
        active <= 4096,
        "active file {active} bytes stays under the limit"
    );
    assert!(
        backup <= 4096,
        "backup {backup} bytes stays under the limit"
    );
    let names: Vec<String> = fs::read_dir(dir.path())
        .expect("read dir")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.starts_with("audit"))
        .collect();
    assert_eq!(names.len(), 2, "exactly one backup: {names:?}");

    // Both files hold whole JSON lines; the fresh file starts with a checkpoint.
    let active_lines = audit_lines(dir.path(), AUDIT_FILE);
    assert_eq!(active_lines[0]["kind"], "checkpoint");
    let backup_lines = audit_lines(dir.path(), AUDIT_BACKUP_FILE);
    assert!(!backup_lines.is_empty());

    let inbox = Inbox::open(cfg).expect("the inbox reopens");
    let listed = inbox.list(None, 100);
    assert_eq!(
        listed.len(),
        30,
        "the ring is refilled to capacity from the tail"
    );
    assert_eq!(listed[0].seq, 200);
    assert_eq!(listed[29].seq, 171);
    assert_eq!(seqs(&inbox.unread()), (191..=200).collect::<Vec<_>>());
}

#[test]
fn handled_notifications_never_count_as_unread() {
    let (dir, inbox) = fresh();
    // Dynamic tools on: the re-list consumed the list_changed.
    record_list_changed(&inbox, "files", true);
    // Dynamic tools off: nothing consumed it, so it is news like any other.
    record_list_changed(&inbox, "git", false);
    record_message(&inbox, "git", message(3));
    assert_eq!(seqs(&inbox.unread()), [2, 3]);
    assert_eq!(inbox.unread_count(), 2);
    assert_eq!(
        inbox.list(None, 10).len(),
        3,
        "handled entries are still listed"
    );
    assert_eq!(inbox.ack(None), 2);
    assert!(inbox.unread().is_empty());
    assert_eq!(inbox.list(None, 10)[2].state, EntryState::Handled);
    drop(inbox);
    let lines = audit_lines(dir.path(), AUDIT_FILE);
    assert_eq!(lines[0]["state"], "handled");
    assert_eq!(lines[1]["state"], "unread");
}

#[test]
fn ack_never_reaches_past_the_last_seq() {
    let (_dir, inbox) = fresh();
    inbox.record("files", "m", Value::Null, false);
    inbox.record("files", "m", Value::Null, false);
    assert_eq!(inbox.ack(Some(1_000)), 2);
    assert_eq!(inbox.ack(Some(1_000)), 0, "nothing more to acknowledge");
    inbox.record("files", "m", Value::Null, false);
    assert_eq!(
        seqs(&inbox.unread()),
        [3],
        "a later notification is not pre-acknowledged"
    );
}

#[test]
fn clear_empties_the_ring_and_a_restart_replays_the_trail_as_read() {
    let (dir, inbox) = fresh();
    record_messages(&inbox, 1..=5);
    let report = clear(&inbox, false);
    assert_eq!(report.cleared, 5);
    assert_eq!(report.partial_warning, None);
    assert_eq!(inbox.record("files", "m", Value::Null, false), 6);
    drop(inbox);
    let inbox = open(dir.path());
    let listed = inbox.list(None, 10);
    assert_eq!(
        seqs(&listed),
        [6, 5, 4, 3, 2, 1],
        "the audit trail stayed on disk"
    );
    assert_eq!(
        seqs(&inbox.unread()),
        [6],
        "clear acknowledged what it cleared"
    );
}

#[test]
fn clear_all_purges_so_a_restart_is_empty() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = rotating(dir.path(), 2048);
    {
        let inbox = Inbox::open(cfg.clone()).expect("the inbox opens");
        record_messages(&inbox, 1..=100);
        assert!(dir.path().join(AUDIT_BACKUP_FILE).exists());
        let report = clear(&inbox, true);
        assert_eq!(report.partial_warning, None);
        assert_eq!(report.cleared, 100);
    }
    assert!(
        !dir.path().join(AUDIT_BACKUP_FILE).exists(),
        "the backup is gone"
    );
    let lines = audit_lines(dir.path(), AUDIT_FILE);
    assert_eq!(
        lines.len(),
        1,
        "only the purge checkpoint is left: {lines:?}"
    );
    assert_eq!(lines[0]["kind"], "checkpoint");
    assert!(
        !fs::read_to_string(dir.path().join(AUDIT_FILE))
            .expect("read")
            .contains("message 1")
    );

    let inbox = Inbox::open(cfg).expect("the inbox reopens");
    assert!(inbox.list(None, 1000).is_empty(), "nothing came back");
    assert!(inbox.unread().is_empty());
    assert_eq!(
        inbox.record("files", "m", Value::Null, false),
        101,
        "seq still increases"
    );
}

#[test]
fn clear_all_with_an_unremovable_backup_warns_yet_drains_and_keeps_writing() {
    let (dir, inbox) = fresh();
    record_messages(&inbox, 1..=3);
    block_the_backup(dir.path());

    // The ring is empty anyway.
    let report = clear(&inbox, true);
    let warning = report.partial_warning.expect("a partial warning");
    assert!(warning.contains(AUDIT_BACKUP_FILE), "{warning}");

    assert_eq!(record_message(&inbox, "git", message(4)), 4);
    let lines = audit_lines(dir.path(), AUDIT_FILE);
    assert_eq!(
        lines.last().map(|l| l["seq"].clone()),
        Some(json!(4)),
        "new entries still land"
    );
    assert!(lines.iter().all(|l| l["kind"] != "entry" || l["seq"] == 4));
    drop(inbox);

    let inbox = open(dir.path());
    assert_eq!(seqs(&inbox.list(None, 10)), [4]);
}

#[test]
fn a_torn_last_line_is_skipped_and_cut_off() {
    let (dir, inbox) = fresh();
    record_messages(&inbox, 1..=2);
    drop(inbox);
    append_to_trail(dir.path(), br#"{"kind":"entry","seq":3,"at":"2026-"#);

    let snapshot =
        Inbox::snapshot(&roster::store::Stores::embedded(dir.path()), 100).expect("snapshot");
    assert_eq!(seqs(&snapshot.list(None, 10)), [2, 1]);

    let inbox = open(dir.path());
    assert_eq!(seqs(&inbox.list(None, 10)), [2, 1]);
    assert_eq!(record_message(&inbox, "files", message(3)), 3);
    drop(inbox);
    let lines = audit_lines(dir.path(), AUDIT_FILE);
    assert_eq!(
        lines.len(),
        3,
        "the torn bytes are gone and every line parses"
    );
    assert_eq!(lines[2]["seq"], 3);
}

#[test]
fn an_unreadable_line_in_the_middle_is_skipped() {
    let (dir, inbox) = fresh();
    inbox.record("files", "m", Value::Null, false);
    drop(inbox);
    append_to_trail(dir.path(), b"not json at all\n");
    let inbox = open(dir.path());
    assert_eq!(inbox.record("files", "m", Value::Null, false), 2);
    drop(inbox);
    let inbox = open(dir.path());
    assert_eq!(seqs(&inbox.list(None, 10)), [2, 1]);
}

#[test]
fn eight_threads_append_eighty_thousand_whole_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let inbox = Arc::new(
        Inbox::open(InboxConfig {
            rotate_bytes: u64::MAX,
            fsync: FsyncPolicy::Interval(Duration::from_millis(50)),
            ..InboxConfig::new(roster::store::Stores::embedded(dir.path()))
        })
        .expect("the inbox opens"),
    );
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let inbox = Arc::clone(&inbox);
            std::thread::spawn(move || {
                for n in 0..10_000 {
                    let params = json!({"thread": t, "n": n, "text": "x".repeat(n % 300)});
                    inbox.record(
                        &format!("server-{t}"),
                        "notifications/message",
                        params,
                        false,
                    );
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("writer thread");
    }
    drop(inbox);

    let text = fs::read_to_string(dir.path().join(AUDIT_FILE)).expect("read");
    let mut seen = HashSet::new();
    let mut per_thread = [0usize; 8];
    let mut previous = 0;
    for line in text.lines() {
        let value: Value = serde_json::from_str(line).expect("a whole JSON line");
        let seq = value["seq"].as_u64().expect("seq");
        assert!(seq > previous, "lines are in seq order");
        previous = seq;
        assert!(seen.insert(seq));
        let thread = value["params"]["thread"].as_u64().expect("thread") as usize;
        per_thread[thread] += 1;
    }
    assert_eq!(seen.len(), 80_000);
    assert_eq!(per_thread, [10_000; 8]);
}

#[test]
fn pending_confirms_never_show_to_the_model() {
    let dir = tempfile::tempdir().expect("temp dir");
    let secret = "delete-everything-7f3a";
    let check = |inbox: &Inbox| {
        for text in [
            render(&inbox.list(None, 100), 100, 100_000),
            render(&inbox.list(Some("files"), 100), 100, 100_000),
            render(&inbox.unread(), 100, 100_000),
            serde_json::to_string(&inbox.list(None, 100)).expect("json"),
            serde_json::to_string(&inbox.unread()).expect("json"),
        ] {
            assert!(!text.contains(secret), "{text}");
            assert!(!text.contains("elicitation/create"), "{text}");
        }
        let states: HashSet<EntryState> = inbox.list(None, 100).iter().map(|e| e.state).collect();
        assert!(states.iter().all(|s| matches!(
            s,
            EntryState::Unread | EntryState::Read | EntryState::Handled
        )));
    };
    {
        let inbox = open(dir.path());
        record_message(&inbox, "files", message(1));
        let asking = || ask(json!({"message": secret}), Duration::from_secs(60));
        let decided = inbox.record_pending_confirm("files", asking());
        let _waiting = inbox.record_pending_confirm("files", asking());
        record_message(&inbox, "files", message(4));
        check(&inbox);
        inbox.confirm(decided.id, false).expect("decline");
        check(&inbox);
        assert_eq!(inbox.unread_count(), 2);
        assert_eq!(inbox.pending_confirms().len(), 1);
        assert_eq!(inbox.pending_confirms()[0].params["message"], secret);
    }
    let inbox = open(dir.path());
    check(&inbox);
    assert_eq!(seqs(&inbox.list(None, 10)), [4, 1]);
}

#[test]
fn confirm_answers_the_waiter() {
    let dir = tempfile::tempdir().expect("temp dir");
    let inbox = Arc::new(open(dir.path()));
    let request = || ask(json!({"message": "go?"}), Duration::from_secs(600));
    let yes = inbox.record_pending_confirm("files", request());
    let no = inbox.record_pending_confirm("files", request());
    let (yes_id, no_id) = (yes.id, no.id);
    let waiters = [
        std::thread::spawn(move || yes.blocking_decision()),
        std::thread::spawn(move || no.blocking_decision()),
    ];
    assert_eq!(
        inbox.confirm(yes_id, true).expect("confirm"),
        ConfirmDecision::Confirmed
    );
    assert_eq!(
        inbox.confirm(no_id, false).expect("decline"),
        ConfirmDecision::Declined
    );
    let [yes, no] = waiters;
    assert_eq!(yes.join().expect("waiter"), ConfirmDecision::Confirmed);
    assert_eq!(no.join().expect("waiter"), ConfirmDecision::Declined);
    assert!(matches!(
        inbox.confirm(yes_id, false),
        Err(InboxError::ConfirmDecided {
            decision: ConfirmDecision::Confirmed,
            ..
        })
    ));
    assert!(matches!(
        inbox.confirm(roster::inbox::ConfirmId(999), true),
        Err(InboxError::UnknownConfirm { .. })
    ));
    let states: Vec<EntryState> = inbox.confirms().iter().map(|c| c.state).collect();
    assert_eq!(states, [EntryState::Confirmed, EntryState::Declined]);
}

#[tokio::test]
async fn expiry_answers_the_waiter_expired() {
    let (_dir, inbox) = fresh();
    let pending = inbox.record_pending_confirm(
        "files",
        ask(json!({"message": "go?"}), Duration::from_secs(30)),
    );
    let id = pending.id;
    let waiter = tokio::spawn(pending.decision());
    assert_eq!(inbox.expire_confirms(SystemTime::now()), 0, "not due yet");
    assert_eq!(
        inbox.expire_confirms(SystemTime::now() + Duration::from_secs(31)),
        1
    );
    assert_eq!(waiter.await.expect("waiter task"), ConfirmDecision::Expired);
    assert!(matches!(
        inbox.confirm(id, true),
        Err(InboxError::ConfirmDecided {
            decision: ConfirmDecision::Expired,
            ..
        })
    ));
    assert!(inbox.pending_confirms().is_empty());
}

#[test]
fn a_confirm_left_pending_by_a_previous_process_expires_on_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let id = {
        let inbox = open(dir.path());
        let pending =
            inbox.record_pending_confirm("files", ask(json!({}), Duration::from_secs(600)));
        let id = pending.id;
        // Simulate a crash: the waiter and the inbox vanish without any decision recorded.
        std::mem::forget(pending);
        std::mem::forget(inbox);
        id
    };
    let snapshot =
        Inbox::snapshot(&roster::store::Stores::embedded(dir.path()), 100).expect("snapshot");
    assert_eq!(
        snapshot.pending_confirms().len(),
        1,
        "on disk it is still pending"
    );
    // The forgotten inbox still holds the lock in this process; a real crash would release it.
    let lock = dir.path().join(roster::inbox::LOCK_FILE);
    fs::remove_file(&lock).expect("drop the stale lock file");
    let inbox = open(dir.path());
    assert!(inbox.pending_confirms().is_empty());
    assert!(matches!(
        inbox.confirm(id, true),
        Err(InboxError::ConfirmDecided {
            decision: ConfirmDecision::Expired,
            ..
        })
    ));
}

#[test]
fn clear_declines_pending_confirms() {
    let (_dir, inbox) = fresh();
    let pending = inbox.record_pending_confirm("files", ask(json!({}), Duration::from_secs(600)));
    let report = inbox.clear(false);
    assert_eq!(report.declined_confirms, 1);
    assert_eq!(pending.blocking_decision(), ConfirmDecision::Declined);
    assert!(inbox.pending_confirms().is_empty());
}

#[test]
fn a_second_owner_of_the_same_state_dir_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = open(dir.path());
    assert!(matches!(
        Inbox::open(config(dir.path())),
        Err(InboxError::Store(roster::store::StoreError::Busy { .. }))
    ));
    first.record("files", "m", Value::Null, false);
    let snapshot = Inbox::snapshot(&roster::store::Stores::embedded(dir.path()), 100)
        .expect("a snapshot needs no lock");
    assert_eq!(snapshot.last_seq(), 1);
    drop(first);
    open(dir.path());
}

#[test]
fn fsync_always_and_interval_keep_the_same_content() {
    for fsync in [
        FsyncPolicy::Always,
        FsyncPolicy::Interval(Duration::from_millis(10)),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let inbox = Inbox::open(InboxConfig {
                fsync,
                ..InboxConfig::new(roster::store::Stores::embedded(dir.path()))
            })
            .expect("the inbox opens");
            record_messages(&inbox, 1..=20);
        }
        assert_eq!(audit_lines(dir.path(), AUDIT_FILE).len(), 20, "{fsync}");
    }
}

#[test]
fn a_rotation_that_cannot_move_the_file_keeps_every_entry_in_the_active_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    block_the_backup(dir.path());
    let cfg = rotating(dir.path(), 1024);
    {
        let inbox = Inbox::open(cfg.clone()).expect("the inbox opens");
        record_messages(&inbox, 1..=100);
    }
    let lines = audit_lines(dir.path(), AUDIT_FILE);
    assert_eq!(lines.iter().filter(|l| l["kind"] == "entry").count(), 100);
    let inbox = Inbox::open(cfg).expect("the inbox reopens");
    assert_eq!(inbox.list(None, 1000).len(), 100);
    assert_eq!(inbox.record("files", "m", Value::Null, false), 101);
}

#[test]
fn a_pending_confirm_outlives_rotations_in_the_trail() {
    let dir = tempfile::tempdir().expect("temp dir");
    let inbox = Inbox::open(rotating(dir.path(), 2048)).expect("the inbox opens");
    let pending = inbox.record_pending_confirm(
        "files",
        ask(json!({"message": "go?"}), Duration::from_secs(600)),
    );
    // Enough traffic to rotate several times: the confirm's own line is long gone from disk.
    record_messages(&inbox, 1..=300);
    let snapshot =
        Inbox::snapshot(&roster::store::Stores::embedded(dir.path()), 1000).expect("snapshot");
    let seen: Vec<_> = snapshot.pending_confirms().iter().map(|c| c.id).collect();
    assert_eq!(seen, [pending.id]);
    let listed = snapshot.list(None, 1000);
    assert!(
        listed.windows(2).all(|w| w[0].seq > w[1].seq),
        "no entry appears twice"
    );
    assert_eq!(listed[0].seq, 301);

    inbox.confirm(pending.id, true).expect("confirm");
    assert_eq!(pending.blocking_decision(), ConfirmDecision::Confirmed);
    let snapshot =
        Inbox::snapshot(&roster::store::Stores::embedded(dir.path()), 1000).expect("snapshot");
    assert!(snapshot.pending_confirms().is_empty());
}

#[test]
fn a_confirm_whose_server_stopped_waiting_leaves_the_pending_list() {
    let (_dir, inbox) = fresh();
    let kept = inbox.record_pending_confirm("files", ask(json!({}), Duration::from_secs(600)));
    let dropped = inbox.record_pending_confirm("git", ask(json!({}), Duration::from_secs(600)));
    let dropped_id = dropped.id;
    drop(dropped);
    let pending: Vec<_> = inbox.pending_confirms().iter().map(|c| c.id).collect();
    assert_eq!(pending, [kept.id]);
    assert!(matches!(
        inbox.confirm(dropped_id, true),
        Err(InboxError::ConfirmDecided {
            decision: ConfirmDecision::Expired,
            ..
        })
    ));
}
