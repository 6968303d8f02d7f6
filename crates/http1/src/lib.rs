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
//!
//! ALLOCATION: `RequestHead` / `ResponseHead` keep a `Vec` of header spans that is reused
//! across parses (`parse` clears it), so a keep-alive connection parses without allocating.

mod body;
mod error;
mod head;
mod request;
mod response;
mod rewrite;

pub use body::{BodyKind, BodyScanner, Scan};
pub use error::{BodyError, HeadError};
pub use head::{HeaderSpan, HeadLimits, Parse, Span, Version};
pub use request::RequestHead;
pub use response::ResponseHead;
pub use rewrite::{write_request_head, write_response_head, RequestRewrite, ResponseRewrite};
