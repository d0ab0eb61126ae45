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
