//! Replay: the trail's records, applied to a [`View`] in order, on
//! [`Inbox::open`](super::Inbox::open) and for a read-only [`InboxSnapshot`].

use std::time::SystemTime;

use super::ring::{PendingSlot, View};
use super::{ConfirmEntry, ConfirmId, Entry, EntryState, Inbox, InboxError, LOCAL_IDENTITY, Seq};
use crate::store::Stores;
use crate::store::trail::{AuditRecord, RecordedEntry, RecordedState};

impl From<RecordedEntry> for Entry {
    fn from(recorded: RecordedEntry) -> Self {
        Entry {
            seq: recorded.seq,
            at: recorded.at,
            channel: recorded.channel,
            method: recorded.method,
            params: recorded.params,
            state: match recorded.state {
                RecordedState::Handled => EntryState::Handled,
                RecordedState::Unread => EntryState::Unread,
            },
            owners: recorded.owners,
        }
    }
}

impl View {
    /// Replays one audit record.
    pub(super) fn apply(&mut self, record: AuditRecord) {
        match record {
            AuditRecord::Entry(recorded) => {
                // Entries are written in seq order; one at or below a seq already seen is a
                // stale copy (or purged) and must not appear twice.
                if recorded.seq < self.next_seq || recorded.seq <= self.purged_through {
                    return;
                }
                self.see_seq(recorded.seq);
                self.push_entry(recorded.into());
            }
            AuditRecord::Ack { up_to, who, .. } => match who {
                Some(who) => {
                    let mark = self.acked_by.entry(who).or_default();
                    *mark = (*mark).max(up_to);
                }
                None => self.acked_through = self.acked_through.max(up_to),
            },
            AuditRecord::Confirm {
                seq,
                at,
                channel,
                method,
                params,
                expires_at,
            } => {
                self.see_seq(seq);
                // A fresh file repeats what was pending; a copy of one already decided is stale.
                if seq <= self.purged_through || self.decided.iter().any(|c| c.id.0 == seq) {
                    return;
                }
                // An unreadable deadline is already past: the request cannot outlive it.
                let expires =
                    humantime::parse_rfc3339(&expires_at).unwrap_or(SystemTime::UNIX_EPOCH);
                self.pending.insert(
                    seq,
                    PendingSlot {
                        entry: ConfirmEntry {
                            id: ConfirmId(seq),
                            at,
                            channel,
                            method,
                            params,
                            state: EntryState::PendingConfirm,
                            expires_at,
                        },
                        expires,
                    },
                );
            }
            AuditRecord::Decision { seq, decision, .. } => {
                if let Some(mut slot) = self.pending.remove(&seq) {
                    slot.entry.state = decision.state();
                    self.push_decided(slot.entry);
                }
            }
            AuditRecord::Checkpoint {
                next_seq,
                acked_through,
                purged_through,
                acked_by,
                ..
            } => {
                self.next_seq = self.next_seq.max(next_seq);
                self.acked_through = self.acked_through.max(acked_through);
                for (who, up_to) in acked_by {
                    let mark = self.acked_by.entry(who).or_default();
                    *mark = (*mark).max(up_to);
                }
                self.purge_through(purged_through);
            }
        }
    }
}

/// The inbox as its trail shows it, read without taking ownership of it.
pub struct InboxSnapshot {
    view: View,
}

impl InboxSnapshot {
    /// The most recent entries the local default identity sees, newest first, optionally of
    /// one channel only.
    pub fn list(&self, channel: Option<&str>, limit: usize) -> Vec<Entry> {
        self.view.list(LOCAL_IDENTITY, channel, limit)
    }

    /// Entries the local default identity has not acknowledged, oldest first.
    pub fn unread(&self) -> Vec<Entry> {
        self.view.unread(LOCAL_IDENTITY)
    }

    /// Confirms recorded as pending. Read from a live gateway's trail these are the ones it
    /// waits on; from a stopped one's, the ones it will expire when it opens.
    pub fn pending_confirms(&self) -> Vec<ConfirmEntry> {
        self.view.pending_confirms()
    }

    /// The highest seq given out so far (0 before the first).
    pub fn last_seq(&self) -> Seq {
        self.view.last_seq()
    }
}

impl Inbox {
    /// Reads the audit trail kept in `stores` as a replay would, without the lock and without
    /// writing: what `roster inbox list` shows when it may not own the trail.
    pub fn snapshot(stores: &Stores, capacity: usize) -> Result<InboxSnapshot, InboxError> {
        let mut view = View::new(capacity, usize::MAX);
        stores
            .inbox_history()?
            .into_iter()
            .for_each(|r| view.apply(r));
        view.settle();
        Ok(InboxSnapshot { view })
    }
}
