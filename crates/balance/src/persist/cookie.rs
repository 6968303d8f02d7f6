//! Cookie bytes: the pairs of a `Cookie:` header, the parts of a `Set-Cookie:` header, and
//! the edits the cookie modes make to them. Everything works on raw header values, takes
//! any bytes without panicking, and borrows rather than copies.
//!
//! Parsing follows RFC 6265 §5.2 / §5.4 as a server must read what browsers send: pairs
//! are separated by `;` with optional SP/HTAB around them (`a=1;b=2` and `a=1; ; b=2` are
//! both read), names and values are trimmed of SP/HTAB, and quotes stay part of the value.
//! A part without `=` is a cookie with an empty name (RFC 6265bis §5.6), so it never
//! matches a configured name.

use std::ops::Range;

/// SP and HTAB: what RFC 6265 §5.2 trims around names and values.
fn is_wsp(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// `r` without the SP/HTAB at either end of `s[r]`.
fn trim(s: &[u8], mut r: Range<usize>) -> Range<usize> {
    while r.start < r.end && is_wsp(s[r.start]) {
        r.start += 1;
    }
    while r.end > r.start && is_wsp(s[r.end - 1]) {
        r.end -= 1;
    }
    r
}

/// Where one pair of a `Cookie:` header lies in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PairSpan {
    /// The whole pair, trimmed.
    pub(crate) part: Range<usize>,
    pub(crate) name: Range<usize>,
    pub(crate) value: Range<usize>,
}

/// The pairs of a `Cookie:` header as offsets, for edits made in place.
#[derive(Clone, Debug)]
pub(crate) struct PairSpans<'a> {
    header: &'a [u8],
    pos: usize,
}

pub(crate) fn pair_spans(header: &[u8]) -> PairSpans<'_> {
    PairSpans { header, pos: 0 }
}

impl Iterator for PairSpans<'_> {
    type Item = PairSpan;

    fn next(&mut self) -> Option<PairSpan> {
        let h = self.header;
        while self.pos < h.len() {
            let start = self.pos;
            let end = h[start..].iter().position(|&b| b == b';').map_or(h.len(), |i| start + i);
            self.pos = end + 1;
            let part = trim(h, start..end);
            if part.is_empty() {
                continue;
            }
            let (name, value) = match h[part.clone()].iter().position(|&b| b == b'=') {
                Some(eq) => (trim(h, part.start..part.start + eq), trim(h, part.start + eq + 1..part.end)),
                None => (part.start..part.start, part.clone()),
            };
            return Some(PairSpan { part, name, value });
        }
        None
    }
}

/// The `(name, value)` pairs of a `Cookie:` header value, in order; see
/// [`cookie_pairs`].
#[derive(Clone, Debug)]
pub struct CookiePairs<'a> {
    spans: PairSpans<'a>,
}

impl<'a> Iterator for CookiePairs<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let span = self.spans.next()?;
        let h = self.spans.header;
        Some((&h[span.name], &h[span.value]))
    }
}

/// The `name=value` pairs of a `Cookie:` header value (RFC 6265 §4.2), trimmed; empty
/// parts are skipped, a part without `=` comes out with an empty name, quotes stay.
pub fn cookie_pairs(header_value: &[u8]) -> CookiePairs<'_> {
    CookiePairs { spans: pair_spans(header_value) }
}

/// The value of the first cookie named exactly `name` (case-sensitive).
pub fn find_cookie<'a>(header_value: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    cookie_pairs(header_value).find(|&(n, _)| n == name).map(|(_, v)| v)
}

/// What [`rewrite_cookie_header`] does with one pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CookieEdit<'a> {
    /// Forward the pair as it came.
    Keep,
    /// Drop the pair.
    Remove,
    /// Forward `name=value` instead (just `value` when `name` is empty).
    Replace {
        /// The new name.
        name: &'a [u8],
        /// The new value.
        value: &'a [u8],
    },
}

/// Appends to `out` the `Cookie:` header value with `edit` applied to each pair, and says
/// whether anything changed.
///
/// Pairs come out joined by `"; "`; a kept pair is copied verbatim. When nothing changed
/// (every pair kept, or replaced by itself) the result is `false` and what was appended is
/// unspecified: forward the original. When every pair was removed nothing is appended:
/// drop the header.
pub fn rewrite_cookie_header<'h, F>(header_value: &'h [u8], out: &mut Vec<u8>, mut edit: F) -> bool
where
    F: FnMut(&'h [u8], &'h [u8]) -> CookieEdit<'h>,
{
    let mut changed = false;
    let mut first = true;
    for span in pair_spans(header_value) {
        let (name, value) = (&header_value[span.name], &header_value[span.value]);
        let (new_name, new_value) = match edit(name, value) {
            CookieEdit::Keep => (name, value),
            CookieEdit::Remove => {
                changed = true;
                continue;
            }
            CookieEdit::Replace { name, value } => (name, value),
        };
        if !first {
            out.extend_from_slice(b"; ");
        }
        first = false;
        if new_name == name && new_value == value {
            out.extend_from_slice(&header_value[span.part]);
        } else {
            changed = true;
            if !new_name.is_empty() {
                out.extend_from_slice(new_name);
                out.push(b'=');
            }
            out.extend_from_slice(new_value);
        }
    }
    changed
}

/// The parts of a `Set-Cookie:` header value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetCookie<'a> {
    /// The cookie's name, trimmed.
    pub name: &'a [u8],
    /// The cookie's value, trimmed, quotes kept.
    pub value: &'a [u8],
    /// Everything from the first `;` on, verbatim (empty when there are no attributes).
    pub attrs: &'a [u8],
}

/// Where the name and value of a `Set-Cookie:` value lie and where its attributes start;
/// `None` when the name-value pair has no `=` or an empty name (RFC 6265 §5.2 ignores it).
pub(crate) fn set_cookie_spans(header_value: &[u8]) -> Option<(Range<usize>, Range<usize>, usize)> {
    let semi = header_value.iter().position(|&b| b == b';').unwrap_or(header_value.len());
    let eq = header_value[..semi].iter().position(|&b| b == b'=')?;
    let name = trim(header_value, 0..eq);
    let value = trim(header_value, eq + 1..semi);
    (!name.is_empty()).then_some((name, value, semi))
}

/// The name, value and attributes of a `Set-Cookie:` header value; `None` when it has no
/// `name=` (RFC 6265 §5.2 ignores such a header).
pub fn parse_set_cookie(header_value: &[u8]) -> Option<SetCookie<'_>> {
    let (name, value, attrs) = set_cookie_spans(header_value)?;
    Some(SetCookie { name: &header_value[name], value: &header_value[value], attrs: &header_value[attrs..] })
}

impl SetCookie<'_> {
    /// Appends `name=value` and then `attrs` verbatim (which should start with `;` when
    /// not empty) to `out`: a `Set-Cookie:` header value.
    pub fn write(name: &[u8], value: &[u8], attrs: &[u8], out: &mut Vec<u8>) {
        out.reserve(name.len() + 1 + value.len() + attrs.len());
        out.extend_from_slice(name);
        out.push(b'=');
        out.extend_from_slice(value);
        out.extend_from_slice(attrs);
    }

    /// Appends this cookie, as parsed, to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        Self::write(self.name, self.value, self.attrs, out);
    }
}

/// True for a valid cookie name: an RFC 6265 §4.1.1 `token` (visible ASCII but no
/// separator), not empty. The config layer checks configured names with it.
pub fn is_cookie_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.iter().all(|&b| (0x21..0x7f).contains(&b) && !b"()<>@,;:\\\"/[]?={}".contains(&b))
}

/// True for a valid cookie value (RFC 6265 §4.1.1 `cookie-value`): `cookie-octet`s,
/// optionally in double quotes. Server tags written into cookies must pass it.
pub fn is_cookie_value(value: &[u8]) -> bool {
    let inner = match value {
        [b'"', inner @ .., b'"'] => inner,
        _ => value,
    };
    inner.iter().all(|&b| matches!(b, 0x21 | 0x23..=0x2b | 0x2d..=0x3a | 0x3c..=0x5b | 0x5d..=0x7e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(h: &str) -> Vec<(&str, &str)> {
        cookie_pairs(h.as_bytes())
            .map(|(n, v)| (std::str::from_utf8(n).unwrap(), std::str::from_utf8(v).unwrap()))
            .collect()
    }

    #[test]
    fn pairs_tolerate_missing_spaces_empty_parts_and_bare_values() {
        assert_eq!(pairs("a=1; b=2"), [("a", "1"), ("b", "2")]);
        assert_eq!(
            pairs(" a = 1 ;b=\"x y\";;  ; c= ;bare; =v;"),
            [("a", "1"), ("b", "\"x y\""), ("c", ""), ("", "bare"), ("", "v")]
        );
        assert_eq!(pairs(""), []);
        assert_eq!(find_cookie(b"ab=1; a=2; a=3", b"a"), Some(&b"2"[..]));
        assert_eq!(find_cookie(b"A=1", b"a"), None);
    }

    #[test]
    fn rewrite_keeps_verbatim_and_reports_change() {
        let h = b"a=1;b = 2; c=3";
        let mut out = Vec::new();
        assert!(!rewrite_cookie_header(h, &mut out, |_, _| CookieEdit::Keep));
        out.clear();
        let changed = rewrite_cookie_header(h, &mut out, |n, v| match n {
            b"a" => CookieEdit::Remove,
            b"c" => CookieEdit::Replace { name: b"C", value: &v[..0] },
            _ => CookieEdit::Keep,
        });
        assert!(changed);
        assert_eq!(out, b"b = 2; C=");
        out.clear();
        assert!(rewrite_cookie_header(h, &mut out, |_, _| CookieEdit::Remove));
        assert!(out.is_empty());
    }

    #[test]
    fn set_cookie_parts() {
        let c = parse_set_cookie(b" SID = abc ; Path=/; HttpOnly").unwrap();
        assert_eq!((c.name, c.value, c.attrs), (&b"SID"[..], &b"abc"[..], &b"; Path=/; HttpOnly"[..]));
        let mut out = Vec::new();
        SetCookie::write(b"n", b"v", c.attrs, &mut out);
        assert_eq!(out, b"n=v; Path=/; HttpOnly");
        assert_eq!(parse_set_cookie(b"novalue; Path=/"), None);
        assert_eq!(parse_set_cookie(b"=v"), None);
        assert_eq!(parse_set_cookie(b"x=").map(|c| c.value), Some(&b""[..]));
    }

    #[test]
    fn names_and_values() {
        assert!(is_cookie_name(b"JSESSIONID") && is_cookie_name(b"a~b!"));
        assert!(!is_cookie_name(b"") && !is_cookie_name(b"a b") && !is_cookie_name(b"a=b"));
        assert!(is_cookie_value(b"") && is_cookie_value(b"\"s1|x\"") && is_cookie_value(b"s1~v"));
        assert!(!is_cookie_value(b"a;b") && !is_cookie_value(b"a b") && !is_cookie_value(b"a,b"));
    }
}
