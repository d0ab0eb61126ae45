//! roster as an OAuth client of its servers (the MCP authorization spec, 2025-11-25 and
//! 2026-07-28), built on rmcp's `auth` support.
//!
//! - **Discovery** (rmcp's [`AuthorizationManager`]): the `WWW-Authenticate` challenge of a
//!   401 (its `resource_metadata` and `scope`), else RFC 9728 protected resource metadata at
//!   the well-known URLs (path-suffixed first), then RFC 8414 / OpenID Connect authorization
//!   server metadata in the spec's order.
//! - **Registration**, in the spec's order: a pre-registered `client_id` (its secret from
//!   `client_secret_env`), a client ID metadata document (`client_metadata_url`) when the
//!   authorization server supports them, else dynamic client registration (RFC 7591).
//! - **Tokens**: authorization code with PKCE (S256) and the RFC 8707 `resource`, by a person
//!   once ([`login`], `roster auth login`) or headless ([`login_headless`]: roster follows the
//!   authorization URL's redirects itself, for authorization servers that approve at once);
//!   or the client credentials grant, got by roster itself when the config says so. They are
//!   kept per server in the [`Tokens`] store of the seam (`crate::store::Stores`), refreshed before they expire and once
//!   when a server answers 401, and sent by rmcp's [`AuthClient`] on every request.
//! - A server without a usable token answers 401: the connection fails with
//!   [`crate::servers::ConnectError::NeedsLogin`], the server shows as `needs-login` and waits
//!   (no retries) until its row in the store changes — a login in another process is picked
//!   up by the running gateway within [`LOGIN_POLL`].
//! - **Step-up**: a 403 `insufficient_scope` is recorded in the store ([`record_step_up`]); the
//!   connection ends, the server waits as `needs-login`, and the next login asks for the
//!   scopes held plus those the challenge names.

mod credentials;
mod login;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::{AuthError, ClientCredentialsConfig, OAuthClientConfig};
use rmcp::transport::{AuthClient, AuthorizationManager, StoredCredentials};

pub use login::{Browser, LoginOutcome, login, login_headless};

use crate::config::{OAuthConfig, OAuthGrant};
use crate::store::{StoreError, Tokens};
use credentials::ServerCredentials;

/// How often a server waiting for a login looks at the token store.
pub const LOGIN_POLL: Duration = Duration::from_secs(1);

/// Why roster could not get or keep a token for a server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// A step of the OAuth flow failed (discovery, registration, token request).
    #[error("OAuth for server `{server}` failed: {message}")]
    Flow {
        /// The server.
        server: String,
        /// What failed, in words (never a token).
        message: String,
    },
    /// The server refused roster's token for too little scope (403 `insufficient_scope`): a
    /// person logs in again, for the wider scope.
    #[error(
        "server `{server}` wants more scope than roster's token has: run `roster auth login {server}`"
    )]
    NeedsScope {
        /// The server.
        server: String,
        /// Its `WWW-Authenticate`, naming the scope.
        challenge: String,
    },
    /// The token store could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `client_secret_env` names a variable that is not set.
    #[error(
        "server `{server}`: environment variable `{var}` (servers.{server}.oauth.client_secret_env) is not set"
    )]
    MissingSecret {
        /// The server.
        server: String,
        /// The variable.
        var: String,
    },
    /// The loopback listener for the login redirect could not be opened.
    #[error("cannot receive the login redirect on 127.0.0.1:{port}: {source}")]
    Callback {
        /// The port asked for (0: any).
        port: u16,
        /// Why.
        source: std::io::Error,
    },
    /// No redirect came back in time.
    #[error("no login redirect came back within {0:?}")]
    Timeout(Duration),
}

impl OAuthError {
    fn flow(server: &str, error: impl std::fmt::Display) -> OAuthError {
        OAuthError::Flow {
            server: server.to_owned(),
            message: error.to_string(),
        }
    }
}

/// A server's login as `roster auth status` shows it (read from the store, nothing dialled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthStatus {
    /// No token: `roster auth login` it.
    NeedsLogin,
    /// A token that is still good (`expires_in` `None`: the server did not say).
    LoggedIn {
        /// How long the access token has left.
        expires_in: Option<Duration>,
        /// Whether roster can refresh it without a person.
        refreshable: bool,
        /// The scopes granted.
        scopes: Vec<String>,
    },
    /// The access token has expired.
    Expired {
        /// Whether roster can refresh it without a person (else: log in again).
        refreshable: bool,
    },
}

impl AuthStatus {
    /// One line for a person: `logged in (expires in 59m 58s)`, `needs-login`, …
    pub fn describe(&self) -> String {
        match self {
            AuthStatus::NeedsLogin => "needs-login".to_owned(),
            AuthStatus::LoggedIn {
                expires_in,
                refreshable,
                ..
            } => {
                let refresh = if *refreshable { ", refreshable" } else { "" };
                match expires_in {
                    Some(left) => format!(
                        "logged in (expires in {}{refresh})",
                        humantime::format_duration(Duration::from_secs(left.as_secs()))
                    ),
                    None => format!("logged in (no expiry given{refresh})"),
                }
            }
            AuthStatus::Expired { refreshable: true } => {
                "expired (refreshed at the next connection)".to_owned()
            }
            AuthStatus::Expired { refreshable: false } => "needs-login (token expired)".to_owned(),
        }
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn server_credentials(
    store: Arc<dyn Tokens>,
    server: &str,
    url: &str,
) -> credentials::ServerCredentials {
    ServerCredentials {
        store,
        server: server.to_owned(),
        url: url.to_owned(),
    }
}

/// The pre-registered client's secret, read from `client_secret_env` now.
fn client_secret(server: &str, config: &OAuthConfig) -> Result<Option<String>, OAuthError> {
    let Some(var) = &config.client_secret_env else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(secret) if !secret.is_empty() => Ok(Some(secret)),
        _ => Err(OAuthError::MissingSecret {
            server: server.to_owned(),
            var: var.clone(),
        }),
    }
}

/// What `server`'s login looks like in `tokens` (nothing is dialled).
pub fn status(server: &str, url: &str, tokens: &Arc<dyn Tokens>) -> Result<AuthStatus, OAuthError> {
    let credentials = server_credentials(tokens.clone(), server, url);
    let stored = credentials
        .read()
        .map_err(|e| OAuthError::flow(server, e))?;
    Ok(status_of(stored.as_ref(), now_secs()))
}

fn status_of(stored: Option<&StoredCredentials>, now: u64) -> AuthStatus {
    let Some(token) = stored
        .and_then(|s| s.token_response.as_ref())
        .and_then(|t| serde_json::to_value(t).ok())
    else {
        return AuthStatus::NeedsLogin;
    };
    let refreshable = token
        .get("refresh_token")
        .is_some_and(|r| r.as_str().is_some_and(|r| !r.is_empty()));
    let received = stored.and_then(|s| s.token_received_at);
    let expires_in = token.get("expires_in").and_then(serde_json::Value::as_u64);
    let left = match (received, expires_in) {
        (Some(at), Some(lasts)) => Some((at + lasts).saturating_sub(now)),
        _ => None,
    };
    if left == Some(0) {
        return AuthStatus::Expired { refreshable };
    }
    AuthStatus::LoggedIn {
        expires_in: left.map(Duration::from_secs),
        refreshable,
        scopes: stored.map(|s| s.granted_scopes.clone()).unwrap_or_default(),
    }
}

/// Forgets `server`'s tokens; `true` if it had some. A running gateway's next request to the
/// server goes without a token, and the server then waits for a login.
pub fn logout(server: &str, tokens: &dyn Tokens) -> Result<bool, OAuthError> {
    Ok(tokens.clear(server)?)
}

/// When `server`'s row in the token store was last written (`None`: no row); what a server
/// waiting for a login watches.
pub fn stamp(server: &str, tokens: &dyn Tokens) -> Result<Option<i64>, OAuthError> {
    Ok(tokens.stamp(server)?)
}

/// Records that `server` answered 403 `insufficient_scope` (`challenge`): until a login with
/// the wider scope, its connections fail as needing one (step-up is a person's decision).
pub fn record_step_up(server: &str, tokens: &dyn Tokens, challenge: &str) {
    tracing::warn!(
        server,
        "the server wants more scope than roster's token has; waiting for a login"
    );
    if let Err(error) = tokens.set_step_up(server, challenge) {
        tracing::warn!(server, %error, "cannot record the step-up");
    }
}

/// Whether `server` waits for a login with more scope (a 403 `insufficient_scope` was
/// recorded by [`record_step_up`] and no login has happened since).
pub fn step_up_pending(server: &str, tokens: &dyn Tokens) -> Result<bool, OAuthError> {
    Ok(tokens.step_up(server)?.is_some())
}

/// `http`, sending `server`'s token with every request: refreshed when it is about to expire
/// and once when the server answers 401. Without a stored token requests go without one, and
/// a server that needs one answers 401 (the connection then fails as needing a login) —
/// except under `grant = "client_credentials"`, where roster gets a token itself first.
pub async fn authorized<C>(
    server: &str,
    url: &str,
    config: &OAuthConfig,
    tokens: &Arc<dyn Tokens>,
    http: C,
) -> Result<AuthClient<C>, OAuthError> {
    let flow = |e: AuthError| OAuthError::flow(server, e);
    let store = tokens.clone();
    if let Some(challenge) = store.step_up(server)? {
        return Err(OAuthError::NeedsScope {
            server: server.to_owned(),
            challenge,
        });
    }
    let credentials = server_credentials(store, server, url);
    let stored = credentials.read().map_err(flow)?;
    let mut manager = AuthorizationManager::new(url).await.map_err(flow)?;
    manager.set_credential_store(credentials);
    let mut usable = stored.is_some_and(|s| s.token_response.is_some())
        && manager.initialize_from_store().await.map_err(flow)?;
    if usable {
        if let (Some(id), Some(secret)) = (&config.client_id, client_secret(server, config)?) {
            // The store keeps the client id only; refreshes of a confidential client need its
            // secret too.
            manager
                .configure_client(
                    OAuthClientConfig::new(id.clone(), url.to_owned()).with_client_secret(secret),
                )
                .map_err(flow)?;
        }
        match manager.get_access_token().await {
            Ok(_) => {}
            Err(AuthError::AuthorizationRequired) => usable = false,
            Err(error) => return Err(flow(error)),
        }
    }
    if !usable && config.grant == OAuthGrant::ClientCredentials {
        client_credentials(server, url, config, &mut manager).await?;
    }
    Ok(AuthClient::new(http, manager))
}

/// The client credentials grant: roster's own token, no person involved.
async fn client_credentials(
    server: &str,
    url: &str,
    config: &OAuthConfig,
    manager: &mut AuthorizationManager,
) -> Result<(), OAuthError> {
    let flow = |e: AuthError| OAuthError::flow(server, e);
    let (Some(client_id), Some(client_secret)) =
        (config.client_id.clone(), client_secret(server, config)?)
    else {
        return Err(OAuthError::flow(
            server,
            "grant = \"client_credentials\" needs `client_id` and `client_secret_env`",
        ));
    };
    let resolution = manager.resolve_metadata().await.map_err(flow)?;
    manager.set_metadata(resolution.metadata);
    let grant = ClientCredentialsConfig::ClientSecret {
        client_id,
        client_secret,
        scopes: config.scopes.clone(),
        resource: Some(url.to_owned()),
    };
    manager
        .validate_client_credentials_metadata(&grant)
        .map_err(flow)?;
    manager.configure_client_credentials(&grant).map_err(flow)?;
    manager
        .exchange_client_credentials(&grant)
        .await
        .map_err(flow)?;
    tracing::info!(server, "got a token with the client credentials grant");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(token: serde_json::Value, received: Option<u64>) -> StoredCredentials {
        StoredCredentials::new(
            "client".to_owned(),
            Some(serde_json::from_value(token).expect("a token response")),
            vec!["read".to_owned()],
            received,
        )
    }

    #[test]
    fn status_reads_expiry_and_refreshability_without_the_token() {
        assert_eq!(status_of(None, 100), AuthStatus::NeedsLogin);
        let fresh = stored(
            serde_json::json!({"access_token": "secret-a", "token_type": "bearer", "expires_in": 3600, "refresh_token": "secret-r"}),
            Some(1000),
        );
        let status = status_of(Some(&fresh), 1600);
        assert_eq!(
            status,
            AuthStatus::LoggedIn {
                expires_in: Some(Duration::from_secs(3000)),
                refreshable: true,
                scopes: vec!["read".to_owned()],
            }
        );
        assert_eq!(status.describe(), "logged in (expires in 50m, refreshable)");
        assert!(!format!("{status:?}").contains("secret"));
        assert_eq!(
            status_of(Some(&fresh), 5000),
            AuthStatus::Expired { refreshable: true }
        );
        let no_refresh = stored(
            serde_json::json!({"access_token": "a", "token_type": "bearer", "expires_in": 10}),
            Some(1000),
        );
        assert_eq!(
            status_of(Some(&no_refresh), 2000).describe(),
            "needs-login (token expired)"
        );
    }
}
