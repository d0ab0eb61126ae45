//! The `roster` binary: a thin shell over the `roster` library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// roster — an MCP gateway with a live tool registry and a skill catalog.
#[derive(Debug, Parser)]
#[command(name = "roster", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Work with skill directories.
    #[command(subcommand)]
    Skills(roster::cli::skills::SkillsCommand),
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Skills(command)) => roster::cli::skills::run(command),
        None => Ok(ExitCode::SUCCESS),
    }
}
