//! `roster demo-server`: a small stdio MCP server built into the binary.
//!
//! It exists so that a fresh clone has something real to front: a few useful tools, a tiny
//! in-memory notebook, and `toggle_tool`, which adds or removes a `surprise` tool and sends
//! `notifications/tools/list_changed`, so a new user can watch roster pick up a change live.
//! The example skills in `examples/skills/` call these tools as `demo__<tool>`.

use crate::sync::lock;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    SubscriptionFilter, Tool,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// The name `toggle_tool` adds and removes.
pub const SURPRISE_TOOL: &str = "surprise";

/// The demo server's state: its notebook and whether `surprise` is currently offered.
#[derive(Debug, Clone)]
pub struct DemoServer {
    state: Arc<Mutex<DemoState>>,
    /// Tool-list changes, for 2026-07-28 clients listening on `subscriptions/listen`.
    changes: tokio::sync::broadcast::Sender<()>,
}

impl Default for DemoServer {
    fn default() -> Self {
        Self {
            state: Arc::default(),
            changes: tokio::sync::broadcast::channel(8).0,
        }
    }
}

#[derive(Debug, Default)]
struct DemoState {
    notes: BTreeMap<String, String>,
    surprise: bool,
}

impl DemoServer {
    /// A demo server with an empty notebook and no `surprise` tool.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, DemoState> {
        // A poisoned lock only means another call panicked mid-update of plain data; the
        // notebook is still usable, so keep serving rather than failing every later call.
        lock(&self.state)
    }

    /// The tools offered right now, in a stable order.
    pub fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            tool(
                "echo",
                "Return the given text unchanged.",
                json!({"type": "object", "properties": {"text": {"type": "string", "description": "Text to echo back."}}, "required": ["text"]}),
            ),
            tool(
                "add",
                "Add two numbers and return the sum.",
                json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            ),
            tool(
                "word_count",
                "Count the words (whitespace-separated) in a text.",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
            tool(
                "notes_write",
                "Write a note under a title, replacing any note with that title.",
                json!({"type": "object", "properties": {"title": {"type": "string"}, "body": {"type": "string"}}, "required": ["title", "body"]}),
            ),
            tool(
                "notes_read",
                "Read the note with the given title.",
                json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}),
            ),
            tool(
                "notes_list",
                "List the titles of all notes.",
                json!({"type": "object", "properties": {}}),
            ),
            tool(
                "toggle_tool",
                "Add the `surprise` tool if it is absent, remove it if present, and tell clients the tool list changed.",
                json!({"type": "object", "properties": {}}),
            ),
        ];
        if self.state().surprise {
            tools.push(tool(
                SURPRISE_TOOL,
                "A tool that appears and disappears when `toggle_tool` is called.",
                json!({"type": "object", "properties": {}}),
            ));
        }
        tools
    }

    /// Runs one tool call. `Err` is a tool-level failure the caller should read.
    fn call(&self, name: &str, args: &JsonObject) -> Result<CallToolResult, String> {
        let text = |s: String| Ok(CallToolResult::success(vec![ContentBlock::text(s)]));
        match name {
            "echo" => text(str_arg(args, "text")?.to_owned()),
            "add" => {
                let sum = num_arg(args, "a")? + num_arg(args, "b")?;
                // 2 + 3 reads better as 5 than as 5.0.
                let sum = if sum.fract() == 0.0 && sum.abs() < 9.0e15 {
                    json!(sum as i64)
                } else {
                    json!(sum)
                };
                Ok(CallToolResult::structured(json!({ "sum": sum })))
            }
            "word_count" => {
                let words = str_arg(args, "text")?.split_whitespace().count();
                Ok(CallToolResult::structured(json!({ "words": words })))
            }
            "notes_write" => {
                let title = str_arg(args, "title")?.to_owned();
                let body = str_arg(args, "body")?.to_owned();
                self.state().notes.insert(title.clone(), body);
                text(format!("saved note {title:?}"))
            }
            "notes_read" => {
                let title = str_arg(args, "title")?;
                match self.state().notes.get(title) {
                    Some(body) => text(body.clone()),
                    None => Err(format!(
                        "no note titled {title:?}; notes_list shows the titles"
                    )),
                }
            }
            "notes_list" => {
                let titles: Vec<String> = self.state().notes.keys().cloned().collect();
                Ok(CallToolResult::structured(json!({ "titles": titles })))
            }
            SURPRISE_TOOL if self.state().surprise => {
                text("surprise! this tool was added by toggle_tool".to_owned())
            }
            _ => Err(format!("unknown tool {name:?}")),
        }
    }
}

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let schema = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    Tool::new(name, description, Arc::new(schema))
}

fn str_arg<'a>(args: &'a JsonObject, key: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing string argument {key:?}"))
}

fn num_arg(args: &JsonObject, key: &str) -> Result<f64, String> {
    args.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("missing number argument {key:?}"))
}

impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "roster-demo",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions("A demo server: echo, add, word_count, a notebook, and toggle_tool.")
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.changes.subscribe();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(()) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                }
            }
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut result = ListToolsResult::with_all_items(self.tools());
        // Every change is announced with list_changed, so a listing stays true until then:
        // a 2026-07-28 client may hold it for an hour instead of re-listing at every turn.
        result.ttl_ms = Some(3_600_000);
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        if request.name == "toggle_tool" {
            let now_on = {
                let mut state = self.state();
                state.surprise = !state.surprise;
                state.surprise
            };
            // An initialize-era client hears it on the session, a 2026-07-28 one on its
            // listen stream; each era refuses the other's channel, so try both.
            let _ = self.changes.send(());
            if context.peer.peer_info().is_some()
                && let Err(e) = context.peer.notify_tool_list_changed().await
            {
                tracing::warn!("could not send tools/list_changed: {e}");
            }
            let verb = if now_on { "added" } else { "removed" };
            return Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "{verb} the `{SURPRISE_TOOL}` tool"
            ))])
            .into());
        }
        if !self.tools().iter().any(|t| t.name == request.name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {:?}", request.name),
                None,
            ));
        }
        Ok(self
            .call(&request.name, &args)
            .unwrap_or_else(|message| CallToolResult::error(vec![ContentBlock::text(message)]))
            .into())
    }
}

/// Serves the demo server over this process's stdin/stdout until the client disconnects.
pub async fn run_stdio() -> Result<(), DemoError> {
    let service = DemoServer::new()
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| DemoError::Start(e.to_string()))?;
    service
        .waiting()
        .await
        .map_err(|e| DemoError::Run(e.to_string()))?;
    Ok(())
}

/// Why the demo server stopped.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The MCP handshake over stdio failed.
    #[error("the demo server could not start on stdio: {0}")]
    Start(String),
    /// The server task ended abnormally.
    #[error("the demo server stopped abnormally: {0}")]
    Run(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> JsonObject {
        match v {
            Value::Object(m) => m,
            _ => JsonObject::new(),
        }
    }

    #[test]
    fn notes_round_trip_and_missing_note_is_an_error() {
        let demo = DemoServer::new();
        demo.call("notes_write", &args(json!({"title": "a", "body": "hello"})))
            .expect("write succeeds");
        let read = demo
            .call("notes_read", &args(json!({"title": "a"})))
            .expect("read succeeds");
        assert_eq!(
            read.content[0].as_text().map(|t| t.text.as_str()),
            Some("hello")
        );
        let missing = demo.call("notes_read", &args(json!({"title": "b"})));
        assert!(missing.expect_err("missing note").contains("\"b\""));
    }

    #[test]
    fn add_and_word_count_return_structured_results() {
        let demo = DemoServer::new();
        let sum = demo
            .call("add", &args(json!({"a": 2, "b": 3.5})))
            .expect("add");
        assert_eq!(sum.structured_content, Some(json!({"sum": 5.5})));
        let whole = demo
            .call("add", &args(json!({"a": 2, "b": 3})))
            .expect("add");
        assert_eq!(whole.structured_content, Some(json!({"sum": 5})));
        let words = demo
            .call("word_count", &args(json!({"text": " one two\tthree "})))
            .expect("count");
        assert_eq!(words.structured_content, Some(json!({"words": 3})));
        assert!(demo.call("add", &args(json!({"a": 1}))).is_err());
    }

    #[test]
    fn surprise_is_listed_only_while_toggled_on() {
        let demo = DemoServer::new();
        assert!(!demo.tools().iter().any(|t| t.name == SURPRISE_TOOL));
        demo.state().surprise = true;
        assert!(demo.tools().iter().any(|t| t.name == SURPRISE_TOOL));
        assert!(demo.call(SURPRISE_TOOL, &JsonObject::new()).is_ok());
    }
}
