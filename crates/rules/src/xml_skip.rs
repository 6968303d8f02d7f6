//! The fast path of the XML scan: crossing markup no referenced path goes through without
//! building quick-xml events. It counts nesting only (names are not matched, as in the
//! scan) and steps over comments, CDATA, processing instructions and quoted attribute
//! values, so a `<` or `>` inside those never counts. Every answer is decided from the
//! bytes seen so far, and "the input ends first" is `None`, so a body prefix never
//! answers differently from the whole body.

use memchr::{memchr, memmem};

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

/// Given the input inside an element (or at the document's top level), where the next
/// tag that matters starts: a child start tag named one of `wanted`, or an end tag at
/// this level. Children with other names are skipped whole.
pub(crate) fn skip_children(s: &[u8], wanted: &[Box<[u8]>]) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    loop {
        i = find(s, i, b'<')?;
        let tag = &s[i..];
        i = match *tag.get(1)? {
            b'/' if depth == 0 => return Some(i),
            b'/' => {
                depth -= 1;
                find(s, i + 2, b'>')? + 1
            }
            b'!' if tag.starts_with(b"<!--") => i + 4 + memmem::find(&tag[4..], b"-->")? + 3,
            b'!' if tag.starts_with(b"<![CDATA[") => i + 9 + memmem::find(&tag[9..], b"]]>")? + 3,
            b'?' => i + 2 + memmem::find(&tag[2..], b"?>")? + 2,
            b'!' => find(s, i + 2, b'>')? + 1,
            _ => {
                if depth == 0 && !wanted.is_empty() {
                    // Only a complete name can be judged: `<purch` may yet be `<purchase`.
                    let len = tag[1..].iter().position(|&b| is_space(b) || b == b'/' || b == b'>')?;
                    if wanted.iter().any(|w| **w == tag[1..1 + len]) {
                        return Some(i);
                    }
                }
                let end = start_tag_end(tag)?;
                if tag[end - 1] != b'/' {
                    depth += 1;
                }
                i + end + 1
            }
        };
    }
}

/// The index of the `>` ending the start tag at `tag[0]`: the first one outside a
/// quoted attribute value.
fn start_tag_end(tag: &[u8]) -> Option<usize> {
    let mut j = 1;
    loop {
        match *tag.get(j)? {
            b'>' => return Some(j),
            quote @ (b'"' | b'\'') => j = find(tag, j + 1, quote)?,
            _ => {}
        }
        j += 1;
    }
}
