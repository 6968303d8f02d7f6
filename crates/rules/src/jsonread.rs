//! The byte-level JSON reader under the path scan (`json.rs`): a strict reader for the
//! tokens on referenced paths — strings unescaped per RFC 8259 (surrogate pairs joined, a
//! lone surrogate refused), numbers and `true` / `false` / `null` checked against the
//! grammar — and a skipper that crosses any other value by counting brackets and stepping
//! over strings, validating nothing else (as `markup.rs` does for XML).
//!
//! Every answer is decided from the bytes seen so far: "the input ends before the token
//! does" is [`Stop::End`] and "these bytes are not JSON" is [`Stop::Bad`], which more
//! input can never undo, so a body prefix never reads a token differently from the whole
//! body. Nothing here recurses: nesting is a counter.

use memchr::memchr2;

/// Why a read did not produce a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The input ends inside the token: more body may complete it.
    End,
    /// Not JSON: the byte offset of the fault.
    Bad(usize),
}

/// A read's result: the index just past the token.
pub(crate) type Read = Result<usize, Stop>;

/// The first index at or after `at` that is not JSON whitespace.
pub(crate) fn skip_ws(s: &[u8], at: usize) -> usize {
    let rest = s.get(at..).unwrap_or_default();
    at + rest.iter().position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')).unwrap_or(rest.len())
}

/// Byte classes for the skipper: one table lookup per byte.
const OPEN: u8 = 1;
const CLOSE: u8 = 2;
const QUOTE: u8 = 3;
const SKIP_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'{' as usize] = OPEN;
    t[b'[' as usize] = OPEN;
    t[b'}' as usize] = CLOSE;
    t[b']' as usize] = CLOSE;
    t[b'"' as usize] = QUOTE;
    t
};

/// Steps over the value starting at `s[at]` (not whitespace) without reading it.
pub(crate) fn skip_value(s: &[u8], at: usize) -> Read {
    match s.get(at) {
        None => Err(Stop::End),
        Some(b'"') => skip_string(s, at),
        Some(b'{' | b'[') => skip_container(s, at),
        Some(b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
            let rest = &s[at..];
            let len = rest.iter().position(|&b| is_delimiter(b)).ok_or(Stop::End)?;
            Ok(at + len)
        }
        Some(_) => Err(Stop::Bad(at)),
    }
}

/// Bytes that may end a number or literal.
fn is_delimiter(b: u8) -> bool {
    matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_string(s: &[u8], at: usize) -> Read {
    let mut i = at + 1;
    loop {
        let j = quote_or_backslash(s, i).ok_or(Stop::End)?;
        if s[j] == b'"' {
            return Ok(j + 1);
        }
        i = j + 2; // the escaped byte cannot end the string
    }
}

/// The first `"` or `\` at or after `from`. Member names and most values are short, where
/// a plain loop beats memchr's setup; long strings still get memchr.
#[inline]
fn quote_or_backslash(s: &[u8], from: usize) -> Option<usize> {
    let near = s.len().min(from.saturating_add(16));
    match s.get(from..near)?.iter().position(|&b| b == b'"' || b == b'\\') {
        Some(p) => Some(from + p),
        None if near < s.len() => memchr2(b'"', b'\\', &s[near..]).map(|p| near + p),
        None => None,
    }
}

/// The object or array at `s[at]`: brackets counted (their kinds not matched), strings
/// stepped over.
fn skip_container(s: &[u8], at: usize) -> Read {
    let mut depth = 0usize;
    let mut i = at;
    loop {
        let rest = s.get(i..).unwrap_or_default();
        i += rest.iter().position(|&b| SKIP_CLASS[b as usize] != 0).ok_or(Stop::End)?;
        match SKIP_CLASS[s[i] as usize] {
            OPEN => depth += 1,
            CLOSE => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {
                i = skip_string(s, i)?;
                continue;
            }
        }
        i += 1;
    }
}

/// Bytes that end a run of plain string content: the quote, a backslash, and the control
/// characters RFC 8259 does not allow unescaped.
const STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = true;
        b += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// The string whose opening quote is `s[at]`, unescaped onto `out`.
pub(crate) fn read_string(s: &[u8], at: usize, out: &mut Vec<u8>) -> Read {
    let mut i = at + 1;
    loop {
        let rest = s.get(i..).unwrap_or_default();
        let run = rest.iter().position(|&b| STRING_STOP[b as usize]).ok_or(Stop::End)?;
        out.extend_from_slice(&rest[..run]);
        i += run;
        match s[i] {
            b'"' => return Ok(i + 1),
            b'\\' => i = escape(s, i, out)?,
            _ => return Err(Stop::Bad(i)),
        }
    }
}

/// The escape at `s[at]` (a backslash).
fn escape(s: &[u8], at: usize, out: &mut Vec<u8>) -> Read {
    let byte = match *s.get(at + 1).ok_or(Stop::End)? {
        b'"' => b'"',
        b'\\' => b'\\',
        b'/' => b'/',
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => return unicode(s, at, out),
        _ => return Err(Stop::Bad(at)),
    };
    out.push(byte);
    Ok(at + 2)
}

/// `\uXXXX` at `s[at]`, or a surrogate pair `\uD8xx\uDCxx`, as UTF-8.
fn unicode(s: &[u8], at: usize, out: &mut Vec<u8>) -> Read {
    let first = hex4(s, at + 2)?;
    let (code, end) = match first {
        0xD800..=0xDBFF => {
            match (s.get(at + 6), s.get(at + 7)) {
                (None, _) | (Some(b'\\'), None) => return Err(Stop::End),
                (Some(b'\\'), Some(b'u')) => {}
                _ => return Err(Stop::Bad(at)),
            }
            let second = hex4(s, at + 8)?;
            if !(0xDC00..=0xDFFF).contains(&second) {
                return Err(Stop::Bad(at));
            }
            (0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00), at + 12)
        }
        0xDC00..=0xDFFF => return Err(Stop::Bad(at)),
        _ => (first, at + 6),
    };
    let c = char::from_u32(code).ok_or(Stop::Bad(at))?;
    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    Ok(end)
}

fn hex4(s: &[u8], at: usize) -> Result<u32, Stop> {
    let mut v = 0;
    for i in at..at + 4 {
        let b = *s.get(i).ok_or(Stop::End)?;
        v = v * 16 + char::from(b).to_digit(16).ok_or(Stop::Bad(i))?;
    }
    Ok(v)
}

/// A number, `true`, `false` or `null` at `s[at]`, checked against the grammar.
pub(crate) fn read_scalar(s: &[u8], at: usize) -> Read {
    match s.get(at) {
        None => Err(Stop::End),
        Some(b't') => literal(s, at, b"true"),
        Some(b'f') => literal(s, at, b"false"),
        Some(b'n') => literal(s, at, b"null"),
        Some(b'-' | b'0'..=b'9') => number(s, at),
        Some(_) => Err(Stop::Bad(at)),
    }
}

fn literal(s: &[u8], at: usize, word: &[u8]) -> Read {
    let have = &s[at..s.len().min(at + word.len())];
    if !word.starts_with(have) {
        return Err(Stop::Bad(at));
    }
    if have.len() < word.len() {
        return Err(Stop::End);
    }
    Ok(at + word.len())
}

/// A number: it ends at the first byte that cannot be part of one (what follows is the
/// caller's to check), so one cut at the end of the input may still grow.
fn number(s: &[u8], at: usize) -> Read {
    let rest = &s[at..];
    let len = rest
        .iter()
        .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
        .ok_or(Stop::End)?;
    match is_number(&rest[..len]) {
        true => Ok(at + len),
        false => Err(Stop::Bad(at)),
    }
}

/// RFC 8259's `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
pub(crate) fn is_number(t: &[u8]) -> bool {
    let digits = |t: &[u8]| t.iter().take_while(|b| b.is_ascii_digit()).count();
    let t = t.strip_prefix(b"-").unwrap_or(t);
    let int = digits(t);
    if int == 0 || (int > 1 && t[0] == b'0') {
        return false;
    }
    let mut t = &t[int..];
    if let Some(frac) = t.strip_prefix(b".") {
        let n = digits(frac);
        if n == 0 {
            return false;
        }
        t = &frac[n..];
    }
    if let Some(exp) = t.strip_prefix(b"e").or_else(|| t.strip_prefix(b"E")) {
        let exp = exp.strip_prefix(b"+").or_else(|| exp.strip_prefix(b"-")).unwrap_or(exp);
        let n = digits(exp);
        return n > 0 && n == exp.len();
    }
    t.is_empty()
}
