//! A stdio server run least-privileged: roster starts itself as the launcher (`roster
//! __sandbox SPEC -- COMMAND ARGS…`), which applies the server's [`Sandbox`] to itself and then
//! `exec`s the server in its place ([`launch`]). The server keeps the launcher's pid, so its
//! process group, kill grace and parent-death signal are the ones roster set up for the
//! launcher, as for any stdio server.
//!
//! Here, roster's side: the launcher's command line, and the environment the server gets —
//! only its entry's `env`, the variables its `sandbox.env` names, `PATH`, `LANG`, and a `HOME`
//! and `TMPDIR` of its own (`<state_dir>/sandbox/<server>/{home,tmp}`), never the rest of
//! roster's (other servers' keys among them).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::process::Command;

use crate::config::{Network, Sandbox};

#[cfg(target_os = "linux")]
pub mod launch;

/// The hidden subcommand the launcher runs as.
pub const SUBCOMMAND: &str = "__sandbox";

/// Set (to anything) in roster's environment, the launcher acts as on a kernel without
/// Landlock: how the tests see what `required` does where the kernel cannot enforce it.
pub const WITHOUT_LANDLOCK_VAR: &str = "ROSTER_TEST_SANDBOX_WITHOUT_LANDLOCK";

/// Names the program to run as the launcher, when it is not the running executable (an
/// embedder whose own binary is not roster points it at a `roster` binary).
pub const LAUNCHER_VAR: &str = "ROSTER_SANDBOX_LAUNCHER";

/// The prefix of every line the launcher writes to the server's stderr: roster logs such a
/// line as a warning and keeps it in the inbox.
pub const STDERR_PREFIX: &str = "roster sandbox: ";

/// What the launcher is told: the server's rules and where its private directories are.
#[derive(Debug, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// The server's name, for messages.
    pub server: String,
    /// Its `[servers.NAME.sandbox]`.
    pub rules: Sandbox,
    /// The private `HOME`, writable.
    pub home: PathBuf,
    /// The private temporary directory, writable.
    pub tmp: PathBuf,
    /// The entry's `cwd`, readable (without one the server starts in its private `HOME`).
    pub cwd: Option<PathBuf>,
    /// Act as on a kernel without Landlock ([`WITHOUT_LANDLOCK_VAR`]).
    #[serde(default)]
    pub without_landlock: bool,
}

/// Variables every sandboxed server gets from roster's environment, besides its private
/// `HOME` and `TMPDIR`.
const PASSED: &[&str] = &["PATH", "LANG", "LC_ALL", "TERM"];

/// The launcher's command for the server `server` running `command args` with `env` (in
/// `cwd`, else its private `HOME`) under `rules`; its private directories are made now
/// (owner-only).
pub(crate) fn command(
    server: &str,
    rules: &Sandbox,
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
) -> std::io::Result<Command> {
    // The launcher is Linux's (Landlock, namespaces, seccomp): elsewhere there is none to run.
    if cfg!(not(target_os = "linux")) {
        return Err(std::io::Error::other(
            "a sandbox needs Linux (Landlock, namespaces, seccomp); remove `sandbox` from this \
             server's entry to run it unsandboxed here",
        ));
    }
    let home = rules.private_dir.join("home");
    let tmp = rules.private_dir.join("tmp");
    for dir in [&home, &tmp] {
        private_dir(dir)?;
    }
    let spec = LaunchSpec {
        server: server.to_owned(),
        rules: rules.clone(),
        home: home.clone(),
        tmp: tmp.clone(),
        cwd: cwd.cloned(),
        without_landlock: std::env::var_os(WITHOUT_LANDLOCK_VAR).is_some(),
    };
    let spec = serde_json::to_string(&spec).map_err(std::io::Error::other)?;
    // A relative path names the program where it would be found unsandboxed: in `cwd`, else
    // in roster's own directory (the server itself starts in its private HOME).
    let program = Path::new(command);
    let program = if program.is_relative() && program.components().count() > 1 {
        match cwd {
            Some(cwd) => cwd.join(program),
            None => std::env::current_dir()?.join(program),
        }
    } else {
        program.to_owned()
    };
    let mut cmd = Command::new(launcher()?);
    cmd.arg(SUBCOMMAND)
        .arg(spec)
        .arg("--")
        .arg(program)
        .args(args)
        .env_clear()
        .envs(passed(&rules.env))
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .envs(env)
        .current_dir(cwd.unwrap_or(&home));
    Ok(cmd)
}

/// What the server gets from roster's own environment: [`PASSED`] and the names its rules
/// list, where roster has them.
fn passed(names: &[String]) -> Vec<(String, OsString)> {
    PASSED
        .iter()
        .map(|n| (*n).to_owned())
        .chain(names.iter().cloned())
        .filter_map(|name| std::env::var_os(&name).map(|value| (name, value)))
        .collect()
}

/// The launcher: [`LAUNCHER_VAR`], else the running executable (`roster` itself).
fn launcher() -> std::io::Result<PathBuf> {
    match std::env::var_os(LAUNCHER_VAR) {
        Some(path) if !path.is_empty() => Ok(PathBuf::from(path)),
        _ => std::env::current_exe(),
    }
}

/// Makes `dir` (and its parents) if missing, only its owner's.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)
}

/// A sandbox as status shows it (`roster status --json`, `/healthz`, the dashboard): its rules
/// as the configuration gives them.
pub(crate) fn status_json(rules: &Sandbox) -> Value {
    serde_json::to_value(rules).unwrap_or(Value::Null)
}

/// What a start that failed under `rules` may have been refused, to add to its error: the
/// keys a person changes.
pub(crate) fn failure_hint(server: &str, rules: &Sandbox) -> String {
    let network = match rules.network {
        Network::None => {
            " and no network (`network = \"all\"` gives it; `npx -y` and `uvx` \
                          need it to download, unless the package is installed first)"
        }
        Network::All => "",
    };
    format!(
        "it runs sandboxed ([servers.{server}.sandbox]): it may read only its command's \
         directory, its cwd and `read`, write only `write` and its private HOME{network}; \
         its stderr in the log says what it was refused"
    )
}
