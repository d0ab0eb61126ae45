//! `echo-server`: the stdio MCP server every `bench/run` target fronts.

use clap::Parser;
use rmcp::ServiceExt;
use roster_bench::echo::EchoServer;

/// An MCP server over stdio with `echo(text)`, `add_tool`, `remove_tool`, `storm(count)`,
/// `listings_answered` and, with `--tools N`, N filler tools.
#[derive(Debug, Parser)]
#[command(name = "echo-server", version, about)]
struct Args {
    /// The name the server reports in `initialize`.
    #[arg(long, default_value = "echo")]
    name: String,
    /// How many filler tools (`tool_0000`…) to serve besides the fixed ones.
    #[arg(long, default_value_t = 0)]
    tools: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // One thread: fifty of these run at once in the scale figure, and every target gets the
    // same server, so its speed is not what a figure compares.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let service = EchoServer::new(&args.name, args.tools)
            .serve(rmcp::transport::stdio())
            .await?;
        service.waiting().await?;
        Ok(())
    })
}
