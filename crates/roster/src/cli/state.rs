//! Where a command finds roster's state: the state directory and the [`Stores`] made from it
//! or from `[store]`, by the rule `roster serve` uses.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::store::Stores;

/// The state directory a command works on: `--state-dir` (or `ROSTER_STATE_DIR`), else what
/// the configuration at `config_path` says, by the rule `roster serve` and `roster status` use.
pub fn resolve_state_dir(given: Option<PathBuf>, config_path: &Path) -> anyhow::Result<PathBuf> {
    crate::config::state_dir_for(given, config_path).context(
        "the configuration has an error, so roster cannot tell which state directory to use \
         (pass --state-dir to name one)",
    )
}

/// The stores of the configuration at `config_path`: the `[store]` database replicas share
/// (connected now), else the state directory's (`--state-dir`, else the configuration's).
pub fn stores_for(given: Option<PathBuf>, config_path: &Path) -> anyhow::Result<Stores> {
    if let Ok(config) = crate::config::Config::load(config_path)
        && config.store.is_some()
    {
        return Ok(Stores::open(
            config.store.as_ref(),
            &config.gateway.state_dir,
        )?);
    }
    Ok(Stores::embedded(&resolve_state_dir(given, config_path)?))
}
