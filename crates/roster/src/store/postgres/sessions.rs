//! Initialize-era HTTP sessions any replica can serve: each session's `initialize` (and the
//! client identity it belongs to) in `roster_sessions`.
//!
//! rmcp restores a session it does not hold from a [`SessionStore`]: it replays the stored
//! `initialize` into a fresh handler on the replica the request landed on, under the same
//! session id. [`SharedSessions`] is that store on PostgreSQL, plus what roster adds: the owner
//! (a session answers only the identity that made it, on every replica), an idle expiry
//! (`[gateway] session_idle_timeout`, counted from the last request any replica saw, written at
//! most a few times per timeout), and a `NOTIFY` when a session is deleted so every replica
//! lets its copy go at once.

use std::time::Duration;

use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};

use super::Pg;

/// The `NOTIFY` channel of deleted sessions; the payload is the session id.
pub const CHANNEL: &str = "roster_sessions";

/// The sessions replicas share.
#[derive(Debug, Clone)]
pub struct SharedSessions {
    pg: Pg,
    idle: Duration,
}

impl SharedSessions {
    /// Sessions in `pg` that expire after `idle` without a request.
    pub fn new(pg: Pg, idle: Duration) -> Self {
        SharedSessions { pg, idle }
    }

    /// Calls `deleted` with the id of every session a replica deletes (this one included).
    pub fn on_deleted(
        &self,
        deleted: impl Fn(&str) + Send + Sync + 'static,
    ) -> Result<(), crate::store::StoreError> {
        self.pg.listen(&[CHANNEL], move |_, id| deleted(id))
    }

    fn idle_secs(&self) -> f64 {
        self.idle.as_secs_f64()
    }

    /// The identity a live session belongs to: `None` when no live session has this id,
    /// `Some(None)` while its `initialize` answer is on its way (nobody's yet).
    pub async fn owner(
        &self,
        id: &str,
    ) -> Result<Option<Option<String>>, crate::store::StoreError> {
        let id = id.to_owned();
        let idle = self.idle_secs();
        self.pg
            .run_async(move |client| {
                let row = client.query_opt(
                    "SELECT owner FROM roster_sessions
                      WHERE id = $1 AND seen_at > now() - make_interval(secs => $2)",
                    &[&id, &idle],
                )?;
                Ok(row.map(|row| row.get::<_, Option<String>>(0)))
            })
            .await
    }

    /// The session `id` belongs to `owner` (its `initialize` was answered).
    pub async fn claim(&self, id: &str, owner: &str) -> Result<(), crate::store::StoreError> {
        let (id, owner) = (id.to_owned(), owner.to_owned());
        self.pg
            .run_async(move |client| {
                client.execute(
                    "UPDATE roster_sessions SET owner = $2, seen_at = now() WHERE id = $1",
                    &[&id, &owner],
                )
            })
            .await
            .map(drop)
    }

    /// A request for `id` was served: it is not idle.
    pub async fn touch(&self, id: &str) -> Result<(), crate::store::StoreError> {
        let id = id.to_owned();
        self.pg
            .run_async(move |client| {
                client.execute(
                    "UPDATE roster_sessions SET seen_at = now() WHERE id = $1",
                    &[&id],
                )
            })
            .await
            .map(drop)
    }
}

fn boxed(error: crate::store::StoreError) -> SessionStoreError {
    Box::new(error)
}

#[async_trait::async_trait]
impl SessionStore for SharedSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let id = session_id.to_owned();
        let idle = self.idle_secs();
        let text = self
            .pg
            .run_async(move |client| {
                let row = client.query_opt(
                    "UPDATE roster_sessions SET seen_at = now()
                      WHERE id = $1 AND owner IS NOT NULL
                        AND seen_at > now() - make_interval(secs => $2)
                  RETURNING state",
                    &[&id, &idle],
                )?;
                Ok(row.map(|row| row.get::<_, String>(0)))
            })
            .await
            .map_err(boxed)?;
        match text {
            Some(text) => Ok(Some(serde_json::from_str(&text)?)),
            None => Ok(None),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let id = session_id.to_owned();
        let text = serde_json::to_string(state)?;
        let idle = self.idle_secs();
        self.pg
            .run_async(move |client| {
                // Expired sessions go as new ones come: the table stays as big as the live ones.
                client.execute(
                    "DELETE FROM roster_sessions WHERE seen_at < now() - make_interval(secs => $1)",
                    &[&idle],
                )?;
                client.execute(
                    "INSERT INTO roster_sessions (id, state) VALUES ($1, $2)
                     ON CONFLICT (id) DO UPDATE SET state = excluded.state, seen_at = now()",
                    &[&id, &text],
                )
            })
            .await
            .map(drop)
            .map_err(boxed)
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        let id = session_id.to_owned();
        self.pg
            .run_async(move |client| {
                client.execute("DELETE FROM roster_sessions WHERE id = $1", &[&id])?;
                client.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &id])
            })
            .await
            .map(drop)
            .map_err(boxed)
    }
}
