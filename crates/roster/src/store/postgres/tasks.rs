//! Tasks every replica can answer for: the replica running a task publishes its state
//! (`tasks/get`'s answer) to `roster_tasks` whenever it changes; another replica answers
//! `tasks/get` from there, and passes `tasks/cancel` and `tasks/update` on to the running one
//! with a `NOTIFY` on [`CHANNEL`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Pg;
use crate::store::StoreError;

/// The `NOTIFY` channel of requests for the replica running a task; the payload is a
/// [`TaskOp`] as JSON.
pub const CHANNEL: &str = "roster_tasks";

/// The most a `NOTIFY` payload may hold (PostgreSQL's limit is 8000 bytes).
const MAX_PAYLOAD: usize = 7900;

/// What a replica asks of the one running a task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum TaskOp {
    /// `tasks/cancel`.
    Cancel {
        /// The client identity the task belongs to.
        owner: String,
        /// The task.
        id: String,
    },
    /// `tasks/update`: the client's answers to the task's input requests.
    Update {
        /// The client identity the task belongs to.
        owner: String,
        /// The task.
        id: String,
        /// The answers (`inputResponses`).
        responses: serde_json::Value,
    },
}

/// The tasks replicas share.
#[derive(Debug, Clone)]
pub struct SharedTasks {
    pg: Pg,
}

impl SharedTasks {
    /// Tasks in `pg`.
    pub fn new(pg: Pg) -> Self {
        SharedTasks { pg }
    }

    /// Calls `carry_out` with every [`TaskOp`] a replica passes on (for any replica's tasks:
    /// the one running the task carries it out).
    pub fn on_op(
        &self,
        carry_out: impl Fn(TaskOp) + Send + Sync + 'static,
    ) -> Result<(), StoreError> {
        self.pg.listen(&[CHANNEL], move |_, payload| {
            if let Ok(op) = serde_json::from_str::<TaskOp>(payload) {
                carry_out(op);
            }
        })
    }

    /// Publishes task `id`'s state (the JSON of its `tasks/get` answer), kept for `ttl`.
    pub async fn publish(
        &self,
        owner: &str,
        id: &str,
        state: String,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let (owner, id, ttl) = (owner.to_owned(), id.to_owned(), ttl.as_secs_f64());
        self.pg
            .run_async(move |client| {
                client.execute(
                    "INSERT INTO roster_tasks (owner, id, state, expires_at)
                     VALUES ($1, $2, $3, now() + make_interval(secs => $4))
                     ON CONFLICT (owner, id) DO UPDATE SET state = excluded.state,
                        expires_at = excluded.expires_at",
                    &[&owner, &id, &state, &ttl],
                )?;
                client.execute("DELETE FROM roster_tasks WHERE expires_at < now()", &[])
            })
            .await
            .map(drop)
    }

    /// Task `id` of `owner` as last published (`None`: no such task, or it expired).
    pub async fn get(&self, owner: &str, id: &str) -> Result<Option<String>, StoreError> {
        let (owner, id) = (owner.to_owned(), id.to_owned());
        self.pg
            .run_async(move |client| {
                let row = client.query_opt(
                    "SELECT state FROM roster_tasks
                      WHERE owner = $1 AND id = $2 AND expires_at > now()",
                    &[&owner, &id],
                )?;
                Ok(row.map(|row| row.get::<_, String>(0)))
            })
            .await
    }

    /// Passes `op` on to the replica running the task. `Ok(false)`: the request is too big to
    /// pass on (answers larger than a `NOTIFY` holds must go to that replica's session).
    pub async fn send(&self, op: &TaskOp) -> Result<bool, StoreError> {
        let payload = serde_json::to_string(op).unwrap_or_default();
        if payload.len() > MAX_PAYLOAD {
            return Ok(false);
        }
        self.pg
            .run_async(move |client| {
                client.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
            })
            .await
            .map(|_| true)
    }
}
