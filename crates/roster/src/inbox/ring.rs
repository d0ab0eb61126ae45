//! The ring: the last `capacity` entries with each client identity's read state, the confirms
//! pending and recently decided, and the checkpoint that lets a fresh audit file stand alone.

use std::collections::{BTreeMap, VecDeque};
use std::time::SystemTime;

use super::{ConfirmEntry, Entry, EntryState, InboxError, LOCAL_IDENTITY, Seq, now_rfc3339};
use crate::store::trail::{AuditRecord, RecordedEntry, RecordedState};

/// A pending confirm as the view keeps it: what the person sees, and when it expires.
pub(super) struct PendingSlot {
    pub(super) entry: ConfirmEntry,
    pub(super) expires: SystemTime,
}

/// The inbox's content, rebuilt by replay and kept current by every change.
pub(super) struct View {
    pub(super) capacity: usize,
    pub(super) ring: VecDeque<Entry>,
    pub(super) pending: BTreeMap<Seq, PendingSlot>,
    /// Recently decided confirms, for the person's history; never part of the model's view.
    pub(super) decided: VecDeque<ConfirmEntry>,
    pub(super) next_seq: Seq,
    /// Read by everyone up to here (`clear`, and acks written before read state was per
    /// identity).
    pub(super) acked_through: Seq,
    /// Each identity's own ack watermark; the ring keeps entries as recorded (unread or
    /// handled) and an identity's view is derived from this.
    pub(super) acked_by: BTreeMap<String, Seq>,
    pub(super) max_identities: usize,
    pub(super) purged_through: Seq,
}

impl View {
    pub(super) fn new(capacity: usize, max_identities: usize) -> Self {
        View {
            max_identities,
            acked_by: BTreeMap::new(),
            capacity: capacity.max(1),
            ring: VecDeque::new(),
            pending: BTreeMap::new(),
            decided: VecDeque::new(),
            next_seq: 1,
            acked_through: 0,
            purged_through: 0,
        }
    }

    pub(super) fn last_seq(&self) -> Seq {
        self.next_seq - 1
    }

    pub(super) fn push_entry(&mut self, entry: Entry) {
        if self.ring.len() >= self.capacity {
            self.ring.pop_front();
        }
        self.ring.push_back(entry);
    }

    pub(super) fn push_decided(&mut self, entry: ConfirmEntry) {
        if self.decided.len() >= self.capacity {
            self.decided.pop_front();
        }
        self.decided.push_back(entry);
    }

    pub(super) fn see_seq(&mut self, seq: Seq) {
        self.next_seq = self.next_seq.max(seq.saturating_add(1));
    }

    pub(super) fn purge_through(&mut self, seq: Seq) {
        self.purged_through = self.purged_through.max(seq);
        let purged = self.purged_through;
        self.ring.retain(|e| e.seq > purged);
        self.pending.retain(|&s, _| s > purged);
        self.decided.retain(|c| c.id.0 > purged);
    }

    /// Keeps the read state of at most `max_identities` identities after a replay (a trail
    /// may name clients that are no longer configured): those that acknowledged least lose
    /// theirs first, which only shows them more as unread.
    pub(super) fn settle(&mut self) {
        let others = |view: &View| {
            view.acked_by
                .keys()
                .filter(|w| w.as_str() != LOCAL_IDENTITY)
                .count()
        };
        while others(self) > self.max_identities {
            let Some(least) = self
                .acked_by
                .iter()
                .filter(|(w, _)| w.as_str() != LOCAL_IDENTITY)
                .min_by_key(|(_, seq)| **seq)
                .map(|(w, _)| w.clone())
            else {
                break;
            };
            tracing::warn!(
                identity = %least,
                max = self.max_identities,
                "the audit trail holds read state for more client identities than max_identities; dropping the oldest"
            );
            self.acked_by.remove(&least);
        }
    }

    pub(super) fn acked_for(&self, who: &str) -> Seq {
        self.acked_by
            .get(who)
            .copied()
            .unwrap_or(0)
            .max(self.acked_through)
    }

    /// The entry as `who` sees it: read once `who` acknowledged it, and naming no other
    /// identity (owners shrink to `who`, or stay empty for everyone's).
    pub(super) fn seen_by(&self, entry: &Entry, who: &str, acked: Seq) -> Entry {
        let mut seen = entry.clone();
        if seen.state == EntryState::Unread && seen.seq <= acked {
            seen.state = EntryState::Read;
        }
        seen.owners.retain(|o| o == who);
        seen
    }

    pub(super) fn list(&self, who: &str, channel: Option<&str>, limit: usize) -> Vec<Entry> {
        let acked = self.acked_for(who);
        self.ring
            .iter()
            .rev()
            .filter(|e| e.visible_to(who) && channel.is_none_or(|c| e.channel == c))
            .take(limit)
            .map(|e| self.seen_by(e, who, acked))
            .collect()
    }

    pub(super) fn unread_iter<'a>(&'a self, who: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        let acked = self.acked_for(who);
        self.ring
            .iter()
            .filter(move |e| e.state == EntryState::Unread && e.seq > acked && e.visible_to(who))
    }

    pub(super) fn unread(&self, who: &str) -> Vec<Entry> {
        let acked = self.acked_for(who);
        self.unread_iter(who)
            .map(|e| self.seen_by(e, who, acked))
            .collect()
    }

    pub(super) fn unread_count(&self, who: &str) -> usize {
        self.unread_iter(who).count()
    }

    /// Moves `who`'s watermark to `target`; refused when `who` would be one identity too many.
    pub(super) fn ack(&mut self, who: &str, target: Seq) -> Result<usize, InboxError> {
        if target <= self.acked_for(who) {
            return Ok(0);
        }
        let known = self.acked_by.contains_key(who);
        let others = self
            .acked_by
            .keys()
            .filter(|w| w.as_str() != LOCAL_IDENTITY)
            .count();
        if !known && who != LOCAL_IDENTITY && others >= self.max_identities {
            return Err(InboxError::TooManyIdentities {
                who: who.to_owned(),
                max: self.max_identities,
            });
        }
        let changed = self.unread_iter(who).filter(|e| e.seq <= target).count();
        self.acked_by.insert(who.to_owned(), target);
        Ok(changed)
    }

    pub(super) fn pending_confirms(&self) -> Vec<ConfirmEntry> {
        self.pending.values().map(|s| s.entry.clone()).collect()
    }

    pub(super) fn confirms(&self) -> Vec<ConfirmEntry> {
        let mut all: Vec<ConfirmEntry> = self
            .decided
            .iter()
            .cloned()
            .chain(self.pending_confirms())
            .collect();
        all.sort_by_key(|c| c.id);
        all
    }

    /// The first lines of a fresh audit file: the checkpoint, then every confirm still
    /// pending, so a reader of that file alone (a snapshot after the backup is gone) sees them.
    pub(super) fn fresh_file_head(&self) -> Vec<AuditRecord> {
        let mut head = vec![self.checkpoint()];
        head.extend(self.pending.values().map(|slot| AuditRecord::Confirm {
            seq: slot.entry.id.0,
            at: slot.entry.at.clone(),
            channel: slot.entry.channel.clone(),
            method: slot.entry.method.clone(),
            params: slot.entry.params.clone(),
            expires_at: slot.entry.expires_at.clone(),
        }));
        head
    }

    /// The head of a cut shared log: the ring's entries as recorded (so a replica opening later
    /// shows what the others do; one that has them skips them, their seqs being behind it),
    /// then what a fresh audit file starts with.
    pub(super) fn log_head(&self) -> Vec<AuditRecord> {
        let mut head: Vec<AuditRecord> = self
            .ring
            .iter()
            .map(|e| {
                AuditRecord::Entry(RecordedEntry {
                    seq: e.seq,
                    at: e.at.clone(),
                    channel: e.channel.clone(),
                    method: e.method.clone(),
                    params: e.params.clone(),
                    state: if e.state == EntryState::Handled {
                        RecordedState::Handled
                    } else {
                        RecordedState::Unread
                    },
                    owners: e.owners.clone(),
                })
            })
            .collect();
        head.extend(self.fresh_file_head());
        head
    }

    pub(super) fn checkpoint(&self) -> AuditRecord {
        AuditRecord::Checkpoint {
            at: now_rfc3339(),
            next_seq: self.next_seq,
            acked_through: self.acked_through,
            purged_through: self.purged_through,
            acked_by: self
                .acked_by
                .iter()
                .filter(|(_, seq)| **seq > self.acked_through)
                .map(|(w, seq)| (w.clone(), *seq))
                .collect(),
        }
    }
}
