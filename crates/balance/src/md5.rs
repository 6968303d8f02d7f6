//! MD5 modulo N: the classic URL-hashing method (the `MD5` column of seed 002, the Korean
//! paper comparing KTCPVS schedulers).
//!
//! The key's MD5 digest, first 8 bytes read big-endian as a `u64`, modulo the number of
//! servers, names the server. Simple and stateless, with the weakness the consistent
//! methods were invented to fix: the modulus is the group size, so adding or removing one
//! server moves almost every key (a key stays only if `h mod N = h mod N±1`, about
//! 1/(N+1) of them; the hashing tests measure ≈ 89 % moved going from 8 to 9 servers).
//!
//! Weights are ignored, except that a server of weight 0 is never picked. When the server
//! a key names is not eligible (down, draining, already tried, weight 0), the key is
//! hashed again over the eligible servers only: `h mod E` among the `E` eligible ones,
//! counted in member order. That keeps the spare load spread over all survivors instead of
//! doubling the next server's share (as walking to the next index would), and keeps keys
//! of healthy servers where they are; the price is one pass over the slice on that path.
//!
//! MD5 is slow for a per-request hash (a full 64-byte compression even for a short key),
//! which is one reason the other methods use XXH3; this one is MD5 by definition.

use md5::{Digest, Md5};

use crate::keyhash::NoKey;
use crate::rr::eligible;
use crate::{Candidate, Member, Params, Scheduler};

/// MD5 of the key modulo the number of servers.
#[derive(Debug, Default)]
pub(crate) struct Md5Modulo {
    /// Round robin for requests without a key.
    no_key: NoKey,
}

impl Md5Modulo {
    pub(crate) fn new(_: &Params) -> Self {
        Self::default()
    }
}

/// The first 8 bytes of the key's MD5 digest, big-endian.
fn md5_u64(key: &[u8]) -> u64 {
    let digest = Md5::digest(key);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

impl Scheduler for Md5Modulo {
    fn rebuild(&mut self, _: &[Member<'_>]) {}

    fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
        let Some(key) = key else {
            return self.no_key.pick(servers);
        };
        if servers.is_empty() {
            return None;
        }
        let h = md5_u64(key);
        let home = (h % servers.len() as u64) as usize;
        if eligible(&servers[home]) {
            return Some(home);
        }
        let live = servers.iter().filter(|c| eligible(c)).count();
        if live == 0 {
            return None;
        }
        let nth = (h % live as u64) as usize;
        servers.iter().enumerate().filter(|(_, c)| eligible(c)).nth(nth).map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::up;

    #[test]
    fn digest_prefix_is_big_endian() {
        // RFC 1321's test vector: MD5("abc") = 900150983cd24fb0 d6963f7d28e17f72.
        assert_eq!(md5_u64(b"abc"), 0x9001_5098_3CD2_4FB0);
    }

    #[test]
    fn modulo_then_rehash_over_eligible() {
        let mut s = Md5Modulo::default();
        let mut servers = [up(), up(), up(), up(), up()];
        let h = md5_u64(b"abc");
        let home = (h % 5) as usize;
        assert_eq!(s.pick(&servers, Some(b"abc")), Some(home));
        servers[home].usable = false;
        let live: Vec<usize> = (0..5).filter(|&i| i != home).collect();
        assert_eq!(s.pick(&servers, Some(b"abc")), Some(live[(h % 4) as usize]));
        servers[live[(h % 4) as usize]].weight = 0;
        let live: Vec<usize> = (0..5).filter(|&i| eligible(&servers[i])).collect();
        assert_eq!(s.pick(&servers, Some(b"abc")), Some(live[(h % 3) as usize]));
    }

    #[test]
    fn none_when_nothing_is_eligible() {
        let mut s = Md5Modulo::default();
        assert_eq!(s.pick(&[], Some(b"k")), None);
        let dead = [Candidate { usable: false, ..up() }, Candidate { weight: 0, ..up() }];
        assert_eq!(s.pick(&dead, Some(b"k")), None);
        assert_eq!(s.pick(&dead, None), None);
    }
}
