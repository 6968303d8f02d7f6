//! The SMTP replay: see `bodies::smtp_replay`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::smtp_replay(data));
