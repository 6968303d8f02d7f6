//! The pre-scan of a head: finds its end and enforces the line-level rules (which a lenient
//! parser would let through), before anything else looks at it.
//!
//! Callers re-call `parse` after every read on a growing buffer, so this is the part that
//! runs on incomplete heads: one `memchr2` per line, and it refuses as soon
//! as the bytes seen so far are invalid (bare CR/LF, obs-fold, space before colon, too many
//! fields) or can no longer fit the limit, so a client can't hold a connection open with a
//! head that never ends (slowloris) or that is already known to be bad. The same pass records
//! where each field's name, value and line are (the heads' `headers`), so no later pass
//! splits the lines again.

use crate::error::HeadError;
use crate::head::{span, HeadLimits, HeaderSpan};
use crate::syntax::{is_ws, trim_ows_range};

/// A complete head found at the start of a buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    /// Offset of the start line (after empty lines ignored before a request line).
    pub start: usize,
    /// Offset of the CR ending the start line.
    pub start_line_end: usize,
    /// Length of the head including the final empty line.
    pub head_len: usize,
}

/// Looks for a complete, line-valid head at the start of `buf`.
///
/// `Ok(None)`: no complete head yet and it may still fit `max_head_bytes`.
/// `skip_empty_lines`: ignore CRLFs before the start line (requests only, RFC 9112 §2.2:
/// "a server ... SHOULD ignore at least one empty line (CRLF) received prior to the
/// request-line"); they count towards the limit.
/// `spans` gets the field lines seen (cleared first; complete only when a head is found).
pub(crate) fn find_head(
    buf: &[u8],
    limits: &HeadLimits,
    skip_empty_lines: bool,
    spans: &mut Vec<HeaderSpan>,
) -> Result<Option<Found>, HeadError> {
    spans.clear();
    // Spans are u32 offsets: a larger limit is clamped rather than overflowing them.
    let max = limits.max_head_bytes.min(u32::MAX as usize);
    let window = buf.get(..max).unwrap_or(buf);
    let mut pos = 0;
    if skip_empty_lines {
        while window.get(pos..pos + 2) == Some(b"\r\n") {
            pos += 2;
        }
    }
    let start = pos;
    let mut start_line_end = None;
    let mut fields = 0usize;
    loop {
        let Some(cr) = next_line_end(window, pos)? else {
            if start_line_end.is_none()
                && skip_empty_lines
                && !method_so_far(window.get(start..).unwrap_or_default())
            {
                // Not the start of a request line (a NUL after a complete message, binary
                // noise): no more bytes can make it one, so refuse now rather than wait.
                return Err(HeadError::BadStartLine);
            }
            return incomplete(buf, max);
        };
        match start_line_end {
            // An empty start line is only possible for responses (requests skipped them).
            None if cr == pos => return Err(HeadError::BadStartLine),
            None => start_line_end = Some(cr),
            Some(start_line_end) if cr == pos => {
                let head_len = cr + 2;
                return Ok(Some(Found { start, start_line_end, head_len }));
            }
            Some(_) => {
                let line = window.get(pos..cr).unwrap_or_default();
                let colon = check_field_line(line)?;
                let (vs, ve) = trim_ows_range(line.get(colon + 1..).unwrap_or_default());
                let value = pos + colon + 1;
                spans.push(HeaderSpan {
                    name: span(pos, pos + colon),
                    value: span(value + vs, value + ve),
                    line: span(pos, cr),
                });
                fields += 1;
                if fields > limits.max_headers {
                    return Err(HeadError::TooManyHeaders);
                }
            }
        }
        pos = cr + 2;
    }
}

/// Whether the bytes of an unfinished request line can still start one: a method token so
/// far, or a token then a space.
fn method_so_far(line: &[u8]) -> bool {
    let method = line.split(|&b| matches!(b, b' ' | b'\r' | b'\n')).next().unwrap_or_default();
    method.iter().all(|&b| crate::syntax::is_tchar(b))
}

/// No complete head in the window: wait for more bytes, unless the window is already the
/// whole limit, in which case the head (when it ends) will be longer than the limit.
fn incomplete(buf: &[u8], max: usize) -> Result<Option<Found>, HeadError> {
    if buf.len() >= max {
        Err(HeadError::HeadTooLarge)
    } else {
        Ok(None)
    }
}

/// Offset of the CR of the next CRLF at or after `pos`, or `None` if the window ends first.
/// Lines end in CRLF only: a CR not followed by LF, or an LF not preceded by CR, is refused
/// (RFC 9112 §2.2 allows either leniency; we take neither, as a lenient parser disagreeing
/// with a strict one about where a line ends is how requests get smuggled).
fn next_line_end(window: &[u8], pos: usize) -> Result<Option<usize>, HeadError> {
    let rest = window.get(pos..).unwrap_or_default();
    let Some(i) = memchr::memchr2(b'\r', b'\n', rest) else {
        return Ok(None);
    };
    let at = pos + i;
    match (window.get(at), window.get(at + 1)) {
        (Some(b'\r'), Some(b'\n')) => Ok(Some(at)),
        (Some(b'\r'), None) => Ok(None),
        _ => Err(HeadError::BareLineEnd),
    }
}

/// Line-level checks on one field line (without its CRLF); returns the colon's offset. The
/// bytes of name and value are checked once the head is whole (`fields::validate`).
fn check_field_line(line: &[u8]) -> Result<usize, HeadError> {
    // RFC 9112 §5.2: obs-fold in a request must be refused (or replaced, which we don't do);
    // §2.2: whitespace between the start line and the first field, likewise.
    if line.first().is_some_and(|&b| is_ws(b)) {
        return Err(HeadError::ObsFold);
    }
    let Some(colon) = memchr::memchr(b':', line) else {
        return Err(HeadError::BadHeader);
    };
    // RFC 9112 §5.1: "No whitespace is allowed between the field name and colon"; a server
    // MUST reject such a request with 400.
    match colon.checked_sub(1).and_then(|i| line.get(i)) {
        None => Err(HeadError::BadHeader),
        Some(&b) if is_ws(b) => Err(HeadError::SpaceBeforeColon),
        Some(_) => Ok(colon),
    }
}
