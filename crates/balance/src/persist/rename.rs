//! `rename` persistence: cookie name rewriting (seed 001 §IV.B). The server's session
//! cookie keeps its value; its *name* carries the routing, in the same number of bytes,
//! so the header never changes length (the paper's point: no re-fragmentation, and edits
//! can be made in place).
//!
//! Shape: the first 8 bytes of the configured name `NAME` (at least 8 long) become
//! `KW CLS SRV` — a 2-byte keyword marking the rewrite, a 3-byte content class, a 3-byte
//! server code — and the rest of the name stays: `PHPSESSID=ABC` → `CS0000A3D=ABC`.
//! Class and server codes are 3 digits of uppercase base 36 (`0-9A-Z`, 46,656 values;
//! [`rename_code`] / [`rename_index`]); the class comes from the proxy (its URL class,
//! default [`DEFAULT_CLASS`]).
//!
//! Keyword: [`DEFAULT_KEYWORD`] `CS` (for cswitch) rather than the paper's `DR`;
//! configurable. A request cookie is read as renamed only when it has the configured
//! name's length and tail, starts with the keyword, has codes in the alphabet, and is not
//! the configured name itself — so a foreign cookie is taken for ours only if it matches
//! all of that, and then the proxy still checks that the server code names a server.
//!
//! On the request, the proxy picks a hit (the paper's URL-switching coexistence: the one
//! whose class matches the request's, [`RenameMode::find`]) and restores that cookie's
//! name in place ([`RenameMode::restore`]) so the application sees its own cookie.

use super::cookie::{is_cookie_name, pair_spans, set_cookie_spans, PairSpans};

/// The keyword marking a renamed cookie unless the config says otherwise.
pub const DEFAULT_KEYWORD: [u8; 2] = *b"CS";

/// The content class of requests the proxy classifies no further.
pub const DEFAULT_CLASS: [u8; 3] = *b"000";

/// Shortest configured name: keyword, class and server code must fit.
pub const MIN_NAME_LEN: usize = 8;

/// How many distinct class or server codes there are (36³).
pub const CODE_COUNT: usize = 36 * 36 * 36;

const ALPHABET: &[u8; 36] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// The 3-byte code of server (or class) number `index`; `None` past [`CODE_COUNT`].
pub fn rename_code(index: usize) -> Option<[u8; 3]> {
    (index < CODE_COUNT)
        .then(|| [ALPHABET[index / (36 * 36)], ALPHABET[index / 36 % 36], ALPHABET[index % 36]])
}

/// The number a 3-byte code stands for; `None` unless it is 3 bytes of `0-9A-Z`.
pub fn rename_index(code: &[u8]) -> Option<usize> {
    let [a, b, c] = code else {
        return None;
    };
    let digit = |d: u8| ALPHABET.iter().position(|&x| x == d);
    Some(digit(*a)? * 36 * 36 + digit(*b)? * 36 + digit(*c)?)
}

/// A renamed cookie found in a `Cookie:` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenameHit {
    /// The content class it was set for.
    pub class: [u8; 3],
    /// The server code it carries.
    pub server: [u8; 3],
    /// [`rename_index`] of `server`.
    pub server_index: usize,
    /// Offset of the cookie's name in the header, for [`RenameMode::restore`].
    name_at: usize,
}

/// Cookie name rewriting on the session cookie `NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenameMode {
    name: Box<[u8]>,
    keyword: [u8; 2],
}

impl RenameMode {
    /// Rewriting the cookie named `name` with `keyword`; `None` when the name is not a
    /// cookie name ([`is_cookie_name`]) of at least [`MIN_NAME_LEN`] bytes or the keyword
    /// is not two token bytes.
    pub fn new(name: &str, keyword: [u8; 2]) -> Option<Self> {
        let valid_keyword =
            keyword.iter().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b));
        (name.len() >= MIN_NAME_LEN && is_cookie_name(name.as_bytes()) && valid_keyword)
            .then(|| Self { name: name.as_bytes().into(), keyword })
    }

    /// The configured (application's) cookie name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The keyword marking a renamed cookie.
    pub fn keyword(&self) -> [u8; 2] {
        self.keyword
    }

    /// Appends the renamed name for `class` and `server` to `out`; `false` (nothing
    /// appended) when a code is not 3 bytes of `0-9A-Z`.
    pub fn encode_name(&self, class: [u8; 3], server: [u8; 3], out: &mut Vec<u8>) -> bool {
        if rename_index(&class).is_none() || rename_index(&server).is_none() {
            return false;
        }
        out.extend_from_slice(&self.keyword);
        out.extend_from_slice(&class);
        out.extend_from_slice(&server);
        out.extend_from_slice(&self.name[MIN_NAME_LEN..]);
        true
    }

    /// `(class, server)` of a renamed name; `None` for any other name, the configured
    /// one included.
    pub fn decode_name(&self, name: &[u8]) -> Option<([u8; 3], [u8; 3])> {
        if name.len() != self.name.len()
            || name == &*self.name
            || name[..2] != self.keyword
            || name[MIN_NAME_LEN..] != self.name[MIN_NAME_LEN..]
        {
            return None;
        }
        let class = [name[2], name[3], name[4]];
        let server = [name[5], name[6], name[7]];
        (rename_index(&class).is_some() && rename_index(&server).is_some()).then_some((class, server))
    }

    /// Renames our cookie in a `Set-Cookie:` header value in place for `class` and
    /// `server`; `false` (untouched) when the header sets another cookie or a code is
    /// not 3 bytes of `0-9A-Z`. The length never changes.
    pub fn rewrite_set_cookie(&self, set_cookie_value: &mut [u8], class: [u8; 3], server: [u8; 3]) -> bool {
        let Some((name, _, _)) = set_cookie_spans(set_cookie_value) else {
            return false;
        };
        if set_cookie_value[name.clone()] != *self.name
            || rename_index(&class).is_none()
            || rename_index(&server).is_none()
        {
            return false;
        }
        let head = &mut set_cookie_value[name.start..name.start + MIN_NAME_LEN];
        head[..2].copy_from_slice(&self.keyword);
        head[2..5].copy_from_slice(&class);
        head[5..].copy_from_slice(&server);
        true
    }

    /// The renamed cookies of a `Cookie:` header value, in order.
    pub fn hits<'s, 'h>(&'s self, cookie_header: &'h [u8]) -> RenameHits<'s, 'h> {
        RenameHits { mode: self, header: cookie_header, spans: pair_spans(cookie_header) }
    }

    /// The first renamed cookie, of content class `class` when given.
    pub fn find(&self, cookie_header: &[u8], class: Option<[u8; 3]>) -> Option<RenameHit> {
        self.hits(cookie_header).find(|hit| class.is_none() || class == Some(hit.class))
    }

    /// Gives the cookie of `hit` (found in this same header) its configured name back, in
    /// place; `false` when the header no longer has a renamed name there.
    pub fn restore(&self, cookie_header: &mut [u8], hit: &RenameHit) -> bool {
        let Some(name) = cookie_header.get_mut(hit.name_at..hit.name_at + self.name.len()) else {
            return false;
        };
        if self.decode_name(name).is_none() {
            return false;
        }
        name.copy_from_slice(&self.name);
        true
    }

    /// Restores every renamed cookie's name in place; returns how many.
    pub fn restore_all(&self, cookie_header: &mut [u8]) -> usize {
        let found: Vec<RenameHit> = self.hits(cookie_header).collect();
        found.iter().filter(|hit| self.restore(cookie_header, hit)).count()
    }
}

/// Iterator over the renamed cookies of a `Cookie:` header; see [`RenameMode::hits`].
#[derive(Clone, Debug)]
pub struct RenameHits<'s, 'h> {
    mode: &'s RenameMode,
    header: &'h [u8],
    spans: PairSpans<'h>,
}

impl Iterator for RenameHits<'_, '_> {
    type Item = RenameHit;

    fn next(&mut self) -> Option<RenameHit> {
        for span in self.spans.by_ref() {
            if let Some((class, server)) = self.mode.decode_name(&self.header[span.name.clone()]) {
                let server_index = rename_index(&server)?;
                return Some(RenameHit { class, server, server_index, name_at: span.name.start });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode() -> RenameMode {
        RenameMode::new("PHPSESSID", DEFAULT_KEYWORD).unwrap()
    }

    #[test]
    fn codes_are_base36_uppercase() {
        assert_eq!(rename_code(0), Some(*b"000"));
        assert_eq!(rename_code(36 * 36 * 9 + 36 * 12 + 1), Some(*b"9C1"));
        assert_eq!(rename_code(CODE_COUNT), None);
        assert_eq!(rename_index(b"ZZZ"), Some(CODE_COUNT - 1));
        assert_eq!((rename_index(b"9c1"), rename_index(b"00"), rename_index(b"0000")), (None, None, None));
    }

    #[test]
    fn response_rename_keeps_length_and_request_restores() {
        let m = mode();
        let mut set = b"PHPSESSID=ABC; Path=/".to_vec();
        assert!(m.rewrite_set_cookie(&mut set, *b"018", *b"9C1"));
        assert_eq!(set, b"CS0189C1D=ABC; Path=/");

        let mut req = b"a=1; CS0189C1D=ABC; CS0020A3D=X".to_vec();
        let hit = m.find(&req, Some(*b"002")).unwrap();
        assert_eq!((hit.class, hit.server, hit.server_index), (*b"002", *b"0A3", 10 * 36 + 3));
        assert!(m.restore(&mut req, &hit));
        assert_eq!(req, b"a=1; CS0189C1D=ABC; PHPSESSID=X");
        assert!(!m.restore(&mut req, &hit));
        assert_eq!(m.restore_all(&mut req), 1);
        assert_eq!(req, b"a=1; PHPSESSID=ABC; PHPSESSID=X");
    }

    #[test]
    fn leaves_other_cookies_alone() {
        let m = mode();
        let mut set = b"OTHER=1".to_vec();
        assert!(!m.rewrite_set_cookie(&mut set, DEFAULT_CLASS, *b"001"));
        assert!(!m.rewrite_set_cookie(&mut b"PHPSESSID=1".to_vec(), *b"abc", *b"001"));
        for req in [&b"PHPSESSID=1"[..], b"CS0000010=1", b"CS000001DX=1", b"DR000001D=1", b"CS00a001D=1"] {
            assert_eq!(m.find(req, None), None, "{}", String::from_utf8_lossy(req));
        }
        assert!(RenameMode::new("SHORT", DEFAULT_KEYWORD).is_none());
        assert!(RenameMode::new("LONGNAME", *b"C=").is_none());
    }
}
