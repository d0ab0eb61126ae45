//! The `mcpServers` JSON of Claude Desktop and Cursor (or VS Code's `servers`), read as it is:
//! each entry becomes a `[servers.NAME]` table and goes through the same checks.

use std::collections::BTreeMap;
use std::path::Path;

use indexmap::IndexMap;
use serde::Deserialize;

use super::ctx::Ctx;
use super::raw_server::{RawServer, build_server_keyed};
use super::{Config, ConfigError, EnvLookup, GatewayConfig, SkillsConfig};

/// The `mcpServers` (Claude Desktop, Cursor) or `servers` (VS Code) JSON file.
#[derive(Deserialize)]
struct RawJson {
    /// In the file's order; a repeated name keeps its first place and its last value.
    #[serde(rename = "mcpServers", alias = "servers", default)]
    servers: IndexMap<String, RawJsonServer>,
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

impl Config {
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
        let ctx = Ctx::new(path, env);
        let gateway = GatewayConfig::defaults(env);
        let mut servers = BTreeMap::new();
        let mut server_order = Vec::with_capacity(raw.servers.len());
        for (name, s) in raw.servers {
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
            auth: None,
            store: None,
        })
    }
}
