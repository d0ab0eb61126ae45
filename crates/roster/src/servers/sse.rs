//! The legacy HTTP+SSE client transport (MCP 2024-11-05), which rmcp no longer ships.
//!
//! `GET url` opens an event stream; its first `endpoint` event names the URL to `POST`
//! messages to; every later `message` event carries one JSON-RPC message from the server.
//! The stream ending is the connection ending.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use rmcp::transport::AuthClient;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::wire::{
    Outbound, Outgoing, RawResults, Received, WireTransport, incoming_channel, parse_line,
};
use crate::config::redact_url;

/// The SSE stream could not be opened or did not name its message endpoint.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// A configured header is not a valid HTTP header.
    #[error("header `{0}` is not a valid HTTP header name or value")]
    Header(String),
    /// The GET failed.
    #[error("cannot open the SSE stream at {url}: {source}")]
    Connect {
        /// The SSE URL.
        url: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered the GET with an error status.
    #[error("the SSE stream at {url} answered HTTP {status}")]
    Status {
        /// The SSE URL.
        url: String,
        /// The status.
        status: reqwest::StatusCode,
    },
    /// The server refused the GET with 401 (or 403): it wants an OAuth token roster lacks.
    #[error("the SSE stream at {url} wants an OAuth token (HTTP {status})")]
    Unauthorized {
        /// The SSE URL.
        url: String,
        /// The status.
        status: reqwest::StatusCode,
        /// Its `WWW-Authenticate`.
        challenge: Option<String>,
    },
    /// Getting the server's OAuth token failed.
    #[error("the OAuth token for {url} could not be got: {message}")]
    Token {
        /// The SSE URL.
        url: String,
        /// Why.
        message: String,
    },
    /// The stream closed before sending its `endpoint` event, or the endpoint is not a URL.
    #[error("the SSE stream at {url} did not name a usable message endpoint")]
    NoEndpoint {
        /// The SSE URL.
        url: String,
    },
}

/// One parsed server-sent event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) kind: String,
    pub(crate) data: String,
}

/// The most bytes buffered for one unfinished line (64 MiB, the stdio line cap); a longer line
/// is dropped as garbage rather than buffered without bound.
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Incremental SSE parser: feed bytes, take complete events.
///
/// Bytes are buffered and only whole lines are decoded, so a multi-byte character split across
/// two HTTP chunks stays one character.
#[derive(Debug, Default)]
pub(crate) struct EventParser {
    buffer: Vec<u8>,
    /// Inside an over-long line: bytes are dropped until its end.
    skipping: bool,
    kind: Option<String>,
    data: Vec<String>,
    /// The bytes of `data` so far; past the line limit the event is dropped whole.
    data_bytes: usize,
    /// Inside an event whose data went past the limit: dropped at its end.
    dropping: bool,
    /// The last `id:` the stream gave (the `Last-Event-ID` to resume it from).
    last_id: Option<String>,
    /// The last `retry:` the stream gave, in milliseconds.
    retry: Option<u64>,
}

impl EventParser {
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut Vec<Event>) {
        self.feed_capped(chunk, out, MAX_LINE_BYTES);
    }

    /// The last event id the stream named, to resume it from.
    pub(crate) fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// How long the stream asked a client to wait before it reconnects.
    pub(crate) fn retry(&self) -> Option<std::time::Duration> {
        self.retry.map(std::time::Duration::from_millis)
    }

    pub(crate) fn feed_capped(&mut self, mut chunk: &[u8], out: &mut Vec<Event>, limit: usize) {
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|b| *b == b'\n');
            let (part, rest) = match newline {
                Some(at) => (&chunk[..at], &chunk[at + 1..]),
                None => (chunk, &[][..]),
            };
            chunk = rest;
            if !self.skipping {
                self.buffer.extend_from_slice(part);
            }
            if newline.is_none() {
                if self.buffer.len() > limit {
                    tracing::warn!(limit, "dropped an over-long SSE line");
                    self.buffer.clear();
                    self.skipping = true;
                }
                return;
            }
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            // The same line is dropped whether it came in one read or in several.
            if self.buffer.len() > limit {
                tracing::warn!(limit, "dropped an over-long SSE line");
                self.buffer.clear();
                continue;
            }
            let line = std::mem::take(&mut self.buffer);
            self.line(&String::from_utf8_lossy(&line), out, limit);
        }
    }

    fn line(&mut self, line: &str, out: &mut Vec<Event>, limit: usize) {
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            self.data_bytes = 0;
            if std::mem::take(&mut self.dropping) {
                self.kind = None;
                return;
            }
            if !self.data.is_empty() || self.kind.is_some() {
                out.push(Event {
                    kind: self
                        .kind
                        .take()
                        .filter(|k| !k.is_empty())
                        .unwrap_or_else(|| "message".to_owned()),
                    data: std::mem::take(&mut self.data).join("\n"),
                });
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.kind = Some(value.to_owned()),
            // An event of many data lines is bounded as one line is.
            "data" if self.dropping => {}
            "data" if self.data_bytes + value.len() > limit => {
                tracing::warn!(limit, "dropped an over-long SSE event");
                self.data = Vec::new();
                self.dropping = true;
            }
            "data" => {
                self.data_bytes += value.len() + 1;
                self.data.push(value.to_owned());
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            "retry" => {
                if let Ok(ms) = value.parse() {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
    }
}

pub(crate) async fn connect(
    server: Arc<str>,
    url: &str,
    headers: &BTreeMap<String, String>,
    (auth, on_insufficient_scope): (Option<AuthClient<()>>, Option<ScopeHook>),
    raw: RawResults,
    gate: super::gate::NotificationGate,
) -> Result<(WireTransport, SseGuard), SseError> {
    let headers = super::wire::header_map(headers).map_err(SseError::Header)?;
    // Errors name the URL without its query string or userinfo, where tokens live.
    let shown = redact_url(url);
    let client = reqwest::Client::new();
    let token = bearer(auth.as_ref())
        .await
        .map_err(|message| SseError::Token {
            url: shown.clone(),
            message,
        })?;
    let mut get = client
        .get(url)
        .headers(headers.clone())
        .header(ACCEPT, "text/event-stream");
    if let Some(token) = &token {
        get = get.bearer_auth(token);
    }
    let response = get.send().await.map_err(|source| SseError::Connect {
        url: shown.clone(),
        source: source.without_url(),
    })?;
    if matches!(response.status().as_u16(), 401 | 403) && auth.is_some() {
        return Err(SseError::Unauthorized {
            url: shown.clone(),
            status: response.status(),
            challenge: response
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        });
    }
    if !response.status().is_success() {
        return Err(SseError::Status {
            url: shown.clone(),
            status: response.status(),
        });
    }
    let base = response.url().clone();
    let mut stream = response.bytes_stream();
    let mut parser = EventParser::default();
    let mut pending = Vec::new();

    // The endpoint comes first; messages before it would have nowhere to be answered.
    let endpoint = 'found: loop {
        let Some(Ok(chunk)) = stream.next().await else {
            return Err(SseError::NoEndpoint { url: shown.clone() });
        };
        parser.feed(&chunk, &mut pending);
        while !pending.is_empty() {
            let event = pending.remove(0);
            if event.kind == "endpoint" {
                match base.join(event.data.trim()) {
                    Ok(endpoint) => break 'found endpoint,
                    Err(_) => {
                        return Err(SseError::NoEndpoint { url: shown.clone() });
                    }
                }
            }
        }
    };
    tracing::debug!(server = %server, %endpoint, "SSE message endpoint");

    let (in_tx, in_rx) = mpsc::channel::<Received>(256);
    let (out_tx, mut out_rx) = mpsc::channel::<Outbound>(256);
    // Cancelled when the guard drops or the POST side dies: either way the stream ends, so the
    // connection closes and supervision reconnects, instead of a half-open connection.
    let dead = CancellationToken::new();

    let name = server.clone();
    let dead_reader = dead.clone();
    tokio::spawn(async move {
        let mut events = pending;
        loop {
            for event in events.drain(..) {
                if event.kind != "message" {
                    continue;
                }
                if let Some(value) = parse_line(&name, event.data.into())
                    && in_tx.send(value).await.is_err()
                {
                    return;
                }
            }
            tokio::select! {
                chunk = stream.next() => match chunk {
                    Some(Ok(chunk)) => parser.feed(&chunk, &mut events),
                    Some(Err(error)) => {
                        tracing::info!(server = %name, %error, "SSE stream failed");
                        return;
                    }
                    None => {
                        tracing::info!(server = %name, "SSE stream closed by the server");
                        return;
                    }
                },
                _ = dead_reader.cancelled() => return,
            }
        }
    });

    let name = server.clone();
    let dead_writer = dead.clone();
    tokio::spawn(async move {
        while let Some(outbound) = out_rx.recv().await {
            let post = |token: Option<String>| {
                let mut post = client
                    .post(endpoint.clone())
                    .headers(headers.clone())
                    .headers(crate::telemetry::trace_headers(&outbound.value))
                    .header(CONTENT_TYPE, "application/json")
                    .body(outbound.body());
                if let Some(token) = token {
                    post = post.bearer_auth(token);
                }
                post.send()
            };
            let token = match bearer(auth.as_ref()).await {
                Ok(token) => token,
                Err(message) => {
                    tracing::warn!(server = %name, %message, "no OAuth token for the SSE POST");
                    break;
                }
            };
            let mut result = post(token.clone()).await;
            // A token the server refuses is refreshed once; a refusal after that ends the
            // connection, and the reconnect finds the server needs a login.
            if let (Ok(response), Some(auth)) = (&result, &auth)
                && response.status() == reqwest::StatusCode::UNAUTHORIZED
                && token.is_some()
            {
                let refreshed = auth.auth_manager.lock().await.refresh_token().await;
                match refreshed {
                    Ok(_) => {
                        result = post(bearer(Some(auth)).await.ok().flatten()).await;
                    }
                    Err(error) => {
                        tracing::warn!(server = %name, %error, "the OAuth token was refused and could not be refreshed");
                        break;
                    }
                }
                if result
                    .as_ref()
                    .is_ok_and(|r| r.status() == reqwest::StatusCode::UNAUTHORIZED)
                {
                    tracing::warn!(server = %name, "the server refuses roster's OAuth token");
                    break;
                }
            }
            match result {
                Ok(response) if response.status().is_success() => {}
                // The session is gone: nothing sent on it can be answered.
                Ok(response) if response.status() == reqwest::StatusCode::NOT_FOUND => {
                    tracing::warn!(server = %name, "SSE session no longer exists");
                    break;
                }
                Ok(response) => {
                    let challenge = response
                        .headers()
                        .get(reqwest::header::WWW_AUTHENTICATE)
                        .and_then(|v| v.to_str().ok())
                        .filter(|c| c.contains("insufficient_scope"));
                    if let (reqwest::StatusCode::FORBIDDEN, Some(challenge), Some(hook)) =
                        (response.status(), challenge, &on_insufficient_scope)
                    {
                        // Step-up is a person's login; the connection ends until then.
                        hook(challenge);
                        break;
                    }
                    tracing::warn!(server = %name, status = %response.status(), "SSE POST rejected");
                }
                Err(error) => {
                    tracing::warn!(server = %name, %error, "SSE POST failed");
                    break;
                }
            }
        }
        dead_writer.cancel();
    });

    Ok((
        WireTransport::new(
            server,
            Outgoing::Channel(out_tx),
            incoming_channel(in_rx),
            raw,
            gate,
        ),
        SseGuard {
            stop: dead.drop_guard(),
        },
    ))
}

/// The OAuth token to send (refreshed first when it is about to expire); `None` without
/// OAuth, or with no token yet (the server's 401 then says a login is needed).
async fn bearer(auth: Option<&AuthClient<()>>) -> Result<Option<String>, String> {
    let Some(auth) = auth else {
        return Ok(None);
    };
    match auth.get_access_token().await {
        Ok(token) => Ok(Some(token)),
        Err(rmcp::transport::AuthError::AuthorizationRequired) => Ok(None),
        Err(error) => Err(error.to_string()),
    }
}

/// Told the `WWW-Authenticate` of a 403 `insufficient_scope` (an OAuth step-up).
pub(crate) type ScopeHook = Box<dyn Fn(&str) + Send + Sync>;

/// Closes the SSE stream when dropped.
#[derive(Debug)]
pub struct SseGuard {
    #[allow(dead_code)] // held for its Drop
    stop: tokio_util::sync::DropGuard,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_event_id_and_retry_are_kept_for_a_resume() {
        let mut parser = EventParser::default();
        let mut out = Vec::new();
        assert_eq!((parser.last_id(), parser.retry()), (None, None));
        parser.feed(b"id: 7\nretry: 250\ndata:\n\n", &mut out);
        parser.feed(b"data: {}\n\n", &mut out);
        assert_eq!(
            parser.last_id(),
            Some("7"),
            "an event without id keeps the last one"
        );
        assert_eq!(parser.retry(), Some(std::time::Duration::from_millis(250)));
        parser.feed(b"id: 8\nretry: soon\ndata: {}\n\n", &mut out);
        assert_eq!(parser.last_id(), Some("8"));
        assert_eq!(
            parser.retry(),
            Some(std::time::Duration::from_millis(250)),
            "a retry that is no number is ignored"
        );
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn events_split_across_chunks() {
        let mut parser = EventParser::default();
        let mut out = Vec::new();
        parser.feed(
            b"event: endpoint\r\ndata: /messages/?session_id=1",
            &mut out,
        );
        assert!(out.is_empty());
        parser.feed(b"\r\n\r\n: ping\n\ndata: {\"a\":\ndata: 1}\n\n", &mut out);
        assert_eq!(
            out,
            vec![
                Event {
                    kind: "endpoint".into(),
                    data: "/messages/?session_id=1".into()
                },
                Event {
                    kind: "message".into(),
                    data: "{\"a\":\n1}".into()
                },
            ]
        );
    }

    #[test]
    fn a_multibyte_character_split_across_chunks_stays_whole() {
        let mut parser = EventParser::default();
        let mut out = Vec::new();
        let text = "data: {\"text\":\"caf\u{e9} \u{1f600}\"}\n\n".as_bytes();
        // Split inside the two-byte é and inside the four-byte emoji.
        let e_acute = text
            .iter()
            .position(|b| *b == 0xc3)
            .expect("é is in the text");
        let emoji = text
            .iter()
            .position(|b| *b == 0xf0)
            .expect("the emoji is in the text");
        parser.feed(&text[..e_acute + 1], &mut out);
        parser.feed(&text[e_acute + 1..emoji + 2], &mut out);
        parser.feed(&text[emoji + 2..], &mut out);
        assert_eq!(
            out,
            vec![Event {
                kind: "message".into(),
                data: "{\"text\":\"caf\u{e9} \u{1f600}\"}".into()
            }]
        );
    }

    #[test]
    fn an_over_long_line_is_dropped_and_parsing_goes_on() {
        let mut parser = EventParser::default();
        let mut out = Vec::new();
        parser.feed_capped(b"data: 0123456789", &mut out, 8);
        parser.feed_capped(b"abcdef\n\ndata: ok\n\n", &mut out, 8);
        assert_eq!(
            out,
            vec![Event {
                kind: "message".into(),
                data: "ok".into()
            }]
        );
    }

    #[test]
    fn an_event_of_many_data_lines_past_the_limit_is_dropped_and_parsing_goes_on() {
        let mut parser = EventParser::default();
        let mut out = Vec::new();
        for _ in 0..100 {
            parser.feed_capped(b"data: 0123\n", &mut out, 8);
        }
        assert!(parser.data.is_empty(), "nothing held past the limit");
        parser.feed_capped(b"\ndata: ok\n\n", &mut out, 8);
        assert_eq!(
            out,
            vec![Event {
                kind: "message".into(),
                data: "ok".into()
            }]
        );
    }

    #[test]
    fn an_over_long_line_is_dropped_however_it_is_split() {
        let stream: &[u8] = b"data: 0123456789

data: ok

";
        let whole = {
            let (mut parser, mut out) = (EventParser::default(), Vec::new());
            parser.feed_capped(stream, &mut out, 8);
            out
        };
        for split in 1..stream.len() {
            let (mut parser, mut out) = (EventParser::default(), Vec::new());
            parser.feed_capped(&stream[..split], &mut out, 8);
            parser.feed_capped(&stream[split..], &mut out, 8);
            assert_eq!(out, whole, "split at {split}");
        }
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].data, "ok");
    }

    #[test]
    fn an_empty_event_field_dispatches_a_message() {
        let (mut parser, mut out) = (EventParser::default(), Vec::new());
        parser.feed_capped(b"event\ndata: x\n\n", &mut out, 1024);
        assert_eq!(out[0].kind, "message");
    }
}
