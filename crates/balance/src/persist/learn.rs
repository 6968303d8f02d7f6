//! `learn` persistence (cookie learning): the balancer watches the session cookie a
//! server sets and remembers which server set which value; a request carrying that value
//! goes back there. Nothing in the traffic changes.
//!
//! The mode owns its table ([`LearnMode::table`]), a [`StickTable`] keyed by the cookie
//! value, one per group, shared by all workers. Learned entries expire like any stick
//! table entry (idle time, optional max life) and go LRU at capacity. A Set-Cookie with
//! an empty value (a deletion) teaches nothing.

use std::time::{Duration, Instant};

use super::cookie::{cookie_pairs, parse_set_cookie};
use super::stick::StickTable;

/// Cookie learning on the server's session cookie `NAME`.
#[derive(Debug)]
pub struct LearnMode {
    name: Box<[u8]>,
    table: StickTable<Box<[u8]>>,
}

impl LearnMode {
    /// Learning the cookie named `name`, remembering at most `capacity` values, each
    /// for `idle` after its last use and at most `max_life` after it was learned.
    pub fn new(name: &str, capacity: usize, idle: Duration, max_life: Option<Duration>) -> Self {
        Self { name: name.as_bytes().into(), table: StickTable::new(capacity, idle, max_life) }
    }

    /// The cookie's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The table of learned values (admin view, `retain_servers` on reload).
    pub fn table(&self) -> &StickTable<Box<[u8]>> {
        &self.table
    }

    /// The value a `Set-Cookie:` header value sets for our cookie; `None` when it is
    /// another cookie or a deletion (empty value).
    pub fn learned_value<'a>(&self, set_cookie_value: &'a [u8]) -> Option<&'a [u8]> {
        parse_set_cookie(set_cookie_value)
            .filter(|c| c.name == &*self.name && !c.value.is_empty())
            .map(|c| c.value)
    }

    /// The value of our cookie in a `Cookie:` header value (the first one).
    pub fn request_value<'a>(&self, cookie_header: &'a [u8]) -> Option<&'a [u8]> {
        cookie_pairs(cookie_header).find(|&(name, _)| name == &*self.name).map(|(_, value)| value)
    }

    /// Records that `server` set our cookie in this `Set-Cookie:` value; `false` when it
    /// sets nothing of ours.
    pub fn learn(&self, set_cookie_value: &[u8], server: u64, now: Instant) -> bool {
        let Some(value) = self.learned_value(set_cookie_value) else {
            return false;
        };
        self.table.put(value.into(), server, now);
        true
    }

    /// The server that set a value of our cookie found in a `Cookie:` header value (the
    /// first known one, when the client sends several).
    pub fn lookup(&self, cookie_header: &[u8], now: Instant) -> Option<u64> {
        if self.table.is_empty() {
            return None;
        }
        cookie_pairs(cookie_header)
            .filter(|&(name, _)| name == &*self.name)
            .find_map(|(_, value)| self.table.get(value, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_from_responses_and_routes_requests() {
        let m = LearnMode::new("PHPSESSID", 100, Duration::from_secs(60), None);
        let now = Instant::now();
        assert!(m.learn(b"PHPSESSID=abc; Path=/", 3, now));
        assert!(!m.learn(b"PHPSESSID=; Max-Age=0", 4, now));
        assert!(!m.learn(b"OTHER=abc", 4, now));
        assert_eq!(m.request_value(b"a=1; PHPSESSID=abc"), Some(&b"abc"[..]));
        assert_eq!(m.lookup(b"PHPSESSID=zzz; PHPSESSID=abc", now), Some(3));
        assert_eq!(m.lookup(b"PHPSESSID=abc", now + Duration::from_secs(60)), None);
    }
}
