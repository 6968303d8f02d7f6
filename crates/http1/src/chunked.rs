//! The chunked transfer coding (RFC 9112 §7.1) as a byte-at-a-time state machine, so the
//! input may be cut anywhere (inside a size line, an extension, a CRLF, a trailer) and the
//! scanner keeps no bytes: only a state, a size accumulator and two counters.
//!
//! ```text
//! chunked-body = *chunk last-chunk trailer-section CRLF
//! chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! chunk-size   = 1*HEXDIG
//! last-chunk   = 1*("0") [ chunk-ext ] CRLF
//! chunk-ext    = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//! chunk-ext-val = token / quoted-string
//! trailer-section = *( field-line CRLF )
//! ```

use crate::error::BodyError;
use crate::syntax::{is_tchar, is_text, is_ws};

/// Longest chunk-size line (size, extensions, CRLF) accepted. RFC 9112 §7.1.1 lets a
/// recipient limit extensions; 4 KiB is far beyond any real use.
const MAX_SIZE_LINE: u32 = 4096;

/// Largest trailer section (trailer fields and the final CRLF). RFC 9112 §7.1.2 leaves the
/// limit to us; 16 KiB matches the default head limit.
const MAX_TRAILER: u32 = 16 * 1024;

/// Where the decoder is in the chunked grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading chunk-size hex digits: value so far and digit count.
    Size { value: u64, digits: u8 },
    /// Inside chunk-ext (or right after chunk-size), the chunk's size known.
    Ext { size: u64, at: Ext },
    /// CR of the size line seen; LF must follow.
    SizeLf { size: u64 },
    /// Chunk data still to come.
    Data { remaining: u64 },
    /// Chunk data done; CR must follow.
    DataCr,
    /// CR after chunk data seen; LF must follow.
    DataLf,
    /// Start of a trailer field line, or the final CRLF.
    TrailerStart,
    /// Trailer field name.
    TrailerName,
    /// Trailer field value, up to its CR.
    TrailerValue,
    /// CR after a trailer field seen; LF must follow.
    TrailerLf,
    /// CR of the final empty line seen; LF must follow.
    FinalLf,
    /// The body is complete.
    Done,
    /// A previous call failed; every later call fails the same way.
    Failed(BodyError),
}

/// Position inside `chunk-ext`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ext {
    /// After chunk-size, an ext-name or an ext-val: `;`, BWS or CR may follow.
    End,
    /// BWS seen: only more BWS or `;` (or `=` when it follows an ext-name) may follow.
    Bws { after_name: bool },
    /// After `;`: BWS or the first byte of ext-name.
    BeforeName,
    /// Inside ext-name.
    Name,
    /// After `=`: BWS or the first byte of ext-val.
    BeforeValue,
    /// Inside a token ext-val.
    Token,
    /// Inside a quoted-string ext-val.
    Quoted,
    /// After a backslash in a quoted-string.
    Escape,
}

/// Incremental chunked decoder.
#[derive(Clone, Debug)]
pub(crate) struct Chunked {
    state: State,
    /// Bytes of the current size line, or of the trailer section so far.
    line_len: u32,
}

/// Payload accounting shared with the scanner: bytes seen so far and the allowed maximum.
pub(crate) struct Budget<'a> {
    pub seen: &'a mut u64,
    pub max: u64,
}

impl Chunked {
    pub(crate) fn new() -> Self {
        Chunked { state: State::Size { value: 0, digits: 0 }, line_len: 0 }
    }

    /// Consumes body bytes from `input`; returns how many and whether the body ended.
    /// Never consumes a byte after the final CRLF.
    pub(crate) fn scan(
        &mut self,
        input: &[u8],
        budget: Budget<'_>,
        on_data: &mut impl FnMut(&[u8]),
        on_trailer: &mut impl FnMut(u8),
    ) -> Result<(usize, bool), BodyError> {
        let mut pos = 0;
        loop {
            match self.state {
                State::Done => return Ok((pos, true)),
                State::Failed(e) => return Err(e),
                State::Data { remaining } => {
                    let rest = input.get(pos..).unwrap_or_default();
                    if rest.is_empty() {
                        return Ok((pos, false));
                    }
                    let n = usize::try_from(remaining).unwrap_or(usize::MAX).min(rest.len());
                    let (data, _) = rest.split_at(n);
                    on_data(data);
                    *budget.seen += n as u64;
                    pos += n;
                    let remaining = remaining - n as u64;
                    self.state = if remaining == 0 { State::DataCr } else { State::Data { remaining } };
                }
                _ => {
                    let Some(&b) = input.get(pos) else {
                        return Ok((pos, false));
                    };
                    pos += 1;
                    if let Err(e) = self.step(b, &budget, on_trailer) {
                        self.state = State::Failed(e);
                        return Err(e);
                    }
                }
            }
        }
    }

    /// One framing byte (anything but chunk data).
    /// Bytes of the trailer section (through the final CRLF) also go to `on_trailer`.
    fn step(&mut self, b: u8, budget: &Budget<'_>, on_trailer: &mut impl FnMut(u8)) -> Result<(), BodyError> {
        self.state = match self.state {
            State::Size { value, digits } => {
                self.count(MAX_SIZE_LINE, BodyError::BadChunkExtension)?;
                size_byte(value, digits, b)?
            }
            State::Ext { size, at } => {
                self.count(MAX_SIZE_LINE, BodyError::BadChunkExtension)?;
                match ext_byte(at, b)? {
                    Some(at) => State::Ext { size, at },
                    None => State::SizeLf { size },
                }
            }
            State::SizeLf { size } => {
                self.count(MAX_SIZE_LINE, BodyError::BadChunkExtension)?;
                self.end_size_line(b, size, budget)?
            }
            State::DataCr if b == b'\r' => State::DataLf,
            State::DataLf if b == b'\n' => {
                self.line_len = 0;
                State::Size { value: 0, digits: 0 }
            }
            // RFC 9112 §7.1: chunk-data is followed by CRLF, exactly.
            State::DataCr | State::DataLf => return Err(BodyError::BadChunkEnd),
            State::TrailerStart
            | State::TrailerName
            | State::TrailerValue
            | State::TrailerLf
            | State::FinalLf => {
                self.count(MAX_TRAILER, BodyError::BadTrailer)?;
                on_trailer(b);
                trailer_byte(self.state, b)?
            }
            // `scan` handles these itself and never passes them a byte.
            s @ (State::Data { .. } | State::Done | State::Failed(_)) => s,
        };
        Ok(())
    }

    /// Counts one byte of the current size line or trailer section against `limit`.
    fn count(&mut self, limit: u32, err: BodyError) -> Result<(), BodyError> {
        self.line_len += 1;
        if self.line_len > limit {
            return Err(err);
        }
        Ok(())
    }

    /// The LF ending a size line: start the chunk's data, or the trailer after last-chunk.
    fn end_size_line(&mut self, b: u8, size: u64, budget: &Budget<'_>) -> Result<State, BodyError> {
        if b != b'\n' {
            return Err(BodyError::BadChunkSize);
        }
        if size == 0 {
            self.line_len = 0;
            return Ok(State::TrailerStart);
        }
        // Refuse before any of the chunk is forwarded, once its size says it won't fit.
        match budget.seen.checked_add(size) {
            Some(total) if total <= budget.max => Ok(State::Data { remaining: size }),
            _ => Err(BodyError::TooLarge),
        }
    }
}

/// A byte of `chunk-size = 1*HEXDIG` or what ends it. More than 16 digits could overflow
/// u64 (leading zeros included: the count is what is bounded, so no overflow check is
/// needed).
fn size_byte(value: u64, digits: u8, b: u8) -> Result<State, BodyError> {
    if let Some(d) = hex_value(b) {
        if digits >= 16 {
            return Err(BodyError::BadChunkSize);
        }
        return Ok(State::Size { value: value << 4 | d, digits: digits + 1 });
    }
    if digits == 0 {
        return Err(BodyError::BadChunkSize);
    }
    match b {
        b';' => Ok(State::Ext { size: value, at: Ext::BeforeName }),
        b' ' | b'\t' => Ok(State::Ext { size: value, at: Ext::Bws { after_name: false } }),
        b'\r' => Ok(State::SizeLf { size: value }),
        _ => Err(BodyError::BadChunkSize),
    }
}

fn hex_value(b: u8) -> Option<u64> {
    let d = match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        b'A'..=b'F' => b - b'A' + 10,
        _ => return None,
    };
    Some(u64::from(d))
}

/// A byte of `chunk-ext` (RFC 9112 §7.1.1); `Ok(None)` when it is the CR ending the line.
fn ext_byte(at: Ext, b: u8) -> Result<Option<Ext>, BodyError> {
    let bad = if b == b'\n' { BodyError::BadChunkSize } else { BodyError::BadChunkExtension };
    let next = match (at, b) {
        (Ext::End | Ext::Name | Ext::Token, b'\r') => return Ok(None),
        (Ext::End | Ext::Name | Ext::Token | Ext::Bws { .. }, b';') => Ext::BeforeName,
        (Ext::End | Ext::Token, b) if is_ws(b) => Ext::Bws { after_name: false },
        (Ext::Name, b) if is_ws(b) => Ext::Bws { after_name: true },
        (Ext::Bws { .. } | Ext::BeforeName | Ext::BeforeValue, b) if is_ws(b) => at,
        (Ext::BeforeName | Ext::Name, b) if is_tchar(b) => Ext::Name,
        (Ext::Name | Ext::Bws { after_name: true }, b'=') => Ext::BeforeValue,
        (Ext::BeforeValue, b'"') => Ext::Quoted,
        (Ext::BeforeValue | Ext::Token, b) if is_tchar(b) => Ext::Token,
        (Ext::Quoted, b'"') => Ext::End,
        (Ext::Quoted, b'\\') => Ext::Escape,
        // qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text (RFC 9110 §5.6.4).
        (Ext::Quoted, b) if is_text(b) => Ext::Quoted,
        // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text ).
        (Ext::Escape, b) if is_text(b) => Ext::Quoted,
        _ => return Err(bad),
    };
    Ok(Some(next))
}

/// A byte of the trailer section (RFC 9112 §7.1.2): field lines `name ":" value CRLF`
/// with token names and no obs-fold, then the final CRLF.
fn trailer_byte(state: State, b: u8) -> Result<State, BodyError> {
    let next = match (state, b) {
        (State::TrailerStart, b'\r') => State::FinalLf,
        (State::TrailerStart | State::TrailerName, b) if is_tchar(b) => State::TrailerName,
        (State::TrailerName, b':') => State::TrailerValue,
        (State::TrailerValue, b'\r') => State::TrailerLf,
        (State::TrailerValue, b) if is_text(b) => State::TrailerValue,
        (State::TrailerLf, b'\n') => State::TrailerStart,
        (State::FinalLf, b'\n') => State::Done,
        _ => return Err(BodyError::BadTrailer),
    };
    Ok(next)
}
