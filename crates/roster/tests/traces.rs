//! Traces seen from outside: a real `roster serve --http` exporting to an OTLP receiver that
//! this test runs on 127.0.0.1 (OTLP/HTTP protobuf, or OTLP/gRPC, decoded with the protocol's
//! own definitions), fronting the dynamic Python server over streamable HTTP, which reports the
//! trace context it received.

mod common;

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::{Value, json};

use common::mcp_http;

/// What the receiver got: each span with its resource's `service.name`.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Span)>>>);

impl Received {
    fn spans(&self) -> Vec<(String, Span)> {
        self.0.lock().expect("receiver lock").clone()
    }

    fn take(&self, request: ExportTraceServiceRequest) {
        let mut spans = self.0.lock().expect("receiver lock");
        for resource_spans in request.resource_spans {
            let service = resource_spans
                .resource
                .as_ref()
                .and_then(|r| {
                    r.attributes
                        .iter()
                        .find(|kv| kv.key == "service.name")
                        .and_then(|kv| string_of(kv.value.as_ref()?))
                })
                .unwrap_or_default();
            for scope_spans in resource_spans.scope_spans {
                spans.extend(scope_spans.spans.into_iter().map(|s| (service.clone(), s)));
            }
        }
    }
}

fn string_of(value: &opentelemetry_proto::tonic::common::v1::AnyValue) -> Option<String> {
    match value.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| string_of(kv.value.as_ref()?))
}

/// An OTLP/HTTP receiver: `POST /v1/traces` with a protobuf `ExportTraceServiceRequest`.
async fn otlp_http_receiver() -> (String, Received) {
    let received = Received::default();
    let sink = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let sink = sink.clone();
            async move {
                let request =
                    ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf request");
                sink.take(request);
                (
                    [("content-type", "application/x-protobuf")],
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the receiver");
    let addr = listener.local_addr().expect("receiver address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), received)
}

/// An OTLP/gRPC receiver: the `TraceService/Export` call.
async fn otlp_grpc_receiver() -> (String, Received) {
    struct Receiver(Received);

    #[tonic::async_trait]
    impl TraceService for Receiver {
        async fn export(
            &self,
            request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
            self.0.take(request.into_inner());
            Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
        }
    }

    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the receiver");
    let addr = listener.local_addr().expect("receiver address");
    let service = TraceServiceServer::new(Receiver(received.clone()));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    (format!("http://{addr}"), received)
}

/// `[servers.web]`: the dynamic server over streamable HTTP at `port`.
fn web(port: u16) -> String {
    format!("[servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n")
}

/// `roster serve --http` fronting `servers`, with `env` set and the caller's own OTEL_*
/// variables removed.
fn gateway(servers: &str, env: &[(&str, &str)]) -> common::Gateway {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = common::write_roster_toml(
        dir.path(),
        &format!(
            "[gateway]\nstate_dir = {state:?}\n\n{servers}",
            state = dir.path().join("state"),
        ),
    );
    let mut command = common::serve_command(&config);
    for (var, _) in std::env::vars() {
        if var.starts_with("OTEL_") {
            command.env_remove(var);
        }
    }
    command.envs(env.iter().copied());
    let (child, url) = common::serve_http(command);
    common::Gateway {
        child: common::KillOnDrop(child),
        url,
        dir,
    }
}

fn post(url: &str, session: Option<&str>, body: &Value) -> reqwest::RequestBuilder {
    mcp_http::post(&reqwest::Client::new(), url, None, session, body)
}

async fn open_session(url: &str) -> String {
    mcp_http::open_session(&reqwest::Client::new(), url, None, "traces", json!({})).await
}

/// Calls `web__last_traceparent` (with `traceparent` as the HTTP header when given, and
/// `params` merged in) and returns what the server says it received: `{"header", "meta"}`.
async fn traceparent_seen(
    url: &str,
    session: &str,
    header: Option<&str>,
    meta: Option<&str>,
) -> Value {
    traceparent_seen_by("web", url, session, header, meta).await
}

/// [`traceparent_seen`] of the server named `server`.
async fn traceparent_seen_by(
    server: &str,
    url: &str,
    session: &str,
    header: Option<&str>,
    meta: Option<&str>,
) -> Value {
    let mut params = json!({"name": format!("{server}__last_traceparent"), "arguments": {}});
    if let Some(meta) = meta {
        params["_meta"] = json!({"traceparent": meta});
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    let mut request = post(url, Some(session), &body);
    if let Some(header) = header {
        request = request.header("traceparent", header);
    }
    let answer: Value = request
        .send()
        .await
        .expect("POST tools/call")
        .json()
        .await
        .expect("a JSON answer");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a tool result: {answer}"));
    serde_json::from_str(text).expect("the tool's JSON")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The span of `trace` named `name`, once the receiver has it.
async fn span_named(received: &Received, trace: &str, name: &str) -> (String, Span) {
    common::eventually(&format!("a span {name:?} of trace {trace}"), || {
        received
            .spans()
            .iter()
            .any(|(_, s)| hex(&s.trace_id) == trace && s.name == name)
    })
    .await;
    received
        .spans()
        .into_iter()
        .find(|(_, s)| hex(&s.trace_id) == trace && s.name == name)
        .expect("the span")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_call_is_traced_from_the_client_through_roster_to_the_server() {
    common::init_tracing();
    let (endpoint, received) = otlp_http_receiver().await;
    traced_calls(&endpoint, "http/protobuf", &received).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_exported_over_grpc_too() {
    common::init_tracing();
    let (endpoint, received) = otlp_grpc_receiver().await;
    traced_calls(&endpoint, "grpc", &received).await;
}

#[test]
fn an_unknown_protocol_stops_the_gateway_with_the_variable_named() {
    let config = tempfile::NamedTempFile::new().expect("temp config");
    std::fs::write(config.path(), "[gateway]\n").expect("write config");
    let output = common::serve_command(config.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/xml")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .output()
        .expect("run roster serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL") && stderr.contains("http/xml"),
        "{stderr}"
    );
}

/// Two traced `tools/call`s through a gateway exporting to `endpoint` with `protocol`: the
/// client's trace context as the HTTP header, then in `_meta`.
async fn traced_calls(endpoint: &str, protocol: &str, received: &Received) {
    let (_server, port) = common::spawn_http_fixture("streamable-http", &[]);
    let roster = gateway(
        &web(port),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let session = open_session(&roster.url).await;

    // The client's trace context comes as the HTTP header.
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let parent = format!("00-{trace}-{client_span}-01");
    let seen = traceparent_seen(&roster.url, &session, Some(&parent), None).await;

    let (service, request) = span_named(received, trace, "tools/call web__last_traceparent").await;
    assert_eq!(service, "roster");
    assert_eq!(hex(&request.parent_span_id), client_span);
    assert_eq!(request.kind, SpanKind::Server as i32);
    assert_eq!(
        attribute(&request, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        attribute(&request, "mcp.session.id").as_deref(),
        Some(session.as_str())
    );
    assert_eq!(
        attribute(&request, "roster.era").as_deref(),
        Some("initialize")
    );

    let (_, call) = span_named(received, trace, "tools/call web/last_traceparent").await;
    assert_eq!(hex(&call.parent_span_id), hex(&request.span_id));
    assert_eq!(call.kind, SpanKind::Client as i32);
    assert_eq!(attribute(&call, "roster.server").as_deref(), Some("web"));
    assert_eq!(
        attribute(&call, "roster.tool.exposed").as_deref(),
        Some("web__last_traceparent")
    );
    assert_eq!(
        attribute(&call, "roster.tool.original").as_deref(),
        Some("last_traceparent")
    );
    assert_eq!(attribute(&call, "roster.outcome").as_deref(), Some("ok"));

    // The server got the trace, with roster's span of the call as the parent, both in `_meta`
    // and as the HTTP header.
    let expected = format!("00-{trace}-{}-01", hex(&call.span_id));
    assert_eq!(seen["meta"], json!(expected), "{seen}");
    assert_eq!(seen["header"], json!(expected), "{seen}");

    // In `_meta` the client's trace context names the parent too.
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let client_span = "b7ad6b7169203331";
    let parent = format!("00-{trace}-{client_span}-01");
    let seen = traceparent_seen(&roster.url, &session, None, Some(&parent)).await;
    let (_, request) = span_named(received, trace, "tools/call web__last_traceparent").await;
    assert_eq!(hex(&request.parent_span_id), client_span);
    let (_, call) = span_named(received, trace, "tools/call web/last_traceparent").await;
    assert_eq!(
        seen["meta"],
        json!(format!("00-{trace}-{}-01", hex(&call.span_id)))
    );

    // A turn that re-lists a stale server does it within the request's trace.
    let refresh = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "refresh_tools", "arguments": {}}});
    let refreshed = post(&roster.url, Some(&session), &refresh)
        .send()
        .await
        .expect("POST refresh_tools");
    assert_eq!(refreshed.status(), 200);
    let trace = "11112222333344445555666677778888";
    let parent = format!("00-{trace}-1234567890abcdef-01");
    traceparent_seen(&roster.url, &session, Some(&parent), None).await;
    let (_, request) = span_named(received, trace, "tools/call web__last_traceparent").await;
    let (_, listing) = span_named(received, trace, "tools/list web").await;
    assert_eq!(hex(&listing.parent_span_id), hex(&request.span_id));
    assert_eq!(attribute(&listing, "roster.outcome").as_deref(), Some("ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_otlp_endpoint_nothing_is_passed_on() {
    common::init_tracing();
    let (_server, port) = common::spawn_http_fixture("streamable-http", &[]);
    let roster = gateway(&web(port), &[]);
    let session = open_session(&roster.url).await;
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let seen = traceparent_seen(&roster.url, &session, Some(parent), None).await;
    assert_eq!(seen, json!({"header": null, "meta": null}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_over_sse_and_stdio_get_the_trace_too() {
    common::init_tracing();
    let (endpoint, received) = otlp_http_receiver().await;
    let (_server, port) = common::spawn_http_fixture("sse", &[]);
    let servers = format!(
        "[servers.old]\nurl = \"http://127.0.0.1:{port}/sse\"\ntransport = \"sse\"\n\n{}",
        common::dynamic_server_toml("local", "legacy", &[])
    );
    let roster = gateway(
        &servers,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let session = open_session(&roster.url).await;
    let trace = "aaaabbbbccccddddeeeeffff00001111";
    let parent = format!("00-{trace}-0123456789abcdef-01");
    for (server, over_http) in [("old", true), ("local", false)] {
        let seen = traceparent_seen_by(server, &roster.url, &session, Some(&parent), None).await;
        let name = format!("tools/call {server}/last_traceparent");
        let (_, call) = span_named(&received, trace, &name).await;
        let expected = json!(format!("00-{trace}-{}-01", hex(&call.span_id)));
        assert_eq!(seen["meta"], expected, "{server}: {seen}");
        if over_http {
            assert_eq!(seen["header"], expected, "{server}: {seen}");
        }
    }
}

/// Sends `message` as one line to a stdio gateway, and for a request reads lines until its
/// answer.
async fn exchange(
    stdin: &mut tokio::process::ChildStdin,
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    message: Value,
) -> Option<Value> {
    use tokio::io::AsyncWriteExt as _;
    stdin
        .write_all(format!("{message}\n").as_bytes())
        .await
        .expect("write to roster");
    let id = message.get("id")?.clone();
    loop {
        let line = lines
            .next_line()
            .await
            .expect("read from roster")
            .expect("roster answers before it ends");
        let answer: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
        if answer.get("id") == Some(&id) {
            return Some(answer);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_clients_meta_traceparent_is_the_parent_and_spans_are_flushed_at_exit() {
    common::init_tracing();
    let (endpoint, received) = otlp_http_receiver().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = common::write_roster_toml(
        dir.path(),
        &format!(
            "[gateway]\nstate_dir = {state:?}\n\n{}",
            common::dynamic_server_toml("local", "legacy", &[]),
            state = dir.path().join("state"),
        ),
    );
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_roster"));
    command
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .env_remove("ROSTER_STATE_DIR")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (var, _) in std::env::vars() {
        if var.starts_with("OTEL_") {
            command.env_remove(var);
        }
    }
    // Nothing leaves on a timer within the test: what arrives was sent at exit.
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000");
    let mut roster = command.spawn().expect("start roster serve (stdio)");
    let mut stdin = roster.stdin.take().expect("stdin");
    let stdout = roster.stdout.take().expect("stdout");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));

    let initialize = mcp_http::initialize(1, "traces", json!({}));
    exchange(&mut stdin, &mut lines, initialize).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    exchange(&mut stdin, &mut lines, initialized).await;
    let trace = "99998888777766665555444433332222";
    let client_span = "fedcba9876543210";
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "local__last_traceparent", "arguments": {},
        "_meta": {"traceparent": format!("00-{trace}-{client_span}-01")}}});
    let answer = exchange(&mut stdin, &mut lines, call)
        .await
        .expect("an answer");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a tool result: {answer}"));
    let seen: Value = serde_json::from_str(text).expect("the tool's JSON");

    drop(stdin);
    let status = roster.wait().await.expect("roster ends");
    assert!(status.success(), "{status}");
    let (_, request) = span_named(&received, trace, "tools/call local__last_traceparent").await;
    assert_eq!(hex(&request.parent_span_id), client_span);
    assert_eq!(attribute(&request, "mcp.session.id"), None);
    let (_, call) = span_named(&received, trace, "tools/call local/last_traceparent").await;
    assert_eq!(hex(&call.parent_span_id), hex(&request.span_id));
    assert_eq!(
        seen["meta"],
        json!(format!("00-{trace}-{}-01", hex(&call.span_id)))
    );
}
