//! The OAuth tokens every replica shares (`[store]`), in `roster_oauth_token`: a login or a
//! refresh on one replica serves all.

use crate::store::StoreError;
use crate::store::tokens::{TokenRecord, Tokens, now_stamp};

use super::Pg;

/// The token records in the shared database.
#[derive(Debug)]
pub(crate) struct PgTokens(pub(crate) Pg);

impl Tokens for PgTokens {
    fn load(&self, server: &str) -> Result<Option<TokenRecord>, StoreError> {
        let server = server.to_owned();
        self.0.run(move |client| {
            let row = client.query_opt(
                "SELECT url, credentials, updated_ms FROM roster_oauth_token WHERE server = $1",
                &[&server],
            )?;
            Ok(row.map(|row| TokenRecord {
                url: row.get(0),
                credentials: row.get(1),
                updated_ms: row.get(2),
            }))
        })
    }

    fn save(&self, server: &str, url: &str, credentials: &str) -> Result<i64, StoreError> {
        let now = now_stamp();
        let (server, url, credentials) =
            (server.to_owned(), url.to_owned(), credentials.to_owned());
        // Strictly increasing per server, whichever replica writes.
        self.0.run(move |client| {
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
        })
    }

    fn set_step_up(&self, server: &str, challenge: &str) -> Result<(), StoreError> {
        let (server, challenge) = (server.to_owned(), challenge.to_owned());
        self.0
            .run(move |client| {
                client.execute(
                    "UPDATE roster_oauth_token SET step_up = $2 WHERE server = $1",
                    &[&server, &challenge],
                )
            })
            .map(drop)
    }

    fn step_up(&self, server: &str) -> Result<Option<String>, StoreError> {
        let server = server.to_owned();
        self.0.run(move |client| {
            let row = client.query_opt(
                "SELECT step_up FROM roster_oauth_token WHERE server = $1",
                &[&server],
            )?;
            Ok(row.and_then(|row| row.get(0)))
        })
    }

    fn clear_step_up(&self, server: &str) -> Result<(), StoreError> {
        let server = server.to_owned();
        self.0
            .run(move |client| {
                client.execute(
                    "UPDATE roster_oauth_token SET step_up = NULL WHERE server = $1",
                    &[&server],
                )
            })
            .map(drop)
    }

    fn clear(&self, server: &str) -> Result<bool, StoreError> {
        let server = server.to_owned();
        self.0.run(move |client| {
            client
                .execute(
                    "DELETE FROM roster_oauth_token WHERE server = $1",
                    &[&server],
                )
                .map(|n| n > 0)
        })
    }

    fn stamp(&self, server: &str) -> Result<Option<i64>, StoreError> {
        let server = server.to_owned();
        self.0.run(move |client| {
            let row = client.query_opt(
                "SELECT updated_ms FROM roster_oauth_token WHERE server = $1",
                &[&server],
            )?;
            Ok(row.map(|row| row.get(0)))
        })
    }
}
