//! [`Stores`]: the seam between roster and the state it keeps. Made once — from `[store]` when
//! replicas share a PostgreSQL database, else from the state dir — by whoever starts roster
//! (`roster serve`, each CLI command, an embedder), then passed down: nothing below opens
//! stored state on its own.
//!
//! One trait per concern, one folder per backend ([`super::embedded`], [`super::postgres`]); a
//! new backend is a folder and an arm of [`Stores::open`]. Behind the seam so far: the OAuth
//! [`Tokens`]. Pins, the inbox trail, sessions, tasks and the skill catalog still take the
//! shared connection from [`Stores::shared`] or the state dir from [`Stores::state_dir`], and
//! move behind traits of their own next.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::StoreError;
use super::embedded::SqliteTokens;
use super::postgres::{Pg, PgTokens};
use super::tokens::{Tokens, tokens_path};
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

    /// The shared database, when these are `[store]`'s: for the concerns not behind a trait
    /// of the seam yet.
    pub fn shared(&self) -> Option<&Pg> {
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
