//! The `roster` binary: a thin shell over the `roster` library.

mod cli;

use clap::{CommandFactory as _, Parser, Subcommand};

/// roster — an MCP gateway with a live tool registry and a skill catalog.
#[derive(Debug, Parser)]
#[command(name = "roster", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Notifications servers pushed, and requests waiting for your decision.
    Inbox(cli::inbox::InboxArgs),
    /// Print a shell completion script (bash, zsh or fish).
    Completions(cli::completions::CompletionsArgs),
    /// Candidates for the completion scripts (not for people).
    #[command(name = "__complete", hide = true)]
    Complete(cli::completions::CompleteArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Inbox(args)) => cli::inbox::run(args),
        Some(Command::Completions(args)) => cli::completions::run(args, Cli::command()),
        Some(Command::Complete(args)) => cli::completions::complete(args),
        None => Ok(()),
    }
}
