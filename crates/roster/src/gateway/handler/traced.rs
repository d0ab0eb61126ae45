//! What a client request's span says: its method, what it names, its session, era, protocol
//! and client identity, and the trace context the client sent (see [`crate::telemetry`]).

use opentelemetry::Context;
use rmcp::RoleServer;
#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CompleteRequestParams, CustomRequest, GetPromptRequestParams,
    GetSkillRequestParams, PaginatedRequestParams, ReadResourceDirectoryRequestParams,
    ReadResourceRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;

use super::{GatewayHandler, http_parts};
use crate::gateway::caller;
use crate::telemetry::ClientRequest;

/// What a request names, for its span: a tool, a prompt, a resource.
pub(super) trait Target {
    /// The name or URI the request is about, if it is about one.
    fn target(&self) -> Option<&str> {
        None
    }

    /// The method, for a request rmcp could not type.
    fn untyped_method(&self) -> Option<&str> {
        None
    }
}

impl Target for CallToolRequestParams {
    fn target(&self) -> Option<&str> {
        Some(&self.name)
    }
}

impl Target for GetPromptRequestParams {
    fn target(&self) -> Option<&str> {
        Some(&self.name)
    }
}

impl Target for ReadResourceRequestParams {
    fn target(&self) -> Option<&str> {
        Some(&self.uri)
    }
}

impl Target for CustomRequest {
    fn untyped_method(&self) -> Option<&str> {
        Some(self.method.as_str()).filter(|m| m.len() <= MAX_UNTYPED_METHOD)
    }
}

// A client's text goes into a span only up to these lengths: an unknown method, or a name no
// tool has, can be anything.

/// The longest method of an untyped request a span is named after.
const MAX_UNTYPED_METHOD: usize = 64;
/// The longest tool or prompt name, or resource URI, a span records.
const MAX_TARGET: usize = 512;

impl Target for Option<PaginatedRequestParams> {}
impl Target for CompleteRequestParams {}
impl Target for GetSkillRequestParams {}
impl Target for ReadResourceDirectoryRequestParams {}
impl Target for SubscribeRequestParams {}
impl Target for UnsubscribeRequestParams {}
#[allow(deprecated)]
impl Target for SetLevelRequestParams {}

/// The MCP method of a `ServerHandler` method.
fn method_of(handler: &'static str) -> &'static str {
    use rmcp::model::*;
    match handler {
        "list_tools" => ListToolsRequestMethod::VALUE,
        "call_tool" => CallToolRequestMethod::VALUE,
        "list_prompts" => ListPromptsRequestMethod::VALUE,
        "get_prompt" => GetPromptRequestMethod::VALUE,
        "complete" => CompleteRequestMethod::VALUE,
        "list_resources" => ListResourcesRequestMethod::VALUE,
        "list_resource_templates" => ListResourceTemplatesRequestMethod::VALUE,
        "read_resource" => ReadResourceRequestMethod::VALUE,
        "list_skills" => ListSkillsRequestMethod::VALUE,
        "get_skill" => GetSkillRequestMethod::VALUE,
        "read_resource_directory" => ReadResourceDirectoryRequestMethod::VALUE,
        "subscribe" => SubscribeRequestMethod::VALUE,
        "unsubscribe" => UnsubscribeRequestMethod::VALUE,
        #[allow(deprecated)]
        "set_level" => SetLevelRequestMethod::VALUE,
        other => other,
    }
}

impl GatewayHandler {
    /// The span of one client request (`handler` is the `ServerHandler` method answering it);
    /// `None` while traces are off.
    pub(super) fn trace(
        &self,
        handler: &'static str,
        request: &impl Target,
        context: &RequestContext<RoleServer>,
    ) -> Option<Context> {
        if !crate::telemetry::on() {
            return None;
        }
        let headers = http_parts(context).map(|parts| &parts.headers);
        let header = |name: &str| {
            headers
                .and_then(|h| h.get(name))
                .and_then(|v| v.to_str().ok())
        };
        // The request's own `_meta` names its parent before the HTTP request's header does: a
        // client may send several requests, each of its own trace, over one connection.
        let (traceparent, tracestate) = match context.meta.0.get_traceparent() {
            Some(parent) => (Some(parent), context.meta.0.get_tracestate()),
            None => (header("traceparent"), header("tracestate")),
        };
        let identity = self.identity(context);
        let method = match handler {
            "on_custom_request" => request.untyped_method().unwrap_or("unknown"),
            known => method_of(known),
        };
        ClientRequest {
            method,
            target: request.target().filter(|t| t.len() <= MAX_TARGET),
            session: header("mcp-session-id"),
            era: if caller::is_modern(context) {
                "stateless"
            } else {
                "initialize"
            },
            protocol: context.protocol_version().map(|v| v.to_string()),
            client: identity.name.as_deref(),
            traceparent,
            tracestate,
        }
        .start()
    }
}
