//! `prefix` persistence (HAProxy's `cookie NAME prefix`): the server's own session
//! cookie carries the server's tag in front of its value.
//!
//! On the way out, `Set-Cookie: NAME=v` becomes `NAME=TAG~v`; on the way in, `NAME=TAG~v`
//! routes to `TAG` and reaches the server as `NAME=v`, so the application never sees the
//! prefix. The delimiter is `~` (as HAProxy), split at its first occurrence: tags must be
//! non-empty and free of `~`, values may contain anything. A value with no delimiter, or
//! with nothing before it, is not ours: it routes nowhere and passes unchanged.

use super::cookie::{cookie_pairs, parse_set_cookie, rewrite_cookie_header, CookieEdit, SetCookie};

/// Separates the server tag from the application's value.
pub const PREFIX_DELIMITER: u8 = b'~';

/// Appends `TAG~value` to `out`.
pub fn add_prefix(tag: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.reserve(tag.len() + 1 + value.len());
    out.extend_from_slice(tag);
    out.push(PREFIX_DELIMITER);
    out.extend_from_slice(value);
}

/// `TAG~value` → `(TAG, value)`; `None` without a delimiter or with an empty tag.
pub fn split_prefix(value: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = value.iter().position(|&b| b == PREFIX_DELIMITER)?;
    (at > 0).then(|| (&value[..at], &value[at + 1..]))
}

/// `prefix` persistence on the server's session cookie `NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixMode {
    name: Box<[u8]>,
}

impl PrefixMode {
    /// Prefixing on the cookie named `name` (the application's, e.g. `JSESSIONID`).
    pub fn new(name: &str) -> Self {
        Self { name: name.as_bytes().into() }
    }

    /// The cookie's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// When a `Set-Cookie:` value from server `tag` sets our cookie, appends the prefixed
    /// header value to `out` and returns `true`; otherwise forward the original.
    pub fn on_set_cookie(&self, set_cookie_value: &[u8], tag: &str, out: &mut Vec<u8>) -> bool {
        match parse_set_cookie(set_cookie_value) {
            Some(c) if c.name == &*self.name => {
                let mut value = Vec::with_capacity(tag.len() + 1 + c.value.len());
                add_prefix(tag.as_bytes(), c.value, &mut value);
                SetCookie::write(c.name, &value, c.attrs, out);
                true
            }
            _ => false,
        }
    }

    /// The tag of the first prefixed cookie of ours in a `Cookie:` header value.
    pub fn request_tag<'h>(&self, cookie_header: &'h [u8]) -> Option<&'h [u8]> {
        cookie_pairs(cookie_header)
            .filter(|&(name, _)| name == &*self.name)
            .find_map(|(_, value)| split_prefix(value).map(|(tag, _)| tag))
    }

    /// Appends to `out` the `Cookie:` header value with the prefix taken off every cookie
    /// of ours; `false` when there was none (forward the original).
    pub fn strip(&self, cookie_header: &[u8], out: &mut Vec<u8>) -> bool {
        rewrite_cookie_header(cookie_header, out, |name, value| match split_prefix(value) {
            Some((_, rest)) if name == &*self.name => CookieEdit::Replace { name, value: rest },
            _ => CookieEdit::Keep,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_set_cookie_and_strips_requests() {
        let m = PrefixMode::new("JSESSIONID");
        let mut out = Vec::new();
        assert!(m.on_set_cookie(b"JSESSIONID=a~b; Path=/", "s1", &mut out));
        assert_eq!(out, b"JSESSIONID=s1~a~b; Path=/");
        assert!(!m.on_set_cookie(b"OTHER=x", "s1", &mut Vec::new()));

        let req = b"x=1; JSESSIONID=s1~a~b";
        assert_eq!(m.request_tag(req), Some(&b"s1"[..]));
        out.clear();
        assert!(m.strip(req, &mut out));
        assert_eq!(out, b"x=1; JSESSIONID=a~b");
    }

    #[test]
    fn foreign_values_route_nowhere_and_pass() {
        let m = PrefixMode::new("JSESSIONID");
        for req in [&b"JSESSIONID=plain"[..], b"JSESSIONID=~x", b"OTHER=s1~x"] {
            assert_eq!(m.request_tag(req), None);
            assert!(!m.strip(req, &mut Vec::new()));
        }
    }
}
