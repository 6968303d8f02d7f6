//! Agent reports: see `bodies::agent_report`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::agent_report(data));
