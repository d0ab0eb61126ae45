//! The inbox's state behind its lock: where records go ([`Trail`]: this process's JSONL file,
//! or the log replicas share), and [`Inner`], which commits each record to the trail and applies
//! it to the view, so a decision also reaches the request waiting for it.

use std::collections::HashMap;
use std::fs::File;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

use super::audit::AuditFile;
use super::record::AuditRecord;
use super::ring::View;
use super::shared::{self, Flushed, SharedLog};
use super::{Attribution, ConfirmDecision, RemoteChangeHook, Seq};
use crate::store::StoreError;

/// Where the inbox's records go, one backend's side: this process's JSONL file
/// ([`AuditFile`]) or the log replicas share ([`SharedLog`]), chosen once by
/// [`super::Inbox::open`] from the [`crate::store::Stores`] it is given. What only one of them
/// does has a default that does nothing.
pub(super) trait Trail: Send {
    /// Whether replicas share it: a confirm may be decided on another replica, a purge is a
    /// cut of the log every replica applies.
    fn shared(&self) -> bool {
        false
    }

    /// How often the housekeeper syncs a quiet trail (`None`: it does not).
    fn interval(&self) -> Option<Duration> {
        None
    }

    /// Makes what was appended durable now.
    fn sync(&mut self) {}

    /// A sync that is due, to be done outside the inbox's lock.
    fn take_due_sync(&mut self) -> Option<Arc<File>> {
        None
    }

    /// The last error while appends are failing.
    fn failing(&self) -> Option<&str>;

    /// Appends `record` (a notification or a confirm takes `view`'s next seq, or the log's);
    /// returns what may be applied now.
    fn append(&mut self, record: AuditRecord, view: &View) -> Flushed;

    /// What waited to be appended, appended now, and what other replicas appended since the
    /// last call (each with whether another replica appended it).
    fn catch_up(&mut self) -> (Flushed, Result<Vec<(AuditRecord, bool)>, StoreError>) {
        (Flushed::default(), Ok(Vec::new()))
    }

    /// The last position of the log this view applied (`None`: no log).
    fn applied(&self) -> Option<i64> {
        None
    }

    /// Whether the log holds more than it keeps.
    fn needs_compaction(&self) -> bool {
        false
    }

    /// Cuts the log (see [`SharedLog::compact`]); `Ok(false)`: nothing was cut.
    fn compact(
        &mut self,
        _prepare: &mut dyn FnMut(Vec<AuditRecord>) -> Vec<AuditRecord>,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// Removes what is kept on disk, then appends `checkpoint` (`clear --all` of a trail no
    /// replica shares); what could not be done, in words.
    fn purge(&mut self, _checkpoint: &AuditRecord) -> Vec<String> {
        Vec::new()
    }
}

impl Trail for AuditFile {
    fn interval(&self) -> Option<Duration> {
        AuditFile::interval(self)
    }

    fn sync(&mut self) {
        AuditFile::sync(self);
    }

    fn take_due_sync(&mut self) -> Option<Arc<File>> {
        AuditFile::take_due_sync(self)
    }

    fn failing(&self) -> Option<&str> {
        AuditFile::failing(self)
    }

    fn append(&mut self, mut record: AuditRecord, view: &View) -> Flushed {
        let seq = view.next_seq;
        shared::set_seq(&mut record, seq);
        self.append_rotating(&record, || view.fresh_file_head());
        Flushed {
            seq: shared::takes_seq(&record).then_some(seq),
            ready: vec![record],
            behind: false,
        }
    }

    fn purge(&mut self, checkpoint: &AuditRecord) -> Vec<String> {
        let mut problems = AuditFile::purge(self);
        AuditFile::append(self, checkpoint);
        AuditFile::sync(self);
        if let Some(failing) = AuditFile::failing(self) {
            problems.push(format!("could not record the purge: {failing}"));
        }
        problems
    }
}

impl Trail for SharedLog {
    fn shared(&self) -> bool {
        true
    }

    fn failing(&self) -> Option<&str> {
        SharedLog::failing(self)
    }

    fn append(&mut self, record: AuditRecord, _view: &View) -> Flushed {
        SharedLog::append(self, record)
    }

    fn catch_up(&mut self) -> (Flushed, Result<Vec<(AuditRecord, bool)>, StoreError>) {
        let flushed = self.flush();
        (flushed, self.since())
    }

    fn applied(&self) -> Option<i64> {
        Some(SharedLog::applied(self))
    }

    fn needs_compaction(&self) -> bool {
        SharedLog::needs_compaction(self)
    }

    fn compact(
        &mut self,
        prepare: &mut dyn FnMut(Vec<AuditRecord>) -> Vec<AuditRecord>,
    ) -> Result<bool, StoreError> {
        SharedLog::compact(self, prepare)
    }
}

pub(super) struct Inner {
    pub(super) view: View,
    pub(super) attribution: Attribution,
    pub(super) trail: Box<dyn Trail>,
    pub(super) waiters: HashMap<Seq, oneshot::Sender<ConfirmDecision>>,
    pub(super) remote_change: Option<RemoteChangeHook>,
}

impl Inner {
    /// Whether replicas share this inbox (its log is in the store).
    pub(super) fn shared(&self) -> bool {
        self.trail.shared()
    }

    /// Records `record` and applies it (with whatever other replicas appended before it). A
    /// notification or confirm takes the next seq; returns it (0 while the store cannot take
    /// the record: it waits in memory and gets its seq when it is appended).
    pub(super) fn commit(&mut self, record: AuditRecord) -> Seq {
        let flushed = self.trail.append(record, &self.view);
        let seq = flushed.seq.unwrap_or(0);
        flushed.ready.into_iter().for_each(|r| self.apply(r));
        if flushed.behind {
            self.catch_up();
        }
        seq
    }

    /// Applies what other replicas appended since the last catch-up (nothing for a file).
    pub(super) fn catch_up(&mut self) {
        let (flushed, since) = self.trail.catch_up();
        flushed.ready.into_iter().for_each(|r| self.apply(r));
        match since {
            Ok(records) => {
                for (record, foreign) in records {
                    if foreign
                        && let (Some(hook), AuditRecord::Entry(entry)) =
                            (&self.remote_change, &record)
                        && entry.method.ends_with("/list_changed")
                    {
                        hook(&entry.channel, &entry.method);
                    }
                    self.apply(record);
                }
            }
            Err(error) => {
                tracing::warn!(%error, "inbox: cannot read the shared log; showing what this replica has")
            }
        }
    }

    /// Cuts a shared log that holds more than it keeps (see [`InboxConfig::retain`]).
    pub(super) fn compact_if_needed(&mut self) {
        if !self.trail.needs_compaction() {
            return;
        }
        if let Err(error) = self.compact(|view| view.log_head()) {
            tracing::warn!(%error, "inbox: could not cut the shared log");
        }
    }

    /// Applies one record to the view; a decision also reaches the request waiting for it.
    fn apply(&mut self, record: AuditRecord) {
        apply_record(&mut self.view, &mut self.waiters, record);
    }

    /// Cuts the shared log: `head(view)` (the view caught up with every record so far, all
    /// appends held off) is written and everything before it deleted. `Ok(false)`: another
    /// replica appended meanwhile, or the trail is a file; nothing was cut.
    pub(super) fn compact(
        &mut self,
        head: impl FnOnce(&mut View) -> Vec<AuditRecord>,
    ) -> Result<bool, StoreError> {
        let Inner {
            view,
            trail,
            waiters,
            ..
        } = self;
        let mut head = Some(head);
        trail.compact(&mut |missing| {
            for record in missing {
                apply_record(view, waiters, record);
            }
            head.take().map_or_else(Vec::new, |head| head(view))
        })
    }
}

fn apply_record(
    view: &mut View,
    waiters: &mut HashMap<Seq, oneshot::Sender<ConfirmDecision>>,
    record: AuditRecord,
) {
    if let AuditRecord::Decision { seq, decision, .. } = &record
        && view.pending.contains_key(seq)
        && let Some(waiter) = waiters.remove(seq)
    {
        let _ = waiter.send(*decision);
    }
    view.apply(record);
}

pub(super) struct Shared {
    pub(super) inner: Mutex<Inner>,
    pub(super) stop: Mutex<bool>,
    pub(super) wake: Condvar,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves whole records behind (each write is one
        // write_all), so the state is still fit to use.
        crate::sync::lock(&self.inner)
    }

    /// The inner state, caught up with what other replicas appended: every read goes through
    /// here, so a client whose requests alternate between replicas reads its own changes.
    pub(super) fn fresh(&self) -> MutexGuard<'_, Inner> {
        let mut inner = self.lock();
        inner.catch_up();
        inner
    }
}
