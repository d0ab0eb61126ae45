//! W3C trace context (`traceparent`, `tracestate`): read from a client's request (its HTTP
//! header or `params._meta`), written into `params._meta` of a request to a server.

use std::collections::HashMap;

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rmcp::model::{ClientJsonRpcMessage, GetMeta as _, JsonRpcMessage};
use serde_json::{Map, Value};

/// The `_meta` and header key of the parent span (W3C Trace Context).
pub(crate) const TRACEPARENT: &str = "traceparent";
/// The `_meta` and header key of the vendors' trace state.
pub(crate) const TRACESTATE: &str = "tracestate";

/// The trace context a client sent, as two optional strings.
struct Carrier<'a> {
    traceparent: Option<&'a str>,
    tracestate: Option<&'a str>,
}

impl Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => self.traceparent,
            TRACESTATE => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

/// The context a client's `traceparent` names as the parent; an empty context (a new trace)
/// when there is none or it is malformed.
pub(crate) fn extract(traceparent: Option<&str>, tracestate: Option<&str>) -> Context {
    if traceparent.is_none() {
        return Context::new();
    }
    TraceContextPropagator::new().extract_with_context(
        &Context::new(),
        &Carrier {
            traceparent,
            tracestate,
        },
    )
}

/// Puts `cx`'s span into `params._meta` as `traceparent` (and `tracestate`), so the server
/// continues the trace. A context with no valid span leaves `params` as it was.
pub(crate) fn inject(cx: &Context, params: &mut Value) {
    if !cx.span().span_context().is_valid() {
        return;
    }
    let mut fields = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut fields);
    if !params.is_object() {
        *params = Value::Object(Map::new());
    }
    let Some(params) = params.as_object_mut() else {
        return;
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Some(meta) = meta.as_object_mut() {
        for (key, value) in fields {
            meta.insert(key, Value::String(value));
        }
    }
}

/// Puts the current span (the client request's) into a request's `params._meta`, unless the
/// request carries a trace context already (its own server request span's); does nothing while
/// traces are off or outside any traced request. `request` is `{"method", "params"}`.
pub(crate) fn inject_current(request: &mut Value) {
    if !super::on() || request.pointer("/params/_meta/traceparent").is_some() {
        return;
    }
    let cx = Context::current();
    if !cx.span().span_context().is_valid() {
        return;
    }
    if let Some(request) = request.as_object_mut() {
        let params = request.entry("params").or_insert(Value::Null);
        inject(&cx, params);
    }
}

/// The `traceparent` a request to a server carries in its `_meta`, for its HTTP header.
pub(crate) fn traceparent_of(message: &ClientJsonRpcMessage) -> Option<&str> {
    let JsonRpcMessage::Request(request) = message else {
        return None;
    };
    request.request.get_meta().0.get_traceparent()
}

/// The `traceparent` and `tracestate` headers of a JSON-RPC message whose `params._meta` carries
/// them (a request to a legacy SSE server).
pub(crate) fn trace_headers(message: &Value) -> reqwest::header::HeaderMap {
    trace_headers_of_params(message.get("params").unwrap_or(&Value::Null))
}

/// [`trace_headers`] of a request's `params`.
pub(crate) fn trace_headers_of_params(params: &Value) -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    let meta = params.get("_meta").and_then(Value::as_object);
    for key in [TRACEPARENT, TRACESTATE] {
        let value = meta
            .and_then(|meta| meta.get(key))
            .and_then(Value::as_str)
            .and_then(|v| reqwest::header::HeaderValue::from_str(v).ok());
        if let Some(value) = value {
            headers.insert(reqwest::header::HeaderName::from_static(key), value);
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_clients_traceparent_is_passed_on_in_meta() {
        let cx = extract(Some(PARENT), Some("vendor=x"));
        assert!(cx.span().span_context().is_remote());
        let mut params = json!({"name": "echo", "_meta": {"progressToken": 1}});
        inject(&cx, &mut params);
        assert_eq!(params["_meta"]["traceparent"], PARENT);
        assert_eq!(params["_meta"]["tracestate"], "vendor=x");
        assert_eq!(params["_meta"]["progressToken"], 1);
    }

    #[test]
    fn a_malformed_traceparent_starts_no_trace_and_injects_nothing() {
        let cx = extract(Some("00-not-a-trace-01"), None);
        assert!(!cx.span().span_context().is_valid());
        let mut params = json!({});
        inject(&cx, &mut params);
        assert_eq!(params, json!({}));
    }
}
