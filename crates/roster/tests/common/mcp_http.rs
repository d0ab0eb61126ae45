//! Roster's `/mcp` as a plain initialize-era (2025-11-25) HTTP client sees it: the test writes
//! each JSON-RPC body and reads each answer itself.

use serde_json::{Value, json};

/// The `Accept` of a client taking a JSON answer or an event stream.
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// The protocol version these requests speak.
pub const VERSION: &str = "2025-11-25";

/// The `initialize` request `id` of the client `client` with `capabilities`.
pub fn initialize(id: u64, client: &str, capabilities: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": capabilities,
        "clientInfo": {"name": client, "version": "1"}}})
}

/// A POST of `body` to `url` as JSON, accepting either answer, in [`VERSION`]; with `token` as
/// the bearer token and in `session`, when given.
pub fn post(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    body: &Value,
) -> reqwest::RequestBuilder {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-protocol-version", VERSION)
        .body(body.to_string());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request
}

/// A DELETE of the session `session` at `url`, with `token` as the bearer token when given.
pub async fn delete(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    session: &str,
) -> reqwest::Response {
    let mut request = http
        .delete(url)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", VERSION);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.expect("DELETE /mcp")
}

/// Opens a session at `url` with `token` (`initialize` as `client` with `capabilities`, then
/// `notifications/initialized`) and returns its id.
pub async fn open_session(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    client: &str,
    capabilities: Value,
) -> String {
    let response = post(http, url, token, None, &initialize(1, client, capabilities))
        .send()
        .await
        .expect("POST initialize");
    assert_eq!(response.status(), 200, "initialize refused");
    let session = super::session_id(&response);
    let _ = response.bytes().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let ack = post(http, url, token, Some(&session), &initialized)
        .send()
        .await
        .expect("POST initialized");
    assert_eq!(ack.status(), 202);
    session
}
