//! The OAuth tokens roster holds as a client of its servers: one record per server, behind
//! the [`Tokens`] trait of the seam ([`super::Stores::tokens`]).
//!
//! A record keeps what the OAuth client needs across runs as one JSON text (client id, tokens,
//! granted scopes, issuer: rmcp's `StoredCredentials`), the URL it was got for, and when it was
//! written. No backend reads the JSON. `updated_ms` is how a running gateway notices a
//! `roster auth login` made in another process (or on another replica): it increases strictly
//! with every write of a server's record. `step_up` holds the `WWW-Authenticate` of a 403
//! `insufficient_scope` until a login with the wider scope clears it.

use std::path::{Path, PathBuf};

use super::StoreError;

/// The embedded token store's path under the state dir.
pub const TOKENS_FILE: &str = "oauth/tokens.sqlite3";

/// The embedded token store of a state dir.
pub fn tokens_path(state_dir: &Path) -> PathBuf {
    state_dir.join(TOKENS_FILE)
}

/// One server's stored OAuth state.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// The server URL the tokens were got for.
    pub url: String,
    /// The OAuth client's credentials as JSON (tokens included).
    pub credentials: String,
    /// When it was written (milliseconds since the epoch).
    pub updated_ms: i64,
}

impl std::fmt::Debug for TokenRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenRecord")
            .field("url", &self.url)
            .field("credentials", &"[REDACTED]")
            .field("updated_ms", &self.updated_ms)
            .finish()
    }
}

/// The OAuth tokens of every server. Every method may block for one write or round trip
/// (a file, or the shared database), as a file write would.
pub trait Tokens: Send + Sync + std::fmt::Debug {
    /// The record of `server`, if one was saved.
    fn load(&self, server: &str) -> Result<Option<TokenRecord>, StoreError>;

    /// Saves `server`'s record, stamped now (and later than its previous stamp, whichever
    /// process wrote that); returns the stamp. A pending step-up stays: a refresh does not
    /// answer it.
    fn save(&self, server: &str, url: &str, credentials: &str) -> Result<i64, StoreError>;

    /// Records that `server` refused its token for too little scope (`challenge`: its
    /// `WWW-Authenticate`), until [`Tokens::clear_step_up`]. Nothing when `server` has no
    /// record.
    fn set_step_up(&self, server: &str, challenge: &str) -> Result<(), StoreError>;

    /// The challenge of a step-up `server` waits for, if any.
    fn step_up(&self, server: &str) -> Result<Option<String>, StoreError>;

    /// Forgets a pending step-up of `server` (a login with the wider scope happened).
    fn clear_step_up(&self, server: &str) -> Result<(), StoreError>;

    /// Forgets `server`'s record; `true` if there was one.
    fn clear(&self, server: &str) -> Result<bool, StoreError>;

    /// When `server`'s record was last written; `None`: no record.
    fn stamp(&self, server: &str) -> Result<Option<i64>, StoreError>;
}

/// Now in milliseconds since the epoch, as stamps count.
pub(super) fn now_stamp() -> i64 {
    i64::try_from(super::now_ms()).unwrap_or(i64::MAX)
}
