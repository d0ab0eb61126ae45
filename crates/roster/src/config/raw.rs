//! The file as serde reads it (`Raw*`, TOML with `deny_unknown_fields`), and the mapping from
//! it to [`Config`], checking what serde cannot: `[skills]`, `[[clients]]` and `[store]` here;
//! the `[gateway]` table in `raw_gateway`, each `[servers.NAME]` in `raw_server`, `[auth]` in
//! `auth`. Every error names the file and the key.

use std::collections::BTreeMap;
use std::path::Path;

use indexmap::IndexMap;
use serde::Deserialize;

use super::auth::{RawAuth, RawPermissions, build_auth, build_permissions};
use super::ctx::{Ctx, RawSize, RawToolFilter, parse_size};
use super::env::EnvLookup;
use super::raw_gateway::{RawGateway, always_listed, build_gateway};
use super::raw_server::{RawServer, build_server};
use super::{ClientConfig, Config, ConfigError, SkillsConfig, StoreConfig, ToolsMode};

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

/// `[store]`: a PostgreSQL URL (checked here, connected at start) and where its password is.
fn build_store(ctx: &Ctx<'_>, raw: RawStore) -> Result<StoreConfig, ConfigError> {
    let expected = "a PostgreSQL URL: postgres://USER@HOST:PORT/DATABASE (the password from \
                    password_env, not in the URL)";
    if !(raw.url.starts_with("postgres://") || raw.url.starts_with("postgresql://")) {
        return Err(ctx.invalid("store.url", expected));
    }
    // `sslmode` and the TLS files as libpq reads them; the driver gets the rest.
    let url = super::store_tls::TlsSettings::resolve_paths(&raw.url, &ctx.base);
    let tls =
        super::store_tls::TlsSettings::from_url(&url).map_err(|e| ctx.invalid("store.url", e))?;
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
