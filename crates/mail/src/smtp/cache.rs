//! Remembered server refusals, so a client's retry learns at RCPT what the server said.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::outcome::Refusal;
use super::path::Mailbox;
use super::reply::Reply;

/// Refusals by recipient (the key is [`Mailbox::key`]), each kept for a while.
///
/// Sans-io: the caller passes the time. One cache per listener, shared by its workers
/// (behind a mutex: it is touched once per recipient, not per byte), so a retry that lands
/// on another worker still finds the refusal.
#[derive(Debug)]
pub struct RefusalCache {
    entries: HashMap<String, (Reply, Instant)>,
    capacity: usize,
    permanent_ttl: Duration,
    transient_ttl: Duration,
}

impl RefusalCache {
    /// A cache of at most `capacity` recipients. A 5xx refusal is kept `permanent_ttl`
    /// (long: the mailbox does not exist). A 4xx one is kept `transient_ttl`, which should
    /// be short (a minute) or zero (not kept): a full mailbox clears by itself, and a
    /// greylisting server must see the client's retry itself.
    pub fn new(capacity: usize, permanent_ttl: Duration, transient_ttl: Duration) -> Self {
        RefusalCache { entries: HashMap::new(), capacity, permanent_ttl, transient_ttl }
    }

    /// Records the refusals of a replay ([`super::Outcome::Refused`]).
    pub fn remember(&mut self, refused: &[Refusal], now: Instant) {
        if self.capacity == 0 {
            return;
        }
        for r in refused {
            let ttl = if r.reply.is_transient() { self.transient_ttl } else { self.permanent_ttl };
            if ttl.is_zero() {
                continue;
            }
            if self.entries.len() >= self.capacity && !self.entries.contains_key(&r.rcpt.key()) {
                self.make_room(now);
            }
            self.entries.insert(r.rcpt.key(), (r.reply.clone(), now + ttl));
        }
    }

    /// The server's refusal of `rcpt`, if it is still fresh: answer the RCPT with it
    /// ([`super::Front::reject_rcpt`] with its code and text).
    pub fn check(&mut self, rcpt: &Mailbox, now: Instant) -> Option<Reply> {
        let key = rcpt.key();
        match self.entries.get(&key) {
            Some((reply, until)) if *until > now => Some(reply.clone()),
            Some(_) => {
                self.entries.remove(&key);
                None
            }
            None => None,
        }
    }

    /// How many refusals are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No refusal is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops the expired entries, or if none, the one closest to expiry. O(n), but only
    /// when full, and n is bounded by `capacity`.
    fn make_room(&mut self, now: Instant) {
        self.entries.retain(|_, (_, until)| *until > now);
        if self.entries.len() < self.capacity {
            return;
        }
        let oldest = self.entries.iter().min_by_key(|(_, (_, until))| *until).map(|(k, _)| k.clone());
        if let Some(key) = oldest {
            self.entries.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(rcpt: &str, code: u16) -> Refusal {
        Refusal { rcpt: Mailbox::parse(rcpt).unwrap(), reply: Reply::new(code, "x") }
    }

    #[test]
    fn expires_and_evicts() {
        let t0 = Instant::now();
        let (long, short) = (Duration::from_secs(3600), Duration::from_secs(60));
        let mut c = RefusalCache::new(2, long, short);
        c.remember(&[refusal("a@X.example", 550), refusal("b@x.example", 450)], t0);
        let a = Mailbox::parse("a@x.EXAMPLE").unwrap();
        let b = Mailbox::parse("b@x.example").unwrap();
        assert_eq!(c.check(&a, t0).map(|r| r.code), Some(550));
        assert_eq!(c.check(&b, t0 + short / 2).map(|r| r.code), Some(450));
        assert_eq!(c.check(&b, t0 + short), None);
        assert_eq!(c.len(), 1);
        c.remember(&[refusal("c@x.example", 550)], t0 + Duration::from_secs(1));
        c.remember(&[refusal("d@x.example", 550)], t0 + Duration::from_secs(2));
        assert_eq!(c.len(), 2);
        assert_eq!(c.check(&a, t0 + Duration::from_secs(3)), None, "oldest evicted");
        assert!(!c.is_empty());
    }

    #[test]
    fn zero_ttl_keeps_nothing() {
        let mut c = RefusalCache::new(10, Duration::from_secs(60), Duration::ZERO);
        c.remember(&[refusal("a@x", 450), refusal("b@x", 550)], Instant::now());
        assert_eq!(c.len(), 1);
        assert!(RefusalCache::new(0, Duration::from_secs(1), Duration::from_secs(1)).is_empty());
    }
}
