//! The `roster` binary: a thin shell over the `roster` library.

use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};
use roster::cli;

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
    /// Work with skill directories.
    #[command(subcommand)]
    Skills(cli::skills::SkillsCommand),
    /// Print a shell completion script (bash, zsh or fish).
    Completions(cli::completions::CompletionsArgs),
    /// Candidates for the completion scripts (not for people).
    #[command(name = "__complete", hide = true)]
    Complete(cli::completions::CompleteArgs),
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Inbox(args)) => cli::inbox::run(args).map(|()| ExitCode::SUCCESS),
        Some(Command::Skills(command)) => cli::skills::run(command),
        Some(Command::Completions(args)) => {
            cli::completions::run(args, Cli::command()).map(|()| ExitCode::SUCCESS)
        }
        Some(Command::Complete(args)) => {
            cli::completions::complete(args).map(|()| ExitCode::SUCCESS)
        }
        None => Ok(ExitCode::SUCCESS),
    }
}
