//! Incremental line splitting with a length limit, shared by the three protocols.
//!
//! Bytes arrive in any split; a line is returned only once its LF is here, so feeding a
//! transcript byte by byte gives the same lines as feeding it whole. A line longer than the
//! limit is reported once (as soon as that is certain) and its bytes are dropped up to its
//! LF, so an endless line costs no memory. Bare LF ends a line like CRLF does: the commands
//! before the switch point are not forwarded, so leniency here smuggles nothing.

use memchr::memchr;

/// One line, without its line ending, or the news that it was too long.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    Text(Vec<u8>),
    TooLong,
}

/// The unprocessed input of one side of a session.
#[derive(Debug, Default)]
pub(crate) struct LineBuf {
    buf: Vec<u8>,
    /// Start of the unprocessed bytes in `buf`; compacted lazily so a batch of pipelined
    /// lines costs no memmove per line.
    start: usize,
    /// Dropping the rest of a too-long line, up to and including its LF.
    discarding: bool,
    /// Raw bytes still to drop (a refused IMAP literal or SMTP BDAT chunk).
    skip: u64,
}

impl LineBuf {
    /// Appends input.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        if self.skip > 0 {
            let n = bytes.len().min(usize::try_from(self.skip).unwrap_or(usize::MAX));
            bytes = &bytes[n..];
            self.skip -= n as u64;
        }
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start >= 4096 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete line; `max` counts the line ending too (RFC 5321 §4.5.3.1.4).
    pub(crate) fn next_line(&mut self, max: usize) -> Option<Line> {
        loop {
            let pending = &self.buf[self.start..];
            let Some(lf) = memchr(b'\n', pending) else {
                if self.discarding {
                    self.start = self.buf.len();
                } else if pending.len() > max {
                    // Even a lone LF next would make it too long: say so now and drop it.
                    self.discarding = true;
                    self.start = self.buf.len();
                    return Some(Line::TooLong);
                }
                return None;
            };
            let end = self.start + lf + 1;
            let line = &pending[..lf];
            let line = line.strip_suffix(b"\r").unwrap_or(line).to_vec();
            self.start = end;
            if self.discarding {
                self.discarding = false;
                continue;
            }
            return Some(if lf + 1 > max { Line::TooLong } else { Line::Text(line) });
        }
    }

    /// Exactly `n` raw bytes (an IMAP literal), once they are all here.
    pub(crate) fn take_exact(&mut self, n: usize) -> Option<Vec<u8>> {
        let pending = &self.buf[self.start..];
        let bytes = pending.get(..n)?.to_vec();
        self.start += n;
        Some(bytes)
    }

    /// Drops the next `n` raw bytes, including those not received yet.
    pub(crate) fn skip(&mut self, n: u64) {
        let here = (self.buf.len() - self.start).min(usize::try_from(n).unwrap_or(usize::MAX));
        self.start += here;
        self.skip = n - here as u64;
    }

    /// Drops everything up to and including the next LF.
    pub(crate) fn discard_line(&mut self) {
        self.discarding = true;
    }

    /// Forgets all buffered input (STARTTLS: plaintext sent after it must not be acted on
    /// once TLS is up, CVE-2011-0411).
    pub(crate) fn clear(&mut self) {
        *self = LineBuf::default();
    }

    /// The unprocessed bytes, which now belong to the caller.
    pub(crate) fn take_rest(&mut self) -> Vec<u8> {
        let rest = self.buf[self.start..].to_vec();
        self.clear();
        rest
    }

    /// How many unprocessed bytes are buffered.
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::{Line, LineBuf};

    fn all(input: &[u8], max: usize, bytewise: bool) -> Vec<Line> {
        let mut b = LineBuf::default();
        let mut got = Vec::new();
        let chunks: Vec<&[u8]> = if bytewise { input.chunks(1).collect() } else { vec![input] };
        for c in chunks {
            b.push(c);
            while let Some(l) = b.next_line(max) {
                got.push(l);
            }
        }
        got
    }

    #[test]
    fn splits_crlf_and_bare_lf_and_limits_length() {
        let input = b"ab\r\ncd\n0123456789\r\nxyz\r\n012345678\r\n";
        for bytewise in [false, true] {
            let got = all(input, 10, bytewise);
            assert_eq!(
                got,
                vec![
                    Line::Text(b"ab".to_vec()),
                    Line::Text(b"cd".to_vec()),
                    Line::TooLong,
                    Line::Text(b"xyz".to_vec()),
                    Line::TooLong,
                ],
                "bytewise={bytewise}"
            );
        }
    }

    #[test]
    fn skip_and_exact_span_pushes() {
        let mut b = LineBuf::default();
        b.push(b"abc");
        b.skip(5);
        b.push(b"defgh\r\n");
        assert_eq!(b.next_line(100), Some(Line::Text(b"fgh".to_vec())));
        b.push(b"12");
        assert_eq!(b.take_exact(3), None);
        b.push(b"345");
        assert_eq!(b.take_exact(3), Some(b"123".to_vec()));
        assert_eq!(b.take_rest(), b"45".to_vec());
        assert_eq!(b.buffered(), 0);
    }
}
