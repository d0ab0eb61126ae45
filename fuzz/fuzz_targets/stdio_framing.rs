//! The JSON-RPC line framing of a stdio server's stdout: whatever the bytes and however the
//! reads split them, decoding never panics, every message is a JSON object or array, and the
//! split does not change what is decoded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roster::fuzzing::stdio_messages;

fuzz_target!(|data: &[u8]| {
    let Some((&split, bytes)) = data.split_first() else {
        return;
    };
    // A small line limit so over-long lines are exercised too.
    let limit = 64 + u64::from(split);
    let whole = stdio_messages(&[bytes], limit);
    let step = usize::from(split % 17) + 1;
    let chunks: Vec<&[u8]> = bytes.chunks(step).collect();
    let chunked = stdio_messages(&chunks, limit);
    assert_eq!(whole, chunked, "the read boundaries changed the messages");
    for message in whole.iter().flatten() {
        assert!(message.is_object() || message.is_array(), "{message}");
    }
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
    assert!(whole.len() <= newlines + 1);
});
