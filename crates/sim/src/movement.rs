//! Churn: the share of distinct keys whose server changes when the group changes.
//!
//! A fresh scheduler is told about N servers and picks once for every distinct key of
//! the trace (in order of first appearance, under the same in-flight window model as a
//! replay, so learning and load-aware schedulers behave as they would); then, on the
//! same instance, the group changes (a server added, the last one removed, or one in
//! the middle removed), the window restarts empty, and every key is picked again. A key
//! moved when the server's name differs. Removing the last server and removing one in
//! the middle are reported apart because index-based methods (`jump`, `md5`) only do
//! well on the first.

use balance::Scheduler;

use crate::run::{idle, rebuild, server_names, Inflight};

/// A change of membership.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// N → N+1: `srv<N+1>` joins at the end.
    Add,
    /// N → N−1: the last server leaves.
    RemoveLast,
    /// N → N−1: the server at index ⌊(N−1)/2⌋ leaves (`srv02` of 4, `srv08` of 16).
    RemoveMiddle,
}

impl Change {
    /// The three changes, in report order.
    pub const ALL: [Change; 3] = [Change::Add, Change::RemoveLast, Change::RemoveMiddle];

    /// The members after the change, or `None` when the change is impossible (removing
    /// the only server).
    pub fn apply(self, before: &[String]) -> Option<Vec<String>> {
        let n = before.len();
        let mut after = before.to_vec();
        match self {
            Change::Add => after.push(format!("srv{:02}", n + 1)),
            _ if n <= 1 => return None,
            Change::RemoveLast => {
                after.pop();
            }
            Change::RemoveMiddle => {
                after.remove((n - 1) / 2);
            }
        }
        Some(after)
    }
}

/// Share (0–1) of `keys` whose server changes under `change` of a group of `n`, for the
/// scheduler `make` builds; `None` when the change is impossible. A key placed nowhere
/// (a `None` pick) before or after counts as moved.
pub fn moved_share(
    make: &dyn Fn() -> Box<dyn Scheduler>,
    keys: &[&[u8]],
    n: usize,
    change: Change,
    inflight_per_server: u32,
) -> Option<f64> {
    let before = server_names(n);
    let after = change.apply(&before)?;
    let mut sched = make();
    let placed_before = place_all(&mut *sched, &before, keys, inflight_per_server);
    let placed_after = place_all(&mut *sched, &after, keys, inflight_per_server);
    let moved = placed_before.iter().zip(&placed_after).filter(|(b, a)| b.is_none() || b != a).count();
    Some(if keys.is_empty() { 0.0 } else { moved as f64 / keys.len() as f64 })
}

/// Rebuilds `sched` with `names` and picks once per key; the server name per key.
fn place_all<'n>(
    sched: &mut dyn Scheduler,
    names: &'n [String],
    keys: &[&[u8]],
    inflight_per_server: u32,
) -> Vec<Option<&'n str>> {
    rebuild(sched, names);
    let mut servers = idle(names.len());
    let mut window = Inflight::new(inflight_per_server as usize * names.len());
    keys.iter()
        .map(|key| {
            let s = sched.pick(&servers, Some(key))?;
            window.assign(&mut servers, s);
            Some(names[s].as_str())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use balance::{Candidate, Member};
    use std::hash::{Hash, Hasher};

    /// Key's first byte modulo the number of servers: position-based, like `md5`.
    struct Modulo;

    impl Scheduler for Modulo {
        fn rebuild(&mut self, _: &[Member<'_>]) {}
        fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
            Some(usize::from(key?[0]) % servers.len())
        }
    }

    /// Rendezvous hashing by name: only the keys of a removed server move.
    #[derive(Default)]
    struct Rendezvous(Vec<String>);

    impl Scheduler for Rendezvous {
        fn rebuild(&mut self, members: &[Member<'_>]) {
            self.0 = members.iter().map(|m| m.name.to_string()).collect();
        }
        fn pick(&mut self, _: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
            (0..self.0.len()).max_by_key(|&i| hrw(&self.0[i], key.unwrap_or_default()))
        }
    }

    fn hrw(name: &str, key: &[u8]) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (name, key).hash(&mut h);
        h.finish()
    }

    fn keys() -> Vec<Vec<u8>> {
        (0u8..100).map(|i| vec![i]).collect()
    }

    fn share(make: &dyn Fn() -> Box<dyn Scheduler>, n: usize, change: Change) -> Option<f64> {
        let keys = keys();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        moved_share(make, &refs, n, change, 4)
    }

    #[test]
    fn changes_of_membership() {
        let four = server_names(4);
        assert_eq!(Change::Add.apply(&four).unwrap(), server_names(5));
        assert_eq!(Change::RemoveLast.apply(&four).unwrap(), server_names(3));
        assert_eq!(Change::RemoveMiddle.apply(&four).unwrap(), ["srv01", "srv03", "srv04"]);
        assert_eq!(Change::RemoveMiddle.apply(&server_names(16)).unwrap()[7], "srv09");
        assert_eq!(Change::RemoveLast.apply(&server_names(1)), None);
        assert_eq!(Change::Add.apply(&server_names(1)).unwrap(), server_names(2));
    }

    #[test]
    fn modulo_moves_what_arithmetic_says() {
        let make = || Box::new(Modulo) as Box<dyn Scheduler>;
        // 4 → 5: a key stays iff i mod 4 == i mod 5, i.e. i mod 20 < 4: 20 of 100.
        assert_eq!(share(&make, 4, Change::Add), Some(0.80));
        // 4 → 3 (last): stays iff i mod 4 == i mod 3, i.e. i mod 12 < 3: 27 of 100
        // (0..=2, 12..=14, …, 96..=98).
        assert_eq!(share(&make, 4, Change::RemoveLast), Some(0.73));
        // 4 → srv01, srv03, srv04: compare names.
        let before = |i: usize| format!("srv{:02}", i % 4 + 1);
        let after = |i: usize| ["srv01", "srv03", "srv04"][i % 3].to_string();
        let expected = (0..100).filter(|&i| before(i) != after(i)).count() as f64 / 100.0;
        assert_eq!(share(&make, 4, Change::RemoveMiddle), Some(expected));
        assert_eq!(share(&make, 1, Change::RemoveLast), None);
        assert_eq!(share(&make, 1, Change::Add), Some(0.5));
    }

    #[test]
    fn rendezvous_moves_only_the_removed_servers_keys() {
        let make = || Box::new(Rendezvous::default()) as Box<dyn Scheduler>;
        let mut r = Rendezvous::default();
        rebuild(&mut r, &server_names(4));
        let on = |name: &str| keys().iter().filter(|k| r.0[r.clone_pick(k)] == name).count() as f64 / 100.0;
        assert_eq!(share(&make, 4, Change::RemoveMiddle), Some(on("srv02")));
        assert_eq!(share(&make, 4, Change::RemoveLast), Some(on("srv04")));
        let mut r5 = Rendezvous::default();
        rebuild(&mut r5, &server_names(5));
        let to_new = keys().iter().filter(|k| r5.clone_pick(k) == 4).count() as f64 / 100.0;
        assert_eq!(share(&make, 4, Change::Add), Some(to_new));
        assert!(to_new > 0.05 && to_new < 0.4, "{to_new}");
    }

    impl Rendezvous {
        fn clone_pick(&self, key: &[u8]) -> usize {
            (0..self.0.len()).max_by_key(|&i| hrw(&self.0[i], key)).unwrap()
        }
    }
}
