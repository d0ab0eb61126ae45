use super::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::SystemTime;

/// A notification of `files` as the trail records it, owned by `owners` (none: everyone's).
fn record_of(seq: Seq, state: RecordedState, owners: &[&str]) -> AuditRecord {
    AuditRecord::Entry(RecordedEntry {
        seq,
        at: now_rfc3339(),
        channel: "files".into(),
        method: "notifications/message".into(),
        params: json!({"seq": seq}),
        state,
        owners: owners.iter().map(|o| (*o).to_owned()).collect(),
    })
}

fn entry_record(seq: Seq, state: RecordedState) -> AuditRecord {
    record_of(seq, state, &[])
}

/// A view of `capacity` that replayed unread entries `seqs`.
fn replayed(capacity: usize, seqs: std::ops::RangeInclusive<Seq>) -> View {
    let mut view = View::new(capacity, DEFAULT_MAX_IDENTITIES);
    for seq in seqs {
        view.apply(entry_record(seq, RecordedState::Unread));
    }
    view
}

#[test]
fn acks_recorded_after_entries_mark_them_read_on_replay() {
    let mut view = replayed(10, 1..=4);
    view.apply(AuditRecord::Ack {
        at: now_rfc3339(),
        up_to: 2,
        who: None,
    });
    view.settle();
    let mut states: Vec<EntryState> = view
        .list(LOCAL_IDENTITY, None, 10)
        .iter()
        .map(|e| e.state)
        .collect();
    states.reverse();
    assert_eq!(
        states,
        [
            EntryState::Read,
            EntryState::Read,
            EntryState::Unread,
            EntryState::Unread
        ]
    );
    assert_eq!(view.next_seq, 5);
}

#[test]
fn handled_entries_stay_handled_whatever_is_acked() {
    let mut view = View::new(10, DEFAULT_MAX_IDENTITIES);
    view.apply(entry_record(1, RecordedState::Handled));
    view.apply(entry_record(2, RecordedState::Unread));
    view.settle();
    assert_eq!(view.unread_count(LOCAL_IDENTITY), 1);
    assert_eq!(view.ring[0].state, EntryState::Handled);
}

#[test]
fn replay_keeps_only_the_last_capacity_entries() {
    let view = replayed(3, 1..=10);
    let seqs: Vec<Seq> = view.ring.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [8, 9, 10]);
    assert_eq!(view.next_seq, 11);
}

#[test]
fn a_purge_checkpoint_drops_what_came_before_even_from_a_surviving_backup() {
    let mut view = replayed(10, 1..=3);
    view.apply(AuditRecord::Checkpoint {
        at: now_rfc3339(),
        next_seq: 4,
        acked_through: 3,
        purged_through: 3,
        acked_by: BTreeMap::new(),
    });
    // A stale copy of an old line replayed after the purge must not come back.
    view.apply(entry_record(2, RecordedState::Unread));
    view.apply(entry_record(4, RecordedState::Unread));
    view.settle();
    let seqs: Vec<Seq> = view.ring.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [4]);
    assert_eq!(view.unread_count(LOCAL_IDENTITY), 1);
}

#[test]
fn confirms_and_decisions_replay_outside_the_ring() {
    let mut view = View::new(10, DEFAULT_MAX_IDENTITIES);
    view.apply(AuditRecord::Confirm {
        seq: 1,
        at: now_rfc3339(),
        channel: "files".into(),
        method: "elicitation/create".into(),
        params: json!({"message": "delete?"}),
        expires_at: now_rfc3339(),
    });
    view.apply(AuditRecord::Confirm {
        seq: 2,
        at: now_rfc3339(),
        channel: "files".into(),
        method: "elicitation/create".into(),
        params: json!({}),
        expires_at: "not a time".into(),
    });
    view.apply(AuditRecord::Decision {
        seq: 1,
        at: now_rfc3339(),
        decision: ConfirmDecision::Declined,
        reason: "test".into(),
    });
    view.settle();
    assert!(view.ring.is_empty());
    assert_eq!(view.pending.keys().copied().collect::<Vec<_>>(), [2]);
    assert_eq!(view.pending[&2].expires, SystemTime::UNIX_EPOCH);
    assert_eq!(view.decided[0].state, EntryState::Declined);
    assert_eq!(view.next_seq, 3);
}

#[test]
fn records_are_single_lines_of_json() {
    let record = AuditRecord::Entry(RecordedEntry {
        seq: 7,
        at: now_rfc3339(),
        channel: "a\nb".into(),
        method: "m".into(),
        params: json!({"text": "line one\nline two"}),
        state: RecordedState::Handled,
        owners: vec!["alice".into()],
    });
    let line = record.to_line().expect("a record encodes");
    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
    assert_eq!(line.last(), Some(&b'\n'));
    let back: AuditRecord = serde_json::from_slice(&line).expect("the line decodes");
    assert_eq!(back, record);
}

#[test]
fn a_stale_copy_of_an_entry_is_not_replayed_twice() {
    let mut view = View::new(10, DEFAULT_MAX_IDENTITIES);
    view.apply(entry_record(1, RecordedState::Unread));
    view.apply(entry_record(2, RecordedState::Unread));
    view.apply(entry_record(2, RecordedState::Unread));
    view.apply(entry_record(1, RecordedState::Unread));
    let seqs: Vec<Seq> = view.ring.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2]);
}

#[test]
fn the_inbox_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Inbox>();
    shareable::<PendingConfirm>();
}

fn owned_record(seq: Seq, owners: &[&str]) -> AuditRecord {
    record_of(seq, RecordedState::Unread, owners)
}

#[test]
fn each_identity_sees_its_own_and_everyones_and_acks_for_itself() {
    let mut view = View::new(10, DEFAULT_MAX_IDENTITIES);
    view.apply(owned_record(1, &["alice"]));
    view.apply(owned_record(2, &[]));
    view.apply(owned_record(3, &["bob"]));
    view.apply(owned_record(4, &["alice", "bob"]));
    let seqs = |entries: Vec<Entry>| entries.iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(seqs(view.unread("alice")), [1, 2, 4]);
    assert_eq!(seqs(view.unread("bob")), [2, 3, 4]);
    assert_eq!(seqs(view.unread(LOCAL_IDENTITY)), [2]);
    assert_eq!(view.ack("bob", 4).ok(), Some(3));
    assert_eq!(seqs(view.unread("alice")), [1, 2, 4], "bob's ack is bob's");
    assert!(view.unread("bob").is_empty());
    let alice_sees = view.list("alice", None, 10);
    assert!(alice_sees.iter().all(|e| e.state == EntryState::Unread));
    assert!(
        alice_sees
            .iter()
            .all(|e| !e.owners.iter().any(|o| o == "bob")),
        "alice is never told who else a notification belongs to: {alice_sees:?}"
    );
}

#[test]
fn read_state_is_kept_for_a_bounded_number_of_identities() {
    let mut view = View::new(10, 2);
    view.apply(owned_record(1, &[]));
    assert!(view.ack("alice", 1).is_ok());
    assert!(view.ack("bob", 1).is_ok());
    assert!(
        view.ack(LOCAL_IDENTITY, 1).is_ok(),
        "the local default always has a place"
    );
    let refused = view
        .ack("carol", 1)
        .expect_err("a third identity is one too many");
    assert!(refused.to_string().contains("at most 2"), "{refused}");
    assert_eq!(view.unread_count("carol"), 1, "nothing changed for carol");

    // A trail naming more identities than the bound keeps those that read furthest.
    let mut replayed = View::new(10, 1);
    replayed.apply(owned_record(1, &[]));
    replayed.apply(owned_record(2, &[]));
    for (who, up_to) in [("alice", 1), ("bob", 2)] {
        replayed.apply(AuditRecord::Ack {
            at: now_rfc3339(),
            up_to,
            who: Some(who.into()),
        });
    }
    replayed.settle();
    assert_eq!(replayed.acked_by.keys().collect::<Vec<_>>(), ["bob"]);
}

#[test]
fn a_notification_during_a_request_belongs_to_its_client_and_list_changed_to_everyone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let inbox = Inbox::open(InboxConfig::new(Stores::embedded(dir.path()))).expect("open");
    let attribution = inbox.attribution();
    let held = attribution.hold("files", "alice");
    inbox.record("files", "notifications/message", json!({"n": 1}), false);
    inbox.record(
        "files",
        "notifications/tools/list_changed",
        json!(null),
        false,
    );
    inbox.record("web", "notifications/message", json!({"n": 2}), false);
    drop(held);
    inbox.record("files", "notifications/message", json!({"n": 3}), false);
    let seqs = |entries: Vec<Entry>| entries.iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(seqs(inbox.unread_for("alice")), [1, 2, 3, 4]);
    assert_eq!(seqs(inbox.unread_for("bob")), [2, 3, 4]);
    assert_eq!(inbox.ack_for("bob", None).ok(), Some(3));
    drop(inbox);

    // A restart rebuilds both views from the one trail.
    let inbox = Inbox::open(InboxConfig::new(Stores::embedded(dir.path()))).expect("reopen");
    assert_eq!(seqs(inbox.unread_for("alice")), [1, 2, 3, 4]);
    assert!(inbox.unread_for("bob").is_empty());
    assert_eq!(inbox.list_for("bob", None, 10).len(), 3);
}

#[test]
fn each_identitys_read_state_is_replayed_across_a_rotation() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = InboxConfig {
        rotate_bytes: 4096,
        ..InboxConfig::new(Stores::embedded(dir.path()))
    };
    let inbox = Inbox::open(config.clone()).expect("open");
    for n in 1..=5 {
        inbox.record("files", "notifications/message", json!({"n": n}), false);
    }
    assert_eq!(inbox.ack_for("bob", None).ok(), Some(5));
    while !dir.path().join(AUDIT_BACKUP_FILE).exists() {
        inbox.record(
            "files",
            "notifications/message",
            json!({"n": "more"}),
            false,
        );
    }
    inbox.record(
        "files",
        "notifications/message",
        json!({"n": "after"}),
        false,
    );
    drop(inbox);

    let inbox = Inbox::open(config).expect("reopen");
    let state_of = |who: &str, seq: Seq| {
        inbox
            .list_for(who, None, 10_000)
            .into_iter()
            .find(|e| e.seq == seq)
            .map(|e| e.state)
    };
    assert_eq!(state_of("bob", 3), Some(EntryState::Read));
    assert_eq!(state_of("alice", 3), Some(EntryState::Unread));
    assert_eq!(state_of(LOCAL_IDENTITY, 3), Some(EntryState::Unread));
    assert!(inbox.unread_for("bob").iter().all(|e| e.seq > 5));
}

#[test]
fn an_entry_line_keeps_its_format() {
    let record = AuditRecord::Entry(RecordedEntry {
        seq: 7,
        at: "2026-01-01T00:00:00.000Z".into(),
        channel: "c".into(),
        method: "m".into(),
        params: Value::Null,
        state: RecordedState::Unread,
        owners: Vec::new(),
    });
    let line = String::from_utf8(record.to_line().expect("encodes")).expect("utf-8");
    assert_eq!(
        line,
        "{\"kind\":\"entry\",\"seq\":7,\"at\":\"2026-01-01T00:00:00.000Z\",\"channel\":\"c\",\
         \"method\":\"m\",\"params\":null,\"state\":\"unread\"}\n"
    );
}
