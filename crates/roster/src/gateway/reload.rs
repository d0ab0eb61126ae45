//! Reloading the configuration file of a running gateway: on `SIGHUP`, `roster reload`, and
//! (with `[gateway] watch_config = true`) when the file changes.
//!
//! A reload reads the file again, checks its `[[clients]]` tokens, hands it to
//! [`crate::Roster::reload`] (servers) and puts the gateway's live settings in force
//! ([`super::Gateway::apply`]). A file that does not parse or validate changes nothing: the error, naming the file and the key, goes to the
//! log, to the caller (`roster reload` exits non-zero) and to the inbox (a reload on `SIGHUP` or
//! a save has no caller to tell), and `roster status` shows it as the last reload's outcome
//! until the next one.
//!
//! A file that names no server while servers run is refused the same way, unless the person
//! says so (`roster reload --allow-empty`): an editor that saved half a file, or a file
//! emptied by mistake, must not close every server of a running gateway.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Gateway;
use crate::config::{Config, ConfigChanges};
use crate::sync::lock;

/// The inbox channel a failed reload is recorded on.
pub const RELOAD_CHANNEL: &str = "config";
/// The method of a failed reload's inbox entry.
pub const RELOAD_FAILED_METHOD: &str = "roster/reload_failed";

/// How often a watched config file is looked at.
const WATCH_EVERY: Duration = Duration::from_millis(500);

/// What one reload did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReloadOutcome {
    /// When it ended, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What asked for it: `SIGHUP`, `roster reload`, `the file changed`.
    pub trigger: String,
    /// Whether the new configuration was applied.
    pub ok: bool,
    /// Why not, naming the file and the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What changed (servers added, removed, reconnected; keys that need a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<ConfigChanges>,
}

impl ReloadOutcome {
    /// One line for the log and `roster reload`.
    pub fn summary(&self) -> String {
        let Some(changes) = &self.changes else {
            return format!(
                "reload failed, the running configuration stays: {}",
                self.error.as_deref().unwrap_or("unknown error")
            );
        };
        let mut parts = Vec::new();
        for (what, names) in [
            ("added", &changes.added),
            ("removed", &changes.removed),
            ("reconnected", &changes.changed),
        ] {
            if !names.is_empty() {
                parts.push(format!("{what} {}", names.join(", ")));
            }
        }
        if parts.is_empty() {
            parts.push("no server changed".to_owned());
        }
        if !changes.applied.is_empty() {
            parts.push(format!("in force now: {}", changes.applied.join(", ")));
        }
        let mut line = format!("reloaded: {}", parts.join("; "));
        if !changes.need_restart.is_empty() {
            line.push_str(&format!(
                "; takes a restart: {}",
                changes.need_restart.join(", ")
            ));
        }
        line
    }
}

struct State {
    /// When the running configuration was read (at start, or by the last good reload).
    loaded_at: SystemTime,
    /// The file's bytes as last read, to tell a real change from a touch.
    text: Option<Vec<u8>>,
    last: Option<ReloadOutcome>,
}

/// Reloads one gateway's configuration file.
pub struct Reloader {
    path: PathBuf,
    /// Weak: the gateway holds its reloader.
    gateway: Weak<Gateway>,
    state: Mutex<State>,
    /// One reload at a time: a signal during a reload waits for it.
    one_at_a_time: tokio::sync::Mutex<()>,
}

fn ms_since_epoch(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Reloader {
    /// A reloader for the configuration `gateway` was started with, read from `path`.
    pub fn new(path: &Path, gateway: &Arc<Gateway>) -> Arc<Reloader> {
        Arc::new(Reloader {
            path: path.to_owned(),
            gateway: Arc::downgrade(gateway),
            state: Mutex::new(State {
                loaded_at: SystemTime::now(),
                text: std::fs::read(path).ok(),
                last: None,
            }),
            one_at_a_time: tokio::sync::Mutex::new(()),
        })
    }

    /// Reads the file again and applies it; `trigger` says why, for the log and status. A
    /// file that names no server is refused while servers run.
    pub async fn reload(&self, trigger: &str) -> ReloadOutcome {
        self.reload_with(trigger, false).await
    }

    /// [`Reloader::reload`]; with `allow_empty`, a file that names no server is applied too,
    /// and every running server is removed.
    pub async fn reload_with(&self, trigger: &str, allow_empty: bool) -> ReloadOutcome {
        let _one = self.one_at_a_time.lock().await;
        let text = std::fs::read(&self.path).ok();
        let applied = match Config::load(&self.path) {
            Ok(config) => self.apply(config, allow_empty).await,
            Err(e) => Err(e.to_string()),
        };
        let now = SystemTime::now();
        let outcome = match applied {
            Ok(changes) => ReloadOutcome {
                at_ms: ms_since_epoch(now),
                trigger: trigger.to_owned(),
                ok: true,
                error: None,
                changes: Some(changes),
            },
            Err(error) => ReloadOutcome {
                at_ms: ms_since_epoch(now),
                trigger: trigger.to_owned(),
                ok: false,
                error: Some(error),
                changes: None,
            },
        };
        if outcome.ok {
            tracing::info!(trigger, "{}", outcome.summary());
        } else {
            tracing::error!(trigger, "{}", outcome.summary());
            self.record_failure(&outcome);
        }
        if let Some(changes) = outcome
            .changes
            .as_ref()
            .filter(|c| !c.need_restart.is_empty())
        {
            tracing::warn!(
                "changed settings that take effect only after a restart: {}",
                changes.need_restart.join(", ")
            );
        }
        let mut state = lock(&self.state);
        state.text = text;
        if outcome.ok {
            state.loaded_at = now;
        }
        state.last = Some(outcome.clone());
        outcome
    }

    /// Puts a failed reload in the gateway's inbox, where a person reads what a signal or a
    /// save did.
    fn record_failure(&self, outcome: &ReloadOutcome) {
        let Some(gateway) = self.gateway.upgrade() else {
            return;
        };
        if let Some(inbox) = gateway.inbox() {
            let params = json!({
                "trigger": outcome.trigger,
                "error": outcome.error,
                "summary": outcome.summary(),
            });
            inbox.record(RELOAD_CHANNEL, RELOAD_FAILED_METHOD, params, false);
        }
    }

    /// Checks the clients, reloads the servers, then puts the live settings in force. A file
    /// that names no server is refused while servers run, unless `allow_empty`.
    async fn apply(&self, config: Config, allow_empty: bool) -> Result<ConfigChanges, String> {
        let file = self.path.display();
        let gateway = self.gateway.upgrade().ok_or("the gateway has shut down")?;
        if config.servers.is_empty() && !allow_empty {
            let running = gateway.roster().configured_servers();
            if !running.is_empty() {
                return Err(format!(
                    "{file} names no server, so this reload would remove every running server \
                     ({}); a file saved half-way looks like this. To remove them all, run \
                     `roster reload --allow-empty`",
                    running.join(", ")
                ));
            }
        }
        let admitted = Gateway::admit(&config).map_err(|e| format!("{file}: {e}"))?;
        let changes = gateway
            .roster()
            .reload(config)
            .await
            .map_err(|e| format!("{file}: {e}"))?;
        gateway.apply(admitted);
        Ok(changes)
    }

    /// The configuration's file, when it was loaded and the last reload's outcome, as
    /// `roster status` shows them.
    pub fn status_json(&self) -> Value {
        let state = lock(&self.state);
        let ago = SystemTime::now()
            .duration_since(state.loaded_at)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        json!({
            "path": self.path.display().to_string(),
            "loaded_ms_ago": ago,
            "last_reload": state.last,
        })
    }

    /// Reloads whenever the file's contents change, until `stop`: looked at every half
    /// second, applied once the new contents stayed the same for one look (an editor's
    /// several writes make one reload).
    pub fn watch(self: &Arc<Self>, stop: CancellationToken) {
        let reloader = self.clone();
        tokio::spawn(async move {
            let mut seen: Option<Vec<u8>> = None;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(WATCH_EVERY) => {}
                }
                let now = std::fs::read(&reloader.path).ok();
                let loaded = lock(&reloader.state).text.clone();
                if now == loaded {
                    seen = None;
                    continue;
                }
                if seen.as_ref() == now.as_ref() {
                    seen = None;
                    reloader.reload("the file changed").await;
                } else {
                    seen = now;
                }
            }
        });
    }
}
