//! The gateway over this process's stdin/stdout: one client, one session.

use std::io;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::RequestId;
use rmcp::service::RxJsonRpcMessage;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::AsyncRead;
use tokio_util::bytes::{Bytes, BytesMut};

use super::lane::{ArgumentsText, FastLane, Probe};
use super::{Gateway, GatewayHandler};

pub(crate) mod lines;

use lines::{LineWriter, Lines};

/// Why serving over stdio stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    /// The client never completed the MCP handshake.
    #[error("the MCP client on stdio did not start a session: {0}")]
    Start(String),
    /// The session task failed.
    #[error("the stdio session ended abnormally: {0}")]
    Run(String),
}

/// Serves one client on stdin/stdout until it disconnects or the gateway shuts down.
pub async fn serve(gateway: Arc<Gateway>) -> Result<(), StdioError> {
    let shutdown = gateway.shutdown_token();
    // Pipes (as clients launch servers) are read and written on the IO reactor; anything else
    // (a terminal, a file) falls back to tokio's stdin/stdout, one blocking-pool hop per read.
    let (read, write) = rmcp::transport::stdio_pipes();
    let out = Lines::new(write);
    let pipes = StdioFront::new(read, &out);
    let transport = crate::metrics::stdio::counted(pipes, gateway.roster().metrics());
    let lane = FastLane::new(transport).with_lines(out);
    let service = GatewayHandler::new(gateway)
        .serve_with_ct(lane, shutdown.child_token())
        .await
        .map_err(|e| StdioError::Start(e.to_string()))?;
    service
        .waiting()
        .await
        .map_err(|e| StdioError::Run(e.to_string()))?;
    Ok(())
}

/// rmcp's longest stdio line; a longer one is dropped, as rmcp drops it.
const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The client's side of stdin, read as rmcp's `AsyncRwTransport` reads it — lines of at most
/// [`MAX_LINE`] bytes (a longer one is dropped), a byte-order mark and a `\r` before the
/// newline ignored, an empty line skipped, what is not JSON ignored, a request that is no
/// MCP message answered with `Invalid Request` — except for a `tools/call`, which roster reads
/// in one strict pass of its own ([`fast_call`]): its arguments set aside as the client wrote
/// them ([`super::lane::ArgumentsText`], in the request's extensions), the rest read as rmcp
/// reads it, instead of rmcp's parse of the whole message (whose untagged message type buffers
/// it before it picks a variant). What roster writes goes through rmcp's writer.
struct StdioFront<R> {
    read: R,
    /// Read, not yet a whole line; the first `scanned` bytes hold no newline.
    pending: BytesMut,
    scanned: usize,
    /// Dropping the rest of a line longer than [`MAX_LINE`].
    discarding: bool,
    eof: bool,
    write: AsyncRwTransport<rmcp::RoleServer, tokio::io::Empty, LineWriter>,
}

impl<R: AsyncRead + Unpin + Send> StdioFront<R> {
    fn new(read: R, out: &Lines) -> Self {
        StdioFront {
            read,
            pending: BytesMut::new(),
            scanned: 0,
            discarding: false,
            eof: false,
            write: AsyncRwTransport::new(tokio::io::empty(), out.writer()),
        }
    }

    /// The next whole line (its newline included), `None` at the end of stdin (a last line
    /// with no newline is no message, as for rmcp). Cancel-safe: what was read stays pending.
    async fn next_line(&mut self) -> Option<Bytes> {
        loop {
            if let Some(newline) = memchr::memchr(b'\n', &self.pending[self.scanned..]) {
                let line = self.pending.split_to(self.scanned + newline + 1).freeze();
                self.scanned = 0;
                if std::mem::take(&mut self.discarding) || line.len() > MAX_LINE {
                    tracing::error!(
                        max_line_length = MAX_LINE,
                        "Incoming message exceeded the maximum line length, discarding it"
                    );
                    continue;
                }
                return Some(line);
            }
            self.scanned = self.pending.len();
            if self.pending.len() > MAX_LINE {
                // Its rest is dropped as it comes, never held.
                self.discarding = true;
                self.pending.clear();
                self.scanned = 0;
            }
            if self.eof {
                return None;
            }
            self.pending.reserve(8 * 1024);
            match futures::future::poll_fn(|cx| {
                tokio_util::io::poll_read_buf(Pin::new(&mut self.read), cx, &mut self.pending)
            })
            .await
            {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(error) => {
                    tracing::error!("Error reading from stream: {error}");
                    return None;
                }
            }
        }
    }
}

/// `line` (one JSON-RPC message) as rmcp would read it, if it is a `tools/call` with an object
/// of arguments: built from one strict pass over the line ([`StrictCall`]), the arguments set
/// aside (see [`StdioFront`]). `None` for any other line, or one this does not read as rmcp
/// would (a member given twice, one of another type): rmcp parses those.
pub(crate) fn fast_call(line: &Bytes) -> Option<RxJsonRpcMessage<rmcp::RoleServer>> {
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ClientRequest, GetExtensions, JsonObject,
        JsonRpcMessage, RequestMetaObject,
    };
    memchr::memmem::find(line, b"\"tools/call\"")?;
    let call = serde_json::from_slice::<StrictCall<'_>>(line).ok()?;
    let StrictCall {
        jsonrpc: true,
        call: true,
        id: Some(id),
        params: Some(given),
    } = call
    else {
        return None;
    };
    let (Some(name), Some(arguments)) = (given.name, given.arguments) else {
        return None;
    };
    let text = arguments.get();
    let at = (text.as_ptr() as usize).checked_sub(line.as_ptr() as usize)?;
    if !text.starts_with('{') || at + text.len() > line.len() {
        return None;
    }
    let mut params = CallToolRequestParams::new(name);
    params.arguments = Some(JsonObject::new());
    params.input_responses = given.input_responses;
    params.request_state = given.request_state;
    let mut request = CallToolRequest::new(params);
    if let Some(meta) = given.meta {
        request.extensions.insert(RequestMetaObject::from(meta));
    }
    let mut request = ClientRequest::CallToolRequest(request);
    request
        .extensions_mut()
        .insert(ArgumentsText(line.slice(at..at + text.len())));
    Some(JsonRpcMessage::request(request, id))
}

/// A `tools/call` line read in one pass as strictly as rmcp's parse reads it — every value
/// checked ([`Checked`]: strings decoded, numbers in range), the members rmcp reads typed as it
/// types them — except the arguments, taken as written. A known member given twice, at either
/// level, refuses the line (rmcp then judges it).
struct StrictCall<'a> {
    /// `jsonrpc` is `"2.0"`.
    jsonrpc: bool,
    /// `method` is `tools/call`.
    call: bool,
    id: Option<RequestId>,
    params: Option<StrictParams<'a>>,
}

#[derive(Default)]
struct StrictParams<'a> {
    name: Option<String>,
    arguments: Option<&'a serde_json::value::RawValue>,
    meta: Option<rmcp::model::JsonObject>,
    input_responses: Option<rmcp::model::InputResponses>,
    request_state: Option<String>,
}

/// Reads member `key`'s value into `slot`; fails when the member was given before (as a typed
/// parse refuses a known field given twice; unknown members are not remembered, so a line's
/// members cost one look each).
fn once<'de, T: serde::Deserialize<'de>, A: serde::de::MapAccess<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
    key: &str,
) -> Result<(), A::Error> {
    let value = map.next_value()?;
    if slot.replace(value).is_some() {
        return Err(serde::de::Error::custom(format_args!(
            "`{key}` given twice"
        )));
    }
    Ok(())
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for StrictCall<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = StrictCall<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON-RPC request")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut jsonrpc: Option<std::borrow::Cow<'de, str>> = None;
                let mut method: Option<std::borrow::Cow<'de, str>> = None;
                let (mut id, mut params) = (None, None);
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "jsonrpc" => once(&mut map, &mut jsonrpc, &key)?,
                        "method" => once(&mut map, &mut method, &key)?,
                        "id" => once(&mut map, &mut id, &key)?,
                        "params" => once(&mut map, &mut params, &key)?,
                        _ => {
                            map.next_value::<Checked>()?;
                        }
                    }
                }
                Ok(StrictCall {
                    jsonrpc: jsonrpc.is_some_and(|v| v == "2.0"),
                    call: method.is_some_and(|m| m == "tools/call"),
                    id,
                    params,
                })
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for StrictParams<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = StrictParams<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a tools/call's params")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut params = StrictParams::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "name" => once(&mut map, &mut params.name, &key)?,
                        "arguments" => once(&mut map, &mut params.arguments, &key)?,
                        "_meta" => once(&mut map, &mut params.meta, &key)?,
                        "inputResponses" => once(&mut map, &mut params.input_responses, &key)?,
                        "requestState" => once(&mut map, &mut params.request_state, &key)?,
                        _ => {
                            map.next_value::<Checked>()?;
                        }
                    }
                }
                Ok(params)
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// Any JSON value, read as a full parse reads it (each string decoded, each number parsed) and
/// kept nowhere.
struct Checked;

impl<'de> serde::Deserialize<'de> for Checked {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Checked;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_unit<E>(self) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_none<E>(self) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Checked, A::Error> {
                while seq.next_element::<Checked>()?.is_some() {}
                Ok(Checked)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Checked, A::Error> {
                while map.next_entry::<Checked, Checked>()?.is_some() {}
                Ok(Checked)
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> rmcp::transport::Transport<rmcp::RoleServer>
    for StdioFront<R>
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<rmcp::RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.write.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<rmcp::RoleServer>> {
        use serde_json::error::Category;
        loop {
            let line = self.next_line().await?;
            let start = if line.starts_with(b"\xEF\xBB\xBF") {
                3
            } else {
                0
            };
            let mut end = line.len() - 1;
            if end > start && line[end - 1] == b'\r' {
                end -= 1;
            }
            if end <= start {
                continue;
            }
            let text = line.slice(start..end);
            if let Some(call) = fast_call(&text) {
                return Some(call);
            }
            let error = match serde_json::from_slice(&text) {
                Ok(message) => return Some(message),
                Err(error) => error,
            };
            match error.classify() {
                // Not JSON: there is no id to answer, and an answer could start an echo storm.
                Category::Syntax | Category::Eof => {
                    tracing::debug!("Ignoring unparsable incoming message: {error}");
                }
                // JSON that is no message: a request is told so, a notification dropped.
                Category::Data | Category::Io => {
                    tracing::debug!("Protocol error on incoming message: {error}");
                    let probe = serde_json::from_slice::<Probe<'_>>(&text).unwrap_or_default();
                    if probe.id.is_some() {
                        let refusal = rmcp::service::TxJsonRpcMessage::<rmcp::RoleServer>::error(
                            rmcp::ErrorData::invalid_request("Invalid request", None),
                            None,
                        );
                        tokio::spawn(self.write.send(refusal));
                    }
                }
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.write.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use rmcp::model::GetExtensions;
    use rmcp::transport::Transport;
    use serde_json::{Value, json};

    /// What [`StdioFront`] reads from `input` when each read of stdin takes `chunk` bytes: each
    /// message as JSON, with the arguments set aside from it; and what it wrote back.
    async fn received(input: &str, chunk: usize) -> (Vec<(Value, Option<String>)>, String) {
        let (mut write, read) = tokio::io::duplex(chunk);
        let (out, mut written) = tokio::io::duplex(64 * 1024);
        let input = input.to_owned();
        let writing = tokio::spawn(async move {
            write.write_all(input.as_bytes()).await.expect("written");
        });
        let mut front = StdioFront::new(read, &Lines::new(out));
        let mut got = Vec::new();
        while let Some(message) = front.receive().await {
            let text = match &message {
                rmcp::model::JsonRpcMessage::Request(request) => request
                    .request
                    .extensions()
                    .get::<ArgumentsText>()
                    .map(|t| String::from_utf8(t.0.to_vec()).expect("UTF-8")),
                _ => None,
            };
            got.push((serde_json::to_value(&message).expect("JSON"), text));
        }
        writing.await.expect("joined");
        drop(front);
        tokio::task::yield_now().await;
        let mut back = vec![0; 64 * 1024];
        let n = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            written.read(&mut back),
        )
        .await
        .unwrap_or(Ok(0))
        .expect("read");
        (got, String::from_utf8_lossy(&back[..n]).into_owned())
    }

    /// rmcp's own reading of `line`, as JSON.
    fn rmcp_reads(line: &str) -> Value {
        let message: RxJsonRpcMessage<rmcp::RoleServer> =
            serde_json::from_str(line).expect("rmcp reads it");
        serde_json::to_value(&message).expect("JSON")
    }

    #[test]
    fn a_call_built_from_its_probe_is_the_call_rmcp_reads_with_its_arguments_set_aside() {
        let arguments = r#"{"s":"}\n{\"","n":1.50,"big":123456789012345678901234567890}"#;
        for (id, rest) in [
            ("1", r#""name":"t","arguments":ARGS"#),
            (
                r#""c1""#,
                r#""name":"t\u00e9","arguments":ARGS,"_meta":{"progressToken":"p","x":[1]}"#,
            ),
            (
                "2",
                r#""_meta":{"progressToken":7},"arguments":ARGS,"name":"t""#,
            ),
            // A member rmcp does not read, given twice: rmcp ignores it, and so does this.
            ("5", r#""y":1,"name":"t","y":[2],"arguments":ARGS"#),
            (
                "3",
                r#""name":"t","arguments":ARGS,"requestState":"s","inputResponses":{"k":{"action":"accept","content":{"a":1}}}"#,
            ),
        ] {
            let params = rest.replace("ARGS", arguments);
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{{params}}}}}"#
            );
            let call = fast_call(&Bytes::from(line.clone())).expect("a call from the probe");
            let rmcp::model::JsonRpcMessage::Request(request) = &call else {
                panic!("a request: {line}");
            };
            let text = request
                .request
                .extensions()
                .get::<ArgumentsText>()
                .expect("set aside");
            assert_eq!(&text.0[..], arguments.as_bytes(), "{line}");
            let set_aside = line.replace(arguments, "{}");
            assert_eq!(
                serde_json::to_value(&call).expect("JSON"),
                rmcp_reads(&set_aside),
                "{line}"
            );
        }
        // What the probe does not build, rmcp parses: no arguments, arguments that are no
        // object, no name, no id, another `jsonrpc`, a name that is no string.
        for line in [
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t","arguments":{}}}"#,
            r#"{"jsonrpc":"1.0","id":4,"method":"tools/call","params":{"name":"t","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":1,"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"arguments":{"x":1}}}"#,
            // What rmcp's parse refuses outside the arguments: a number out of range, a lone
            // surrogate, a member given twice.
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":{},"x":1E999}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":{}},"x":"\ud800"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","name":"u","arguments":{}}}"#,
        ] {
            assert!(fast_call(&Bytes::from(line)).is_none(), "{line}");
        }
        // Nor what is not UTF-8 outside the arguments.
        let mut line = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":{}},"x":"?"}"#.to_vec();
        let at = line.len() - 3;
        line[at] = 0xff;
        assert!(fast_call(&Bytes::from(line)).is_none());
    }

    #[tokio::test]
    async fn lines_are_read_as_rmcp_reads_them_however_stdin_is_cut() {
        let call = r#"{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"t","arguments":{"s":"}\n{\"","n":1.50},"_meta":{}}}"#;
        let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        let note =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1"}}"#;
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"t","arguments":{{"s":"{}"}}}}}}"#,
            "x".repeat(MAX_LINE)
        );
        // A BOM, CRLF, an empty line, what is not JSON, JSON that is no message (a request:
        // answered; a notification: dropped), a line too long (dropped; with reads big enough
        // to pass it quickly), and a last line with no newline (no message).
        for chunk in [7, 4096, 64 * 1024] {
            let long = if chunk < 4096 { "" } else { long.as_str() };
            let input = format!(
                "\u{feff}{call}\r\n\n{list}\nnot json\n{{\"id\":5,\"x\":1}}\n{{\"x\":1}}\n{long}\n{note}\n{call}"
            );
            let (got, written) = received(&input, chunk).await;
            let ids: Vec<_> = got.iter().map(|(m, _)| m.get("id").cloned()).collect();
            assert_eq!(
                ids,
                [Some(json!("c1")), Some(json!(2)), None],
                "reads of {chunk} bytes"
            );
            assert_eq!(got[0].1.as_deref(), Some(r#"{"s":"}\n{\"","n":1.50}"#));
            assert_eq!(got[0].0["params"]["arguments"], json!({}));
            assert_eq!(got[2].0["method"], json!("notifications/cancelled"));
            let refusals: Vec<Value> = written
                .lines()
                .map(|l| serde_json::from_str(l).expect("JSON"))
                .collect();
            assert_eq!(refusals.len(), 1, "{written}");
            assert_eq!(refusals[0]["error"]["code"], json!(-32600), "{written}");
        }
    }
}
