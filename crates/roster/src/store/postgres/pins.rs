//! Tool pins in the store replicas share (`[store]`): the same tables as the SQLite store's,
//! in PostgreSQL. A write bumps every replica's [`PgPins::data_version`] through a `NOTIFY`
//! on [`CHANNEL`], so a person's decision on any machine is picked up at each replica's next
//! turn without a query per turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::Pg;
use crate::store::StoreError;
use crate::store::pins::{DecidedBy, Decision, PinBook, PinWrite, Pins, now_ms};

/// The `NOTIFY` channel of pin writes.
pub const CHANNEL: &str = "roster_pins";

/// The pins replicas share.
#[derive(Debug)]
pub(crate) struct PgPins {
    pg: Pg,
    /// Bumped by every write this replica hears of (its own included).
    version: Arc<AtomicI64>,
}

fn corrupt(pg: &Pg, what: String, error: serde_json::Error) -> StoreError {
    StoreError::Corrupt {
        store: pg.url().to_owned(),
        what: format!("{what}: {error}"),
    }
}

impl PgPins {
    /// The shared pins; with `follow`, a connection listens for every replica's writes.
    pub(crate) fn open(pg: &Pg, follow: bool) -> Result<Self, StoreError> {
        let version = Arc::new(AtomicI64::new(1));
        if follow {
            let bump = Arc::downgrade(&version);
            pg.listen(&[CHANNEL], move |_, _| {
                if let Some(version) = bump.upgrade() {
                    version.fetch_add(1, Ordering::SeqCst);
                }
            })?;
        }
        Ok(PgPins {
            pg: pg.clone(),
            version,
        })
    }
}

impl Pins for PgPins {
    fn data_version(&mut self) -> Result<i64, StoreError> {
        Ok(self.version.load(Ordering::SeqCst))
    }

    fn load(&self) -> Result<PinBook, StoreError> {
        let (pins, reviews) = self.pg.run(|client| {
            let pins = client.query(
                "SELECT server, tool, definition, decided_by, decided_at FROM roster_tool_pin",
                &[],
            )?;
            let reviews = client.query(
                "SELECT server, tool, definition, withheld, rejected, seen_at FROM roster_tool_review",
                &[],
            )?;
            Ok((pins, reviews))
        })?;
        let mut book = PinBook::default();
        let unreadable = |(what, e)| corrupt(&self.pg, what, e);
        for row in pins {
            book.add_pin(row.get(0), row.get(1), row.get(2), row.get(3), row.get(4))
                .map_err(unreadable)?;
        }
        for row in reviews {
            book.add_review(
                row.get(0),
                row.get(1),
                row.get(2),
                row.get(3),
                row.get(4),
                row.get(5),
            )
            .map_err(unreadable)?;
        }
        Ok(book)
    }

    fn apply_at(
        &mut self,
        server: &str,
        writes: &[PinWrite],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let now = now_ms as i64;
        let server = server.to_owned();
        let writes: Vec<PinWrite> = writes.to_vec();
        self.pg.run(move |client| {
            let mut tx = client.transaction()?;
            for write in &writes {
                match write {
                    // Another replica may have pinned it first: the first pin stands.
                    PinWrite::FirstUse { tool, pin } => tx.execute(
                        "INSERT INTO roster_tool_pin (server, tool, definition, decided_by, decided_at)
                         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (server, tool) DO NOTHING",
                        &[&server, tool, &pin.canonical_json(), &DecidedBy::FirstUse.as_str(), &now],
                    )?,
                    // A rejection stands only for the definition that was rejected.
                    PinWrite::Review {
                        tool,
                        definition,
                        withheld,
                    } => tx.execute(
                        "INSERT INTO roster_tool_review AS r
                            (server, tool, definition, withheld, rejected, seen_at)
                         VALUES ($1, $2, $3, $4, false, $5)
                         ON CONFLICT (server, tool) DO UPDATE SET
                           rejected = CASE WHEN r.definition = excluded.definition
                                           THEN r.rejected ELSE false END,
                           definition = excluded.definition,
                           withheld = excluded.withheld,
                           seen_at = excluded.seen_at",
                        &[&server, tool, &definition.canonical_json(), withheld, &now],
                    )?,
                    // Unless a person decided on it since it was read.
                    PinWrite::Complete { tool, held, whole } => tx.execute(
                        "UPDATE roster_tool_pin SET definition = $3
                         WHERE server = $1 AND tool = $2 AND definition = $4",
                        &[&server, tool, &whole.canonical_json(), &held.canonical_json()],
                    )?,
                    PinWrite::Settled { tool } => tx.execute(
                        "DELETE FROM roster_tool_review WHERE server = $1 AND tool = $2",
                        &[&server, tool],
                    )?,
                };
            }
            tx.execute("SELECT pg_notify($1, '')", &[&CHANNEL])?;
            tx.commit()
        })
    }

    fn decide(
        &mut self,
        decision: Decision,
        keys: &[(String, String)],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let now = now_ms() as i64;
        let keys = keys.to_vec();
        self.pg.run(move |client| {
            let mut tx = client.transaction()?;
            let mut decided = Vec::new();
            for (server, tool) in keys {
                let Some(row) = tx.query_opt(
                    "SELECT definition FROM roster_tool_review WHERE server = $1 AND tool = $2
                       FOR UPDATE",
                    &[&server, &tool],
                )?
                else {
                    continue;
                };
                let definition: String = row.get(0);
                match decision {
                    Decision::Approve => {
                        tx.execute(
                            "INSERT INTO roster_tool_pin (server, tool, definition, decided_by, decided_at)
                             VALUES ($1, $2, $3, $4, $5)
                             ON CONFLICT (server, tool) DO UPDATE SET definition = excluded.definition,
                               decided_by = excluded.decided_by, decided_at = excluded.decided_at",
                            &[&server, &tool, &definition, &DecidedBy::Person.as_str(), &now],
                        )?;
                        tx.execute(
                            "DELETE FROM roster_tool_review WHERE server = $1 AND tool = $2",
                            &[&server, &tool],
                        )?;
                    }
                    Decision::Reject => {
                        tx.execute(
                            "UPDATE roster_tool_review SET rejected = true, withheld = true
                              WHERE server = $1 AND tool = $2",
                            &[&server, &tool],
                        )?;
                    }
                }
                decided.push((server, tool));
            }
            tx.execute("SELECT pg_notify($1, '')", &[&CHANNEL])?;
            tx.commit()?;
            Ok(decided)
        })
    }
}
