//! Why a connection could not be made, or a request to a server got no result.

use std::time::Duration;

use rmcp::ServiceError;
use serde_json::Value;

use super::stdio::SpawnError;

/// The connection could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The process did not start.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The legacy SSE stream did not open.
    #[error(transparent)]
    Sse(#[from] super::sse::SseError),
    /// A configured header is not valid HTTP.
    #[error("header `{0}` is not a valid HTTP header name or value")]
    Header(String),
    /// The MCP lifecycle (`initialize` or `server/discover`) failed.
    #[error("the server did not complete the MCP handshake: {0}")]
    Handshake(String),
    /// The server wants an OAuth token roster does not hold (or one with more scope): a
    /// person logs in with `roster auth login`.
    #[error("server `{server}` needs a login: run `roster auth login {server}`")]
    NeedsLogin {
        /// The server.
        server: String,
        /// The server's `WWW-Authenticate` challenge, where discovery starts.
        challenge: Option<String>,
    },
    /// Getting or refreshing the server's OAuth token failed.
    #[error(transparent)]
    OAuth(#[from] crate::oauth::OAuthError),
}

/// A request to the server failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The server answered with a JSON-RPC error.
    #[error("the server answered with error {code}: {message}")]
    Server {
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
        /// The error's `data`, if any.
        data: Option<Value>,
    },
    /// No answer within the timeout; `notifications/cancelled` was sent.
    #[error("the server did not answer within {0:?}; the request was cancelled")]
    Timeout(Duration),
    /// The caller cancelled; `notifications/cancelled` was sent.
    #[error("the request was cancelled")]
    Cancelled,
    /// The connection is gone.
    #[error("the connection to the server is closed")]
    Closed,
    /// roster is shutting down (or replacing the connection) while the request was in flight.
    #[error("roster is shutting down; the request to server `{0}` was abandoned")]
    ShuttingDown(String),
    /// The listing's pages add up to more than `max_listing_bytes`.
    #[error(
        "the server's tool listing exceeds max_listing_bytes ({limit} bytes) at page {pages}; \
         raise `max_listing_bytes` in [gateway] if the server really needs it"
    )]
    ListingTooLarge {
        /// The bound.
        limit: usize,
        /// The page that crossed it.
        pages: usize,
    },
    /// The server answered with something that is not the expected result.
    #[error("the server sent an unexpected answer: {0}")]
    Unexpected(String),
    /// The server refused the request for want of authorization: HTTP 401 (no token, or one
    /// it no longer takes and that could not be refreshed) or 403 `insufficient_scope`.
    #[error("the server refused the request: it wants an OAuth login (HTTP 401 or 403)")]
    Unauthorized,
    /// The server needed input from the client (an `input_required` result) that roster could
    /// not get: the caller lacks the capability, or answered with an error.
    #[error("the server asked the client for `{method}`, which failed: {message}")]
    Input {
        /// The input request's method (`sampling/createMessage`, …).
        method: String,
        /// The JSON-RPC error code the caller should get.
        code: i32,
        /// Why, in words.
        message: String,
        /// The error's `data`, if any.
        data: Option<Value>,
    },
}

impl RequestError {
    /// The JSON-RPC error (code, message, data) the server answered with, or that the client
    /// gave when asked on the server's behalf; any other failure comes back as it was.
    pub fn into_jsonrpc(self) -> Result<(i32, String, Option<Value>), RequestError> {
        match self {
            RequestError::Server {
                code,
                message,
                data,
            }
            | RequestError::Input {
                code,
                message,
                data,
                ..
            } => Ok((code, message, data)),
            other => Err(other),
        }
    }
}

impl From<ServiceError> for RequestError {
    fn from(error: ServiceError) -> Self {
        if error.is_authorization_required() {
            return RequestError::Unauthorized;
        }
        match error {
            ServiceError::McpError(e) => RequestError::Server {
                code: e.code.0,
                message: e.message.into_owned(),
                data: e.data,
            },
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => RequestError::Closed,
            ServiceError::Timeout { timeout } => RequestError::Timeout(timeout),
            ServiceError::Cancelled { .. } => RequestError::Cancelled,
            other => RequestError::Unexpected(other.to_string()),
        }
    }
}
