//! The authorization code flow with PKCE, once per server: discovery from the server's 401,
//! registration, the authorization URL (shown to a person, opened in a browser, or followed
//! by roster itself), the redirect received on a loopback port, the code exchanged for tokens
//! that go to the token store.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::AuthorizationCallback;
use rmcp::transport::{
    AuthorizationManager, AuthorizationRequest, AuthorizationSession, WWWAuthenticateParams,
};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{OAuthError, server_credentials};
use crate::config::OAuthConfig;
use crate::store::Tokens;

/// The client name roster registers under (dynamic client registration).
const CLIENT_NAME: &str = "roster";
/// How long a headless login waits for the redirect.
const HEADLESS_WAIT: Duration = Duration::from_secs(60);
/// Redirects a headless login follows to reach the loopback callback.
const HEADLESS_REDIRECTS: usize = 10;

/// How the authorization URL reaches whoever approves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Browser {
    /// Print it, and on a desktop (`DISPLAY` or `WAYLAND_DISPLAY` set) open it too.
    Open,
    /// Only print it (a person opens it, on this machine: the redirect goes to 127.0.0.1).
    Print,
    /// roster GETs it and follows the redirects itself: for authorization servers that
    /// approve without a person (test and conformance servers, some machine setups).
    Headless,
}

/// What a login got (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginOutcome {
    /// The client id roster used (pre-registered, metadata document URL or registered).
    pub client_id: String,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// How long the access token lasts, when the server said.
    pub expires_in: Option<Duration>,
    /// Whether a refresh token came with it.
    pub refreshable: bool,
}

/// Logs `server` (at `url`) in without a person: roster follows the authorization URL's
/// redirects itself to its loopback callback, then exchanges the code. Tokens go to the
/// `tokens`, where a running gateway picks them up. `challenge` is the
/// `WWW-Authenticate` of a 401 or 403 (`insufficient_scope`: step-up) if the caller has one;
/// `None`: roster asks the server for it.
pub async fn login_headless(
    server: &str,
    url: &str,
    config: &OAuthConfig,
    tokens: &Arc<dyn Tokens>,
    challenge: Option<&str>,
) -> Result<LoginOutcome, OAuthError> {
    login(
        server,
        url,
        config,
        tokens,
        challenge,
        Browser::Headless,
        HEADLESS_WAIT,
        |_| {},
    )
    .await
}

/// Logs `server` (at `url`) in: discovery, registration, the authorization URL handed to
/// `show` (and per `browser`), the redirect received on 127.0.0.1 (`redirect_port`, else any
/// free port) within `wait`, its `state` checked, the code exchanged, the tokens stored in
/// `tokens`.
#[allow(clippy::too_many_arguments)] // the server, its settings and store, and how to ask
pub async fn login(
    server: &str,
    url: &str,
    config: &OAuthConfig,
    tokens: &Arc<dyn Tokens>,
    challenge: Option<&str>,
    browser: Browser,
    wait: Duration,
    show: impl FnOnce(&str),
) -> Result<LoginOutcome, OAuthError> {
    let flow = |e: rmcp::transport::AuthError| OAuthError::flow(server, e);
    let store = tokens;
    let step_up = store.step_up(server)?;
    let challenge = match (challenge, &step_up) {
        (Some(c), _) => Some(c.to_owned()),
        (None, Some(c)) => Some(c.clone()),
        (None, None) => probe(url).await,
    };
    let port = config.redirect_port.unwrap_or(0);
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|source| OAuthError::Callback { port, source })?;
    let port = listener
        .local_addr()
        .map_err(|source| OAuthError::Callback { port, source })?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");

    let credentials = server_credentials(store.clone(), server, url);
    let granted = credentials
        .read()
        .map_err(flow)?
        .filter(|c| c.token_response.is_some())
        .map(|c| c.granted_scopes)
        .unwrap_or_default();
    let mut manager = AuthorizationManager::new(url).await.map_err(flow)?;
    manager.set_credential_store(credentials);
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(flow)?;
    manager.set_metadata(resolution.metadata);

    let mut request = AuthorizationRequest::new(redirect_uri).with_client_name(CLIENT_NAME);
    let scopes = scopes_to_ask(url, &config.scopes, challenge.as_deref(), &granted);
    if !scopes.is_empty() {
        request = request.with_scopes(scopes);
    }
    if let Some(id) = &config.client_id {
        request = request.with_preregistered_client(id.clone());
        if let Some(secret) = super::client_secret(server, config)? {
            request = request.with_client_secret(secret);
        }
    }
    if let Some(document) = &config.client_metadata_url {
        request = request.with_client_metadata_url(document.clone());
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| flow(e))?;
    let auth_url = session.auth_url.clone();
    let state = reqwest::Url::parse(&auth_url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
        .ok_or_else(|| OAuthError::flow(server, "the authorization URL has no `state`"))?;

    let stop = CancellationToken::new();
    let mut callbacks = receive_callbacks(listener, state, stop.clone());
    show(&auth_url);
    let browsing = match browser {
        Browser::Open => {
            open_in_browser(&auth_url);
            None
        }
        Browser::Print => None,
        Browser::Headless => Some(tokio::spawn(follow(auth_url.clone()))),
    };
    let received = tokio::time::timeout(wait, async {
        match browsing {
            None => callbacks.recv().await,
            Some(mut browsing) => {
                tokio::select! {
                    biased;
                    callback = callbacks.recv() => callback,
                    done = &mut browsing => {
                        // The redirect reaches the listener before the GET ends: look once more.
                        match callbacks.try_recv() {
                            Ok(callback) => Some(callback),
                            Err(_) => Some(Err(match done {
                                Ok(Ok(status)) => format!(
                                    "the authorization server answered {status} without \
                                     redirecting back: it wants a person (run `roster auth \
                                     login` without --headless)"
                                ),
                                Ok(Err(error)) => error,
                                Err(error) => error.to_string(),
                            })),
                        }
                    }
                }
            }
        }
    })
    .await;
    stop.cancel();
    let callback = match received {
        Err(_) => return Err(OAuthError::Timeout(wait)),
        Ok(None) => return Err(OAuthError::flow(server, "the callback listener stopped")),
        Ok(Some(Err(message))) => return Err(OAuthError::flow(server, message)),
        Ok(Some(Ok(callback))) => callback,
    };
    session
        .handle_callback_with_issuer(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        )
        .await
        .map_err(flow)?;
    store.clear_step_up(server)?;
    let (client_id, token) = session.get_credentials().await.map_err(flow)?;
    let token = token.and_then(|t| serde_json::to_value(t).ok());
    let stored = server_credentials(tokens.clone(), server, url)
        .read()
        .map_err(flow)?;
    tracing::info!(server, "logged in");
    Ok(LoginOutcome {
        client_id,
        scopes: stored.map(|s| s.granted_scopes).unwrap_or_default(),
        expires_in: token
            .as_ref()
            .and_then(|t| t.get("expires_in"))
            .and_then(serde_json::Value::as_u64)
            .map(Duration::from_secs),
        refreshable: token
            .as_ref()
            .and_then(|t| t.get("refresh_token"))
            .is_some_and(|r| !r.is_null()),
    })
}

/// The scopes to ask for: the configured ones; else, when a challenge names scopes and a
/// login already holds some (step-up on `insufficient_scope`), both together; else none
/// (rmcp picks: the challenge's `scope`, else the server's `scopes_supported`).
fn scopes_to_ask(
    url: &str,
    configured: &[String],
    challenge: Option<&str>,
    granted: &[String],
) -> Vec<String> {
    if !configured.is_empty() {
        return configured.to_vec();
    }
    let asked = challenge
        .zip(reqwest::Url::parse(url).ok())
        .and_then(|(c, base)| WWWAuthenticateParams::parse(c, &base).scope)
        .unwrap_or_default();
    if asked.is_empty() || granted.is_empty() {
        return Vec::new();
    }
    let mut scopes = granted.to_vec();
    for scope in asked.split_whitespace() {
        if !scopes.iter().any(|s| s == scope) {
            scopes.push(scope.to_owned());
        }
    }
    scopes
}

/// The `WWW-Authenticate` with which the server refuses roster without a token (401 or 403),
/// if it does; where discovery starts. Asked with an `initialize`, else (a 2026-07-28 server
/// refuses that) with a `server/discover`; a server that takes either without a token and
/// guards its tools instead is asked for its `tools/list` too (in the session an `initialize`
/// opened, which is then closed).
async fn probe(url: &str) -> Option<String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .ok()?;
    let post = |version: &str, body: serde_json::Value, session: Option<&str>| {
        let mut request = client
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version)
            .json(&body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let response = post(LEGACY_VERSION, initialize, None).await.ok()?;
    if let Some(challenge) = challenge_of(&response) {
        return Some(challenge);
    }
    if !response.status().is_success() {
        let discover = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}
        });
        let response = post(MODERN_VERSION, discover, None).await.ok()?;
        if let Some(challenge) = challenge_of(&response) {
            return Some(challenge);
        }
        if !response.status().is_success() {
            return None;
        }
        return challenge_of(&post(MODERN_VERSION, list, None).await.ok()?);
    }
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    drop(response);
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let mut challenge = None;
    for message in [initialized, list] {
        match post(LEGACY_VERSION, message, session.as_deref()).await {
            Ok(response) => {
                challenge = challenge_of(&response);
                if challenge.is_some() {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    if let Some(session) = session {
        let _ = client
            .delete(url)
            .header("mcp-session-id", session)
            .send()
            .await;
    }
    challenge
}

/// The protocol versions the probe speaks: the last of the initialize era, and 2026-07-28.
const LEGACY_VERSION: &str = "2025-11-25";
const MODERN_VERSION: &str = "2026-07-28";

/// The `WWW-Authenticate` of a 401 or 403.
fn challenge_of(response: &reqwest::Response) -> Option<String> {
    if !matches!(response.status().as_u16(), 401 | 403) {
        return None;
    }
    response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Plays the browser: GETs the authorization URL and follows its redirects (to the loopback
/// callback, which answers). Returns the last status.
async fn follow(auth_url: String) -> Result<u16, String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::limited(HEADLESS_REDIRECTS))
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let response = client
        .get(&auth_url)
        .send()
        .await
        .map_err(|e| format!("following the authorization URL failed: {e}"))?;
    Ok(response.status().as_u16())
}

/// Opens `url` in the desktop's browser, when there is a desktop; a failure only means the
/// person opens the printed URL.
fn open_in_browser(url: &str) {
    let desktop = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if desktop {
        "xdg-open"
    } else {
        return;
    };
    match tokio::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(mut child) => {
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
        }
        Err(error) => tracing::debug!(opener, %error, "could not open a browser"),
    }
}

type Received = Result<AuthorizationCallback, String>;

/// Serves `GET /callback` on `listener` until `stop`: a redirect whose `state` is the one
/// roster sent is passed on; another is refused (400) and ignored, so a stray or forged
/// request cannot end the login.
fn receive_callbacks(
    listener: TcpListener,
    state: String,
    stop: CancellationToken,
) -> mpsc::Receiver<Received> {
    let (tx, rx) = mpsc::channel::<Received>(4);
    let app = axum::Router::new().route(
        "/callback",
        axum::routing::get(
            move |axum::extract::RawQuery(query): axum::extract::RawQuery| {
                let (tx, state) = (tx.clone(), state.clone());
                async move { callback(query.unwrap_or_default(), &state, &tx) }
            },
        ),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
    rx
}

fn callback(
    query: String,
    state: &str,
    tx: &mpsc::Sender<Received>,
) -> (axum::http::StatusCode, axum::response::Html<&'static str>) {
    use axum::http::StatusCode;
    use axum::response::Html;
    let url = format!("http://127.0.0.1/callback?{query}");
    let pairs: Vec<(String, String)> = reqwest::Url::parse(&url)
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default();
    let get = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    if get("state") != Some(state) {
        tracing::warn!("a login redirect with another `state` was refused");
        return (
            StatusCode::BAD_REQUEST,
            Html("<p>This login redirect is not the one roster is waiting for.</p>"),
        );
    }
    if let Some(error) = get("error") {
        let description = get("error_description").unwrap_or("");
        let _ = tx.try_send(Err(format!(
            "the authorization server refused: {error} {description}"
        )));
        return (
            StatusCode::OK,
            Html("<p>The authorization server refused the login; see roster's output.</p>"),
        );
    }
    match AuthorizationCallback::from_redirect_url(&url) {
        Ok(callback) => {
            let _ = tx.try_send(Ok(callback));
            (
                StatusCode::OK,
                Html("<p>roster is logged in. You can close this tab.</p>"),
            )
        }
        Err(error) => {
            let _ = tx.try_send(Err(error.to_string()));
            (
                StatusCode::BAD_REQUEST,
                Html("<p>The login redirect has no code.</p>"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_up_asks_for_what_is_held_and_what_the_challenge_names() {
        let url = "http://127.0.0.1:1/mcp";
        let step_up = r#"Bearer error="insufficient_scope", scope="write""#;
        assert_eq!(
            scopes_to_ask(url, &[], Some(step_up), &["read".to_owned()]),
            vec!["read".to_owned(), "write".to_owned()]
        );
        assert!(scopes_to_ask(url, &[], Some(step_up), &[]).is_empty());
        assert_eq!(
            scopes_to_ask(url, &["x".to_owned()], Some(step_up), &["read".to_owned()]),
            vec!["x".to_owned()]
        );
    }
}
