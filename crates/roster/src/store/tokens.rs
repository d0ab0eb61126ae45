//! OAuth tokens roster holds as a client of its servers, one row per server.
//!
//! The row keeps what the OAuth client needs across runs as one JSON text (client id, tokens,
//! granted scopes, issuer: rmcp's `StoredCredentials`), the URL it was got for, and when it was
//! written. The store does not read the JSON: a PostgreSQL store for replicas keeps the same
//! four columns. `updated_ms` is how a running gateway notices a `roster auth login` made in
//! another process. `step_up` holds the `WWW-Authenticate` of a 403 `insufficient_scope`
//! until a login with the wider scope clears it.
//!
//! Tokens are secrets: the file lives in its own directory under the state dir, the
//! directory made owner-only (0700) and the file created owner-only (0600) before SQLite
//! opens it; SQLite gives its journal the database file's mode.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;

/// The token store's path under the state dir.
pub const TOKENS_FILE: &str = "oauth/tokens.sqlite3";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS oauth_token (
    server      TEXT PRIMARY KEY NOT NULL,
    url         TEXT NOT NULL,
    credentials TEXT NOT NULL,
    updated_ms  INTEGER NOT NULL,
    step_up     TEXT
) WITHOUT ROWID;
";

/// The token store of a state dir.
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

/// The OAuth tokens of every server, in one SQLite file.
#[derive(Debug)]
pub struct TokenStore {
    conn: Mutex<Connection>,
    path: String,
    /// With `[store]`: the tokens are in the shared database instead (`conn` is unused).
    shared: Option<super::postgres::Pg>,
}

impl TokenStore {
    /// Opens (creating, owner-only, if needed) the store at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        owner_only_dir(path)?;
        let (conn, path) = super::open_sqlite(Some(path), SCHEMA)?;
        Ok(TokenStore {
            conn: Mutex::new(conn),
            path,
            shared: None,
        })
    }

    /// The tokens every replica shares (`[store]`): a login or a refresh on one serves all.
    pub fn shared(pg: &super::postgres::Pg) -> Result<Self, StoreError> {
        let mut store = TokenStore::open_in_memory()?;
        store.shared = Some(pg.clone());
        Ok(store)
    }

    /// A store that lives as long as this value.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        let (conn, path) = super::open_sqlite(None, SCHEMA)?;
        Ok(TokenStore {
            conn: Mutex::new(conn),
            path,
            shared: None,
        })
    }

    fn error(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// The record of `server`, if one was saved.
    pub fn load(&self, server: &str) -> Result<Option<TokenRecord>, StoreError> {
        if let Some(pg) = &self.shared {
            let server = server.to_owned();
            return pg.run(move |client| {
                let row = client.query_opt(
                    "SELECT url, credentials, updated_ms FROM roster_oauth_token WHERE server = $1",
                    &[&server],
                )?;
                Ok(row.map(|row| TokenRecord {
                    url: row.get(0),
                    credentials: row.get(1),
                    updated_ms: row.get(2),
                }))
            });
        }
        let conn = crate::sync::lock(&self.conn);
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
        .map_err(|e| self.error(e))
    }

    /// Saves `server`'s record, stamped now; returns the stamp.
    pub fn save(&self, server: &str, url: &str, credentials: &str) -> Result<i64, StoreError> {
        if let Some(pg) = &self.shared {
            let now = i64::try_from(super::now_ms()).unwrap_or(i64::MAX);
            let (server, url, credentials) =
                (server.to_owned(), url.to_owned(), credentials.to_owned());
            // Strictly increasing per server, whichever replica writes.
            return pg.run(move |client| {
                let row = client.query_one(
                    "INSERT INTO roster_oauth_token AS t (server, url, credentials, updated_ms)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (server) DO UPDATE SET url = excluded.url,
                         credentials = excluded.credentials,
                         updated_ms = GREATEST(excluded.updated_ms, t.updated_ms + 1)
                     RETURNING updated_ms",
                    &[&server, &url, &credentials, &now],
                )?;
                Ok(row.get(0))
            });
        }
        let conn = crate::sync::lock(&self.conn);
        let previous: Option<i64> = conn
            .query_row(
                "SELECT updated_ms FROM oauth_token WHERE server = ?1",
                [server],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.error(e))?;
        // Strictly increasing per server, so a waiter comparing stamps sees every write.
        let now = i64::try_from(super::now_ms())
            .unwrap_or(i64::MAX)
            .max(previous.map_or(0, |p| p + 1));
        conn.execute(
            "INSERT INTO oauth_token (server, url, credentials, updated_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(server) DO UPDATE SET url = excluded.url,
                 credentials = excluded.credentials, updated_ms = excluded.updated_ms",
            params![server, url, credentials, now],
        )
        .map_err(|e| self.error(e))?;
        Ok(now)
    }

    /// Records that `server` refused its token for too little scope (`challenge`: its
    /// `WWW-Authenticate`), until [`TokenStore::clear_step_up`].
    pub fn set_step_up(&self, server: &str, challenge: &str) -> Result<(), StoreError> {
        if let Some(pg) = &self.shared {
            let (server, challenge) = (server.to_owned(), challenge.to_owned());
            return pg
                .run(move |client| {
                    client.execute(
                        "UPDATE roster_oauth_token SET step_up = $2 WHERE server = $1",
                        &[&server, &challenge],
                    )
                })
                .map(drop);
        }
        let conn = crate::sync::lock(&self.conn);
        conn.execute(
            "UPDATE oauth_token SET step_up = ?2 WHERE server = ?1",
            params![server, challenge],
        )
        .map(drop)
        .map_err(|e| self.error(e))
    }

    /// The challenge of a step-up `server` waits for, if any.
    pub fn step_up(&self, server: &str) -> Result<Option<String>, StoreError> {
        if let Some(pg) = &self.shared {
            let server = server.to_owned();
            return pg.run(move |client| {
                let row = client.query_opt(
                    "SELECT step_up FROM roster_oauth_token WHERE server = $1",
                    &[&server],
                )?;
                Ok(row.and_then(|row| row.get(0)))
            });
        }
        let conn = crate::sync::lock(&self.conn);
        conn.query_row(
            "SELECT step_up FROM oauth_token WHERE server = ?1",
            [server],
            |row| row.get(0),
        )
        .optional()
        .map(Option::flatten)
        .map_err(|e| self.error(e))
    }

    /// Forgets a pending step-up of `server` (a login with the wider scope happened).
    pub fn clear_step_up(&self, server: &str) -> Result<(), StoreError> {
        if let Some(pg) = &self.shared {
            let server = server.to_owned();
            return pg
                .run(move |client| {
                    client.execute(
                        "UPDATE roster_oauth_token SET step_up = NULL WHERE server = $1",
                        &[&server],
                    )
                })
                .map(drop);
        }
        let conn = crate::sync::lock(&self.conn);
        conn.execute(
            "UPDATE oauth_token SET step_up = NULL WHERE server = ?1",
            [server],
        )
        .map(drop)
        .map_err(|e| self.error(e))
    }

    /// Forgets `server`'s record; `true` if there was one.
    pub fn clear(&self, server: &str) -> Result<bool, StoreError> {
        if let Some(pg) = &self.shared {
            let server = server.to_owned();
            return pg.run(move |client| {
                client
                    .execute(
                        "DELETE FROM roster_oauth_token WHERE server = $1",
                        &[&server],
                    )
                    .map(|n| n > 0)
            });
        }
        let conn = crate::sync::lock(&self.conn);
        conn.execute("DELETE FROM oauth_token WHERE server = ?1", [server])
            .map(|n| n > 0)
            .map_err(|e| self.error(e))
    }

    /// When `server`'s record was last written; `None`: no record.
    pub fn stamp(&self, server: &str) -> Result<Option<i64>, StoreError> {
        if let Some(pg) = &self.shared {
            let server = server.to_owned();
            return pg.run(move |client| {
                let row = client.query_opt(
                    "SELECT updated_ms FROM roster_oauth_token WHERE server = $1",
                    &[&server],
                )?;
                Ok(row.map(|row| row.get(0)))
            });
        }
        let conn = crate::sync::lock(&self.conn);
        conn.query_row(
            "SELECT updated_ms FROM oauth_token WHERE server = ?1",
            [server],
            |row| row.get(0),
        )
        .optional()
        .map_err(|e| self.error(e))
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

    #[test]
    fn saves_loads_stamps_and_clears_per_server() {
        let store = TokenStore::open_in_memory().expect("in memory");
        assert_eq!(store.load("a").expect("load"), None);
        let first = store.save("a", "http://a/mcp", "{}").expect("save");
        let second = store.save("a", "http://a/mcp", "{\"x\":1}").expect("save");
        assert!(second > first, "stamps increase: {first} then {second}");
        assert_eq!(store.stamp("a").expect("stamp"), Some(second));
        assert_eq!(
            store.load("a").expect("load").map(|r| r.credentials),
            Some("{\"x\":1}".to_owned())
        );
        assert_eq!(store.load("b").expect("load"), None);
        assert_eq!(store.step_up("a").expect("step-up"), None);
        store.set_step_up("a", "Bearer scope=\"x\"").expect("set");
        store
            .save("a", "http://a/mcp", "{}")
            .expect("a refresh saves");
        assert_eq!(
            store.step_up("a").expect("step-up"),
            Some("Bearer scope=\"x\"".to_owned()),
            "a refresh does not answer a step-up"
        );
        store.clear_step_up("a").expect("clear");
        assert_eq!(store.step_up("a").expect("step-up"), None);
        assert!(store.clear("a").expect("clear"));
        assert!(!store.clear("a").expect("clear again"));
        assert_eq!(store.stamp("a").expect("stamp"), None);
    }

    #[cfg(unix)]
    #[test]
    fn the_file_and_its_directory_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = tokens_path(dir.path());
        let store = TokenStore::open(&path).expect("open");
        store.save("a", "http://a/mcp", "{}").expect("save");
        let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().expect("parent")), 0o700);
    }
}
