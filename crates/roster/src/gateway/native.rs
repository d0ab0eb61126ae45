//! Native tools: answered by roster itself, before any server dispatch, without a turn.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use roster_core::catalog::{ListFilter, SkillEntry, Subscriptions};
use roster_core::{Availability, SkillKind};

use super::{ClientIdentity, Gateway};

fn entry_schema(extra: Value) -> Value {
    let mut properties = json!({
        "id": {"type": "string"},
        "name": {"type": "string"},
        "description": {"type": "string"},
        "kind": {"type": "string", "enum": ["knowledge", "flow_template"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "available": {"type": "boolean"},
        "unavailable_reason": {"type": "string"}
    });
    if let (Some(map), Value::Object(more)) = (properties.as_object_mut(), extra) {
        map.extend(more);
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": ["id", "name", "description", "kind", "tags", "available"]
    })
}

fn channels_tool() -> Tool {
    tool(
        "channels",
        "Read the inbox of notifications the servers pushed (log messages, resource updates, \
         progress of finished work). `list` shows the newest entries, `unread` what you have not \
         acknowledged, `ack` marks entries read (up to `up_to`, or all).",
        json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["list", "unread", "ack"]},
                "channel": {"type": "string", "description": "Only this server's notifications."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 500},
                "up_to": {"type": "integer", "minimum": 0, "description": "For ack: the last seq to mark read."}
            },
            "required": ["action"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "entries": {"type": "array", "items": {"type": "object"}},
                "acknowledged": {"type": "integer", "minimum": 0}
            },
            "required": ["text"]
        }),
    )
    .with_annotations(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

/// The inbox as `who` sees it: its own notifications and everyone's, its own read state.
fn channels_call(
    inbox: &crate::inbox::Inbox,
    who: &ClientIdentity,
    args: &JsonObject,
) -> Result<Value, String> {
    use crate::inbox::{DEFAULT_LIST_LIMIT, DEFAULT_MAX_CHARS, LOCAL_IDENTITY, render};
    let who = who.name.as_deref().unwrap_or(LOCAL_IDENTITY);
    let channel = optional_str(args, "channel")?;
    let limit = match args.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIST_LIMIT,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=500).contains(n))
            .ok_or("limit must be an integer from 1 to 500")? as usize,
    };
    let shown = |entries: Vec<crate::inbox::Entry>| {
        json!({
            "text": render(&entries, limit, DEFAULT_MAX_CHARS),
            "entries": entries.iter().take(limit).collect::<Vec<_>>(),
        })
    };
    match required_str(args, "action")? {
        "list" => Ok(shown(inbox.list_for(who, channel, limit))),
        "unread" => Ok(shown(
            inbox
                .unread_for(who)
                .into_iter()
                .filter(|e| channel.is_none_or(|c| e.channel == c))
                .collect(),
        )),
        "ack" => {
            let up_to = match args.get("up_to") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_u64().ok_or("up_to must be a non-negative integer")?),
            };
            let acknowledged = inbox.ack_for(who, up_to).map_err(|e| e.to_string())?;
            Ok(json!({
                "text": format!("marked {acknowledged} entr{} read", if acknowledged == 1 { "y" } else { "ies" }),
                "acknowledged": acknowledged,
            }))
        }
        other => Err(format!(
            "action must be \"list\", \"unread\" or \"ack\", not {other:?}"
        )),
    }
}

/// The native tools, in the order `tools/list` shows them.
pub(crate) fn tools(gateway: &Gateway) -> Vec<Tool> {
    let read_only = || {
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false)
    };
    let mut tools = vec![
        tool(
            "list_skills",
            "List the skills you can use: knowledge skills (text to read with get_skill) and \
             flow templates (tool-call recipes to fill in with resolve_flow_template).",
            json!({
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": ["knowledge", "flow_template"]},
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "Only skills carrying every one of these tags."},
                    "cursor": {"type": "string", "description": "next_cursor of the previous page."}
                },
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "skills": {"type": "array", "items": entry_schema(json!({}))},
                    "next_cursor": {"type": "string"}
                },
                "required": ["skills"]
            }),
        )
        .with_annotations(read_only()),
        tool(
            "search_skills",
            "Find skills relevant to a task, best match first, with a relevance score.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "skills": {"type": "array", "items": entry_schema(json!({"score": {"type": "number"}}))}
                },
                "required": ["skills"]
            }),
        )
        .with_annotations(read_only()),
        tool(
            "get_skill",
            "Read one skill: a knowledge skill's content, or a flow template's parameters \
             (JSON Schema) and steps.",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "The skill id, e.g. writing/plain-style."}},
                "required": ["id"],
                "additionalProperties": false
            }),
            entry_schema(json!({
                "content": {"type": "string"},
                "includes": {"type": "array", "items": {"type": "string"}},
                "tools": {"type": "array", "items": {"type": "string"}},
                "parameters": {"type": "object"},
                "steps": {"type": "array", "items": {"type": "object"}}
            })),
        )
        .with_annotations(read_only()),
        tool(
            "resolve_flow_template",
            "Fill a flow template's parameters into its steps. Returns the tool calls to make, \
             in order; nothing is executed — make each call yourself.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "parameters": {"type": "object", "description": "Values for the template's parameters."}
                },
                "required": ["id"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "steps": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "tool": {"type": "string"},
                                "arguments": {"type": "object"},
                                "description": {"type": "string"}
                            },
                            "required": ["tool", "arguments"]
                        }
                    }
                },
                "required": ["id", "steps"]
            }),
        )
        .with_annotations(read_only()),
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
    ];
    if gateway.inbox().is_some() {
        tools.push(channels_tool());
    }
    tools
}

/// The tools a client in search mode is served besides the native tools above: how it finds,
/// reads and calls every other tool.
pub(crate) fn search_tools() -> Vec<Tool> {
    let read_only = ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false);
    vec![
        tool(
            "search_tools",
            "Find tools for a task among every tool the servers offer, best match first. Returns \
             names, one-line descriptions and servers, no schemas: read a tool's parameters with \
             describe_tools, then call it with call_tool (or by its name).",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "What you want to do, in plain words."},
                    "server": {"type": "string", "description": "Only this server's tools."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "tools": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "title": {"type": "string"},
                                "description": {"type": "string"},
                                "server": {"type": "string"},
                                "score": {"type": "number"}
                            },
                            "required": ["name", "description", "server", "score"]
                        }
                    }
                },
                "required": ["tools"]
            }),
        )
        .with_annotations(read_only.clone()),
        tool(
            "describe_tools",
            "The full definitions of tools by name (input and output schemas, annotations), as \
             tools/list would give them.",
            json!({
                "type": "object",
                "properties": {
                    "names": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 50}
                },
                "required": ["names"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "tools": {"type": "array", "items": {"type": "object"}},
                    "unknown": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["tools"]
            }),
        )
        .with_annotations(read_only),
        Tool::new(
            "call_tool",
            "Call any tool by name with its arguments, exactly as calling it directly.",
            Arc::new(object(json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name, as search_tools gives it."},
                    "arguments": {"type": "object", "description": "The tool's arguments."}
                },
                "required": ["name"],
                "additionalProperties": false
            }))),
        ),
    ]
}

/// Answers `search_tools` and `describe_tools` for a client in search mode.
fn search_call(
    gateway: &Gateway,
    who: &ClientIdentity,
    name: &str,
    args: &JsonObject,
) -> Result<Value, String> {
    match name {
        "search_tools" => {
            let query = required_str(args, "query")?;
            if query.trim().is_empty() {
                return Err("query must not be empty".into());
            }
            let server = optional_str(args, "server")?;
            let limit = search_limit(args)?;
            let hits = gateway
                .roster()
                .search_tools(query, limit, |exposed, owner| {
                    server.is_none_or(|s| s == owner) && who.may_use_tool(exposed)
                });
            Ok(json!({ "tools": hits }))
        }
        "describe_tools" => {
            let names = match args.get("names") {
                Some(Value::Array(names)) if (1..=50).contains(&names.len()) => names
                    .iter()
                    .map(|n| n.as_str())
                    .collect::<Option<Vec<_>>>()
                    .ok_or("names must be an array of strings")?,
                _ => return Err("names must be an array of 1 to 50 tool names".into()),
            };
            let served = gateway.served_tools();
            let mut tools = Vec::new();
            let mut unknown = Vec::new();
            for name in names {
                // As a call would route it (a server's own name too); what this client may not
                // use is unknown, as for a call.
                let exposed = gateway
                    .roster()
                    .route_call(name)
                    .unwrap_or_else(|_| name.to_owned());
                match served.get(&exposed).filter(|_| who.may_use_tool(&exposed)) {
                    Some(tool) => {
                        tools.push(serde_json::to_value(tool).map_err(|e| e.to_string())?)
                    }
                    None => unknown.push(name),
                }
            }
            let mut out = json!({ "tools": tools });
            if let (false, Some(map)) = (unknown.is_empty(), out.as_object_mut()) {
                map.insert("unknown".into(), json!(unknown));
            }
            Ok(out)
        }
        _ => Err(format!("unknown native tool {name:?}")),
    }
}

fn entry_json(entry: &SkillEntry) -> Value {
    let mut value = json!({
        "id": entry.id,
        "name": entry.name,
        "description": entry.description,
        "kind": entry.kind.as_str(),
        "tags": entry.tags,
        "available": entry.availability.is_available(),
    });
    if let (Availability::Unavailable { reason }, Some(map)) =
        (&entry.availability, value.as_object_mut())
    {
        map.insert("unavailable_reason".into(), json!(reason));
    }
    value
}

fn optional_str<'a>(args: &'a JsonObject, key: &str) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("argument {key:?} must be a string")),
    }
}

/// A search's `limit`: 1 to 50, 10 when absent.
fn search_limit(args: &JsonObject) -> Result<usize, String> {
    match args.get("limit") {
        None | Some(Value::Null) => Ok(10),
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=50).contains(n))
            .map(|n| n as usize)
            .ok_or_else(|| "limit must be an integer from 1 to 50".to_owned()),
    }
}

fn required_str<'a>(args: &'a JsonObject, key: &str) -> Result<&'a str, String> {
    optional_str(args, key)?.ok_or_else(|| format!("missing required argument {key:?}"))
}

fn skills_call(
    gateway: &Gateway,
    who: &ClientIdentity,
    name: &str,
    args: &JsonObject,
) -> Result<Value, String> {
    let subscriptions: Subscriptions = who.subscriptions.iter().cloned().collect();
    let catalog = gateway.skills().read();
    match name {
        "list_skills" => {
            let kind = match optional_str(args, "kind")? {
                None => None,
                Some("knowledge") => Some(SkillKind::Knowledge),
                Some("flow_template") => Some(SkillKind::FlowTemplate),
                Some(other) => {
                    return Err(format!(
                        "kind must be \"knowledge\" or \"flow_template\", not {other:?}"
                    ));
                }
            };
            let tags = match args.get("tags") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|t| t.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("tags must be an array of strings")?,
                Some(_) => return Err("tags must be an array of strings".into()),
            };
            let filter = ListFilter {
                kind,
                tags,
                cursor: optional_str(args, "cursor")?.map(str::to_owned),
                ..ListFilter::default()
            };
            let page = catalog.list(&subscriptions, &filter);
            let mut out =
                json!({"skills": page.entries.iter().map(entry_json).collect::<Vec<_>>()});
            if let (Some(cursor), Some(map)) = (page.next_cursor, out.as_object_mut()) {
                map.insert("next_cursor".into(), json!(cursor));
            }
            Ok(out)
        }
        "search_skills" => {
            let query = required_str(args, "query")?;
            let limit = search_limit(args)?;
            let hits = catalog.search(&subscriptions, query, limit);
            Ok(json!({"skills": hits.iter().map(|hit| {
                let mut entry = entry_json(&hit.entry);
                if let Some(map) = entry.as_object_mut() {
                    map.insert("score".into(), json!(hit.score));
                }
                entry
            }).collect::<Vec<_>>()}))
        }
        "get_skill" => {
            let id = required_str(args, "id")?;
            let detail = catalog.get(&subscriptions, id).map_err(|e| e.to_string())?;
            let skill = detail.skill;
            let mut out = entry_json(&SkillEntry {
                id: skill.id.clone(),
                name: skill.name.clone(),
                description: skill.description.clone(),
                kind: skill.kind,
                tags: skill.tags.clone(),
                availability: detail.availability.clone(),
            });
            if let Some(map) = out.as_object_mut() {
                map.insert("content".into(), json!(skill.content));
                map.insert("includes".into(), json!(skill.includes));
                map.insert("tools".into(), json!(skill.tools));
                if skill.kind == SkillKind::FlowTemplate {
                    map.insert(
                        "parameters".into(),
                        skill
                            .parameters
                            .clone()
                            .unwrap_or_else(|| json!({"type": "object"})),
                    );
                    map.insert("steps".into(), json!(skill.steps));
                }
            }
            Ok(out)
        }
        "resolve_flow_template" => {
            let id = required_str(args, "id")?;
            let params = match args.get("parameters") {
                None | Some(Value::Null) => json!({}),
                Some(v @ Value::Object(_)) => v.clone(),
                Some(_) => return Err("parameters must be an object".into()),
            };
            let steps = catalog
                .resolve_flow(&subscriptions, id, &params)
                .map_err(|e| e.to_string())?;
            Ok(json!({"id": id, "steps": steps}))
        }
        _ => Err(format!("unknown native tool {name:?}")),
    }
}

/// The tools of search mode (`tools_mode = "search"`), served in search mode only.
pub(crate) const SEARCH_TOOLS: [&str; 3] = ["search_tools", "describe_tools", "call_tool"];

/// The native tools that answer from the skill catalog.
pub(crate) const SKILL_TOOLS: [&str; 4] = [
    "list_skills",
    "search_skills",
    "get_skill",
    "resolve_flow_template",
];

/// Answers a native tool call, or `None` when `name` is not a native tool.
pub(crate) fn call(
    gateway: &Arc<Gateway>,
    who: &ClientIdentity,
    name: &str,
    arguments: &JsonObject,
) -> Option<CallToolResult> {
    match name {
        "channels" => {
            let inbox = gateway.inbox()?;
            Some(match channels_call(inbox, who, arguments) {
                Ok(value) => structured(value),
                Err(message) => error(message),
            })
        }
        name if SKILL_TOOLS.contains(&name) => {
            // Visibility is checked here, at every call, against the catalog as it is now.
            Some(match skills_call(gateway, who, name, arguments) {
                Ok(value) => structured(value),
                Err(message) => error(message),
            })
        }
        "search_tools" | "describe_tools" if gateway.tool_view(who).searches() => {
            Some(match search_call(gateway, who, name, arguments) {
                Ok(value) => structured(value),
                Err(message) => error(message),
            })
        }
        "refresh_tools" => {
            let marked = gateway.refresh();
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
