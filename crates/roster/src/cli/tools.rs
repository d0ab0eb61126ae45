//! `roster tools drift | approve | reject`: a person's side of the pins.
//!
//! A tool definition that differs from its pin (**drift**), or that was never pinned and waits
//! for approval, is kept in the pin store as a review. `drift` shows every review with a
//! readable diff and the hidden characters in it; `approve` makes the waiting definition the pin;
//! `reject` keeps it withheld until the server lists a different one. These commands only write
//! the store in the state directory: the running gateway notices a decision by itself.
//!
//! Plain `roster tools [--json]` (no subcommand) still lists the running gateway's tools; that
//! is `main.rs`'s admin command.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args, Subcommand, ValueHint};
use roster_core::naming::NamingConfig;

use super::state::stores_for;
use crate::config::Config;
use crate::i18n::text;
pub use crate::reviews::{
    Decided, Kind, NameProblem, Pending, Selection, State, decide, load_pending, match_name,
    pending, select, visible,
};
use crate::store::Decision;

/// `roster tools`: without a subcommand, the running gateway's tools.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ToolsArgs {
    /// Print the running gateway's tools as JSON.
    #[arg(long)]
    pub json: bool,

    /// Decide on changed or new tool definitions; without one, list the running gateway's
    /// tools.
    #[command(subcommand)]
    pub command: Option<ToolsCommand>,
}

/// The `roster tools` subcommands that work on the pin store.
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Show every changed or new tool definition waiting for a decision, with a readable diff.
    Drift(DriftArgs),
    /// Make the waiting definition of tools their pin: the gateway serves it from its next
    /// listing.
    Approve(DecideArgs),
    /// Keep the waiting definition of tools withheld until the server lists a different one.
    Reject(DecideArgs),
}

/// `roster tools drift`.
#[derive(Debug, Args)]
pub struct DriftArgs {
    /// A JSON array instead of text.
    #[arg(long)]
    pub json: bool,
    /// roster's state directory, where the pin store lives [default: the configuration's
    /// `[gateway] state_dir`, else $XDG_STATE_HOME/roster, else ~/.local/state/roster]
    #[arg(long, env = "ROSTER_STATE_DIR", value_hint = ValueHint::DirPath)]
    pub state_dir: Option<PathBuf>,
}

/// `roster tools approve` and `roster tools reject`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).multiple(true).args(["names", "server", "all"])))]
pub struct DecideArgs {
    /// Tools by the name `roster tools drift` shows (`server__tool`), as SERVER/TOOL, or by the
    /// server's own tool name when only one waiting tool has it.
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// Every waiting tool of this server (a rejected definition stays rejected unless named).
    #[arg(long, value_name = "SERVER")]
    pub server: Vec<String>,
    /// Every waiting tool (a rejected definition stays rejected unless named).
    #[arg(long, conflicts_with_all = ["names", "server"])]
    pub all: bool,
    /// roster's state directory, where the pin store lives [default: the configuration's
    /// `[gateway] state_dir`, else $XDG_STATE_HOME/roster, else ~/.local/state/roster]
    #[arg(long, env = "ROSTER_STATE_DIR", value_hint = ValueHint::DirPath)]
    pub state_dir: Option<PathBuf>,
}

/// `roster tools drift` as text: per entry a heading, the diff, the hidden characters and the
/// command that approves it, indented; entries apart by a blank line.
pub fn render(pending: &[Pending]) -> String {
    if pending.is_empty() {
        return format!("{}\n", text("cli.tools.nothing_waits", &[]));
    }
    let mut out = String::new();
    for (i, entry) in pending.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let heading = text(
            "cli.tools.drift.heading",
            &[
                ("name", &entry.name),
                ("server", &entry.server),
                ("tool", &entry.tool),
                ("kind", &entry.kind.word()),
                ("state", &entry.state.word()),
                ("summary", &entry.summary_text),
            ],
        );
        out.push_str(&heading);
        out.push('\n');
        for line in entry.diff.lines() {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
        for hidden in &entry.hidden {
            let line = text("cli.tools.drift.hidden", &[("hidden", hidden)]);
            out.push_str(&format!("    {line}\n"));
        }
        let line = text("cli.tools.drift.approve", &[("name", &entry.name)]);
        out.push_str(&format!("    {line}\n"));
    }
    visible(&out)
}

/// The naming of the configuration at `config_path`: the default one when there is no file.
pub fn naming_for(config_path: &Path) -> anyhow::Result<NamingConfig> {
    match Config::load(config_path) {
        Ok(config) => Ok(config.gateway.naming_config()),
        Err(e) if e.is_missing_file() => Ok(NamingConfig::default()),
        Err(e) => Err(anyhow::Error::from(e)
            .context("the configuration has an error, so roster cannot tell how tools are named")),
    }
}

/// Runs one `roster tools` subcommand; `config_path` is the configuration `--config` names.
pub fn run(command: ToolsCommand, config_path: &Path) -> anyhow::Result<()> {
    let naming = naming_for(config_path)?;
    let mut out = std::io::stdout().lock();
    let (decision, args) = match command {
        ToolsCommand::Drift(args) => {
            let stores = stores_for(args.state_dir, config_path)?;
            let pending = load_pending(&stores, &naming)?;
            if args.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&pending)?)?;
            } else {
                write!(out, "{}", render(&pending))?;
            }
            return Ok(());
        }
        ToolsCommand::Approve(args) => (Decision::Approve, args),
        ToolsCommand::Reject(args) => (Decision::Reject, args),
    };
    let stores = stores_for(args.state_dir, config_path)?;
    let Some(done) = decide(
        &stores,
        &naming,
        decision,
        &args.names,
        &args.server,
        args.all,
    )?
    else {
        writeln!(out, "{}", text("cli.tools.nothing_waits", &[]))?;
        return Ok(());
    };
    for name in &done.settled {
        eprintln!("{}", text("cli.tools.settled", &[("name", name)]));
    }
    let key = match decision {
        Decision::Approve => "cli.tools.approved",
        Decision::Reject => "cli.tools.rejected",
    };
    for name in &done.decided {
        writeln!(out, "{}", text(key, &[("name", name)]))?;
    }
    for name in &done.left_rejected {
        writeln!(
            out,
            "{}",
            text("cli.tools.left_rejected", &[("name", name)])
        )?;
    }
    Ok(())
}

/// `roster __complete tools-pending`: one line per waiting tool, `name<TAB>state summary`.
/// Silent on any error: a completion never prints one into a command line.
pub fn complete_pending(
    state_dir: Option<PathBuf>,
    config_path: &Path,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let Ok(stores) = stores_for(state_dir, config_path) else {
        return Ok(());
    };
    let naming = naming_for(config_path).unwrap_or_default();
    let Ok(pending) = load_pending(&stores, &naming) else {
        return Ok(());
    };
    for entry in pending {
        let line = format!(
            "{}\t{} {}",
            entry.name,
            entry.state.word(),
            entry.summary_text
        );
        // One line per tool, whatever a name holds.
        writeln!(out, "{}", visible(&line).replace('\n', " "))?;
    }
    Ok(())
}
