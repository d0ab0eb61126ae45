//! The inbox's trail of several replicas: its audit records in one PostgreSQL table, in one
//! order.
//!
//! Every change is an [`AuditRecord`] appended to `roster_inbox_log` at the next position; each
//! replica applies the log to its own view of the inbox in position order, so all
//! replicas show the same inbox. An append takes the one row of `roster_inbox_head` (its
//! position, and the entry's seq for a notification or confirm) in the same statement that
//! inserts the record, so appends from several replicas are serialized by that row's lock and
//! committed in position order: a reader that has applied position `p` never later finds a
//! record below `p` (nothing is lost or applied twice). The seq lives in its own column, the
//! record's own `seq` is set from it when read.
//!
//! Reads catch up first (one query for the records past the last applied one), so a client
//! whose requests alternate between replicas reads its own acknowledgements. A `NOTIFY` on
//! [`CHANNEL`] after each append lets a replica catch up without waiting for a read: that is how
//! a decision made on one replica reaches the server request waiting on another.
//!
//! The log is bounded: past `retain` records ([`default_retain`]), [`SharedLog::compact`] writes the state a replay
//! needs (a checkpoint and the confirms still pending, as at the head of a rotated file) and
//! deletes what is before it.

use std::collections::VecDeque;

use super::Pg;
use crate::store::StoreError;
use crate::store::trail::{
    AuditRecord, Flushed, InboxTrail, OpenTrail, RecordedEntry, RecordedState, Seq, TrailOptions,
    now_rfc3339, set_seq, takes_seq,
};

/// The `NOTIFY` channel of inbox appends; the payload is the new position.
pub const CHANNEL: &str = "roster_inbox";

/// Records waiting for the store while it cannot be reached; past this the oldest is dropped.
const BACKLOG: usize = 1000;

/// The channel of the entry that says how many records the store lost ([`LOST_METHOD`]).
pub const LOST_CHANNEL: &str = "roster";

/// The method of that entry: written first when the store takes records again after the
/// backlog overflowed, where the lost records would have been; its params say how many
/// (`lost`) and since when (`since`).
pub const LOST_METHOD: &str = "roster/records_lost";

/// How many records the log keeps before [`SharedLog::compact`] cuts it, when the config does
/// not say: the ring's capacity many times over, so acknowledgements and decisions of the
/// entries shown are kept.
pub fn default_retain(capacity: usize) -> usize {
    capacity.saturating_mul(20).max(20_000)
}

/// The shared log as one replica sees it: the store, and how far this replica has applied it.
struct SharedLog {
    pg: Pg,
    /// The last position applied to this replica's view.
    applied: i64,
    /// Records not yet appended because the store could not be reached, in order.
    backlog: VecDeque<AuditRecord>,
    /// Records dropped from the full backlog since the store last took one, and when the
    /// first of them was: said in the log by a [`LOST_METHOD`] entry once it is back.
    lost: u64,
    lost_since: Option<String>,
    failing: Option<String>,
    retain: i64,
    /// Positions of records this replica appended and has not applied yet: what it applies
    /// from elsewhere is told apart from its own.
    own: std::collections::HashSet<i64>,
}

fn decode(pos: i64, seq: Option<i64>, text: &str) -> Option<AuditRecord> {
    match serde_json::from_str::<AuditRecord>(text) {
        Ok(mut record) => {
            if let Some(seq) = seq {
                set_seq(&mut record, seq as u64);
            }
            Some(record)
        }
        Err(error) => {
            tracing::warn!(pos, %error, "inbox: skipping an unreadable record in the shared log");
            None
        }
    }
}

impl SharedLog {
    /// The log from its start (what a replay applies), and this replica's place in it.
    fn open(pg: Pg, retain: usize) -> Result<(SharedLog, Vec<AuditRecord>), StoreError> {
        let mut log = SharedLog {
            pg,
            applied: 0,
            backlog: VecDeque::new(),
            lost: 0,
            lost_since: None,
            failing: None,
            retain: i64::try_from(retain).unwrap_or(i64::MAX),
            own: std::collections::HashSet::new(),
        };
        let records = log.since()?.into_iter().map(|(r, _)| r).collect();
        Ok((log, records))
    }

    /// The records past the last applied one, in order, each with whether another replica
    /// appended it; they count as applied.
    fn since(&mut self) -> Result<Vec<(AuditRecord, bool)>, StoreError> {
        let after = self.applied;
        let rows = self.pg.run(move |client| {
            client.query(
                "SELECT pos, seq, record FROM roster_inbox_log WHERE pos > $1 ORDER BY pos",
                &[&after],
            )
        })?;
        let mut records = Vec::with_capacity(rows.len());
        for row in rows {
            let pos: i64 = row.get(0);
            self.applied = self.applied.max(pos);
            let foreign = !self.own.remove(&pos);
            if let Some(record) = decode(pos, row.get(1), row.get(2)) {
                records.push((record, foreign));
            }
        }
        Ok(records)
    }

    /// Appends `record` (after any records still waiting for the store). A record the store
    /// cannot take now waits in the backlog and goes first at the next append or catch-up.
    fn append(&mut self, record: AuditRecord) -> Flushed {
        self.backlog.push_back(record);
        let flushed = self.flush();
        // Still failing: the oldest of what waits goes, past the bound.
        while self.backlog.len() > BACKLOG {
            self.backlog.pop_front();
            if self.lost == 0 {
                tracing::warn!(
                    max = BACKLOG,
                    "inbox: the store has been unreachable for {BACKLOG} records; dropping the \
                     oldest (an entry in the log will say how many, once it is back)"
                );
                self.lost_since = Some(now_rfc3339());
            }
            self.lost += 1;
        }
        flushed
    }

    /// The entry that says how many records were lost, and since when.
    fn lost_entry(&self) -> AuditRecord {
        let lost = self.lost;
        let since = self.lost_since.clone().unwrap_or_else(now_rfc3339);
        AuditRecord::Entry(RecordedEntry {
            seq: 0,
            at: now_rfc3339(),
            channel: LOST_CHANNEL.to_owned(),
            method: LOST_METHOD.to_owned(),
            params: serde_json::json!({
                "lost": lost,
                "since": since,
                "message": format!(
                    "the inbox's store was unreachable for longer than {BACKLOG} records could \
                     wait: the {lost} oldest of them, from {since} on, were lost"
                ),
            }),
            state: RecordedState::Unread,
            owners: Vec::new(),
        })
    }

    /// Appends what waits in the backlog, in order, until one fails.
    fn flush(&mut self) -> Flushed {
        let mut flushed = Flushed::default();
        while self.lost > 0 || !self.backlog.is_empty() {
            // What was lost is said first, where it would have been.
            let gap = (self.lost > 0).then(|| self.lost_entry());
            let Some(record) = gap.as_ref().or(self.backlog.front()) else {
                break;
            };
            let text = match serde_json::to_string(record) {
                Ok(text) => text,
                Err(error) => {
                    tracing::warn!(%error, "inbox: a record could not be encoded; dropped");
                    self.backlog.pop_front();
                    continue;
                }
            };
            let step = i64::from(takes_seq(record));
            let appended = self.pg.run(move |client| {
                client.query_one(
                    "WITH head AS (
                         UPDATE roster_inbox_head
                            SET next_pos = next_pos + 1, next_seq = next_seq + $2
                          WHERE id = 1
                      RETURNING next_pos - 1 AS pos, next_seq - $2 AS seq
                     ), added AS (
                         INSERT INTO roster_inbox_log (pos, seq, record)
                         SELECT pos, CASE WHEN $2 > 0 THEN seq END, $1 FROM head
                      RETURNING pos, seq
                     )
                     SELECT seq, pos, pg_notify($3, pos::text)::text FROM added",
                    &[&text, &step, &CHANNEL],
                )
            });
            match appended {
                Ok(row) => {
                    let seq = row.get::<_, Option<i64>>(0).map(|seq| seq as u64);
                    let pos: i64 = row.get(1);
                    flushed.seq = seq;
                    let taken = match gap {
                        Some(gap) => {
                            self.lost = 0;
                            self.lost_since = None;
                            Some(gap)
                        }
                        None => self.backlog.pop_front(),
                    };
                    let Some(mut record) = taken else {
                        break;
                    };
                    if !flushed.behind && pos == self.applied + 1 {
                        // Nobody appended since this replica's last record: it is applied
                        // here as it is, without reading it back.
                        self.applied = pos;
                        if let Some(seq) = seq {
                            set_seq(&mut record, seq);
                        }
                        flushed.ready.push(record);
                    } else {
                        // Read back with the others' at the catch-up, known as this replica's
                        // own (bounded: forgotten once applied).
                        flushed.behind = true;
                        if self.own.len() < BACKLOG {
                            self.own.insert(pos);
                        }
                    }
                    if self.failing.take().is_some() {
                        tracing::info!("inbox: the store takes records again");
                    }
                }
                Err(error) => {
                    if self.failing.is_none() {
                        tracing::warn!(%error, "inbox: cannot append to the store; records wait in memory");
                    }
                    self.failing = Some(error.to_string());
                    flushed.seq = None;
                    return flushed;
                }
            }
        }
        flushed
    }

    /// The last position applied to this replica's view.
    fn applied(&self) -> i64 {
        self.applied
    }

    /// The last store error while appends are failing.
    fn failing(&self) -> Option<&str> {
        self.failing.as_deref()
    }

    /// Whether the log holds more than it keeps; cheap (one query), for the housekeeper.
    fn needs_compaction(&self) -> bool {
        let retain = self.retain;
        self.pg
            .run(move |client| {
                let row = client.query_one(
                    "SELECT coalesce(max(pos) - min(pos), 0) > $1 FROM roster_inbox_log",
                    &[&retain],
                )?;
                Ok(row.get::<_, bool>(0))
            })
            .unwrap_or(false)
    }

    /// Cuts the log: with every append held off (the head row locked), `head` is written at
    /// the next positions (it must be the state after every record so far: the caller catches
    /// up inside `prepare`) and every record before it deleted. `prepare` gets the records
    /// this replica had not applied yet and returns the head to write.
    fn compact(
        &mut self,
        prepare: impl FnOnce(Vec<AuditRecord>) -> Vec<AuditRecord>,
    ) -> Result<bool, StoreError> {
        // The head row's lock is held for the whole transaction: read what is new, build the
        // head from it, write, cut.
        let after = self.applied;
        let (applied, missing) = self.pg.run(move |client| {
            let mut tx = client.transaction()?;
            tx.query_one(
                "SELECT next_pos FROM roster_inbox_head WHERE id = 1 FOR UPDATE",
                &[],
            )?;
            let rows = tx.query(
                "SELECT pos, seq, record FROM roster_inbox_log WHERE pos > $1 ORDER BY pos",
                &[&after],
            )?;
            tx.commit()?;
            Ok(rows
                .iter()
                .fold((after, Vec::new()), |(applied, mut records), row| {
                    let pos: i64 = row.get(0);
                    if let Some(record) = decode(pos, row.get(1), row.get(2)) {
                        records.push(record);
                    }
                    (applied.max(pos), records)
                }))
        })?;
        self.applied = applied;
        let head = prepare(missing);
        let texts: Vec<String> = head
            .iter()
            .filter_map(|r| serde_json::to_string(r).ok())
            .collect();
        let before = self.applied;
        let len = texts.len() as i64;
        let first = self.pg.run(move |client| {
            let mut tx = client.transaction()?;
            let next: i64 = tx
                .query_one(
                    "SELECT next_pos FROM roster_inbox_head WHERE id = 1 FOR UPDATE",
                    &[],
                )?
                .get(0);
            if next != before + 1 {
                // Someone appended between the catch-up and now: try again later.
                return Ok(None);
            }
            for (i, text) in texts.iter().enumerate() {
                tx.execute(
                    "INSERT INTO roster_inbox_log (pos, seq, record) VALUES ($1, NULL, $2)",
                    &[&(next + i as i64), text],
                )?;
            }
            tx.execute(
                "UPDATE roster_inbox_head SET next_pos = $1 WHERE id = 1",
                &[&(next + texts.len() as i64)],
            )?;
            tx.execute("DELETE FROM roster_inbox_log WHERE pos < $1", &[&next])?;
            tx.commit()?;
            Ok(Some(next))
        })?;
        let Some(first) = first else {
            return Ok(false);
        };
        tracing::info!(kept_from = first, "inbox: compacted the shared log");
        // What was written is this replica's own state: nothing to apply.
        self.applied = first + len - 1;
        Ok(true)
    }
}

/// Every record in the log, oldest first (`roster inbox export`, a read-only replay).
pub(crate) fn history(pg: &Pg) -> Result<Vec<AuditRecord>, StoreError> {
    let rows = pg.run(|client| {
        client.query(
            "SELECT pos, seq, record FROM roster_inbox_log ORDER BY pos",
            &[],
        )
    })?;
    Ok(rows
        .iter()
        .filter_map(|row| decode(row.get(0), row.get(1), row.get(2)))
        .collect())
}

/// Opens the shared log for one replica's inbox: every record from its start, to replay.
pub(crate) fn open(pg: &Pg, options: &TrailOptions) -> Result<OpenTrail, StoreError> {
    let (log, records) = SharedLog::open(pg.clone(), options.retain)?;
    Ok(OpenTrail {
        trail: Box::new(log),
        records,
    })
}

impl InboxTrail for SharedLog {
    fn shared(&self) -> bool {
        true
    }

    fn failing(&self) -> Option<&str> {
        SharedLog::failing(self)
    }

    fn append(
        &mut self,
        record: AuditRecord,
        _next_seq: Seq,
        _head: &dyn Fn() -> Vec<AuditRecord>,
    ) -> Flushed {
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
