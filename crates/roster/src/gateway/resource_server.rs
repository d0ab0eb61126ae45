//! roster as an OAuth 2.1 resource server (the `[auth]` table): JWT access tokens checked for
//! their signature (by the issuer's published keys), `iss`, `aud`, `exp` and `nbf`, then mapped
//! to a [`ClientIdentity`] by `[[auth.rules]]`; and what a refused request is told (RFC 6750's
//! `WWW-Authenticate` with RFC 9728's `resource_metadata`).
//!
//! Signing keys come from `jwks_url`, or from each issuer's metadata (RFC 8414
//! `/.well-known/oauth-authorization-server`, else OIDC `/.well-known/openid-configuration`,
//! whose `jwks_uri` names them). They are fetched at the first token, again when they are older
//! than [`KEYS_FRESH_FOR`], and again when a token names a key id none of them has (an issuer
//! rotated its keys) — but such a refetch at most once per [`REFETCH_AT_MOST_EVERY`], so tokens
//! with made-up key ids cannot make roster hammer the issuer. At most [`MAX_KEYS`] keys are held
//! per key set and a key set document is read up to [`MAX_DOCUMENT_BYTES`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::ClientIdentity;
use crate::config::{AuthConfig, AuthRule};

/// Keys are fetched again when older than this, at the next token.
pub const KEYS_FRESH_FOR: Duration = Duration::from_secs(3600);

/// A token naming an unknown key id refetches the keys at most this often.
pub const REFETCH_AT_MOST_EVERY: Duration = Duration::from_secs(5);

/// Keys held per key set; a JWKS listing more is cut here (and logged).
pub const MAX_KEYS: usize = 64;

/// The largest metadata or JWKS document read.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// How long one fetch of metadata or keys may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Signatures roster takes: public-key ones only (a shared secret would let anyone holding the
/// JWKS sign; `none` signs nothing).
const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Why a request is not let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No bearer token at all: 401 naming the metadata (and the scopes needed).
    Missing,
    /// A token that is not valid (bad signature, expired, another audience or issuer, …):
    /// 401 `invalid_token` with the reason.
    Invalid(String),
    /// A valid token without the scopes `[auth] required_scopes` lists: 403
    /// `insufficient_scope`.
    InsufficientScope,
}

/// One set of signing keys and the issuers whose tokens it signs.
struct KeySet {
    issuers: Vec<String>,
    /// `jwks_url`, or `None` until the issuer's metadata named its `jwks_uri`.
    jwks_url: Option<String>,
    keys: Vec<Jwk>,
}

struct Keys {
    sets: Vec<KeySet>,
    fetched: Option<Instant>,
}

/// The `[auth]` table in force: verifies tokens and says how to refuse.
pub(crate) struct ResourceServer {
    config: AuthConfig,
    metadata_url: String,
    http: reqwest::Client,
    /// An async lock: one refetch at a time, and a token waiting on it uses its result.
    keys: tokio::sync::Mutex<Keys>,
}

impl std::fmt::Debug for ResourceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceServer")
            .field("audience", &self.config.audience)
            .finish_non_exhaustive()
    }
}

impl ResourceServer {
    /// The resource server `[auth]` describes; no key is fetched until the first token.
    pub(crate) fn new(config: &AuthConfig) -> Arc<Self> {
        let sets = match &config.jwks_url {
            Some(url) => vec![KeySet {
                issuers: config.issuers.clone(),
                jwks_url: Some(url.clone()),
                keys: Vec::new(),
            }],
            None => config
                .issuers
                .iter()
                .map(|issuer| KeySet {
                    issuers: vec![issuer.clone()],
                    jwks_url: None,
                    keys: Vec::new(),
                })
                .collect(),
        };
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .unwrap_or_default();
        Arc::new(Self {
            metadata_url: metadata_url(&config.audience),
            config: config.clone(),
            http,
            keys: tokio::sync::Mutex::new(Keys {
                sets,
                fetched: None,
            }),
        })
    }

    /// The `[auth]` table this serves.
    pub(crate) fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// The protected resource metadata document (RFC 9728).
    pub(crate) fn metadata(&self) -> Value {
        let mut doc = serde_json::json!({
            "resource": self.config.audience,
            "authorization_servers": self.config.issuers,
            "bearer_methods_supported": ["header"],
            "resource_name": "roster",
        });
        if !self.config.scopes_supported.is_empty() {
            doc["scopes_supported"] = Value::from(self.config.scopes_supported.clone());
        }
        doc
    }

    /// The `WWW-Authenticate` value that goes with `refusal` (RFC 6750 §3, MCP authorization
    /// 2025-11-25: `resource_metadata`, and `scope` where scopes are needed).
    pub(crate) fn challenge(&self, refusal: &Refusal) -> String {
        let mut params = Vec::new();
        match refusal {
            Refusal::Missing => {}
            Refusal::Invalid(why) => {
                params.push("error=\"invalid_token\"".to_owned());
                params.push(format!("error_description=\"{}\"", quotable(why)));
            }
            Refusal::InsufficientScope => {
                params.push("error=\"insufficient_scope\"".to_owned());
            }
        }
        if !self.config.required_scopes.is_empty() {
            params.push(format!(
                "scope=\"{}\"",
                quotable(&self.config.required_scopes.join(" "))
            ));
        }
        params.push(format!("resource_metadata=\"{}\"", self.metadata_url));
        format!("Bearer {}", params.join(", "))
    }

    /// Who `token` makes its caller, or why it is refused; `subscriptions` are what a caller
    /// no rule matches holds (`[gateway] subscriptions`).
    pub(crate) async fn verify(
        &self,
        token: &str,
        subscriptions: &[String],
    ) -> Result<ClientIdentity, Refusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            Refusal::Invalid("not a [[clients]] token nor a JWT access token".to_owned())
        })?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Refusal::Invalid(format!(
                "tokens signed with {:?} are not taken",
                header.alg
            )));
        }
        let (issuers, key) = self.key_for(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&issuers);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = self.config.leeway.as_secs();
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| Refusal::Invalid(reason(&e)))?
            .claims;
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .ok_or_else(|| Refusal::Invalid("the token's `sub` is not a string".to_owned()))?;
        let scopes = scopes(&claims);
        if !self
            .config
            .required_scopes
            .iter()
            .all(|needed| scopes.contains(&needed.as_str()))
        {
            return Err(Refusal::InsufficientScope);
        }
        Ok(self.identity(subject, &claims, &scopes, subscriptions))
    }

    /// The first rule's identity, else the subject's with the default subscriptions.
    fn identity(
        &self,
        subject: &str,
        claims: &Map<String, Value>,
        scopes: &[&str],
        subscriptions: &[String],
    ) -> ClientIdentity {
        match self
            .config
            .rules
            .iter()
            .find(|rule| matches(rule, subject, claims, scopes))
        {
            Some(rule) => ClientIdentity {
                name: Some(rule.name.replace("{sub}", subject)),
                subscriptions: rule.subscriptions.clone(),
                permissions: Arc::new(rule.permissions.clone()),
            },
            None => ClientIdentity {
                name: Some(subject.to_owned()),
                subscriptions: subscriptions.to_vec(),
                permissions: Arc::default(),
            },
        }
    }

    /// The key that signed a token (by its `kid`, else the only key of a fitting type), and
    /// the issuers it signs for; refetches the keys when they are stale or the key is unknown.
    async fn key_for(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<(Vec<String>, DecodingKey), Refusal> {
        let mut keys = self.keys.lock().await;
        let stale = keys.fetched.is_none_or(|at| at.elapsed() >= KEYS_FRESH_FOR);
        if stale {
            self.fetch(&mut keys).await;
        }
        if let Some(found) = find(&keys, kid, alg) {
            return found;
        }
        let may_refetch = keys
            .fetched
            .is_none_or(|at| at.elapsed() >= REFETCH_AT_MOST_EVERY);
        if !stale && may_refetch {
            self.fetch(&mut keys).await;
            if let Some(found) = find(&keys, kid, alg) {
                return found;
            }
        }
        Err(Refusal::Invalid(match kid {
            Some(kid) => format!("no signing key of the issuer has key id {kid:?}"),
            None => "the token names no key id and no single key of the issuer fits".to_owned(),
        }))
    }

    /// Fetches every key set (discovering `jwks_uri` first where needed); a set that cannot be
    /// fetched keeps its old keys, and the failure is logged.
    async fn fetch(&self, keys: &mut Keys) {
        keys.fetched = Some(Instant::now());
        for set in &mut keys.sets {
            if set.jwks_url.is_none() {
                match self.discover(&set.issuers[0]).await {
                    Ok(url) => set.jwks_url = Some(url),
                    Err(e) => {
                        tracing::warn!("[auth]: {e}");
                        continue;
                    }
                }
            }
            let Some(url) = set.jwks_url.clone() else {
                continue;
            };
            match self.get_json(&url).await {
                Ok(doc) => set.keys = read_jwks(&url, &doc),
                Err(e) => tracing::warn!("[auth]: the signing keys at {url}: {e}"),
            }
        }
    }

    /// The issuer's `jwks_uri`, from its RFC 8414 metadata or else its OIDC configuration.
    async fn discover(&self, issuer: &str) -> Result<String, String> {
        let mut tried = Vec::new();
        for url in metadata_candidates(issuer) {
            match self.get_json(&url).await {
                Ok(doc) => {
                    if doc.get("issuer").and_then(Value::as_str) != Some(issuer) {
                        tried.push(format!("{url}: its `issuer` is not {issuer:?}"));
                        continue;
                    }
                    match doc.get("jwks_uri").and_then(Value::as_str) {
                        Some(jwks) => return Ok(jwks.to_owned()),
                        None => tried.push(format!("{url}: it has no `jwks_uri`")),
                    }
                }
                Err(e) => tried.push(format!("{url}: {e}")),
            }
        }
        Err(format!(
            "no metadata of issuer {issuer} names its signing keys (set [auth] jwks_url to give \
             them): {}",
            tried.join("; ")
        ))
    }

    /// A JSON document read up to [`MAX_DOCUMENT_BYTES`].
    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let mut response = self
            .http
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("larger than {MAX_DOCUMENT_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))
    }
}

/// The key for `kid` (or, without one, the only key whose type fits `alg`) in any set.
fn find(
    keys: &Keys,
    kid: Option<&str>,
    alg: Algorithm,
) -> Option<Result<(Vec<String>, DecodingKey), Refusal>> {
    for set in &keys.sets {
        let mut fitting = set.keys.iter().filter(|jwk| match kid {
            Some(kid) => jwk.common.key_id.as_deref() == Some(kid),
            None => DecodingKey::from_jwk(jwk).is_ok_and(|k| k.family() == alg.family()),
        });
        let (Some(jwk), None) = (fitting.next(), fitting.next()) else {
            continue;
        };
        if let Some(declared) = &jwk.common.key_algorithm
            && format!("{declared:?}") != format!("{alg:?}")
        {
            return Some(Err(Refusal::Invalid(format!(
                "the token says {alg:?} but its key is for {declared:?}"
            ))));
        }
        return Some(match DecodingKey::from_jwk(jwk) {
            Ok(key) if key.family() == alg.family() => Ok((set.issuers.clone(), key)),
            _ => Err(Refusal::Invalid(format!(
                "the token says {alg:?}, which its key cannot verify"
            ))),
        });
    }
    None
}

/// The public keys of a JWKS document: of its first [`MAX_KEYS`] entries, those that read.
fn read_jwks(url: &str, doc: &Value) -> Vec<Jwk> {
    let listed = doc
        .get("keys")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if listed.len() > MAX_KEYS {
        tracing::warn!(
            "[auth]: {url} lists {} keys; only the first {MAX_KEYS} are used",
            listed.len()
        );
    }
    listed
        .iter()
        .take(MAX_KEYS)
        .filter_map(|key| serde_json::from_value::<Jwk>(key.clone()).ok())
        // A public key roster can use: never a shared secret (`oct`).
        .filter(|jwk| {
            DecodingKey::from_jwk(jwk)
                .is_ok_and(|k| k.family() != jsonwebtoken::AlgorithmFamily::Hmac)
        })
        .collect()
}

/// Where an issuer's metadata may be: RFC 8414's well-known URI (inserted before the issuer's
/// path), then OIDC's (inserted, and appended as OIDC Discovery 1.0 writes it).
fn metadata_candidates(issuer: &str) -> Vec<String> {
    let Ok(url) = reqwest::Url::parse(issuer) else {
        return Vec::new();
    };
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let mut candidates = vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
    ];
    if !path.is_empty() {
        candidates.push(format!("{origin}{path}/.well-known/openid-configuration"));
    }
    candidates
}

/// RFC 9728 §3.1: the well-known path inserted between the resource's host and its path.
fn metadata_url(resource: &str) -> String {
    let Ok(url) = reqwest::Url::parse(resource) else {
        return resource.to_owned();
    };
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    format!("{origin}/.well-known/oauth-protected-resource{path}")
}

/// The token's scopes: `scope` (space-separated, RFC 8693/9068) or `scp` (a list or a string).
fn scopes(claims: &Map<String, Value>) -> Vec<&str> {
    let mut out = Vec::new();
    for key in ["scope", "scp"] {
        match claims.get(key) {
            Some(Value::String(s)) => out.extend(s.split_whitespace()),
            Some(Value::Array(items)) => out.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    out
}

/// Whether every condition `rule` gives holds for the token.
fn matches(rule: &AuthRule, subject: &str, claims: &Map<String, Value>, scopes: &[&str]) -> bool {
    let scope = rule
        .scope
        .as_deref()
        .is_none_or(|needed| scopes.contains(&needed));
    let sub = rule.subject.as_deref().is_none_or(|s| s == subject);
    let claim = rule
        .claim
        .as_ref()
        .is_none_or(|(name, value)| match claims.get(name) {
            Some(Value::String(s)) => s == value,
            Some(Value::Array(items)) => items.iter().any(|i| i.as_str() == Some(value)),
            Some(Value::Bool(b)) => b.to_string() == *value,
            Some(Value::Number(n)) => n.to_string() == *value,
            _ => false,
        });
    scope && sub && claim
}

/// Why a token is not valid, in words for `error_description`.
fn reason(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".to_owned(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".to_owned(),
        ErrorKind::InvalidAudience => "the token is for another audience (aud)".to_owned(),
        ErrorKind::InvalidIssuer => "the token is from an issuer roster does not take".to_owned(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no `{claim}` claim"),
        ErrorKind::InvalidAlgorithm => "the token's algorithm does not fit its key".to_owned(),
        other => format!("the token cannot be read ({other:?})"),
    }
}

/// Text safe inside a quoted-string of a `WWW-Authenticate` parameter.
fn quotable(text: &str) -> String {
    text.chars()
        .filter(|c| *c != '"' && *c != '\\' && !c.is_control())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_urls_insert_before_the_path() {
        assert_eq!(
            metadata_url("https://roster.example.com/mcp"),
            "https://roster.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8931/"),
            "http://127.0.0.1:8931/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            metadata_candidates("https://idp.example.com/tenant/1"),
            [
                "https://idp.example.com/.well-known/oauth-authorization-server/tenant/1",
                "https://idp.example.com/.well-known/openid-configuration/tenant/1",
                "https://idp.example.com/tenant/1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn a_jwks_is_held_up_to_the_bound_and_unreadable_keys_are_skipped() {
        // A 2048-bit RSA public key (RFC 7517 appendix A.1's modulus).
        let n = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
        let key = |kid: usize| serde_json::json!({"kty": "RSA", "kid": format!("k{kid}"), "n": n, "e": "AQAB"});
        let mut keys: Vec<Value> = (0..MAX_KEYS + 10).map(key).collect();
        keys.insert(0, serde_json::json!({"kty": "RSA", "kid": "broken"}));
        let held = read_jwks("test", &serde_json::json!({ "keys": keys }));
        assert_eq!(
            held.len(),
            MAX_KEYS - 1,
            "the first {MAX_KEYS} entries, less the broken one"
        );
        let mut sets = Keys {
            sets: vec![KeySet {
                issuers: vec!["https://idp".into()],
                jwks_url: None,
                keys: held,
            }],
            fetched: None,
        };
        assert!(matches!(
            find(&sets, Some("k3"), Algorithm::RS256),
            Some(Ok(_))
        ));
        assert!(
            matches!(find(&sets, Some("k3"), Algorithm::ES256), Some(Err(_))),
            "an RSA key never verifies ES256"
        );
        assert!(find(&sets, Some("k99"), Algorithm::RS256).is_none());
        sets.sets[0].keys.truncate(1);
        assert!(
            matches!(find(&sets, None, Algorithm::RS256), Some(Ok(_))),
            "the only key fits"
        );
    }

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let claims: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"scope": "a b", "scp": ["c"]}))
                .expect("claims");
        assert_eq!(scopes(&claims), ["a", "b", "c"]);
    }

    #[test]
    fn a_rule_matches_when_every_condition_holds() {
        let rule = AuthRule {
            scope: Some("mcp:read".into()),
            claim: Some(("groups".into(), "eng".into())),
            subject: None,
            name: "eng-{sub}".into(),
            subscriptions: vec![],
            permissions: Default::default(),
        };
        let claims: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"groups": ["ops", "eng"]})).expect("claims");
        assert!(matches(&rule, "ann", &claims, &["mcp:read"]));
        assert!(!matches(&rule, "ann", &claims, &["mcp:write"]));
        assert!(!matches(&rule, "ann", &Map::new(), &["mcp:read"]));
    }

    #[test]
    fn a_challenge_quotes_safely() {
        let config = AuthConfig {
            issuers: vec!["https://idp.example.com".into()],
            audience: "https://roster.example.com/mcp".into(),
            jwks_url: None,
            leeway: crate::config::DEFAULT_LEEWAY,
            required_scopes: vec!["mcp".into()],
            scopes_supported: vec!["mcp".into()],
            rules: vec![],
        };
        let server = ResourceServer::new(&config);
        assert_eq!(
            server.challenge(&Refusal::Invalid("a \"quoted\" reason".into())),
            "Bearer error=\"invalid_token\", error_description=\"a quoted reason\", \
             scope=\"mcp\", resource_metadata=\"https://roster.example.com/.well-known/\
             oauth-protected-resource/mcp\""
        );
    }
}
