//! The OAuth tokens in the state dir: one SQLite file, `oauth/tokens.sqlite3`, one row per
//! server.
//!
//! Tokens are secrets: the file lives in its own directory under the state dir, the directory
//! made owner-only (0700) and the file created owner-only (0600) before SQLite opens it; SQLite
//! gives its journal the database file's mode. The file is opened at the first use, not when
//! the seam is made: a gateway without OAuth servers makes no token file.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, params};

use crate::store::StoreError;
use crate::store::tokens::{TokenRecord, Tokens, now_stamp};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS oauth_token (
    server      TEXT PRIMARY KEY NOT NULL,
    url         TEXT NOT NULL,
    credentials TEXT NOT NULL,
    updated_ms  INTEGER NOT NULL,
    step_up     TEXT
) WITHOUT ROWID;
";

/// The OAuth tokens of every server, in one SQLite file (or in memory).
#[derive(Debug)]
pub(crate) struct SqliteTokens {
    /// The file; `None`: in memory.
    path: Option<PathBuf>,
    /// The connection with its name for messages, once opened.
    conn: Mutex<Option<(Connection, String)>>,
}

impl SqliteTokens {
    /// The store at `path`, opened (created owner-only if needed) at its first use.
    pub(crate) fn at(path: PathBuf) -> Self {
        SqliteTokens {
            path: Some(path),
            conn: Mutex::new(None),
        }
    }

    /// A store that lives as long as this value.
    pub(crate) fn in_memory() -> Self {
        SqliteTokens {
            path: None,
            conn: Mutex::new(None),
        }
    }

    /// Runs `f` on the connection, opening it first if this is its first use (an open that
    /// fails is tried again at the next use).
    fn with<R>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, rusqlite::Error>,
    ) -> Result<R, StoreError> {
        let mut conn: MutexGuard<'_, _> = crate::sync::lock(&self.conn);
        if conn.is_none() {
            if let Some(path) = &self.path {
                owner_only_dir(path)?;
            }
            *conn = Some(crate::store::open_sqlite(self.path.as_deref(), SCHEMA)?);
        }
        let (conn, name) = conn.as_ref().expect("just opened");
        f(conn).map_err(|source| StoreError::Sqlite {
            path: name.clone(),
            source,
        })
    }
}

impl Tokens for SqliteTokens {
    fn load(&self, server: &str) -> Result<Option<TokenRecord>, StoreError> {
        self.with(|conn| {
            conn.query_row(
                "SELECT url, credentials, updated_ms FROM oauth_token WHERE server = ?1",
                [server],
                |row| {
                    Ok(TokenRecord {
                        url: row.get(0)?,
                        credentials: row.get(1)?,
                        updated_ms: row.get(2)?,
                    })
                },
            )
            .optional()
        })
    }

    fn save(&self, server: &str, url: &str, credentials: &str) -> Result<i64, StoreError> {
        self.with(|conn| {
            let previous: Option<i64> = conn
                .query_row(
                    "SELECT updated_ms FROM oauth_token WHERE server = ?1",
                    [server],
                    |row| row.get(0),
                )
                .optional()?;
            // Strictly increasing per server, so a waiter comparing stamps sees every write.
            let now = now_stamp().max(previous.map_or(0, |p| p + 1));
            conn.execute(
                "INSERT INTO oauth_token (server, url, credentials, updated_ms)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(server) DO UPDATE SET url = excluded.url,
                     credentials = excluded.credentials, updated_ms = excluded.updated_ms",
                params![server, url, credentials, now],
            )?;
            Ok(now)
        })
    }

    fn set_step_up(&self, server: &str, challenge: &str) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE oauth_token SET step_up = ?2 WHERE server = ?1",
                params![server, challenge],
            )
            .map(drop)
        })
    }

    fn step_up(&self, server: &str) -> Result<Option<String>, StoreError> {
        self.with(|conn| {
            conn.query_row(
                "SELECT step_up FROM oauth_token WHERE server = ?1",
                [server],
                |row| row.get(0),
            )
            .optional()
            .map(Option::flatten)
        })
    }

    fn clear_step_up(&self, server: &str) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE oauth_token SET step_up = NULL WHERE server = ?1",
                [server],
            )
            .map(drop)
        })
    }

    fn clear(&self, server: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM oauth_token WHERE server = ?1", [server])
                .map(|n| n > 0)
        })
    }

    fn stamp(&self, server: &str) -> Result<Option<i64>, StoreError> {
        self.with(|conn| {
            conn.query_row(
                "SELECT updated_ms FROM oauth_token WHERE server = ?1",
                [server],
                |row| row.get(0),
            )
            .optional()
        })
    }
}

/// Makes `path`'s directory owner-only, creating it if needed (the directory is roster's own).
fn owner_only_dir(path: &Path) -> Result<(), StoreError> {
    let state_dir = |source| StoreError::StateDir {
        path: path.parent().unwrap_or(path).to_owned(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // A state dir made here is owner-only too, as roster makes every state dir.
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(dir).map_err(state_dir)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(state_dir)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_file_and_its_directory_are_owner_only_and_made_at_the_first_use() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = crate::store::tokens_path(dir.path());
        let store = SqliteTokens::at(path.clone());
        assert!(!path.exists(), "nothing is made before the first use");
        store.save("a", "http://a/mcp", "{}").expect("save");
        let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().expect("parent")), 0o700);
    }
}
