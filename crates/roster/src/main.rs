//! The `roster` binary: a thin shell over the `roster` library.

use clap::Parser;

/// roster — an MCP gateway with a live tool registry and a skill catalog.
#[derive(Debug, Parser)]
#[command(name = "roster", version, about, long_about = None)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
