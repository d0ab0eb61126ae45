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
use super::shared::{self, SharedLog};
use super::{Attribution, ConfirmDecision, RemoteChangeHook, Seq};

/// Where the records go: this process's JSONL file, or the log replicas share.
pub(super) enum Trail {
    File(AuditFile),
    Shared(SharedLog),
}

impl Trail {
    pub(super) fn interval(&self) -> Option<Duration> {
        match self {
            Trail::File(audit) => audit.interval(),
            Trail::Shared(_) => None,
        }
    }

    pub(super) fn sync(&mut self) {
        if let Trail::File(audit) = self {
            audit.sync();
        }
    }

    pub(super) fn take_due_sync(&mut self) -> Option<Arc<File>> {
        match self {
            Trail::File(audit) => audit.take_due_sync(),
            Trail::Shared(_) => None,
        }
    }

    pub(super) fn failing(&self) -> Option<&str> {
        match self {
            Trail::File(audit) => audit.failing(),
            Trail::Shared(log) => log.failing(),
        }
    }
}

pub(super) struct Inner {
    pub(super) view: View,
    pub(super) attribution: Attribution,
    pub(super) trail: Trail,
    pub(super) waiters: HashMap<Seq, oneshot::Sender<ConfirmDecision>>,
    pub(super) remote_change: Option<RemoteChangeHook>,
}

impl Inner {
    /// Whether replicas share this inbox (its log is in the store).
    pub(super) fn shared(&self) -> bool {
        matches!(self.trail, Trail::Shared(_))
    }

    /// Records `record` and applies it (with whatever other replicas appended before it). A
    /// notification or confirm takes the next seq; returns it (0 while the store cannot take
    /// the record: it waits in memory and gets its seq when it is appended).
    pub(super) fn commit(&mut self, mut record: AuditRecord) -> Seq {
        match &mut self.trail {
            Trail::File(audit) => {
                let seq = self.view.next_seq;
                shared::set_seq(&mut record, seq);
                let view = &self.view;
                audit.append_rotating(&record, || view.fresh_file_head());
                let takes = shared::takes_seq(&record);
                self.apply(record);
                if takes { seq } else { 0 }
            }
            Trail::Shared(log) => {
                let flushed = log.append(record);
                let seq = flushed.seq.unwrap_or(0);
                let behind = flushed.behind;
                flushed.ready.into_iter().for_each(|r| self.apply(r));
                if behind {
                    self.catch_up();
                }
                seq
            }
        }
    }

    /// Applies what other replicas appended since the last catch-up (nothing for a file).
    pub(super) fn catch_up(&mut self) {
        let Trail::Shared(log) = &mut self.trail else {
            return;
        };
        let flushed = log.flush();
        flushed.ready.into_iter().for_each(|r| self.apply(r));
        let Trail::Shared(log) = &mut self.trail else {
            return;
        };
        match log.since() {
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
        let Trail::Shared(log) = &self.trail else {
            return;
        };
        if !log.needs_compaction() {
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
    ) -> Result<bool, crate::store::StoreError> {
        let Inner {
            view,
            trail,
            waiters,
            ..
        } = self;
        let Trail::Shared(log) = trail else {
            return Ok(false);
        };
        log.compact(|missing| {
            for record in missing {
                apply_record(view, waiters, record);
            }
            head(view)
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
