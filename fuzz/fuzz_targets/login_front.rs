//! The POP3 and IMAP fronts: see `bodies::login_front`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::login_front(data));
