//! One `[servers.NAME]` table as serde reads it, and its mapping to a [`ServerConfig`]: one of
//! `command`/`url`, the transport, timeouts falling back to `[gateway]`, OAuth and skill sync.
//! The `mcpServers` JSON goes through the same mapping.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::ctx::{Ctx, RawDuration, RawToolFilter};
use super::sandbox::{self, RawSandboxSetting};
use super::{
    ConfigError, Era, GatewayConfig, OAuthConfig, OAuthGrant, ServerConfig, SkillSync, TaskPolicy,
    ToolFilter, TransportConfig,
};
use roster_core::pin::{NewTools, PinPolicy};

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
    pub(super) sandbox: Option<RawSandboxSetting>,
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

pub(super) fn build_server(
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
            let sandbox = match raw.sandbox {
                Some(setting) => sandbox::build(
                    ctx,
                    &format!("{key}.sandbox"),
                    setting,
                    gateway.sandbox.as_ref(),
                )?,
                None => gateway.sandbox.clone(),
            };
            TransportConfig::Stdio {
                command,
                args: raw.args,
                env: ctx.expand_map(&format!("{key}.env"), raw.env)?,
                cwd: raw.cwd.as_deref().map(|c| ctx.resolve(c)),
                sandbox: sandbox.map(|s| Box::new(s.for_server(&gateway.state_dir, name))),
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
            if raw
                .sandbox
                .as_ref()
                .is_some_and(|s| !matches!(s, RawSandboxSetting::On(false)))
            {
                return Err(ctx.invalid(
                    format!("{key}.sandbox"),
                    "a sandbox only for a `command` server (roster runs it; a `url` server runs elsewhere)",
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
