//! Golden placements: where a fixed set of keys lands for each hashing method, with
//! servers `web1`..`web5` of weights 1, 1, 2, 1, 3, healthy and then with `web5` down.
//!
//! A change here moves keys in every deployed cluster: every cache behind the balancer
//! loses the objects whose keys moved, and sticky clients land elsewhere. Changing a hash
//! function, a salt, a table size, the ring's point labels, or the order in which anything
//! is iterated will show up here. Update these lists only as a conscious, announced
//! decision (release notes: "placements change"), never to make a refactoring pass.

use cswitch_balance::{Candidate, Member, Params, SchedulerKind};

const KEYS: [&str; 20] = [
    "/index.html",
    "/img/logo.gif",
    "/img/banner.jpg",
    "/css/site.css",
    "/js/app.js",
    "/favicon.ico",
    "/about.html",
    "/products/index.html",
    "/products/42.html",
    "/cgi-bin/search?q=rust",
    "/news/2002/05/17.html",
    "/download/cswitch-0.1.tar.gz",
    "/video/intro.mp4",
    "/robots.txt",
    "/sitemap.xml",
    "/api/v1/users/1001",
    "/static/fonts/serif.woff2",
    "/blog/consistent-hashing",
    "/",
    "/search?q=%E4%B8%AD",
];

const NAMES: [&str; 5] = ["web1", "web2", "web3", "web4", "web5"];
const WEIGHTS: [u32; 5] = [1, 1, 2, 1, 3];

/// Picks for every key in order, from one fresh scheduler: first with every server up,
/// then with `web5` down.
fn placements(kind: &str) -> (Vec<&'static str>, Vec<&'static str>) {
    let members: Vec<Member> =
        NAMES.iter().zip(WEIGHTS).map(|(&name, weight)| Member { name, weight, maxconn: 0 }).collect();
    let up: Vec<Candidate> =
        WEIGHTS.iter().map(|&weight| Candidate { weight, active: 0, maxconn: 0, usable: true }).collect();
    let mut down = up.clone();
    down[4].usable = false;
    let mut s = SchedulerKind::from_name(kind).expect("a listed scheduler").build(&Params::default());
    s.rebuild(&members);
    let mut pass = |servers: &[Candidate]| -> Vec<&'static str> {
        KEYS.iter().map(|k| NAMES[s.pick(servers, Some(k.as_bytes())).expect("a server is up")]).collect()
    };
    let healthy = pass(&up);
    (healthy, pass(&down))
}

#[test]
fn md5() {
    // MD5 of the key, first 8 bytes big-endian, mod 5; web5 down: mod 4 over the rest.
    let (healthy, web5_down) = placements("md5");
    let expected = [
        "web5", "web5", "web3", "web2", "web4", "web1", "web5", "web3", "web3", "web3", "web3", "web3",
        "web4", "web1", "web2", "web1", "web3", "web1", "web3", "web2",
    ];
    assert_eq!(healthy, expected);
    let expected = [
        "web1", "web2", "web3", "web2", "web4", "web1", "web2", "web3", "web3", "web3", "web3", "web3",
        "web4", "web1", "web2", "web1", "web3", "web1", "web3", "web2",
    ];
    assert_eq!(web5_down, expected);
}

#[test]
fn consistent() {
    // Ketama ring, 160 points each whatever the weight; web5 down: its keys walk on.
    let (healthy, web5_down) = placements("consistent");
    let expected = [
        "web1", "web4", "web1", "web3", "web4", "web2", "web1", "web3", "web2", "web2", "web2", "web3",
        "web3", "web4", "web1", "web2", "web4", "web4", "web3", "web5",
    ];
    assert_eq!(healthy, expected);
    let expected = [
        "web1", "web4", "web1", "web3", "web4", "web2", "web1", "web3", "web2", "web2", "web2", "web3",
        "web3", "web4", "web1", "web2", "web4", "web4", "web3", "web4",
    ];
    assert_eq!(web5_down, expected);
}

#[test]
fn carp() {
    // The draft's hashes and load factor multipliers; web5 down: each key's runner-up.
    let (healthy, web5_down) = placements("carp");
    let expected = [
        "web4", "web4", "web2", "web5", "web4", "web3", "web5", "web3", "web5", "web3", "web4", "web2",
        "web2", "web5", "web2", "web5", "web3", "web2", "web3", "web1",
    ];
    assert_eq!(healthy, expected);
    let expected = [
        "web4", "web4", "web2", "web1", "web4", "web3", "web4", "web3", "web3", "web3", "web4", "web2",
        "web2", "web1", "web2", "web2", "web3", "web2", "web3", "web1",
    ];
    assert_eq!(web5_down, expected);
}

#[test]
fn modch() {
    // Ketama ring, 160 points per unit of weight; web5 down: its keys walk on.
    let (healthy, web5_down) = placements("modch");
    let expected = [
        "web1", "web4", "web5", "web3", "web4", "web2", "web5", "web3", "web2", "web2", "web2", "web5",
        "web3", "web5", "web1", "web5", "web5", "web5", "web3", "web5",
    ];
    assert_eq!(healthy, expected);
    let expected = [
        "web1", "web4", "web1", "web3", "web4", "web2", "web1", "web3", "web2", "web2", "web2", "web3",
        "web3", "web4", "web1", "web3", "web4", "web4", "web3", "web4",
    ];
    assert_eq!(web5_down, expected);
}

#[test]
fn maglev() {
    // 65,537-slot table, turns by weight; web5 down: salted re-probes.
    let (healthy, web5_down) = placements("maglev");
    let expected = [
        "web3", "web3", "web4", "web5", "web3", "web5", "web3", "web3", "web5", "web5", "web3", "web1",
        "web5", "web3", "web1", "web3", "web5", "web2", "web1", "web2",
    ];
    assert_eq!(healthy, expected);
    let expected = [
        "web3", "web3", "web4", "web2", "web3", "web4", "web3", "web3", "web2", "web1", "web3", "web1",
        "web2", "web3", "web1", "web3", "web1", "web2", "web1", "web2",
    ];
    assert_eq!(web5_down, expected);
}

#[test]
fn jump() {
    // Jump over the member order; web5 down: salted re-jumps.
    let (healthy, web5_down) = placements("jump");
    let expected = [
        "web5", "web2", "web4", "web1", "web5", "web1", "web1", "web4", "web5", "web5", "web3", "web3",
        "web4", "web5", "web4", "web3", "web1", "web5", "web2", "web4",
    ];
    assert_eq!(healthy, expected);
    let expected = [
        "web4", "web2", "web4", "web1", "web4", "web1", "web1", "web4", "web2", "web3", "web3", "web3",
        "web4", "web2", "web4", "web3", "web1", "web3", "web2", "web4",
    ];
    assert_eq!(web5_down, expected);
}

#[test]
fn htrr() {
    // Round robin on first sight from a fresh table; web5 down: its keys reassigned in turn.
    let (healthy, web5_down) = placements("htrr");
    let expected = [
        "web1", "web2", "web3", "web4", "web5", "web1", "web2", "web3", "web4", "web5", "web1", "web2",
        "web3", "web4", "web5", "web1", "web2", "web3", "web4", "web5",
    ];
    assert_eq!(healthy, expected);
    let expected = [
        "web1", "web2", "web3", "web4", "web1", "web1", "web2", "web3", "web4", "web2", "web1", "web2",
        "web3", "web4", "web3", "web1", "web2", "web3", "web4", "web4",
    ];
    assert_eq!(web5_down, expected);
}
