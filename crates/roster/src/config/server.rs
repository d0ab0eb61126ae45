//! One `[servers.NAME]` entry as roster uses it: how roster reaches the server
//! ([`TransportConfig`], a stdio server's [`Sandbox`] included), its timeouts, limits, pins,
//! OAuth and skill sync.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{NewTools, PinPolicy, Sandbox, TaskPolicy, ToolFilter};

/// One `[servers.NAME]` table.
#[derive(Debug, Clone, PartialEq)]
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
    /// The shortest a listing of this server is held, whatever its `ttlMs` (from `[gateway]`).
    pub min_ttl: Duration,
    /// Which protocol lifecycle to use (`protocol = "auto" | "legacy" | "modern"`).
    pub era: Era,
    /// What this server may cost roster (from `[gateway]`).
    pub limits: ServerLimits,
    /// What a changed tool definition does (`pin`; default from `[gateway]`).
    pub pin: PinPolicy,
    /// What a tool never seen before does (`new_tools`; default from `[gateway]`).
    pub new_tools: NewTools,
    /// How roster authorizes to an HTTP server that asks for OAuth (`auth = "oauth"` or an
    /// `[servers.NAME.oauth]` table); `None`: only the static `headers`.
    pub oauth: Option<OAuthConfig>,
    /// Whether and which of the server's skills (SEP-2640) join roster's catalog (`skills`).
    pub skills: SkillSync,
}

/// `skills = true | false`, or `[servers.NAME.skills]`: how a server's skills (SEP-2640
/// `skills/list`, or its `skill://.../SKILL.md` resources) join roster's catalog, as
/// `NAME/<the skill's path at the server>`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SkillSync {
    /// `false` takes none of the server's skills (its `skill://` resources stay hidden too).
    pub enabled: bool,
    /// Which skills are taken, by their path at the server (`pdf/forms`).
    pub filter: ToolFilter,
    /// The subscriptions that may see a synced skill that says nothing of its visibility
    /// (empty: everyone).
    pub visibility: Vec<String>,
}

impl SkillSync {
    /// Every skill, seen by everyone that may see it by its own front matter.
    pub fn all() -> Self {
        SkillSync {
            enabled: true,
            ..SkillSync::default()
        }
    }
}

/// How roster, as an OAuth client, gets tokens for one server (`[servers.NAME.oauth]`).
///
/// Secrets are named, never written: `client_secret_env` is a variable read when a token is
/// asked for. Everything not set is discovered from the server (RFC 9728, RFC 8414).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    /// A client id registered with the authorization server out of band; unset: a client ID
    /// metadata document (`client_metadata_url`) or dynamic client registration.
    pub client_id: Option<String>,
    /// The environment variable holding the pre-registered client's secret.
    pub client_secret_env: Option<String>,
    /// The scopes to ask for; empty: the server's `WWW-Authenticate` or `scopes_supported`.
    pub scopes: Vec<String>,
    /// The loopback port `roster auth login` receives the redirect on; `None`: any free one.
    pub redirect_port: Option<u16>,
    /// The HTTPS URL of roster's client ID metadata document, used when the authorization
    /// server supports them.
    pub client_metadata_url: Option<String>,
    /// How tokens are got. (Where they are kept is the store's: `crate::store::Stores`.)
    pub grant: OAuthGrant,
}

impl OAuthConfig {
    /// OAuth with everything discovered (dynamic client registration, the server's scopes,
    /// any free loopback port): what `auth = "oauth"` says, for a caller without a config
    /// file (e.g. a conformance probe).
    pub fn new() -> Self {
        OAuthConfig {
            client_id: None,
            client_secret_env: None,
            scopes: Vec::new(),
            redirect_port: None,
            client_metadata_url: None,
            grant: OAuthGrant::AuthorizationCode,
        }
    }
}

impl Default for OAuthConfig {
    fn default() -> Self {
        OAuthConfig::new()
    }
}

/// The OAuth grant roster uses with a server (`grant`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    /// A person logs in once with `roster auth login` (authorization code with PKCE).
    #[default]
    AuthorizationCode,
    /// Machine to machine: roster asks for tokens itself with `client_id` and its secret.
    ClientCredentials,
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
        /// What it may touch when it runs sandboxed (`[servers.NAME.sandbox]`, else
        /// `[gateway] sandbox`); `None`: it runs as roster's plain child.
        sandbox: Option<Box<Sandbox>>,
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

impl ServerConfig {
    /// A streamable HTTP server at `url` with default settings.
    pub fn http(url: impl Into<String>) -> Self {
        ServerConfig {
            transport: TransportConfig::StreamableHttp {
                url: url.into(),
                headers: BTreeMap::new(),
            },
            ..ServerConfig::stdio("", Vec::new())
        }
    }

    /// A stdio server with default settings.
    pub fn stdio(command: impl Into<String>, args: Vec<String>) -> Self {
        ServerConfig {
            transport: TransportConfig::Stdio {
                command: command.into(),
                args,
                env: BTreeMap::new(),
                cwd: None,
                sandbox: None,
            },
            enabled: true,
            tools: ToolFilter::default(),
            tasks: TaskPolicy::default(),
            call_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
            list_timeout: Duration::from_secs(30),
            ping_interval: Some(Duration::from_secs(30)),
            min_ttl: roster_core::schedule::DEFAULT_MIN_TTL,
            era: Era::Auto,
            limits: ServerLimits::default(),
            pin: PinPolicy::default(),
            new_tools: NewTools::default(),
            oauth: None,
            skills: SkillSync::all(),
        }
    }
}
