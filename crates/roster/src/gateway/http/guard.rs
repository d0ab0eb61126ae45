//! What every route of the HTTP front checks, and what it masks: the Host and Origin of a
//! request ([`Rebinding`], against DNS rebinding), its bearer token and the digest tokens are
//! compared by, and the secrets in the URLs an answer shows.

use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};

use crate::gateway::ServeConfig;

/// The Host and Origin values `/mcp`, `/healthz` and the dashboard accept.
#[derive(Debug, Clone)]
pub(crate) struct Rebinding {
    pub(super) hosts: Vec<String>,
    pub(super) origins: Vec<String>,
}

impl Rebinding {
    /// Loopback hosts and origins, and those `[gateway] allowed_hosts` / `allowed_origins` add.
    pub(crate) fn for_config(config: &ServeConfig) -> Self {
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        hosts.extend(config.allowed_hosts.iter().cloned());
        let mut origins: Vec<String> = vec![
            "http://localhost:*".into(),
            "http://127.0.0.1:*".into(),
            "http://[::1]:*".into(),
        ];
        origins.extend(config.allowed_origins.iter().cloned());
        Self { hosts, origins }
    }

    /// The same rule rmcp applies to `/mcp`: a loopback or configured Host, and an Origin
    /// (when sent) that is configured.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), String> {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .ok_or("the request has no Host header")?;
        if !self
            .hosts
            .iter()
            .any(|allowed| authority_matches(allowed, host))
        {
            return Err(format!(
                "Host {host:?} is not allowed (add it to [gateway] allowed_hosts)"
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            if !self
                .origins
                .iter()
                .any(|allowed| origin_matches(allowed, origin))
            {
                return Err(format!(
                    "Origin {origin:?} is not allowed (add it to [gateway] allowed_origins)"
                ));
            }
        }
        Ok(())
    }
}

/// Splits `host[:port]` (brackets around an IPv6 host dropped).
fn split_authority(authority: &str) -> (String, Option<&str>) {
    let authority = authority.trim();
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (host.to_ascii_lowercase(), after.strip_prefix(':'));
    }
    match authority.rsplit_once(':') {
        // More than one colon and no brackets: a bare IPv6 address.
        Some((host, _)) if host.contains(':') => (authority.to_ascii_lowercase(), None),
        Some((host, port)) => (host.to_ascii_lowercase(), Some(port)),
        None => (authority.to_ascii_lowercase(), None),
    }
}

/// An allowed host without a port takes any port; with one, only that port.
fn authority_matches(allowed: &str, host: &str) -> bool {
    let (allowed_host, allowed_port) = split_authority(allowed);
    let (host, port) = split_authority(host);
    allowed_host == host && (allowed_port.is_none() || allowed_port == port)
}

/// `scheme://host[:port]`, where a `*` port takes any port.
fn origin_matches(allowed: &str, origin: &str) -> bool {
    let (Some((allowed_scheme, allowed_rest)), Some((scheme, rest))) =
        (allowed.split_once("://"), origin.split_once("://"))
    else {
        return allowed.eq_ignore_ascii_case(origin);
    };
    if !allowed_scheme.eq_ignore_ascii_case(scheme) {
        return false;
    }
    let (allowed_host, allowed_port) = split_authority(allowed_rest.trim_end_matches('/'));
    let (host, port) = split_authority(rest.trim_end_matches('/'));
    allowed_host == host && (allowed_port == Some("*") || allowed_port == port)
}

/// The token of an `Authorization: Bearer …` header; the scheme is case-insensitive.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(char::is_whitespace)?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The SHA-256 of a token: admin tokens are held and compared as digests.
pub(crate) fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Masks userinfo and query strings of every URL in every string of `value`.
pub(crate) fn redact(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => *s = crate::config::redact_urls(s),
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact),
        serde_json::Value::Object(map) => map.values_mut().for_each(redact),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn hosts_and_origins_match_like_rmcp() {
        assert!(authority_matches("localhost", "localhost:8931"));
        assert!(authority_matches("::1", "[::1]:8931"));
        assert!(authority_matches("example.com:443", "EXAMPLE.com:443"));
        assert!(!authority_matches("example.com:443", "example.com:80"));
        assert!(!authority_matches("localhost", "evil.example"));
        assert!(origin_matches(
            "http://localhost:*",
            "http://localhost:3000"
        ));
        assert!(origin_matches("http://[::1]:*", "http://[::1]:3000"));
        assert!(!origin_matches(
            "http://localhost:*",
            "https://localhost:3000"
        ));
        assert!(!origin_matches(
            "http://localhost:*",
            "http://evil.example:3000"
        ));
        assert!(origin_matches("https://app.example", "https://app.example"));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        let mut headers = HeaderMap::new();
        for value in ["Bearer t0k", "BEARER t0k", "bearer   t0k "] {
            headers.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            assert_eq!(bearer(&headers), Some("t0k"), "{value}");
        }
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic t0k"));
        assert_eq!(bearer(&headers), None);
    }
}
