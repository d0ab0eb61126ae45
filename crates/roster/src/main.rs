//! The `roster` binary: a thin shell over the `roster` library.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use roster::gateway::admin::{self, AdminCommand};
use roster::gateway::reload::{ReloadOutcome, Reloader};
use roster::gateway::{Gateway, ServeConfig, Skills};
use roster::i18n::text;
use roster::inbox::{Inbox, InboxConfig};
use roster::servers::LogSink;
use roster::{Config, Roster, RosterOptions};
use serde_json::json;

use roster::cli::{completions, inbox, tools};

/// roster — an MCP gateway with a live tool registry and a skill catalog.
#[derive(Debug, Parser)]
#[command(name = "roster", version, about, long_about = None)]
struct Cli {
    /// The configuration file.
    #[arg(
        long,
        global = true,
        env = "ROSTER_CONFIG",
        default_value = "roster.toml"
    )]
    config: PathBuf,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the live registry and the skill catalog to MCP clients (stdio by default).
    Serve(ServeArgs),
    /// Show each server of the running gateway: transport, state, tools, listing times, errors.
    Status(AdminArgs),
    /// List the tools the running gateway exposes; `drift`, `approve` and `reject` decide on
    /// changed or new tool definitions.
    Tools(tools::ToolsArgs),
    /// Mark every server of the running gateway stale (its next turn re-lists them).
    Refresh(AdminArgs),
    /// Read the configuration file again and apply it to the running gateway, as SIGHUP does:
    /// added servers connect, removed ones close, changed ones reconnect, sessions stay.
    Reload(ReloadArgs),
    /// Open the dashboard of the running gateway: prints a one-time link to it on 127.0.0.1
    /// (`--open` also starts your browser on it).
    Ui(UiArgs),
    /// Connect to one MCP server as the gateway connects to its servers, list its tools, call
    /// each once, and print what happened as JSON (how the conformance suite drives roster's
    /// client side).
    Probe(ProbeArgs),
    /// Run the built-in demo MCP server on stdio (echo, add, word_count, notes, toggle_tool).
    DemoServer,
    /// Work with skill directories.
    #[command(subcommand)]
    Skills(roster::cli::skills::SkillsCommand),
    /// Notifications servers pushed, and requests waiting for your decision.
    Inbox(inbox::InboxArgs),
    /// Log in to servers that use OAuth, see their logins, log out.
    #[command(subcommand)]
    Auth(roster::cli::auth::AuthCommand),
    /// Print a shell completion script (bash, zsh or fish).
    Completions(completions::CompletionsArgs),
    /// Candidates for the completion scripts (not for people).
    #[command(name = "__complete", hide = true)]
    Complete(completions::CompleteArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Serve one client over stdin/stdout (the default).
    #[arg(long, conflicts_with = "http")]
    stdio: bool,
    /// Serve streamable HTTP at ADDR (`/mcp`, `GET /healthz`); without ADDR, `[gateway]
    /// listen` (default 127.0.0.1:8931).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
    http: Option<String>,
    /// Worker threads serving clients [default: `TOKIO_WORKER_THREADS`, else 1]. One spends
    /// the least CPU per call; more spread many HTTP clients' calls over the cores.
    #[arg(long, value_name = "N")]
    workers: Option<std::num::NonZeroUsize>,
}

#[derive(Debug, Args)]
struct ProbeArgs {
    /// The server's URL.
    url: String,
    /// `streamable-http` or `sse` (legacy HTTP+SSE).
    #[arg(long, default_value = "streamable-http")]
    transport: String,
    /// `auto`, `legacy` (initialize era) or `modern` (2026-07-28). Default: as
    /// `MCP_CONFORMANCE_PROTOCOL_VERSION` says, else `auto`.
    #[arg(long)]
    protocol: Option<String>,
    /// Call tool NAME with these arguments instead of ones made from its schema (repeatable).
    #[arg(long = "call", value_name = "NAME=JSON")]
    calls: Vec<String>,
    /// Reach the server as an `auth = "oauth"` server: log in without a person when it asks.
    #[arg(long)]
    oauth: bool,
    /// With `--oauth`: a client id registered out of band (instead of dynamic registration).
    #[arg(long, requires = "oauth")]
    client_id: Option<String>,
    /// With `--client-id`: the environment variable holding that client's secret.
    #[arg(long, requires = "client_id")]
    client_secret_env: Option<String>,
    /// Load this skill of the server (by name or path) as `get_skill` would: its `SKILL.md`
    /// checked against the server's entry, then the files its manifest lists (repeatable).
    #[arg(long = "load-skill", value_name = "NAME")]
    load_skills: Vec<String>,
}

#[derive(Debug, Args)]
struct UiArgs {
    /// Open the link in the desktop's browser (xdg-open, or open on macOS).
    #[arg(long)]
    open: bool,
    /// Print the gateway's answer as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct AdminArgs {
    /// Print the gateway's answer as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ReloadArgs {
    #[command(flatten)]
    admin: AdminArgs,
    /// Apply a file that names no server, removing every server (without it, such a reload is
    /// refused: a file saved half-way must not close every server).
    #[arg(long)]
    allow_empty: bool,
}

/// The async runtime for a command. `roster serve` runs its work on one worker thread unless
/// `--workers` (or `TOKIO_WORKER_THREADS`) asks for more: a forwarded call hops between tasks
/// (the client's connection, the session, the server's connection), and with a worker per core
/// each hop to a task another worker may take wakes that thread — over HTTP 6.4 against 2.0
/// context switches and 199.6 against 146.0 µs of CPU per call at 1 session, and fewer calls
/// per second at 16 sessions too (bench/analysis.md, the fast-path profiles); one core forwarded some
/// 15,000 calls/s there.
/// Everything else gets a worker per core (or `TOKIO_WORKER_THREADS`).
fn runtime_for(command: Option<&Command>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(Command::Serve(args)) = command {
        match args.workers {
            Some(workers) => {
                builder.worker_threads(workers.get());
            }
            // tokio reads the variable itself when no count is set.
            None if std::env::var_os("TOKIO_WORKER_THREADS").is_none() => {
                builder.worker_threads(1);
            }
            None => {}
        }
    }
    builder.build()
}

fn main() -> anyhow::Result<ExitCode> {
    // `roster __sandbox SPEC -- COMMAND ARGS…`: the launcher of a sandboxed stdio server,
    // which roster starts in the server's place. First, before anything could start a thread:
    // a user namespace takes a single-threaded process.
    #[cfg(target_os = "linux")]
    if let Some(code) = sandbox_launcher() {
        return Ok(code);
    }
    roster::i18n::init_cli();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Skills(command)) => {
            let max_file_size = match Config::load(&cli.config) {
                Ok(config) => config.skills.max_file_size,
                Err(e) if e.is_missing_file() => roster::store::DEFAULT_MAX_SKILL_FILE_SIZE,
                Err(e) => {
                    return Err(anyhow::Error::from(e).context(
                        "the configuration has an error, so roster cannot tell the skill file size limit",
                    ));
                }
            };
            return roster::cli::skills::run(command, max_file_size);
        }
        Some(Command::Inbox(args)) => {
            inbox::run(args, &cli.config)?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Auth(command)) => {
            roster::cli::auth::run(command, &cli.config)?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Completions(args)) => {
            use clap::CommandFactory;
            completions::run(args, Cli::command())?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Complete(args)) => {
            use clap::CommandFactory;
            // 1: no live value for that word (the scripts complete it as clap's would).
            let live = completions::complete(args, &cli.config, Cli::command())?;
            return Ok(if live {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        Some(Command::Tools(tools::ToolsArgs {
            command: Some(command),
            ..
        })) => {
            tools::run(command, &cli.config)?;
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    if matches!(cli.command, Some(Command::Serve(_))) {
        roster::tune_for_serving();
    }
    let runtime = runtime_for(cli.command.as_ref())?;
    match cli.command {
        Some(Command::DemoServer) => runtime.block_on(roster::demo::run_stdio())?,
        Some(Command::Probe(args)) => {
            init_logging();
            return runtime.block_on(probe(args));
        }
        Some(Command::Serve(args)) => {
            init_logging();
            // Dropped after the gateway ends: the last spans are flushed then.
            let _traces = roster::telemetry::Traces::from_env(runtime.handle())?;
            runtime.block_on(serve(&cli.config, args))?;
        }
        Some(Command::Status(args)) => {
            return runtime.block_on(admin_command(&cli.config, AdminCommand::Status, args));
        }
        Some(Command::Tools(tools::ToolsArgs {
            command: None,
            json,
        })) => {
            return runtime.block_on(admin_command(
                &cli.config,
                AdminCommand::Tools,
                AdminArgs { json },
            ));
        }
        Some(Command::Refresh(args)) => {
            return runtime.block_on(admin_command(&cli.config, AdminCommand::Refresh, args));
        }
        Some(Command::Reload(args)) => {
            let ReloadArgs { admin, allow_empty } = args;
            let command = AdminCommand::Reload;
            return runtime.block_on(admin_command_with(&cli.config, command, admin, allow_empty));
        }
        Some(Command::Ui(args)) => {
            return runtime.block_on(ui(&cli.config, args));
        }
        Some(
            Command::Skills(_)
            | Command::Inbox(_)
            | Command::Auth(_)
            | Command::Completions(_)
            | Command::Complete(_)
            | Command::Tools(_),
        ) => {}
        None => {
            use clap::CommandFactory;
            Cli::command().print_help()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn probe(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    use roster::cli::probe::{self, ProbeSpec};
    let protocol = match args.protocol {
        Some(protocol) => protocol,
        None => std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION")
            .map(|v| probe::protocol_for_version(&v).to_owned())
            .unwrap_or_else(|_| "auto".to_owned()),
    };
    let mut calls = std::collections::BTreeMap::new();
    for call in &args.calls {
        let (name, arguments) = probe::parse_call(call).map_err(anyhow::Error::msg)?;
        calls.insert(name, arguments);
    }
    let spec = ProbeSpec {
        url: args.url,
        transport: args.transport,
        protocol,
        calls,
        extra: String::new(),
        oauth: args.oauth,
        client: args.client_id.map(|id| (id, args.client_secret_env)),
        load_skills: args.load_skills,
    };
    match probe::run(&spec).await {
        Ok(report) => {
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("roster probe: {e:#}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Logs go to stderr: on stdio, stdout is the MCP channel. Every line, whichever crate logs
/// it, has its URLs' userinfo and query strings masked.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ROSTER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(roster::logs::Redacted(std::io::stderr))
        .init();
}

fn load_config(path: &Path) -> anyhow::Result<Config> {
    match Config::load(path) {
        Ok(config) => Ok(config),
        Err(e) if e.is_missing_file() => Err(anyhow::Error::from(e).context(format!(
            "cannot start without a configuration (looked at {}; pass --config or set ROSTER_CONFIG)",
            path.display()
        ))),
        Err(e) => Err(anyhow::Error::from(e).context("the configuration has an error")),
    }
}

async fn serve(config_path: &Path, args: ServeArgs) -> anyhow::Result<()> {
    // Registered before any server starts: a SIGTERM that came before the handler existed would
    // end roster without stopping its servers' process groups.
    let signalled = shutdown_signal();
    let config = load_config(config_path)?;
    let (skills, problems) = Skills::load(&config.skills.paths, config.skills.max_file_size);
    for problem in problems {
        tracing::warn!("skill left out: {problem}");
    }
    let skills = Arc::new(skills);
    // Replicas share their state through `[store]`: without it nothing starts. Made once,
    // passed to everything that keeps state.
    let stores = roster::store::Stores::open(config.store.as_ref(), &config.gateway.state_dir)
        .map_err(anyhow::Error::from)
        .map_err(|e| e.context("cannot reach the [store] database replicas share"))?;
    // One gateway owns a state directory's inbox; another one on the same directory (a second
    // stdio client) runs without it, and without the `channels` tool. A shared inbox has no
    // owner: every replica has it.
    let inbox_config = InboxConfig {
        // Read state is kept per client identity: every configured client has a place.
        max_identities: config
            .clients
            .len()
            .max(roster::inbox::DEFAULT_MAX_IDENTITIES),
        ..InboxConfig::new(stores.clone())
    };
    let inbox = match Inbox::open(inbox_config) {
        Ok(inbox) => Some(Arc::new(inbox)),
        Err(e) if stores.is_shared() => {
            return Err(anyhow::Error::from(e).context("cannot open the inbox replicas share"));
        }
        Err(e) => {
            tracing::warn!("no inbox for this gateway: {e}");
            None
        }
    };
    if let Some(inbox) = &inbox {
        // What another replica appends reaches this one at once (a decision included).
        let inbox = Arc::downgrade(inbox);
        stores.follow(&[roster::inbox::STORE_CHANNEL], move |_, position| {
            if let Some(inbox) = inbox.upgrade() {
                inbox.catch_up(position.parse().ok());
            }
        })?;
    }
    let options = RosterOptions {
        sink: match &inbox {
            Some(inbox) => inbox.clone(),
            None => Arc::new(LogSink),
        },
        on_reconcile: None,
        // Pins outlive the process: a redefined tool is caught after a restart too.
        stores: Some(stores.clone()),
        // Serving starts at once; a request waits for what it needs of servers still starting.
        wait_for_servers: false,
    };
    let roster = Roster::start_with(config.clone(), options).await?;
    skills.follow(&roster);
    // Edited skills are served without a restart; a broken edit says why in the inbox.
    let changed = roster.clone();
    let problems = inbox.clone();
    skills.watch(
        move || changed.skill_resources_changed(),
        move |text| {
            if let Some(inbox) = &problems {
                let params = serde_json::json!({ "message": text });
                inbox.record("skills", "roster/skill_problem", params, false);
            }
        },
    );
    let serve_config = ServeConfig::from_gateway(&config.gateway);
    let listen = serve_config.listen.clone();
    let gateway = Gateway::new(
        roster,
        serve_config,
        &config.clients,
        config.auth.as_ref(),
        skills,
        inbox,
    )?;
    gateway.share(&stores)?;
    let reloader = Reloader::new(config_path, &gateway);
    gateway.set_reloader(reloader.clone());
    if config.gateway.watch_config {
        reloader.watch(gateway.shutdown_token());
    }
    reload_on_hangup(reloader);
    roster::metrics::http::spawn_listener(
        gateway.roster().metrics(),
        gateway.shutdown_token(),
        config.gateway.metrics.listen.as_deref(),
    )
    .await;
    roster::gateway::ui::spawn_ui_listen(&gateway, &config.gateway).await;

    // Several clients may each start their own `roster serve` on one state directory; only
    // the first gets the admin socket, the others serve without it.
    let socket = admin::socket_path(&config.gateway.state_dir);
    let admin_gateway = gateway.clone();
    let max_line = config.gateway.admin_max_line;
    tokio::spawn(async move {
        if let Err(e) = admin::serve_with(admin_gateway, socket, max_line).await {
            tracing::warn!("{e}; `roster status` will not reach this gateway");
        }
    });

    let signal_gateway = gateway.clone();
    tokio::spawn(async move {
        signalled.await;
        signal_gateway.shutdown_token().cancel();
    });

    let outcome = match args.http {
        Some(addr) if !args.stdio => {
            let addr = if addr.is_empty() { listen } else { addr };
            let settings = roster::gateway::http::HttpSettings::from_gateway(&config.gateway)?
                .with_stores(stores.clone());
            let endpoint = roster::gateway::http::HttpEndpoint::bind(gateway.clone(), &addr)
                .await?
                .with_settings(settings);
            if let Some(bound) = endpoint.local_addr() {
                eprintln!("roster: serving MCP at http://{bound}/mcp");
            }
            endpoint.serve().await.map_err(anyhow::Error::from)
        }
        _ => roster::gateway::stdio::serve(gateway.clone())
            .await
            .map_err(anyhow::Error::from),
    };
    gateway.shutdown().await;
    outcome
}

/// Reloads the configuration at every SIGHUP (the conventional "read your config again").
fn reload_on_hangup(reloader: std::sync::Arc<Reloader>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::hangup()) {
            Ok(mut hangups) => {
                tokio::spawn(async move {
                    while hangups.recv().await.is_some() {
                        reloader.reload("SIGHUP").await;
                    }
                });
            }
            Err(error) => tracing::warn!(%error, "SIGHUP will not reload the configuration"),
        }
    }
}

/// Resolves at SIGINT or SIGTERM. The handlers are installed when this is called, not when
/// the future is first polled.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = terminate.recv() => {}
                    }
                }
                (Ok(mut only), Err(_)) | (Err(_), Ok(mut only)) => {
                    only.recv().await;
                }
                (Err(_), Err(_)) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The admin socket of the gateway `config_path` configures.
fn admin_socket(config_path: &Path) -> anyhow::Result<PathBuf> {
    // A file that is there but wrong would point at the wrong gateway, or at none.
    let state_dir = roster::config::state_dir_for(None, config_path).map_err(|e| {
        anyhow::Error::from(e)
            .context("the configuration has an error, so roster cannot tell which gateway to ask")
    })?;
    Ok(admin::socket_path(&state_dir))
}

/// `roster ui`: a one-time link to the running gateway's dashboard, printed (and opened).
async fn ui(config_path: &Path, args: UiArgs) -> anyhow::Result<ExitCode> {
    let answer = admin::request(&admin_socket(config_path)?, AdminCommand::Ui).await?;
    let url = answer
        .get("url")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
    } else {
        println!("{url}");
        eprintln!("roster: the link opens the dashboard once, within 5 minutes");
    }
    if args.open {
        let opener = if cfg!(target_os = "macos") {
            "open"
        } else {
            "xdg-open"
        };
        if let Err(e) = std::process::Command::new(opener).arg(url).spawn() {
            eprintln!("roster: cannot start {opener} ({e}); open the link above yourself");
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn admin_command(
    config_path: &Path,
    command: AdminCommand,
    args: AdminArgs,
) -> anyhow::Result<ExitCode> {
    admin_command_with(config_path, command, args, false).await
}

/// [`admin_command`]; `allow_empty` goes with a reload (`roster reload --allow-empty`).
async fn admin_command_with(
    config_path: &Path,
    command: AdminCommand,
    args: AdminArgs,
    allow_empty: bool,
) -> anyhow::Result<ExitCode> {
    let socket = admin_socket(config_path)?;
    let answer = match command {
        AdminCommand::Reload => admin::reload(&socket, allow_empty).await?,
        _ => admin::request(&socket, command).await?,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(reload_exit(command, &answer));
    }
    match command {
        AdminCommand::Status => {
            // The configuration line is a second question: a gateway without a file (or an
            // older one) still shows its servers.
            if let Ok(config) = admin::request(&socket, AdminCommand::Config).await {
                print_config(&config);
            }
            print_status(&answer)
        }
        AdminCommand::Reload => {
            let outcome: ReloadOutcome = serde_json::from_value(answer.clone())?;
            if outcome.ok {
                println!("{}", outcome.summary());
            } else {
                eprintln!("{}", outcome.summary());
            }
        }
        AdminCommand::Config => println!("{}", serde_json::to_string_pretty(&answer)?),
        AdminCommand::Tools => {
            for tool in answer.as_array().into_iter().flatten() {
                let name = tool.get("name").and_then(|v| v.as_str()).unwrap_or("?");
                let description = tool
                    .get("description")
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("");
                println!("{name:<40} {description}");
            }
        }
        AdminCommand::Ui => println!("{}", answer["url"].as_str().unwrap_or_default()),
        AdminCommand::Refresh => {
            let n = answer
                .get("servers_marked_stale")
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            println!("{}", text("cli.refresh.marked", &[("count", &n)]));
        }
    }
    Ok(reload_exit(command, &answer))
}

/// A reload that kept the running configuration fails the command.
fn reload_exit(command: AdminCommand, answer: &serde_json::Value) -> ExitCode {
    let failed = command == AdminCommand::Reload && answer.get("ok") != Some(&json!(true));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `config PATH, loaded 12s ago; last reload 3s ago (SIGHUP): reloaded: added b`.
fn print_config(config: &serde_json::Value) {
    let path = config.get("path").and_then(|v| v.as_str()).unwrap_or("?");
    let loaded = config
        .get("loaded_ms_ago")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    let mut line = text(
        "cli.status.config",
        &[("path", &path), ("secs", &(loaded / 1000))],
    );
    if let Some(last) = config
        .get("last_reload")
        .and_then(|v| serde_json::from_value::<ReloadOutcome>(v.clone()).ok())
    {
        let ago = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| (d.as_millis() as u64).saturating_sub(last.at_ms) / 1000)
            .unwrap_or(0);
        line.push_str(&text(
            "cli.status.last_reload",
            &[
                ("secs", &ago),
                ("trigger", &last.trigger),
                ("summary", &last.summary()),
            ],
        ));
    }
    println!("{line}");
}

/// Runs the sandbox launcher when this process was started as one; `None` otherwise.
#[cfg(target_os = "linux")]
fn sandbox_launcher() -> Option<ExitCode> {
    use roster::servers::sandbox;
    let mut args = std::env::args_os().skip(1);
    if args.next()? != sandbox::SUBCOMMAND {
        return None;
    }
    let spec = args.next().unwrap_or_default();
    let command: Vec<std::ffi::OsString> = args.skip_while(|a| a != "--").skip(1).collect();
    Some(sandbox::launch::run(&spec.to_string_lossy(), &command))
}

fn print_status(answer: &serde_json::Value) {
    let field = |v: &serde_json::Value, k: &str| -> String {
        match v.get(k) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Null) | None => "-".to_owned(),
            Some(other) => other.to_string(),
        }
    };
    // A sandboxed stdio server says so beside its transport (its rules: `--json`).
    let transport = |s: &serde_json::Value| match (field(s, "transport"), s["sandbox"].is_object())
    {
        (name, true) => format!("{name}+sandbox"),
        (name, false) => name,
    };
    // The columns, each at least as wide as its header in the terminal's language.
    let columns = [
        ("server", 16),
        ("transport", 9),
        ("connection", 13),
        ("listing", 14),
        ("tools", 5),
        ("listed", 10),
        ("next", 10),
    ]
    .map(|(column, width)| {
        let header = text(&format!("cli.status.header.{column}"), &[]);
        let width = width.max(header.chars().count());
        // `stdio+sandbox` widens its column only where a server runs sandboxed.
        let width = match column {
            "transport" => answer
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| transport(s).chars().count())
                .fold(width, usize::max),
            _ => width,
        };
        (header, width)
    });
    let [w0, w1, w2, w3, w4, w5, w6] = columns.each_ref().map(|(_, width)| *width);
    let [h0, h1, h2, h3, h4, h5, h6] = columns.map(|(header, _)| header);
    println!(
        "{h0:<w0$} {h1:<w1$} {h2:<w2$} {h3:<w3$} {h4:>w4$} {h5:>w5$} {h6:>w6$}  {}",
        text("cli.status.header.last_error", &[]),
    );
    for s in answer.as_array().into_iter().flatten() {
        // Whole seconds are what a person reads; the JSON keeps milliseconds.
        let secs = |k: &str, key: &str| match s.get(k).and_then(|v| v.as_u64()) {
            Some(ms) => text(key, &[("secs", &(ms / 1000))]),
            None => "-".to_owned(),
        };
        println!(
            "{:<w0$} {:<w1$} {:<w2$} {:<w3$} {:>w4$} {:>w5$} {:>w6$}  {}",
            field(s, "name"),
            transport(s),
            field(s, "connection"),
            field(s, "listing"),
            field(s, "tools"),
            secs("listed_ms_ago", "cli.status.ago"),
            secs("next_listing_in_ms", "cli.status.in"),
            field(s, "last_error"),
        );
    }
}
