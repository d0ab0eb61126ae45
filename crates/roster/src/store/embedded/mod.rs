//! The embedded backend of the seam ([`super::Stores`]): files in the state dir, for one
//! gateway on one machine (and the CLI beside it). Each concern behind the seam has its file
//! here: [`tokens`] (an owner-only SQLite file), [`pins`] (`roster.sqlite3`), the skill
//! [`catalog`], the inbox's [`trail`] (`audit.jsonl`).

mod catalog;
mod pins;
mod tokens;
pub(crate) mod trail;

pub use catalog::SqliteStore;
pub use pins::STORE_FILE;
pub(crate) use pins::SqlitePins;
pub(crate) use tokens::SqliteTokens;
pub use trail::{AUDIT_BACKUP_FILE, AUDIT_FILE, LOCK_FILE};
