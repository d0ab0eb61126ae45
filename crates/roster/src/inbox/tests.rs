use super::*;
use serde_json::json;

fn entry_record(seq: Seq, state: RecordedState) -> AuditRecord {
    AuditRecord::Entry {
        seq,
        at: now_rfc3339(),
        channel: "files".into(),
        method: "notifications/message".into(),
        params: json!({"seq": seq}),
        state,
    }
}

#[test]
fn fsync_policy_parses_its_words() {
    assert_eq!("always".parse(), Ok(FsyncPolicy::Always));
    assert_eq!("never".parse(), Ok(FsyncPolicy::Never));
    assert_eq!(
        "interval".parse(),
        Ok(FsyncPolicy::Interval(Duration::from_secs(1)))
    );
    assert_eq!(
        "interval:250ms".parse(),
        Ok(FsyncPolicy::Interval(Duration::from_millis(250)))
    );
    assert!("interval:0s".parse::<FsyncPolicy>().is_err());
    assert!("sometimes".parse::<FsyncPolicy>().is_err());
    let shown = FsyncPolicy::Interval(Duration::from_millis(250)).to_string();
    assert_eq!(
        shown.parse(),
        Ok(FsyncPolicy::Interval(Duration::from_millis(250)))
    );
}

#[test]
fn acks_recorded_after_entries_mark_them_read_on_replay() {
    let mut view = View::new(10);
    for seq in 1..=4 {
        view.apply(entry_record(seq, RecordedState::Unread));
    }
    view.apply(AuditRecord::Ack {
        at: now_rfc3339(),
        up_to: 2,
    });
    view.settle();
    let states: Vec<EntryState> = view.ring.iter().map(|e| e.state).collect();
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
    let mut view = View::new(10);
    view.apply(entry_record(1, RecordedState::Handled));
    view.apply(entry_record(2, RecordedState::Unread));
    view.settle();
    assert_eq!(view.unread_count(), 1);
    assert_eq!(view.ring[0].state, EntryState::Handled);
}

#[test]
fn replay_keeps_only_the_last_capacity_entries() {
    let mut view = View::new(3);
    for seq in 1..=10 {
        view.apply(entry_record(seq, RecordedState::Unread));
    }
    let seqs: Vec<Seq> = view.ring.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [8, 9, 10]);
    assert_eq!(view.next_seq, 11);
}

#[test]
fn a_purge_checkpoint_drops_what_came_before_even_from_a_surviving_backup() {
    let mut view = View::new(10);
    for seq in 1..=3 {
        view.apply(entry_record(seq, RecordedState::Unread));
    }
    view.apply(AuditRecord::Checkpoint {
        at: now_rfc3339(),
        next_seq: 4,
        acked_through: 3,
        purged_through: 3,
    });
    // A stale copy of an old line replayed after the purge must not come back.
    view.apply(entry_record(2, RecordedState::Unread));
    view.apply(entry_record(4, RecordedState::Unread));
    view.settle();
    let seqs: Vec<Seq> = view.ring.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [4]);
    assert_eq!(view.unread_count(), 1);
}

#[test]
fn confirms_and_decisions_replay_outside_the_ring() {
    let mut view = View::new(10);
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
    let record = AuditRecord::Entry {
        seq: 7,
        at: now_rfc3339(),
        channel: "a\nb".into(),
        method: "m".into(),
        params: json!({"text": "line one\nline two"}),
        state: RecordedState::Handled,
    };
    let line = record.to_line().expect("a record encodes");
    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
    assert_eq!(line.last(), Some(&b'\n'));
    let back: AuditRecord = serde_json::from_slice(&line).expect("the line decodes");
    assert_eq!(back, record);
}

#[test]
fn fsync_policy_reads_from_config_text() {
    let policy: FsyncPolicy = serde_json::from_value(json!("interval:500ms")).expect("parses");
    assert_eq!(policy, FsyncPolicy::Interval(Duration::from_millis(500)));
    assert_eq!(
        serde_json::to_value(FsyncPolicy::Always).expect("encodes"),
        json!("always")
    );
    assert!(serde_json::from_value::<FsyncPolicy>(json!("often")).is_err());
}

#[test]
fn a_stale_copy_of_an_entry_is_not_replayed_twice() {
    let mut view = View::new(10);
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
