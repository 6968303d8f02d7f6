//! Locality schedulers (`lard`, `lard_r`, `cap`, `sieve`) through the public API.

use cswitch_balance::{Candidate, Member, Params, Scheduler, SchedulerKind};

fn build(name: &str, params: &Params) -> Box<dyn Scheduler> {
    SchedulerKind::from_name(name).expect("a listed scheduler").build(params)
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("s{i}")).collect()
}

fn rebuild(s: &mut dyn Scheduler, names: &[String], weights: &[u32]) {
    let members: Vec<Member> =
        names.iter().zip(weights).map(|(name, &weight)| Member { name, weight, maxconn: 0 }).collect();
    s.rebuild(&members);
}

fn server(weight: u32, active: u32) -> Candidate {
    Candidate { weight, active, usable: true, maxconn: 0 }
}

fn idle(n: usize) -> Vec<Candidate> {
    vec![server(1, 0); n]
}

// --- LARD ---------------------------------------------------------------------------

#[test]
fn lard_keeps_targets_on_their_server_under_moderate_load() {
    let mut s = build("lard", &Params::default());
    let n = names(4);
    rebuild(&mut *s, &n, &[1; 4]);
    let targets: Vec<String> = (0..200).map(|i| format!("/page/{i}")).collect();
    let home: Vec<usize> =
        targets.iter().map(|t| s.pick(&idle(4), Some(t.as_bytes())).expect("a server")).collect();
    // First sights go to the least loaded server, ties taking turns: spread evenly.
    for i in 0..4 {
        assert_eq!(home.iter().filter(|&&h| h == i).count(), 50);
    }
    // Loads anywhere up to T_high (65) and nobody idle: every target stays home.
    for round in 0..20u32 {
        let servers: Vec<Candidate> = (0..4).map(|i| server(1, (round * 7 + i * 13) % 66)).collect();
        for (t, &h) in targets.iter().zip(&home) {
            assert_eq!(s.pick(&servers, Some(t.as_bytes())), Some(h), "{t} left {h} at {servers:?}");
        }
    }
}

#[test]
fn lard_moves_a_target_off_an_overloaded_server() {
    let mut s = build("lard", &Params::default());
    let n = names(3);
    rebuild(&mut *s, &n, &[1; 3]);
    let home = s.pick(&idle(3), Some(b"/hot")).expect("a server");
    let mut servers = vec![server(1, 40); 3];
    // Over T_high, but no one under T_low: stays.
    servers[home] = server(1, 66);
    assert_eq!(s.pick(&servers, Some(b"/hot")), Some(home));
    // Still over T_high, and one server is under T_low: moves there, and stays there.
    let light = (home + 2) % 3;
    servers[light] = server(1, 24);
    assert_eq!(s.pick(&servers, Some(b"/hot")), Some(light));
    servers[home] = server(1, 0);
    servers[light] = server(1, 60);
    assert_eq!(s.pick(&servers, Some(b"/hot")), Some(light));
    // At 2·T_high a target moves even when no one is under T_low.
    let mut all = vec![server(1, 50); 3];
    all[light] = server(1, 130);
    let moved = s.pick(&all, Some(b"/hot")).expect("a server");
    assert_ne!(moved, light);
}

#[test]
fn lard_weighs_load_by_weight() {
    let mut s = build("lard", &Params::default());
    let n = names(2);
    // Mean weight 2: server 1 (weight 3) moves targets only above 98 in flight.
    rebuild(&mut *s, &n, &[1, 3]);
    let servers = [server(1, 0), server(3, 0)];
    assert_eq!(s.pick(&servers, Some(b"/t")), Some(1));
    assert_eq!(s.pick(&[server(1, 0), server(3, 98)], Some(b"/t")), Some(1));
    assert_eq!(s.pick(&[server(1, 0), server(3, 99)], Some(b"/t")), Some(0));
}

#[test]
fn lard_without_key_is_least_loaded() {
    let mut s = build("lard", &Params::default());
    rebuild(&mut *s, &names(3), &[1, 1, 2]);
    assert_eq!(s.pick(&[server(1, 3), server(1, 1), server(2, 3)], None), Some(1));
    assert_eq!(s.pick(&[server(1, 3), server(1, 2), server(2, 3)], None), Some(2));
    assert!(s.shares_state());
}

// --- LARD/R -------------------------------------------------------------------------

/// Serves `picks` requests for one target, each staying in flight: the load of the
/// servers grows with what the scheduler chose. Returns the servers used, in order.
fn serve(s: &mut dyn Scheduler, servers: &mut [Candidate], target: &[u8], picks: usize) -> Vec<usize> {
    (0..picks)
        .map(|_| {
            let i = s.pick(servers, Some(target)).expect("a server");
            servers[i].active += 1;
            i
        })
        .collect()
}

#[test]
fn lard_r_grows_a_hot_targets_set_and_uses_its_least_loaded() {
    let mut s = build("lard_r", &Params::default());
    rebuild(&mut *s, &names(4), &[1; 4]);
    let mut servers = idle(4);
    let first = serve(&mut *s, &mut servers, b"/hot", 1)[0];
    // The home server fills up to T_high; nobody else is touched.
    let used = serve(&mut *s, &mut servers, b"/hot", 65);
    assert!(used.iter().all(|&i| i == first), "{used:?}");
    assert_eq!(servers[first].active, 66);
    // Now over T_high with idle servers around: a second server joins the set.
    let second = serve(&mut *s, &mut servers, b"/hot", 1)[0];
    assert_ne!(second, first);
    // From here on requests go to the least loaded member of {first, second}: the
    // second server until it catches up, and neither third nor fourth server is used
    // while the set's least loaded stays at or under T_high.
    let used = serve(&mut *s, &mut servers, b"/hot", 64);
    assert!(used.iter().all(|&i| i == second), "{used:?}");
    assert_eq!(servers[second].active, 65);
    // Both at T_high or above: the next overloaded pick adds a third server.
    let used = serve(&mut *s, &mut servers, b"/hot", 2);
    assert!(used.iter().any(|&i| i != first && i != second), "{used:?} {servers:?}");
    // Another target is unaffected: it starts on the least-loaded server.
    let cold = s.pick(&servers, Some(b"/cold")).expect("a server");
    assert!(servers[cold].active <= 1, "{cold} of {servers:?}");
}

#[test]
fn lard_r_picks_the_least_loaded_member_of_the_set() {
    let params = Params { lard_low: 2, lard_high: 4, ..Params::default() };
    let mut s = build("lard_r", &params);
    rebuild(&mut *s, &names(3), &[1; 3]);
    // Home 0, overloaded (5 > 4) while 1 is under T_low: 1 joins.
    assert_eq!(s.pick(&idle(3), Some(b"/t")), Some(0));
    assert_eq!(s.pick(&[server(1, 5), server(1, 0), server(1, 0)], Some(b"/t")), Some(1));
    // Set {0, 1}: whichever is less loaded, never 2 (however idle) while under T_high.
    assert_eq!(s.pick(&[server(1, 1), server(1, 3), server(1, 0)], Some(b"/t")), Some(0));
    assert_eq!(s.pick(&[server(1, 4), server(1, 3), server(1, 0)], Some(b"/t")), Some(1));
}

// --- CAP ----------------------------------------------------------------------------

#[test]
fn cap_spreads_every_class_round_robin() {
    let mut s = build("cap", &Params::default());
    rebuild(&mut *s, &names(4), &[1; 4]);
    let kinds = ["/i/{}.gif", "/doc/{}.pdf", "/cgi-bin/q?{}", "/api/{}", "/{}.HTML?x=1", "/download/{}"];
    let class_of = [0, 1, 2, 3, 0, 1];
    // A mixed stream with an irregular pattern of classes.
    let mut counts = [[0u32; 4]; 4];
    let mut totals = [0u32; 4];
    let mut x: u32 = 1;
    for i in 0..10_007 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let k = (x >> 16) as usize % kinds.len();
        let key = kinds[k].replace("{}", &i.to_string());
        let server = s.pick(&idle(4), Some(key.as_bytes())).expect("a server");
        counts[class_of[k]][server] += 1;
        totals[class_of[k]] += 1;
    }
    for (class, per_server) in counts.iter().enumerate() {
        let fair = totals[class] / 4;
        for &c in per_server {
            assert!(c.abs_diff(fair) <= 1, "class {class}: {per_server:?} of {}", totals[class]);
        }
    }
}

#[test]
fn cap_skips_unusable_servers_within_a_class() {
    let mut s = build("cap", &Params::default());
    rebuild(&mut *s, &names(4), &[1; 4]);
    let mut servers = idle(4);
    servers[2].usable = false;
    let picks: Vec<usize> =
        (0..6).map(|i| s.pick(&servers, Some(format!("/{i}.css").as_bytes())).expect("a server")).collect();
    assert_eq!(picks, [0, 1, 3, 0, 1, 3]);
    // Keyless requests are the last class, with their own turn.
    assert_eq!(s.pick(&servers, None), Some(0));
}

// --- SIEVE --------------------------------------------------------------------------

const KEYS: usize = 100_000;

fn keys() -> Vec<Vec<u8>> {
    (0..KEYS).map(|i| format!("/objects/{i}").into_bytes()).collect()
}

/// Server of every key for a group of `weights` (all usable).
fn place(s: &mut dyn Scheduler, keys: &[Vec<u8>], weights: &[u32]) -> Vec<usize> {
    let servers: Vec<Candidate> = weights.iter().map(|&w| server(w, 0)).collect();
    keys.iter().map(|k| s.pick(&servers, Some(k)).expect("a server")).collect()
}

/// Per server: keys placed.
fn counts(placed: &[usize], servers: usize) -> Vec<usize> {
    let mut counts = vec![0; servers];
    for &p in placed {
        counts[p] += 1;
    }
    counts
}

fn moved(before: &[usize], after: &[usize]) -> f64 {
    before.iter().zip(after).filter(|(a, b)| a != b).count() as f64 / before.len() as f64
}

/// The largest capacity, first by name on ties (names here sort like indexes below 10,
/// and all groups with ties have their fallback at index 0).
fn fallback(weights: &[u32]) -> usize {
    (0..weights.len()).max_by_key(|&i| (weights[i], std::cmp::Reverse(i))).expect("servers")
}

/// The paper's expected share: dᵢ/d·(1 − 2^−L), plus 2^−L for the fallback, with
/// n' = 2^(⌈log₂ n⌉+1) and L = log₂ n' + 2 (the default f).
fn expected_shares(weights: &[u32]) -> Vec<f64> {
    let log2_ranges = weights.len().next_power_of_two().trailing_zeros() + 1;
    let miss = 0.5f64.powi((log2_ranges + 2) as i32);
    let total: u32 = weights.iter().sum();
    let fb = fallback(weights);
    (0..weights.len())
        .map(|i| f64::from(weights[i]) / f64::from(total) * (1.0 - miss) + if i == fb { miss } else { 0.0 })
        .collect()
}

#[test]
fn sieve_shares_follow_capacities() {
    let keys = keys();
    let groups: [&[u32]; 4] = [
        &[100; 16],
        &[1, 1, 1, 1, 4],
        &[160, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 10],
        &[5, 3],
    ];
    for weights in groups {
        let mut s = build("sieve", &Params::default());
        rebuild(&mut *s, &names(weights.len()), weights);
        let got = counts(&place(&mut *s, &keys, weights), weights.len());
        let total: u32 = weights.iter().sum();
        let mut report = Vec::new();
        for (i, share) in expected_shares(weights).into_iter().enumerate() {
            // Binomial noise: within 4 standard deviations of the paper's expectation.
            let want = share * KEYS as f64;
            let sigmas = (got[i] as f64 - want) / want.sqrt();
            let vs_capacity = got[i] as f64 / KEYS as f64 / (f64::from(weights[i]) / f64::from(total)) - 1.0;
            report.push(format!("{vs_capacity:+.3} ({sigmas:+.1}σ)"));
            assert!(sigmas.abs() <= 4.0, "server {i} of {weights:?}: {} keys for {want:.0}", got[i]);
            // Against capacity/sum: with n' ≥ 2n and f = 2, the fallback's extra 2^−L is at
            // most 1/8 of an average share, and the others give up a fraction 2^−L ≤ 1/16.
            let bound = if i == fallback(weights) { 0.15 } else { 0.07 };
            assert!(vs_capacity.abs() <= bound, "server {i} of {weights:?}: {vs_capacity:+.3}");
        }
        eprintln!("sieve shares {weights:?} vs capacity (vs expected): {}", report.join(" "));
    }
}

#[test]
fn sieve_capacity_change_moves_few_keys() {
    let keys = keys();
    let n = names(16);
    let mut s = build("sieve", &Params::default());
    let mut weights = vec![100; 16];
    rebuild(&mut *s, &n, &weights);
    let mut before = place(&mut *s, &keys, &weights);
    for (server, capacity) in [(3, 200), (3, 100), (7, 50), (7, 110), (0, 300), (12, 101)] {
        let old = weights.clone();
        weights[server] = capacity;
        rebuild(&mut *s, &n, &weights);
        let after = place(&mut *s, &keys, &weights);
        let share = |w: &[u32]| f64::from(w[server]) / f64::from(w.iter().sum::<u32>());
        let need = (share(&old) - share(&weights)).abs();
        let m = moved(&before, &after);
        eprintln!("sieve: s{server} {} -> {capacity}: moved {m:.4}, share change {need:.4}", old[server]);
        // About twice the share that changes hands: the released space and the taken
        // space are different places, so keys move out of one and into the other.
        assert!(m <= 2.0 * need + 0.01, "moved {m}");
        before = after;
    }
}

/// Places every key before and after a membership change of 16 equal servers; returns
/// (keys moved, keys moved between servers present both before and after), as fractions
/// of all keys. The second is what a perfect scheme would not move at all.
fn membership_change(before_names: &[String], after_names: &[String]) -> (f64, f64) {
    let keys = keys();
    let mut s = build("sieve", &Params::default());
    rebuild(&mut *s, before_names, &vec![100; before_names.len()]);
    let before = place(&mut *s, &keys, &vec![100; before_names.len()]);
    rebuild(&mut *s, after_names, &vec![100; after_names.len()]);
    let after = place(&mut *s, &keys, &vec![100; after_names.len()]);
    let (mut all, mut needless) = (0, 0);
    for (&b, &a) in before.iter().zip(&after) {
        let (from, to) = (&before_names[b], &after_names[a]);
        if from != to {
            all += 1;
            needless += usize::from(after_names.contains(from) && before_names.contains(to));
        }
    }
    (all as f64 / KEYS as f64, needless as f64 / KEYS as f64)
}

#[test]
fn sieve_membership_change_moves_the_keys_it_must_and_a_few_more() {
    let n = names(16);
    let mut without = n.clone();
    without.remove(5);
    let (all, needless) = membership_change(&n, &without);
    eprintln!("sieve: remove 1 of 16: moved {all:.4} (must: 1/16 = 0.0625), between survivors {needless:.4}");
    assert!(needless <= 0.06, "{needless}");
    // Adding a 17th server doubles n' (32 → 64 ranges), which by itself moves nothing.
    let (all, needless) = membership_change(&n, &names(17));
    eprintln!("sieve: add a 17th: moved {all:.4} (must: 1/17 = 0.0588), between the 16 {needless:.4}");
    assert!(needless <= 0.06, "{needless}");
}

#[test]
fn sieve_never_picks_an_ineligible_server() {
    let keys = keys();
    let weights = [3, 1, 4, 1, 5, 9, 2, 6];
    let mut s = build("sieve", &Params::default());
    rebuild(&mut *s, &names(8), &weights);
    let mut servers: Vec<Candidate> = weights.iter().map(|&w| server(w, 0)).collect();
    for (i, k) in keys.iter().enumerate().take(20_000) {
        for (j, c) in servers.iter_mut().enumerate() {
            c.usable = (i + j * 7) % 5 != 0;
        }
        if i % 97 == 0 {
            servers[5].weight = 0; // the fallback, made ineligible by weight
        } else {
            servers[5].weight = 9;
        }
        let p = s.pick(&servers, Some(k)).expect("some server is usable");
        assert!(servers[p].usable && servers[p].weight > 0, "picked {p} of {servers:?}");
    }
    for c in &mut servers {
        c.usable = false;
    }
    assert_eq!(s.pick(&servers, Some(b"/x")), None);
}
