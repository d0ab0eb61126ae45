//! Where roster keeps its state (the inbox's audit trail, the admin socket, the catalog): one
//! rule, used by `roster serve`, `roster status`/`tools`/`refresh`, `roster inbox` and the
//! completion scripts alike, so they all find the same directory.

use std::path::{Path, PathBuf};

use super::env::process_env;
use super::{Config, ConfigError, EnvLookup, GatewayConfig};

/// The state directory for a configuration: `$ROSTER_STATE_DIR`, else `configured` (the config
/// file's `[gateway] state_dir`, resolved against the file's folder), else
/// `$XDG_STATE_HOME/roster`, else `$HOME/.local/state/roster`, else `.roster-state`.
pub(super) fn resolve(env: EnvLookup<'_>, configured: Option<PathBuf>) -> PathBuf {
    let set = |name: &str| env(name).filter(|value| !value.is_empty());
    if let Some(dir) = set("ROSTER_STATE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = configured {
        return dir;
    }
    if let Some(dir) = set("XDG_STATE_HOME") {
        return PathBuf::from(dir).join("roster");
    }
    match set("HOME") {
        Some(home) => PathBuf::from(home).join(".local/state/roster"),
        None => PathBuf::from(".roster-state"),
    }
}

/// The state directory a command works on: `given` (its `--state-dir`) when there is one, else
/// `$ROSTER_STATE_DIR`, else the `[gateway] state_dir` of the configuration at `config_path`,
/// else `$XDG_STATE_HOME/roster`, else `~/.local/state/roster`. No file there means the
/// defaults. A file that is valid TOML but wrong elsewhere still names its state directory
/// (so `roster reload` reaches the gateway, which then says what is wrong); a file that is not
/// TOML at all is an error, since guessing would point at the wrong gateway or at none.
pub fn state_dir_for(given: Option<PathBuf>, config_path: &Path) -> Result<PathBuf, ConfigError> {
    if let Some(dir) = given {
        return Ok(dir);
    }
    match Config::load(config_path) {
        Ok(config) => Ok(config.gateway.state_dir),
        Err(e) if e.is_missing_file() => Ok(GatewayConfig::defaults(&process_env).state_dir),
        Err(e) => written_state_dir(config_path).ok_or(e),
    }
}

/// The state directory a TOML file names, read without checking anything else in it; `None`
/// when the file is not TOML (a JSON `mcpServers` file has no state dir: the defaults).
fn written_state_dir(config_path: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(config_path).ok()?;
    let is_json = config_path.extension().is_some_and(|e| e == "json");
    let configured = if is_json {
        None
    } else {
        let table: toml::Table = text.parse().ok()?;
        match table.get("gateway").and_then(|g| g.get("state_dir")) {
            Some(toml::Value::String(dir)) => {
                let dir = PathBuf::from(dir);
                Some(match config_path.parent() {
                    Some(base) if dir.is_relative() => base.join(dir),
                    _ => dir,
                })
            }
            Some(_) => return None,
            None => None,
        }
    };
    Some(resolve(&process_env, configured))
}
