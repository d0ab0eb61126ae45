//! The inbox: every notification a server pushed, in a bounded in-memory ring, mirrored to an
//! append-only JSONL audit trail that survives restarts.
//!
//! - [`Inbox::record`] keeps a notification. One roster consumed itself (a `list_changed` that
//!   triggered a re-list) is recorded as [`EntryState::Handled`] and never counts as unread.
//! - [`Inbox::list`], [`Inbox::unread`] and [`Inbox::ack`] are the one code path behind both the
//!   model's `channels` native tool and `roster inbox`; [`render`] turns entries into the capped
//!   text both show.
//! - [`Inbox::record_pending_confirm`] keeps a server request only a person may decide. It lives
//!   apart from the ring: `list`, `unread` and `render` never see it or its decision. It is
//!   answered by [`Inbox::confirm`], or as [`ConfirmDecision::Expired`] once its deadline passes.
//! - [`Inbox::clear`] empties the ring; with `all` it also purges the audit trail on disk.
//!
//! # On disk
//! `audit.jsonl` in the state directory, one JSON object per line, rotated at a size limit to
//! one backup `audit.jsonl.1`. Acknowledgements, confirm decisions and purges are records too, so
//! a replay on [`Inbox::open`] rebuilds the ring (its last `capacity` entries) with read state
//! intact, and `seq` keeps increasing across restarts, rotations and clears.
//!
//! # Durability
//! Each record is encoded in memory and written with one `write_all` on an `O_APPEND` handle
//! under the inbox's mutex, so concurrent writers never interleave lines and a process crash
//! loses nothing already recorded (the bytes are in the kernel). What a power loss may take
//! depends on [`FsyncPolicy`]: with `Always` nothing that `record` returned from; with
//! `Interval(d)` at most the records of about the last `2 × d` (an append syncs when the last
//! sync is older than `d`, and a background thread syncs a quiet trail); with `Never`, whatever
//! the OS had not written back. A torn last line (a crash mid-write) is skipped on replay with a
//! warning and cut off before new lines are appended.
//!
//! One process owns a state directory at a time: [`Inbox::open`] takes an advisory lock on
//! `inbox.lock` and fails with [`StoreError::Busy`](crate::store::StoreError::Busy) while
//! another inbox holds it. [`Inbox::snapshot`] reads the trail without the lock and without
//! writing. The trail itself — this file, the log replicas share, or nothing (in memory) — is
//! the store's ([`crate::store::Stores::inbox_trail`]); the inbox keeps the view.
//!
//! # Whose notification
//! The view (`list`, `unread`, `ack`) is per client identity: a `[[clients]]` token's name, or
//! [`LOCAL_IDENTITY`] for the local default (stdio clients, HTTP without `[[clients]]`, and
//! `roster inbox`). A notification a server sent while it was answering a request belongs to the
//! client identity of that request: the gateway holds an [`Attribution`] for the server while the
//! request runs, and the notification is recorded with those owners. Servers do not say which
//! request a notification is about, so if requests of several identities are in flight at the
//! same server, it belongs to each of them. A notification sent outside any request (a server's
//! unsolicited log) and every `*/list_changed` (it is about the server, not about a call) belong to
//! nobody in particular: every identity sees it. Each identity acknowledges on its own (one ack
//! watermark per identity, at most [`InboxConfig::max_identities`] of them); `clear` empties the
//! ring for everyone. The trail stays one file: each entry line records its owners and each ack
//! line its identity, so a replay rebuilds every identity's view.

mod attribution;
mod confirm;
mod entry;
mod housekeeping;
mod render;
mod replay;
mod ring;
mod trail;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use serde_json::Value;

pub use crate::store::postgres::inbox::{CHANNEL as STORE_CHANNEL, default_retain};
pub use crate::store::{
    AUDIT_BACKUP_FILE, AUDIT_FILE, ConfirmDecision, DEFAULT_FSYNC_INTERVAL, FsyncPolicy, LOCK_FILE,
    ParseFsyncPolicyError, Seq,
};
pub use attribution::{Attribution, HeldRequest, current_client, on_behalf_of};
pub use confirm::{ConfirmRequest, PendingConfirm};
pub use entry::{ConfirmEntry, ConfirmId, Entry, EntryState};
pub use render::{
    DEFAULT_LIST_LIMIT, DEFAULT_MAX_CHARS, LINE_MAX_CHARS, MORE_PREFIX, NO_ENTRIES, Reader, render,
    render_for,
};
pub use replay::InboxSnapshot;

use crate::store::Stores;
use crate::store::trail::{
    AuditRecord, RecordedEntry, RecordedState, TrailOptions, now_rfc3339, rfc3339,
};
use ring::View;
use trail::{Inner, Shared};

/// Ring capacity when the config does not say.
pub const DEFAULT_CAPACITY: usize = 1000;
/// Size of `audit.jsonl` at which it is rotated to `audit.jsonl.1`, when the config does not say.
pub const DEFAULT_ROTATE_BYTES: u64 = 10 * 1024 * 1024;
/// How many client identities (besides the local default) keep their own read state, when the
/// config does not say.
pub const DEFAULT_MAX_IDENTITIES: usize = 64;
/// The client identity of the local default: stdio clients, HTTP clients when no `[[clients]]`
/// are configured, and the person at `roster inbox`.
pub const LOCAL_IDENTITY: &str = "";

/// Writes every record of the audit trail of `stores` as JSON lines, oldest first: the shared
/// log (`[store]`), else `audit.jsonl.1` then `audit.jsonl` in the state dir, read without the
/// lock (a running gateway keeps it); nothing in memory. Returns how many (`roster inbox
/// export`).
pub fn export(stores: &Stores, out: &mut dyn std::io::Write) -> Result<usize, InboxError> {
    let records = stores.inbox_history()?;
    for record in &records {
        let line = record
            .to_line()
            .map_err(|e| InboxError::Export(e.to_string()))?;
        out.write_all(&line)
            .map_err(|e| InboxError::Export(e.to_string()))?;
    }
    Ok(records.len())
}

/// Where the inbox keeps its audit trail and how big it may grow.
#[derive(Debug, Clone)]
pub struct InboxConfig {
    /// Where roster's state lives, and so the audit trail: `audit.jsonl` (with `audit.jsonl.1`
    /// and `inbox.lock`) in a state dir (made if missing); the log replicas share (`[store]`),
    /// where every replica's inbox shows the same entries and read state; or nothing kept
    /// beyond the inbox (in memory).
    pub stores: Stores,
    /// Entries kept in the ring (and replayed on open); at least 1.
    pub capacity: usize,
    /// Size at which `audit.jsonl` is rotated to `audit.jsonl.1`.
    pub rotate_bytes: u64,
    /// When appends are fsynced.
    pub fsync: FsyncPolicy,
    /// Client identities (besides the local default) whose read state is kept; an ack by one
    /// more is refused with [`InboxError::TooManyIdentities`].
    pub max_identities: usize,
    /// With shared `stores`: how many records its log holds before it is cut (a checkpoint, then what
    /// follows); the default is [`default_retain`] of the capacity.
    pub retain: usize,
}

impl InboxConfig {
    /// The defaults (capacity 1000, rotation at 10 MiB, fsync every second), kept in `stores`.
    pub fn new(stores: Stores) -> Self {
        InboxConfig {
            stores,
            capacity: DEFAULT_CAPACITY,
            rotate_bytes: DEFAULT_ROTATE_BYTES,
            fsync: FsyncPolicy::default(),
            max_identities: DEFAULT_MAX_IDENTITIES,
            retain: default_retain(DEFAULT_CAPACITY),
        }
    }
}

/// What can go wrong opening or reading the inbox, or deciding a confirm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// No pending confirm has this id.
    #[error("no pending confirm has id {id}; `roster inbox pending` lists the open ones")]
    UnknownConfirm {
        /// The id asked for.
        id: ConfirmId,
    },
    /// The confirm was already decided (or expired) and the server has that answer.
    #[error("confirm {id} was already decided: {decision}")]
    ConfirmDecided {
        /// The confirm.
        id: ConfirmId,
        /// The answer the server got.
        decision: ConfirmDecision,
    },
    /// Read state is already kept for as many client identities as allowed.
    #[error(
        "the inbox keeps read state for at most {max} client identities (max_identities) and \
         {who:?} would be one more; raise the limit or remove unused [[clients]]"
    )]
    TooManyIdentities {
        /// The identity that acknowledged.
        who: String,
        /// The bound.
        max: usize,
    },
    /// `roster inbox export` could not write.
    #[error("cannot export the audit trail: {0}")]
    Export(String),
    /// The trail could not be opened or read (the state dir's files, or the shared store);
    /// [`StoreError::Busy`](crate::store::StoreError::Busy) while another process owns it.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The decision was recorded, but the server that asked had stopped waiting for it.
    #[error(
        "confirm {id} was recorded as {decision}, but the server that asked is no longer waiting"
    )]
    ConfirmAbandoned {
        /// The confirm.
        id: ConfirmId,
        /// The decision recorded.
        decision: ConfirmDecision,
    },
}

/// What [`Inbox::clear`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClearReport {
    /// Entries removed from the ring.
    pub cleared: usize,
    /// Pending confirms answered `Declined` by the clear.
    pub declined_confirms: usize,
    /// With `all`: what could not be removed from disk. The ring is empty either way and later
    /// appends still land; and because the purge is recorded, a replay still drops the purged
    /// entries if the purge record itself could be written.
    pub partial_warning: Option<String>,
}

/// Told when another replica recorded a `*/list_changed` of a server: `(server, method)`.
pub type RemoteChangeHook = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// The inbox of one state directory. Share it behind an `Arc`; every method takes `&self`.
pub struct Inbox {
    shared: Arc<Shared>,
    housekeeper: Option<JoinHandle<()>>,
    stores: Stores,
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox")
            .field("stores", &self.stores)
            .finish_non_exhaustive()
    }
}

impl Inbox {
    /// Opens the inbox kept in `config.stores`, replays its audit trail, and answers `Expired`
    /// on the trail for confirms a previous process left pending (nobody waits for them any
    /// more). Replicas share their log: no process owns it, and a confirm another replica
    /// waits on is not an orphan (one nobody waits on expires at its deadline).
    pub fn open(config: InboxConfig) -> Result<Inbox, InboxError> {
        let opened = config.stores.inbox_trail(&TrailOptions {
            rotate_bytes: config.rotate_bytes,
            fsync: config.fsync,
            retain: config.retain,
        })?;
        let mut view = View::new(config.capacity, config.max_identities);
        opened.records.into_iter().for_each(|r| view.apply(r));
        view.settle();
        let mut inner = Inner {
            view,
            attribution: Attribution::default(),
            trail: opened.trail,
            waiters: HashMap::new(),
            remote_change: None,
        };
        if !inner.shared() {
            let orphans: Vec<Seq> = inner.view.pending.keys().copied().collect();
            for seq in orphans {
                inner.decide(
                    seq,
                    ConfirmDecision::Expired,
                    "roster restarted before anyone decided",
                );
            }
        }
        let tick = housekeeping::tick(inner.trail.interval());
        let shared = Arc::new(Shared {
            inner: Mutex::new(inner),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let housekeeper = housekeeping::start(&shared, tick);
        Ok(Inbox {
            shared,
            housekeeper,
            stores: config.stores,
        })
    }

    /// Whether this inbox is shared by replicas (`[store]`).
    pub fn is_shared(&self) -> bool {
        self.shared.lock().shared()
    }

    /// Calls `hook` whenever another replica recorded a server's `*/list_changed` (a shared
    /// inbox only): its own copy of that server may have changed too.
    pub fn on_remote_change(&self, hook: RemoteChangeHook) {
        self.shared.lock().remote_change = Some(hook);
    }

    /// Cuts a shared log that holds more than `retain` records now (the housekeeper does it
    /// every minute).
    pub fn compact(&self) {
        self.shared.lock().compact_if_needed();
    }

    /// Applies what other replicas appended, now (the store's listener calls this on every
    /// `NOTIFY`, so a decision made elsewhere reaches the request waiting here). With the
    /// `NOTIFY`'s position, nothing is read when this replica has applied it already (its own
    /// appends, mostly).
    pub fn catch_up(&self, position: Option<i64>) {
        let mut inner = self.shared.lock();
        if let (Some(position), Some(applied)) = (position, inner.trail.applied())
            && applied >= position
        {
            return;
        }
        inner.catch_up();
    }

    /// Where its trail is kept.
    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    /// Where the gateway says which client identities have requests in flight at a server, so
    /// that what the server sends meanwhile is recorded as theirs.
    pub fn attribution(&self) -> Attribution {
        self.shared.lock().attribution.clone()
    }

    /// Keeps a notification from `channel`. `handled` says roster consumed it itself (it then
    /// never counts as unread). It belongs to the identities with a request in flight at
    /// `channel` (see the module docs). Returns its seq.
    pub fn record(&self, channel: &str, method: &str, params: Value, handled: bool) -> Seq {
        let mut inner = self.shared.lock();
        let owners = if method.ends_with("/list_changed") {
            Vec::new()
        } else {
            inner.attribution.owners(channel)
        };
        let recorded = RecordedEntry {
            // Given by `commit`.
            seq: 0,
            at: now_rfc3339(),
            channel: channel.to_owned(),
            method: method.to_owned(),
            params,
            state: if handled {
                RecordedState::Handled
            } else {
                RecordedState::Unread
            },
            owners,
        };
        inner.commit(AuditRecord::Entry(recorded))
    }

    /// The most recent entries the local default identity sees, newest first, optionally of
    /// one channel only. Never includes confirms.
    pub fn list(&self, channel: Option<&str>, limit: usize) -> Vec<Entry> {
        self.list_for(LOCAL_IDENTITY, channel, limit)
    }

    /// The most recent entries client identity `who` sees (its own and everyone's), newest
    /// first, with read state as `who` acknowledged them.
    pub fn list_for(&self, who: &str, channel: Option<&str>, limit: usize) -> Vec<Entry> {
        self.shared.fresh().view.list(who, channel, limit)
    }

    /// Entries the local default identity has not acknowledged, oldest first. Handled entries
    /// are never here.
    pub fn unread(&self) -> Vec<Entry> {
        self.unread_for(LOCAL_IDENTITY)
    }

    /// Entries client identity `who` sees and has not acknowledged, oldest first.
    pub fn unread_for(&self, who: &str) -> Vec<Entry> {
        self.shared.fresh().view.unread(who)
    }

    /// How many entries the local default identity has unread.
    pub fn unread_count(&self) -> usize {
        self.shared.fresh().view.unread_count(LOCAL_IDENTITY)
    }

    /// How many entries the ring holds now (at most its capacity).
    pub fn entry_count(&self) -> usize {
        self.shared.fresh().view.ring.len()
    }

    /// The highest seq given out so far (0 before the first).
    pub fn last_seq(&self) -> Seq {
        self.shared.fresh().view.last_seq()
    }

    /// Marks everything up to `up_to` (or everything so far, with `None`) as read for the local
    /// default identity; returns how many unread entries that changed. A seq beyond the last
    /// one acknowledges up to the last one only, never notifications yet to come.
    pub fn ack(&self, up_to: Option<Seq>) -> usize {
        // The local default's read state always has a place: the bound counts the others.
        self.ack_for(LOCAL_IDENTITY, up_to).unwrap_or(0)
    }

    /// [`ack`](Self::ack) for client identity `who`: marks read for `who` only. Refused with
    /// [`InboxError::TooManyIdentities`] when `who` would be one identity beyond
    /// [`InboxConfig::max_identities`].
    pub fn ack_for(&self, who: &str, up_to: Option<Seq>) -> Result<usize, InboxError> {
        let mut inner = self.shared.fresh();
        let last = inner.view.last_seq();
        let target = up_to.map_or(last, |seq| seq.min(last));
        if target <= inner.view.acked_for(who) {
            return Ok(0);
        }
        let changed = inner.view.ack(who, target)?;
        inner.commit(AuditRecord::Ack {
            at: now_rfc3339(),
            up_to: target,
            who: Some(who.to_owned()),
        });
        Ok(changed)
    }

    /// Empties the ring, acknowledges everything and declines pending confirms. The audit trail
    /// stays on disk, so a restart replays it (as read). With `all`, the trail is purged too:
    /// the active file is truncated through the open append handle and the backup removed, and
    /// a purge record keeps a replay from bringing anything back. What fails on disk comes back
    /// as [`ClearReport::partial_warning`]; the in-memory drain always happens and later appends
    /// still land.
    pub fn clear(&self, all: bool) -> ClearReport {
        let mut inner = self.shared.fresh();
        let cleared = inner.view.ring.len();
        inner.view.ring.clear();
        inner.view.decided.clear();
        let pending: Vec<Seq> = inner.view.pending.keys().copied().collect();
        for &seq in &pending {
            inner.decide(seq, ConfirmDecision::Declined, "the inbox was cleared");
        }
        inner.view.decided.clear();
        let last = inner.view.last_seq();
        let newly_acked = last > inner.view.acked_through;
        inner.view.acked_through = inner.view.acked_through.max(last);
        let mut partial_warning = None;
        if all && inner.shared() {
            // Every replica applies the checkpoint (purged through here); the log before it
            // goes. Appends by others meanwhile make it try again.
            let mut done = false;
            for _ in 0..3 {
                match inner.compact(|view| {
                    view.purge_through(view.last_seq());
                    view.acked_through = view.acked_through.max(view.last_seq());
                    vec![view.checkpoint()]
                }) {
                    Ok(true) => {
                        done = true;
                        break;
                    }
                    Ok(false) => {}
                    Err(error) => {
                        partial_warning = Some(format!(
                            "the inbox is empty here, but the shared log was not purged: {error}"
                        ));
                        break;
                    }
                }
            }
            if !done && partial_warning.is_none() {
                partial_warning = Some(
                    "the inbox is empty here, but other replicas kept appending and the shared \
                     log was not purged; try again"
                        .to_owned(),
                );
            }
        } else if all {
            inner.view.purged_through = last;
            let checkpoint = inner.view.checkpoint();
            let problems = inner.trail.purge(&checkpoint);
            if !problems.is_empty() {
                partial_warning = Some(format!(
                    "the inbox is empty, but the audit trail on disk was not fully purged: {}",
                    problems.join("; ")
                ));
            }
        } else if newly_acked {
            inner.commit(AuditRecord::Ack {
                at: now_rfc3339(),
                up_to: last,
                who: None,
            });
        }
        ClearReport {
            cleared,
            declined_confirms: pending.len(),
            partial_warning,
        }
    }

    /// fsyncs the audit trail now, whatever the policy.
    pub fn sync(&self) {
        self.shared.lock().trail.sync();
    }

    /// The last disk error, while writes to the audit trail are failing.
    pub fn audit_error(&self) -> Option<String> {
        self.shared.lock().trail.failing().map(str::to_owned)
    }
}

#[cfg(test)]
mod tests;
