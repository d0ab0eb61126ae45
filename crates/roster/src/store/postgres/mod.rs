//! The store several replicas share: PostgreSQL (`[store] url`).
//!
//! [`Pg`] owns one connection on a thread of its own and runs jobs on it in order: the inbox's
//! API is synchronous and runs on whatever thread calls it (a tokio worker included), where
//! the synchronous client cannot run, so a job is sent to the thread and its answer waited for
//! ([`Pg::run`], or [`Pg::run_async`] from async code). A lost connection is made again on the
//! next job. [`Pg::listen`] registers a callback for `NOTIFY`s; one more connection, on a
//! thread of its own, `LISTEN`s for every caller and calls back (and once after each
//! reconnect, when notifications may have been missed).
//!
//! The schema is made by numbered migrations at start ([`MIGRATIONS`]), under an advisory lock
//! so replicas starting together do not race; the applied ones are in `roster_schema`.
//!
//! The concerns behind the seam ([`super::Stores`]) have their PostgreSQL side here, one file
//! each: [`tokens`], [`pins`], [`sessions`], [`tasks`], the [`inbox`]'s trail.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use postgres::Client;
use postgres::fallible_iterator::FallibleIterator;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::StoreError;
use crate::config::StoreConfig;

pub mod inbox;
mod pins;
pub mod sessions;
pub mod tasks;
mod tokens;

pub(crate) use pins::PgPins;
pub(crate) use tokens::PgTokens;

/// The key of the advisory lock migrations run under.
const MIGRATION_LOCK: i64 = 0x726f_7374_6572; // "roster"

/// The schema, one migration per entry; never edit one that shipped, add the next.
pub const MIGRATIONS: &[&str] = &[
    // 1: the inbox's shared log and HTTP sessions.
    "CREATE TABLE roster_inbox_head (
         id integer PRIMARY KEY CHECK (id = 1),
         next_pos bigint NOT NULL,
         next_seq bigint NOT NULL
     );
     INSERT INTO roster_inbox_head VALUES (1, 1, 1);
     CREATE TABLE roster_inbox_log (
         pos bigint PRIMARY KEY,
         seq bigint,
         record text NOT NULL
     );
     CREATE TABLE roster_sessions (
         id text PRIMARY KEY,
         owner text,
         state text NOT NULL,
         created_at timestamptz NOT NULL DEFAULT now(),
         seen_at timestamptz NOT NULL DEFAULT now()
     );",
    // 2: tasks as every replica sees them (the replica running one publishes its state).
    "CREATE TABLE roster_tasks (
         owner text NOT NULL,
         id text NOT NULL,
         state text NOT NULL,
         expires_at timestamptz NOT NULL,
         PRIMARY KEY (owner, id)
     );",
    // 3: tool pins and the definitions waiting for a person, as in the SQLite store.
    "CREATE TABLE roster_tool_pin (
         server text NOT NULL,
         tool text NOT NULL,
         definition text NOT NULL,
         decided_by text NOT NULL,
         decided_at bigint NOT NULL,
         PRIMARY KEY (server, tool)
     );
     CREATE TABLE roster_tool_review (
         server text NOT NULL,
         tool text NOT NULL,
         definition text NOT NULL,
         withheld boolean NOT NULL,
         rejected boolean NOT NULL,
         seen_at bigint NOT NULL,
         PRIMARY KEY (server, tool)
     );",
    // 4: OAuth tokens roster holds as a client of its servers.
    "CREATE TABLE roster_oauth_token (
         server text PRIMARY KEY,
         url text NOT NULL,
         credentials text NOT NULL,
         updated_ms bigint NOT NULL,
         step_up text
     );",
];

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// The store's connection: made on first use and again after it was lost.
struct Connection {
    config: postgres::Config,
    tls: MakeRustlsConnect,
    client: Option<Client>,
}

impl Connection {
    fn client(&mut self) -> Result<&mut Client, postgres::Error> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = Some(connect(&self.config, &self.tls)?);
        }
        Ok(self.client.as_mut().expect("just connected"))
    }
}

/// A handle on the shared PostgreSQL store; clones share its connection thread.
#[derive(Clone)]
pub struct Pg {
    jobs: mpsc::Sender<Job>,
    config: Arc<postgres::Config>,
    /// TLS as the URL's `sslmode` and `sslrootcert` ask (see [`super::tls`]).
    tls: MakeRustlsConnect,
    /// The URL as configured (it holds no password), for messages.
    url: Arc<str>,
    stop: Arc<AtomicBool>,
    /// Who listens for which `NOTIFY` channel: one connection serves them all.
    listeners: Arc<std::sync::Mutex<Listeners>>,
}

/// A listener's callback: `(channel, payload)`, or `("", "")` when notices may have been
/// missed.
type Callback = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// The listeners of one store.
#[derive(Default)]
struct Listeners {
    /// Each channel with one of its callbacks, in the order they came.
    subscribed: Vec<(String, Callback)>,
    /// Listeners that came since the connection last said `LISTEN`.
    new: Vec<(String, Callback)>,
    /// Whether the listening thread runs.
    running: bool,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg").field("url", &self.url).finish()
    }
}

impl Pg {
    /// Connects to `[store]` (the password from its `password_env`), runs the migrations and
    /// starts the connection thread. Fails at once, naming the URL, when the database cannot
    /// be reached: a replica must not start without the state it shares.
    pub fn connect(store: &StoreConfig) -> Result<Pg, StoreError> {
        let url: Arc<str> = store.url.as_str().into();
        let tls_error = |message| StoreError::Tls {
            url: store.url.clone(),
            message,
        };
        let tls = crate::config::store_tls::TlsSettings::from_url(&store.url).map_err(tls_error)?;
        let mut config =
            postgres::Config::from_str(&tls.driver_url).map_err(|source| StoreError::Postgres {
                url: store.url.clone(),
                source,
            })?;
        let tls = super::tls::connector(&tls).map_err(tls_error)?;
        if let Some(var) = &store.password_env {
            let password =
                std::env::var(var).map_err(|_| StoreError::PasswordEnv { var: var.clone() })?;
            config.password(password);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("roster");
        }
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, started) = mpsc::sync_channel(1);
        let mut connection = Connection {
            config: config.clone(),
            tls: tls.clone(),
            client: None,
        };
        // The synchronous client runs its own runtime: it connects on its thread, never on
        // the caller's (which may be a tokio worker).
        std::thread::Builder::new()
            .name("roster-store".into())
            .spawn(move || {
                let first = connection.client().and_then(migrate);
                let failed = first.is_err();
                let _ = ready.send(first);
                if failed {
                    return;
                }
                for job in queue {
                    job(&mut connection);
                }
            })
            .map_err(|source| StoreError::Thread { source })?;
        match started.recv() {
            Ok(Ok(())) => {}
            Ok(Err(source)) => {
                return Err(StoreError::Postgres {
                    url: store.url.clone(),
                    source,
                });
            }
            Err(_) => return Err(StoreError::Stopped),
        }
        Ok(Pg {
            jobs,
            config: Arc::new(config),
            tls,
            url,
            stop: Arc::new(AtomicBool::new(false)),
            listeners: Arc::default(),
        })
    }

    /// The URL as configured, for messages.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn job<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<R, postgres::Error> + Send + 'static,
        answer: impl FnOnce(Result<R, StoreError>) + Send + 'static,
    ) {
        let url = self.url.clone();
        let job: Job = Box::new(move |connection: &mut Connection| {
            let result = connection.client().and_then(f);
            if result.is_err() && connection.client.as_ref().is_some_and(Client::is_closed) {
                connection.client = None;
            }
            answer(result.map_err(|source| StoreError::Postgres {
                url: url.to_string(),
                source,
            }));
        });
        if let Err(mpsc::SendError(job)) = self.jobs.send(job) {
            // The thread is gone (it panicked): say so through the answer.
            drop(job);
        }
    }

    /// Runs `f` on the store's connection and waits for it on this thread (any thread, a tokio
    /// worker included: it blocks for one round trip, as a file write would).
    pub fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<R, postgres::Error> + Send + 'static,
    ) -> Result<R, StoreError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.job(f, move |result| {
            let _ = tx.send(result);
        });
        rx.recv().unwrap_or(Err(StoreError::Stopped))
    }

    /// [`run`](Self::run) for async code: awaits the answer instead of blocking.
    pub async fn run_async<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<R, postgres::Error> + Send + 'static,
    ) -> Result<R, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.job(f, move |result| {
            let _ = tx.send(result);
        });
        rx.await.unwrap_or(Err(StoreError::Stopped))
    }

    /// Calls `on(channel, payload)` for every `NOTIFY` on `channels`, until this store (every
    /// clone) is dropped. One thread with one connection listens for every caller of a store
    /// (started by the first); a channel added later is listened to within half a second.
    /// When the connection was (re)made, `on("", "")` says notifications may have been missed.
    pub fn listen(
        &self,
        channels: &[&str],
        on: impl Fn(&str, &str) + Send + Sync + 'static,
    ) -> Result<(), StoreError> {
        let on: Callback = Arc::new(on);
        let start = {
            let mut listeners = crate::sync::lock(&self.listeners);
            for channel in channels {
                listeners.new.push(((*channel).to_owned(), on.clone()));
            }
            !std::mem::replace(&mut listeners.running, true)
        };
        if !start {
            return Ok(());
        }
        let config = self.config.clone();
        let tls = self.tls.clone();
        let stop = self.stop.clone();
        let url = self.url.clone();
        let listeners = self.listeners.clone();
        std::thread::Builder::new()
            .name("roster-store-listen".into())
            .spawn(move || listen_loop(&config, &tls, &listeners, &stop, &url))
            .map_err(|source| {
                crate::sync::lock(&self.listeners).running = false;
                StoreError::Thread { source }
            })?;
        Ok(())
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        // The last handle stops the listener; the connection thread ends with the channel.
        if Arc::strong_count(&self.stop) == 1 {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// A connection to the store as `config` and `tls` ask. Under `sslmode=prefer` (the default) a
/// TLS handshake that fails is followed by an attempt without TLS, as libpq does: a server
/// whose certificate rustls cannot read still serves a store that asked only to prefer TLS.
fn connect(config: &postgres::Config, tls: &MakeRustlsConnect) -> Result<Client, postgres::Error> {
    match config.connect(tls.clone()) {
        Err(error) if config.get_ssl_mode() == postgres::config::SslMode::Prefer => {
            let mut plain = config.clone();
            plain.ssl_mode(postgres::config::SslMode::Disable);
            match plain.connect(tls.clone()) {
                Ok(client) => {
                    tracing::warn!(error = %super::with_causes(&error), "store: TLS failed; connected without it, as sslmode=prefer allows");
                    Ok(client)
                }
                Err(_) => Err(error),
            }
        }
        other => other,
    }
}

fn listen_loop(
    config: &postgres::Config,
    tls: &MakeRustlsConnect,
    listeners: &std::sync::Mutex<Listeners>,
    stop: &AtomicBool,
    url: &str,
) {
    let mut backoff = Duration::from_millis(100);
    while !stop.load(Ordering::Relaxed) {
        let mut client = match connect(config, tls) {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(%url, %error, "store: cannot listen for other replicas' changes; retrying");
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        // A fresh connection listens to nothing yet: every listener is new to it.
        {
            let mut all = crate::sync::lock(listeners);
            let known = std::mem::take(&mut all.subscribed);
            let mut new = std::mem::take(&mut all.new);
            new.splice(0..0, known);
            all.new = new;
        }
        'connection: loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let new = std::mem::take(&mut crate::sync::lock(listeners).new);
            if !new.is_empty() {
                let mut channels: Vec<&str> = new.iter().map(|(c, _)| c.as_str()).collect();
                channels.sort_unstable();
                channels.dedup();
                let sql: String = channels.iter().map(|c| format!("LISTEN {c};")).collect();
                if let Err(error) = client.batch_execute(&sql) {
                    tracing::warn!(%url, %error, "store: cannot listen; reconnecting");
                    crate::sync::lock(listeners).new.splice(0..0, new);
                    break 'connection;
                }
                for (_, on) in &new {
                    on("", "");
                }
                crate::sync::lock(listeners).subscribed.extend(new);
            }
            // Wakes at least twice a second to see whether it should stop or listen to more.
            let mut notifications = client.notifications();
            let mut batch = notifications.timeout_iter(Duration::from_millis(500));
            loop {
                match batch.next() {
                    Ok(Some(n)) => {
                        let callbacks: Vec<Callback> = crate::sync::lock(listeners)
                            .subscribed
                            .iter()
                            .filter(|(channel, _)| channel == n.channel())
                            .map(|(_, on)| on.clone())
                            .collect();
                        for on in callbacks {
                            on(n.channel(), n.payload());
                        }
                        // A steady stream of notices must not keep a new listener waiting.
                        if !crate::sync::lock(listeners).new.is_empty() {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(error) => {
                        tracing::warn!(%url, %error, "store: the listening connection failed; reconnecting");
                        break 'connection;
                    }
                }
            }
            drop(batch);
            drop(notifications);
            if client.is_closed() {
                break;
            }
        }
    }
}

/// Runs the migrations not yet applied, each in its own transaction, under an advisory lock.
fn migrate(client: &mut Client) -> Result<(), postgres::Error> {
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])?;
    let result = (|| {
        client
            .batch_execute("CREATE TABLE IF NOT EXISTS roster_schema (version integer NOT NULL)")?;
        let applied: i32 = client
            .query_one("SELECT coalesce(max(version), 0) FROM roster_schema", &[])?
            .get(0);
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied as usize) {
            let version = i as i32 + 1;
            let mut tx = client.transaction()?;
            tx.batch_execute(sql)?;
            tx.execute(
                "INSERT INTO roster_schema (version) VALUES ($1)",
                &[&version],
            )?;
            tx.commit()?;
            tracing::info!(version, "store: migrated");
        }
        Ok(())
    })();
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])?;
    result
}
