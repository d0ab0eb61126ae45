//! The HTTP client of roster's streamable HTTP connections: rmcp's reqwest client, plus the
//! `traceparent` header on a request whose `_meta` carries one, so a server (or a proxy in
//! front of it) that reads trace context from HTTP sees the same trace as from `_meta`.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::propagation::{TRACEPARENT, traceparent_of};

/// How many redirects one request follows.
const MAX_REDIRECTS: usize = 10;

/// A streamable HTTP client that passes a request's trace context on as its `traceparent`
/// header.
#[derive(Clone, Debug)]
pub struct TracedHttpClient {
    inner: reqwest::Client,
    insufficient_scope: Option<ScopeHook>,
    posted: Option<PostedHook>,
}

/// Told the `WWW-Authenticate` of every 403 `insufficient_scope` a POST gets.
#[derive(Clone)]
struct ScopeHook(Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for ScopeHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScopeHook")
    }
}

/// Told the session, the bearer token and the headers of each request rmcp's transport sends
/// after the handshake.
#[derive(Clone)]
struct PostedHook(Arc<Posted>);

/// What a [`PostedHook`] calls: with the session, the bearer token and the headers.
type Posted = dyn Fn(&Option<Arc<str>>, &Option<String>, &Headers) + Send + Sync;

impl std::fmt::Debug for PostedHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PostedHook")
    }
}

/// The headers of one request.
type Headers = HashMap<HeaderName, HeaderValue>;

impl TracedHttpClient {
    /// A client like rmcp's default: no idle connection pool (a reused connection whose last
    /// body was not read stalls on delayed ACKs), and only same-origin 307/308 redirects.
    pub fn new() -> Result<Self, reqwest::Error> {
        let inner = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(redirects())
            .build()?;
        Ok(TracedHttpClient {
            inner,
            insufficient_scope: None,
            posted: None,
        })
    }

    /// The client of roster's own requests to streamable HTTP servers
    /// ([`crate::servers::http_direct`]): the same redirects, connections kept alive (it reads
    /// every body it keeps a connection for) and `TCP_NODELAY`; one for the whole process, so
    /// its pool and TLS configuration are not made again per server.
    pub(crate) fn keep_alive() -> Result<reqwest::Client, reqwest::Error> {
        static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
        if let Some(client) = CLIENT.get() {
            return Ok(client.clone());
        }
        let client = reqwest::Client::builder()
            .redirect(redirects())
            .tcp_nodelay(true)
            .build()?;
        Ok(CLIENT.get_or_init(|| client).clone())
    }

    /// Tells `hook` the session, token and headers of each request rmcp's transport sends
    /// after the handshake, for roster's own requests to go with
    /// ([`crate::servers::http_direct`] keeps them).
    pub(crate) fn recording(
        mut self,
        hook: impl Fn(&Option<Arc<str>>, &Option<String>, &Headers) + Send + Sync + 'static,
    ) -> Self {
        self.posted = Some(PostedHook(Arc::new(hook)));
        self
    }

    fn record(
        &self,
        message: &ClientJsonRpcMessage,
        session: &Option<Arc<str>>,
        token: &Option<String>,
        headers: &Headers,
    ) {
        let Some(hook) = &self.posted else {
            return;
        };
        if let JsonRpcMessage::Request(request) = message
            && matches!(request.request, ClientRequest::InitializeRequest(_))
        {
            return;
        }
        (hook.0)(session, token, headers);
    }

    /// Calls `hook` with the `WWW-Authenticate` of each 403 `insufficient_scope` answer (the
    /// OAuth step-up the server asks for).
    pub fn on_insufficient_scope(mut self, hook: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.insufficient_scope = Some(ScopeHook(Arc::new(hook)));
        self
    }

    fn seen(&self, result: PostResult) -> PostResult {
        if let (Err(StreamableHttpError::InsufficientScope(e)), Some(hook)) =
            (&result, &self.insufficient_scope)
        {
            (hook.0)(&e.www_authenticate_header);
        }
        result
    }

    /// The streamable HTTP transport of `config` over this client.
    pub fn transport(
        self,
        config: StreamableHttpClientTransportConfig,
    ) -> StreamableHttpClientTransport<Self> {
        StreamableHttpClientTransport::with_client(self, config)
    }
}

/// Only same-origin 307/308 redirects, which keep the POST body and do not hand the session id
/// and configured headers to another host.
fn redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
        if same_origin && keeps_body && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// `headers` with the message's `traceparent`, if it carries one.
fn stamped(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    if let Some(value) = traceparent_of(message).and_then(|v| HeaderValue::from_str(v).ok()) {
        headers.insert(HeaderName::from_static(TRACEPARENT), value);
    }
    headers
}

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;
type StreamResult =
    Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<reqwest::Error>>;

impl StreamableHttpClient for TracedHttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> PostResult {
        self.record(&message, &session_id, &auth_header, &custom_headers);
        let headers = stamped(&message, custom_headers);
        let result = self
            .inner
            .post_message(uri, message, session_id, auth_header, headers)
            .await;
        self.seen(result)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> PostResult {
        self.record(&message, &session_id, &auth_header, &custom_headers);
        let headers = stamped(&message, custom_headers);
        let result = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                max_sse_event_size,
            )
            .await;
        self.seen(result)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> PostResult {
        self.record(&message, &session_id, &auth_header, &custom_headers);
        let headers = stamped(&message, custom_headers);
        let result = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                limits,
            )
            .await;
        self.seen(result)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<reqwest::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> StreamResult {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> StreamResult {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
