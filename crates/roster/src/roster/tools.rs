//! The live tools through [`Roster`]: the list clients see, the search index behind
//! `tools_mode = "search"`, a call's route (withheld tools told apart), and the call itself.

use std::sync::Arc;

use roster_core::{CallRouteError, Tool, ToolLookup, ToolPresence, ToolRegistry};
use serde_json::{Map, Value};

use super::Roster;
use crate::config::TaskSupport;
use crate::servers::runtime::Runtime;
use crate::servers::{Answer, CallOptions, RequestError, ToolArguments};

/// A tool call could not be made or failed on the way.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// No tool is exposed under that name (it may have been removed: list tools again).
    #[error("no tool named `{0}` is available; list the tools again")]
    UnknownTool(String),
    /// Not an exposed name, and more than one server has a tool of that own name; the error
    /// names each one's exposed name.
    #[error(transparent)]
    AmbiguousTool(CallRouteError),
    /// The tool is withheld: its definition changed since a person approved it (or it is new
    /// and new tools need approval), and only a person can let it through.
    #[error("{0}")]
    Withheld(String),
    /// The tool's server is restarting or disconnected.
    #[error("the server `{server}` offering `{tool}` is not connected right now")]
    Unavailable {
        /// The server.
        server: String,
        /// The exposed tool name.
        tool: String,
    },
    /// The request failed (timeout, cancellation, server error, connection lost).
    #[error("calling `{tool}` on server `{server}` failed: {source}")]
    Request {
        /// The server.
        server: String,
        /// The exposed tool name.
        tool: String,
        /// What happened.
        #[source]
        source: RequestError,
    },
}

impl CallError {
    /// Why a call was refused before any server, as the metrics count it.
    fn refusal(&self) -> &'static str {
        match self {
            CallError::Withheld(_) => "withheld",
            CallError::AmbiguousTool(_) => "ambiguous",
            _ => "unknown_tool",
        }
    }
}

/// One exposed tool as clients see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    /// The name clients call it by.
    pub exposed_name: String,
    /// The server offering it.
    pub server: String,
    /// The tool as the server listed it (its own name, unknown fields kept).
    pub tool: Tool,
}

struct LiveTools(std::sync::Weak<Runtime>);

impl ToolLookup for LiveTools {
    fn presence(&self, reference: &str) -> ToolPresence {
        let Some(rt) = self.0.upgrade() else {
            return ToolPresence::Unknown;
        };
        match rt.state().registry.presence(reference) {
            ToolPresence::Present => ToolPresence::Present,
            _ if rt.pinning.is_withheld(reference) => ToolPresence::Withheld,
            other => other,
        }
    }
}

impl Roster {
    /// The live tools in their deterministic order: servers in config order, each server's
    /// tools in the order the server listed them.
    pub fn tools(&self) -> Vec<ToolEntry> {
        self.tools_since(None).1.unwrap_or_default()
    }

    /// The registry's version (see [`ToolRegistry::version`]) and, when it is not `known`,
    /// every exposed tool as [`Roster::tools`] gives them: a reader keeps its copy until the
    /// version moves.
    pub fn tools_since(&self, known: Option<u64>) -> (u64, Option<Vec<ToolEntry>>) {
        let state = self.rt.state();
        let version = state.registry.version();
        if known == Some(version) {
            return (version, None);
        }
        let tools = state
            .registry
            .tools()
            .map(|t| ToolEntry {
                exposed_name: t.exposed_name.to_owned(),
                server: t.server.to_owned(),
                tool: t.tool.clone(),
            })
            .collect();
        (version, Some(tools))
    }

    /// Keeps the search index of the live tools (`tools_mode = "search"`), or drops it. Turned
    /// on, it is built once from the tools held now; every reconcile after keeps it.
    pub fn set_tool_search(&self, on: bool) {
        self.rt.state().registry.set_search(on);
    }

    /// The live tools best matching `query`, best first, at most `limit`, among those `accept`
    /// lets through (by exposed name and server); empty while search is off.
    pub fn search_tools(
        &self,
        query: &str,
        limit: usize,
        mut accept: impl FnMut(&str, &str) -> bool,
    ) -> Vec<ToolHit> {
        let state = self.rt.state();
        state
            .registry
            .search(query, limit, |tool| accept(tool.exposed_name, tool.server))
            .into_iter()
            .map(|(tool, score)| ToolHit {
                exposed_name: tool.exposed_name.to_owned(),
                server: tool.server.to_owned(),
                title: tool.tool.title.clone(),
                description: tool
                    .tool
                    .description
                    .as_deref()
                    .map(first_line)
                    .unwrap_or_default(),
                score,
            })
            .collect()
    }

    /// A live [`ToolLookup`] over the registry for the skill catalog: each question reads the
    /// registry as it is at that moment. It holds the roster weakly (everything reports
    /// `Unknown` once the roster is gone).
    pub fn tool_lookup(&self) -> Arc<dyn ToolLookup + Send + Sync> {
        Arc::new(LiveTools(Arc::downgrade(&self.rt)))
    }

    /// Reads the registry (collisions, counts, exposed names).
    pub fn with_registry<R>(&self, read: impl FnOnce(&ToolRegistry) -> R) -> R {
        read(&self.rt.state().registry)
    }

    /// The exposed name a call of `name` reaches: `name` itself when it is exposed, else the
    /// one server's tool that has `name` as its own name (MCP Apps call their server's tools
    /// so; see [`ToolRegistry::route_call`]).
    pub fn route_call(&self, name: &str) -> Result<String, CallRouteError> {
        let state = self.rt.state();
        let routed = state.registry.route_call(name)?;
        Ok(routed.exposed_name.to_owned())
    }

    /// When a call of `name` means a withheld tool: what the caller is told (why, and the
    /// command a person runs to decide).
    pub fn withheld(&self, name: &str) -> Option<String> {
        let (server, w) = self.rt.pinning.withheld(name)?;
        Some(format!(
            "tool `{}` of server `{server}` is {}. Only a person can decide: `roster tools \
             drift` shows what changed and `roster tools approve {}` serves it.",
            w.exposed, w.reason, w.exposed
        ))
    }

    /// Calls a tool by its exposed name (or a server's own name, see [`Roster::route_call`])
    /// with the server's configured timeout.
    pub async fn call(
        &self,
        exposed_name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<Value, CallError> {
        self.call_with(exposed_name, arguments, CallOptions::default())
            .await
    }

    /// Calls a tool with progress and cancellation; `options.timeout` unset means the
    /// server's configured `call_timeout`.
    pub async fn call_with(
        &self,
        exposed_name: &str,
        arguments: Option<Map<String, Value>>,
        options: CallOptions,
    ) -> Result<Value, CallError> {
        let answer = self
            .call_answer(exposed_name, arguments.into(), options)
            .await?;
        answer.into_value().map_err(|source| CallError::Request {
            server: self.server_of(exposed_name),
            tool: exposed_name.to_owned(),
            source,
        })
    }

    /// The server an exposed tool name routes to ("" for none).
    pub(crate) fn server_of(&self, exposed_name: &str) -> String {
        self.with_registry(|r| r.route_call(exposed_name).map(|r| r.server.to_owned()))
            .unwrap_or_default()
    }

    /// [`Roster::call_with`] with the result as the server wrote it, where roster's own
    /// transport read it (see [`crate::servers::answer`]), and the arguments as the client
    /// wrote them where roster writes the request ([`ToolArguments`]).
    pub(crate) async fn call_answer(
        &self,
        exposed_name: &str,
        arguments: ToolArguments,
        mut options: CallOptions,
    ) -> Result<Answer, CallError> {
        let (server, tool) = {
            let state = self.rt.state();
            let route = state
                .registry
                .route_call(exposed_name)
                .map_err(|e| match e {
                    CallRouteError::Unknown(name) => match self.withheld(&name) {
                        Some(why) => CallError::Withheld(why),
                        None => CallError::UnknownTool(name),
                    },
                    ambiguous => CallError::AmbiguousTool(ambiguous),
                })
                .inspect_err(|e| self.rt.metrics.call_refused(e.refusal()))?;
            (route.server.to_owned(), route.tool.name.clone())
        };
        let slot = self
            .rt
            .slot(&server)
            .ok_or_else(|| CallError::UnknownTool(exposed_name.to_owned()))?;
        let connection = slot.connection().ok_or_else(|| {
            self.rt.metrics.call_unavailable(&server, exposed_name);
            CallError::Unavailable {
                server: server.clone(),
                tool: exposed_name.to_owned(),
            }
        })?;
        if options.timeout.is_none() {
            options.timeout = Some(slot.config.call_timeout);
        }
        let started = self.rt.metrics.started();
        let outcome = connection.call_tool_answer(&tool, arguments, options).await;
        self.rt
            .metrics
            .call(&server, exposed_name, started, &outcome);
        if matches!(outcome, Err(RequestError::Unauthorized)) && slot.config.oauth.is_some() {
            self.rt.refused_for_a_login(&slot, &connection, "call");
        }
        outcome.map_err(|source| CallError::Request {
            server,
            tool: exposed_name.to_owned(),
            source,
        })
    }

    /// How a call of this exposed tool may run as a task (SEP-2663): the server's
    /// `tasks.required` / `tasks.forbidden` configuration first, then the tool's own
    /// `execution.taskSupport` (servers speaking 2025-11-25 declare it), else optional: roster
    /// can run any tool in the background. `None` for a tool that is not exposed.
    pub fn task_support(&self, exposed_name: &str) -> Option<TaskSupport> {
        let state = self.rt.state();
        let route = state.registry.route_call(exposed_name).ok()?;
        let configured = self
            .rt
            .slot(route.server)
            .and_then(|slot| slot.config.tasks.of(&route.tool.name));
        let declared = || {
            route
                .tool
                .extra
                .get("execution")
                .and_then(|e| e.get("taskSupport"))
                .and_then(Value::as_str)
                .and_then(TaskSupport::parse)
        };
        Some(
            configured
                .or_else(declared)
                .unwrap_or(TaskSupport::Optional),
        )
    }
}

/// One match of [`Roster::search_tools`]: what a model needs to choose a tool, no schemas.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolHit {
    /// The name to call it by.
    #[serde(rename = "name")]
    pub exposed_name: String,
    /// Its title, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The first line of its description, at most [`HIT_DESCRIPTION_CHARS`] characters.
    pub description: String,
    /// The server that offers it.
    pub server: String,
    /// Relevance: higher is better; comparable within one search only.
    pub score: f32,
}

/// How much of a description a search hit carries.
pub const HIT_DESCRIPTION_CHARS: usize = 200;

/// The first non-empty line of `text`, cut to [`HIT_DESCRIPTION_CHARS`] characters (with `…`).
fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    match line.char_indices().nth(HIT_DESCRIPTION_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}
