//! Traces through OpenTelemetry: a span per client request, a child span per request roster
//! makes to a server on its behalf, and W3C trace context taken from the client and passed on to
//! the servers. Nothing is recorded, and nothing is added to what servers receive, unless the
//! standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set.
//!
//! - [`Traces`]: the exporter (OTLP over HTTP/protobuf or gRPC), started from the environment
//!   and flushed when dropped.
//! - `spans`: the client request and server request spans, and their attributes.
//! - `propagation`: `traceparent`/`tracestate` read from a client, written for a server.
//! - `http_client`: the streamable HTTP client that puts a request's `traceparent` in its header.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

mod http_client;
mod propagation;
mod spans;

pub use http_client::TracedHttpClient;
pub(crate) use propagation::{inject_current, trace_headers, trace_headers_of_params};
pub(crate) use spans::{ClientRequest, Outcome, ServerRequest, within};

/// The endpoint variables that turn traces on (the OTLP exporter reads them itself).
const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];
/// The protocol variables, the signal's own first.
const PROTOCOL_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
];
/// How long a shutdown waits for the last spans to leave.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// The tracer every span comes from; unset while traces are off, which is how every hook knows
/// to do nothing.
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Whether traces are on (an OTLP endpoint was configured when the gateway started).
pub(crate) fn on() -> bool {
    TRACER.get().is_some()
}

fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

/// `work` carrying the current trace context wherever it is polled (a task it is moved to), so
/// the server requests it makes are children of the client request; `work` itself while traces
/// are off.
pub(crate) fn carried<F: std::future::Future>(
    work: F,
) -> futures::future::Either<opentelemetry::context::WithContext<F>, F> {
    use opentelemetry::context::FutureExt as _;
    if on() {
        futures::future::Either::Left(work.with_current_context())
    } else {
        futures::future::Either::Right(work)
    }
}

/// How spans leave roster: `OTEL_EXPORTER_OTLP_PROTOCOL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf` (the default): `POST {endpoint}/v1/traces`.
    HttpProtobuf,
    /// `grpc`: the OTLP `TraceService/Export` call.
    Grpc,
}

impl Protocol {
    /// The protocol the environment names; unset is `http/protobuf`.
    pub fn from_env() -> Result<Self, TracesError> {
        for var in PROTOCOL_VARS {
            let Ok(value) = std::env::var(var) else {
                continue;
            };
            return match value.trim() {
                "" => continue,
                "http/protobuf" => Ok(Protocol::HttpProtobuf),
                "grpc" => Ok(Protocol::Grpc),
                _ => Err(TracesError::Protocol { var, value }),
            };
        }
        Ok(Protocol::HttpProtobuf)
    }
}

/// Why traces could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TracesError {
    /// The protocol variable names a protocol roster does not export with.
    #[error(
        "{var} = {value:?} is not a trace protocol roster exports with (use http/protobuf or grpc)"
    )]
    Protocol {
        /// The variable that was read.
        var: &'static str,
        /// What it said.
        value: String,
    },
    /// The OTLP exporter refused its configuration (endpoint, headers, timeout).
    #[error("the OTLP trace exporter cannot start: {0}")]
    Exporter(String),
    /// Traces were started twice in one process.
    #[error("traces are already being exported by this process")]
    AlreadyOn,
}

/// Exported traces while this lives; dropping it sends the spans still waiting.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traces").finish_non_exhaustive()
    }
}

impl Traces {
    /// Starts exporting when `OTEL_EXPORTER_OTLP_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set; `Ok(None)` (traces off) when neither is, or
    /// when `OTEL_SDK_DISABLED` is `true`.
    /// Endpoint, headers (`OTEL_EXPORTER_OTLP_HEADERS`) and timeout are read by the OTLP
    /// exporter as the specification says; the service is `OTEL_SERVICE_NAME`, else `roster`.
    /// The gRPC exporter's connection lives on `runtime`.
    pub fn from_env(runtime: &tokio::runtime::Handle) -> Result<Option<Self>, TracesError> {
        let wanted = ENDPOINT_VARS
            .iter()
            .any(|var| std::env::var(var).is_ok_and(|v| !v.trim().is_empty()));
        let disabled =
            std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if !wanted || disabled {
            return Ok(None);
        }
        let protocol = Protocol::from_env()?;
        let exporter = match protocol {
            Protocol::HttpProtobuf => SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .build(),
            Protocol::Grpc => {
                // tonic's channel spawns its connection task on the runtime it is made in.
                let _entered = runtime.enter();
                SpanExporter::builder()
                    .with_tonic()
                    .with_protocol(opentelemetry_otlp::Protocol::Grpc)
                    .build()
            }
        }
        .map_err(|e| TracesError::Exporter(e.to_string()))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource())
            .build();
        let tracer = provider.tracer("roster");
        TRACER.set(tracer).map_err(|_| TracesError::AlreadyOn)?;
        tracing::info!(?protocol, "exporting traces over OTLP");
        Ok(Some(Traces { provider }))
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        if let Err(error) = self.provider.shutdown_with_timeout(FLUSH_WAIT) {
            tracing::warn!(%error, "the last spans may not have been exported");
        }
    }
}

/// The resource spans are reported under: what the environment says, with `roster` as the
/// service name unless `OTEL_SERVICE_NAME` (or `service.name` in `OTEL_RESOURCE_ATTRIBUTES`)
/// names another.
fn resource() -> Resource {
    let detected = Resource::builder().build();
    let unnamed = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_none_or(|name| name.as_str().starts_with("unknown_service"));
    if unnamed {
        Resource::builder().with_service_name("roster").build()
    } else {
        detected
    }
}
