//! TLS ServerHellos: see `bodies::tls_server_hello`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::tls_server_hello(data));
