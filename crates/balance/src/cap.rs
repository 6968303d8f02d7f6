//! CAP, the client-aware policy (Casalicchio & Colajanni, WWW10 2001; used by ClubWeb's
//! switch, Andreolini et al.).
//!
//! The switch sorts each request into a class by what it will cost the server (static,
//! disk-bound, CPU-bound, dynamic...) and keeps one round-robin cursor per class, so
//! every server receives an even share of every class and no server's disk or CPU gets
//! all the heavy requests. Load is not looked at: the mix does the balancing.
//!
//! Classes and their patterns come from [`Params::cap_classes`], tried in order; the
//! first class with a matching pattern wins, and a request matching none (or with no
//! key) is in the last class. The key is the request path, maybe with a query. A pattern
//! starting with `.` matches the end of the path without its query (`/a.gif?v=2` is a
//! `.gif`), ignoring ASCII case (`.JPG` is an image like `.jpg`); one starting with `/` is
//! a prefix of the key; any other is a substring of the whole key, query included, which
//! lets an operator classify by a query parameter. Patterns are copied into byte strings
//! and tables when the scheduler is built, so classifying a request allocates nothing.

use crate::rr::eligible;
use crate::{Candidate, Member, Params, Scheduler};

/// Longest extension looked up by table (packed into a `u64`); longer ones (rare) are
/// compared one by one.
const PACKED: usize = 8;

/// A pattern and the index of its class.
type Pattern = (Box<[u8]>, usize);

/// An extension of at most [`PACKED`] bytes, lower-cased and packed little-endian, its
/// length (so a NUL byte cannot pass for padding), and its first class.
type Extension = (u64, usize, usize);

/// Client-aware policy: round robin per request class.
///
/// Classification takes the lowest class index with a matching pattern, which is the
/// first class in order with one. Extensions are looked up, not scanned: every `.` in
/// the path's last few bytes starts a candidate suffix, which is lower-cased, packed into
/// a `u64` and binary searched among all classes' extensions — one lookup per dot instead
/// of one comparison per pattern. With the default classes a pick stays well under
/// 100 ns.
#[derive(Debug)]
pub(crate) struct Cap {
    /// Short extensions, sorted by (packed, length).
    extensions: Vec<Extension>,
    /// Length of the longest entry of `extensions`.
    longest_extension: usize,
    /// Lower-cased extensions longer than [`PACKED`], in class order.
    long_extensions: Vec<Pattern>,
    /// Prefixes and substrings, in class order.
    prefixes: Vec<Pattern>,
    substrings: Vec<Pattern>,
    /// Per class, the index to try first on the class's next pick; at least one class,
    /// the last taking what no other matches.
    cursors: Vec<usize>,
}

impl Cap {
    pub(crate) fn new(params: &Params) -> Self {
        let mut cap = Cap {
            extensions: Vec::new(),
            longest_extension: 0,
            long_extensions: Vec::new(),
            prefixes: Vec::new(),
            substrings: Vec::new(),
            cursors: vec![0; params.cap_classes.len().max(1)],
        };
        for (class, c) in params.cap_classes.iter().enumerate() {
            for p in &c.patterns {
                let bytes = p.as_bytes();
                match bytes.first() {
                    Some(b'.') if bytes.len() <= PACKED => {
                        cap.extensions.push((pack(bytes), bytes.len(), class))
                    }
                    Some(b'.') => cap.long_extensions.push((bytes.to_ascii_lowercase().into(), class)),
                    Some(b'/') => cap.prefixes.push((bytes.into(), class)),
                    _ => cap.substrings.push((bytes.into(), class)),
                }
            }
        }
        // Sorted by pattern then class: dedup keeps each pattern's first class.
        cap.extensions.sort_unstable();
        cap.extensions.dedup_by_key(|&mut (packed, len, _)| (packed, len));
        cap.longest_extension = cap.extensions.iter().map(|&(_, len, _)| len).max().unwrap_or(0);
        cap
    }

    /// The class of a request: the first whose patterns match, else the last.
    fn classify(&self, key: Option<&[u8]>) -> usize {
        let last = self.cursors.len() - 1;
        let Some(key) = key else { return last };
        let path = &key[..find_byte(key, b'?')];
        let mut best = last;
        let tail = path.len().saturating_sub(self.longest_extension);
        for dot in (tail..path.len()).rev().filter(|&i| path[i] == b'.') {
            let suffix = &path[dot..];
            let probe = (pack(suffix), suffix.len());
            if let Ok(found) = self.extensions.binary_search_by_key(&probe, |&(p, len, _)| (p, len)) {
                best = best.min(self.extensions[found].2);
            }
        }
        let ends_with =
            |e: &[u8]| path.len() >= e.len() && path[path.len() - e.len()..].eq_ignore_ascii_case(e);
        best = first_match(&self.long_extensions, ends_with, best);
        best = first_match(&self.prefixes, |p| key.starts_with(p), best);
        first_match(&self.substrings, |p| contains(key, p), best)
    }
}

impl Scheduler for Cap {
    fn rebuild(&mut self, _: &[Member<'_>]) {}

    fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
        let class = self.classify(key);
        let next = &mut self.cursors[class];
        // Wraps by comparison, not `%`: a division is a tenth of a pick's cost here.
        let start = if *next < servers.len() { *next } else { 0 };
        let picked = (start..servers.len()).chain(0..start).find(|&i| eligible(&servers[i]))?;
        *next = picked + 1;
        Some(picked)
    }
}

/// The class of the first pattern (in class order) of a class before `best` that
/// `matches`, else `best`.
fn first_match(patterns: &[Pattern], matches: impl Fn(&[u8]) -> bool, best: usize) -> usize {
    patterns.iter().take_while(|&&(_, c)| c < best).find(|(p, _)| matches(p)).map_or(best, |&(_, c)| c)
}

/// Up to [`PACKED`] bytes, lower-cased, as a little-endian `u64` (zero padded).
fn pack(bytes: &[u8]) -> u64 {
    let mut word = [0u8; PACKED];
    for (w, b) in word.iter_mut().zip(bytes) {
        *w = b.to_ascii_lowercase();
    }
    u64::from_le_bytes(word)
}

/// Index of the first `byte` in `hay`, or its length: eight bytes at a time (a byte-wise
/// loop was a third of a pick's cost on typical paths).
fn find_byte(hay: &[u8], byte: u8) -> usize {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = hay.chunks_exact(PACKED);
    let mut at = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; PACKED];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word) ^ (LOW * u64::from(byte));
        // The lowest set bit marks the first zero byte of x exactly (the borrow can only
        // cause false marks above a true one).
        let zero = x.wrapping_sub(LOW) & !x & HIGH;
        if zero != 0 {
            return at + (zero.trailing_zeros() / 8) as usize;
        }
        at += PACKED;
    }
    at + chunks.remainder().iter().position(|&b| b == byte).unwrap_or(chunks.remainder().len())
}

/// `needle` occurs in `haystack` (an empty needle always does).
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::up;
    use crate::CapClass;

    fn class_of(cap: &Cap, key: &str) -> &'static str {
        ["static", "disk", "cpu", "dynamic"][cap.classify(Some(key.as_bytes()))]
    }

    #[test]
    fn default_classes() {
        let cap = Cap::new(&Params::default());
        assert_eq!(class_of(&cap, "/index.html"), "static");
        assert_eq!(class_of(&cap, "/img/LOGO.PNG?v=3"), "static");
        assert_eq!(class_of(&cap, "/a.html.gz"), "disk");
        assert_eq!(class_of(&cap, "/download/x"), "disk");
        assert_eq!(class_of(&cap, "/cgi-bin/search?q=a.html"), "cpu");
        assert_eq!(class_of(&cap, "/index.php?page=2"), "cpu");
        assert_eq!(class_of(&cap, "/api/users"), "dynamic");
        assert_eq!(class_of(&cap, ""), "dynamic");
        assert_eq!(cap.classify(None), 3);
    }

    #[test]
    fn substring_and_last_class_patterns() {
        let class = |name: &str, patterns: &[&str]| CapClass {
            name: name.into(),
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
        };
        let params = Params {
            cap_classes: vec![class("search", &["q="]), class("other", &[".never"])],
            ..Params::default()
        };
        let cap = Cap::new(&params);
        assert_eq!(cap.classify(Some(b"/find?q=rust")), 0);
        assert_eq!(cap.classify(Some(b"/find")), 1);
        let empty = Cap::new(&Params { cap_classes: Vec::new(), ..Params::default() });
        assert_eq!(empty.classify(Some(b"/x.html")), 0);
    }

    #[test]
    fn first_class_with_a_match_wins() {
        let class = |patterns: &[&str]| CapClass {
            name: String::new(),
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
        };
        let long = format!(".{}", "x".repeat(40));
        let params = |classes| Params { cap_classes: classes, ..Params::default() };
        let cap = Cap::new(&params(vec![class(&[".tar.gz"]), class(&[".gz", &long]), class(&[])]));
        assert_eq!(cap.classify(Some(b"/a.tar.gz")), 0);
        assert_eq!(cap.classify(Some(b"/a.TAR.Gz?x=.y")), 0);
        assert_eq!(cap.classify(Some(b"/a.gz")), 1);
        assert_eq!(cap.classify(Some(format!("/a{}", long.to_uppercase()).as_bytes())), 1);
        assert_eq!(cap.classify(Some(b"/a.tar")), 2);
        let cap = Cap::new(&params(vec![class(&[".gz"]), class(&[".tar.gz", "/a"]), class(&["a"])]));
        assert_eq!(cap.classify(Some(b"/a.tar.gz")), 0);
        assert_eq!(cap.classify(Some(b"/a.tar")), 1);
        assert_eq!(cap.classify(Some(b"/b.tar?a")), 2);
    }

    #[test]
    fn finds_the_first_byte() {
        for hay in [&b""[..], b"?", b"abc", b"/a/b/c.gif?x?y", b"/aaaaaaa?", b"/aaaaaaaa?", b"????????"] {
            let want = hay.iter().position(|&b| b == b'?').unwrap_or(hay.len());
            assert_eq!(find_byte(hay, b'?'), want, "{hay:?}");
        }
        // 0xBF, 0x3F + 0x80, must not pass for '?'.
        assert_eq!(find_byte(&[0xbf; 20], b'?'), 20);
    }

    #[test]
    fn each_class_has_its_own_turn() {
        let mut cap = Cap::new(&Params::default());
        let servers = [up(), up(), up()];
        let picks: Vec<_> = ["/a.gif", "/b.gif", "/x.php", "/c.gif", "/y.php"]
            .iter()
            .filter_map(|k| cap.pick(&servers, Some(k.as_bytes())))
            .collect();
        assert_eq!(picks, [0, 1, 0, 2, 1]);
        let mut dead = servers;
        dead[0].usable = false;
        assert_eq!(cap.pick(&dead, Some(b"/d.gif")), Some(1));
        assert_eq!(cap.pick(&[], Some(b"/d.gif")), None);
    }
}
