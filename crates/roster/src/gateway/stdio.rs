//! The gateway over this process's stdin/stdout: one client, one session.

use std::sync::Arc;

use rmcp::ServiceExt;

use super::lane::FastLane;
use super::{Gateway, GatewayHandler};

/// Why serving over stdio stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    /// The client never completed the MCP handshake.
    #[error("the MCP client on stdio did not start a session: {0}")]
    Start(String),
    /// The session task failed.
    #[error("the stdio session ended abnormally: {0}")]
    Run(String),
}

/// Serves one client on stdin/stdout until it disconnects or the gateway shuts down.
pub async fn serve(gateway: Arc<Gateway>) -> Result<(), StdioError> {
    let shutdown = gateway.shutdown_token();
    // Pipes (as clients launch servers) are read and written on the IO reactor; anything else
    // (a terminal, a file) falls back to tokio's stdin/stdout, one blocking-pool hop per read.
    let pipes = rmcp::transport::stdio_pipes();
    let transport = crate::metrics::stdio::counted(pipes, gateway.roster().metrics());
    let service = GatewayHandler::new(gateway)
        .serve_with_ct(FastLane::new(transport), shutdown.child_token())
        .await
        .map_err(|e| StdioError::Start(e.to_string()))?;
    service
        .waiting()
        .await
        .map_err(|e| StdioError::Run(e.to_string()))?;
    Ok(())
}
