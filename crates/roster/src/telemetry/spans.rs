//! The spans: one per client request (a server span in OpenTelemetry's words), and one per
//! request roster makes to a server on its behalf (a client span, its child). Attribute names
//! follow OpenTelemetry's MCP conventions (`mcp.*`, `gen_ai.tool.name`) where they have one,
//! and say `roster.*` for what only roster knows.

use std::borrow::Cow;
use std::future::Future;

use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use rmcp::ErrorData;
use serde_json::Value;

use super::propagation;

/// The tool a client called, by the name it used (the exposed name, or an MCP App's use of the
/// server's own name): kept in the request's context for the server request's span.
#[derive(Debug, Clone)]
struct CalledTool(String);

/// What the span of one client request records.
#[derive(Debug, Default)]
pub(crate) struct ClientRequest<'a> {
    /// The MCP method (`tools/call`).
    pub method: &'a str,
    /// What the request names: the tool of a `tools/call`, the prompt of a `prompts/get`, the
    /// URI of a `resources/read`.
    pub target: Option<&'a str>,
    /// `Mcp-Session-Id` of an initialize-era HTTP session.
    pub session: Option<&'a str>,
    /// `initialize` or `stateless` (2026-07-28).
    pub era: &'a str,
    /// The protocol version the request is answered under.
    pub protocol: Option<String>,
    /// The client identity's name (`[[clients]]`), if not the local default.
    pub client: Option<&'a str>,
    /// The client's `traceparent` (from `_meta`, else the HTTP header).
    pub traceparent: Option<&'a str>,
    /// The client's `tracestate`, read with its `traceparent`.
    pub tracestate: Option<&'a str>,
}

impl ClientRequest<'_> {
    /// Starts the request's span, a child of the client's `traceparent` when it sent a valid
    /// one; `None` while traces are off.
    pub(crate) fn start(self) -> Option<Context> {
        let tracer = super::tracer()?;
        let parent = propagation::extract(self.traceparent, self.tracestate);
        let name: Cow<'static, str> = match self.target {
            Some(target) => format!("{} {target}", self.method).into(),
            None => self.method.to_owned().into(),
        };
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", self.method.to_owned()),
            KeyValue::new("roster.era", self.era.to_owned()),
        ];
        if let Some(session) = self.session {
            attributes.push(KeyValue::new("mcp.session.id", session.to_owned()));
        }
        if let Some(protocol) = self.protocol {
            attributes.push(KeyValue::new("mcp.protocol.version", protocol));
        }
        if let Some(client) = self.client {
            attributes.push(KeyValue::new("roster.client.identity", client.to_owned()));
        }
        let target_key = match self.method {
            "tools/call" => Some("gen_ai.tool.name"),
            "prompts/get" => Some("gen_ai.prompt.name"),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                Some("mcp.resource.uri")
            }
            _ => None,
        };
        if let (Some(key), Some(target)) = (target_key, self.target) {
            attributes.push(KeyValue::new(key, target.to_owned()));
        }
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        let cx = parent.with_span(span);
        Some(match (self.method, self.target) {
            ("tools/call", Some(tool)) => cx.with_value(CalledTool(tool.to_owned())),
            _ => cx,
        })
    }
}

/// Runs a client request's handling inside its span (`None`: untraced), and ends the span with
/// the request's outcome.
pub(crate) async fn within<T>(
    cx: Option<Context>,
    handling: impl Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    let Some(cx) = cx else {
        return handling.await;
    };
    let answer = handling.with_context(cx.clone()).await;
    let span = cx.span();
    if let Err(error) = &answer {
        span.set_attribute(KeyValue::new(
            "rpc.response.status_code",
            error.code.0.to_string(),
        ));
        span.set_status(Status::error(error.message.to_string()));
    }
    span.end();
    answer
}

/// How a request to a server ended, as its span records it: the server layer's answers and
/// errors say it of themselves.
pub(crate) trait Outcome {
    /// In a few words (`roster.outcome`): `ok`, `tool_error` (a result with `isError`),
    /// `protocol_error` (a JSON-RPC error), `timeout`, `cancelled`, `server_down`, `error`.
    fn outcome(&self) -> &'static str;

    /// What failed, for the span's status; `None` when the server answered (a tool's error
    /// included).
    fn failure(&self) -> Option<String>;
}

/// The span of one request to a server, a child of the client request it serves.
pub(crate) struct ServerRequest {
    cx: Context,
}

impl ServerRequest {
    /// Starts the span of `method` to `server` under the current client request, and puts it
    /// into `params._meta` as the server's `traceparent`. `None` (and `params` untouched) while
    /// traces are off or outside a traced request.
    pub(crate) fn start(server: &str, method: &str, params: &mut Value) -> Option<Self> {
        let tracer = super::tracer()?;
        let parent = Context::current();
        if !parent.span().span_context().is_valid() {
            return None;
        }
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", method.to_owned()),
            KeyValue::new("roster.server", server.to_owned()),
        ];
        let own_tool = match method {
            "tools/call" => params.get("name").and_then(Value::as_str),
            _ => None,
        };
        if let Some(tool) = own_tool {
            attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
            attributes.push(KeyValue::new("roster.tool.original", tool.to_owned()));
            if let Some(called) = parent.get::<CalledTool>() {
                attributes.push(KeyValue::new("roster.tool.exposed", called.0.clone()));
            }
        }
        let name = match own_tool {
            Some(tool) => format!("{method} {server}/{tool}"),
            None => format!("{method} {server}"),
        };
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        let cx = parent.with_span(span);
        propagation::inject(&cx, params);
        Some(ServerRequest { cx })
    }

    /// Ends `span` (if there is one) with what the server answered, and hands the answer on.
    pub(crate) fn end<A: Outcome>(span: Option<Self>, answer: A) -> A {
        if let Some(span) = span {
            span.finish(answer.outcome(), answer.failure());
        }
        answer
    }

    /// Runs `requests` (the pages of a `tools/list`, each sent with the current trace context)
    /// inside the span of `method` to `server`, and ends it with their outcome.
    pub(crate) async fn around<T, E: Outcome>(
        server: &str,
        method: &str,
        requests: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let Some(span) = ServerRequest::start(server, method, &mut Value::Null) else {
            return requests.await;
        };
        let answer = requests.with_context(span.cx.clone()).await;
        let failed = answer.as_ref().err();
        span.finish(
            failed.map_or("ok", Outcome::outcome),
            failed.and_then(Outcome::failure),
        );
        answer
    }

    fn finish(self, outcome: &'static str, failure: Option<String>) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("roster.outcome", outcome));
        match failure {
            None if outcome == "ok" => span.set_status(Status::Ok),
            None => span.set_status(Status::error("the tool reported an error")),
            Some(failure) => span.set_status(Status::error(failure)),
        }
        span.end();
    }
}
