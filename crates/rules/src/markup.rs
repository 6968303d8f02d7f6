//! The byte-level XML reader under the path scan: a tokenizer for the elements on
//! referenced paths, and a skipper that crosses everything else counting nesting only.
//! It knows exactly what the scan needs — start/end tags and their names, text, CDATA;
//! comments, processing instructions and declarations are stepped over, `<` and `>`
//! inside quoted attribute values never count — and validates nothing else.
//!
//! Every answer is decided from the bytes seen so far, and "the input ends before the
//! token does" is `None` or [`Token::Incomplete`], so a body prefix never reads a token
//! differently from the whole body.
//!
//! Written here rather than taken from quick-xml's event reader because building an event
//! per tag cost too much for the extraction goals (docs/rules.md, "How it is fast");
//! quick-xml stays the reference: the tests read the same documents with it and compare
//! (`tests/xml.rs`).

use memchr::memchr;

/// One token starting at a given position.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Token<'a> {
    /// Character data up to the next `<` (or the end of the input), still escaped.
    Text(&'a [u8]),
    /// The content of `<![CDATA[…]]>`.
    CData(&'a [u8]),
    /// A start tag; `empty` for `<name …/>`.
    Start { name: &'a [u8], empty: bool },
    /// An end tag (its name is not needed: nesting is counted, as quick-xml can be told to).
    End,
    /// A comment, processing instruction or declaration.
    Other,
    /// The input ends inside the token.
    Incomplete,
}

/// quick-xml's whitespace, which ends a tag name.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// The first `b` at or after `from`. Markup is dense (a tag every few bytes), where a plain
/// loop beats memchr's setup; long text runs still get memchr.
#[inline]
fn find(s: &[u8], from: usize, b: u8) -> Option<usize> {
    let near = s.len().min(from.saturating_add(32));
    match s.get(from..near)?.iter().position(|&c| c == b) {
        Some(p) => Some(from + p),
        None if near < s.len() => memchr(b, &s[near..]).map(|p| near + p),
        None => None,
    }
}

/// The index just past the first `needle` (2 or 3 bytes) that starts at or after `from`.
fn find_end(s: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let last = *needle.last()?;
    let mut at = from + needle.len() - 1;
    loop {
        at = find(s, at, last)?;
        if s[..=at].ends_with(needle) {
            return Some(at + 1);
        }
        at += 1;
    }
}

/// Bytes that end or quote inside a start tag: one table lookup per byte instead of
/// three comparisons.
const TAG_STOP: [bool; 256] = {
    let mut t = [false; 256];
    t[b'>' as usize] = true;
    t[b'"' as usize] = true;
    t[b'\'' as usize] = true;
    t
};

/// The index of the `>` ending the start tag at `tag[0]`: the first one outside a
/// quoted attribute value.
fn start_tag_end(tag: &[u8]) -> Option<usize> {
    let mut j = 1;
    loop {
        j += tag.get(j..)?.iter().position(|&b| TAG_STOP[b as usize])?;
        match tag[j] {
            b'>' => return Some(j),
            quote => j = find(tag, j + 1, quote)?,
        }
        j += 1;
    }
}

/// The name of the start tag at `tag[0]`, if all of it has arrived (`<purch` may yet be
/// `<purchase`).
fn tag_name(tag: &[u8]) -> Option<&[u8]> {
    let len = tag[1..].iter().position(|&b| is_space(b) || b == b'/' || b == b'>')?;
    Some(&tag[1..1 + len])
}

/// Whether the `<` at `s[0]` opens something other than a start tag (`s` has 2+ bytes).
fn is_markup(s: &[u8]) -> bool {
    matches!(s[1], b'/' | b'!' | b'?')
}

/// The markup at `s[0]` (see `is_markup`): its kind and the index past it; `None` when
/// the input ends inside it.
fn markup(s: &[u8]) -> Option<(Token<'_>, usize)> {
    Some(match s[1] {
        b'/' => (Token::End, find(s, 2, b'>')? + 1),
        b'!' if s.starts_with(b"<!--") => (Token::Other, find_end(s, 4, b"-->")?),
        b'!' if s.starts_with(b"<![CDATA[") => {
            let end = find_end(s, 9, b"]]>")?;
            (Token::CData(&s[9..end - 3]), end)
        }
        b'?' => (Token::Other, find_end(s, 2, b"?>")?),
        // A declaration such as <!DOCTYPE …>: too short a prefix to be a comment or CDATA
        // opener also ends up here, and then finds no `>` in what has arrived.
        _ => (Token::Other, find(s, 2, b'>')? + 1),
    })
}

/// The token at `s[at]` and the index just past it.
pub(crate) fn next_token(s: &[u8], at: usize) -> (Token<'_>, usize) {
    let rest = &s[at.min(s.len())..];
    if rest.first() != Some(&b'<') {
        let end = find(rest, 0, b'<').unwrap_or(rest.len());
        return (Token::Text(&rest[..end]), at + end);
    }
    if rest.len() < 2 {
        return (Token::Incomplete, s.len());
    }
    if is_markup(rest) {
        return markup(rest).map_or((Token::Incomplete, s.len()), |(token, len)| (token, at + len));
    }
    match (tag_name(rest), start_tag_end(rest)) {
        (Some(name), Some(end)) => (Token::Start { name, empty: rest[end - 1] == b'/' }, at + end + 1),
        _ => (Token::Incomplete, s.len()),
    }
}

/// Given the input inside an element (or at the document's top level), where the next
/// tag that matters starts: a child start tag named one of `wanted`, or an end tag at
/// this level. Children with other names are skipped whole; `None` if the input ends
/// first.
pub(crate) fn skip_children(s: &[u8], wanted: &[Box<[u8]>]) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    loop {
        i = find(s, i, b'<')?;
        let tag = &s[i..];
        if tag.len() < 2 {
            return None;
        }
        if is_markup(tag) {
            if tag[1] == b'/' {
                if depth == 0 {
                    return Some(i);
                }
                depth -= 1;
            }
            i += markup(tag)?.1;
            continue;
        }
        if depth == 0 && !wanted.is_empty() {
            let name = tag_name(tag)?;
            if wanted.iter().any(|w| **w == *name) {
                return Some(i);
            }
        }
        let end = start_tag_end(tag)?;
        if tag[end - 1] != b'/' {
            depth += 1;
        }
        i += end + 1;
    }
}
