//! Sans-io HTTP/1.x framing for cswitch.
//!
//! This crate owns everything about the bytes of an HTTP/1.0 / 1.1 message and nothing
//! about sockets: it parses request and response heads in place (offsets into the caller's
//! buffer, so the caller keeps ownership of the bytes), decides body framing (RFC 9112 §6),
//! enforces the strict anti-smuggling policy of `docs/http.md`, scans bodies so the proxy can
//! forward them verbatim, and writes the edited head that goes to the other side
//! (hop-by-hop headers removed, X-Forwarded-* added).
//!
//! Layout: `head` (shared span/header types), `request`, `response`, `body` (length and
//! chunked scanning), `rewrite` (forwarded heads), `error` (every refusal, with its status).
//! Private: `scan` (the cheap pre-scan that finds the end of a head and enforces line
//! rules), `fields` (the field bytes' validation, framing fields), `chunked` (the
//! chunked-coding state machine), `syntax` (tokens, lists, OWS). Tests live in `tests/`.
//!
//! ALLOCATION: `RequestHead` / `ResponseHead` keep a `Vec` of header spans that is reused
//! across parses (`parse` clears it), so a keep-alive connection parses without allocating.
//! Field names and values are validated over the spans the pre-scan recorded (no second
//! parse of the head, ADR 0022).
//! The body scanner and the head writers allocate nothing (the writers grow `out` only).
//!
//! INCREMENTAL PARSING: callers re-call `parse` on the growing buffer after each read. While
//! the head is incomplete a call costs one `memchr2` pass per line of the bytes so far and
//! nothing else (the field bytes are validated once the head is whole); errors in the lines
//! already received are returned at once, and `HeadTooLarge` as soon as `max_head_bytes` bytes hold no complete head.

mod body;
mod chunked;
mod error;
mod fields;
mod head;
mod request;
mod response;
mod rewrite;
mod scan;
mod syntax;
#[cfg(test)]
mod tests;

pub use body::{BodyKind, BodyScanner, Scan};
pub use error::{BodyError, HeadError};
pub use head::{HeadLimits, HeaderSpan, Parse, Span, Version};
pub use request::RequestHead;
pub use response::ResponseHead;
pub use rewrite::{
    write_request_head, write_response_head, write_response_head_with, RequestRewrite, ResponseEdits,
    ResponseRewrite, SetCookieEdit,
};
