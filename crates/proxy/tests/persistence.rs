//! Session persistence through the running switch (seed 001 §IV): cookie insert, prefix,
//! learn and rename round trips; source, header and URL-parameter affinity across
//! connections; expiry; a server removed by reload.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::origin_of;
use proxy::Switch;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use testkit::{Origin, RawClient, Response};

struct Rig {
    switch: Switch,
    addr: SocketAddr,
    origins: Vec<Origin>,
}

/// Three origins under round robin (so without persistence, requests rotate), with
/// `persistence` as the group's persistence table.
async fn rig(persistence: &str) -> Rig {
    rig_workers(persistence, 2).await
}

/// As [`rig`] with `workers` workers (1 makes round robin's order predictable).
async fn rig_workers(persistence: &str, workers: usize) -> Rig {
    let mut origins = Vec::new();
    for i in 1..=3 {
        origins.push(Origin::start(&format!("s{i}")).await);
    }
    let text = text(&origins, persistence).replace("workers = 2", &format!("workers = {workers}"));
    let switch = Switch::start(config::parse(&text, Path::new("t.toml")).unwrap()).unwrap();
    let addr = switch.local_addr("web").unwrap();
    Rig { switch, addr, origins }
}

fn text(origins: &[Origin], persistence: &str) -> String {
    let servers: Vec<String> =
        origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    format!(
        "[global]\nworkers = 2\ngrace_period = \"2s\"\n[access_log]\nenabled = false\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nscheduler = \"rr\"\npersistence = {persistence}\nservers = [ {} ]\n",
        servers.join(", ")
    )
}

/// One request on a new connection.
async fn send(addr: SocketAddr, path: &str, headers: &str) -> Response {
    let mut c = RawClient::connect(addr).await.unwrap();
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{headers}\r\n").as_bytes()).await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 200, "{path}");
    r
}

/// The Cookie field the origin `name` saw on its last request.
fn cookie_seen(r: &Rig, name: &str) -> Option<String> {
    let o = r.origins.iter().find(|o| o.name() == name).unwrap();
    let last = o.requests().pop().unwrap();
    last.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("cookie")).map(|(_, v)| v.clone())
}

/// Sends `headers` on six new connections; the set of origins that answered.
async fn spread(addr: SocketAddr, path: &str, headers: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for _ in 0..6 {
        seen.insert(origin_of(&send(addr, path, headers).await));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_sets_a_cookie_naming_the_server_and_follows_it() {
    let r = rig("{ mode = \"insert\", cookie = \"SRV\" }").await;
    let first = send(r.addr, "/a", "").await;
    let server = origin_of(&first);
    assert_eq!(first.header("Set-Cookie"), Some(format!("SRV={server}; Path=/; HttpOnly").as_str()));
    assert_eq!(first.header("Cache-Control"), Some("private"));
    let cookie = format!("Cookie: a=1; SRV={server}\r\n");
    assert_eq!(spread(r.addr, "/b", &cookie).await, HashSet::from([server.clone()]));
    // indirect: the server sees the other cookies, not ours; a valid cookie is not set again.
    assert_eq!(cookie_seen(&r, &server).as_deref(), Some("a=1"));
    let again = send(r.addr, "/c", &format!("Cookie: SRV={server}\r\n")).await;
    assert_eq!(again.header("Set-Cookie"), None);
    assert_eq!(cookie_seen(&r, &server), None, "a Cookie field with only our cookie is removed");
    assert!(r.switch.stats().get(proxy::Counter::PersistenceHits) >= 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_cookie_for_a_removed_server_is_rebalanced_and_reset() {
    let r = rig("{ mode = \"insert\", cookie = \"SRV\" }").await;
    let fewer = text(&r.origins[1..], "{ mode = \"insert\", cookie = \"SRV\" }");
    r.switch.reload(config::parse(&fewer, Path::new("t.toml")).unwrap()).unwrap();
    let resp = send(r.addr, "/a", "Cookie: SRV=s1\r\n").await;
    let now = origin_of(&resp);
    assert_ne!(now, "s1");
    assert_eq!(resp.header("Set-Cookie"), Some(format!("SRV={now}; Path=/; HttpOnly").as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_with_max_idle_ignores_a_stale_cookie() {
    let r = rig("{ mode = \"insert\", cookie = \"SRV\", max_idle = \"10m\" }").await;
    let first = send(r.addr, "/a", "").await;
    let set = first.header("Set-Cookie").unwrap().to_string();
    let value = set.split(';').next().unwrap().to_string(); // SRV=s1|LAST|FIRST
    let server = origin_of(&first);
    assert!(value.starts_with(&format!("SRV={server}|")), "{value}");
    assert_eq!(spread(r.addr, "/b", &format!("Cookie: {value}\r\n")).await, HashSet::from([server.clone()]));
    // The same server with dates an hour old: idle too long, so balanced afresh.
    let hour_ago =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() - 3600;
    let stale = format!("Cookie: SRV={server}|{0}|{0}\r\n", base36(hour_ago));
    assert!(spread(r.addr, "/c", &stale).await.len() > 1, "a stale cookie still pinned the client");
}

fn base36(mut n: u64) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n > 0 {
        out.push(digits[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_tags_the_application_cookie_and_restores_it() {
    let r = rig("{ mode = \"prefix\", cookie = \"JSESSIONID\" }").await;
    let login = send(r.addr, "/login/JSESSIONID", "").await;
    let server = origin_of(&login);
    let set = login.header("Set-Cookie").unwrap();
    assert_eq!(set, format!("JSESSIONID={server}~{server}-session; Path=/"));
    let cookie = format!("Cookie: JSESSIONID={server}~{server}-session\r\n");
    assert_eq!(spread(r.addr, "/cart", &cookie).await, HashSet::from([server.clone()]));
    assert_eq!(cookie_seen(&r, &server), Some(format!("JSESSIONID={server}-session")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learn_records_the_session_cookie_a_server_sets() {
    let r = rig("{ mode = \"learn\", cookie = \"PHPSESSID\" }").await;
    let login = send(r.addr, "/login/PHPSESSID", "").await;
    let server = origin_of(&login);
    // Passed on unchanged; learned.
    assert_eq!(login.header("Set-Cookie"), Some(format!("PHPSESSID={server}-session; Path=/").as_str()));
    let cookie = format!("Cookie: PHPSESSID={server}-session\r\n");
    assert_eq!(spread(r.addr, "/page", &cookie).await, HashSet::from([server.clone()]));
    assert_eq!(cookie_seen(&r, &server), Some(format!("PHPSESSID={server}-session")));
    // An unknown session is balanced.
    assert!(spread(r.addr, "/page", "Cookie: PHPSESSID=nobody\r\n").await.len() > 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_rewrites_the_cookie_name_at_the_same_length_and_restores_it() {
    let r = rig("{ mode = \"rename\", cookie = \"PHPSESSID\" }").await;
    let login = send(r.addr, "/login/PHPSESSID", "").await;
    let server = origin_of(&login);
    let set = login.header("Set-Cookie").unwrap().to_string();
    let (name, rest) = set.split_once('=').unwrap();
    assert_eq!(name.len(), "PHPSESSID".len(), "{set}");
    assert!(name.starts_with("CS000") && name.ends_with('D') && name != "PHPSESSID", "{set}");
    assert_eq!(rest, format!("{server}-session; Path=/"));
    let cookie = format!("Cookie: x=1; {name}={server}-session\r\n");
    assert_eq!(spread(r.addr, "/page", &cookie).await, HashSet::from([server.clone()]));
    assert_eq!(cookie_seen(&r, &server), Some(format!("x=1; PHPSESSID={server}-session")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_affinity_keeps_a_client_address_on_one_server_across_connections() {
    let r = rig("{ mode = \"source\", timeout = \"1m\" }").await;
    let seen = spread(r.addr, "/x", "").await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    // From another loopback address (its own entry): may land elsewhere, but stays put too.
    let mut other = HashSet::new();
    for _ in 0..4 {
        let mut c = RawClient::connect_from("127.0.0.2:0".parse().unwrap(), r.addr).await.unwrap();
        c.send(b"GET /y HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
        other.insert(origin_of(&c.read_response().await.unwrap()));
    }
    assert_eq!(other.len(), 1, "{other:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_entries_expire_and_entries_of_removed_servers_are_dropped() {
    let r = rig_workers("{ mode = \"source\", timeout = \"300ms\" }", 1).await;
    let pinned = origin_of(&send(r.addr, "/x", "").await);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    // Expired: round robin moves on from where it was.
    let next = origin_of(&send(r.addr, "/x", "").await);
    assert_ne!(next, pinned, "entry did not expire");
    // Remove the server now pinned: the entry goes with it.
    let keep: Vec<&Origin> = r.origins.iter().filter(|o| o.name() != next).collect();
    let servers: Vec<String> =
        keep.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    let full = text(&r.origins, "{ mode = \"source\", timeout = \"300ms\" }");
    let all: Vec<String> =
        r.origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    let fewer = full.replace(&all.join(", "), &servers.join(", "));
    r.switch.reload(config::parse(&fewer, Path::new("t.toml")).unwrap()).unwrap();
    assert_ne!(origin_of(&send(r.addr, "/x", "").await), next);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_and_url_parameter_affinity() {
    let r = rig("{ mode = \"header\", header = \"X-Session\" }").await;
    assert_eq!(spread(r.addr, "/h", "X-Session: abc\r\n").await.len(), 1);
    assert!(spread(r.addr, "/h", "").await.len() > 1, "no header: balanced");
    let r = rig("{ mode = \"url_param\", param = \"sid\" }").await;
    let mut seen = HashSet::new();
    for i in 0..6 {
        seen.insert(origin_of(&send(r.addr, &format!("/p/{i}?a=1&sid=42"), "").await));
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
}
