//! The `roster` binary: a thin shell over the `roster` library.

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
    /// Run the built-in demo MCP server on stdio (echo, add, word_count, notes, toggle_tool).
    DemoServer,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::DemoServer) => {
            let runtime = tokio::runtime::Runtime::new()?;
            runtime.block_on(roster::demo::run_stdio())?;
        }
        None => {}
    }
    Ok(())
}
