//! TLS ClientHellos: see `bodies::tls_client_hello`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::tls_client_hello(data));
