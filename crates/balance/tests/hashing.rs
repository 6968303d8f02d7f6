//! Properties of the hashing schedulers through the public API: how many keys move when a
//! server joins or leaves, that unusable servers are never picked, that bounded load is
//! bounded, and that weighted methods share keys by weight.
//!
//! Tolerances are stated per method next to what was measured with these exact keys and
//! names (the results are deterministic: same keys, same hashes, every run).

use cswitch_balance::{Candidate, Member, Params, Scheduler, SchedulerKind};

/// Keys for the movement and fault tests.
const KEYS: usize = 10_000;

fn kind(name: &str) -> SchedulerKind {
    SchedulerKind::from_name(name).expect("a listed scheduler")
}

fn up(weight: u32) -> Candidate {
    Candidate { weight, active: 0, usable: true, maxconn: 0 }
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("/objects/{i}/index.html")).collect()
}

/// A group: server names with their weights.
#[derive(Clone)]
struct Group {
    names: Vec<String>,
    weights: Vec<u32>,
}

impl Group {
    fn equal(n: usize) -> Group {
        Group { names: (0..n).map(|i| format!("s{i}")).collect(), weights: vec![1; n] }
    }

    fn with(&self, name: &str) -> Group {
        let mut g = self.clone();
        g.names.push(name.to_string());
        g.weights.push(1);
        g
    }

    fn without(&self, name: &str) -> Group {
        let mut g = self.clone();
        let i = g.names.iter().position(|n| n == name).expect("a member");
        g.names.remove(i);
        g.weights.remove(i);
        g
    }

    fn members(&self) -> Vec<Member<'_>> {
        self.names
            .iter()
            .zip(&self.weights)
            .map(|(name, &weight)| Member { name, weight, maxconn: 0 })
            .collect()
    }

    fn candidates(&self) -> Vec<Candidate> {
        self.weights.iter().map(|&w| up(w)).collect()
    }
}

/// Where each key goes in `group`, by server name, with `s` rebuilt for it.
fn placements(s: &mut dyn Scheduler, group: &Group, keys: &[String]) -> Vec<String> {
    s.rebuild(&group.members());
    let servers = group.candidates();
    keys.iter()
        .map(|k| group.names[s.pick(&servers, Some(k.as_bytes())).expect("a usable server")].clone())
        .collect()
}

/// Change from `before` to `after` for one scheduler instance (so `htrr` keeps its table):
/// the fraction of keys that moved, and how many moved between servers present in both
/// groups (0 for a perfectly consistent method).
fn churn(name: &str, before: &Group, after: &Group) -> (f64, usize) {
    let keys = keys(KEYS);
    let mut s = kind(name).build(&Params::default());
    let was = placements(&mut *s, before, &keys);
    let now = placements(&mut *s, after, &keys);
    let moved = was.iter().zip(&now).filter(|(a, b)| a != b).count();
    let stable = |n: &String| before.names.contains(n) && after.names.contains(n);
    let between_survivors = was.iter().zip(&now).filter(|(a, b)| a != b && stable(a) && stable(b)).count();
    (moved as f64 / KEYS as f64, between_survivors)
}

/// One server joins (`s8`) and one leaves (`leaver`) an equal group of 8; asserts that at
/// most `1/N + eps` of the keys move each time and at most `stray` of them between
/// servers that did not change. Returns the two fractions.
fn assert_consistent(name: &str, leaver: &str, eps: f64, stray: usize) -> (f64, f64) {
    let eight = Group::equal(8);
    let (added, stray_add) = churn(name, &eight, &eight.with("s8"));
    let (removed, stray_remove) = churn(name, &eight, &eight.without(leaver));
    eprintln!(
        "{name}: +1 moved {added:.4} ({stray_add} strays), -1 moved {removed:.4} ({stray_remove} strays)"
    );
    assert!(added <= 1.0 / 9.0 + eps, "{name}: adding moved {added}");
    assert!(removed <= 1.0 / 8.0 + eps, "{name}: removing moved {removed}");
    assert!(stray_add <= stray && stray_remove <= stray, "{name}: {stray_add}/{stray_remove} strays");
    (added, removed)
}

// Ideal movement from 8 servers: adding one, 1/9 = 0.1111 of the keys; removing one,
// 1/8 = 0.125. The fraction that moves is the share of the server that came or went, so
// the slack ε is how far one server's share can stray from 1/N: 2 points (16 % of a share)
// for every method here. Measured with these keys, added / removed:
#[test]
fn consistent_moves_about_one_nth() {
    // 0.1080 / 0.1211, no key moved between unchanged servers.
    assert_consistent("consistent", "s3", 0.02, 0);
}

#[test]
fn modch_moves_about_one_nth() {
    // Weight 1 everywhere: the same ring as `consistent`, same 0.1080 / 0.1211.
    assert_consistent("modch", "s3", 0.02, 0);
}

#[test]
fn carp_moves_about_one_nth() {
    // Equal weights make every multiplier 1, pure rendezvous hashing: 0.1079 / 0.1167.
    assert_consistent("carp", "s3", 0.02, 0);
}

#[test]
fn maglev_moves_about_one_nth_plus_a_little() {
    // 0.1150 / 0.1343, of which 39 / 16 keys (≤ 0.4 %) moved between unchanged servers:
    // Maglev's turns shift when the group changes. Allowed: 1 % of the keys.
    assert_consistent("maglev", "s3", 0.02, KEYS / 100);
}

#[test]
fn jump_moves_one_nth_at_the_end_only() {
    // Adding s8 / removing s7 (the last): 0.1161 / 0.1284, no strays.
    assert_consistent("jump", "s7", 0.02, 0);
    // Removing from the middle renumbers the servers after it: 0.6047 of the keys move.
    let eight = Group::equal(8);
    let (middle, _) = churn("jump", &eight, &eight.without("s3"));
    eprintln!("jump: -1 in the middle moved {middle:.4}");
    assert!(middle > 0.3, "{middle}");
}

#[test]
fn htrr_never_moves_a_remembered_key() {
    let eight = Group::equal(8);
    let (added, stray_add) = churn("htrr", &eight, &eight.with("s8"));
    let (removed, stray_remove) = churn("htrr", &eight, &eight.without("s3"));
    eprintln!("htrr: +1 moved {added:.4}, -1 moved {removed:.4}");
    // Evictions would break this: 10,000 keys in 8,192 sets of 8 ways overflow none.
    assert_eq!((added, stray_add, stray_remove), (0.0, 0, 0));
    // Round robin gave every server exactly 1/8 of the keys; only s3's move.
    assert_eq!(removed, 0.125);
}

#[test]
fn md5_moves_most_keys() {
    let eight = Group::equal(8);
    let (added, _) = churn("md5", &eight, &eight.with("s8"));
    let (removed, _) = churn("md5", &eight, &eight.without("s3"));
    eprintln!("md5: +1 moved {added:.4}, -1 moved {removed:.4}");
    // Measured 0.8939 / 0.8728: a key stays only where h mod 8 = h mod 9 (or 7).
    assert!(added > 0.5 && removed > 0.5, "{added} {removed}");
}

const HASHING: [&str; 7] = ["md5", "consistent", "carp", "modch", "htrr", "maglev", "jump"];

#[test]
fn unusable_servers_are_never_picked_and_others_keep_their_keys() {
    let group = Group::equal(8);
    let keys = keys(KEYS);
    for name in HASHING {
        let mut s = kind(name).build(&Params::default());
        let healthy = placements(&mut *s, &group, &keys);
        let mut servers = group.candidates();
        servers[2].usable = false;
        servers[5].usable = false;
        servers[6].weight = 0;
        let down = ["s2", "s5", "s6"];
        for (k, was) in keys.iter().zip(&healthy) {
            let i = s.pick(&servers, Some(k.as_bytes())).expect("five servers are up");
            let now = &group.names[i];
            assert!(!down.contains(&now.as_str()), "{name} picked {now} for {k}");
            // Keys of healthy servers stay put, except under md5's rehash-over-eligible.
            if name != "md5" && !down.contains(&was.as_str()) {
                assert_eq!(now, was, "{name} moved {k}");
            }
        }
        for _ in 0..20 {
            let i = s.pick(&servers, None).expect("five servers are up");
            assert!(!down.contains(&group.names[i].as_str()), "{name} without a key");
        }
    }
}

/// `⌈c/100 · total / n⌉`: the most a server may hold after a pick under factor `c`.
fn bound(c: u64, total: u64, n: u64) -> u64 {
    (c * total).div_ceil(100 * n)
}

#[test]
fn bounded_load_is_never_exceeded_by_a_hot_key() {
    let params = Params { hash_balance_factor: 125, ..Params::default() };
    let group = Group::equal(8);
    let mut s = kind("consistent").build(&params);
    s.rebuild(&group.members());
    let mut servers = group.candidates();
    for pick in 1..=5_000u64 {
        let i = s.pick(&servers, Some(b"/hot/object")).expect("servers are up");
        servers[i].active += 1;
        let limit = bound(125, pick, 8);
        assert!(servers.iter().all(|c| u64::from(c.active) <= limit), "pick {pick}: {servers:?}");
    }
    // The home server holds exactly the cap, and the key spilled over to the servers after
    // it on the ring (measured: six at the cap of 782 or one below, one at 312, one
    // untouched: the last on the key's walk).
    let cap = bound(125, 5_000, 8);
    assert_eq!(servers.iter().map(|c| u64::from(c.active)).max(), Some(cap));
    assert!(servers.iter().filter(|c| u64::from(c.active) + 1 >= cap).count() >= 6, "{servers:?}");
}

#[test]
fn bounded_load_holds_with_completions_and_many_keys() {
    let params = Params { hash_balance_factor: 125, ..Params::default() };
    let group = Group::equal(8);
    let mut s = kind("consistent").build(&params);
    s.rebuild(&group.members());
    let mut servers = group.candidates();
    let mut in_flight: Vec<usize> = Vec::new();
    for step in 0..20_000usize {
        // Half the requests for one hot key, half spread; one in three completes.
        let key = if step % 2 == 0 { "/hot".to_string() } else { format!("/cold/{step}") };
        let i = s.pick(&servers, Some(key.as_bytes())).expect("servers are up");
        servers[i].active += 1;
        in_flight.push(i);
        let total: u64 = servers.iter().map(|c| u64::from(c.active)).sum();
        assert!(u64::from(servers[i].active) <= bound(125, total, 8), "step {step}: {servers:?}");
        if step % 3 == 2 {
            let done = in_flight.swap_remove(step * 7919 % in_flight.len());
            servers[done].active -= 1;
        }
    }
}

/// Share of 100,000 keys per server with weights 1, 2, 3, 4, as a fraction of the ideal
/// `w / 10`.
fn weighted_shares(name: &str) -> Vec<f64> {
    let group = Group { names: (1..=4).map(|i| format!("w{i}")).collect(), weights: vec![1, 2, 3, 4] };
    let keys = keys(100_000);
    let mut s = kind(name).build(&Params::default());
    s.rebuild(&group.members());
    let servers = group.candidates();
    let mut counts = [0usize; 4];
    for k in &keys {
        counts[s.pick(&servers, Some(k.as_bytes())).expect("servers are up")] += 1;
    }
    counts.iter().zip(&group.weights).map(|(&c, &w)| c as f64 / (100_000.0 * f64::from(w) / 10.0)).collect()
}

fn assert_weighted(name: &str, tolerance: f64) {
    let shares = weighted_shares(name);
    eprintln!("{name}: share / ideal for weights 1,2,3,4: {shares:.3?}");
    assert!(shares.iter().all(|r| (r - 1.0).abs() <= tolerance), "{name}: {shares:?}");
}

// Share of the keys over the ideal w/Σw, weights 1, 2, 3, 4, 100,000 keys. Sampling noise
// alone is ±1 % (σ) for the weight-1 server.

#[test]
fn carp_shares_follow_weights() {
    // Measured 1.171, 0.848, 0.992, 1.039. The multipliers are exact (with ideal random
    // scores they give 0.999–1.002); the bias is the draft's hash: the top 10 bits of a
    // combined hash depend only on the low 10 bits of url ^ member, so which server wins
    // depends on the member hashes' low bits. It depends on the names, not on the keys
    // (random keys give the same shares); equal weights over 16 servers measure
    // 0.81–1.15. That is CARP as specified: ±20 %.
    assert_weighted("carp", 0.20);
}

#[test]
fn modch_shares_follow_weights() {
    // Measured 0.947, 1.045, 0.962, 1.019: 160 points per unit of weight. ±10 %.
    assert_weighted("modch", 0.10);
}

#[test]
fn maglev_shares_follow_weights() {
    // Measured 1.004, 0.991, 1.002, 1.002: slots follow weights to one turn, the rest is
    // sampling noise. ±5 %.
    assert_weighted("maglev", 0.05);
}

#[test]
fn carp_with_unequal_weights_moves_a_few_keys_between_others() {
    // Every load factor multiplier depends on every weight, so adding a server also
    // shifts keys between the others, unlike with equal weights.
    let group = Group { names: (1..=4).map(|i| format!("w{i}")).collect(), weights: vec![1, 2, 3, 4] };
    let mut grown = group.with("w5");
    grown.weights[4] = 2;
    let (moved, strays) = churn("carp", &group, &grown);
    eprintln!("carp 1,2,3,4 + 2: moved {moved:.4} ({strays} between unchanged servers)");
    // Ideal 2/12 = 0.1667; measured 0.1970, of which 289 keys (2.9 %) between unchanged
    // servers.
    assert!(moved <= 2.0 / 12.0 + 0.05 && strays <= KEYS / 20, "{moved} {strays}");
}
