//! Entry points for the `cargo fuzz` targets under `fuzz/`: the parsers that read what a server
//! sends, reached through the same code the connections use. Not a stable API.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::Decoder;

use crate::servers::sse::{Event, EventParser};
use crate::servers::stdio::JsonLines;
use crate::servers::wire::Received;

/// Decodes `chunks` as a stdio server's stdout, one read per chunk, with lines of at most
/// `limit` bytes; then the end of the stream. Each item is a message, or `None` for a line that
/// is not JSON-RPC.
pub fn stdio_messages(chunks: &[&[u8]], limit: u64) -> Vec<Option<Value>> {
    let mut decoder = JsonLines::new(Arc::from("fuzz"), limit);
    let mut buffer = BytesMut::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buffer.extend_from_slice(chunk);
        while let Ok(Some(item)) = decoder.decode(&mut buffer) {
            out.push(item.map(Received::into_message));
        }
    }
    // As `FramedRead` does at the end of a stream: until the decoder has nothing more.
    while let Ok(Some(item)) = decoder.decode_eof(&mut buffer) {
        out.push(item.map(Received::into_message));
    }
    out
}

/// Parses `chunks` as one SSE stream, one network read per chunk, with lines of at most `limit`
/// bytes; returns each complete event as `(event, data)`.
pub fn sse_events(chunks: &[&[u8]], limit: usize) -> Vec<(String, String)> {
    let mut parser = EventParser::default();
    let mut events: Vec<Event> = Vec::new();
    for chunk in chunks {
        parser.feed_capped(chunk, &mut events, limit);
    }
    events.into_iter().map(|e| (e.kind, e.data)).collect()
}

/// Reads `line` as roster's stdio front does. When it builds a `tools/call` from its probe
/// (instead of rmcp's parse), returns that call, rmcp's own reading of the same line with the
/// arguments set aside (`{}` in their place; `None` if rmcp refuses it), and the arguments.
pub fn front_call(line: &[u8]) -> Option<(Value, Option<Value>, Vec<u8>)> {
    use rmcp::model::{GetExtensions, JsonRpcMessage};
    let line = tokio_util::bytes::Bytes::copy_from_slice(line);
    let call = crate::gateway::stdio::fast_call(&line)?;
    let JsonRpcMessage::Request(request) = &call else {
        return None;
    };
    let text = request
        .request
        .extensions()
        .get::<crate::gateway::lane::ArgumentsText>()?
        .0
        .clone();
    let at = (text.as_ptr() as usize) - (line.as_ptr() as usize);
    let mut set_aside = line[..at].to_vec();
    set_aside.extend_from_slice(b"{}");
    set_aside.extend_from_slice(&line[at + text.len()..]);
    let rmcp =
        serde_json::from_slice::<rmcp::service::RxJsonRpcMessage<rmcp::RoleServer>>(&set_aside)
            .ok()
            .and_then(|m| serde_json::to_value(m).ok());
    Some((serde_json::to_value(&call).ok()?, rmcp, text.to_vec()))
}
