//! The inbox's state behind its lock: [`Inner`], which commits each record to the trail the
//! store opened ([`InboxTrail`]: this process's JSONL file, the log replicas share, or nothing
//! kept) and applies it to the view, so a decision also reaches the request waiting for it.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};

use tokio::sync::oneshot;

use super::ring::View;
use super::{Attribution, ConfirmDecision, RemoteChangeHook, Seq};
use crate::store::StoreError;
use crate::store::trail::{AuditRecord, InboxTrail};

pub(super) struct Inner {
    pub(super) view: View,
    pub(super) attribution: Attribution,
    pub(super) trail: Box<dyn InboxTrail>,
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
        let Inner { trail, view, .. } = self;
        let flushed = trail.append(record, view.next_seq, &|| view.fresh_file_head());
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
