//! JSON bodies under JSON rules: see `bodies::json_body`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::json_body(data));
