//! The request decoder on arbitrary input: it must never panic, and a request
//! it accepts must survive a round trip through its stored form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seatq::Request;

fuzz_target!(|data: &[u8]| {
    // The first line is the kind, the rest the payload.
    let text = String::from_utf8_lossy(data);
    let (kind, payload) = text.split_once('\n').unwrap_or((&text, ""));
    let Ok(payload) = serde_json::from_str::<serde_json::Value>(payload) else { return };
    if let Ok(request) = Request::decode(kind, &payload) {
        let again = Request::decode(request.kind(), &request.payload()).expect("a decoded request re-decodes");
        assert_eq!(again, request);
    }
});
