//! The echo server: the MCP server every target of `bench/run` fronts.
//!
//! It answers `echo(text)` as cheaply as an MCP server can, so what a measurement shows is the
//! cost of the path in front of it. Besides `echo` it offers what the propagation and storm
//! figures need: `add_tool` / `remove_tool` (change the listing and send
//! `notifications/tools/list_changed`), `storm(count)` (send that many notifications without
//! changing anything) and `listings_answered` (how many `tools/list` it has answered), plus
//! any number of filler tools for the scale figure.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

/// The most notifications one `storm` call sends; keeps a typo from flooding for minutes.
pub const MAX_STORM: u64 = 100_000;

/// Prefix of the tools `add_tool` creates (`extra_1`, `extra_2`, …).
pub const EXTRA_PREFIX: &str = "extra_";

/// The echo server's shared state; clones share it (one per process, all sessions).
#[derive(Debug, Clone)]
pub struct EchoServer {
    name: Arc<str>,
    fixed: Arc<Vec<Tool>>,
    extras: Arc<Mutex<Extras>>,
    listings: Arc<AtomicU64>,
    ttl_ms: Option<u64>,
}

#[derive(Debug, Default)]
struct Extras {
    names: BTreeSet<String>,
    next: u64,
}

/// Microseconds since the Unix epoch: comparable across processes on one machine, which is
/// what the propagation figure needs (the server stamps, the client subtracts).
pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl EchoServer {
    /// An echo server calling itself `name`, with `fillers` extra tools `tool_0000`….
    pub fn new(name: &str, fillers: usize) -> Self {
        let mut fixed = vec![
            tool(
                "echo",
                "Return the given text unchanged.",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
            tool(
                "add_tool",
                "Add a tool named extra_N and send notifications/tools/list_changed; returns its name and when the notification was sent (unix_us).",
                json!({"type": "object", "properties": {}}),
            ),
            tool(
                "remove_tool",
                "Remove a tool that add_tool created and send notifications/tools/list_changed.",
                json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            ),
            tool(
                "storm",
                "Send `count` notifications/tools/list_changed without changing any tool.",
                json!({"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}}, "required": ["count"]}),
            ),
            tool(
                "listings_answered",
                "How many tools/list requests this server has answered.",
                json!({"type": "object", "properties": {}}),
            ),
        ];
        fixed.extend((0..fillers).map(|i| {
            tool_owned(
                format!("tool_{i:04}"),
                format!("Filler tool {i} of server {name}: returns its arguments as text."),
                json!({"type": "object", "properties": {"input": {"type": "string", "description": "Any text."}}}),
            )
        }));
        Self {
            name: Arc::from(name),
            fixed: Arc::new(fixed),
            extras: Arc::new(Mutex::new(Extras::default())),
            listings: Arc::new(AtomicU64::new(0)),
            ttl_ms: None,
        }
    }

    /// Puts `ttlMs` on every listing. Without it rmcp fills in `ttlMs: 0` on the 2026-07-28
    /// era (SEP-2549 makes the field required there), which tells a caching gateway that the
    /// listing is stale at once.
    pub fn with_ttl_ms(mut self, ttl_ms: Option<u64>) -> Self {
        self.ttl_ms = ttl_ms;
        self
    }

    fn extras(&self) -> MutexGuard<'_, Extras> {
        // Plain data: a panic elsewhere leaves it consistent enough to keep serving.
        self.extras.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tools offered right now, in a stable order.
    pub fn tools(&self) -> Vec<Tool> {
        let mut tools = self.fixed.as_ref().clone();
        let extras = self.extras();
        tools.extend(extras.names.iter().map(|name| {
            tool_owned(
                name.clone(),
                "A tool add_tool created.".to_owned(),
                json!({"type": "object", "properties": {}}),
            )
        }));
        tools
    }

    /// How many `tools/list` requests have been answered.
    pub fn listings_answered(&self) -> u64 {
        self.listings.load(Ordering::Relaxed)
    }

    /// Adds `extra_N`; returns its name. The caller sends the notification.
    pub fn add_extra(&self) -> String {
        let mut extras = self.extras();
        extras.next += 1;
        let name = format!("{EXTRA_PREFIX}{}", extras.next);
        extras.names.insert(name.clone());
        name
    }

    /// Removes a tool `add_extra` created; false when there was none of that name.
    pub fn remove_extra(&self, name: &str) -> bool {
        self.extras().names.remove(name)
    }

    fn offers(&self, name: &str) -> bool {
        self.fixed.iter().any(|t| t.name == name) || self.extras().names.contains(name)
    }
}

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    tool_owned(name.to_owned(), description.to_owned(), schema)
}

fn tool_owned(name: String, description: String, schema: Value) -> Tool {
    let schema = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    Tool::new(name, description, Arc::new(schema))
}

fn text(s: String) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(s)]).into()
}

fn tool_error(message: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(message)]).into()
}

impl ServerHandler for EchoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            self.name.to_string(),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.listings.fetch_add(1, Ordering::Relaxed);
        let listing = ListToolsResult::with_all_items(self.tools());
        Ok(match self.ttl_ms {
            Some(ttl) => listing.with_ttl_ms(ttl),
            None => listing,
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let str_arg = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
        match request.name.as_ref() {
            "echo" => match str_arg("text") {
                Some(t) => Ok(text(t)),
                None => Ok(tool_error("missing string argument \"text\"".to_owned())),
            },
            "add_tool" => {
                let name = self.add_extra();
                let notified_at = unix_micros();
                if let Err(e) = context.peer.notify_tool_list_changed().await {
                    return Ok(tool_error(format!(
                        "added {name} but could not notify: {e}"
                    )));
                }
                Ok(text(
                    json!({"added": name, "notified_at_unix_us": notified_at}).to_string(),
                ))
            }
            "remove_tool" => {
                let Some(name) = str_arg("name") else {
                    return Ok(tool_error("missing string argument \"name\"".to_owned()));
                };
                if !self.remove_extra(&name) {
                    return Ok(tool_error(format!("no tool {name:?} was added")));
                }
                let notified_at = unix_micros();
                if let Err(e) = context.peer.notify_tool_list_changed().await {
                    return Ok(tool_error(format!(
                        "removed {name} but could not notify: {e}"
                    )));
                }
                Ok(text(
                    json!({"removed": name, "notified_at_unix_us": notified_at}).to_string(),
                ))
            }
            "storm" => {
                let Some(count) = args.get("count").and_then(Value::as_u64) else {
                    return Ok(tool_error("missing integer argument \"count\"".to_owned()));
                };
                if count > MAX_STORM {
                    return Ok(tool_error(format!(
                        "count {count} is over the limit of {MAX_STORM}"
                    )));
                }
                let mut sent = 0u64;
                for _ in 0..count {
                    if context.peer.notify_tool_list_changed().await.is_err() {
                        break;
                    }
                    sent += 1;
                }
                Ok(text(json!({"sent": sent}).to_string()))
            }
            "listings_answered" => Ok(text(
                json!({"listings": self.listings_answered()}).to_string(),
            )),
            name if self.offers(name) => Ok(text(Value::Object(args).to_string())),
            name => Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}"),
                None,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fillers_and_extras_are_listed_and_extras_can_be_removed() {
        let server = EchoServer::new("e", 3);
        let names = |s: &EchoServer| -> Vec<String> {
            s.tools().iter().map(|t| t.name.to_string()).collect()
        };
        assert_eq!(names(&server).len(), 5 + 3);
        assert!(names(&server).contains(&"tool_0002".to_owned()));
        let added = server.add_extra();
        assert_eq!(added, "extra_1");
        assert!(server.offers(&added));
        assert!(names(&server).contains(&added));
        assert!(server.remove_extra(&added));
        assert!(!server.remove_extra(&added));
        assert!(!names(&server).contains(&added));
        assert_eq!(server.add_extra(), "extra_2", "names are never reused");
    }
}
