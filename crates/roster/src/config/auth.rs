//! The `[auth]` table (roster as an OAuth 2.1 resource server: which JWT access tokens it takes
//! and who each one makes the caller) and the per-client permissions that `[[clients]]` entries
//! and `[[auth.rules]]` share.

use std::time::Duration;

use serde::Deserialize;

use super::ctx::{Ctx, RawDuration, RawToolFilter};
use super::{ConfigError, Permissions, ToolFilter};

/// How much clock skew `exp` and `nbf` are checked with, unless `[auth] leeway` says.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);

/// The `[auth]` table: JWT access tokens from these issuers, for this audience, are taken as
/// well as the `[[clients]]` bearer tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    /// The accepted `iss` values (authorization servers), each one's signing keys discovered
    /// from its metadata unless `jwks_url` is given.
    pub issuers: Vec<String>,
    /// roster's own resource URL: a token's `aud` must hold it; the protected resource
    /// metadata names it as `resource`.
    pub audience: String,
    /// Where the signing keys are (a JWKS), instead of the issuers' metadata.
    pub jwks_url: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// Scopes every token must hold; one without them is answered 403 `insufficient_scope`.
    pub required_scopes: Vec<String>,
    /// Scopes the metadata advertises (`scopes_supported`).
    pub scopes_supported: Vec<String>,
    /// Who a token makes its caller: the first rule that matches.
    pub rules: Vec<AuthRule>,
}

/// One `[[auth.rules]]` entry: when a token matches every condition given (none given: every
/// token), its caller is this identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthRule {
    /// The token holds this scope (`scope` claim, space-separated, or `scp`).
    pub scope: Option<String>,
    /// The claim `.0` equals `.1`, or is an array holding it.
    pub claim: Option<(String, String)>,
    /// The token's `sub` is this.
    pub subject: Option<String>,
    /// The identity's name; `{sub}` in it is the token's subject. Default: the subject.
    pub name: String,
    /// Subscriptions the identity holds.
    pub subscriptions: Vec<String>,
    /// What the identity may use.
    pub permissions: Permissions,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    issuer: Option<String>,
    #[serde(default)]
    issuers: Vec<String>,
    audience: Option<String>,
    jwks_url: Option<String>,
    leeway: Option<RawDuration>,
    #[serde(default)]
    required_scopes: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
    #[serde(default)]
    rules: Vec<RawAuthRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuthRule {
    scope: Option<String>,
    claim: Option<String>,
    value: Option<String>,
    subject: Option<String>,
    name: Option<String>,
    #[serde(default)]
    subscriptions: Vec<String>,
    #[serde(default)]
    tools: RawToolFilter,
    #[serde(default)]
    prompts: RawToolFilter,
    #[serde(default)]
    resources: RawToolFilter,
}

/// The `tools`, `prompts` and `resources` allow/deny tables of a client identity.
pub(super) struct RawPermissions {
    pub(super) tools: RawToolFilter,
    pub(super) prompts: RawToolFilter,
    pub(super) resources: RawToolFilter,
}

/// Compiles a client identity's globs; a bad one is an error naming `key.tools` (or prompts,
/// resources).
pub(super) fn build_permissions(
    ctx: &Ctx<'_>,
    key: &str,
    raw: RawPermissions,
) -> Result<Permissions, ConfigError> {
    let filter = |kind: &str, raw: RawToolFilter| {
        let (allow, deny) = raw.into_parts();
        ToolFilter::new(allow, deny)
            .map_err(|e| ctx.invalid(format!("{key}.{kind}"), format!("glob patterns ({e})")))
    };
    Ok(Permissions {
        tools: filter("tools", raw.tools)?,
        prompts: filter("prompts", raw.prompts)?,
        resources: filter("resources", raw.resources)?,
    })
}

pub(super) fn build_auth(ctx: &Ctx<'_>, raw: RawAuth) -> Result<AuthConfig, ConfigError> {
    let mut issuers = Vec::new();
    for (i, issuer) in raw.issuer.iter().chain(&raw.issuers).enumerate() {
        let key = if raw.issuer.is_some() && i == 0 {
            "auth.issuer".to_owned()
        } else {
            format!("auth.issuers[{}]", i - usize::from(raw.issuer.is_some()))
        };
        issuers.push(ctx.url(&key, issuer)?);
    }
    if issuers.is_empty() {
        return Err(ctx.invalid(
            "auth.issuers",
            "at least one issuer URL (the authorization server whose tokens roster takes)",
        ));
    }
    let audience = match &raw.audience {
        Some(audience) => ctx.url("auth.audience", audience)?,
        None => {
            return Err(ctx.invalid(
                "auth.audience",
                "roster's own resource URL, e.g. \"https://roster.example.com/mcp\" (tokens' \
                 `aud` must hold it)",
            ));
        }
    };
    let jwks_url = match &raw.jwks_url {
        Some(url) => Some(ctx.url("auth.jwks_url", url)?),
        None => None,
    };
    let leeway = match &raw.leeway {
        Some(d) => ctx.duration("auth.leeway", d)?,
        None => DEFAULT_LEEWAY,
    };
    let mut rules = Vec::with_capacity(raw.rules.len());
    for (i, rule) in raw.rules.into_iter().enumerate() {
        let key = format!("auth.rules[{i}]");
        let claim = match (rule.claim, rule.value) {
            (Some(claim), Some(value)) => Some((claim, value)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(ctx.invalid(
                    format!("{key}.value"),
                    "the value the claim must hold (`claim` and `value` go together)",
                ));
            }
            (None, Some(_)) => {
                return Err(ctx.invalid(
                    format!("{key}.claim"),
                    "the claim's name (`claim` and `value` go together)",
                ));
            }
        };
        rules.push(AuthRule {
            scope: rule.scope,
            claim,
            subject: rule.subject,
            name: rule.name.unwrap_or_else(|| "{sub}".to_owned()),
            subscriptions: rule.subscriptions,
            permissions: build_permissions(
                ctx,
                &key,
                RawPermissions {
                    tools: rule.tools,
                    prompts: rule.prompts,
                    resources: rule.resources,
                },
            )?,
        });
    }
    let mut scopes_supported = raw.scopes_supported;
    if scopes_supported.is_empty() {
        scopes_supported = raw.required_scopes.clone();
        for scope in rules.iter().filter_map(|r| r.scope.as_ref()) {
            if !scopes_supported.contains(scope) {
                scopes_supported.push(scope.clone());
            }
        }
    }
    Ok(AuthConfig {
        issuers,
        audience,
        jwks_url,
        leeway,
        required_scopes: raw.required_scopes,
        scopes_supported,
        rules,
    })
}
