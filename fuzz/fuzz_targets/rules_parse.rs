//! Rule sources: see `bodies::rules_parse`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::rules_parse(data));
