//! roster's configuration: `roster.toml`, or the `mcpServers` JSON of Claude Desktop, Cursor
//! and VS Code read as it is (any `.json` file given to [`Config::load`]).
//!
//! Parsing happens in two steps: serde reads the file into `Raw*` structs (TOML with
//! `deny_unknown_fields`, so a misspelt key is an error, not a silently ignored line), then
//! [`Config`] is built from them, checking what serde cannot (one of `command`/`url`, URL
//! syntax, durations, `${VAR}` expansion). Every error names the file, the key and what was
//! expected.
//!
//! ```toml
//! [gateway]
//! naming = "always"            # always | conditional | never
//! separator = "__"
//! refresh_interval = "1h"      # a listing is held this long (or the server's shorter ttlMs)
//! debounce = "500ms"           # list_changed trailing edge; negative is an error
//! dynamic_tools = true         # ROSTER_DYNAMIC_TOOLS=0 turns re-listing on list_changed off
//! subscriptions = ["eng"]      # default subscriptions of stdio clients
//! state_dir = "state"          # default: $ROSTER_STATE_DIR, else $XDG_STATE_HOME/roster
//! admin_max_line = 65536       # longest request line the admin socket reads (bytes)
//! call_timeout = "60s"         # per tools/call; notifications/cancelled on expiry
//! connect_timeout = "30s"      # spawn/open + handshake
//! list_timeout = "30s"         # per tools/list page
//! turn_wait = "10s"            # a turn waits this long for its listings
//! ping_interval = "30s"        # legacy-era health ping; "0s" = off
//! backoff_initial = "1s"       # restart / re-list backoff after a failure
//! backoff_max = "5m"           # also the retry period of a crash loop
//! stable_period = "60s"        # up this long = failures forgotten
//! crash_loop_after = 5         # failures without a stable period → crash-loop
//! startup_wait = "10s"         # Roster::start waits this long for first connections
//! listen = "127.0.0.1:8931"    # the gateway's serving keys, kept here for it:
//! delta_notes = true           #   listen, delta_notes, allowed_hosts, allowed_origins,
//! page_size = 200              #   page_size
//! task_after = "500ms"         # a call of a client that opted in to tasks (SEP-2663) that
//!                              #   outlasts this becomes a task
//! task_ttl = "1h"              # a task is kept this long (its ttlMs)
//! max_tasks = 1000             # tasks running at once; past it calls are answered in place
//! max_connections = 1024       # HTTP connections held at once; past it one is answered 503
//! header_read_timeout = "10s"  # a client has this long to send a request's headers
//! body_read_timeout = "30s"    # ... and this long to send its body (else 408)
//! max_sessions = 1000          # initialize-era HTTP sessions at once (else 503 naming it)
//! max_sessions_per_client = 100  # ... per [[clients]] identity
//! session_idle_timeout = "15m" # a session with no traffic this long is closed
//! admin_token_env = "ROSTER_ADMIN_TOKEN"  # bearer token for the full /healthz (unset: none)
//! notification_rate = 100      # per server: notifications a second; more are dropped (a
//! notification_burst = 200     #   list_changed coalesced), one inbox entry a second says how many
//! max_tools = 10000            # per server: a listing past it keeps the first 10000 (warned)
//! max_listing_bytes = 33554432 # per server: a listing's pages summed (32 MiB); past it, it fails
//! max_log_line = 4096          # bytes of a server's stderr line in roster's log (control chars escaped)
//! kill_grace = "5s"            # SIGTERM to a stdio server's process group, SIGKILL after this
//!
//! [skills]
//! paths = ["skills"]           # relative to this file
//! max_file_size = "1MiB"       # one limit for every skill file: loader, `skills check`,
//!                              #   get_skill and skill:// resources (bytes, or "512KiB", "2MiB")
//!
//! [servers.fs]                 # a stdio server
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
//! env = { TOKEN = "${FS_TOKEN}" }   # ${VAR} from the environment; a missing one is an error
//! cwd = "work"
//! enabled = true
//! protocol = "auto"            # auto | legacy (initialize only) | modern (server/discover only)
//! tools.allow = ["read_*"]     # globs on the server's own tool names, applied to every listing
//! tools.deny = ["*_secret"]
//! tasks.required = ["build_*"]  # run only as tasks (a client without tasks gets -32021)
//! tasks.forbidden = ["quick_*"] # never run as tasks; other tools as the server says
//!                               #   (execution.taskSupport), else as tasks when slow
//! # call_timeout, connect_timeout, list_timeout, ping_interval override [gateway] per server
//!
//! [servers.web]                # an HTTP server
//! url = "https://example.com/mcp?key=${WEB_KEY}"   # ${VAR} here too
//! transport = "streamable-http"   # or "sse" (legacy HTTP+SSE)
//! headers = { Authorization = "Bearer ${WEB_TOKEN}" }
//!
//! [[clients]]                  # who may connect to the gateway over HTTP
//! name = "ide"
//! token_env = "IDE_TOKEN"      # or token_sha256 = "…"
//! subscriptions = ["eng"]
//! delta_notes = false          # this client's tool results carry no change note (default: [gateway])
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

/// Where an environment variable's value comes from; the process environment in production,
/// a map in tests.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A configuration file that could not be read or does not say what roster needs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML/JSON or has a key roster does not know.
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message (it names the key and the line).
        message: String,
    },
    /// A key holds a value roster cannot use.
    #[error("{path}: `{key}`: expected {expected}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The dotted key, e.g. `servers.github.url`.
        key: String,
        /// What the key must hold.
        expected: String,
    },
    /// `${VAR}` names an environment variable that is not set.
    #[error("{path}: `{key}` refers to ${{{var}}}, but the environment variable {var} is not set")]
    MissingVariable {
        /// The file.
        path: PathBuf,
        /// The dotted key holding the reference.
        key: String,
        /// The variable's name.
        var: String,
    },
}

/// The whole configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it was read from (`None` when built in code).
    pub source: Option<PathBuf>,
    /// The configured servers by name, disabled ones included.
    pub servers: BTreeMap<String, ServerConfig>,
    /// The servers' names in the order the file lists them (for JSON files: name order). The
    /// first server in this order keeps a bare tool name under `naming = "never"`.
    pub server_order: Vec<String>,
    /// The `[gateway]` table.
    pub gateway: GatewayConfig,
    /// The `[skills]` table.
    pub skills: SkillsConfig,
    /// The `[[clients]]` entries: who may connect over HTTP, with which subscriptions.
    pub clients: Vec<ClientConfig>,
}

/// One `[[clients]]` entry. The token is named, never written: `token_env` (a variable read at
/// start) or `token_sha256` (the token's hex SHA-256).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// A name for logs and for the client's session.
    pub name: String,
    /// Environment variable holding the bearer token.
    pub token_env: Option<String>,
    /// Hex SHA-256 of the bearer token.
    pub token_sha256: Option<String>,
    /// Subscriptions this client holds.
    pub subscriptions: Vec<String>,
    /// Whether this client's tool results carry the change note; `None` follows
    /// `[gateway] delta_notes`.
    pub delta_notes: Option<bool>,
}

/// One `[servers.NAME]` table.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// How roster reaches the server.
    pub transport: TransportConfig,
    /// `false` keeps the server configured but unstarted.
    pub enabled: bool,
    /// Which of the server's tools roster takes, by the server's own names.
    pub tools: ToolFilter,
    /// Which of the server's tools run as tasks (SEP-2663), by the server's own names.
    pub tasks: TaskPolicy,
    /// How long a `tools/call` may take before roster cancels it.
    pub call_timeout: Duration,
    /// How long connecting (spawn or open, then the handshake) may take.
    pub connect_timeout: Duration,
    /// How long one `tools/list` page may take before the listing counts as failed.
    pub list_timeout: Duration,
    /// How often a legacy-era connection is pinged; `None` turns pings off.
    pub ping_interval: Option<Duration>,
    /// Which protocol lifecycle to use (`protocol = "auto" | "legacy" | "modern"`).
    pub era: Era,
    /// What this server may cost roster (from `[gateway]`).
    pub limits: ServerLimits,
}

/// Which MCP lifecycle roster uses with a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Era {
    /// Try `server/discover` (2026-07-28); fall back to `initialize` when the server is older.
    #[default]
    Auto,
    /// Only `initialize` (2025-11-25 and older).
    Legacy,
    /// Only `server/discover` (2026-07-28).
    Modern,
}

/// How roster reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportConfig {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables, `${VAR}` already expanded.
        env: BTreeMap<String, String>,
        /// Working directory (relative paths are resolved against the config file's folder).
        cwd: Option<PathBuf>,
    },
    /// A URL speaking MCP streamable HTTP.
    StreamableHttp {
        /// The MCP endpoint.
        url: String,
        /// Extra request headers, `${VAR}` already expanded.
        headers: BTreeMap<String, String>,
    },
    /// A URL speaking the legacy HTTP+SSE transport (`GET` the SSE stream, `POST` messages).
    Sse {
        /// The SSE endpoint.
        url: String,
        /// Extra request headers, `${VAR}` already expanded.
        headers: BTreeMap<String, String>,
    },
}

/// `tools.allow` / `tools.deny`: glob patterns on a server's own tool names.
///
/// Applied to every listing, so a tool renamed by its server is judged by its new name.
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    allow: Vec<String>,
    deny: Vec<String>,
    allow_set: Option<GlobSet>,
    deny_set: Option<GlobSet>,
}

impl ToolFilter {
    /// A filter from allow and deny patterns; an empty allow list allows everything.
    pub fn new(allow: Vec<String>, deny: Vec<String>) -> Result<Self, globset::Error> {
        Ok(ToolFilter {
            allow_set: glob_set(&allow)?,
            deny_set: glob_set(&deny)?,
            allow,
            deny,
        })
    }

    /// Whether a tool with this (server-side) name is taken.
    pub fn permits(&self, tool_name: &str) -> bool {
        let allowed = self
            .allow_set
            .as_ref()
            .is_none_or(|set| set.is_match(tool_name));
        let denied = self
            .deny_set
            .as_ref()
            .is_some_and(|set| set.is_match(tool_name));
        allowed && !denied
    }

    /// The allow patterns as written.
    pub fn allow(&self) -> &[String] {
        &self.allow
    }

    /// The deny patterns as written.
    pub fn deny(&self) -> &[String] {
        &self.deny
    }
}

/// One set of glob patterns (`None` for none).
fn glob_set(patterns: &[String]) -> Result<Option<GlobSet>, globset::Error> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        builder.add(Glob::new(pattern)?);
    }
    builder.build().map(Some)
}

/// Whether a tool call may, must or must not run as a task (SEP-2663; the 2025-11-25
/// `execution.taskSupport` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never a task.
    Forbidden,
    /// A task when the client opted in and the call is slow.
    Optional,
    /// Only as a task: a client that did not opt in is refused.
    Required,
}

impl TaskSupport {
    /// The `execution.taskSupport` value (`forbidden`, `optional`, `required`).
    pub fn parse(value: &str) -> Option<TaskSupport> {
        match value {
            "forbidden" => Some(TaskSupport::Forbidden),
            "optional" => Some(TaskSupport::Optional),
            "required" => Some(TaskSupport::Required),
            _ => None,
        }
    }
}

/// `tasks.required` / `tasks.forbidden`: glob patterns on a server's own tool names that say
/// how its tools run as tasks, over what the server's tools declare.
#[derive(Debug, Clone, Default)]
pub struct TaskPolicy {
    required: Option<GlobSet>,
    forbidden: Option<GlobSet>,
}

impl TaskPolicy {
    /// A policy from the two pattern lists (`forbidden` wins where both match).
    pub fn new(required: &[String], forbidden: &[String]) -> Result<Self, globset::Error> {
        Ok(TaskPolicy {
            required: glob_set(required)?,
            forbidden: glob_set(forbidden)?,
        })
    }

    /// What the configuration says of the tool, if anything.
    pub fn of(&self, tool_name: &str) -> Option<TaskSupport> {
        let matches = |set: &Option<GlobSet>| set.as_ref().is_some_and(|s| s.is_match(tool_name));
        if matches(&self.forbidden) {
            Some(TaskSupport::Forbidden)
        } else if matches(&self.required) {
            Some(TaskSupport::Required)
        } else {
            None
        }
    }
}

pub use roster_core::NamingMode;
use roster_core::{BackoffConfig, NamingConfig, ScheduleConfig};

/// The `[gateway]` table.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// How exposed names are built.
    pub naming: NamingMode,
    /// Between server name and tool name in an exposed name.
    pub separator: String,
    /// How long a listing is trusted (a server's shorter `ttlMs` wins).
    pub refresh_interval: Duration,
    /// Trailing-edge window for `notifications/tools/list_changed`.
    pub debounce: Duration,
    /// Re-list on `list_changed` (`ROSTER_DYNAMIC_TOOLS=0` turns it off).
    pub dynamic_tools: bool,
    /// Subscriptions for stdio clients.
    pub subscriptions: Vec<String>,
    /// Audit trail, catalog database, admin socket.
    pub state_dir: PathBuf,
    /// The longest request line the admin socket reads, in bytes.
    pub admin_max_line: usize,
    /// Default per-call timeout for `tools/call`.
    pub call_timeout: Duration,
    /// Default bound on connecting to a server (spawn/open plus handshake).
    pub connect_timeout: Duration,
    /// Default bound on one `tools/list` page.
    pub list_timeout: Duration,
    /// How long a turn waits for its listings; slower ones finish in the background and their
    /// deltas reach the next turn.
    pub turn_wait: Duration,
    /// Default ping interval for legacy-era connections; `None` = off.
    pub ping_interval: Option<Duration>,
    /// First restart / re-list delay after a failure.
    pub backoff_initial: Duration,
    /// Longest restart / re-list delay; also the retry period of a crash loop.
    pub backoff_max: Duration,
    /// A server that stayed up this long is stable again.
    pub stable_period: Duration,
    /// Failures without a stable period that make a crash loop.
    pub crash_loop_after: u32,
    /// How long `Roster::start` waits for the servers' first connection attempts
    /// (`0s` = not at all).
    pub startup_wait: Duration,
    /// Address for `roster serve --http` when none is given on the command line.
    pub listen: String,
    /// Whether a tool result after a change carries a note naming what changed.
    pub delta_notes: bool,
    /// Extra `Host` values accepted over HTTP besides loopback.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted over HTTP.
    pub allowed_origins: Vec<String>,
    /// Page size for the gateway's `tools/list` and other list results.
    pub page_size: usize,
    /// A call of a client that opted in to tasks becomes a task once it outlasts this.
    pub task_after: Duration,
    /// How long a task is kept (its `ttlMs`).
    pub task_ttl: Duration,
    /// How many tasks may run at once.
    pub max_tasks: usize,
    /// HTTP connections held open at once; past it a new one is answered 503 and closed.
    pub max_connections: usize,
    /// How long an HTTP client may take to send a request's headers.
    pub header_read_timeout: Duration,
    /// How long an HTTP client may take to send a request's body.
    pub body_read_timeout: Duration,
    /// Initialize-era HTTP sessions held at once.
    pub max_sessions: usize,
    /// Initialize-era HTTP sessions held at once by one `[[clients]]` identity.
    pub max_sessions_per_client: usize,
    /// An HTTP session with no traffic this long is closed and its memory freed.
    pub session_idle_timeout: Duration,
    /// The environment variable holding the admin bearer token that unlocks the full
    /// `/healthz`; `None`: `/healthz` only ever says whether roster is up.
    pub admin_token_env: Option<String>,
    /// What one server may cost roster (every server gets these).
    pub server_limits: ServerLimits,
}

impl GatewayConfig {
    /// The naming rules for the tool registry.
    pub fn naming_config(&self) -> NamingConfig {
        NamingConfig {
            mode: self.naming,
            separator: self.separator.clone(),
        }
    }

    /// The listing schedule settings.
    pub fn schedule_config(&self) -> ScheduleConfig {
        ScheduleConfig {
            refresh_interval: self.refresh_interval,
            backoff: BackoffConfig {
                initial: self.backoff_initial,
                max: self.backoff_max,
                ..BackoffConfig::default()
            },
            stable_period: self.stable_period,
            crash_loop_after: self.crash_loop_after,
        }
    }
}

impl GatewayConfig {
    /// The defaults, with `state_dir` from the given environment.
    pub fn defaults(env: EnvLookup<'_>) -> Self {
        GatewayConfig {
            naming: NamingMode::Always,
            separator: "__".to_owned(),
            refresh_interval: Duration::from_secs(3600),
            debounce: Duration::from_millis(500),
            dynamic_tools: env("ROSTER_DYNAMIC_TOOLS").as_deref() != Some("0"),
            subscriptions: Vec::new(),
            state_dir: default_state_dir(env),
            admin_max_line: crate::gateway::admin::DEFAULT_MAX_LINE,
            call_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
            list_timeout: Duration::from_secs(30),
            turn_wait: Duration::from_secs(10),
            ping_interval: Some(Duration::from_secs(30)),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            stable_period: Duration::from_secs(60),
            crash_loop_after: 5,
            startup_wait: Duration::from_secs(10),
            listen: "127.0.0.1:8931".to_owned(),
            delta_notes: true,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            page_size: 200,
            task_after: Duration::from_millis(500),
            task_ttl: Duration::from_secs(3600),
            max_tasks: 1000,
            max_connections: 1024,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_sessions: 1000,
            max_sessions_per_client: 100,
            session_idle_timeout: Duration::from_secs(15 * 60),
            admin_token_env: None,
            server_limits: ServerLimits::default(),
        }
    }
}

/// The `[skills]` table.
#[derive(Debug, Clone)]
pub struct SkillsConfig {
    /// Skill roots, resolved against the config file's folder.
    pub paths: Vec<PathBuf>,
    /// The largest skill file served or checked, in bytes: `SKILL.md` and every other file of
    /// a skill directory.
    pub max_file_size: u64,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        SkillsConfig {
            paths: Vec::new(),
            max_file_size: crate::store::DEFAULT_MAX_SKILL_FILE_SIZE,
        }
    }
}

fn default_state_dir(env: EnvLookup<'_>) -> PathBuf {
    if let Some(dir) = env("ROSTER_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = env("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("roster");
    }
    match env("HOME") {
        Some(home) => PathBuf::from(home).join(".local/state/roster"),
        None => PathBuf::from(".roster-state"),
    }
}

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

// ---- raw, as serde reads it ------------------------------------------------------------

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawToml {
    #[serde(default)]
    servers: BTreeMap<String, RawServer>,
    #[serde(default)]
    gateway: RawGateway,
    #[serde(default)]
    skills: RawSkills,
    #[serde(default)]
    clients: Vec<RawClient>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    transport: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    enabled: Option<bool>,
    #[serde(default)]
    tools: RawToolFilter,
    #[serde(default)]
    tasks: RawTaskPolicy,
    call_timeout: Option<RawDuration>,
    connect_timeout: Option<RawDuration>,
    list_timeout: Option<RawDuration>,
    ping_interval: Option<RawDuration>,
    protocol: Option<Era>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTaskPolicy {
    #[serde(default)]
    required: Vec<String>,
    #[serde(default)]
    forbidden: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawToolFilter {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawGateway {
    naming: Option<NamingMode>,
    separator: Option<String>,
    refresh_interval: Option<RawDuration>,
    debounce: Option<RawDuration>,
    dynamic_tools: Option<bool>,
    subscriptions: Option<Vec<String>>,
    state_dir: Option<String>,
    admin_max_line: Option<usize>,
    call_timeout: Option<RawDuration>,
    connect_timeout: Option<RawDuration>,
    list_timeout: Option<RawDuration>,
    turn_wait: Option<RawDuration>,
    ping_interval: Option<RawDuration>,
    backoff_initial: Option<RawDuration>,
    backoff_max: Option<RawDuration>,
    stable_period: Option<RawDuration>,
    crash_loop_after: Option<u32>,
    startup_wait: Option<RawDuration>,
    listen: Option<String>,
    delta_notes: Option<bool>,
    allowed_hosts: Option<Vec<String>>,
    allowed_origins: Option<Vec<String>>,
    page_size: Option<usize>,
    task_after: Option<RawDuration>,
    task_ttl: Option<RawDuration>,
    max_tasks: Option<usize>,
    max_connections: Option<usize>,
    header_read_timeout: Option<RawDuration>,
    body_read_timeout: Option<RawDuration>,
    max_sessions: Option<usize>,
    max_sessions_per_client: Option<usize>,
    session_idle_timeout: Option<RawDuration>,
    admin_token_env: Option<String>,
    notification_rate: Option<u32>,
    notification_burst: Option<u32>,
    max_tools: Option<usize>,
    max_listing_bytes: Option<usize>,
    max_log_line: Option<usize>,
    kill_grace: Option<RawDuration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClient {
    name: String,
    token_env: Option<String>,
    token_sha256: Option<String>,
    #[serde(default)]
    subscriptions: Vec<String>,
    delta_notes: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSkills {
    #[serde(default)]
    paths: Vec<String>,
    max_file_size: Option<RawSize>,
}

/// A size as written: a number of bytes, or `"512KiB"`, `"1MiB"`, `"1MB"`.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum RawSize {
    Bytes(u64),
    Text(String),
}

fn parse_size(raw: &RawSize) -> Option<u64> {
    let text = match raw {
        RawSize::Bytes(n) => return Some(*n),
        RawSize::Text(text) => text.trim(),
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return None,
    };
    number.checked_mul(unit)
}

/// A duration as written: `"500ms"`, `"30s"`, `"2m"`, `"1h"`, or a number of seconds.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum RawDuration {
    Text(String),
    Seconds(f64),
}

/// The `mcpServers` (Claude Desktop, Cursor) or `servers` (VS Code) JSON file.
#[derive(Deserialize)]
struct RawJson {
    #[serde(rename = "mcpServers", alias = "servers", default)]
    servers: InFileOrder<RawJsonServer>,
}

/// A JSON object's entries in the order the file lists them (serde_json's own map sorts by key
/// unless its workspace-wide `preserve_order` feature is on). A repeated key keeps its first
/// place and its last value, as a map would.
struct InFileOrder<T>(Vec<(String, T)>);

impl<T> Default for InFileOrder<T> {
    fn default() -> Self {
        InFileOrder(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for InFileOrder<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Entries<T> {
            type Value = InFileOrder<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of servers by name")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut entries: Vec<(String, T)> = Vec::new();
                while let Some((name, value)) = map.next_entry::<String, T>()? {
                    match entries.iter_mut().find(|(n, _)| *n == name) {
                        Some(entry) => entry.1 = value,
                        None => entries.push((name, value)),
                    }
                }
                Ok(InFileOrder(entries))
            }
        }
        deserializer.deserialize_map(Entries(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct RawJsonServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(rename = "type", alias = "transport")]
    kind: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    disabled: bool,
}

// ---- building ---------------------------------------------------------------------------

struct Ctx<'a> {
    path: PathBuf,
    base: PathBuf,
    env: EnvLookup<'a>,
}

impl Ctx<'_> {
    fn invalid(&self, key: impl Into<String>, expected: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.clone(),
            key: key.into(),
            expected: expected.into(),
        }
    }

    fn resolve(&self, p: &str) -> PathBuf {
        let p = PathBuf::from(p);
        if p.is_absolute() {
            p
        } else {
            self.base.join(p)
        }
    }

    fn duration(&self, key: &str, raw: &RawDuration) -> Result<Duration, ConfigError> {
        parse_duration(raw).map_err(|why| {
            self.invalid(
                key,
                format!("a non-negative duration such as \"500ms\", \"30s\", \"1h\" ({why})"),
            )
        })
    }

    fn expand_map(
        &self,
        key: &str,
        map: BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        map.into_iter()
            .map(|(k, v)| {
                let full = format!("{key}.{k}");
                self.expand(&full, &v).map(|v| (k, v))
            })
            .collect()
    }

    /// `${VAR}` in the value of `key` replaced from the environment.
    fn expand(&self, key: &str, value: &str) -> Result<String, ConfigError> {
        expand_vars(value, self.env).map_err(|e| match e {
            ExpandError::Missing(var) => ConfigError::MissingVariable {
                path: self.path.clone(),
                key: key.to_owned(),
                var,
            },
            ExpandError::Unclosed => self.invalid(key, "a value whose `${` is closed by `}`"),
        })
    }

    /// The URL with `${VAR}` expanded first, so an unset variable is named rather than
    /// reported as a malformed URL.
    fn url(&self, key: &str, url: &str) -> Result<String, ConfigError> {
        let url = &self.expand(key, url)?;
        match reqwest::Url::parse(url) {
            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(url.to_owned()),
            Ok(parsed) => Err(self.invalid(
                key,
                format!("an http:// or https:// URL, not a {}: URL", parsed.scheme()),
            )),
            Err(e) => Err(self.invalid(key, format!("an http:// or https:// URL ({e})"))),
        }
    }
}

/// A URL fit to show: userinfo (`user:secret@`) and the query string (`?api_key=…`) are
/// replaced, since either may hold a secret; what is left still says which server it is.
/// A string that does not parse as a URL is cut at its first `?` and `@`-userinfo all the same.
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) if parsed.has_host() => {
            let had_userinfo = !parsed.username().is_empty() || parsed.password().is_some();
            let had_query = parsed.query().is_some();
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            let mut shown = parsed.to_string();
            if had_userinfo && let Some(at) = shown.find("://") {
                shown.insert_str(at + 3, "***@");
            }
            if had_query {
                shown.push_str("?***");
            }
            shown
        }
        _ => {
            let (base, query) = match url.split_once('?') {
                Some((base, _)) => (base, "?***"),
                None => (url, ""),
            };
            let base = match (base.find("://"), base.rfind('@')) {
                (Some(scheme), Some(at)) if at > scheme => {
                    format!("{}***@{}", &base[..scheme + 3], &base[at + 1..])
                }
                _ => base.to_owned(),
            };
            format!("{base}{query}")
        }
    }
}

/// `text` (an error message, a log line) with every `http://` or `https://` URL in it passed
/// through [`redact_url`].
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = ["http://", "https://"]
        .iter()
        .filter_map(|scheme| rest.find(scheme))
        .min()
    {
        out.push_str(&rest[..at]);
        let len = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .unwrap_or(rest.len() - at);
        // A URL at the end of a sentence or in brackets leaves its punctuation outside.
        let url = rest[at..at + len].trim_end_matches(['.', ',', ';', ':', '!', ')', ']']);
        out.push_str(&redact_url(url));
        rest = &rest[at + url.len()..];
    }
    out.push_str(rest);
    out
}

enum ExpandError {
    Missing(String),
    Unclosed,
}

/// `${VAR}` → the variable's value; `$${` is a literal `${`.
fn expand_vars(value: &str, env: EnvLookup<'_>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let end = after.find('}').ok_or(ExpandError::Unclosed)?;
            let name = &after[..end];
            let val = env(name).ok_or_else(|| ExpandError::Missing(name.to_owned()))?;
            out.push_str(&val);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn parse_duration(raw: &RawDuration) -> Result<Duration, String> {
    let (number, unit) = match raw {
        RawDuration::Seconds(s) => (*s, 1.0),
        RawDuration::Text(text) => {
            let text = text.trim();
            let split = text
                .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
                .unwrap_or(text.len());
            let (num, unit) = text.split_at(split);
            let number: f64 = num
                .parse()
                .map_err(|_| format!("`{text}` does not start with a number"))?;
            let unit = match unit.trim() {
                "ms" => 0.001,
                "s" | "" => 1.0,
                "m" | "min" => 60.0,
                "h" => 3600.0,
                other => return Err(format!("unknown unit `{other}`")),
            };
            (number, unit)
        }
    };
    let secs = number * unit;
    if !secs.is_finite() {
        return Err("it is not a finite number".to_owned());
    }
    if secs < 0.0 {
        return Err("it is negative".to_owned());
    }
    Duration::try_from_secs_f64(secs).map_err(|_| "it is too large".to_owned())
}

impl Config {
    /// Reads a config file: `.json` as `mcpServers` JSON, anything else as `roster.toml`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            Self::from_mcp_servers_json(&text, path, &process_env)
        } else {
            Self::from_toml(&text, path, &process_env)
        }
    }

    /// Parses `roster.toml` text; `path` is used in errors and to resolve relative paths.
    pub fn from_toml(text: &str, path: &Path, env: EnvLookup<'_>) -> Result<Self, ConfigError> {
        let raw: RawToml = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let ctx = Ctx {
            path: path.to_owned(),
            base: path.parent().map(Path::to_owned).unwrap_or_default(),
            env,
        };
        let gateway = build_gateway(&ctx, raw.gateway)?;
        let mut servers = BTreeMap::new();
        for (name, server) in raw.servers {
            let built = build_server(&ctx, &gateway, &name, server)?;
            servers.insert(name, built);
        }
        let max_file_size = match &raw.skills.max_file_size {
            None => crate::store::DEFAULT_MAX_SKILL_FILE_SIZE,
            Some(size) => parse_size(size).filter(|n| *n > 0).ok_or_else(|| {
                ctx.invalid(
                    "skills.max_file_size",
                    "a size above zero: bytes, or a number with KiB, MiB, KB or MB",
                )
            })?,
        };
        let skills = SkillsConfig {
            paths: raw.skills.paths.iter().map(|p| ctx.resolve(p)).collect(),
            max_file_size,
        };
        // serde's map loses the file's order; a second, untyped parse (order-preserving
        // tables) recovers it. The text parsed once already, so this cannot fail differently.
        let mut server_order: Vec<String> = toml::from_str::<toml::Table>(text)
            .ok()
            .and_then(|t| {
                t.get("servers")
                    .and_then(|s| s.as_table())
                    .map(|s| s.keys().cloned().collect())
            })
            .unwrap_or_default();
        server_order.retain(|name| servers.contains_key(name));
        if server_order.len() != servers.len() {
            server_order = servers.keys().cloned().collect();
        }
        let mut clients = Vec::with_capacity(raw.clients.len());
        for (i, c) in raw.clients.into_iter().enumerate() {
            if c.token_env.is_none() && c.token_sha256.is_none() {
                return Err(ctx.invalid(
                    format!("clients[{i}]"),
                    format!("`token_env` or `token_sha256` for client \"{}\"", c.name),
                ));
            }
            clients.push(ClientConfig {
                name: c.name,
                token_env: c.token_env,
                token_sha256: c.token_sha256,
                subscriptions: c.subscriptions,
                delta_notes: c.delta_notes,
            });
        }
        Ok(Config {
            source: Some(path.to_owned()),
            server_order,
            servers,
            gateway,
            skills,
            clients,
        })
    }

    /// Parses the `mcpServers` JSON of Claude Desktop / Cursor (or VS Code's `servers`).
    pub fn from_mcp_servers_json(
        text: &str,
        path: &Path,
        env: EnvLookup<'_>,
    ) -> Result<Self, ConfigError> {
        let raw: RawJson = serde_json::from_str(text).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let ctx = Ctx {
            path: path.to_owned(),
            base: path.parent().map(Path::to_owned).unwrap_or_default(),
            env,
        };
        let gateway = GatewayConfig::defaults(env);
        let mut servers = BTreeMap::new();
        let mut server_order = Vec::with_capacity(raw.servers.0.len());
        for (name, s) in raw.servers.0 {
            let transport = match s.kind.as_deref() {
                Some("http") | Some("streamable-http") | Some("streamableHttp") => {
                    Some("streamable-http".to_owned())
                }
                Some("sse") => Some("sse".to_owned()),
                Some("stdio") | None => None,
                Some(other) => {
                    return Err(ctx.invalid(
                        format!("mcpServers.{name}.type"),
                        format!("\"stdio\", \"http\" or \"sse\", not \"{other}\""),
                    ));
                }
            };
            let server = RawServer {
                command: s.command,
                args: s.args,
                env: s.env,
                cwd: s.cwd,
                url: s.url,
                transport,
                headers: s.headers,
                enabled: Some(!s.disabled),
                ..RawServer::default()
            };
            let key_name = format!("mcpServers.{name}");
            let built = build_server_keyed(&ctx, &gateway, &name, &key_name, server)?;
            server_order.push(name.clone());
            servers.insert(name, built);
        }
        Ok(Config {
            source: Some(path.to_owned()),
            server_order,
            servers,
            gateway,
            skills: SkillsConfig::default(),
            clients: Vec::new(),
        })
    }

    /// A configuration built in code: the given servers and default gateway settings.
    pub fn with_servers(servers: BTreeMap<String, ServerConfig>) -> Self {
        Config {
            source: None,
            server_order: servers.keys().cloned().collect(),
            servers,
            gateway: GatewayConfig::defaults(&process_env),
            skills: SkillsConfig::default(),
            clients: Vec::new(),
        }
    }
}

fn build_gateway(ctx: &Ctx<'_>, raw: RawGateway) -> Result<GatewayConfig, ConfigError> {
    let mut g = GatewayConfig::defaults(ctx.env);
    g.server_limits = build_server_limits(ctx, &raw)?;
    if let Some(naming) = raw.naming {
        g.naming = naming;
    }
    if let Some(sep) = raw.separator {
        g.separator = sep;
    }
    // The registry's own rule, checked here so the error names the file and the key.
    if g.naming_config().validate().is_err() {
        return Err(ctx.invalid("gateway.separator", "1 to 8 characters of [A-Za-z0-9_.-]"));
    }
    let dur = |key: &str, raw: &Option<RawDuration>, into: &mut Duration| {
        if let Some(raw) = raw {
            *into = ctx.duration(key, raw)?;
        }
        Ok::<(), ConfigError>(())
    };
    dur(
        "gateway.refresh_interval",
        &raw.refresh_interval,
        &mut g.refresh_interval,
    )?;
    dur("gateway.debounce", &raw.debounce, &mut g.debounce)?;
    dur(
        "gateway.call_timeout",
        &raw.call_timeout,
        &mut g.call_timeout,
    )?;
    dur(
        "gateway.backoff_initial",
        &raw.backoff_initial,
        &mut g.backoff_initial,
    )?;
    dur("gateway.backoff_max", &raw.backoff_max, &mut g.backoff_max)?;
    dur(
        "gateway.stable_period",
        &raw.stable_period,
        &mut g.stable_period,
    )?;
    dur(
        "gateway.startup_wait",
        &raw.startup_wait,
        &mut g.startup_wait,
    )?;
    if let Some(ping) = &raw.ping_interval {
        let d = ctx.duration("gateway.ping_interval", ping)?;
        g.ping_interval = (!d.is_zero()).then_some(d);
    }
    dur(
        "gateway.connect_timeout",
        &raw.connect_timeout,
        &mut g.connect_timeout,
    )?;
    dur(
        "gateway.list_timeout",
        &raw.list_timeout,
        &mut g.list_timeout,
    )?;
    dur("gateway.turn_wait", &raw.turn_wait, &mut g.turn_wait)?;
    for (key, value) in [
        ("gateway.call_timeout", g.call_timeout),
        ("gateway.connect_timeout", g.connect_timeout),
        ("gateway.list_timeout", g.list_timeout),
    ] {
        if value.is_zero() {
            return Err(ctx.invalid(key, "a duration above zero"));
        }
    }
    if g.backoff_max < g.backoff_initial {
        return Err(ctx.invalid(
            "gateway.backoff_max",
            "a duration no shorter than gateway.backoff_initial",
        ));
    }
    if let Some(n) = raw.crash_loop_after {
        if n == 0 {
            return Err(ctx.invalid("gateway.crash_loop_after", "a number of failures above 0"));
        }
        g.crash_loop_after = n;
    }
    // The environment switch wins over the file: it is how an operator turns re-listing off
    // without editing a shared config.
    if let Some(dynamic) = raw.dynamic_tools {
        g.dynamic_tools = dynamic && (ctx.env)("ROSTER_DYNAMIC_TOOLS").as_deref() != Some("0");
    }
    if let Some(subs) = raw.subscriptions {
        g.subscriptions = subs;
    }
    if let Some(listen) = raw.listen {
        g.listen = listen;
    }
    if let Some(notes) = raw.delta_notes {
        g.delta_notes = notes;
    }
    if let Some(hosts) = raw.allowed_hosts {
        g.allowed_hosts = hosts;
    }
    if let Some(origins) = raw.allowed_origins {
        g.allowed_origins = origins;
    }
    if let Some(size) = raw.page_size {
        if size == 0 {
            return Err(ctx.invalid("gateway.page_size", "a page size above 0"));
        }
        g.page_size = size;
    }
    dur("gateway.task_after", &raw.task_after, &mut g.task_after)?;
    dur("gateway.task_ttl", &raw.task_ttl, &mut g.task_ttl)?;
    if g.task_ttl.is_zero() {
        return Err(ctx.invalid("gateway.task_ttl", "a duration above zero"));
    }
    if let Some(max) = raw.max_tasks {
        g.max_tasks = max;
    }
    for (key, value, slot) in [
        (
            "gateway.max_connections",
            raw.max_connections,
            &mut g.max_connections,
        ),
        (
            "gateway.max_sessions",
            raw.max_sessions,
            &mut g.max_sessions,
        ),
        (
            "gateway.max_sessions_per_client",
            raw.max_sessions_per_client,
            &mut g.max_sessions_per_client,
        ),
    ] {
        if let Some(n) = value {
            if n == 0 {
                return Err(ctx.invalid(key, "a number above 0"));
            }
            *slot = n;
        }
    }
    for (key, value, slot) in [
        (
            "gateway.header_read_timeout",
            &raw.header_read_timeout,
            &mut g.header_read_timeout,
        ),
        (
            "gateway.body_read_timeout",
            &raw.body_read_timeout,
            &mut g.body_read_timeout,
        ),
        (
            "gateway.session_idle_timeout",
            &raw.session_idle_timeout,
            &mut g.session_idle_timeout,
        ),
    ] {
        dur(key, value, slot)?;
        if slot.is_zero() {
            return Err(ctx.invalid(key, "a duration above zero"));
        }
    }
    if let Some(var) = raw.admin_token_env {
        g.admin_token_env = Some(var);
    }
    if (ctx.env)("ROSTER_STATE_DIR").is_none_or(|d| d.is_empty())
        && let Some(dir) = raw.state_dir
    {
        g.state_dir = ctx.resolve(&dir);
    }
    if let Some(max) = raw.admin_max_line {
        if max < 1024 {
            return Err(ctx.invalid(
                "gateway.admin_max_line",
                "at least 1024 bytes (an admin request is one JSON line)",
            ));
        }
        g.admin_max_line = max;
    }
    Ok(g)
}

fn build_server(
    ctx: &Ctx<'_>,
    gateway: &GatewayConfig,
    name: &str,
    raw: RawServer,
) -> Result<ServerConfig, ConfigError> {
    if name.is_empty() || !name.bytes().all(roster_core::naming::is_name_byte) {
        return Err(ctx.invalid(
            format!("servers.{name}"),
            "a server name of [A-Za-z0-9_.-] characters",
        ));
    }
    build_server_keyed(ctx, gateway, name, &format!("servers.{name}"), raw)
}

fn build_server_keyed(
    ctx: &Ctx<'_>,
    gateway: &GatewayConfig,
    name: &str,
    key: &str,
    raw: RawServer,
) -> Result<ServerConfig, ConfigError> {
    // Said here, once: otherwise every tool of the server would get a hashed, unreadable name.
    if let Err(roster_core::naming::NamingError::ServerNameTooLong {
        len,
        separator,
        max,
        ..
    }) = gateway.naming_config().check_server_name(name)
    {
        return Err(ctx.invalid(
            key,
            format!(
                "a server name of at most {max} characters, not {len}: exposed names \
                 (`{name}{separator}tool`) are at most {} characters and need room for the tool",
                roster_core::naming::MAX_NAME_LEN
            ),
        ));
    }
    let transport = match (raw.command, raw.url) {
        (Some(_), Some(_)) => {
            return Err(ctx.invalid(
                key,
                "either `command` (a stdio server) or `url` (an HTTP server), not both",
            ));
        }
        (None, None) => {
            return Err(ctx.invalid(
                format!("{key}.command"),
                "a program to run (or `url` for an HTTP server)",
            ));
        }
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(ctx.invalid(format!("{key}.command"), "a non-empty program name"));
            }
            if raw.transport.as_deref().is_some_and(|t| t != "stdio") {
                return Err(ctx.invalid(
                    format!("{key}.transport"),
                    "no `transport` (or \"stdio\") for a `command` server",
                ));
            }
            if !raw.headers.is_empty() {
                return Err(ctx.invalid(format!("{key}.headers"), "headers only with `url`"));
            }
            TransportConfig::Stdio {
                command,
                args: raw.args,
                env: ctx.expand_map(&format!("{key}.env"), raw.env)?,
                cwd: raw.cwd.as_deref().map(|c| ctx.resolve(c)),
            }
        }
        (None, Some(url)) => {
            let url = ctx.url(&format!("{key}.url"), &url)?;
            if !raw.args.is_empty() || !raw.env.is_empty() || raw.cwd.is_some() {
                return Err(ctx.invalid(
                    key,
                    "`args`, `env` and `cwd` only with `command`, not with `url`",
                ));
            }
            let headers = ctx.expand_map(&format!("{key}.headers"), raw.headers)?;
            match raw.transport.as_deref() {
                None | Some("streamable-http") => TransportConfig::StreamableHttp { url, headers },
                Some("sse") => TransportConfig::Sse { url, headers },
                Some(other) => {
                    return Err(ctx.invalid(
                        format!("{key}.transport"),
                        format!("\"streamable-http\" or \"sse\", not \"{other}\""),
                    ));
                }
            }
        }
    };
    let tools = ToolFilter::new(raw.tools.allow, raw.tools.deny)
        .map_err(|e| ctx.invalid(format!("{key}.tools"), format!("glob patterns ({e})")))?;
    let tasks = TaskPolicy::new(&raw.tasks.required, &raw.tasks.forbidden)
        .map_err(|e| ctx.invalid(format!("{key}.tasks"), format!("glob patterns ({e})")))?;
    let timeout = |name: &str, raw: &Option<RawDuration>, default: Duration| {
        let value = match raw {
            Some(d) => ctx.duration(&format!("{key}.{name}"), d)?,
            None => default,
        };
        if value.is_zero() {
            return Err(ctx.invalid(format!("{key}.{name}"), "a duration above zero"));
        }
        Ok(value)
    };
    let call_timeout = timeout("call_timeout", &raw.call_timeout, gateway.call_timeout)?;
    let connect_timeout = timeout(
        "connect_timeout",
        &raw.connect_timeout,
        gateway.connect_timeout,
    )?;
    let list_timeout = timeout("list_timeout", &raw.list_timeout, gateway.list_timeout)?;
    let ping_interval = match &raw.ping_interval {
        Some(d) => {
            let d = ctx.duration(&format!("{key}.ping_interval"), d)?;
            (!d.is_zero()).then_some(d)
        }
        None => gateway.ping_interval,
    };
    Ok(ServerConfig {
        transport,
        enabled: raw.enabled.unwrap_or(true),
        tools,
        tasks,
        call_timeout,
        connect_timeout,
        list_timeout,
        ping_interval,
        era: raw.protocol.unwrap_or_default(),
        limits: gateway.server_limits.clone(),
    })
}

// ---- server limits ----------------------------------------------------------------------

/// What one server may cost roster: its notification rate, the size of its listing, how much
/// of its output reaches the log, and how long its process group gets to end. Past a bound
/// roster keeps working and says which bound was hit.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerLimits {
    /// Notifications a second a server may send; more are dropped (a `list_changed`
    /// coalesced) and counted (`notification_rate`).
    pub notification_rate: u32,
    /// Notifications a server may send at once after a quiet spell (`notification_burst`).
    pub notification_burst: u32,
    /// Tools kept from one listing; the rest are left out with a warning (`max_tools`).
    pub max_tools: usize,
    /// Bytes of one listing, its pages summed; a larger listing fails (`max_listing_bytes`).
    pub max_listing_bytes: usize,
    /// Bytes of one line of a server's stderr in roster's log; longer lines are cut
    /// (`max_log_line`).
    pub max_log_line: usize,
    /// How long a stdio server's process group has between SIGTERM and SIGKILL (`kill_grace`).
    pub kill_grace: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            notification_rate: 100,
            notification_burst: 200,
            max_tools: 10_000,
            max_listing_bytes: 32 * 1024 * 1024,
            max_log_line: 4096,
            kill_grace: Duration::from_secs(5),
        }
    }
}

/// `text` with every spelling of `url` (as configured, and as the URL parser writes it), and
/// its query string alone, replaced by [`redact_url`]'s form: for errors of HTTP libraries
/// that quote the URL they were given.
pub fn redact_url_in(text: &str, url: &str) -> String {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return text.to_owned();
    };
    let shown = redact_url(url);
    let mut out = text.replace(url, &shown).replace(parsed.as_str(), &shown);
    if let Some(query) = parsed.query().filter(|q| !q.is_empty()) {
        out = out.replace(query, "…");
    }
    if let Some(password) = parsed.password().filter(|p| !p.is_empty()) {
        out = out.replace(password, "…");
    }
    out
}

fn build_server_limits(ctx: &Ctx<'_>, raw: &RawGateway) -> Result<ServerLimits, ConfigError> {
    let mut limits = ServerLimits::default();
    let above_zero = |key: &str, value: Option<usize>, into: &mut usize| {
        match value {
            Some(0) => return Err(ctx.invalid(format!("gateway.{key}"), "a number above 0")),
            Some(n) => *into = n,
            None => {}
        }
        Ok(())
    };
    let mut rate = limits.notification_rate as usize;
    above_zero(
        "notification_rate",
        raw.notification_rate.map(|n| n as usize),
        &mut rate,
    )?;
    let mut burst = limits.notification_burst as usize;
    above_zero(
        "notification_burst",
        raw.notification_burst.map(|n| n as usize),
        &mut burst,
    )?;
    limits.notification_rate = u32::try_from(rate).unwrap_or(u32::MAX);
    limits.notification_burst = u32::try_from(burst).unwrap_or(u32::MAX);
    above_zero("max_tools", raw.max_tools, &mut limits.max_tools)?;
    above_zero(
        "max_listing_bytes",
        raw.max_listing_bytes,
        &mut limits.max_listing_bytes,
    )?;
    if let Some(line) = raw.max_log_line {
        if line < 64 {
            return Err(ctx.invalid("gateway.max_log_line", "a number of bytes of at least 64"));
        }
        limits.max_log_line = line;
    }
    if let Some(grace) = &raw.kill_grace {
        limits.kill_grace = ctx.duration("gateway.kill_grace", grace)?;
    }
    Ok(limits)
}

impl ServerConfig {
    /// A stdio server with default settings.
    pub fn stdio(command: impl Into<String>, args: Vec<String>) -> Self {
        ServerConfig {
            transport: TransportConfig::Stdio {
                command: command.into(),
                args,
                env: BTreeMap::new(),
                cwd: None,
            },
            enabled: true,
            tools: ToolFilter::default(),
            tasks: TaskPolicy::default(),
            call_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
            list_timeout: Duration::from_secs(30),
            ping_interval: Some(Duration::from_secs(30)),
            era: Era::Auto,
            limits: ServerLimits::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let env = env_of(&[("TOKEN", "s3cret"), ("HOME", "/home/u")]);
        Config::from_toml(text, Path::new("/etc/roster/roster.toml"), &env)
    }

    #[test]
    fn full_file_parses() {
        let config = parse(
            r#"
            [gateway]
            naming = "conditional"
            separator = "."
            refresh_interval = "2h"
            debounce = "250ms"
            subscriptions = ["eng"]

            [skills]
            paths = ["skills", "/abs/skills"]

            [servers.fs]
            command = "npx"
            args = ["-y", "fs"]
            env = { API = "Bearer ${TOKEN}", LIT = "$${NOPE}" }
            cwd = "work"
            tools.deny = ["delete_*"]

            [servers.remote]
            url = "https://example.com/mcp"
            headers = { Authorization = "Bearer ${TOKEN}" }
            call_timeout = 5

            [servers.old]
            url = "http://127.0.0.1:9/sse"
            transport = "sse"
            enabled = false
            "#,
        )
        .expect("valid config");
        assert_eq!(config.gateway.naming, NamingMode::Conditional);
        assert_eq!(config.server_order, vec!["fs", "remote", "old"]);
        assert_eq!(config.gateway.separator, ".");
        assert_eq!(config.gateway.refresh_interval, Duration::from_secs(7200));
        assert_eq!(config.gateway.debounce, Duration::from_millis(250));
        assert_eq!(
            config.skills.paths,
            vec![
                PathBuf::from("/etc/roster/skills"),
                PathBuf::from("/abs/skills")
            ]
        );
        let fs = &config.servers["fs"];
        let TransportConfig::Stdio { env, cwd, .. } = &fs.transport else {
            panic!("fs is stdio")
        };
        assert_eq!(env["API"], "Bearer s3cret");
        assert_eq!(env["LIT"], "${NOPE}");
        assert_eq!(cwd.as_deref(), Some(Path::new("/etc/roster/work")));
        assert!(!fs.tools.permits("delete_file"));
        assert!(fs.tools.permits("read_file"));
        let TransportConfig::StreamableHttp { headers, .. } = &config.servers["remote"].transport
        else {
            panic!("remote is streamable http")
        };
        assert_eq!(headers["Authorization"], "Bearer s3cret");
        assert_eq!(
            config.servers["remote"].call_timeout,
            Duration::from_secs(5)
        );
        assert!(matches!(
            config.servers["old"].transport,
            TransportConfig::Sse { .. }
        ));
        assert!(!config.servers["old"].enabled);
    }

    #[test]
    fn gateway_serving_keys_and_clients_parse() {
        let config = parse(
            r#"
            [gateway]
            listen = "127.0.0.1:9000"
            delta_notes = false
            page_size = 50

            [[clients]]
            name = "ide"
            token_env = "IDE_TOKEN"
            subscriptions = ["eng"]
            "#,
        )
        .expect("valid");
        assert_eq!(config.gateway.listen, "127.0.0.1:9000");
        assert!(!config.gateway.delta_notes);
        assert_eq!(config.gateway.page_size, 50);
        assert_eq!(config.clients.len(), 1);
        assert_eq!(config.clients[0].token_env.as_deref(), Some("IDE_TOKEN"));
        let err = parse("[[clients]]\nname = \"x\"\n").expect_err("no token");
        assert!(err.to_string().contains("clients[0]"), "{err}");
    }

    #[test]
    fn task_keys_parse_and_bad_ones_are_named() {
        let config = parse(
            r#"
            [gateway]
            task_after = "250ms"
            task_ttl = "10m"
            max_tasks = 3

            [servers.build]
            command = "build-server"
            tasks.required = ["build_*"]
            tasks.forbidden = ["build_quick", "ping"]
            "#,
        )
        .expect("valid");
        assert_eq!(config.gateway.task_after, Duration::from_millis(250));
        assert_eq!(config.gateway.task_ttl, Duration::from_secs(600));
        assert_eq!(config.gateway.max_tasks, 3);
        let tasks = &config.servers["build"].tasks;
        assert_eq!(tasks.of("build_all"), Some(TaskSupport::Required));
        assert_eq!(tasks.of("build_quick"), Some(TaskSupport::Forbidden));
        assert_eq!(tasks.of("ping"), Some(TaskSupport::Forbidden));
        assert_eq!(tasks.of("status"), None);
        assert_eq!(TaskSupport::parse("optional"), Some(TaskSupport::Optional));
        assert_eq!(TaskSupport::parse("always"), None);

        let err = parse("[gateway]\ntask_ttl = \"0s\"\n").expect_err("zero ttl");
        assert!(err.to_string().contains("gateway.task_ttl"), "{err}");
        let err = parse("[servers.x]\ncommand = \"x\"\ntasks.required = [\"[\"]\n")
            .expect_err("bad glob");
        assert!(err.to_string().contains("servers.x.tasks"), "{err}");
        let err =
            parse("[servers.x]\ncommand = \"x\"\ntasks.sometimes = []\n").expect_err("unknown key");
        assert!(err.to_string().contains("sometimes"), "{err}");
    }

    #[test]
    fn server_limits_parse_and_bad_ones_are_named() {
        let config = parse(
            "[gateway]\nnotification_rate = 5\nmax_tools = 3\nkill_grace = \"1s\"\n\
             [servers.x]\ncommand = \"x\"\n",
        )
        .expect("valid");
        let limits = &config.servers["x"].limits;
        assert_eq!(limits.notification_rate, 5);
        assert_eq!(limits.notification_burst, 200);
        assert_eq!(limits.max_tools, 3);
        assert_eq!(limits.kill_grace, Duration::from_secs(1));
        for (text, key) in [
            ("notification_rate = 0", "gateway.notification_rate"),
            ("max_listing_bytes = 0", "gateway.max_listing_bytes"),
            ("max_log_line = 10", "gateway.max_log_line"),
            ("kill_grace = \"soon\"", "gateway.kill_grace"),
        ] {
            let err = parse(&format!("[gateway]\n{text}\n")).expect_err(text);
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn secrets_in_urls_are_never_shown() {
        let url = "https://user:pw@example.com:8443/mcp?api_key=k3y&v=1#frag";
        let parsed = reqwest::Url::parse(url).expect("valid");
        let error =
            format!("error sending request for url ({parsed}): refused; k: api_key=k3y&v=1");
        let shown = redact_url_in(&error, url);
        assert!(!shown.contains("k3y") && !shown.contains("pw"), "{shown}");
        assert!(
            shown.contains("https://***@example.com:8443/mcp?***"),
            "{shown}"
        );
    }

    #[test]
    fn the_documented_example_parses() {
        let source = include_str!("config.rs");
        let start = source.find("//! ```toml\n").expect("example start") + "//! ```toml\n".len();
        let end = start + source[start..].find("//! ```\n").expect("example end");
        let example: String = source[start..end]
            .lines()
            .map(|l| {
                l.strip_prefix("//! ")
                    .unwrap_or(l.trim_start_matches("//!"))
            })
            .collect::<Vec<_>>()
            .join("\n");
        let env = env_of(&[
            ("FS_TOKEN", "a"),
            ("WEB_TOKEN", "b"),
            ("WEB_KEY", "k"),
            ("HOME", "/h"),
        ]);
        let config =
            Config::from_toml(&example, Path::new("/c/roster.toml"), &env).expect("example valid");
        assert_eq!(config.skills.max_file_size, 1 << 20);
        assert_eq!(config.gateway.admin_max_line, 65536);
        assert_eq!(config.server_order, vec!["fs", "web"]);
        assert_eq!(config.clients.len(), 1);
        assert_eq!(config.clients[0].delta_notes, Some(false));
        assert!(!config.servers["fs"].tools.permits("write_file"));
    }

    #[test]
    fn defaults_apply() {
        let config = parse("").expect("empty config is valid");
        assert_eq!(config.gateway.refresh_interval, Duration::from_secs(3600));
        assert_eq!(config.gateway.debounce, Duration::from_millis(500));
        assert!(config.gateway.dynamic_tools);
        assert_eq!(
            config.gateway.state_dir,
            PathBuf::from("/home/u/.local/state/roster")
        );
    }

    #[test]
    fn unknown_key_names_the_key_and_file() {
        let err = parse("[servers.a]\ncommand = \"x\"\ncomand = \"y\"\n").expect_err("typo");
        let text = err.to_string();
        assert!(text.contains("/etc/roster/roster.toml"), "{text}");
        assert!(text.contains("comand"), "{text}");
        let err = parse("[gateway]\nrefresh = \"1h\"\n").expect_err("unknown gateway key");
        assert!(err.to_string().contains("refresh"), "{err}");
    }

    #[test]
    fn missing_command_is_an_error() {
        let err = parse("[servers.a]\nargs = [\"x\"]\n").expect_err("no command");
        assert!(
            matches!(&err, ConfigError::Invalid { key, .. } if key == "servers.a.command"),
            "{err}"
        );
        assert!(err.to_string().contains("a program to run"), "{err}");
    }

    #[test]
    fn bad_url_is_an_error() {
        for url in ["not a url", "ftp://example.com/x", "127.0.0.1:8080"] {
            let err = parse(&format!("[servers.a]\nurl = \"{url}\"\n")).expect_err(url);
            assert!(
                matches!(&err, ConfigError::Invalid { key, .. } if key == "servers.a.url"),
                "{url}: {err}"
            );
        }
    }

    #[test]
    fn variables_are_expanded_in_urls_and_an_unset_one_is_named() {
        let config = parse("[servers.a]\nurl = \"https://h.example/${TOKEN}/mcp\"\n")
            .expect("a set variable expands");
        match &config.servers["a"].transport {
            TransportConfig::StreamableHttp { url, .. } => {
                assert_eq!(url, "https://h.example/s3cret/mcp");
            }
            other => panic!("not an HTTP server: {other:?}"),
        }
        let err = parse("[servers.a]\nurl = \"${MCP_URL}\"\n").expect_err("unset var");
        match &err {
            ConfigError::MissingVariable { key, var, .. } => {
                assert_eq!((key.as_str(), var.as_str()), ("servers.a.url", "MCP_URL"));
            }
            other => panic!("wrong error: {other}"),
        }
        assert!(!err.to_string().contains("relative URL"), "{err}");
    }

    #[test]
    fn skill_file_size_reads_bytes_and_units() {
        for (text, bytes) in [
            ("2048", 2048),
            ("\"512KiB\"", 512 * 1024),
            ("\"2MB\"", 2_000_000),
        ] {
            let config = parse(&format!("[skills]\nmax_file_size = {text}\n")).expect(text);
            assert_eq!(config.skills.max_file_size, bytes, "{text}");
        }
        for bad in ["0", "\"lots\"", "\"1 parsec\""] {
            let err = parse(&format!("[skills]\nmax_file_size = {bad}\n")).expect_err(bad);
            assert!(err.to_string().contains("skills.max_file_size"), "{err}");
        }
    }

    #[test]
    fn a_server_name_that_leaves_no_room_for_tools_is_refused() {
        let long = "s".repeat(62);
        let err = parse(&format!("[servers.{long}]\ncommand = \"x\"\n")).expect_err("too long");
        let text = err.to_string();
        assert!(text.contains(&format!("servers.{long}")), "{text}");
        assert!(text.contains("at most 61"), "{text}");
        let fits = "s".repeat(61);
        assert!(parse(&format!("[servers.{fits}]\ncommand = \"x\"\n")).is_ok());
        let never = format!("[gateway]\nnaming = \"never\"\n\n[servers.{long}]\ncommand = \"x\"\n");
        assert!(
            parse(&never).is_ok(),
            "bare names need no room for a prefix"
        );
    }

    #[test]
    fn missing_variable_names_it() {
        let err = parse("[servers.a]\ncommand = \"x\"\nenv = { K = \"${NOT_SET}\" }\n")
            .expect_err("unset var");
        match &err {
            ConfigError::MissingVariable { key, var, .. } => {
                assert_eq!(key, "servers.a.env.K");
                assert_eq!(var, "NOT_SET");
            }
            other => panic!("wrong error: {other}"),
        }
        assert!(err.to_string().contains("NOT_SET"));
        let err = parse("[servers.a]\nurl = \"http://h/\"\nheaders = { A = \"${X\" }\n")
            .expect_err("unclosed");
        assert!(err.to_string().contains("servers.a.headers.A"), "{err}");
    }

    #[test]
    fn separator_follows_the_registry_rule_and_names_the_key() {
        for bad in ["", "123456789", "a b", "::"] {
            let err = parse(&format!("[gateway]\nseparator = {bad:?}\n")).expect_err(bad);
            assert!(
                matches!(&err, ConfigError::Invalid { key, .. } if key == "gateway.separator"),
                "{bad:?}: {err}"
            );
            assert!(err.to_string().contains("roster.toml"), "{err}");
        }
        let config = parse("[gateway]\nseparator = \"12345678\"\n").expect("8 characters");
        assert_eq!(config.gateway.separator, "12345678");
        config
            .gateway
            .naming_config()
            .validate()
            .expect("the registry accepts it");
    }

    #[test]
    fn huge_or_non_finite_durations_are_errors_naming_the_key() {
        for (text, why) in [
            ("[gateway]\nrefresh_interval = 1e20\n", "too large"),
            (
                "[gateway]\ndebounce = \"99999999999999999999h\"\n",
                "too large",
            ),
            ("[gateway]\ndebounce = inf\n", "not a finite number"),
            ("[gateway]\ndebounce = nan\n", "not a finite number"),
        ] {
            let err = parse(text).expect_err("rejected");
            assert!(matches!(&err, ConfigError::Invalid { .. }), "{err}");
            let shown = err.to_string();
            assert!(shown.contains("gateway."), "{shown}");
            assert!(shown.contains(why), "{shown}");
            assert!(!shown.contains("it is negative"), "{shown}");
        }
    }

    #[test]
    fn negative_or_bad_durations_are_errors() {
        let err = parse("[gateway]\ndebounce = \"-5ms\"\n").expect_err("negative");
        assert!(err.to_string().contains("gateway.debounce"), "{err}");
        assert!(err.to_string().contains("negative"), "{err}");
        let err = parse("[gateway]\ndebounce = -1\n").expect_err("negative number");
        assert!(err.to_string().contains("gateway.debounce"), "{err}");
        let err = parse("[gateway]\nrefresh_interval = \"1 fortnight\"\n").expect_err("unit");
        assert!(err.to_string().contains("fortnight"), "{err}");
    }

    #[test]
    fn command_and_url_together_is_an_error() {
        let err = parse("[servers.a]\ncommand = \"x\"\nurl = \"http://h/\"\n").expect_err("both");
        assert!(err.to_string().contains("not both"), "{err}");
    }

    #[test]
    fn dynamic_tools_env_switch_wins() {
        let env = env_of(&[("ROSTER_DYNAMIC_TOOLS", "0")]);
        let config = Config::from_toml(
            "[gateway]\ndynamic_tools = true\n",
            Path::new("r.toml"),
            &env,
        )
        .expect("valid");
        assert!(!config.gateway.dynamic_tools);
    }

    #[test]
    fn state_dir_env_wins() {
        let env = env_of(&[("ROSTER_STATE_DIR", "/var/roster")]);
        let config = Config::from_toml(
            "[gateway]\nstate_dir = \"here\"\n",
            Path::new("/c/r.toml"),
            &env,
        )
        .expect("valid");
        assert_eq!(config.gateway.state_dir, PathBuf::from("/var/roster"));
        let config = parse("[gateway]\nstate_dir = \"here\"\n").expect("valid");
        assert_eq!(config.gateway.state_dir, PathBuf::from("/etc/roster/here"));
    }

    #[test]
    fn claude_desktop_json_reads_as_is() {
        let env = env_of(&[("TOKEN", "t")]);
        let config = Config::from_mcp_servers_json(
            r#"{
              "mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "x"], "env": {"K": "${TOKEN}"}},
                "web": {"type": "http", "url": "https://e.com/mcp", "headers": {"A": "b"}},
                "legacy": {"type": "sse", "url": "http://127.0.0.1:1/sse", "disabled": true}
              },
              "globalShortcut": "Ctrl+Space"
            }"#,
            Path::new("claude_desktop_config.json"),
            &env,
        )
        .expect("valid json");
        assert_eq!(config.servers.len(), 3);
        let TransportConfig::Stdio { env, .. } = &config.servers["fs"].transport else {
            panic!("fs is stdio")
        };
        assert_eq!(env["K"], "t");
        assert!(matches!(
            config.servers["web"].transport,
            TransportConfig::StreamableHttp { .. }
        ));
        assert!(!config.servers["legacy"].enabled);
        assert_eq!(config.server_order, ["fs", "web", "legacy"], "file order");
    }

    #[test]
    fn json_servers_keep_file_order_and_a_repeat_keeps_its_first_place() {
        let config = Config::from_mcp_servers_json(
            r#"{"mcpServers": {
                "zeta": {"command": "z"},
                "alpha": {"command": "a"},
                "zeta": {"command": "z2"}
            }}"#,
            Path::new("mcp.json"),
            &env_of(&[]),
        )
        .expect("valid json");
        assert_eq!(config.server_order, ["zeta", "alpha"]);
        let TransportConfig::Stdio { command, .. } = &config.servers["zeta"].transport else {
            panic!("zeta is stdio")
        };
        assert_eq!(command, "z2");
    }

    #[test]
    fn json_errors_name_the_key() {
        let env = env_of(&[]);
        let err = Config::from_mcp_servers_json(
            r#"{"mcpServers": {"x": {"args": []}}}"#,
            Path::new("c.json"),
            &env,
        )
        .expect_err("no command");
        assert!(err.to_string().contains("mcpServers.x.command"), "{err}");
        assert!(err.to_string().contains("c.json"), "{err}");
    }

    #[test]
    fn allow_and_deny_combine() {
        let f = ToolFilter::new(
            vec!["read_*".into(), "list".into()],
            vec!["read_secret*".into()],
        )
        .expect("valid globs");
        assert!(f.permits("read_file"));
        assert!(f.permits("list"));
        assert!(!f.permits("write_file"));
        assert!(!f.permits("read_secrets"));
    }

    #[test]
    fn redacted_urls_keep_the_server_but_not_its_secrets() {
        assert_eq!(
            redact_url("https://bob:hunter2@example.com:8443/mcp?api_key=abc#x"),
            "https://***@example.com:8443/mcp?***"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:9/mcp"),
            "http://127.0.0.1:9/mcp"
        );
        let text = "error sending request for url (https://example.com/mcp?api_key=abc): refused.";
        let shown = redact_urls(text);
        assert!(!shown.contains("abc"), "{shown}");
        assert_eq!(
            shown,
            "error sending request for url (https://example.com/mcp?***): refused."
        );
        assert_eq!(redact_urls("no url here"), "no url here");
    }
}
