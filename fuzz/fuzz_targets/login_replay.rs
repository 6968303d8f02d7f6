//! The POP3 and IMAP replays: see `bodies::login_replay`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::login_replay(data));
