//! IMAP command syntax (RFC 9051 §9 / RFC 3501 §9) as far as the switch needs it: commands
//! assembled across literals, tags, atoms and astrings, and quoting for the replay.

use crate::line::{Line, LineBuf};

/// What the assembler has for the front.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Assembled {
    /// A complete command, literals inline as `{n}\r\n` + bytes.
    Command(Vec<u8>),
    /// A synchronizing literal is announced: the client waits for `+ `.
    Continue,
    /// A literal over the limit (the command so far, to find its tag). A non-synchronizing
    /// one is skipped with the rest of its line; a synchronizing one was never sent.
    LiteralTooBig(Vec<u8>),
    /// A line over the limit.
    TooLong,
}

/// Sizes the assembler enforces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) line: usize,
    pub(crate) literal: usize,
}

/// Joins a command's lines and literals, however the bytes arrive.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    cmd: Vec<u8>,
    literal: Option<usize>,
}

impl Assembler {
    pub(crate) fn next(&mut self, input: &mut LineBuf, limits: Limits) -> Option<Assembled> {
        loop {
            if let Some(n) = self.literal {
                self.cmd.extend(input.take_exact(n)?);
                self.literal = None;
            }
            let line = match input.next_line(limits.line)? {
                Line::TooLong => {
                    self.cmd.clear();
                    return Some(Assembled::TooLong);
                }
                Line::Text(line) => line,
            };
            let Some((n, sync)) = literal_suffix(&line) else {
                self.cmd.extend(line);
                return Some(Assembled::Command(std::mem::take(&mut self.cmd)));
            };
            // Bounds the whole command too: each line is bounded and each literal adds at
            // most `limits.literal` on top of the line that announced it.
            if n > limits.literal || self.cmd.len() + line.len() + n > 4 * limits.line {
                let mut head = std::mem::take(&mut self.cmd);
                head.extend(line);
                if !sync {
                    input.skip(n as u64);
                    input.discard_line();
                }
                return Some(Assembled::LiteralTooBig(head));
            }
            self.cmd.extend(line);
            self.cmd.extend_from_slice(b"\r\n");
            self.literal = Some(n);
            if sync {
                return Some(Assembled::Continue);
            }
        }
    }
}

/// `{n}` or `{n+}` at the end of a line: (n, synchronizing).
pub(crate) fn literal_suffix(line: &[u8]) -> Option<(usize, bool)> {
    let body = line.strip_suffix(b"}")?;
    let open = body.iter().rposition(|&b| b == b'{')?;
    let inner = &body[open + 1..];
    let (digits, sync) = match inner.strip_suffix(b"+") {
        Some(d) => (d, false),
        None => (inner, true),
    };
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits.iter().fold(0usize, |n, d| n * 10 + usize::from(d - b'0'));
    Some((n, sync))
}

fn is_atom_char(b: u8) -> bool {
    b > b' ' && b < 0x7f && !b"(){%*\"\\]".contains(&b)
}

/// Reads the parts of an assembled command.
pub(crate) struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Cursor { b, pos: 0 }
    }

    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a [u8] {
        let start = self.pos;
        while self.b.get(self.pos).is_some_and(|&b| f(b)) {
            self.pos += 1;
        }
        &self.b[start..self.pos]
    }

    /// A tag: ASTRING-CHARs but `+`.
    pub(crate) fn tag(&mut self) -> Option<&'a str> {
        let tag = self.take_while(|b| (is_atom_char(b) || b == b']') && b != b'+');
        std::str::from_utf8(tag).ok().filter(|t| !t.is_empty())
    }

    /// An atom (a command name, a SASL mechanism, a base64 response).
    pub(crate) fn atom(&mut self) -> Option<&'a str> {
        let atom = self.take_while(is_atom_char);
        std::str::from_utf8(atom).ok().filter(|a| !a.is_empty())
    }

    /// One space.
    pub(crate) fn sp(&mut self) -> Option<()> {
        (self.b.get(self.pos) == Some(&b' ')).then(|| self.pos += 1)
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.b.len()
    }

    /// An astring: atom (8-bit bytes tolerated), quoted string or literal.
    pub(crate) fn astring(&mut self) -> Option<Vec<u8>> {
        match self.b.get(self.pos)? {
            b'"' => self.quoted(),
            b'{' => self.literal(),
            _ => {
                let atom = self.take_while(|b| is_atom_char(b) || b == b']' || b >= 0x80);
                (!atom.is_empty()).then(|| atom.to_vec())
            }
        }
    }

    fn quoted(&mut self) -> Option<Vec<u8>> {
        let mut s = Vec::new();
        self.pos += 1;
        loop {
            match *self.b.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(s);
                }
                b'\\' => {
                    s.push(*self.b.get(self.pos + 1).filter(|&&b| b == b'"' || b == b'\\')?);
                    self.pos += 2;
                }
                b => {
                    s.push(b);
                    self.pos += 1;
                }
            }
        }
    }

    fn literal(&mut self) -> Option<Vec<u8>> {
        let close = self.b[self.pos..].iter().position(|&b| b == b'}')? + self.pos;
        let (n, _) = literal_suffix(&self.b[self.pos..=close])?;
        let start = close + 3;
        (self.b.get(close + 1..start)? == b"\r\n").then_some(())?;
        let bytes = self.b.get(start..start + n)?.to_vec();
        self.pos = start + n;
        Some(bytes)
    }
}

/// `s` as an IMAP quoted string, if it can be one (printable ASCII); else it needs a literal.
pub(crate) fn quoted(s: &[u8]) -> Option<Vec<u8>> {
    if !s.iter().all(|&b| (b' '..=b'~').contains(&b)) {
        return None;
    }
    let mut q = vec![b'"'];
    for &b in s {
        if b == b'"' || b == b'\\' {
            q.push(b'\\');
        }
        q.push(b);
    }
    q.push(b'"');
    Some(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assemble(input: &[u8], bytewise: bool) -> Vec<Assembled> {
        let (mut buf, mut asm, mut got) = (LineBuf::default(), Assembler::default(), Vec::new());
        let limits = Limits { line: 100, literal: 10 };
        let chunks: Vec<&[u8]> = if bytewise { input.chunks(1).collect() } else { vec![input] };
        for c in chunks {
            buf.push(c);
            while let Some(a) = asm.next(&mut buf, limits) {
                got.push(a);
            }
        }
        got
    }

    #[test]
    fn literals_join_lines_in_any_split() {
        let input = b"a LOGIN {5}\r\nal\r\nx {3+}\r\npw\n\r\nb {11+}\r\n0123456789A more\r\nc NOOP\r\n";
        for bytewise in [false, true] {
            assert_eq!(
                assemble(input, bytewise),
                vec![
                    Assembled::Continue,
                    Assembled::Command(b"a LOGIN {5}\r\nal\r\nx {3+}\r\npw\n".to_vec()),
                    Assembled::LiteralTooBig(b"b {11+}".to_vec()),
                    Assembled::Command(b"c NOOP".to_vec()),
                ]
            );
        }
    }

    #[test]
    fn cursor_reads_astrings() {
        let cmd = b"A1 LOGIN \"j\\\"o\\\\e\" {3}\r\np w";
        let mut c = Cursor::new(cmd);
        assert_eq!(c.tag(), Some("A1"));
        assert_eq!((c.sp(), c.atom(), c.sp()), (Some(()), Some("LOGIN"), Some(())));
        assert_eq!(c.astring(), Some(b"j\"o\\e".to_vec()));
        assert_eq!((c.sp(), c.astring(), c.at_end()), (Some(()), Some(b"p w".to_vec()), true));
        assert_eq!(Cursor::new(b"+x").tag(), None);
        assert_eq!(Cursor::new(b"\"open").astring(), None);
        assert_eq!(Cursor::new(b"{9}\r\nab").astring(), None);
        assert_eq!(literal_suffix(b"x {12}"), Some((12, true)));
        assert_eq!(literal_suffix(b"x {+}"), None);
        assert_eq!(quoted(b"a\"b"), Some(b"\"a\\\"b\"".to_vec()));
        assert_eq!(quoted("é".as_bytes()), None);
    }
}
