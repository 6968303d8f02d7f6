//! Maglev hashing (Eisenbud et al., "Maglev: A Fast and Reliable Software Network Load
//! Balancer", NSDI 2016, §3.4).
//!
//! A lookup table of prime size `M` (65,537, or the first prime ≥ 100 × the group size for
//! groups above 655 servers, the paper's `M ≫ N`) maps a key's hash straight to a server:
//! one multiply and one memory access per pick, whatever the group size. Each server has
//! its own permutation of the slots, `(offset + j · skip) mod M`, with `offset` and `skip`
//! from two hashes of its name (`skip` in `1..M`, so with `M` prime the permutation covers
//! every slot). The table is filled by the paper's `Populate`: servers take turns, each
//! claiming the next slot of its permutation that is still free, until the table is full.
//! Every server ends up with `M/N` slots, give or take one.
//!
//! Weights (the paper leaves them out): a heavier server takes proportionally more turns,
//! as Envoy's Maglev does. Each server has a target starting at the largest weight
//! `w_max`; in round `r` a server of weight `w` takes a turn when `r·w ≥ target`, and its
//! target then grows by `w_max`. The heaviest server takes a turn every round, one of a
//! third of its weight every third round, so slot counts follow weights to within one
//! turn. Weight 0 takes no turn. Turns go in order of name, so the group's order never
//! changes the table.
//!
//! Maglev trades a little disruption for balance: when a server joins or leaves, the
//! turns of everyone after it shift, so a few keys move between servers that did not
//! change (the paper's Fig. 11; the hashing tests measure it), besides the `1/N` that must.
//!
//! A slot whose server is not eligible is retried with the key's hash re-mixed with a salt
//! ([`RETRIES`] times: a dead server's keys spread evenly over the survivors), then the
//! table is walked from the first slot to the next eligible server.

use crate::keyhash::{combine, eligible_at, fast_range, first_eligible, key_hash, name_hash, NoKey};
use crate::{Candidate, Member, Params, Scheduler};

/// The default table size: prime, and ≫ 100 × a typical group.
const DEFAULT_SIZE: usize = 65_537;

/// Re-probes with a salted hash before walking the table.
const RETRIES: u64 = 4;

/// Table slots not (yet) owned by anyone.
const EMPTY: u32 = u32::MAX;

/// Salt deriving a name's `skip` hash from its `offset` hash.
const SKIP_SALT: u64 = 0x534B_4950; // "SKIP"

/// A Maglev lookup table.
#[derive(Debug, Default)]
pub(crate) struct Maglev {
    /// Member index per slot (`EMPTY` when the group has no weighted member).
    table: Vec<u32>,
    /// `(name, weight)` of the last rebuild: rebuilding the same table is a no-op.
    last: Vec<(String, u32)>,
    /// Round robin for requests without a key.
    no_key: NoKey,
}

impl Maglev {
    pub(crate) fn new(_: &Params) -> Self {
        Self::default()
    }
}

// `is_multiple_of` needs Rust 1.87; the workspace promises 1.80.
#[allow(clippy::manual_is_multiple_of)]
fn is_prime(n: usize) -> bool {
    n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| n % d != 0)
}

/// The table size for a group of `members` servers.
fn table_size(members: usize) -> usize {
    let mut m = DEFAULT_SIZE.max(members.saturating_mul(100));
    while !is_prime(m) {
        m += 1;
    }
    m
}

/// One server's progress through its permutation while the table fills.
struct Turn {
    index: u32,
    weight: u64,
    /// Next slot of its permutation to try.
    slot: usize,
    skip: usize,
    /// Round × weight must reach this for the next turn.
    target: u64,
}

/// The paper's `Populate`, with turns in proportion to weight.
fn populate(table: &mut Vec<u32>, members: &[Member<'_>]) {
    let m = table_size(members.len());
    table.clear();
    table.resize(m, EMPTY);
    let mut order: Vec<usize> = (0..members.len()).filter(|&i| members[i].weight > 0).collect();
    order.sort_by_key(|&i| members[i].name);
    let w_max = order.iter().map(|&i| u64::from(members[i].weight)).max().unwrap_or(0);
    let mut turns: Vec<Turn> = order
        .iter()
        .filter_map(|&i| {
            let h = name_hash(members[i].name);
            Some(Turn {
                index: u32::try_from(i).ok().filter(|&i| i != EMPTY)?,
                weight: u64::from(members[i].weight),
                // Reduced as u64 so 32-bit targets build the same table.
                slot: (h % m as u64) as usize,
                skip: (combine(h, SKIP_SALT) % (m as u64 - 1)) as usize + 1,
                target: w_max,
            })
        })
        .collect();
    if turns.is_empty() {
        return;
    }
    let mut filled = 0;
    let mut round: u64 = 1;
    while filled < m {
        for t in turns.iter_mut() {
            if round.saturating_mul(t.weight) < t.target {
                continue;
            }
            t.target = t.target.saturating_add(w_max);
            while table[t.slot] != EMPTY {
                t.slot = (t.slot + t.skip) % m;
            }
            table[t.slot] = t.index;
            filled += 1;
            if filled == m {
                break;
            }
        }
        round += 1;
    }
}

impl Maglev {
    /// The server of the slot `hash` falls in, if it is eligible.
    fn probe(&self, servers: &[Candidate], hash: u64) -> Option<usize> {
        let i = self.table[fast_range(hash, self.table.len())] as usize;
        eligible_at(servers, i).then_some(i)
    }
}

impl Scheduler for Maglev {
    fn rebuild(&mut self, members: &[Member<'_>]) {
        let same = self.last.len() == members.len()
            && self.last.iter().zip(members).all(|((n, w), m)| n == m.name && *w == m.weight);
        if same && !self.table.is_empty() {
            return;
        }
        populate(&mut self.table, members);
        self.last = members.iter().map(|m| (m.name.to_string(), m.weight)).collect();
    }

    fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
        let Some(key) = key else {
            return self.no_key.pick(servers);
        };
        if self.table.is_empty() {
            return first_eligible(servers);
        }
        let hash = key_hash(key);
        if let Some(i) = self.probe(servers, hash) {
            return Some(i);
        }
        if let Some(i) = (1..=RETRIES).find_map(|salt| self.probe(servers, combine(hash, salt))) {
            return Some(i);
        }
        // Rare: most of the group is out. Stop early when nothing is eligible at all.
        first_eligible(servers)?;
        let m = self.table.len();
        let home = fast_range(hash, m);
        (1..m)
            .map(|step| self.table[(home + step) % m] as usize)
            .find(|&i| eligible_at(servers, i))
            .or_else(|| first_eligible(servers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::up;

    fn slots(s: &Maglev, n: usize) -> Vec<usize> {
        let mut counts = vec![0; n];
        for &i in &s.table {
            counts[i as usize] += 1;
        }
        counts
    }

    #[test]
    fn table_sizes_are_prime() {
        assert_eq!(table_size(3), 65_537);
        assert!(is_prime(table_size(1_000)) && table_size(1_000) >= 100_000);
        assert!(!is_prime(65_535) && is_prime(65_537));
    }

    #[test]
    fn slots_follow_weights() {
        let mut s = Maglev::default();
        let m = |name, weight| Member { name, weight, maxconn: 0 };
        s.rebuild(&[m("a", 1), m("b", 3), m("c", 0), m("d", 1)]);
        let counts = slots(&s, 4);
        assert_eq!(counts.iter().sum::<usize>(), 65_537);
        assert_eq!(counts[2], 0);
        // 1 : 3 : 1 of 65,537 is 13,107.4 : 39,322.2 : 13,107.4.
        assert!(counts[0].abs_diff(13_107) <= 2 && counts[3].abs_diff(13_107) <= 2, "{counts:?}");
    }

    #[test]
    fn equal_weights_split_evenly_and_order_does_not_matter() {
        let m = |name| Member { name, weight: 7, maxconn: 0 };
        let mut s = Maglev::default();
        s.rebuild(&[m("a"), m("b"), m("c")]);
        let counts = slots(&s, 3);
        assert!(counts.iter().all(|&c| c.abs_diff(21_846) <= 1), "{counts:?}");
        let abc: Vec<u32> = s.table.clone();
        s.rebuild(&[m("c"), m("a"), m("b")]);
        let back = [2u32, 0, 1]; // new index → old index: c, a, b
        assert!(s.table.iter().zip(&abc).all(|(&now, &was)| back[now as usize] == was));
    }

    #[test]
    fn retries_off_an_ineligible_server() {
        let mut s = Maglev::default();
        let m = |name| Member { name, weight: 1, maxconn: 0 };
        s.rebuild(&[m("a"), m("b"), m("c")]);
        let mut servers = [up(), up(), up()];
        let home = s.pick(&servers, Some(b"/x")).unwrap_or(9);
        servers[home].usable = false;
        let now = s.pick(&servers, Some(b"/x")).unwrap_or(9);
        assert!(now != home && now < 3);
        for c in servers.iter_mut() {
            c.usable = false;
        }
        assert_eq!(s.pick(&servers, Some(b"/x")), None);
    }
}
