//! Body framing: finds where a body ends in a byte stream so it can be forwarded verbatim,
//! validating chunked syntax on the way (RFC 9112 §6, §7). Incremental: input may be cut at
//! any byte, including inside a chunk-size line or a trailer.

use crate::chunked::{Budget, Chunked};
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
    /// Chunked framing state (unused for other kinds).
    chunked: Chunked,
}

impl BodyScanner {
    /// A scanner for a body of `kind`; payload (de-chunked) bytes beyond `max_body`
    /// give `BodyError::TooLarge` (`u64::MAX` = unlimited).
    pub fn new(kind: BodyKind, max_body: u64) -> Self {
        BodyScanner { kind, max_body, seen_payload: 0, chunked: Chunked::new() }
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
    pub fn scan_data(&mut self, input: &[u8], on_data: impl FnMut(&[u8])) -> Result<Scan, BodyError> {
        self.scan_parts(input, on_data, |_| {})
    }

    /// As `scan_data`, and calls `on_trailer` with each byte of a chunked body's trailer
    /// section (its field lines and the final CRLF), for a translation that carries
    /// trailers on (HTTP/2, gRPC's `grpc-status`).
    pub fn scan_parts(
        &mut self,
        input: &[u8],
        on_data: impl FnMut(&[u8]),
        mut on_trailer: impl FnMut(u8),
    ) -> Result<Scan, BodyError> {
        match self.kind {
            BodyKind::None => Ok(Scan { consumed: 0, done: true }),
            BodyKind::Length(n) => self.scan_length(n, input, on_data),
            BodyKind::Chunked => {
                let budget = Budget { seen: &mut self.seen_payload, max: self.max_body };
                let mut on_data = on_data;
                let (consumed, done) = self.chunked.scan(input, budget, &mut on_data, &mut on_trailer)?;
                Ok(Scan { consumed, done })
            }
            BodyKind::UntilClose => self.scan_until_close(input, on_data),
        }
    }

    /// RFC 9112 §6.3 rule 6: exactly `n` bytes. A length above `max_body` is refused
    /// before any byte is forwarded.
    fn scan_length(
        &mut self,
        n: u64,
        input: &[u8],
        mut on_data: impl FnMut(&[u8]),
    ) -> Result<Scan, BodyError> {
        if n > self.max_body {
            return Err(BodyError::TooLarge);
        }
        let remaining = n.saturating_sub(self.seen_payload);
        let take = usize::try_from(remaining).unwrap_or(usize::MAX).min(input.len());
        let (data, _) = input.split_at(take);
        if !data.is_empty() {
            on_data(data);
        }
        self.seen_payload += take as u64;
        Ok(Scan { consumed: take, done: self.seen_payload >= n })
    }

    /// RFC 9112 §6.3 rule 8: everything until the server closes; `done` never comes.
    /// The payload up to `max_body` is handed over before `TooLarge`, so the outcome does
    /// not depend on how reads cut the stream.
    fn scan_until_close(&mut self, input: &[u8], mut on_data: impl FnMut(&[u8])) -> Result<Scan, BodyError> {
        let room = self.max_body.saturating_sub(self.seen_payload);
        let take = usize::try_from(room).unwrap_or(usize::MAX).min(input.len());
        let (data, excess) = input.split_at(take);
        if !data.is_empty() {
            on_data(data);
        }
        self.seen_payload += take as u64;
        if !excess.is_empty() {
            return Err(BodyError::TooLarge);
        }
        Ok(Scan { consumed: take, done: false })
    }

    /// Payload bytes seen so far.
    pub fn payload_len(&self) -> u64 {
        self.seen_payload
    }

    /// Bytes of a `Content-Length` body still to come (`None` for other framings, whose
    /// length is not known ahead).
    pub fn remaining(&self) -> Option<u64> {
        match self.kind {
            BodyKind::Length(n) => Some(n.saturating_sub(self.seen_payload)),
            _ => None,
        }
    }
}
