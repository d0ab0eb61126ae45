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
//! min_ttl = "5s"               # ... but at least this long: a server is revalidated at most once
//!                              #   per min_ttl however short its ttlMs (0 included)
//! debounce = "500ms"           # list_changed: at once, then one trailing edge; negative is an error
//! dynamic_tools = true         # ROSTER_DYNAMIC_TOOLS=0 turns re-listing on list_changed off
//! subscriptions = ["eng"]      # default subscriptions of stdio clients
//! state_dir = "state"          # $ROSTER_STATE_DIR wins; default $XDG_STATE_HOME/roster
//! sandbox = false              # true or a table: the sandbox of every stdio server that does not say
//! admin_max_line = 65536       # longest request line the admin socket reads (bytes)
//! call_timeout = "60s"         # per tools/call; notifications/cancelled on expiry
//! connect_timeout = "30s"      # spawn/open + handshake
//! list_timeout = "30s"         # per tools/list page
//! turn_wait = "10s"            # a request waits this long for the listings it needs
//! ping_interval = "30s"        # legacy-era health ping; "0s" = off
//! backoff_initial = "1s"       # restart / re-list backoff after a failure
//! backoff_max = "5m"           # also the retry period of a crash loop
//! stable_period = "60s"        # up this long = failures forgotten
//! crash_loop_after = 5         # failures without a stable period → crash-loop
//! startup_wait = "10s"         # Roster::start waits this long for first connections (serve: not)
//! listen = "127.0.0.1:8931"    # the gateway's serving keys, kept here for it:
//! delta_notes = true           #   listen, delta_notes, allowed_hosts, allowed_origins,
//! page_size = 1000             #   page_size (items per list page at most) and page_bytes
//! page_bytes = 1048576         #   (a page's items' JSON text at most; a page holds one at least)
//! tools_mode = "all"           # "search": tools/list holds the native tools, the `always` tools
//!                              #   and search_tools / describe_tools / call_tool; every tool
//!                              #   stays callable by name
//! always = ["fs__read_*"]      # in search mode, tools that stay listed (globs on exposed names)
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
//! pin = "warn"                 # a tool whose definition changed since it was pinned: "warn"
//!                              #   serves it and tells you, "approve" withholds it until
//!                              #   `roster tools approve`, "off" pins nothing
//! new_tools = "trust"          # a tool never seen: "trust" pins it, "approve" waits for you
//! watch_config = false         # reload when this file changes (SIGHUP and `roster reload` always do)
//! metrics = true               # Prometheus metrics at GET /metrics; false records nothing
//! ui_listen = "127.0.0.1:8940"  # also serve the dashboard (/ui) here (unset: /ui of --http only)
//! metrics_listen = "127.0.0.1:9464"  # also serve /metrics here: plain HTTP, no auth (unset: not)
//! metrics_tool_labels = false  # true: call metrics also labelled by exposed tool name
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
//! # call_timeout, connect_timeout, list_timeout, ping_interval, min_ttl, pin, new_tools override
//! # [gateway] per server
//! [servers.fs.sandbox]         # least privilege (or `sandbox = true`; `false`: none)
//! read = ["docs"]              # readable besides system dirs, its install dir and cwd
//! write = ["work"]             # writable besides its private HOME and TMPDIR
//! network = "none"             # or "all"; connect = [443] opens TCP ports with "none"
//! unix_sockets = false         # true: it may open UNIX sockets (a local daemon's)
//! env = ["FS_LICENSE"]         # passed from roster's environment
//! memory = "512MiB"            # processes, open_files: limits too
//! required = true              # false: run with what the kernel enforces, warning
//!
//! [servers.web]                # an HTTP server
//! url = "https://example.com/mcp?key=${WEB_KEY}"   # ${VAR} here too
//! transport = "streamable-http"   # or "sse" (legacy HTTP+SSE)
//! headers = { Authorization = "Bearer ${WEB_TOKEN}" }
//!
//! [servers.linear]             # an HTTP server behind OAuth: `roster auth login linear` once;
//! url = "https://mcp.linear.app/mcp"   # tokens live in <state_dir>/oauth/tokens.sqlite3 (0600)
//! auth = "oauth"               # discovery, registration, scopes: all from the server's 401
//!
//! [servers.corp]
//! url = "https://mcp.corp.example/mcp"
//! transport = "sse"            # OAuth works on both transports
//! [servers.corp.oauth]         # what the server does not tell (every key optional)
//! client_id = "roster"         # pre-registered; else client_metadata_url (when the authorization
//!                              #   server takes client ID metadata documents), else dynamic registration
//! client_secret_env = "CORP_SECRET"  # the client's secret, from this variable (unset: an error)
//! scopes = ["mcp:tools"]       # default: the 401's WWW-Authenticate scope, else scopes_supported
//! redirect_port = 8765         # the loopback port `roster auth login` listens on (default: any free one)
//! client_metadata_url = "https://roster.example/client.json"
//! grant = "authorization_code" # or "client_credentials": roster gets its tokens itself (needs
//!                              #   client_id and client_secret_env; no login)
//!
//! [[clients]]                  # who may connect to the gateway over HTTP
//! name = "ide"
//! token_env = "IDE_TOKEN"      # or token_sha256 = "…"
//! subscriptions = ["eng"]
//! delta_notes = false          # this client's tool results carry no change note (default: [gateway])
//! tools_mode = "search"        # this client's tools_mode and always (default: [gateway])
//! tools.allow = ["fs__read_*", "list_skills"]  # globs on exposed names (native tools too); what a
//! tools.deny = ["*_secret"]    #   client may not use answers exactly as what does not exist
//! prompts.deny = ["web__*"]    # exposed prompt names
//! resources.allow = ["file://*"]  # resource URIs (and resource templates' URI templates)
//!
//! [auth]                       # roster as an OAuth 2.1 resource server: JWT access tokens too
//! issuers = ["https://idp.example.com"]  # accepted `iss`; keys from each one's metadata (RFC 8414
//!                              #   oauth-authorization-server, else openid-configuration → jwks_uri)
//! audience = "https://roster.example.com/mcp"  # roster's own URL: `aud` must hold it
//! # jwks_url = "https://idp.example.com/jwks"  # the signing keys, instead of discovering them
//! leeway = "60s"               # clock skew allowed on exp / nbf
//! required_scopes = ["mcp"]    # a token without them gets 403 insufficient_scope
//! scopes_supported = ["mcp", "mcp:read"]  # in the metadata (default: required + rules' scopes)
//!
//! [[auth.rules]]               # who a token makes its caller: the first rule whose conditions
//! scope = "mcp:read"           #   all hold (scope held; claim equals or holds value; subject);
//! claim = "groups"             #   no rule matches: the subject, [gateway] subscriptions, no limits
//! value = "eng"
//! name = "eng-{sub}"           # the identity ({sub}: the token's subject; default "{sub}")
//! subscriptions = ["eng"]
//! tools.allow = ["fs__read_*"] # tools / prompts / resources allow/deny, as for [[clients]]
//! ```

mod auth;
mod ctx;
pub(crate) mod diff;
mod duration;
mod env;
mod filter;
mod mcp_json;
mod metrics;
mod raw;
mod raw_gateway;
mod raw_server;
mod redact;
mod sandbox;
mod server;
mod state_dir;
pub mod store_tls;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use auth::{AuthConfig, AuthRule, DEFAULT_LEEWAY};
pub use diff::{ConfigChanges, changes};
pub use duration::parse_duration;
pub use env::EnvLookup;
pub use filter::{AlwaysListed, Permissions, TaskPolicy, TaskSupport, ToolFilter, ToolsMode};
pub use metrics::MetricsConfig;
pub use redact::{redact_url, redact_url_in, redact_urls};
pub use sandbox::{Network, Sandbox};
pub use server::{
    Era, OAuthConfig, OAuthGrant, ServerConfig, ServerLimits, SkillSync, TransportConfig,
};
pub use state_dir::state_dir_for;

use env::process_env;

/// The longest request line the admin socket reads, when `admin_max_line` does not say. A
/// request is a few dozen bytes; the bound only keeps a stray writer from growing the
/// gateway's memory.
pub const DEFAULT_ADMIN_MAX_LINE: usize = 64 * 1024;

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

impl ConfigError {
    /// Whether this says only that there is no file at all (as opposed to a file roster cannot
    /// use, which must be reported as what it is).
    pub fn is_missing_file(&self) -> bool {
        matches!(self, ConfigError::Io { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound)
    }
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
    /// The `[auth]` table: JWT access tokens roster takes besides the `[[clients]]` tokens.
    pub auth: Option<AuthConfig>,
    /// The `[store]` table: the PostgreSQL database replicas share. `None`: everything stays in
    /// this process and its state directory.
    pub store: Option<StoreConfig>,
}

/// The largest skill file roster reads, when `[skills] max_file_size` does not say (1 MiB).
pub const DEFAULT_MAX_SKILL_FILE_SIZE: u64 = 1024 * 1024;

/// `[store]`: where replicas share state (see `crate::store::postgres`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// `postgres://USER@HOST:PORT/DATABASE`, without a password.
    pub url: String,
    /// The environment variable holding the password, read at start.
    pub password_env: Option<String>,
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
    /// What this client may use (`tools`, `prompts`, `resources` allow/deny).
    pub permissions: Permissions,
    /// This client's `tools_mode`; `None` follows `[gateway] tools_mode`.
    pub tools_mode: Option<ToolsMode>,
    /// This client's `always`; `None` follows `[gateway] always`.
    pub always: Option<AlwaysListed>,
}

pub use roster_core::NamingMode;
pub use roster_core::pin::{NewTools, PinPolicy};
use roster_core::{BackoffConfig, NamingConfig, ScheduleConfig};
/// How the gateway cuts a list result into pages (`gateway.page_size`, `gateway.page_bytes`).
/// A page's size in bytes bounds what a client must read at once (an rmcp client drops a stdio
/// line over 16 MiB); the count keeps pages of small items few.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLimits {
    /// Items per page at most.
    pub size: usize,
    /// The page's items' JSON text at most, unless its first item alone is longer.
    pub bytes: usize,
}

impl Default for PageLimits {
    fn default() -> Self {
        PageLimits {
            size: 1000,
            bytes: 1 << 20,
        }
    }
}

impl PageLimits {
    /// Where the page starting at `start` in a list of `len` items ends: after `size` items
    /// at most, and before the item that would take the items' text past `bytes`
    /// (`item_len(i)` is item `i`'s length as JSON text). A page holds one item at least.
    pub fn end(&self, start: usize, len: usize, mut item_len: impl FnMut(usize) -> usize) -> usize {
        let last = start.saturating_add(self.size.max(1)).min(len);
        let mut bytes = 0usize;
        for i in start..last {
            bytes = bytes.saturating_add(item_len(i));
            if bytes > self.bytes && i > start {
                return i;
            }
        }
        last
    }
}

/// The `[gateway]` table.
#[derive(Debug, Clone, PartialEq)]
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
    /// The sandbox of every stdio server that does not say (`sandbox = true` or a table);
    /// `None`: unsandboxed unless a server asks.
    pub sandbox: Option<Sandbox>,
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
    /// The shortest a listing is held whatever the server's `ttlMs` says: a server is
    /// revalidated at most once per `min_ttl` (per server too: `[servers.NAME] min_ttl`).
    pub min_ttl: Duration,
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
    /// Page size for the gateway's `tools/list` and other list results: items per page.
    pub page_size: usize,
    /// A list page also ends before the item that would take its items' JSON text past this.
    pub page_bytes: usize,
    /// What a client's `tools/list` holds: every tool, or the search tools (`search`).
    pub tools_mode: ToolsMode,
    /// In search mode, the tools that stay listed (globs on exposed names).
    pub always: AlwaysListed,
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
    /// Also serve the dashboard (`/ui`, nothing else) on this address (`ui_listen`); the admin
    /// token of `admin_token_env` and `roster ui` links log in there.
    pub ui_listen: Option<String>,
    /// What one server may cost roster (every server gets these).
    pub server_limits: ServerLimits,
    /// What a changed tool definition does, for servers that do not say (`pin`, default
    /// `warn`).
    pub pin: PinPolicy,
    /// What a tool never seen before does, for servers that do not say (`new_tools`, default
    /// `trust`).
    pub new_tools: NewTools,
    /// Reload when the config file changes (`watch_config`, default false); `SIGHUP` and
    /// `roster reload` always do.
    pub watch_config: bool,
    /// Prometheus metrics: `metrics`, `metrics_listen`, `metrics_tool_labels`.
    pub metrics: MetricsConfig,
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
            min_ttl: self.min_ttl,
        }
    }

    /// How list results are cut into pages.
    pub fn pages(&self) -> PageLimits {
        PageLimits {
            size: self.page_size,
            bytes: self.page_bytes,
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
            state_dir: state_dir::resolve(env, None),
            sandbox: None,
            admin_max_line: DEFAULT_ADMIN_MAX_LINE,
            call_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
            list_timeout: Duration::from_secs(30),
            turn_wait: Duration::from_secs(10),
            min_ttl: roster_core::schedule::DEFAULT_MIN_TTL,
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
            page_size: PageLimits::default().size,
            page_bytes: PageLimits::default().bytes,
            tools_mode: ToolsMode::All,
            always: AlwaysListed::default(),
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
            ui_listen: None,
            server_limits: ServerLimits::default(),
            pin: PinPolicy::default(),
            new_tools: NewTools::default(),
            watch_config: false,
            metrics: MetricsConfig::default(),
        }
    }
}

/// The `[skills]` table.
#[derive(Debug, Clone, PartialEq)]
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
            max_file_size: DEFAULT_MAX_SKILL_FILE_SIZE,
        }
    }
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

    /// A configuration built in code: the given servers and default gateway settings.
    pub fn with_servers(servers: BTreeMap<String, ServerConfig>) -> Self {
        Config {
            source: None,
            server_order: servers.keys().cloned().collect(),
            servers,
            gateway: GatewayConfig::defaults(&process_env),
            skills: SkillsConfig::default(),
            clients: Vec::new(),
            auth: None,
            store: None,
        }
    }
}

#[cfg(test)]
mod tests;
