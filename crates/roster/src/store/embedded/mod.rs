//! The embedded backend of the seam ([`super::Stores`]): files in the state dir, for one
//! gateway on one machine (and the CLI beside it). Each concern behind the seam has its file
//! here: [`tokens`] (an owner-only SQLite file).

mod tokens;

pub(crate) use tokens::SqliteTokens;
