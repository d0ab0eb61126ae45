//! The configuration as serde reads it (`Raw*`, TOML with `deny_unknown_fields`), and the
//! mapping from it to [`Config`], checking what serde cannot: one of `command`/`url`, URL
//! syntax, durations, bounds and `${VAR}` expansion. Every error names the file and the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use indexmap::IndexMap;
use serde::Deserialize;

use super::auth::{RawAuth, RawPermissions, build_auth, build_permissions};
use super::duration::{parse_duration, seconds};
use super::env::{EnvLookup, ExpandError, expand_vars};
use super::filter::AlwaysListed;
use super::state_dir;
use super::{
    ClientConfig, Config, ConfigError, Era, GatewayConfig, NamingMode, OAuthConfig, OAuthGrant,
    ServerConfig, ServerLimits, SkillSync, SkillsConfig, StoreConfig, TaskPolicy, ToolFilter,
    ToolsMode, TransportConfig,
};
use roster_core::pin::{NewTools, PinPolicy};

/// The least `gateway.page_bytes`: room for a tool of a few lines.
const MIN_PAGE_BYTES: usize = 1024;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawToml {
    /// In the file's order: the first server keeps a bare tool name under `naming = "never"`.
    #[serde(default)]
    servers: IndexMap<String, RawServer>,
    #[serde(default)]
    gateway: RawGateway,
    #[serde(default)]
    skills: RawSkills,
    #[serde(default)]
    clients: Vec<RawClient>,
    auth: Option<RawAuth>,
    store: Option<RawStore>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStore {
    url: String,
    password_env: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    pub(super) cwd: Option<String>,
    pub(super) url: Option<String>,
    pub(super) transport: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    pub(super) enabled: Option<bool>,
    #[serde(default)]
    pub(super) tools: RawToolFilter,
    #[serde(default)]
    pub(super) tasks: RawTaskPolicy,
    pub(super) call_timeout: Option<RawDuration>,
    pub(super) connect_timeout: Option<RawDuration>,
    pub(super) list_timeout: Option<RawDuration>,
    pub(super) ping_interval: Option<RawDuration>,
    pub(super) min_ttl: Option<RawDuration>,
    pub(super) protocol: Option<Era>,
    pub(super) pin: Option<PinPolicy>,
    pub(super) new_tools: Option<NewTools>,
    pub(super) auth: Option<String>,
    pub(super) oauth: Option<RawOAuth>,
    pub(super) skills: Option<RawSkillSync>,
}

/// `skills = true | false`, or a table.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawSkillSync {
    On(bool),
    Table(RawSkillSyncTable),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSkillSyncTable {
    enabled: Option<bool>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    visibility: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuth {
    client_id: Option<String>,
    client_secret_env: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
    redirect_port: Option<u16>,
    client_metadata_url: Option<String>,
    grant: Option<OAuthGrant>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTaskPolicy {
    #[serde(default)]
    required: Vec<String>,
    #[serde(default)]
    forbidden: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawToolFilter {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

impl RawToolFilter {
    /// The allow and deny patterns.
    pub(super) fn into_parts(self) -> (Vec<String>, Vec<String>) {
        (self.allow, self.deny)
    }
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
    min_ttl: Option<RawDuration>,
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
    page_bytes: Option<usize>,
    tools_mode: Option<ToolsMode>,
    always: Option<Vec<String>>,
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
    ui_listen: Option<String>,
    notification_rate: Option<u32>,
    notification_burst: Option<u32>,
    max_tools: Option<usize>,
    max_listing_bytes: Option<usize>,
    max_log_line: Option<usize>,
    kill_grace: Option<RawDuration>,
    pin: Option<PinPolicy>,
    new_tools: Option<NewTools>,
    watch_config: Option<bool>,
    metrics: Option<bool>,
    metrics_listen: Option<String>,
    metrics_tool_labels: Option<bool>,
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
    tools_mode: Option<ToolsMode>,
    always: Option<Vec<String>>,
    #[serde(default)]
    tools: RawToolFilter,
    #[serde(default)]
    prompts: RawToolFilter,
    #[serde(default)]
    resources: RawToolFilter,
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

/// A duration as written: text [`parse_duration`] reads (`"500ms"`, `"30s"`, `"2m"`, `"1h"`),
/// or a number of seconds.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
pub(super) enum RawDuration {
    Text(String),
    Seconds(f64),
}

/// What building from `Raw*` needs besides the values: the file (for errors and relative
/// paths) and the environment (for `${VAR}`).
pub(super) struct Ctx<'a> {
    path: PathBuf,
    base: PathBuf,
    env: EnvLookup<'a>,
}

/// `[store]`: a PostgreSQL URL (checked here, connected at start) and where its password is.
fn build_store(ctx: &Ctx<'_>, raw: RawStore) -> Result<StoreConfig, ConfigError> {
    let expected = "a PostgreSQL URL: postgres://USER@HOST:PORT/DATABASE (the password from \
                    password_env, not in the URL)";
    if !(raw.url.starts_with("postgres://") || raw.url.starts_with("postgresql://")) {
        return Err(ctx.invalid("store.url", expected));
    }
    // `sslmode` and the TLS files as libpq reads them; the driver gets the rest.
    let url = crate::store::tls::TlsSettings::resolve_paths(&raw.url, &ctx.base);
    let tls =
        crate::store::tls::TlsSettings::from_url(&url).map_err(|e| ctx.invalid("store.url", e))?;
    let parsed: postgres::Config = tls
        .driver_url
        .parse()
        .map_err(|e| ctx.invalid("store.url", format!("{expected} ({e})")))?;
    if parsed.get_password().is_some() {
        return Err(ctx.invalid(
            "store.url",
            "a URL without a password: name the variable that holds it in store.password_env",
        ));
    }
    if raw.password_env.as_deref().is_some_and(str::is_empty) {
        return Err(ctx.invalid("store.password_env", "the name of an environment variable"));
    }
    Ok(StoreConfig {
        url,
        password_env: raw.password_env,
    })
}

impl<'a> Ctx<'a> {
    pub(super) fn new(path: &Path, env: EnvLookup<'a>) -> Self {
        Ctx {
            path: path.to_owned(),
            base: path.parent().map(Path::to_owned).unwrap_or_default(),
            env,
        }
    }

    pub(super) fn invalid(
        &self,
        key: impl Into<String>,
        expected: impl Into<String>,
    ) -> ConfigError {
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

    pub(super) fn duration(&self, key: &str, raw: &RawDuration) -> Result<Duration, ConfigError> {
        let parsed = match raw {
            RawDuration::Text(text) => parse_duration(text),
            RawDuration::Seconds(secs) => seconds(*secs),
        };
        parsed.map_err(|why| {
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
    pub(super) fn url(&self, key: &str, url: &str) -> Result<String, ConfigError> {
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

impl Config {
    /// Parses `roster.toml` text; `path` is used in errors and to resolve relative paths.
    pub fn from_toml(text: &str, path: &Path, env: EnvLookup<'_>) -> Result<Self, ConfigError> {
        let raw: RawToml = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let ctx = Ctx::new(path, env);
        let gateway = build_gateway(&ctx, raw.gateway)?;
        let mut servers = BTreeMap::new();
        let mut server_order = Vec::with_capacity(raw.servers.len());
        for (name, server) in raw.servers {
            let built = build_server(&ctx, &gateway, &name, server)?;
            server_order.push(name.clone());
            servers.insert(name, built);
        }
        let max_file_size = match &raw.skills.max_file_size {
            None => super::DEFAULT_MAX_SKILL_FILE_SIZE,
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
        let mut clients = Vec::with_capacity(raw.clients.len());
        for (i, c) in raw.clients.into_iter().enumerate() {
            if c.token_env.is_none() && c.token_sha256.is_none() {
                return Err(ctx.invalid(
                    format!("clients[{i}]"),
                    format!("`token_env` or `token_sha256` for client \"{}\"", c.name),
                ));
            }
            let permissions = build_permissions(
                &ctx,
                &format!("clients[{i}]"),
                RawPermissions {
                    tools: c.tools,
                    prompts: c.prompts,
                    resources: c.resources,
                },
            )?;
            let always = match c.always {
                Some(patterns) => Some(always_listed(
                    &ctx,
                    &format!("clients[{i}].always"),
                    patterns,
                )?),
                None => None,
            };
            clients.push(ClientConfig {
                tools_mode: c.tools_mode,
                always,
                name: c.name,
                token_env: c.token_env,
                token_sha256: c.token_sha256,
                subscriptions: c.subscriptions,
                delta_notes: c.delta_notes,
                permissions,
            });
        }
        let auth = match raw.auth {
            Some(auth) => Some(build_auth(&ctx, auth)?),
            None => None,
        };
        let store = match raw.store {
            Some(store) => Some(build_store(&ctx, store)?),
            None => None,
        };
        Ok(Config {
            source: Some(path.to_owned()),
            server_order,
            servers,
            gateway,
            skills,
            clients,
            auth,
            store,
        })
    }
}

/// `always` patterns (of `[gateway]` or a client, named by `key`), compiled.
fn always_listed(
    ctx: &Ctx<'_>,
    key: &str,
    patterns: Vec<String>,
) -> Result<AlwaysListed, ConfigError> {
    AlwaysListed::new(patterns)
        .map_err(|e| ctx.invalid(key, format!("glob patterns on exposed tool names ({e})")))
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
    dur("gateway.min_ttl", &raw.min_ttl, &mut g.min_ttl)?;
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
    if let Some(bytes) = raw.page_bytes {
        if bytes < MIN_PAGE_BYTES {
            return Err(ctx.invalid(
                "gateway.page_bytes",
                format!("a page size in bytes of {MIN_PAGE_BYTES} or more"),
            ));
        }
        g.page_bytes = bytes;
    }
    if let Some(mode) = raw.tools_mode {
        g.tools_mode = mode;
    }
    if let Some(patterns) = raw.always {
        g.always = always_listed(ctx, "gateway.always", patterns)?;
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
        above_zero(ctx, key, value, slot)?;
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
    if let Some(pin) = raw.pin {
        g.pin = pin;
    }
    if let Some(new_tools) = raw.new_tools {
        g.new_tools = new_tools;
    }
    if let Some(watch) = raw.watch_config {
        g.watch_config = watch;
    }
    if let Some(var) = raw.admin_token_env {
        g.admin_token_env = Some(var);
    }
    if let Some(addr) = raw.ui_listen {
        if addr.parse::<std::net::SocketAddr>().is_err() {
            return Err(ctx.invalid(
                "gateway.ui_listen",
                "host:port with an IP address, such as \"127.0.0.1:8940\"",
            ));
        }
        g.ui_listen = Some(addr);
    }
    g.metrics =
        super::MetricsConfig::from_keys(raw.metrics, raw.metrics_listen, raw.metrics_tool_labels)
            .map_err(|expected| ctx.invalid("gateway.metrics_listen", expected))?;
    g.state_dir = state_dir::resolve(ctx.env, raw.state_dir.map(|dir| ctx.resolve(&dir)));
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

pub(super) fn build_server_keyed(
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
    let min_ttl = match &raw.min_ttl {
        Some(d) => ctx.duration(&format!("{key}.min_ttl"), d)?,
        None => gateway.min_ttl,
    };
    let oauth = build_oauth(ctx, key, &transport, raw.auth, raw.oauth)?;
    let skills = match raw.skills {
        None => SkillSync::all(),
        Some(RawSkillSync::On(enabled)) => SkillSync {
            enabled,
            ..SkillSync::default()
        },
        Some(RawSkillSync::Table(table)) => SkillSync {
            enabled: table.enabled.unwrap_or(true),
            filter: ToolFilter::new(table.allow, table.deny).map_err(|e| {
                ctx.invalid(format!("{key}.skills"), format!("glob patterns ({e})"))
            })?,
            visibility: table.visibility,
        },
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
        min_ttl,
        era: raw.protocol.unwrap_or_default(),
        limits: gateway.server_limits.clone(),
        pin: raw.pin.unwrap_or(gateway.pin),
        new_tools: raw.new_tools.unwrap_or(gateway.new_tools),
        oauth,
        skills,
    })
}

/// `auth = "oauth"` and the `oauth` table: either says the server is behind OAuth.
fn build_oauth(
    ctx: &Ctx<'_>,
    key: &str,
    transport: &TransportConfig,
    auth: Option<String>,
    raw: Option<RawOAuth>,
) -> Result<Option<OAuthConfig>, ConfigError> {
    match auth.as_deref() {
        None if raw.is_none() => return Ok(None),
        None | Some("oauth") => {}
        Some("none") if raw.is_none() => return Ok(None),
        Some(other) => {
            return Err(ctx.invalid(
                format!("{key}.auth"),
                format!("\"oauth\" (or an [{key}.oauth] table), not \"{other}\""),
            ));
        }
    }
    if matches!(transport, TransportConfig::Stdio { .. }) {
        return Err(ctx.invalid(
            format!("{key}.auth"),
            "OAuth only for a `url` server (a stdio server gets its secrets through `env`)",
        ));
    }
    let raw = raw.unwrap_or_default();
    let oauth_key = format!("{key}.oauth");
    let client_id = match raw.client_id {
        Some(id) => {
            let id = ctx.expand(&format!("{oauth_key}.client_id"), &id)?;
            if id.trim().is_empty() {
                return Err(ctx.invalid(format!("{oauth_key}.client_id"), "a non-empty client id"));
            }
            Some(id)
        }
        None => None,
    };
    if let Some(var) = &raw.client_secret_env {
        if client_id.is_none() {
            return Err(ctx.invalid(
                format!("{oauth_key}.client_secret_env"),
                "a secret only with `client_id` (the client it belongs to)",
            ));
        }
        if (ctx.env)(var).is_none_or(|v| v.is_empty()) {
            return Err(ctx.invalid(
                format!("{oauth_key}.client_secret_env"),
                format!("the name of a set environment variable (`{var}` is not set)"),
            ));
        }
    }
    let grant = raw.grant.unwrap_or_default();
    if grant == OAuthGrant::ClientCredentials
        && (client_id.is_none() || raw.client_secret_env.is_none())
    {
        return Err(ctx.invalid(
            format!("{oauth_key}.grant"),
            "`client_id` and `client_secret_env` with grant = \"client_credentials\"",
        ));
    }
    let client_metadata_url = match raw.client_metadata_url {
        Some(url) => {
            let url_key = format!("{oauth_key}.client_metadata_url");
            let url = ctx.url(&url_key, &url)?;
            let parsed =
                reqwest::Url::parse(&url).map_err(|e| ctx.invalid(&url_key, e.to_string()))?;
            if parsed.scheme() != "https" || parsed.path() == "/" {
                return Err(ctx.invalid(
                    url_key,
                    "an https:// URL with a path (the client ID metadata document)",
                ));
            }
            Some(url)
        }
        None => None,
    };
    if raw.redirect_port == Some(0) {
        return Err(ctx.invalid(
            format!("{oauth_key}.redirect_port"),
            "a port from 1 to 65535 (leave it out for any free port)",
        ));
    }
    Ok(Some(OAuthConfig {
        client_id,
        client_secret_env: raw.client_secret_env,
        scopes: raw.scopes,
        redirect_port: raw.redirect_port,
        client_metadata_url,
        grant,
    }))
}

// ---- server limits ----------------------------------------------------------------------

fn build_server_limits(ctx: &Ctx<'_>, raw: &RawGateway) -> Result<ServerLimits, ConfigError> {
    let mut limits = ServerLimits::default();
    above_zero(
        ctx,
        "gateway.notification_rate",
        raw.notification_rate,
        &mut limits.notification_rate,
    )?;
    above_zero(
        ctx,
        "gateway.notification_burst",
        raw.notification_burst,
        &mut limits.notification_burst,
    )?;
    above_zero(
        ctx,
        "gateway.max_tools",
        raw.max_tools,
        &mut limits.max_tools,
    )?;
    above_zero(
        ctx,
        "gateway.max_listing_bytes",
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

/// `value`, when the file sets it, into `into`; zero is refused, naming `key`.
fn above_zero<T: Copy + Default + PartialEq>(
    ctx: &Ctx<'_>,
    key: &str,
    value: Option<T>,
    into: &mut T,
) -> Result<(), ConfigError> {
    match value {
        Some(n) if n == T::default() => Err(ctx.invalid(key, "a number above 0")),
        Some(n) => {
            *into = n;
            Ok(())
        }
        None => Ok(()),
    }
}
