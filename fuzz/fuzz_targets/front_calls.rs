//! A client's `tools/call` line as roster's stdio front reads it: when roster builds the call
//! from its probe of the line (instead of rmcp's parse), it is the call rmcp reads from the same
//! line with the arguments set aside, and the arguments are an object as the client wrote it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roster::fuzzing::front_call;

fuzz_target!(|data: &[u8]| {
    let Some((built, rmcp, arguments)) = front_call(data) else {
        return;
    };
    assert_eq!(Some(&built), rmcp.as_ref(), "the built call is not rmcp's reading");
    let arguments: serde_json::Value =
        serde_json::from_slice(&arguments).expect("the arguments are JSON");
    assert!(arguments.is_object(), "the arguments are an object");
});
