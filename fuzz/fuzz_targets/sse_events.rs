//! Server-sent event parsing of a legacy SSE server's stream: never panics, and the network's
//! chunk boundaries do not change the events (a character split across reads stays one).
#![no_main]

use libfuzzer_sys::fuzz_target;
use roster::fuzzing::sse_events;

fuzz_target!(|data: &[u8]| {
    let Some((&split, bytes)) = data.split_first() else {
        return;
    };
    let limit = 64 + usize::from(split);
    let whole = sse_events(&[bytes], limit);
    let step = usize::from(split % 13) + 1;
    let chunks: Vec<&[u8]> = bytes.chunks(step).collect();
    assert_eq!(
        whole,
        sse_events(&chunks, limit),
        "chunking changed the events"
    );
    // An event ends at a blank line: a line (ended by LF) that is empty once its CRs go.
    let blank_lines = bytes
        .split(|b| *b == b'\n')
        .rev()
        .skip(1)
        .filter(|line| line.iter().all(|b| *b == b'\r'))
        .count();
    assert!(whole.len() <= blank_lines + 1);
});
