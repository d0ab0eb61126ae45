//! Native tools: answered by roster itself, before any server dispatch, without a turn.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::{ClientIdentity, Gateway};

/// The native tools, in the order `tools/list` shows them.
pub(crate) fn tools(_gateway: &Gateway) -> Vec<Tool> {
    vec![
        tool(
            "refresh_tools",
            "Mark every server's tool listing stale. Dials nothing: the next request that reaches \
             the servers (tools/list or a server tool call) re-lists them once each.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            json!({
                "type": "object",
                "properties": {
                    "servers_marked_stale": {"type": "integer", "minimum": 0},
                    "message": {"type": "string"}
                },
                "required": ["servers_marked_stale", "message"]
            }),
        )
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
    ]
}

/// Answers a native tool call, or `None` when `name` is not a native tool.
pub(crate) fn call(
    gateway: &Arc<Gateway>,
    _who: &ClientIdentity,
    name: &str,
    _arguments: &JsonObject,
) -> Option<CallToolResult> {
    match name {
        "refresh_tools" => {
            let marked = gateway.backend().refresh();
            let message = format!(
                "marked {marked} server(s) stale; the next tools/list or server tool call re-lists them"
            );
            Some(structured(json!({
                "servers_marked_stale": marked,
                "message": message,
            })))
        }
        _ => None,
    }
}

/// A successful result with both a text block (for clients that read text) and
/// `structuredContent` matching the tool's `outputSchema`.
pub(crate) fn structured(value: Value) -> CallToolResult {
    let mut result = CallToolResult::structured(value);
    result.is_error = Some(false);
    result
}

/// A semantic error result, in the same style as a server tool's error.
pub(crate) fn error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

fn tool(name: &'static str, description: &'static str, input: Value, output: Value) -> Tool {
    Tool::new(name, description, Arc::new(object(input)))
        .with_raw_output_schema(Arc::new(object(output)))
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}
