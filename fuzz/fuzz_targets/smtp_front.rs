//! The SMTP front: see `bodies::smtp_front`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::smtp_front(data));
