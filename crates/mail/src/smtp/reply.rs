//! SMTP replies (RFC 5321 §4.2): the type both state machines answer with, and the
//! incremental reader of a server's possibly multi-line replies.

use crate::error::{excerpt, ServerError};
use crate::line::{Line, LineBuf};

/// One SMTP reply: a three-digit code and its text lines (without the code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The reply code, 200..=599.
    pub code: u16,
    /// The text of each line, enhanced status code included; never empty.
    pub lines: Vec<String>,
}

impl Reply {
    /// A one-line reply; control characters in `text` become spaces.
    pub fn new(code: u16, text: &str) -> Reply {
        Reply { code, lines: vec![printable(text)] }
    }

    /// 2xx or 3xx.
    pub fn is_positive(&self) -> bool {
        self.code < 400
    }

    /// 4xx: try again later.
    pub fn is_transient(&self) -> bool {
        (400..500).contains(&self.code)
    }

    /// All lines joined by a space.
    pub fn text(&self) -> String {
        self.lines.join(" ")
    }

    /// The enhanced status code (RFC 3463) that starts the first line, if it is there and
    /// of the same class as the reply code.
    pub fn enhanced(&self) -> Option<&str> {
        let first = self.lines.first()?;
        let token = first.split(' ').next()?;
        let mut parts = token.split('.');
        let class = parts.next()?;
        let valid = class.len() == 1
            && u16::from(class.as_bytes()[0].wrapping_sub(b'0')) == self.code / 100
            && parts.clone().count() == 2
            && parts.all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
        valid.then_some(token)
    }

    /// The text of the first line without its enhanced status code.
    pub fn plain_text(&self) -> &str {
        let first = self.lines.first().map_or("", String::as_str);
        match self.enhanced() {
            Some(e) => first[e.len()..].trim_start(),
            None => first,
        }
    }

    /// Writes the reply in wire form: `code-text` lines, the last one `code text`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let last = self.lines.len().saturating_sub(1);
        for (i, line) in self.lines.iter().enumerate() {
            let sep = if i == last { ' ' } else { '-' };
            out.extend_from_slice(format!("{}{sep}{}\r\n", self.code, printable(line)).as_bytes());
        }
        if self.lines.is_empty() {
            out.extend_from_slice(format!("{}\r\n", self.code).as_bytes());
        }
    }

    /// The reply in wire form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }
}

/// Text that cannot break the framing of a reply line.
pub(crate) fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// Reads a server's replies from its bytes, however they are split.
#[derive(Debug)]
pub(crate) struct ReplyReader {
    lines: LineBuf,
    max_line: usize,
    max_lines: usize,
    partial: Option<Reply>,
}

impl ReplyReader {
    pub(crate) fn new(max_line: usize, max_lines: usize) -> Self {
        ReplyReader { lines: LineBuf::default(), max_line, max_lines, partial: None }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.lines.push(bytes);
    }

    /// The next complete reply, `None` while it is still arriving.
    pub(crate) fn next(&mut self) -> Result<Option<Reply>, ServerError> {
        loop {
            let line = match self.lines.next_line(self.max_line) {
                None => return Ok(None),
                Some(Line::TooLong) => return Err(ServerError::LineTooLong(self.max_line)),
                Some(Line::Text(line)) => line,
            };
            let (code, more, text) = parse_line(&line)?;
            let reply = self.partial.get_or_insert_with(|| Reply { code, lines: Vec::new() });
            if reply.code != code {
                return Err(ServerError::Malformed(excerpt(&line)));
            }
            if reply.lines.len() == self.max_lines {
                return Err(ServerError::TooManyLines(self.max_lines));
            }
            reply.lines.push(text);
            if !more {
                return Ok(self.partial.take());
            }
        }
    }

    /// Nothing is buffered: no reply, nor part of one, waits to be read.
    pub(crate) fn is_empty(&self) -> bool {
        self.partial.is_none() && self.lines.buffered() == 0
    }

    /// Bytes after the last reply read (a server that talks before it is asked).
    pub(crate) fn take_rest(&mut self) -> Vec<u8> {
        self.lines.take_rest()
    }
}

/// `250-text`, `250 text` or `250`: (code, more lines follow, text).
fn parse_line(line: &[u8]) -> Result<(u16, bool, String), ServerError> {
    let malformed = || ServerError::Malformed(excerpt(line));
    let digits = line.get(..3).ok_or_else(malformed)?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(malformed());
    }
    let code = digits.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    if !(200..600).contains(&code) {
        return Err(malformed());
    }
    let more = match line.get(3) {
        None | Some(b' ') => false,
        Some(b'-') => true,
        Some(_) => return Err(malformed()),
    };
    let text = line.get(4..).unwrap_or_default();
    Ok((code, more, printable(&String::from_utf8_lossy(text))))
}

#[cfg(test)]
mod tests {
    use super::{Reply, ReplyReader};
    use crate::ServerError;

    #[test]
    fn multi_line_replies_in_any_split() {
        let input = b"220 mx ESMTP\r\n250-mx\r\n250-PIPELINING\r\n250 SIZE 100\r\n354\r\n";
        for size in [1, 3, input.len()] {
            let mut r = ReplyReader::new(512, 10);
            let mut got = Vec::new();
            for c in input.chunks(size) {
                r.push(c);
                while let Some(reply) = r.next().unwrap() {
                    got.push(reply);
                }
            }
            assert_eq!(got.len(), 3);
            assert_eq!(got[1].lines, ["mx", "PIPELINING", "SIZE 100"]);
            assert_eq!(got[2], Reply { code: 354, lines: vec![String::new()] });
        }
    }

    #[test]
    fn refuses_bad_servers() {
        let cases: [(&[u8], ServerError); 4] = [
            (b"250-a\r\n251 b\r\n", ServerError::Malformed("251 b".into())),
            (b"hello\r\n", ServerError::Malformed("hello".into())),
            (b"250_x\r\n", ServerError::Malformed("250_x".into())),
            (b"250-a\r\n250-b\r\n250-c\r\n", ServerError::TooManyLines(2)),
        ];
        for (input, want) in cases {
            let mut r = ReplyReader::new(512, 2);
            r.push(input);
            assert_eq!(r.next(), Err(want));
        }
        let mut r = ReplyReader::new(8, 2);
        r.push(b"250 0123456789");
        assert_eq!(r.next(), Err(ServerError::LineTooLong(8)));
    }

    #[test]
    fn enhanced_codes_and_wire_form() {
        let r = Reply { code: 550, lines: vec!["5.1.1 no such user".into()] };
        assert_eq!(r.enhanced(), Some("5.1.1"));
        assert_eq!(r.plain_text(), "no such user");
        assert_eq!(Reply::new(550, "4.1.1 wrong class").enhanced(), None);
        assert_eq!(Reply::new(250, "Ok").enhanced(), None);
        let multi = Reply { code: 250, lines: vec!["a".into(), "b".into()] };
        assert_eq!(multi.to_bytes(), b"250-a\r\n250 b\r\n");
        assert_eq!(Reply::new(451, "x\r\ny").to_bytes(), b"451 x  y\r\n");
    }
}
