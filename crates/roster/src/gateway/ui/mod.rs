//! The dashboard: `/ui` for the people who run roster — servers, tools and their pins, the
//! recent changes, the inbox with its pending confirmations, and the skills — in English,
//! Portuguese (Brazil) or Spanish by the browser's `Accept-Language`.
//!
//! Server-rendered HTML with one small script (`assets/app.js`) that re-reads the page's
//! `<main>` every few seconds; every form works without it. Every action goes through the code
//! the CLI and the admin socket use: [`inbox_request::run_inbox`] for the inbox,
//! `Roster::refresh_server` and `Roster::restart_server` for servers, [`crate::reviews::select`]
//! and [`crate::store::PinStore::decide`] for pins.
//!
//! Nobody gets in without a credential: the admin token (`[gateway] admin_token_env`), typed into
//! the login form (never taken from a query string), or a one-time link that `roster ui` gets
//! over the admin socket (whose owner only can ask), spent at its first use; login attempts are
//! rate-limited per client address and overall (429 with `Retry-After`). Either gives a
//! session cookie (`HttpOnly`, `SameSite=Strict`, `Path=/ui`); every form carries the session's
//! CSRF token; every answer carries a `Content-Security-Policy` that allows nothing but the
//! dashboard's own script and style; the Host and Origin checks of `/mcp` apply.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Extension;
use axum::Router;
use axum::extract::{Form, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::Gateway;
use super::http::guard::{Rebinding, digest};
use super::http::listener::{ClientAddr, serve_router};
use super::inbox_request::{self, InboxRequest};
use crate::sync::lock;

mod attempts;
mod pages;

/// How long a `roster ui` link can be used, once.
const ONE_TIME_TTL: Duration = Duration::from_secs(300);
/// One-time links held at once; the oldest goes first.
const MAX_ONE_TIME: usize = 16;
/// How long a dashboard session lasts from its login.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Dashboard sessions held at once; the oldest goes first.
const MAX_SESSIONS: usize = 64;
/// The session cookie's name.
const COOKIE: &str = "roster_ui";
/// The longest form body an action takes (a form is a few short fields).
const MAX_FORM_BYTES: usize = 16 * 1024;

/// Who may use the dashboard: its sessions and the one-time links `roster ui` hands out, and
/// the loopback listener `roster ui` opened.
#[derive(Default)]
pub(crate) struct Access {
    one_time: Mutex<Vec<([u8; 32], Instant)>>,
    sessions: Mutex<HashMap<String, UiSession>>,
    loopback: tokio::sync::Mutex<Option<SocketAddr>>,
    /// Login attempts (a token typed in, a link spent), on every listener of the dashboard.
    attempts: attempts::LoginAttempts,
}

struct UiSession {
    /// The digest of the session id is the key; this is the CSRF token its forms carry.
    csrf: String,
    created: Instant,
    /// One message for the next page (what the last action did).
    flash: Option<Flash>,
}

/// What an action did, shown once at the top of the next page.
#[derive(Debug, Clone)]
struct Flash {
    ok: bool,
    text: String,
}

/// A fresh unguessable token: two v4 UUIDs (244 random bits from the operating system's
/// generator), as hex.
fn random_token() -> String {
    let a = uuid::Uuid::new_v4().simple().to_string();
    let b = uuid::Uuid::new_v4().simple().to_string();
    format!("{a}{b}")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Access {
    /// A link token that opens one session, within [`ONE_TIME_TTL`].
    fn mint_one_time(&self) -> String {
        let token = random_token();
        let mut held = lock(&self.one_time);
        let now = Instant::now();
        held.retain(|(_, at)| now.duration_since(*at) < ONE_TIME_TTL);
        if held.len() >= MAX_ONE_TIME {
            held.remove(0);
        }
        held.push((digest(&token), now));
        token
    }

    /// Spends a one-time token: `true` once, for a live one.
    fn spend_one_time(&self, token: &str) -> bool {
        let wanted = digest(token);
        let now = Instant::now();
        let mut held = lock(&self.one_time);
        held.retain(|(_, at)| now.duration_since(*at) < ONE_TIME_TTL);
        match held.iter().position(|(d, _)| *d == wanted) {
            Some(at) => {
                held.remove(at);
                true
            }
            None => false,
        }
    }

    /// A new session; returns its id (the cookie's value).
    fn open_session(&self) -> String {
        let id = random_token();
        let mut sessions = lock(&self.sessions);
        let now = Instant::now();
        sessions.retain(|_, s| now.duration_since(s.created) < SESSION_TTL);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.created)
                .map(|(k, _)| k.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            hex(&digest(&id)),
            UiSession {
                csrf: random_token(),
                created: now,
                flash: None,
            },
        );
        id
    }

    /// The session of a request's cookie: its key and CSRF token.
    fn session(&self, headers: &HeaderMap) -> Option<(String, String)> {
        let id = cookie(headers, COOKIE)?;
        let key = hex(&digest(id));
        let sessions = lock(&self.sessions);
        let session = sessions.get(&key)?;
        (session.created.elapsed() < SESSION_TTL).then(|| (key, session.csrf.clone()))
    }

    fn close_session(&self, key: &str) {
        lock(&self.sessions).remove(key);
    }

    fn set_flash(&self, key: &str, flash: Flash) {
        if let Some(session) = lock(&self.sessions).get_mut(key) {
            session.flash = Some(flash);
        }
    }

    fn take_flash(&self, key: &str) -> Option<Flash> {
        lock(&self.sessions)
            .get_mut(key)
            .and_then(|s| s.flash.take())
    }
}

/// The value of cookie `name` in a request.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

/// Gives a one-time link to the dashboard on a loopback listener of `gateway` (opened at the
/// first call, on `127.0.0.1` and a free port, kept until the gateway stops): what `roster ui`
/// asks for over the admin socket.
pub async fn open_link(gateway: &Arc<Gateway>) -> Result<String, String> {
    let access = gateway.ui_access();
    let mut loopback = access.loopback.lock().await;
    let addr = match *loopback {
        Some(addr) => addr,
        None => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("cannot open a loopback listener for the dashboard: {e}"))?;
            let addr = listener
                .local_addr()
                .map_err(|e| format!("the dashboard's listener has no address: {e}"))?;
            spawn_listener(gateway, listener, None);
            *loopback = Some(addr);
            addr
        }
    };
    let token = access.mint_one_time();
    Ok(format!("http://{addr}/ui/login?token={token}"))
}

/// Serves the dashboard alone on `listener` (the loopback listener of `roster ui`, or
/// `[gateway] ui_listen`) until the gateway stops.
pub fn spawn_listener(
    gateway: &Arc<Gateway>,
    listener: tokio::net::TcpListener,
    admin_digest: Option<[u8; 32]>,
) {
    let config = gateway.roster().running_gateway();
    let router = routes(
        gateway.clone(),
        Rebinding::for_config(&gateway.config()),
        admin_digest,
    );
    let shutdown = gateway.shutdown_token();
    tokio::spawn(async move {
        if let Err(error) = serve_router(listener, router, &config, shutdown).await {
            tracing::warn!(%error, "the dashboard's listener stopped");
        }
    });
}

/// Serves `[gateway] ui_listen` in the background, if it is set; the admin token of
/// `admin_token_env` logs in there (and `roster ui` links). An address that cannot be bound is
/// a warning.
pub async fn spawn_ui_listen(gateway: &Arc<Gateway>, config: &crate::config::GatewayConfig) {
    let Some(addr) = config.ui_listen.as_deref() else {
        return;
    };
    let admin_digest = config
        .admin_token_env
        .as_deref()
        .and_then(|var| std::env::var(var).ok())
        .filter(|t| !t.is_empty())
        .map(|t| digest(&t));
    match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => {
            if let Ok(bound) = listener.local_addr() {
                eprintln!("roster: serving the dashboard at http://{bound}/ui");
            }
            spawn_listener(gateway, listener, admin_digest);
        }
        Err(e) => tracing::warn!("cannot serve the dashboard on {addr} ([gateway] ui_listen): {e}"),
    }
}

/// What every dashboard handler shares.
pub(crate) struct Ui {
    gateway: Arc<Gateway>,
    rebinding: Rebinding,
    /// SHA-256 of the admin token (`None`: only `roster ui` links log in).
    admin_digest: Option<[u8; 32]>,
}

/// The dashboard's routes, all under `/ui`.
pub(crate) fn routes(
    gateway: Arc<Gateway>,
    rebinding: Rebinding,
    admin_digest: Option<[u8; 32]>,
) -> Router {
    let ui = Arc::new(Ui {
        gateway,
        rebinding,
        admin_digest,
    });
    Router::new()
        .route("/ui", get(|| async { Redirect::to("/ui/servers") }))
        .route("/ui/", get(|| async { Redirect::to("/ui/servers") }))
        .route("/ui/login", get(login_page).post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/assets/app.js", get(script))
        .route("/ui/assets/style.css", get(style))
        .route("/ui/servers", get(page))
        .route("/ui/tools", get(page))
        .route("/ui/tool", get(page))
        .route("/ui/changes", get(page))
        .route("/ui/inbox", get(page))
        .route("/ui/inbox/clear", get(page))
        .route("/ui/skills", get(page))
        .route("/ui/action/{action}", post(action))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES))
        .layer(middleware::from_fn_with_state(ui.clone(), guard))
        .with_state(ui)
}

/// Before every dashboard request: the Host/Origin checks of `/mcp`; after it: the headers
/// that keep the page to itself.
async fn guard(State(ui): State<Arc<Ui>>, request: Request, next: Next) -> Response {
    let mut response = match ui.rebinding.check(request.headers()) {
        Err(why) => (StatusCode::FORBIDDEN, format!("Forbidden: {why}")).into_response(),
        Ok(()) => next.run(request).await,
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    )
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", include_str!("assets/style.css"))
}

/// One of the dashboard's own files (checked again at each load: it changes with the binary).
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The language of a request: the browser's `Accept-Language`.
fn language(headers: &HeaderMap) -> &'static str {
    crate::i18n::from_accept_language(
        headers
            .get(header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok()),
    )
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

#[derive(Deserialize)]
struct LoginQuery {
    token: Option<String>,
}

/// `GET /ui/login`: a `roster ui` link's token is spent here for a session; without one, the
/// form for the admin token.
async fn login_page(
    State(ui): State<Arc<Ui>>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    Query(query): Query<LoginQuery>,
) -> Response {
    let lang = language(&headers);
    if let Some(token) = query.token {
        if let Err(refused) = attempt(&ui, client, lang) {
            return *refused;
        }
        if ui.gateway.ui_access().spend_one_time(&token) {
            return signed_in(&ui);
        }
        return html(
            StatusCode::UNAUTHORIZED,
            pages::login(lang, ui.admin_digest.is_some(), Some("ui.login.link_spent")),
        );
    }
    html(
        StatusCode::OK,
        pages::login(lang, ui.admin_digest.is_some(), None),
    )
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

/// `POST /ui/login`: the admin token, typed into the form.
async fn login(
    State(ui): State<Arc<Ui>>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let lang = language(&headers);
    if let Err(why) = same_origin(&headers) {
        return (StatusCode::FORBIDDEN, why).into_response();
    }
    if let Err(refused) = attempt(&ui, client, lang) {
        return *refused;
    }
    let ok = ui
        .admin_digest
        .is_some_and(|expected| digest(form.token.trim()) == expected);
    if ok {
        return signed_in(&ui);
    }
    html(
        StatusCode::UNAUTHORIZED,
        pages::login(
            lang,
            ui.admin_digest.is_some(),
            Some("ui.login.wrong_token"),
        ),
    )
}

/// Counts a login attempt from `client`; one over the limits is answered 429, with how many
/// seconds to wait in `Retry-After`, whatever its token.
fn attempt(
    ui: &Ui,
    client: Option<Extension<ClientAddr>>,
    lang: &'static str,
) -> Result<(), Box<Response>> {
    let client = client.map(|Extension(ClientAddr(addr))| addr.ip());
    let access = ui.gateway.ui_access();
    let Err(wait) = access.attempts.attempt(client, Instant::now()) else {
        return Ok(());
    };
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let mut response = html(
        StatusCode::TOO_MANY_REQUESTS,
        pages::login(lang, ui.admin_digest.is_some(), Some("ui.login.too_many")),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
    Err(Box::new(response))
}

/// A new session's cookie, and on to the servers page (the link's token leaves the address bar).
fn signed_in(ui: &Ui) -> Response {
    let id = ui.gateway.ui_access().open_session();
    let mut response = Redirect::to("/ui/servers").into_response();
    let cookie = format!(
        "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/ui; Max-Age={}",
        SESSION_TTL.as_secs()
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn logout(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Ok(key) = checked(&ui, &headers, &form.csrf) {
        ui.gateway.ui_access().close_session(&key);
    }
    let mut response = Redirect::to("/ui/login").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("roster_ui=; HttpOnly; SameSite=Strict; Path=/ui; Max-Age=0"),
    );
    response
}

/// A state-changing request must come from a page of this origin: an `Origin` (or, without
/// one, a `Referer`) naming another host is refused.
fn same_origin(headers: &HeaderMap) -> Result<(), String> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let from = headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER))
        .and_then(|v| v.to_str().ok());
    let Some(from) = from else {
        return Ok(());
    };
    let authority = from
        .split_once("://")
        .map(|(_, rest)| rest.split('/').next().unwrap_or_default())
        .unwrap_or_default();
    if authority.eq_ignore_ascii_case(host) {
        Ok(())
    } else {
        Err(format!(
            "Forbidden: a dashboard action must come from the dashboard's own page (the request came from {from:?})"
        ))
    }
}

/// The session key of a state-changing request whose form carries its session's CSRF token.
fn checked(ui: &Ui, headers: &HeaderMap, csrf: &str) -> Result<String, Box<Response>> {
    same_origin(headers).map_err(|why| Box::new((StatusCode::FORBIDDEN, why).into_response()))?;
    let Some((key, expected)) = ui.gateway.ui_access().session(headers) else {
        return Err(Box::new(Redirect::to("/ui/login").into_response()));
    };
    let matches = !csrf.is_empty() && digest(csrf) == digest(&expected);
    if !matches {
        return Err(Box::new(
            (
                StatusCode::FORBIDDEN,
                "Forbidden: the form's CSRF token is missing or stale; reload the page and try again",
            )
                .into_response(),
        ));
    }
    Ok(key)
}

/// Every page: the session's, in the browser's language; with `X-Roster-Live: 1` (the
/// page's script, every few seconds) only the `<main>` part.
async fn page(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    uri: axum::http::Uri,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let Some((key, csrf)) = ui.gateway.ui_access().session(&headers) else {
        return Redirect::to("/ui/login").into_response();
    };
    let lang = language(&headers);
    let live = headers.get("x-roster-live").is_some();
    let view = pages::View {
        lang,
        csrf: &csrf,
        gateway: &ui.gateway,
        query: &query,
    };
    let (title, main) = match uri.path() {
        "/ui/servers" => pages::servers(&view),
        "/ui/tools" => pages::tools(&view),
        "/ui/tool" => pages::tool(&view),
        "/ui/changes" => pages::changes(&view),
        "/ui/inbox" => pages::inbox(&view),
        "/ui/inbox/clear" => pages::clear_confirmation(&view),
        "/ui/skills" => pages::skills(&view),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    if live {
        let mut response = html(StatusCode::OK, main.clone());
        let headers = response.headers_mut();
        if let Ok(stamp) = HeaderValue::from_str(&pages::main_stamp(&main)) {
            headers.insert("x-roster-stamp", stamp);
        }
        let unread = ui.gateway.inbox().map_or(0, |i| i.unread_count());
        headers.insert("x-roster-unread", HeaderValue::from(unread));
        return response;
    }
    let flash = ui.gateway.ui_access().take_flash(&key);
    html(
        StatusCode::OK,
        pages::layout(&view, uri.path(), &title, flash.as_ref(), &main),
    )
}

/// `POST /ui/action/NAME`: one action, then back to the page it came from with what it did.
async fn action(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    axum::extract::Path(name): axum::extract::Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let csrf = form.get("csrf").map(String::as_str).unwrap_or_default();
    let key = match checked(&ui, &headers, csrf) {
        Ok(key) => key,
        Err(response) => return *response,
    };
    let lang = language(&headers);
    let (back, outcome) = run_action(&ui.gateway, lang, &name, &form).await;
    // A person's decisions leave a line in the log (in English: the outcome's words are the
    // page's language, so only whether it worked).
    tracing::info!(action = %name, ok = outcome.is_ok(), "dashboard action");
    let flash = match outcome {
        Ok(text) => Flash { ok: true, text },
        Err(text) => Flash { ok: false, text },
    };
    ui.gateway.ui_access().set_flash(&key, flash);
    Redirect::to(&back).into_response()
}

/// Carries out one action; returns the page to go back to and what happened, in `lang`.
async fn run_action(
    gateway: &Arc<Gateway>,
    lang: &'static str,
    name: &str,
    form: &HashMap<String, String>,
) -> (String, Result<String, String>) {
    use rust_i18n::t;
    let field = |name: &str| form.get(name).map(String::as_str).unwrap_or_default();
    let server = field("server");
    match name {
        "refresh-all" => {
            let marked = gateway.refresh();
            (
                "/ui/servers".into(),
                Ok(t!("ui.servers.marked_all", locale = lang, n = marked).into_owned()),
            )
        }
        "refresh" => {
            let outcome = if gateway.roster().refresh_server(server) {
                Ok(t!("ui.servers.marked_one", locale = lang, server = server).into_owned())
            } else {
                Err(t!("ui.servers.unknown", locale = lang, server = server).into_owned())
            };
            ("/ui/servers".into(), outcome)
        }
        "restart" => {
            let outcome = match gateway.roster().restart_server(server) {
                Ok(()) => {
                    Ok(t!("ui.servers.restarted", locale = lang, server = server).into_owned())
                }
                Err(e) => Err(e.to_string()),
            };
            ("/ui/servers".into(), outcome)
        }
        "approve" | "reject" => {
            let tool = field("name");
            let back = match field("back") {
                "tool" => format!("/ui/tool?name={}", pages::query_escape(field("exposed"))),
                _ => "/ui/tools".to_owned(),
            };
            let decision = if name == "approve" {
                crate::store::Decision::Approve
            } else {
                crate::store::Decision::Reject
            };
            (back, pages::decide(gateway, lang, decision, tool))
        }
        "ack" => {
            let up_to = field("up_to").parse().ok();
            (
                "/ui/inbox".into(),
                inbox(gateway, InboxRequest::Ack { up_to }).map(|v| {
                    let n = v["acknowledged"].as_u64().unwrap_or(0);
                    t!("ui.inbox.acknowledged", locale = lang, n = n).into_owned()
                }),
            )
        }
        "confirm" => {
            let yes = field("answer") == "yes";
            let outcome = match field("id").parse() {
                Ok(id) => inbox(gateway, InboxRequest::Confirm { id, yes }).map(|v| {
                    let word = if v["decision"] == "confirmed" {
                        t!("ui.inbox.confirmed", locale = lang)
                    } else {
                        t!("ui.inbox.declined", locale = lang)
                    };
                    t!(
                        "ui.inbox.decided",
                        locale = lang,
                        id = field("id"),
                        decision = word
                    )
                    .into_owned()
                }),
                Err(_) => Err(format!("no pending confirm has id {:?}", field("id"))),
            };
            ("/ui/inbox".into(), outcome)
        }
        "clear" => {
            let all = field("all") == "1";
            (
                "/ui/inbox".into(),
                inbox(gateway, InboxRequest::Clear { all }).and_then(|v| {
                    let text = t!(
                        "ui.inbox.cleared",
                        locale = lang,
                        n = v["cleared"].as_u64().unwrap_or(0),
                        declined = v["declined_confirms"].as_u64().unwrap_or(0)
                    )
                    .into_owned();
                    match v["partial_warning"].as_str() {
                        Some(warning) => Err(format!("{text}; {warning}")),
                        None => Ok(text),
                    }
                }),
            )
        }
        _ => (
            "/ui/servers".into(),
            Err(format!("the dashboard has no action {name:?}")),
        ),
    }
}

/// An inbox request, as the admin socket carries it out.
fn inbox(gateway: &Gateway, request: InboxRequest) -> Result<serde_json::Value, String> {
    match gateway.inbox() {
        Some(inbox) => inbox_request::run_inbox(inbox, request),
        None => Err(inbox_request::NO_INBOX.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_opens_one_session_once() {
        let access = Access::default();
        let token = access.mint_one_time();
        assert!(!access.spend_one_time("not-a-token"));
        assert!(access.spend_one_time(&token));
        assert!(!access.spend_one_time(&token), "a spent link is spent");
    }

    #[test]
    fn links_and_sessions_held_at_once_are_bounded() {
        let access = Access::default();
        let first = access.mint_one_time();
        for _ in 0..MAX_ONE_TIME {
            access.mint_one_time();
        }
        assert_eq!(lock(&access.one_time).len(), MAX_ONE_TIME);
        assert!(!access.spend_one_time(&first), "the oldest link went first");
        let ids: Vec<String> = (0..MAX_SESSIONS + 5)
            .map(|_| access.open_session())
            .collect();
        assert_eq!(lock(&access.sessions).len(), MAX_SESSIONS);
        let mut headers = HeaderMap::new();
        let newest = ids.last().expect("a session");
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("other=1; {COOKIE}={newest}")).expect("a header"),
        );
        assert!(access.session(&headers).is_some());
    }

    #[test]
    fn an_action_from_another_origin_is_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8940"));
        assert!(
            same_origin(&headers).is_ok(),
            "no Origin: a non-browser client"
        );
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8940"),
        );
        assert!(same_origin(&headers).is_ok());
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(same_origin(&headers).is_err());
        headers.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(same_origin(&headers).is_err(), "an opaque origin");
    }
}
