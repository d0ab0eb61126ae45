//! A client of roster's `/mcp` that reads each answer as it was written (`RawHttp`): no SDK in
//! between, so a test sees roster's own bytes and times.

use serde_json::{Value, json};

/// The `_meta` every 2026-07-28 request carries.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    })
}

/// A client of roster's `/mcp` that reads each answer as it was written: in an initialize-era
/// session, or (`modern`) as stateless 2026-07-28 requests. Every answer must come as JSON.
pub struct RawHttp {
    http: reqwest::Client,
    url: String,
    token: String,
    modern: bool,
    session: Option<String>,
}

impl RawHttp {
    pub async fn open(url: &str, token: &str, modern: bool) -> RawHttp {
        let mut client = RawHttp {
            http: reqwest::Client::new(),
            url: url.to_owned(),
            token: token.to_owned(),
            modern,
            session: None,
        };
        if !modern {
            let opened = client
                .post(
                    "initialize",
                    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                      "clientInfo": {"name": "raw-http", "version": "1"}}}),
                )
                .await;
            assert_eq!(opened.status(), 200);
            let id = super::session_id(&opened);
            client.session = Some(id);
            let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let ack = client.post("notifications/initialized", initialized).await;
            assert_eq!(ack.status(), 202);
        }
        client
    }

    pub async fn post(&self, method: &str, body: Value) -> reqwest::Response {
        let tool = body["params"]["name"].as_str().map(str::to_owned);
        self.post_text(method, tool.as_deref(), body.to_string())
            .await
    }

    /// POSTs `body` as it is written; `tool` names a call's tool.
    pub async fn post_text(
        &self,
        method: &str,
        tool: Option<&str>,
        body: String,
    ) -> reqwest::Response {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body);
        if let Some(session) = &self.session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        if self.modern {
            request = request
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", method);
            // SEP-2243: a call names its tool in a header too.
            if let Some(name) = tool {
                request = request.header("mcp-name", name);
            }
        }
        request
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {method}: {e}"))
    }

    /// The answer to request `id` of `method`, as it was written.
    pub async fn request(&self, id: u64, method: &str, mut params: Value) -> String {
        if self.modern {
            params["_meta"] = modern_meta();
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let answer = self.post(method, body).await;
        let status = answer.status();
        let kind = answer.headers().get("content-type").cloned();
        let text = answer.text().await.expect("an answer");
        assert_eq!(status, 200, "{method}: {text}");
        assert_eq!(
            kind.as_ref().and_then(|v| v.to_str().ok()),
            Some("application/json"),
            "{method} is answered as JSON"
        );
        text
    }
}
