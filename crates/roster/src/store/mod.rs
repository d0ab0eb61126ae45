//! Catalog storage: skill directories indexed into a store the gateway loads its catalog from.
//!
//! The store holds each skill directory's `SKILL.md` text (and a hash of it), not a parsed
//! form, so what is served is always what the current parser makes of the files. The catalog is
//! read-only at run time: [`index_dir`] writes, [`load_catalog`] reads. The [`CatalogStore`]
//! trait is all the rest of roster sees, so a shared store (Postgres, for several gateway
//! replicas) can replace the embedded SQLite one.
//!
//! [`Stores`] is the seam: made once from `[store]` or the state dir and passed down, one trait
//! per concern (the OAuth [`Tokens`], the tool pins of [`PinStore`], the inbox's [`trail`]),
//! one folder per backend (`embedded/`, `postgres/`).

mod dir;
mod embedded;
pub(crate) mod owner_only;
mod pins;
pub mod postgres;
mod stores;
pub mod tls;
mod tokens;
pub(crate) mod trail;

use roster_core::catalog::Catalog;
use roster_core::skills::{InvalidSkill, SkillSource, load};

pub use dir::{
    DEFAULT_MAX_SKILL_FILE_SIZE, SkillDirScan, UnreadableSkill, read_skill_file, scan_skills_dir,
};
pub use embedded::SqliteStore;
pub use embedded::{AUDIT_BACKUP_FILE, AUDIT_FILE, LOCK_FILE, STORE_FILE};
pub use owner_only::ensure_state_dir;
pub use pins::{
    DecidedBy, Decision, PinBook, PinRecord, PinStore, PinWrite, ReviewEntry, ReviewRecord,
    ServerPins, now_ms,
};
pub use postgres::sessions::{self, SharedSessions};
pub use postgres::tasks::{self, SharedTasks, TaskOp};
pub use stores::Stores;
pub use tokens::{TOKENS_FILE, TokenRecord, Tokens, tokens_path};
pub use trail::{ConfirmDecision, DEFAULT_FSYNC_INTERVAL, FsyncPolicy, ParseFsyncPolicyError, Seq};

/// Where skill sources are kept between runs.
pub trait CatalogStore {
    /// Makes the stored set of sources equal to `sources` (by directory): new ones are added,
    /// changed ones replaced, vanished ones removed. All or nothing.
    fn replace_all(&mut self, sources: &[SkillSource]) -> Result<IndexStats, StoreError>;

    /// Every stored source, ordered by directory.
    fn sources(&self) -> Result<Vec<SkillSource>, StoreError>;
}

/// What one [`CatalogStore::replace_all`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Sources not stored before.
    pub added: usize,
    /// Sources whose text changed.
    pub updated: usize,
    /// Stored sources no longer present.
    pub removed: usize,
    /// Sources stored with the same text.
    pub unchanged: usize,
}

/// A storage failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The SQLite database could not be opened, read or written.
    #[error("database {path}: {source}")]
    Sqlite {
        /// The database path (`:memory:` for an in-memory one).
        path: String,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The PostgreSQL store could not be reached, or a statement failed.
    #[error("store {url}: {}", with_causes(source))]
    Postgres {
        /// `[store] url` (it holds no password).
        url: String,
        /// The PostgreSQL error.
        source: ::postgres::Error,
    },
    /// `[store] url`'s TLS parameters (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`) cannot
    /// be used.
    #[error("store {url}: {message}")]
    Tls {
        /// `[store] url`.
        url: String,
        /// What is wrong (names the parameter or the file).
        message: String,
    },
    /// `[store] password_env` names a variable that is not set.
    #[error("[store] password_env: the environment variable {var} is not set")]
    PasswordEnv {
        /// The variable.
        var: String,
    },
    /// A stored value could not be read back.
    #[error("store {store}: {what}")]
    Corrupt {
        /// The store (`[store] url`).
        store: String,
        /// What is unreadable, and why.
        what: String,
    },
    /// The store's own thread could not be started.
    #[error("cannot start the store's thread: {source}")]
    Thread {
        /// Why.
        source: std::io::Error,
    },
    /// The store's thread has stopped (it panicked); nothing more can be read or written.
    #[error("the store's connection thread has stopped")]
    Stopped,
    /// The skills directory could not be read.
    #[error("cannot read skills directory {path}: {source}")]
    Io {
        /// The directory.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A store's file could not be made owner-only (or created).
    #[error("cannot open {path} as a file only its owner may read: {source}")]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The inbox's audit trail could not be opened for appending.
    #[error("could not open the audit trail {path} for appending: {source}")]
    OpenTrail {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The inbox's audit trail exists but could not be read.
    #[error("could not read the audit trail {path}: {source}")]
    ReadTrail {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The inbox's lock file could not be opened or locked.
    #[error("could not lock {path}: {source}")]
    Lock {
        /// The lock file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another process (normally a running gateway) owns the inbox of this state directory.
    #[error(
        "another roster process owns the inbox in {dir} (a gateway is running with this state \
         directory); talk to it, or stop it first"
    )]
    Busy {
        /// The state directory.
        dir: std::path::PathBuf,
    },
    /// The state directory could not be made.
    #[error("cannot make the state directory {path}: {source}")]
    StateDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Opens the SQLite database at `path` (`None`: in memory) and runs `schema`; errors name the
/// path (`:memory:` for an in-memory one). Returns the connection and that name.
fn open_sqlite(
    path: Option<&std::path::Path>,
    schema: &str,
) -> Result<(rusqlite::Connection, String), StoreError> {
    let name = path.map_or_else(|| ":memory:".to_owned(), |p| p.display().to_string());
    let error = |source| StoreError::Sqlite {
        path: name.clone(),
        source,
    };
    if let Some(path) = path {
        owner_only::sqlite_file(path).map_err(|source| StoreError::File {
            path: path.to_owned(),
            source,
        })?;
    }
    let conn = match path {
        Some(path) => rusqlite::Connection::open(path),
        None => rusqlite::Connection::open_in_memory(),
    }
    .map_err(error)?;
    // A write waits this long for another process's transaction (`roster tools approve` while
    // the gateway pins a listing) before it fails.
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(error)?;
    if path.is_some() {
        // SQLite keeps up to 2 MiB of a file's pages by default; what roster reads from its
        // files it also holds itself (pins, the inbox's ring), and the system's page cache is
        // behind these 256 KiB.
        conn.pragma_update(None, "cache_size", -256)
            .map_err(error)?;
    }
    conn.execute_batch(schema).map_err(error)?;
    Ok((conn, name))
}

/// Scans `root` for skill directories and makes `store` hold exactly those. Files that could
/// not be read are returned in the scan, not stored.
pub fn index_dir(
    root: &std::path::Path,
    max_file_size: u64,
    store: &mut dyn CatalogStore,
) -> Result<(IndexStats, SkillDirScan), StoreError> {
    let scan = scan_skills_dir(root, max_file_size)?;
    let stats = store.replace_all(&scan.sources)?;
    Ok((stats, scan))
}

/// Builds the catalog from the stored sources. Sources that do not parse are returned with
/// their reasons; the others load.
pub fn load_catalog(store: &dyn CatalogStore) -> Result<(Catalog, Vec<InvalidSkill>), StoreError> {
    let mut report = load(store.sources()?);
    let invalid = std::mem::take(&mut report.invalid);
    Ok((Catalog::from_report(report), invalid))
}

/// `error` and what caused it, each once: the driver's own words name only the step that
/// failed ("error performing TLS handshake"), the cause says why (a certificate for another
/// name, an unknown issuer).
pub(crate) fn with_causes(error: &::postgres::Error) -> String {
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(e) = cause {
        let part = e.to_string();
        if !text.contains(&part) {
            text = format!("{text}: {part}");
        }
        cause = e.source();
    }
    text
}
