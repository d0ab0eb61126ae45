//! `[servers.NAME.sandbox]` and `[gateway] sandbox`: what a stdio server may touch when roster
//! runs it least-privileged (Landlock file and TCP rules, a network namespace, a cleared
//! environment, resource limits). The rules as written, paths resolved; the launcher that
//! applies them is `servers::sandbox`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::ctx::{Ctx, RawSize, parse_size};

/// What a sandboxed stdio server may touch, besides what any program needs to run (the system
/// directories, `/dev/null` and friends, `/proc`), its command's install directory and its
/// `cwd`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    /// Readable (and executable) paths, with what is beneath them.
    pub read: Vec<PathBuf>,
    /// Writable paths, with what is beneath them.
    pub write: Vec<PathBuf>,
    /// Whether it may reach the network.
    pub network: Network,
    /// TCP ports it may connect to (Landlock's TCP rules; no network namespace then).
    pub connect: Vec<u16>,
    /// Whether it may open UNIX sockets (`socket(AF_UNIX)`), and so reach local daemons
    /// (`docker.sock`, D-Bus) where their files let it; `socketpair` works either way.
    pub unix_sockets: bool,
    /// Variables passed from roster's environment (besides the entry's own `env`, `PATH`,
    /// `LANG`, and its private `HOME` and `TMPDIR`).
    pub env: Vec<String>,
    /// Its data segment at most, in bytes (`RLIMIT_DATA`: what it allocates, not the address
    /// space a runtime reserves).
    pub memory: Option<u64>,
    /// Processes and threads at most, counted in its own user namespace (`RLIMIT_NPROC`).
    pub processes: Option<u64>,
    /// Open files at most (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
    /// A kernel that cannot enforce it is an error (`true`), or a warning and the server runs
    /// without what is missing (`false`).
    pub required: bool,
    /// Its private `HOME` and `TMPDIR` live here: `<state_dir>/sandbox/<server>` (set per
    /// server; empty in `[gateway] sandbox`).
    #[serde(skip)]
    pub private_dir: PathBuf,
}

/// `network = "none" | "all"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// No network: its own empty network namespace (or only `connect`'s TCP ports).
    None,
    /// The network roster has.
    All,
}

impl Sandbox {
    /// The sandbox of `sandbox = true`: nothing beyond what any program needs.
    fn default_rules() -> Sandbox {
        Sandbox {
            read: Vec::new(),
            write: Vec::new(),
            network: Network::None,
            connect: Vec::new(),
            unix_sockets: false,
            env: Vec::new(),
            memory: None,
            processes: None,
            open_files: None,
            required: true,
            private_dir: PathBuf::new(),
        }
    }

    /// These rules for the server `name` whose state is in `state_dir`.
    pub(super) fn for_server(mut self, state_dir: &std::path::Path, name: &str) -> Sandbox {
        self.private_dir = state_dir.join("sandbox").join(name);
        self
    }
}

/// `sandbox = true | false`, or a table.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
pub(super) enum RawSandboxSetting {
    On(bool),
    Table(RawSandbox),
}

#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandbox {
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    network: Option<Network>,
    #[serde(default)]
    connect: Vec<u16>,
    unix_sockets: Option<bool>,
    #[serde(default)]
    env: Vec<String>,
    memory: Option<RawSize>,
    processes: Option<u64>,
    open_files: Option<u64>,
    required: Option<bool>,
}

/// Builds `setting` (at `key`); `None` for `false`. `sandbox = true` takes `default` (the
/// gateway's) when there is one.
pub(super) fn build(
    ctx: &Ctx<'_>,
    key: &str,
    setting: RawSandboxSetting,
    default: Option<&Sandbox>,
) -> Result<Option<Sandbox>, ConfigError> {
    let raw = match setting {
        RawSandboxSetting::On(false) => return Ok(None),
        RawSandboxSetting::On(true) => {
            return Ok(Some(
                default.cloned().unwrap_or_else(Sandbox::default_rules),
            ));
        }
        RawSandboxSetting::Table(raw) => raw,
    };
    let paths = |what: &str, raw: Vec<String>| {
        raw.iter()
            .enumerate()
            .map(|(i, p)| path(ctx, &format!("{key}.{what}[{i}]"), p))
            .collect::<Result<Vec<_>, _>>()
    };
    for (i, name) in raw.env.iter().enumerate() {
        if name.is_empty() || name.contains('=') {
            return Err(ctx.invalid(
                format!("{key}.env[{i}]"),
                "the name of an environment variable",
            ));
        }
    }
    if raw.connect.contains(&0) {
        return Err(ctx.invalid(format!("{key}.connect"), "TCP ports from 1 to 65535"));
    }
    let network = raw.network.unwrap_or(Network::None);
    if network == Network::All && !raw.connect.is_empty() {
        return Err(ctx.invalid(
            format!("{key}.connect"),
            "ports only with network = \"none\" (with \"all\" every port is open)",
        ));
    }
    let count = |what: &str, value: Option<u64>| match value {
        Some(0) => Err(ctx.invalid(format!("{key}.{what}"), "a number above 0")),
        other => Ok(other),
    };
    Ok(Some(Sandbox {
        read: paths("read", raw.read)?,
        write: paths("write", raw.write)?,
        network,
        connect: raw.connect,
        unix_sockets: raw.unix_sockets.unwrap_or(false),
        env: raw.env,
        memory: match raw.memory {
            None => None,
            Some(size) => Some(parse_size(&size).filter(|b| *b > 0).ok_or_else(|| {
                ctx.invalid(
                    format!("{key}.memory"),
                    "a size above 0: bytes, or a number with KiB, MiB, GiB (or KB, MB, GB)",
                )
            })?),
        },
        processes: count("processes", raw.processes)?,
        open_files: count("open_files", raw.open_files)?,
        required: raw.required.unwrap_or(true),
        private_dir: PathBuf::new(),
    }))
}

/// A path as written: `${VAR}` expanded, a leading `~` made `$HOME`, relative to the config
/// file's folder.
fn path(ctx: &Ctx<'_>, key: &str, raw: &str) -> Result<PathBuf, ConfigError> {
    let expanded = ctx.expand(key, raw)?;
    if expanded.is_empty() {
        return Err(ctx.invalid(key, "a path"));
    }
    let expanded = match expanded.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let Some(home) = (ctx.env)("HOME").filter(|h| !h.is_empty()) else {
                return Err(ctx.invalid(key, "a path (`~` needs HOME, which is not set)"));
            };
            format!("{home}{rest}")
        }
        _ => expanded,
    };
    Ok(ctx.resolve(&expanded))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{Config, TransportConfig};

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    /// `text` read as the file at `path`, with only `pairs` in the environment.
    fn parse(text: &str, path: &str, pairs: &'static [(&'static str, &'static str)]) -> Config {
        Config::from_toml(text, Path::new(path), &env(pairs)).expect("valid")
    }

    /// The sandbox of server `name` in `config`.
    fn sandbox_of<'a>(config: &'a Config, name: &str) -> Option<&'a Sandbox> {
        match &config.servers[name].transport {
            TransportConfig::Stdio { sandbox, .. } => sandbox.as_deref(),
            _ => panic!("{name} is stdio"),
        }
    }

    #[test]
    fn a_sandbox_table_resolves_its_paths_and_sizes_and_the_gateways_is_the_default() {
        let config = parse(
            "[gateway]\nstate_dir = \"/var/roster\"\nsandbox = true\n\n\
             [servers.a]\ncommand = \"a\"\n\n\
             [servers.b]\ncommand = \"b\"\nsandbox = false\n\n\
             [servers.c]\ncommand = \"c\"\n[servers.c.sandbox]\nread = [\"docs\", \"~/notes\", \"${DATA}/x\"]\n\
             write = [\"/tmp/out\"]\nmemory = \"64MiB\"\nprocesses = 8\nenv = [\"KEY\"]\nrequired = false\n\n\
             [servers.web]\nurl = \"https://example.com/mcp\"\n",
            "/etc/roster/roster.toml",
            &[("HOME", "/home/ann"), ("DATA", "/data")],
        );
        let a = sandbox_of(&config, "a").expect("the gateway's default");
        assert_eq!(a.network, Network::None);
        assert!(a.required && a.read.is_empty() && a.memory.is_none());
        assert_eq!(a.private_dir, Path::new("/var/roster/sandbox/a"));
        assert!(sandbox_of(&config, "b").is_none(), "sandbox = false wins");
        let c = sandbox_of(&config, "c").expect("its own table");
        assert_eq!(
            c.read,
            [
                Path::new("/etc/roster/docs"),
                Path::new("/home/ann/notes"),
                Path::new("/data/x")
            ]
        );
        assert_eq!(c.write, [Path::new("/tmp/out")]);
        assert_eq!(c.memory, Some(64 << 20));
        assert_eq!(c.processes, Some(8));
        assert_eq!(c.env, ["KEY"]);
        assert!(!c.required);
        assert_eq!(c.private_dir, Path::new("/var/roster/sandbox/c"));
    }

    #[test]
    fn a_bad_sandbox_is_an_error_naming_its_key() {
        for (text, key) in [
            (
                "[servers.web]\nurl = \"https://example.com/mcp\"\nsandbox = true\n",
                "servers.web.sandbox",
            ),
            (
                "[servers.a]\ncommand = \"a\"\n[servers.a.sandbox]\nmemory = \"lots\"\n",
                "servers.a.sandbox.memory",
            ),
            (
                "[servers.a]\ncommand = \"a\"\n[servers.a.sandbox]\nprocesses = 0\n",
                "servers.a.sandbox.processes",
            ),
            (
                "[servers.a]\ncommand = \"a\"\n[servers.a.sandbox]\nnetwork = \"all\"\nconnect = [443]\n",
                "servers.a.sandbox.connect",
            ),
            (
                "[servers.a]\ncommand = \"a\"\n[servers.a.sandbox]\nread = [\"~/x\"]\n",
                "servers.a.sandbox.read[0]",
            ),
            (
                "[servers.a]\ncommand = \"a\"\n[servers.a.sandbox]\nread = [\"${NOPE}\"]\n",
                "servers.a.sandbox.read[0]",
            ),
        ] {
            let error = Config::from_toml(text, Path::new("/c/roster.toml"), &env(&[]))
                .expect_err(text)
                .to_string();
            assert!(error.contains(key), "{key} in: {error}");
        }
    }
}
