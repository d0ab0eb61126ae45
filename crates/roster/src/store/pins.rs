//! Tool pins: the approved definition of every tool ([`PinRecord`]) and the definitions
//! waiting for a person ([`ReviewRecord`]), keyed by server and the server's own tool name.
//!
//! The gateway reads the whole store into a [`PinBook`] and writes through
//! [`PinStore::apply`]; a person decides from elsewhere (`roster tools approve`/`reject`, the
//! dashboard, another replica), and the gateway notices by [`PinStore::data_version`] and
//! reloads. Where pins are kept is the seam's choice ([`super::Stores::pins`]): the state
//! directory's SQLite file (`embedded/pins.rs`) or the database replicas share
//! (`postgres/pins.rs`), each behind [`Pins`].

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use roster_core::pin::{Pin, Review};

use super::StoreError;

/// Who made a definition the pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecidedBy {
    /// The first definition roster saw (trust on first use).
    FirstUse,
    /// A person, with `roster tools approve`.
    Person,
}

impl DecidedBy {
    /// As stored and shown: `first use` or `person`.
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::FirstUse => "first use",
            DecidedBy::Person => "person",
        }
    }

    fn parse(text: &str) -> DecidedBy {
        if text == "person" {
            DecidedBy::Person
        } else {
            DecidedBy::FirstUse
        }
    }
}

/// A tool's pin as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct PinRecord {
    /// The approved definition.
    pub pin: Pin,
    /// Who approved it.
    pub decided_by: DecidedBy,
    /// When, in milliseconds since the Unix epoch.
    pub decided_at_ms: u64,
}

/// A definition that is not the pin, waiting for a person (or flagged for one).
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewRecord {
    /// The definition and whether a person rejected it.
    pub review: Review,
    /// Whether the gateway withholds it (else it is served and only flagged).
    pub withheld: bool,
    /// When roster last listed this definition, in milliseconds since the Unix epoch.
    pub seen_at_ms: u64,
}

/// One server's pins and reviews, by the server's own tool name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerPins {
    /// Approved definitions.
    pub pins: HashMap<String, PinRecord>,
    /// Definitions waiting for a person.
    pub reviews: HashMap<String, ReviewRecord>,
}

/// Everything in the store, by server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PinBook {
    /// Per server name.
    pub servers: HashMap<String, ServerPins>,
}

/// A stored row that does not read back: what it is, and why.
pub(super) type Unreadable = (String, serde_json::Error);

impl PinBook {
    /// Adds a stored pin row (both stores read the same columns).
    pub(super) fn add_pin(
        &mut self,
        server: String,
        tool: String,
        definition: &str,
        decided_by: &str,
        at_ms: i64,
    ) -> Result<(), Unreadable> {
        let pin: Pin = serde_json::from_str(definition)
            .map_err(|e| (format!("the pin of {server}/{tool}"), e))?;
        self.servers.entry(server).or_default().pins.insert(
            tool,
            PinRecord {
                pin,
                decided_by: DecidedBy::parse(decided_by),
                decided_at_ms: at_ms.max(0) as u64,
            },
        );
        Ok(())
    }

    /// Adds a stored review row.
    pub(super) fn add_review(
        &mut self,
        server: String,
        tool: String,
        definition: &str,
        withheld: bool,
        rejected: bool,
        seen_ms: i64,
    ) -> Result<(), Unreadable> {
        let definition: Pin = serde_json::from_str(definition)
            .map_err(|e| (format!("the waiting definition of {server}/{tool}"), e))?;
        self.servers.entry(server).or_default().reviews.insert(
            tool,
            ReviewRecord {
                review: Review {
                    definition,
                    rejected,
                },
                withheld,
                seen_at_ms: seen_ms.max(0) as u64,
            },
        );
        Ok(())
    }

    /// `server`'s pins and reviews, if it has any.
    pub fn server(&self, server: &str) -> Option<&ServerPins> {
        self.servers.get(server)
    }

    /// Servers whose pins or reviews differ between `self` and `other`.
    pub fn changed_servers(&self, other: &PinBook) -> Vec<String> {
        let empty = ServerPins::default();
        let mut names: Vec<String> = self
            .servers
            .keys()
            .chain(other.servers.keys())
            .filter(|name| {
                self.servers.get(*name).unwrap_or(&empty)
                    != other.servers.get(*name).unwrap_or(&empty)
            })
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// Makes this book what [`PinStore::apply`] with the same writes makes the store (without
    /// reading it back): the gateway's copy follows its own writes.
    pub fn apply(&mut self, server: &str, writes: &[PinWrite], now_ms: u64) {
        let entry = self.servers.entry(server.to_owned()).or_default();
        for write in writes {
            match write {
                PinWrite::FirstUse { tool, pin } => {
                    entry.pins.entry(tool.clone()).or_insert_with(|| PinRecord {
                        pin: pin.clone(),
                        decided_by: DecidedBy::FirstUse,
                        decided_at_ms: now_ms,
                    });
                }
                PinWrite::Review {
                    tool,
                    definition,
                    withheld,
                } => {
                    let rejected = entry.reviews.get(tool).is_some_and(|r| {
                        r.review.rejected
                            && r.review.definition.canonical_json() == definition.canonical_json()
                    });
                    entry.reviews.insert(
                        tool.clone(),
                        ReviewRecord {
                            review: Review {
                                definition: definition.clone(),
                                rejected,
                            },
                            withheld: *withheld,
                            seen_at_ms: now_ms,
                        },
                    );
                }
                PinWrite::Complete { tool, held, whole } => {
                    if let Some(record) = entry.pins.get_mut(tool)
                        && record.pin == **held
                    {
                        record.pin = Pin::clone(whole);
                    }
                }
                PinWrite::Settled { tool } => {
                    entry.reviews.remove(tool);
                }
            }
        }
        if entry.pins.is_empty() && entry.reviews.is_empty() {
            self.servers.remove(server);
        }
    }

    /// Every review, ordered by server and tool, with the pin it differs from.
    pub fn reviews(&self) -> Vec<ReviewEntry<'_>> {
        let mut all: Vec<ReviewEntry<'_>> = self
            .servers
            .iter()
            .flat_map(|(server, pins)| {
                pins.reviews.iter().map(move |(tool, review)| ReviewEntry {
                    server,
                    tool,
                    review,
                    pin: pins.pins.get(tool),
                })
            })
            .collect();
        all.sort_by(|a, b| (a.server, a.tool).cmp(&(b.server, b.tool)));
        all
    }
}

/// One review with its keys and the pin it differs from (none for a tool never pinned).
#[derive(Debug, Clone, Copy)]
pub struct ReviewEntry<'a> {
    /// The server.
    pub server: &'a str,
    /// The server's own tool name.
    pub tool: &'a str,
    /// The listed definition waiting for a person.
    pub review: &'a ReviewRecord,
    /// The approved definition, if any.
    pub pin: Option<&'a PinRecord>,
}

/// A change the gateway makes to one server's entries after a listing.
#[derive(Debug, Clone, PartialEq)]
pub enum PinWrite {
    /// Pin this definition of a tool never pinned (first use).
    FirstUse {
        /// The server's own tool name.
        tool: String,
        /// The definition.
        pin: Pin,
    },
    /// Keep this definition for a person; a rejection stands while the definition is the same.
    Review {
        /// The server's own tool name.
        tool: String,
        /// The listed definition.
        definition: Pin,
        /// Whether it is withheld.
        withheld: bool,
    },
    /// The pin of a tool, stored before roster pinned every part of a definition, becomes the
    /// whole listed definition (its held parts are as approved); unless a person decided on it
    /// since it was read.
    Complete {
        /// The server's own tool name.
        tool: String,
        /// The pin as it was read.
        held: Box<Pin>,
        /// The whole definition.
        whole: Box<Pin>,
    },
    /// Nothing waits for this tool any more (it is its pin again, or no longer listed).
    Settled {
        /// The server's own tool name.
        tool: String,
    },
}

/// What a person decided with [`PinStore::decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The waiting definition becomes the pin.
    Approve,
    /// The waiting definition stays withheld until the server lists a different one.
    Reject,
}

/// One backend's pins: what [`PinStore`] asks of the place they are kept.
pub(crate) trait Pins: Send + std::fmt::Debug {
    /// Changes whenever another connection (another process, another replica) committed.
    fn data_version(&mut self) -> Result<i64, StoreError>;

    /// Everything kept.
    fn load(&self) -> Result<PinBook, StoreError>;

    /// Writes what one listing of `server` changed (never empty), in one transaction.
    fn apply_at(
        &mut self,
        server: &str,
        writes: &[PinWrite],
        now_ms: u64,
    ) -> Result<(), StoreError>;

    /// A person's decision on the waiting definitions of `keys`, in one transaction; returns
    /// the keys that had one.
    fn decide(
        &mut self,
        decision: Decision,
        keys: &[(String, String)],
    ) -> Result<Vec<(String, String)>, StoreError>;
}

/// The pins and reviews, wherever [`super::Stores`] keeps them.
#[derive(Debug)]
pub struct PinStore {
    pins: Box<dyn Pins>,
}

/// Milliseconds since the Unix epoch, as the store keeps times.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl PinStore {
    /// The pins `pins` keeps.
    pub(crate) fn new(pins: impl Pins + 'static) -> PinStore {
        PinStore {
            pins: Box::new(pins),
        }
    }

    /// Changes whenever another connection (another process, another replica) committed to
    /// the store.
    pub fn data_version(&mut self) -> Result<i64, StoreError> {
        self.pins.data_version()
    }

    /// Everything in the store.
    pub fn load(&self) -> Result<PinBook, StoreError> {
        self.pins.load()
    }

    /// Writes what one listing of `server` changed, in one transaction.
    pub fn apply(&mut self, server: &str, writes: &[PinWrite]) -> Result<(), StoreError> {
        self.apply_at(server, writes, now_ms())
    }

    /// [`PinStore::apply`] with the time to record.
    pub fn apply_at(
        &mut self,
        server: &str,
        writes: &[PinWrite],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        self.pins.apply_at(server, writes, now_ms)
    }

    /// A person's decision on the waiting definitions of `keys` (server, tool), in one
    /// transaction. Returns the keys that had a waiting definition; the others are left alone.
    pub fn decide(
        &mut self,
        decision: Decision,
        keys: &[(String, String)],
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.pins.decide(decision, keys)
    }
}
