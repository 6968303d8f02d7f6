//! Body framing: finds where a body ends in a byte stream so it can be forwarded verbatim,
//! validating chunked syntax on the way (RFC 9112 §6, §7). Incremental: input may be cut at
//! any byte, including inside a chunk-size line or a trailer.

use crate::error::BodyError;

/// How a message body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    None,
    /// Exactly this many bytes (> 0).
    Length(u64),
    /// Chunked transfer coding (chunks, last chunk, trailers, final CRLF).
    Chunked,
    /// Everything until the server closes (responses only).
    UntilClose,
}

/// Progress of one `scan` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scan {
    /// How many bytes of the input belong to the body (forward exactly these).
    pub consumed: usize,
    /// The body ended within those bytes (for `UntilClose`: never; the caller sees EOF).
    pub done: bool,
}

/// Incremental body scanner. One per message; cheap to create.
#[derive(Clone, Debug)]
pub struct BodyScanner {
    kind: BodyKind,
    max_body: u64,
    seen_payload: u64,
}

impl BodyScanner {
    /// A scanner for a body of `kind`; payload (de-chunked) bytes beyond `max_body`
    /// give `BodyError::TooLarge` (`u64::MAX` = unlimited).
    pub fn new(kind: BodyKind, max_body: u64) -> Self {
        BodyScanner { kind, max_body, seen_payload: 0 }
    }

    /// Scans `input` (the bytes after what earlier calls consumed). Never consumes bytes of
    /// the next message. Returns `done` once the whole body (for chunked: through the final
    /// CRLF after trailers) has been consumed. Calling after `done` consumes nothing.
    pub fn scan(&mut self, input: &[u8]) -> Result<Scan, BodyError> {
        self.scan_data(input, |_| {})
    }

    /// As `scan`, and calls `on_data` with each run of payload bytes (chunk data without
    /// the chunked framing), in order. Used to de-chunk for HTTP/1.0 clients and to buffer
    /// bodies for rules.
    pub fn scan_data(
        &mut self,
        input: &[u8],
        on_data: impl FnMut(&[u8]),
    ) -> Result<Scan, BodyError> {
        let _ = (input, on_data, self.kind, self.max_body, self.seen_payload);
        todo!("http1 helper")
    }

    /// Payload bytes seen so far.
    pub fn payload_len(&self) -> u64 {
        self.seen_payload
    }
}
