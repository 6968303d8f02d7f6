//! Schedulers through the running switch: hashing keys (url, header, cookie, srcip),
//! learned tables shared between workers, and group changes by reload that keep keys on
//! their servers and drop no connection.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::origin_of;
use proxy::Switch;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use testkit::{Origin, RawClient};

struct Rig {
    switch: Switch,
    addr: SocketAddr,
    origins: Vec<Origin>,
}

/// A switch with `workers` workers and one group over `n` origins, with `group_keys`
/// (scheduler, hash_key, …) in its `[[group]]`.
async fn rig(n: usize, workers: usize, group_keys: &str) -> Rig {
    rig_with(n, workers, "", group_keys).await
}

/// As [`rig`], with `listener_keys` in the `[[listener]]`.
async fn rig_with(n: usize, workers: usize, listener_keys: &str, group_keys: &str) -> Rig {
    let mut origins = Vec::new();
    for i in 1..=n {
        origins.push(Origin::start(&format!("s{i}")).await);
    }
    let text = text(&origins, workers, group_keys)
        .replace("default_group = \"web\"\n", &format!("default_group = \"web\"\n{listener_keys}\n"));
    let cfg = config::parse(&text, Path::new("t.toml")).unwrap();
    let switch = Switch::start(cfg).unwrap();
    let addr = switch.local_addr("web").unwrap();
    Rig { switch, addr, origins }
}

/// The config: `group_keys` go into the group; whole tables after them (from the first
/// line starting with `[`) go after the group.
fn text(origins: &[Origin], workers: usize, group_keys: &str) -> String {
    let servers: Vec<String> =
        origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    let (group_keys, tables) =
        group_keys.split_once("\n[").map_or((group_keys, String::new()), |(g, t)| (g, format!("[{t}")));
    format!(
        "[global]\nworkers = {workers}\ngrace_period = \"2s\"\n[access_log]\nenabled = false\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\n{group_keys}\nservers = [ {} ]\n{tables}\n",
        servers.join(", ")
    )
}

/// Sends `req` on a new connection; which origin answered.
async fn who(addr: SocketAddr, req: &str) -> String {
    let mut c = RawClient::connect(addr).await.unwrap();
    c.send(req.as_bytes()).await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 200);
    origin_of(&r)
}

fn get(path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n{extra}\r\n")
}

/// Where each of 30 URLs lands, asked twice on fresh connections (two workers, so the two
/// asks may be served by different workers).
async fn placement(addr: SocketAddr) -> HashMap<String, String> {
    let mut placed = HashMap::new();
    for i in 0..30 {
        let path = format!("/obj/{i}.gif");
        let first = who(addr, &get(&path, "")).await;
        let second = who(addr, &get(&path, "")).await;
        assert_eq!(first, second, "{path} moved between requests");
        placed.insert(path, first);
    }
    placed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hashing_method_keeps_a_url_on_one_server_and_spreads_urls() {
    for scheduler in ["md5", "consistent", "carp", "modch", "maglev", "jump", "htrr", "sieve"] {
        let r = rig(3, 2, &format!("scheduler = \"{scheduler}\"")).await;
        let placed = placement(r.addr).await;
        let used: HashSet<&String> = placed.values().collect();
        assert!(used.len() >= 2, "{scheduler} sent 30 URLs to {used:?}");
        r.switch.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_keys_read_headers_cookies_arguments_and_the_client_address() {
    let cases = [
        ("header:X-User", "X-User: alice\r\n", "X-User: bob\r\n"),
        ("cookie:uid", "Cookie: a=1; uid=alice\r\n", "Cookie: uid=bob\r\n"),
        ("host", "", ""),
    ];
    for (key, alice, _bob) in cases {
        let r = rig(4, 2, &format!("scheduler = \"consistent\"\nhash_key = \"{key}\"")).await;
        // Same key, different URLs: one server.
        let mut seen = HashSet::new();
        for i in 0..12 {
            seen.insert(who(r.addr, &get(&format!("/p/{i}"), alice)).await);
        }
        assert_eq!(seen.len(), 1, "{key}: {seen:?}");
        r.switch.shutdown();
    }
    // arg:sid — the query parameter, not the path.
    let r = rig(4, 2, "scheduler = \"consistent\"\nhash_key = \"arg:sid\"").await;
    let mut seen = HashSet::new();
    for i in 0..12 {
        seen.insert(who(r.addr, &get(&format!("/p/{i}?x={i}&sid=42"), "")).await);
    }
    assert_eq!(seen.len(), 1, "arg:sid {seen:?}");
    // srcip — every connection from 127.0.0.1 goes to one server whatever the URL.
    let r = rig(4, 2, "scheduler = \"jump\"\nhash_key = \"srcip\"").await;
    let mut seen = HashSet::new();
    for i in 0..12 {
        seen.insert(who(r.addr, &get(&format!("/q/{i}"), "")).await);
    }
    assert_eq!(seen.len(), 1, "srcip {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_its_key_is_still_served() {
    let r = rig(3, 1, "scheduler = \"consistent\"\nhash_key = \"header:X-User\"").await;
    let mut seen = HashSet::new();
    for i in 0..6 {
        seen.insert(who(r.addr, &get(&format!("/n/{i}"), "")).await);
    }
    // No key: round robin over the servers.
    assert_eq!(seen.len(), 3, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_server_by_reload_moves_only_its_keys_and_drops_no_connection() {
    let r = rig(4, 2, "scheduler = \"consistent\"").await;
    let before = placement(r.addr).await;
    // A keep-alive client in the middle of its session when the reload lands.
    let mut c = RawClient::connect(r.addr).await.unwrap();
    c.send(get("/keep", "").as_bytes()).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 200);
    let text = text(&r.origins[..3], 2, "scheduler = \"consistent\"");
    r.switch.reload(config::parse(&text, Path::new("t.toml")).unwrap()).unwrap();
    c.send(get("/keep", "").as_bytes()).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 200, "the open connection goes on");
    let after = placement(r.addr).await;
    for (url, server) in &before {
        if server != "s4" {
            assert_eq!(&after[url], server, "{url} moved though its server stayed");
        } else {
            assert_ne!(after[url], "s4");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lard_keeps_a_target_on_one_server_across_workers_and_spreads_targets() {
    let r = rig(3, 2, "scheduler = \"lard\"\nhash_key = \"path\"").await;
    let placed = placement(r.addr).await;
    let used: HashSet<&String> = placed.values().collect();
    assert!(used.len() >= 2, "lard sent 30 targets to {used:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_change_by_reload_and_wrr_follows() {
    let r = rig(2, 1, "scheduler = \"wrr\"").await;
    let weighted = text(&r.origins, 1, "scheduler = \"wrr\"").replace(
        &format!("name = \"s2\", addr = \"{}\"", r.origins[1].addr()),
        &format!("name = \"s2\", addr = \"{}\", weight = 3", r.origins[1].addr()),
    );
    r.switch.reload(config::parse(&weighted, Path::new("t.toml")).unwrap()).unwrap();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut c = RawClient::connect(r.addr).await.unwrap();
    for _ in 0..40 {
        c.send(get("/w", "").as_bytes()).await.unwrap();
        *counts.entry(origin_of(&c.read_response().await.unwrap())).or_default() += 1;
    }
    assert_eq!((counts["s1"], counts["s2"]), (10, 30), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_persistence_close_ends_the_connection_on_a_change_of_server() {
    let r = rig_with(2, 1, "connection_persistence = \"close\"", "scheduler = \"rr\"").await;
    let mut c = RawClient::connect(r.addr).await.unwrap();
    c.send(get("/a", "").as_bytes()).await.unwrap();
    let first = c.read_response().await.unwrap();
    assert_eq!((origin_of(&first).as_str(), first.header("Connection")), ("s1", None));
    c.send(get("/b", "").as_bytes()).await.unwrap();
    let second = c.read_response().await.unwrap();
    // Served by the new server, then the connection ends.
    assert_eq!(origin_of(&second), "s2");
    assert_eq!(second.header("Connection"), Some("close"));
    assert!(c.closed_within(std::time::Duration::from_secs(2)).await);
    assert_eq!(r.switch.stats().get(proxy::Counter::ServerChangeCloses), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_persistence_redirect_sends_the_client_back_to_reconnect() {
    let r = rig_with(2, 1, "connection_persistence = \"redirect\"", "scheduler = \"rr\"").await;
    let mut c = RawClient::connect(r.addr).await.unwrap();
    c.send(get("/a", "").as_bytes()).await.unwrap();
    assert_eq!(origin_of(&c.read_response().await.unwrap()), "s1");
    c.send(get("/b?x=1", "").as_bytes()).await.unwrap();
    let moved = c.read_response().await.unwrap();
    assert_eq!(moved.status, 302);
    assert_eq!(moved.header("Location"), Some("/b?x=1"));
    assert_eq!(moved.header("Connection"), Some("close"));
    assert!(c.closed_within(std::time::Duration::from_secs(2)).await);
    // The server that would have changed never saw the request.
    assert!(r.origins[1].requests().is_empty(), "{:?}", r.origins[1].requests());
    // A POST is redirected with 307, so it is repeated as a POST.
    let mut c = RawClient::connect(r.addr).await.unwrap();
    c.send(get("/c", "").as_bytes()).await.unwrap();
    let first = origin_of(&c.read_response().await.unwrap());
    c.send(b"POST /d HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi").await.unwrap();
    let post = c.read_response().await.unwrap();
    assert_eq!(post.status, 307, "after {first}");
    assert_eq!(r.switch.stats().get(proxy::Counter::ServerChangeRedirects), 2);
    // Same server twice in a row: no redirect.
    let r = rig_with(1, 1, "connection_persistence = \"redirect\"", "scheduler = \"rr\"").await;
    let mut c = RawClient::connect(r.addr).await.unwrap();
    for _ in 0..3 {
        c.send(get("/same", "").as_bytes()).await.unwrap();
        assert_eq!(c.read_response().await.unwrap().status, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preallocation_connects_to_the_last_server_while_the_request_is_read() {
    let pool_off = "\n[limits]\npool_idle_per_server = 0";
    let r = rig_with(1, 1, "preallocate = true", &format!("scheduler = \"rr\"{pool_off}")).await;
    assert_eq!(who(r.addr, &get("/first", "")).await, "s1");
    let stats = r.switch.stats();
    assert_eq!(stats.get(proxy::Counter::Preallocated), 0, "nothing known of this client yet");
    // The next connection from the same address: the switch connects to s1 at accept.
    let mut c = RawClient::connect(r.addr).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(stats.get(proxy::Counter::Preallocated), 1);
    assert_eq!(r.origins[0].connections(), 2, "the server connection exists before the request");
    c.send(get("/second", "").as_bytes()).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 200);
    assert_eq!(stats.get(proxy::Counter::PreallocatedUsed), 1);
    assert_eq!(stats.get(proxy::Counter::ServerConnects), 1, "the second request needed no connect");
    assert_eq!(r.origins[0].connections(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preallocated_connection_to_another_server_costs_the_request_nothing() {
    let pool_off = "\n[limits]\npool_idle_per_server = 0";
    let r = rig_with(2, 1, "preallocate = true", &format!("scheduler = \"rr\"{pool_off}")).await;
    assert_eq!(who(r.addr, &get("/first", "")).await, "s1");
    // Pre-allocated to s1, but round robin sends this one to s2.
    assert_eq!(who(r.addr, &get("/second", "")).await, "s2");
    let stats = r.switch.stats();
    assert_eq!(stats.get(proxy::Counter::Preallocated), 1);
    assert_eq!(stats.get(proxy::Counter::PreallocatedUsed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learned_table_survives_a_reload_that_adds_a_server() {
    // htrr assigns keys on first sight and never moves them: after the reload adds s4, every
    // URL seen before stays where it was (the table followed the servers by name), and new
    // URLs may reach s4.
    let r = rig(4, 2, "scheduler = \"htrr\"").await;
    let first_three = text(&r.origins[..3], 2, "scheduler = \"htrr\"");
    r.switch.reload(config::parse(&first_three, Path::new("t.toml")).unwrap()).unwrap();
    let before = placement(r.addr).await;
    let all = text(&r.origins, 2, "scheduler = \"htrr\"");
    r.switch.reload(config::parse(&all, Path::new("t.toml")).unwrap()).unwrap();
    for (url, server) in &before {
        assert_eq!(&who(r.addr, &get(url, "")).await, server, "{url} moved");
    }
    let mut fresh = HashSet::new();
    for i in 0..12 {
        fresh.insert(who(r.addr, &get(&format!("/new/{i}"), "")).await);
    }
    assert!(fresh.contains("s4"), "new keys never reached the new server: {fresh:?}");
}
