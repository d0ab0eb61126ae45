//! The MCP `Tool` as a server sent it, and the one question skills ask about tools.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A tool definition exactly as a server listed it.
///
/// The known MCP fields are typed for convenience; every other field the server sent is kept in
/// [`Tool::extra`] and serialized back unchanged, so a newer spec's fields pass through roster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// The server's own name for the tool (not the exposed name).
    pub name: String,
    /// A human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the tool's arguments: always an object (MCP requires one). Shared, so
    /// the copies a gateway serves point at the registry's schema instead of duplicating it.
    #[serde(default = "empty_object_schema")]
    pub input_schema: Arc<Map<String, Value>>,
    /// JSON Schema of the tool's structured result, when it declares one. (This and the other
    /// optional parts are boxed: most tools have none, and a registry holds thousands of tools.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Box<Value>>,
    /// Behaviour hints (`readOnlyHint`, `destructiveHint`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Box<Value>>,
    /// Icons for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Box<Value>>,
    /// The `_meta` object.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Box<Value>>,
    /// Every field this struct does not name, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn empty_object_schema() -> Arc<Map<String, Value>> {
    let mut schema = Map::new();
    schema.insert("type".to_owned(), Value::String("object".to_owned()));
    Arc::new(schema)
}

impl Tool {
    /// A tool with a name and an empty object input schema; the rest unset.
    pub fn new(name: impl Into<String>) -> Self {
        Tool {
            name: name.into(),
            title: None,
            description: None,
            input_schema: empty_object_schema(),
            output_schema: None,
            annotations: None,
            icons: None,
            meta: None,
            extra: Map::new(),
        }
    }

    /// The same tool with a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The same tool with an input schema (a JSON object).
    pub fn with_input_schema(mut self, schema: Map<String, Value>) -> Self {
        self.input_schema = Arc::new(schema);
        self
    }

    /// The same tool in as little memory as its content needs: every object and array in its
    /// schemas and other parts made again at its exact length (a parse grows them in steps,
    /// a small object to twice its length or more). A registry holds thousands of tools, most
    /// of their objects with a key or two.
    pub fn compacted(mut self) -> Self {
        if let Some(schema) = Arc::get_mut(&mut self.input_schema) {
            compact_object(schema);
        }
        let parts = [
            &mut self.output_schema,
            &mut self.annotations,
            &mut self.icons,
            &mut self.meta,
        ];
        for part in parts.into_iter().flatten() {
            compact(part);
        }
        compact_object(&mut self.extra);
        self
    }
}

/// `value` with every object and array in it at its exact length (content and order kept).
pub fn compact(value: &mut Value) {
    match value {
        Value::Object(object) => compact_object(object),
        Value::Array(items) => {
            items.shrink_to_fit();
            items.iter_mut().for_each(compact);
        }
        Value::String(text) => text.shrink_to_fit(),
        _ => {}
    }
}

fn compact_object(object: &mut Map<String, Value>) {
    let mut exact = Map::with_capacity(object.len());
    for (key, mut value) in std::mem::take(object) {
        compact(&mut value);
        exact.insert(key, value);
    }
    *object = exact;
}

/// What is known about a tool reference (an exposed name) at this moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolPresence {
    /// The tool is in the live registry.
    Present,
    /// Its server's listing is known and the tool is not in it.
    Missing,
    /// Nothing can be said yet: the owning server was never listed, or its listing failed.
    Unknown,
    /// Its server lists it, but its definition changed since a person approved it (or it is new
    /// and new tools need approval): it is withheld until a person decides.
    Withheld,
}

/// The one question the skill catalog asks of the tools: does this exposed tool exist, and is
/// its server's listing known? Implemented by the tool registry; skills only depend on this.
pub trait ToolLookup {
    /// Presence of the tool a skill refers to by `reference` (an exposed name).
    fn presence(&self, reference: &str) -> ToolPresence;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let raw = serde_json::json!({
            "name": "echo",
            "description": "Echo",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            "execution": {"taskSupport": "optional"},
            "_meta": {"x": 1}
        });
        let tool: Tool = serde_json::from_value(raw.clone()).expect("valid tool");
        assert_eq!(tool.extra.get("execution"), raw.get("execution"));
        assert_eq!(serde_json::to_value(&tool).expect("serializes"), raw);
    }

    #[test]
    fn a_compacted_tool_is_the_same_tool() {
        let raw = serde_json::json!({
            "name": "search",
            "description": "Searches.",
            "inputSchema": {"type": "object", "properties": {
                "q": {"type": "string", "description": "What to find."},
                "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
                "limit": {"type": "integer", "minimum": 1}
            }, "required": ["q"], "additionalProperties": false},
            "outputSchema": {"type": "object", "properties": {"hits": {"type": "array"}}},
            "annotations": {"readOnlyHint": true},
            "_meta": {"z": [1, {"y": 2}], "a": null},
            "execution": {"taskSupport": "optional"}
        });
        let tool: Tool = serde_json::from_value(raw.clone()).expect("valid tool");
        let fingerprint = crate::fingerprint::Fingerprint::of(&tool);
        let compacted = tool.compacted();
        // Same content, same key order, same fingerprint.
        assert_eq!(
            serde_json::to_string(&compacted).expect("serializes"),
            raw.to_string()
        );
        assert_eq!(crate::fingerprint::Fingerprint::of(&compacted), fingerprint);
    }

    #[test]
    fn missing_input_schema_defaults_to_empty_object() {
        let tool: Tool = serde_json::from_value(serde_json::json!({"name": "t"})).expect("valid");
        assert_eq!(
            Value::Object((*tool.input_schema).clone()),
            serde_json::json!({"type": "object"})
        );
    }

    #[test]
    fn an_input_schema_that_is_not_an_object_is_a_malformed_tool() {
        let error =
            serde_json::from_value::<Tool>(serde_json::json!({"name": "t", "inputSchema": [1]}))
                .expect_err("MCP requires an object");
        assert!(error.to_string().contains("map"), "{error}");
    }
}
