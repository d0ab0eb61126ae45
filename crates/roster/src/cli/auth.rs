//! `roster auth login | status | logout`: a person's side of the OAuth tokens roster holds for
//! its servers.
//!
//! These commands only read and write the token store in the state directory
//! (`oauth/tokens.sqlite3`, owner-only); a running gateway notices a login by itself and
//! connects the server that was waiting for it. Tokens are never printed.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::config::{Config, OAuthConfig, OAuthGrant, TransportConfig};
use crate::i18n::text;
use crate::oauth::{self, AuthStatus, Browser};

/// `roster auth`.
#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Log in to a server that uses OAuth: prints (and on a desktop opens) the authorization
    /// URL and receives the redirect on 127.0.0.1.
    Login(LoginArgs),
    /// Each OAuth server's login: logged in (and for how long), or needs-login. Never prints a
    /// token.
    Status(StatusArgs),
    /// Forget a server's tokens (the running gateway then shows it as needs-login).
    Logout(LogoutArgs),
}

/// `roster auth login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server, as named in `[servers.NAME]`.
    pub server: String,
    /// Receive the redirect on this port of 127.0.0.1 [default: the server's
    /// `oauth.redirect_port`, else any free port].
    #[arg(long)]
    pub port: Option<u16>,
    /// Only print the URL; do not open a browser.
    #[arg(long)]
    pub no_browser: bool,
    /// Follow the authorization URL's redirects without a browser (for authorization servers
    /// that approve without a person).
    #[arg(long, conflicts_with = "no_browser")]
    pub headless: bool,
    /// How long to wait for the redirect.
    #[arg(long, default_value = "5m", value_parser = crate::config::parse_duration)]
    pub timeout: Duration,
}

/// `roster auth status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// A JSON array instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `roster auth logout`.
#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// The server, as named in `[servers.NAME]`.
    pub server: String,
}

fn load(config_path: &Path) -> anyhow::Result<Config> {
    Config::load(config_path).with_context(|| {
        format!(
            "roster auth needs the configuration that names the servers ({})",
            config_path.display()
        )
    })
}

/// The URL and OAuth settings of `server`, or an error that says what is missing.
fn oauth_server<'c>(
    config: &'c Config,
    server: &str,
) -> anyhow::Result<(&'c str, &'c OAuthConfig)> {
    let Some(entry) = config.servers.get(server) else {
        let names: Vec<&str> = config.servers.keys().map(String::as_str).collect();
        bail!(
            "no server `{server}` in the configuration (servers: {})",
            names.join(", ")
        );
    };
    let url = match &entry.transport {
        TransportConfig::StreamableHttp { url, .. } | TransportConfig::Sse { url, .. } => url,
        TransportConfig::Stdio { .. } => {
            bail!("server `{server}` is a stdio server; OAuth is for `url` servers")
        }
    };
    let Some(oauth) = &entry.oauth else {
        bail!(
            "server `{server}` does not use OAuth: add `auth = \"oauth\"` (or an [servers.{server}.oauth] table) to its entry"
        );
    };
    Ok((url, oauth))
}

/// Runs one `roster auth` command.
pub fn run(command: AuthCommand, config_path: &Path) -> anyhow::Result<()> {
    let config = load(config_path)?;
    // Where the tokens live: the [store] replicas share, else the state dir (opened at first
    // use, so a config error is named before the database is dialled).
    let tokens = || -> anyhow::Result<_> {
        Ok(crate::store::Stores::open(config.store.as_ref(), &config.gateway.state_dir)?.tokens())
    };
    match command {
        AuthCommand::Login(args) => {
            let (url, oauth) = oauth_server(&config, &args.server)?;
            if oauth.grant == OAuthGrant::ClientCredentials {
                bail!(
                    "server `{}` uses grant = \"client_credentials\": roster gets its tokens itself, no login needed",
                    args.server
                );
            }
            let mut oauth = oauth.clone();
            if args.port.is_some() {
                oauth.redirect_port = args.port;
            }
            let browser = if args.headless {
                Browser::Headless
            } else if args.no_browser {
                Browser::Print
            } else {
                Browser::Open
            };
            let runtime = tokio::runtime::Runtime::new()?;
            let outcome = runtime.block_on(oauth::login(
                &args.server,
                url,
                &oauth,
                &tokens()?,
                None,
                browser,
                args.timeout,
                |auth_url| {
                    let open = text("cli.auth.open_url", &[("server", &args.server)]);
                    println!("{open}\n\n  {auth_url}\n");
                    println!("{}", text("cli.auth.waiting", &[]));
                },
            ))?;
            let scopes = if outcome.scopes.is_empty() {
                String::new()
            } else {
                text("cli.auth.scopes", &[("scopes", &outcome.scopes.join(" "))])
            };
            println!(
                "{}",
                text(
                    "cli.auth.logged_in",
                    &[("server", &args.server), ("scopes", &scopes)]
                )
            );
            println!("{}", text("cli.auth.picked_up", &[]));
        }
        AuthCommand::Status(args) => {
            let tokens = tokens()?;
            let mut rows = Vec::new();
            for name in &config.server_order {
                let Ok((url, oauth)) = oauth_server(&config, name) else {
                    continue;
                };
                let status = oauth::status(name, url, &tokens)?;
                rows.push((name.as_str(), url, oauth.grant, status));
            }
            if args.json {
                let out: Vec<_> = rows
                    .iter()
                    .map(|(name, url, grant, status)| status_json(name, url, *grant, status))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else if rows.is_empty() {
                println!("{}", text("cli.auth.no_oauth_servers", &[]));
            } else {
                let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
                for (name, url, grant, status) in &rows {
                    let state = match (grant, status) {
                        (OAuthGrant::ClientCredentials, AuthStatus::NeedsLogin) => {
                            text("cli.auth.no_token_yet", &[])
                        }
                        _ => describe(status),
                    };
                    println!("{name:width$}  {state}  {}", crate::config::redact_url(url));
                }
            }
        }
        AuthCommand::Logout(args) => {
            oauth_server(&config, &args.server)?;
            if oauth::logout(&args.server, &*tokens()?)? {
                println!(
                    "{}",
                    text("cli.auth.logged_out", &[("server", &args.server)])
                );
            } else {
                println!(
                    "{}",
                    text("cli.auth.no_tokens", &[("server", &args.server)])
                );
            }
        }
    }
    Ok(())
}

/// [`AuthStatus::describe`] in the terminal's language.
fn describe(status: &AuthStatus) -> String {
    match status {
        AuthStatus::NeedsLogin => text("cli.auth.state.needs_login", &[]),
        AuthStatus::LoggedIn {
            expires_in,
            refreshable,
            ..
        } => {
            let refresh = if *refreshable {
                text("cli.auth.state.refreshable", &[])
            } else {
                String::new()
            };
            match expires_in {
                Some(left) => text(
                    "cli.auth.state.logged_in_expires",
                    &[
                        (
                            "left",
                            &humantime::format_duration(Duration::from_secs(left.as_secs())),
                        ),
                        ("refreshable", &refresh),
                    ],
                ),
                None => text("cli.auth.state.logged_in", &[("refreshable", &refresh)]),
            }
        }
        AuthStatus::Expired { refreshable: true } => {
            text("cli.auth.state.expired_refreshable", &[])
        }
        AuthStatus::Expired { refreshable: false } => text("cli.auth.state.expired", &[]),
    }
}

fn status_json(name: &str, url: &str, grant: OAuthGrant, status: &AuthStatus) -> serde_json::Value {
    let grant = match grant {
        OAuthGrant::AuthorizationCode => "authorization_code",
        OAuthGrant::ClientCredentials => "client_credentials",
    };
    let (state, expires_in, refreshable, scopes) = match status {
        AuthStatus::NeedsLogin => ("needs-login", None, false, Vec::new()),
        AuthStatus::LoggedIn {
            expires_in,
            refreshable,
            scopes,
        } => (
            "logged-in",
            expires_in.map(|d| d.as_secs()),
            *refreshable,
            scopes.clone(),
        ),
        AuthStatus::Expired { refreshable } => ("expired", Some(0), *refreshable, Vec::new()),
    };
    json!({
        "server": name,
        "url": crate::config::redact_url(url),
        "grant": grant,
        "state": state,
        "expires_in_s": expires_in,
        "refreshable": refreshable,
        "scopes": scopes,
    })
}
