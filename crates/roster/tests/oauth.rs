//! roster as an OAuth client of its servers, against a real one: the official Python SDK's
//! authorization server and resource server (`tests/python/servers/oauth_protected.py`, whose
//! /authorize approves at once). One config entry, one `roster auth login` (the test plays the
//! browser: it GETs the printed URL and follows the redirect to roster's loopback callback),
//! and the server's tools appear in the running gateway; tokens refresh before expiry and on
//! 401; the headless login the conformance entry point uses.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::oauth::{login_as_a_person, protected_server, protected_server_with};
use common::{Gateway, call_tools, python, python_fixture, required_text as call_text};

fn config(dir: &Path, url: &str, transport: &str) -> String {
    format!(
        r#"[gateway]
state_dir = "{state}"

[servers.notes]
url = "{url}"
transport = "{transport}"
auth = "oauth"

[servers.plain]
command = "{python}"
args = ["{dynamic}"]
"#,
        state = dir.join("state").display(),
        python = python().display(),
        dynamic = python_fixture("dynamic.py").display(),
    )
}

/// A gateway fronting the protected server at `url` over `transport` as `notes` (and a plain
/// server), with its config file.
fn start(url: &str, transport: &str) -> (Gateway, PathBuf) {
    let gateway = Gateway::start(|dir| config(dir, url, transport), &[]);
    let config = gateway.dir.path().join("roster.toml");
    (gateway, config)
}

/// The protected server over `transport` (tokens lasting `token_ttl` seconds) behind a gateway
/// it waits for a login at, once a person has logged in; with the gateway's config file.
fn logged_in(transport: &str, token_ttl: u64) -> (common::KillOnDrop, Gateway, PathBuf) {
    let (server, url) = protected_server(transport, token_ttl);
    let (gateway, config) = start(&url, transport);
    wait_for_status(&gateway, "notes", |s| s["connection"] == "needs-login");
    log_in(&gateway, &config);
    (server, gateway, config)
}

/// The Python SDK client's report of `calls` made at `gateway`.
fn call(gateway: &Gateway, calls: Value) -> Value {
    call_tools(&["--url", &gateway.url], &calls)
}

/// `roster --config CONFIG ARGS`.
fn roster(config: &Path, args: &[&str]) -> common::Cli {
    common::cli(args).config(config)
}

/// The state `roster auth status` shows for the one OAuth server (`notes`): its second word.
fn auth_state(config: &Path) -> String {
    let status = roster(config, &["auth", "status"]).stdout();
    let state = status.split_whitespace().nth(1);
    state
        .unwrap_or_else(|| panic!("no state in {status:?}"))
        .to_owned()
}

/// The running gateway's status entry of `server`; `None` while its admin socket is not up.
fn try_server_status(gateway: &Gateway, server: &str) -> Option<Value> {
    let config = gateway.dir.path().join("roster.toml");
    let out = roster(&config, &["status", "--json"]).output();
    if !out.status.success() {
        return None;
    }
    let status: Value = serde_json::from_slice(&out.stdout).expect("status is JSON");
    let found = status["servers"]
        .as_array()
        .or_else(|| status.as_array())
        .and_then(|servers| servers.iter().find(|s| s["name"] == server))
        .cloned();
    Some(found.unwrap_or_else(|| panic!("no `{server}` in status: {status}")))
}

fn server_status(gateway: &Gateway, server: &str) -> Value {
    try_server_status(gateway, server).expect("the gateway answers `roster status`")
}

/// Polls until `ready` holds for `server`'s status (at most 60 s); returns that status.
fn wait_for_status(gateway: &Gateway, server: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = try_server_status(gateway, server).unwrap_or(Value::Null);
        if ready(&status) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "`{server}` never reached the awaited state: {status}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until `notes` waits for a login: shown as needs-login, none of its tools, and its last
/// error saying how to log in.
fn wait_for_a_login(gateway: &Gateway) {
    let waiting = wait_for_status(gateway, "notes", |s| s["connection"] == "needs-login");
    assert_eq!(waiting["tools"], 0, "{waiting}");
    assert!(
        common::str_contains(&waiting["last_error"], "roster auth login notes"),
        "{waiting}"
    );
}

/// A person's `roster auth login notes`, once the running gateway has picked it up (no
/// restart): `notes` is connected with its four tools. What the login printed.
fn log_in(gateway: &Gateway, config: &Path) -> String {
    let printed = login_as_a_person(config, "notes", &[]);
    wait_for_status(gateway, "notes", |s| {
        s["connection"] == "connected" && s["tools"] == 4
    });
    printed
}

/// [`log_in`], and a call goes with the token's scope. What the login printed.
fn login_then_serve(gateway: &Gateway, config: &Path) -> String {
    let printed = log_in(gateway, config);
    assert!(printed.contains("Logged in to `notes`"), "{printed}");
    let report = call(gateway, json!([["notes__whoami", {}]]));
    assert_eq!(call_text(&report["results"][0]), "mcp", "{report}");
    printed
}

/// The access token in the store (to check it is never printed).
fn stored_access_token(state: &Path, server: &str) -> String {
    let conn = rusqlite::Connection::open(state.join("oauth/tokens.sqlite3")).expect("open store");
    let credentials: String = conn
        .query_row(
            "SELECT credentials FROM oauth_token WHERE server = ?1",
            [server],
            |row| row.get(0),
        )
        .expect("a stored row");
    let credentials: Value = serde_json::from_str(&credentials).expect("JSON");
    credentials["token_response"]["access_token"]
        .as_str()
        .expect("an access token")
        .to_owned()
}

#[test]
fn one_config_entry_and_one_login_put_an_oauth_server_behind_a_running_gateway() {
    let (_server, url) = protected_server("streamable-http", 3600);
    let (gateway, config) = start(&url, "streamable-http");

    // Before the login: needs-login, none of its tools, the other server unaffected.
    wait_for_a_login(&gateway);
    wait_for_status(&gateway, "plain", |s| {
        s["connection"] == "connected" && s["tools"].as_u64() > Some(0)
    });
    let tools = roster(&config, &["tools", "--json"]).stdout();
    assert!(!tools.contains("notes__"), "{tools}");
    assert_eq!(auth_state(&config), "needs-login");
    let inbox = roster(&config, &["inbox", "list", "--json"]).stdout();
    assert!(
        inbox.contains("roster/needs_login") && inbox.contains("roster auth login notes"),
        "{inbox}"
    );

    let printed = login_then_serve(&gateway, &config);

    let status = roster(&config, &["auth", "status"]).stdout();
    assert!(status.contains("logged in (expires in"), "{status}");
    let token = stored_access_token(&gateway.state(), "notes");
    assert!(!status.contains(&token) && !printed.contains(&token));
    let status_json = roster(&config, &["auth", "status", "--json"]).stdout();
    assert!(!status_json.contains(&token), "{status_json}");

    let mode = |p: &str| common::mode_of(&gateway.state().join(p));
    assert_eq!(mode("oauth/tokens.sqlite3"), 0o600);
    assert_eq!(mode("oauth"), 0o700);

    let out = roster(&config, &["auth", "logout", "notes"]).stdout();
    assert!(out.contains("Logged out of `notes`"), "{out}");
    assert_eq!(auth_state(&config), "needs-login");
}

/// A server that takes `initialize` without a token and refuses the listing with 401: roster
/// shows it as needs-login, as when the handshake is refused (it showed it connected, with no
/// tools and no word of why), and one login puts its tools in the running gateway.
#[test]
fn a_server_that_refuses_the_listing_after_an_open_initialize_waits_for_a_login() {
    let (_server, url) = protected_server_with("streamable-http", 3600, &["--open-initialize"]);
    let gateway = Gateway::start(
        |dir| {
            config(dir, &url, "streamable-http").replace(
                "auth = \"oauth\"",
                "auth = \"oauth\"\nprotocol = \"legacy\"",
            )
        },
        &[],
    );
    let config = gateway.dir.path().join("roster.toml");
    wait_for_a_login(&gateway);
    let inbox = roster(&config, &["inbox", "list", "--json"]).stdout();
    assert!(inbox.contains("roster/needs_login"), "{inbox}");

    login_then_serve(&gateway, &config);
}

/// A call refused with 401 that no refresh can mend (the server forgot every token, refresh
/// tokens too) makes the server wait for a login at once — its tools gone, the inbox told —
/// instead of keeping tools whose every call fails until the next listing, an hour later.
#[test]
fn a_call_refused_after_every_token_was_revoked_waits_for_a_login() {
    let (_server, url) = protected_server("streamable-http", 3600);
    let (gateway, config) = start(&url, "streamable-http");
    wait_for_a_login(&gateway);
    login_then_serve(&gateway, &config);
    let asked = server_status(&gateway, "notes")["logins_asked"]
        .as_u64()
        .expect("a count");

    let report = call(
        &gateway,
        json!([
            ["notes__revoke_access_tokens", {"refresh": true}],
            ["notes__whoami", {}]
        ]),
    );
    assert_eq!(report["results"][1]["isError"], true, "{report}");
    wait_for_a_login(&gateway);
    assert_eq!(
        server_status(&gateway, "notes")["logins_asked"].as_u64(),
        Some(asked + 1)
    );
    let inbox = roster(&config, &["inbox", "list", "--json"]).stdout();
    assert_eq!(inbox.matches("roster/needs_login").count(), 2, "{inbox}");

    login_then_serve(&gateway, &config);
}

#[test]
fn tokens_are_refreshed_before_they_expire_and_when_the_server_refuses_them() {
    // Tokens of six seconds: roster refreshes each in its last three, before it expires.
    let (_server, gateway, _config) = logged_in("streamable-http", 6);

    let stats = |gateway: &Gateway| -> Value {
        let report = call(gateway, json!([["notes__auth_stats", {}]]));
        serde_json::from_str(&call_text(&report["results"][0])).expect("stats are JSON")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = stats(&gateway);
        if now["refreshes"].as_u64() >= Some(1) {
            break;
        }
        assert!(Instant::now() < deadline, "never refreshed: {now}");
        std::thread::sleep(Duration::from_millis(300));
    }

    // A token the server no longer accepts: one 401, a refresh, the call goes through.
    let before = stats(&gateway)["refreshes"].as_u64().expect("a count");
    let report = call(
        &gateway,
        json!([
            ["notes__revoke_access_tokens", {}],
            ["notes__auth_stats", {}]
        ]),
    );
    let after: Value =
        serde_json::from_str(&call_text(&report["results"][1])).expect("stats are JSON");
    assert!(after["refreshes"].as_u64() > Some(before), "{after}");
    assert_eq!(server_status(&gateway, "notes")["connection"], "connected");
}

#[test]
fn a_403_for_too_little_scope_waits_for_a_login_that_asks_for_more() {
    step_up("streamable-http");
}

#[test]
fn a_403_for_too_little_scope_on_legacy_sse_waits_for_a_login_too() {
    step_up("sse");
}

fn step_up(transport: &str) {
    let (_server, gateway, config) = logged_in(transport, 3600);

    // The server wants `extra` for this tool: the call fails, the server waits for a login.
    let report = call(&gateway, json!([["notes__admin_task", {}]]));
    assert!(
        report["results"][0].get("error").is_some() || report["results"][0]["isError"] == true,
        "{report}"
    );
    let waiting = wait_for_status(&gateway, "notes", |s| s["connection"] == "needs-login");
    assert_eq!(waiting["tools"], 0, "{waiting}");

    // The next login asks for the scope held and the one the 403 named.
    let printed = log_in(&gateway, &config);
    assert!(printed.contains("scope=mcp+extra"), "{printed}");
    let report = call(
        &gateway,
        json!([["notes__admin_task", {}], ["notes__whoami", {}]]),
    );
    assert_eq!(call_text(&report["results"][0]), "done", "{report}");
    assert_eq!(call_text(&report["results"][1]), "mcp extra", "{report}");
}

#[test]
fn a_legacy_sse_server_behind_oauth_serves_its_tools_after_a_login() {
    let (_server, gateway, _config) = logged_in("sse", 3600);
    let report = call(&gateway, json!([["notes__whoami", {}]]));
    assert_eq!(call_text(&report["results"][0]), "mcp", "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headless_login_then_a_connection_lists_the_servers_tools() {
    let (_server, url) = protected_server("streamable-http", 3600);
    let dir = tempfile::tempdir().expect("temp dir");
    let oauth = roster::config::OAuthConfig::new();
    let tokens = roster::store::Stores::embedded(dir.path()).tokens();
    let mut server = roster::config::ServerConfig::http(&url);
    server.oauth = Some(oauth.clone());
    let notifications = roster::servers::Notifications::new();

    let refused =
        roster::servers::Connection::connect("notes", &server, notifications.clone(), &tokens)
            .await
            .expect_err("no token yet");
    let roster::servers::ConnectError::NeedsLogin { challenge, .. } = refused else {
        panic!("expected needs-login, got {refused}");
    };
    assert!(
        challenge
            .as_deref()
            .is_some_and(|c| c.contains("resource_metadata")),
        "{challenge:?}"
    );

    let outcome =
        roster::oauth::login_headless("notes", &url, &oauth, &tokens, challenge.as_deref())
            .await
            .expect("headless login");
    assert_eq!(outcome.scopes, vec!["mcp".to_owned()]);
    assert!(outcome.refreshable);

    let connection = roster::servers::Connection::connect("notes", &server, notifications, &tokens)
        .await
        .expect("connects with the token");
    let listing = connection.list_tools().await.expect("lists");
    let mut names: Vec<&str> = listing.tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["admin_task", "auth_stats", "revoke_access_tokens", "whoami"]
    );
}
