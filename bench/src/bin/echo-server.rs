//! `echo-server`: the MCP server every `bench/run` target fronts.

use std::sync::Arc;

use axum::serve::ListenerExt;
use clap::Parser;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use roster_bench::echo::EchoServer;

/// An MCP server with `echo(text)`, `add_tool`, `remove_tool`, `storm(count)`,
/// `listings_answered` and, with `--tools N`, N filler tools. Stdio unless `--http`.
#[derive(Debug, Parser)]
#[command(name = "echo-server", version, about)]
struct Args {
    /// The name the server reports in `initialize`.
    #[arg(long, default_value = "echo")]
    name: String,
    /// How many filler tools (`tool_0000`…) to serve besides the fixed ones.
    #[arg(long, default_value_t = 0)]
    tools: usize,
    /// Put this `ttlMs` on every `tools/list` result (default: none; rmcp then sends 0 to
    /// 2026-07-28-era clients).
    #[arg(long)]
    ttl_ms: Option<u64>,
    /// Serve streamable HTTP at this loopback address (`/mcp`) instead of stdio, on the same
    /// rmcp + axum stack roster's HTTP front uses: the floor of any HTTP-fronted figure.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // One thread: fifty of these run at once in the scale figure, and every target gets the
    // same server, so its speed is not what a figure compares.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let server = EchoServer::new(&args.name, args.tools).with_ttl_ms(args.ttl_ms);
    runtime.block_on(async move {
        match args.http {
            None => {
                let service = server.serve(rmcp::transport::stdio_pipes()).await?;
                service.waiting().await?;
            }
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(&addr).await?;
                let local = listener.local_addr()?;
                anyhow::ensure!(local.ip().is_loopback(), "{addr} is not a loopback address");
                // One EchoServer shared by every session, as over stdio behind a gateway.
                let mcp: StreamableHttpService<EchoServer, LocalSessionManager> =
                    StreamableHttpService::new(
                        move || Ok(server.clone()),
                        Arc::new(LocalSessionManager::default()),
                        StreamableHttpServerConfig::default(),
                    );
                let router = axum::Router::new().nest_service("/mcp", mcp);
                eprintln!("echo-server: serving http://{local}/mcp");
                // A server that serves HTTP itself well turns Nagle off: with it on, a keep-alive
                // client's second small write waits for a delayed ACK (~40 ms), and the baseline
                // would hide exactly the floor the HTTP fronts are compared on.
                let listener = listener.tap_io(|tcp| {
                    let _ = tcp.set_nodelay(true);
                });
                axum::serve(listener, router).await?;
            }
        }
        Ok(())
    })
}
