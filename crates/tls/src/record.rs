//! The record layer, read incrementally: strips record headers (RFC 8446 §5.1) from the
//! bytes pushed so far until the stream's first handshake message is whole.
//!
//! It never needs the bytes twice: the caller's buffer stays the caller's, and only a
//! message that arrives split (over records or over pushes) is gathered into one `Vec`,
//! sized once from the handshake header. A message that sits whole inside one push —
//! the common case, one read holding the whole ClientHello — is parsed in place.

use crate::{HelloError, NotTls};

/// Handshake message type of a ClientHello.
pub(crate) const CLIENT_HELLO: u8 = 1;
/// Handshake message type of a ServerHello (and of a HelloRetryRequest).
pub(crate) const SERVER_HELLO: u8 = 2;
/// Length of a handshake message header: type, then a 24-bit length.
pub(crate) const HS_HEADER: usize = 4;

const HANDSHAKE: u8 = 22;
const ALERT: u8 = 21;
const RECORD_HEADER: usize = 5;
/// A plaintext record carries at most 2^14 bytes; hellos are always plaintext.
const MAX_RECORD: usize = 1 << 14;

/// Where the finished handshake message is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fed {
    NeedMore,
    /// Whole inside the bytes of this push, at `start..end`.
    InPush {
        start: usize,
        end: usize,
    },
    /// Gathered over several records or pushes: [`Assembler::gathered`].
    Gathered,
}

/// Reassembles the first handshake message of one direction of a TLS stream.
pub(crate) struct Assembler {
    /// Handshake type the first message must have.
    expected: u8,
    max_bytes: usize,
    /// Stream bytes looked at so far.
    consumed: usize,
    header: [u8; RECORD_HEADER],
    header_len: usize,
    /// Body bytes of the current record not yet seen; 0 while reading a record header.
    record_left: usize,
    /// Record headers read so far.
    records: usize,
    /// Content type of the current record: handshake, or an alert opening the stream.
    record_type: u8,
    /// The message bytes gathered so far (or an alert's two bytes).
    msg: Vec<u8>,
    /// Length of the whole message, header included, once its header is known.
    total: Option<usize>,
}

impl Assembler {
    pub(crate) fn new(expected: u8, max_bytes: usize) -> Self {
        Assembler {
            expected,
            max_bytes,
            consumed: 0,
            header: [0; RECORD_HEADER],
            header_len: 0,
            record_left: 0,
            records: 0,
            record_type: HANDSHAKE,
            msg: Vec::new(),
            total: None,
        }
    }

    pub(crate) fn consumed(&self) -> usize {
        self.consumed
    }

    pub(crate) fn gathered(&self) -> &[u8] {
        &self.msg
    }

    /// Looks at the next bytes of the stream. Call again with later bytes only while the
    /// answer is `NeedMore`.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<Fed, HelloError> {
        // Only the first `max_bytes` of the stream are ever looked at, and the limit is hit
        // only by bytes beyond them: so the verdict is the same however the stream was cut
        // into pushes.
        let room = self.max_bytes - self.consumed;
        let (within, beyond) = bytes.split_at(bytes.len().min(room));
        let fed = self.feed_within(within)?;
        if fed == Fed::NeedMore && !beyond.is_empty() {
            return Err(HelloError::TooLarge { limit: self.max_bytes });
        }
        Ok(fed)
    }

    fn feed_within(&mut self, bytes: &[u8]) -> Result<Fed, HelloError> {
        let mut pos = 0;
        while pos < bytes.len() {
            if self.record_left == 0 {
                self.header_byte(bytes[pos])?;
                pos += 1;
                continue;
            }
            let avail = (bytes.len() - pos).min(self.record_left);
            let (used, fed) = self.body(&bytes[pos..pos + avail], pos)?;
            if fed != Fed::NeedMore {
                return Ok(fed);
            }
            pos += used;
        }
        Ok(Fed::NeedMore)
    }

    fn header_byte(&mut self, b: u8) -> Result<(), HelloError> {
        self.header[self.header_len] = b;
        self.header_len += 1;
        self.consumed += 1;
        if self.records == 0 {
            // Judge the stream's first bytes as they come, so that a client speaking
            // plain HTTP one byte per read is refused within five bytes.
            sniff(&self.header[..self.header_len], self.expected)?;
        }
        if self.header_len < RECORD_HEADER {
            return Ok(());
        }
        self.header_len = 0;
        self.start_record()
    }

    fn start_record(&mut self) -> Result<(), HelloError> {
        let [typ, major, minor, hi, lo] = self.header;
        // SSL 3.0 labels its records 3.0; TLS 1.3 freezes the label at 3.1–3.3.
        if major != 3 || minor > 3 {
            return Err(HelloError::BadRecord("record version is not 3.0 to 3.3"));
        }
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        if typ != HANDSHAKE && !(typ == ALERT && self.records == 0) {
            return Err(HelloError::BadRecord("a non-handshake record interrupts the hello"));
        }
        if len == 0 {
            return Err(HelloError::BadRecord("empty record"));
        }
        if len > MAX_RECORD {
            return Err(HelloError::BadRecord("record longer than 2^14 bytes"));
        }
        if typ == ALERT && len != 2 {
            return Err(HelloError::BadRecord("alert record is not 2 bytes"));
        }
        self.records += 1;
        self.record_type = typ;
        self.record_left = len;
        Ok(())
    }

    /// Takes bytes of the current record's body (`chunk` lies inside it and starts at
    /// `offset` in the push); returns how many it used and whether the message is whole.
    fn body(&mut self, chunk: &[u8], offset: usize) -> Result<(usize, Fed), HelloError> {
        if self.msg.is_empty() && self.record_type == HANDSHAKE && chunk.len() >= HS_HEADER {
            // On a refusal, count the header as looked at, as the gathering path does.
            let total =
                self.message_length(&chunk[..HS_HEADER]).inspect_err(|_| self.consumed += HS_HEADER)?;
            if total <= chunk.len() {
                self.consumed += total;
                self.record_left -= total;
                return Ok((total, Fed::InPush { start: offset, end: offset + total }));
            }
        }
        let want = match self.total {
            Some(total) => total - self.msg.len(),
            None if self.record_type == ALERT => 2 - self.msg.len(),
            None => HS_HEADER - self.msg.len(),
        };
        let used = want.min(chunk.len());
        self.msg.extend_from_slice(&chunk[..used]);
        self.consumed += used;
        self.record_left -= used;
        if self.record_type == ALERT {
            return match self.msg[..] {
                [level, description] => Err(HelloError::Alert { level, description }),
                _ => Ok((used, Fed::NeedMore)),
            };
        }
        if self.total.is_none() && self.msg.len() == HS_HEADER {
            let total = self.message_length(&self.msg)?;
            self.msg.reserve_exact(total - HS_HEADER);
            self.total = Some(total);
        }
        let whole = self.total == Some(self.msg.len());
        Ok((used, if whole { Fed::Gathered } else { Fed::NeedMore }))
    }

    /// Checks a handshake header and returns the length of its message, header included.
    fn message_length(&self, header: &[u8]) -> Result<usize, HelloError> {
        let &[typ, a, b, c] = header else {
            return Err(HelloError::Overrun("handshake header"));
        };
        if typ != self.expected {
            return Err(HelloError::WrongHandshake { expected: self.expected, got: typ });
        }
        let total = HS_HEADER + (usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c));
        // Refuse at once what cannot fit, rather than buffering up to the limit first.
        if RECORD_HEADER + total > self.max_bytes {
            return Err(HelloError::TooLarge { limit: self.max_bytes });
        }
        Ok(total)
    }
}

/// Starts of plain-HTTP streams: request methods, and a response line for the server side.
const HTTP_STARTS: [&[u8]; 11] = [
    b"GET ", b"HEAD ", b"POST ", b"PUT ", b"DELETE", b"OPTIONS", b"CONNECT", b"PATCH", b"TRACE", b"PRI *",
    b"HTTP/",
];

/// Judges the first bytes of a stream (1 to 5 of them): `Ok` while they may still open a
/// handshake (or an alert) record.
fn sniff(first: &[u8], expected: u8) -> Result<(), HelloError> {
    match first[0] {
        HANDSHAKE | ALERT => Ok(()),
        b if b.is_ascii_uppercase() => sniff_http(first),
        // SSLv2's two-byte record header sets the top bit; its message type 1 is CLIENT-HELLO.
        b if b & 0x80 != 0 && expected == CLIENT_HELLO => match first.get(2) {
            None => Ok(()),
            Some(1) => Err(HelloError::Unsupported("SSLv2-compatible ClientHello")),
            Some(_) => Err(HelloError::NotTls(NotTls::Other(b))),
        },
        b @ (20 | 23 | 24) => Err(HelloError::NotTls(NotTls::Record(b))),
        b => Err(HelloError::NotTls(NotTls::Other(b))),
    }
}

/// Waits (at most five bytes) to tell plain HTTP from other text.
fn sniff_http(first: &[u8]) -> Result<(), HelloError> {
    for start in HTTP_STARTS {
        let n = first.len().min(start.len());
        if first[..n] == start[..n] {
            if n == start.len().min(RECORD_HEADER) {
                return Err(HelloError::NotTls(NotTls::PlainHttp));
            }
            return Ok(());
        }
    }
    Err(HelloError::NotTls(NotTls::Other(first[0])))
}

/// The incremental reader both hello readers are: records gathered by an [`Assembler`],
/// the message parsed once whole, the verdict kept.
pub(crate) struct HelloReader<H> {
    asm: Assembler,
    verdict: Option<crate::Progress<H>>,
    parse: fn(&[u8]) -> Result<H, crate::HelloError>,
}

impl<H: Clone> HelloReader<H> {
    /// A reader of handshake message `kind`, parsed by `parse` (header included).
    pub(crate) fn new(kind: u8, max_bytes: usize, parse: fn(&[u8]) -> Result<H, crate::HelloError>) -> Self {
        HelloReader { asm: Assembler::new(kind, max_bytes), verdict: None, parse }
    }

    /// See `ClientHelloReader::push`.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> crate::Progress<H> {
        if let Some(verdict) = &self.verdict {
            return verdict.clone();
        }
        let progress = match self.asm.feed(bytes) {
            Ok(Fed::NeedMore) => return crate::Progress::NeedMore,
            Ok(Fed::InPush { start, end }) => (self.parse)(&bytes[start..end]).into(),
            Ok(Fed::Gathered) => (self.parse)(self.asm.gathered()).into(),
            Err(e) => crate::Progress::Malformed(e),
        };
        self.verdict = Some(progress.clone());
        progress
    }

    /// Stream bytes looked at so far.
    pub(crate) fn consumed(&self) -> usize {
        self.asm.consumed()
    }
}
