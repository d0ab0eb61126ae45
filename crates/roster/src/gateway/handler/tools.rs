//! `tools/list` and `tools/call`: native tools first, then a server's tool, in place or as a
//! task; a tool result carries the session's pending change note.

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use roster_core::CallRouteError;
use roster_core::delta::SchemaSource;

use super::{GatewayHandler, input_round, not_a_call};
use crate::Session;
use crate::gateway::caller::{self, Step};
use crate::gateway::lane::{answer_slot, arguments_text};
use crate::gateway::tasks::{Dispatch, TaskCall};
use crate::gateway::{ClientIdentity, Outcome, ToolAnswer, native};
use crate::servers::Needs;
use crate::servers::answer::RawResult;
use crate::servers::{InputRequiredOnly, InputRound, ToolArguments};

impl GatewayHandler {
    /// Whether this request's `tools/list` page is every caller's — all tools, no search
    /// mode, no tool permissions, a request rmcp's dispatch would take as it is — and so can
    /// be answered with the page's text (`ServedTools::page_text`).
    fn lists_shared_page(&self, context: &RequestContext<RoleServer>) -> bool {
        let who = self.identity(context);
        let view = self.gateway.tool_view(&who);
        if view.searches() || view.own || !who.permissions.tools.allows_all() {
            return false;
        }
        // What rmcp's dispatch checks first; a request that fails it takes rmcp's path and
        // gets rmcp's error.
        let requested = context.meta.protocol_version();
        if let Some(version) = &requested
            && !self.supported_protocol_versions().contains(version)
        {
            return false;
        }
        // A session opened without `initialize` (inline lifecycle) holds no peer info.
        let inline =
            context.peer.peer_info().is_none() || requested.is_some_and(|v| !v.has_initialize());
        !inline
            || context
                .meta
                .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                .is_empty()
    }

    /// A `tools/list` page every caller shares, as the JSON text of its result: made once
    /// per version of the served tools and protocol era, then copied (the session's turn and
    /// note go exactly as for any other page).
    async fn shared_page_text(
        &self,
        request: Option<PaginatedRequestParams>,
        context: &RequestContext<RoleServer>,
    ) -> Result<tokio_util::bytes::Bytes, ErrorData> {
        self.begin_listing(context).await;
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let limits = self.gateway.config().pages;
        let modern = caller::is_modern(context);
        self.gateway
            .served_tools()
            .page_text(cursor, limits, modern)
    }

    /// A listing's turn: stale servers are listed again first, and the session's pending note
    /// goes (the list says what any note drained so far would).
    async fn begin_listing(&self, context: &RequestContext<RoleServer>) {
        let session = self.session(context);
        session.begin_turn_keeping_note(Needs::Lists).await;
        let _ = session.take_note(SchemaSource::ToolsList);
        // What changes from here on is news to this client.
        session.listed();
    }

    pub(super) async fn tools_page(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // A shared page: whoever writes the answer writes its text in place of this stand-in.
        if let Some(slot) = answer_slot(&context)
            && self.lists_shared_page(&context)
        {
            slot.put(self.shared_page_text(request, &context).await?);
            return Ok(ListToolsResult::default());
        }
        self.begin_listing(&context).await;
        let tools = self.gateway.served_tools();
        let who = self.identity(&context);
        let view = self.gateway.tool_view(&who);
        if view.searches() {
            let listed = tools.searching(|tool, native| {
                (native || view.always.lists(&tool.name)) && who.may_use_tool(&tool.name)
            });
            let scope = if view.own || who.permissions.restricts() {
                CacheScope::Private
            } else {
                CacheScope::Public
            };
            return list_page!(self, ListToolsResult, &listed, request, scope);
        }
        if !who.permissions.tools.allows_all() {
            let permitted: Vec<Tool> = tools
                .all()
                .iter()
                .filter(|tool| who.may_use_tool(&tool.name))
                .cloned()
                .collect();
            return list_page!(
                self,
                ListToolsResult,
                &permitted,
                request,
                CacheScope::Private
            );
        }
        // Without tool permissions the list is every caller's that lists all tools; but when
        // others are in search mode by default, this one's own setting makes it its own.
        let scope = if view.own {
            CacheScope::Private
        } else {
            CacheScope::Public
        };
        list_page!(self, ListToolsResult, tools.all(), request, scope)
    }

    pub(super) async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session = self.session(&context);
        let who = self.identity(&context);
        let mut request = request;
        // Arguments set aside as text go to the server as the client wrote them, unless roster
        // looks into them: a call of its own tools or of `call_tool`, or one that may become a
        // task (the task keeps them).
        let mut text = arguments_text(&context);
        if let Some(written) = text.take_if(|_| self.reads_arguments(&request.name, &context)) {
            request.arguments = Some(serde_json::from_slice(&written).map_err(|e| {
                ErrorData::invalid_params(format!("tools/call arguments: {e}"), None)
            })?);
        }
        let searching = native::SEARCH_TOOLS.contains(&request.name.as_ref())
            && who.may_use_tool(&request.name)
            && self.gateway.tool_view(&who).searches();
        if searching && request.name == "call_tool" {
            // call_tool {name, arguments} is a call of `name`: from here on it goes exactly as
            // one (permissions, pins, notes, progress, cancellation, tasks).
            match unwrap_call_tool(request.arguments.take()) {
                Ok((name, arguments)) => {
                    request.name = name.into();
                    request.arguments = arguments;
                }
                Err(message) => {
                    let mut result = native::error(message);
                    self.carry_note(&session, &who, &mut result);
                    return Ok(result.into());
                }
            }
        } else if searching {
            // A search answers the tools as they are: stale servers are re-listed first, so a
            // tool a server just added is found.
            session.begin_turn_keeping_note(Needs::Lists).await;
        }
        let arguments = request.arguments.unwrap_or_default();
        // A tool this client may not use is answered exactly as one that does not exist.
        let unknown = || {
            let e = CallRouteError::Unknown(request.name.to_string());
            self.gateway.roster().metrics().route_refused(&e, false);
            ErrorData::invalid_params(e.to_string(), None)
        };
        if !who.may_use_tool(&request.name) && self.gateway.served_tools().is_native(&request.name)
        {
            return Err(unknown());
        }
        if native::SKILL_TOOLS.contains(&request.name.as_ref()) {
            // The catalog as it is: a server whose skills changed is listed first.
            session.begin_turn_keeping_note(Needs::Lists).await;
            if request.name == "get_skill"
                && let Some(id) = arguments.get("id").and_then(|id| id.as_str())
            {
                let subscriptions = who.subscriptions.iter().cloned().collect();
                if let Err(why) = self.gateway.skills().load_synced(id, &subscriptions).await {
                    let mut result = native::error(why);
                    self.carry_note(&session, &who, &mut result);
                    return Ok(result.into());
                }
            }
        }
        if let Some(mut result) = native::call(&self.gateway, &who, &request.name, &arguments) {
            self.carry_note(&session, &who, &mut result);
            return Ok(result.into());
        }
        // A call waits only for its own server's announced change (or first listing).
        session
            .begin_turn_keeping_note(Needs::Call(&request.name))
            .await;
        // From here on the call goes by its exposed name, also when it came by a server's own
        // name (an MCP App's call).
        let name = match self.gateway.roster().route_call(&request.name) {
            // By a server's own name: judged by the exposed name it routes to.
            Ok(name) if !who.may_use_tool(&name) => return Err(unknown()),
            Ok(name) => name,
            // Several servers have a tool of this own name: only those this client may use
            // count (the others must not show, even in an error).
            Err(CallRouteError::Ambiguous { name, exposed }) if who.permissions.restricts() => {
                let mut permitted: Vec<String> = exposed
                    .into_iter()
                    .filter(|e| who.may_use_tool(e))
                    .collect();
                match permitted.len() {
                    0 => return Err(unknown()),
                    1 => permitted.remove(0),
                    _ => {
                        let e = CallRouteError::Ambiguous {
                            name,
                            exposed: permitted,
                        };
                        self.gateway.roster().metrics().route_refused(&e, false);
                        return Err(ErrorData::invalid_params(e.to_string(), None));
                    }
                }
            }
            Err(e) => {
                // A withheld tool is known and waits for a person: a tool error says so, where
                // the model (and whoever reads its transcript) sees it.
                let withheld = self
                    .gateway
                    .roster()
                    .withheld(&request.name)
                    .filter(|_| who.may_use_tool(&request.name));
                let metrics = self.gateway.roster().metrics();
                metrics.route_refused(&e, withheld.is_some());
                let Some(why) = withheld else {
                    return Err(ErrorData::invalid_params(e.to_string(), None));
                };
                let mut result = native::error(why);
                self.carry_note(&session, &who, &mut result);
                return Ok(result.into());
            }
        };
        let input = input_round(request.input_responses, request.request_state);
        if let Dispatch::Answered(mut response) = self
            .call_as_task(&name, input.clone(), &arguments, &who, &context)
            .await?
        {
            if let CallToolResponse::Complete(result) = response.as_mut() {
                self.carry_note(&session, &who, result);
            }
            return Ok(*response);
        }
        let gateway = self.gateway.clone();
        let target = format!("tools/call {name}");
        let exposed = name.clone();
        let work = move |relay| -> futures::future::BoxFuture<'static, Outcome> {
            Box::pin(async move {
                let arguments = match text {
                    Some(text) => ToolArguments::Text(text),
                    None => ToolArguments::Parsed(Some(arguments)),
                };
                Outcome::Call(gateway.call(&name, arguments, relay).await)
            })
        };
        let step = caller::run_relayed(
            &self.gateway,
            &context,
            &session,
            who.name.clone(),
            target,
            input,
            work,
        )
        .await?;
        let outcome = match step {
            Step::InputRequired(result) => return Ok(CallToolResponse::InputRequired(result)),
            Step::Done(Outcome::Call(outcome)) => outcome,
            Step::Done(Outcome::Forward(_)) => return Err(not_a_call("tools/call")),
        };
        let mut result = match outcome {
            Ok(ToolAnswer::Raw(raw)) => {
                return self.raw_answer(&exposed, raw, &session, &who, &context);
            }
            Ok(ToolAnswer::Typed(CallToolResponse::Complete(result))) => result,
            // A 2026-07-28 server's question for a 2026-07-28 client goes to it untouched.
            Ok(ToolAnswer::Typed(other)) => return Ok(other),
            Err(error) => error.into_answer()?,
        };
        self.carry_note(&session, &who, &mut result);
        Ok(result.into())
    }

    /// Whether a call of `name` needs its arguments parsed: roster's own tools (and
    /// `call_tool`, which names the tool inside them) read them, and a call of a client that
    /// opted in to tasks may become a task, which keeps them.
    fn reads_arguments(&self, name: &str, context: &RequestContext<RoleServer>) -> bool {
        let tasks = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        tasks || self.gateway.served_tools().is_native(name) || native::SEARCH_TOOLS.contains(&name)
    }

    /// A server's tool result as the server wrote it: left as text in the request's slot for
    /// whoever writes the answer (see [`crate::gateway::lane`]), the answer being a stand-in,
    /// unless something must go inside it (the session's change note, or what rmcp changes for
    /// the client's era) or nobody writes text: then parsed, as any other result.
    fn raw_answer(
        &self,
        exposed: &str,
        raw: RawResult,
        session: &Session,
        who: &ClientIdentity,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let note = self.note_for(session, who);
        if note.is_none()
            && let Some(slot) = answer_slot(context)
            && let Some(text) = raw.tool_text(caller::is_modern(context))
        {
            slot.put(text);
            return Ok(stand_in().into());
        }
        let mut result = match self.gateway.typed_result(exposed, raw) {
            Ok(result) => result,
            Err(error) => error.into_answer()?,
        };
        result.content.extend(note.map(ContentBlock::text));
        Ok(result.into())
    }

    /// A served tool's definition; rmcp checks a 2026-07-28 `tools/call`'s `Mcp-Param-*`
    /// headers against the `x-mcp-header` annotations of its input schema (SEP-2243).
    /// A call by a server's own tool name (an MCP App's) is checked against the tool it
    /// routes to.
    pub(super) fn served_tool(&self, name: &str) -> Option<Tool> {
        let served = self.gateway.served_tools();
        if let Some(tool) = served.get(name) {
            return Some(tool.clone());
        }
        let exposed = self.gateway.roster().route_call(name).ok()?;
        served.get(&exposed).cloned()
    }

    /// Puts the session's pending change note on `result` as a block of its own after the
    /// server's content (never joined to the server's text; `structuredContent` is left as
    /// the server gave it), unless `who` turned notes off.
    fn carry_note(&self, session: &Session, who: &ClientIdentity, result: &mut CallToolResult) {
        result
            .content
            .extend(self.note_for(session, who).map(ContentBlock::text));
    }

    /// The session's pending change note, taken, for a result to carry; `None` when `who`
    /// turned notes off (what was drained is dropped, so it cannot surface much later).
    fn note_for(&self, session: &Session, who: &ClientIdentity) -> Option<String> {
        let source = if self.gateway.tool_view(who).searches() {
            SchemaSource::DescribeTools
        } else {
            SchemaSource::ToolsList
        };
        let note = session.take_note(source);
        note.filter(|_| self.gateway.delta_notes(who))
    }

    /// The task path of a server tool's call (see [`super::tasks`]).
    async fn call_as_task(
        &self,
        name: &str,
        input: Option<InputRound>,
        arguments: &JsonObject,
        who: &ClientIdentity,
        context: &RequestContext<RoleServer>,
    ) -> Result<Dispatch, ErrorData> {
        let call = TaskCall {
            name,
            arguments,
            input,
            opted_in: context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks()),
            caller: InputRequiredOnly::new(
                context
                    .client_capabilities()
                    .and_then(|c| serde_json::to_value(c).ok())
                    .unwrap_or_default(),
            ),
            cancelled: &context.ct,
        };
        let owner = who.name.clone().unwrap_or_default();
        self.gateway
            .tasks()
            .dispatch(&self.gateway, &owner, call, &self.gateway.shutdown_token())
            .await
    }
}

/// The stand-in answer of a tool result left as text. A client sees it only where the text
/// could not take its place: a stream resumed after it was cut before the answer, which rmcp
/// replays from what it kept.
fn stand_in() -> CallToolResult {
    native::error(
        "roster sent this call's result on a stream that was cut before it arrived and cannot \
         send it again; call the tool again if its result is needed"
            .to_owned(),
    )
}

/// The tool name and arguments of a `call_tool` call, or what is wrong with them.
fn unwrap_call_tool(arguments: Option<JsonObject>) -> Result<(String, Option<JsonObject>), String> {
    let mut arguments = arguments.unwrap_or_default();
    let name = match arguments.remove("name") {
        Some(serde_json::Value::String(name)) if !name.is_empty() => name,
        _ => {
            return Err(
                "call_tool needs `name`: the tool to call, as search_tools gives it".into(),
            );
        }
    };
    if name == "call_tool" {
        return Err("call_tool calls another tool, not itself".into());
    }
    let inner = match arguments.remove("arguments") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Object(map)) => Some(map),
        Some(_) => {
            return Err(format!(
                "call_tool: `arguments` of {name} must be an object"
            ));
        }
    };
    if let Some(extra) = arguments.keys().next() {
        return Err(format!(
            "call_tool takes `name` and `arguments`, not `{extra}`"
        ));
    }
    Ok((name, inner))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(value: serde_json::Value) -> Option<JsonObject> {
        value.as_object().cloned()
    }

    #[test]
    fn call_tool_unwraps_to_the_named_call() {
        let (name, inner) = unwrap_call_tool(args(
            json!({"name": "fs__read_text_file", "arguments": {"path": "/a"}}),
        ))
        .expect("valid");
        assert_eq!(name, "fs__read_text_file");
        assert_eq!(inner, args(json!({"path": "/a"})));
        let (_, none) = unwrap_call_tool(args(json!({"name": "t"}))).expect("valid");
        assert_eq!(none, None);
    }

    #[test]
    fn call_tool_names_what_is_wrong() {
        for (bad, says) in [
            (json!({}), "needs `name`"),
            (json!({"name": 3}), "needs `name`"),
            (json!({"name": "call_tool"}), "not itself"),
            (json!({"name": "t", "arguments": [1]}), "must be an object"),
            (json!({"name": "t", "args": {}}), "not `args`"),
        ] {
            let error = unwrap_call_tool(args(bad.clone())).expect_err("refused");
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}
