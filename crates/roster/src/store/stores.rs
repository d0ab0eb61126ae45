//! [`Stores`]: the seam between roster and the state it keeps. Made once — from `[store]` when
//! replicas share a PostgreSQL database, else from the state dir — by whoever starts roster
//! (`roster serve`, each CLI command, an embedder), then passed down: nothing below opens
//! stored state on its own.
//!
//! One trait per concern, one folder per backend ([`super::embedded`], [`super::postgres`]); a
//! new backend is a folder and an arm of [`Stores::open`]. Behind the seam: the OAuth
//! [`Tokens`], the tool pins ([`PinStore`]), the sessions and tasks replicas share, and the
//! notices they send each other ([`Stores::follow`], [`Stores::tell`]), the inbox's trail
//! ([`Stores::inbox_trail`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::StoreError;
use super::embedded::{SqlitePins, SqliteTokens};
use super::pins::PinStore;
use super::postgres::sessions::SharedSessions;
use super::postgres::tasks::SharedTasks;
use super::postgres::{Pg, PgPins, PgTokens};
use super::tokens::{Tokens, tokens_path};
use super::trail::{AuditRecord, MemoryTrail, OpenTrail, TrailOptions};
use super::{embedded, postgres};
use crate::config::StoreConfig;

/// Where roster's state lives, one handle per concern. Cheap to clone; clones share
/// everything (one PostgreSQL connection thread, one token file's connection).
#[derive(Clone)]
pub struct Stores {
    backend: Backend,
    tokens: Arc<dyn Tokens>,
}

#[derive(Clone, Debug)]
enum Backend {
    /// Files in the state dir; `None`: in memory, for as long as this value lives.
    Embedded(Option<PathBuf>),
    /// The database replicas share.
    Postgres(Pg),
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// Where: `in DIR`, `at URL` or `in memory`, for messages.
impl std::fmt::Display for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.backend {
            Backend::Embedded(Some(dir)) => write!(f, "in {}", dir.display()),
            Backend::Embedded(None) => f.write_str("in memory"),
            Backend::Postgres(pg) => write!(f, "at {}", pg.url()),
        }
    }
}

impl Stores {
    /// The stores `[store]` names (connected now, its migrations run: a replica must not
    /// start without the state it shares, so an unreachable database is an error naming its
    /// URL), else the state dir's (opened at first use: nothing is made before).
    pub fn open(store: Option<&StoreConfig>, state_dir: &Path) -> Result<Stores, StoreError> {
        match store {
            Some(config) => Ok(Stores::postgres(Pg::connect(config)?)),
            None => Ok(Stores::embedded(state_dir)),
        }
    }

    /// The state dir's stores, opened at first use.
    pub fn embedded(state_dir: &Path) -> Stores {
        Stores {
            backend: Backend::Embedded(Some(state_dir.to_owned())),
            tokens: Arc::new(SqliteTokens::at(tokens_path(state_dir))),
        }
    }

    /// Stores that live as long as this value (and its clones): for tests and embedders that
    /// keep nothing.
    pub fn in_memory() -> Stores {
        Stores {
            backend: Backend::Embedded(None),
            tokens: Arc::new(SqliteTokens::in_memory()),
        }
    }

    /// The stores of a connected shared database.
    pub fn postgres(pg: Pg) -> Stores {
        Stores {
            tokens: Arc::new(PgTokens(pg.clone())),
            backend: Backend::Postgres(pg),
        }
    }

    /// The OAuth tokens roster holds as a client of its servers.
    pub fn tokens(&self) -> Arc<dyn Tokens> {
        self.tokens.clone()
    }

    /// The tool pins, for the roster that serves them: it follows what a person decides
    /// elsewhere (the CLI beside it, another replica) at its next turn. In the state dir the
    /// file is made now; in memory, each call gives a store of its own.
    pub fn pins(&self) -> Result<PinStore, StoreError> {
        match &self.backend {
            Backend::Embedded(Some(dir)) => SqlitePins::open(dir).map(PinStore::new),
            Backend::Embedded(None) => SqlitePins::in_memory().map(PinStore::new),
            Backend::Postgres(pg) => PgPins::open(pg, true).map(PinStore::new),
        }
    }

    /// The tool pins for one read or decision (`roster tools`, the dashboard); `None` where
    /// nothing was ever pinned (no file in the state dir yet) or pins live in one roster's
    /// memory.
    pub fn pins_existing(&self) -> Result<Option<PinStore>, StoreError> {
        match &self.backend {
            Backend::Embedded(Some(dir)) => Ok(SqlitePins::open_existing(dir)?.map(PinStore::new)),
            Backend::Embedded(None) => Ok(None),
            Backend::Postgres(pg) => PgPins::open(pg, false).map(|pins| Some(PinStore::new(pins))),
        }
    }

    /// The inbox's trail, opened for the one inbox that writes it, with what it holds (to
    /// replay): `audit.jsonl` in the state dir (made now; [`StoreError::Busy`] while another
    /// process owns it), the log replicas share (every replica writes it), or nothing kept
    /// beyond the inbox (in memory).
    pub(crate) fn inbox_trail(&self, options: &TrailOptions) -> Result<OpenTrail, StoreError> {
        match &self.backend {
            Backend::Embedded(Some(dir)) => embedded::trail::open(dir, options),
            Backend::Embedded(None) => Ok(OpenTrail {
                trail: Box::new(MemoryTrail),
                records: Vec::new(),
            }),
            Backend::Postgres(pg) => postgres::inbox::open(pg, options),
        }
    }

    /// Every record of the inbox's trail, oldest first, read without owning it (a running
    /// gateway may): `roster inbox export`, and the inbox as a read-only replay shows it.
    pub(crate) fn inbox_history(&self) -> Result<Vec<AuditRecord>, StoreError> {
        match &self.backend {
            Backend::Embedded(Some(dir)) => embedded::trail::history(dir),
            Backend::Embedded(None) => Ok(Vec::new()),
            Backend::Postgres(pg) => postgres::inbox::history(pg),
        }
    }

    /// Initialize-era HTTP sessions every replica serves, when these are the stores replicas
    /// share (else a session lives in the process that made it); they expire after `idle`.
    pub fn shared_sessions(&self, idle: std::time::Duration) -> Option<SharedSessions> {
        self.shared()
            .map(|pg| SharedSessions::new(pg.clone(), idle))
    }

    /// Tasks every replica answers for, when these are the stores replicas share (else a
    /// task lives in the process that runs it).
    pub fn shared_tasks(&self) -> Option<SharedTasks> {
        self.shared().map(|pg| SharedTasks::new(pg.clone()))
    }

    /// Calls `on(channel, payload)` for every notice another replica (or this one) sends on
    /// `channels` of the stores replicas share; nothing to follow in the state dir or memory.
    pub fn follow(
        &self,
        channels: &[&str],
        on: impl Fn(&str, &str) + Send + Sync + 'static,
    ) -> Result<(), StoreError> {
        match self.shared() {
            Some(pg) => pg.listen(channels, on),
            None => Ok(()),
        }
    }

    /// Sends `payload` on `channel` to every replica following it ([`Stores::follow`]);
    /// nothing to tell in the state dir or memory.
    pub async fn tell(&self, channel: &'static str, payload: String) -> Result<(), StoreError> {
        let Some(pg) = self.shared() else {
            return Ok(());
        };
        pg.run_async(move |client| {
            client
                .execute("SELECT pg_notify($1, $2)", &[&channel, &payload])
                .map(|_| ())
        })
        .await
    }

    /// Whether nothing is kept beyond these values ([`Stores::in_memory`]).
    pub fn is_in_memory(&self) -> bool {
        matches!(self.backend, Backend::Embedded(None))
    }

    /// Whether these are the stores replicas share (`[store]`): what they keep, every replica
    /// sees, and no one process owns it.
    pub fn is_shared(&self) -> bool {
        self.shared().is_some()
    }

    /// The shared database, when these are `[store]`'s.
    fn shared(&self) -> Option<&Pg> {
        match &self.backend {
            Backend::Postgres(pg) => Some(pg),
            Backend::Embedded(_) => None,
        }
    }

    /// The state dir, when these are a state dir's.
    pub fn state_dir(&self) -> Option<&Path> {
        match &self.backend {
            Backend::Embedded(dir) => dir.as_deref(),
            Backend::Postgres(_) => None,
        }
    }
}
