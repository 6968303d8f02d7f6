//! HashNAT forwarding by hand-off (issue 13 part 4, ADR 0019), through the running binaries
//! in network namespaces (`hashnat_bed`): three hosts, each with a cswitch whose client
//! listener is one-way, a hand-off agent, a capacity agent and an origin; a client.
//!
//! Asserts, each from what the client, the origins and the kernels see:
//! - a request SIEVE places on a peer is answered by the peer's origin directly: it reads
//!   the request as the client sent it (no `X-Forwarded-For`), and the host the client
//!   reached sends not one answer segment from its stack (an nftables counter) and a small
//!   fraction of the answer's bytes on its interface (the client's ACKs it forwards);
//! - a request placed on the host itself is served there (its own origin, one hop);
//! - on a keep-alive connection, a later request placed on a peer moves the connection
//!   there at the request boundary, and the connection then stays with that peer; with
//!   `connection_persistence = "close"` the peer closes it after its answer instead, so
//!   every request is placed;
//! - a refused hand-off (the peer cannot restore: it lacks the address) is proxied, every
//!   request answered, each fallback counted by reason; so is a hand-off to a peer whose
//!   agent is gone, and one to a peer the host reaches through a router (not on its
//!   segment), which is not even tried;
//! - a host leaving and joining again under a bounded client loop loses no request.
//!
//! Needs root, iproute2, nftables and python3; `CSWITCH_REQUIRE_KERNEL=1` (`.ci/run`) turns
//! their absence into a failure.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod hashnat_bed;
mod oneway_bed;

use hashnat_bed::{private, public, public_close, Bed, HOSTS};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testkit::netns::ip_of;
use testkit::RawClient;

/// The answer's size: large enough that the forwarded ACKs are a small part of it.
const SIZE: usize = 300_000;

/// One answer: its status, origin, whether its body is `/big`'s byte for byte, and whether
/// it says `Connection: close`.
type Answer = (u16, String, bool, bool);

/// Runs `urls` (in order) on one connection from the client to `to` (the last request
/// with `Connection: close` when `close`): the answers.
fn on_one_connection(bed: &Bed, to: SocketAddr, urls: &[String], close: bool) -> Vec<Answer> {
    let urls = urls.to_vec();
    bed.net
        .thread("cl", move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let mut c = RawClient::connect(to).await.unwrap();
                let mut out = Vec::new();
                for (k, url) in urls.iter().enumerate() {
                    let last = close && k + 1 == urls.len();
                    let connection = if last { "close" } else { "keep-alive" };
                    let req = format!("GET {url} HTTP/1.1\r\nHost: shop\r\nConnection: {connection}\r\n\r\n");
                    c.send(req.as_bytes()).await.unwrap();
                    let r = tokio::time::timeout(Duration::from_secs(10), c.read_response())
                        .await
                        .unwrap()
                        .unwrap();
                    let closes = r.header("Connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
                    let origin = r.header("X-Origin").unwrap_or_default().to_string();
                    out.push((r.status, origin, is_big(&r.body), closes));
                }
                out
            })
        })
        .join()
        .unwrap()
}

fn is_big(body: &[u8]) -> bool {
    body.len() == SIZE && body.iter().enumerate().all(|(i, b)| *b == testkit::big_byte(i as u64))
}

fn url(i: usize) -> String {
    format!("/big/{SIZE}?obj={i}")
}

/// How many hops the request took to `origin` (the addresses in its `X-Forwarded-For`;
/// 0: it came as the client sent it, by hand-off).
fn hops(bed: &Bed, origin: &str, url: &str) -> usize {
    let o = bed.origins.iter().find(|o| o.name() == origin).unwrap();
    let seen = o.requests().into_iter().rev().find(|r| r.target == url).unwrap();
    seen.header("X-Forwarded-For").map_or(0, |v| v.split(',').count())
}

#[test]
fn a_peer_answers_the_client_directly_and_hosts_leave_and_join_without_a_failed_request() {
    let Some(mut bed) = Bed::start("handoff") else { return };
    bed.install_payload_probe(0);

    // 1. Each URL through h1 on its own connection: placed on a peer, handed off; placed on
    //    h1 itself, served there.
    let (mut local, mut peers, mut handed_sent) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..24 {
        let (segments, sent) = (bed.payload_segments(0), bed.tx_bytes(0));
        let answer = on_one_connection(&bed, public(0), &[url(i)], true);
        let (status, origin, whole, _) = answer[0].clone();
        assert!(status == 200 && whole, "{}: status {status}, body whole: {whole}", url(i));
        let (segments, sent) = (bed.payload_segments(0) - segments, bed.tx_bytes(0) - sent);
        if origin == "o1" {
            assert!(segments > 0, "{}: served by h1, its stack sent the answer", url(i));
            assert_eq!(hops(&bed, "o1", &url(i)), 1, "{}: from h1 to its own origin", url(i));
            local.push(i);
        } else {
            assert_eq!(segments, 0, "{}: answered by {origin}, yet h1's stack sent answer segments", url(i));
            assert!(sent < (SIZE / 10) as u64, "{}: h1 sent {sent} bytes for a {SIZE}-byte answer", url(i));
            assert_eq!(hops(&bed, &origin, &url(i)), 0, "{}: {origin} got the client's own bytes", url(i));
            peers.push((i, origin));
            handed_sent.push(sent);
        }
    }
    eprintln!("through h1: {} URLs served by h1, {} handed to peers: {peers:?}", local.len(), peers.len());
    assert!(!local.is_empty() && !peers.is_empty(), "both kinds placed: local {local:?}, peers {peers:?}");
    assert_eq!(bed.metric(0, "cswitch_handoffs_total"), peers.len() as u64, "one hand-off per peer URL");
    assert_eq!(bed.metric(0, "cswitch_handoff_fallbacks_total"), 0, "no fallback");

    // 2. Keep-alive: served by h1, then placed on a peer (the connection moves there at the
    //    request boundary), then the connection stays with that peer.
    let (l, (p, owner)) = (local[0], peers[0].clone());
    let answers = on_one_connection(&bed, public(0), &[url(l), url(p), url(l)], true);
    let origins: Vec<&str> = answers.iter().map(|(_, o, _, _)| o.as_str()).collect();
    assert!(answers.iter().all(|(s, _, whole, _)| *s == 200 && *whole), "{answers:?}");
    assert_eq!(
        origins,
        ["o1", owner.as_str(), owner.as_str()],
        "handed off at the second request, then pinned"
    );
    assert_eq!(bed.metric(0, "cswitch_handoffs_total"), peers.len() as u64 + 1);
    //    With `connection_persistence = "close"` every request is placed: the peer's agent
    //    closes the connection after its answer, and the next request comes on a new one.
    let answers = on_one_connection(&bed, public_close(0), &[url(l), url(p)], false);
    let origins: Vec<&str> = answers.iter().map(|(_, o, _, _)| o.as_str()).collect();
    assert_eq!(origins, ["o1", owner.as_str()], "{answers:?}");
    assert!(answers.iter().all(|(s, _, whole, _)| *s == 200 && *whole), "{answers:?}");
    assert!(answers[1].3, "the handed-off answer says Connection: close");
    let again = on_one_connection(&bed, public_close(0), &[url(l)], true);
    assert_eq!(again[0].1, "o1", "the next request, on a new connection, placed again");
    assert_eq!(bed.metric(0, "cswitch_handoffs_total"), peers.len() as u64 + 2);
    eprintln!("keep-alive: pinned to {owner} after the hand-off; with close, each request placed");

    // 3. A peer that cannot restore (h1's public address taken off its `lo`): each of its
    //    URLs is proxied to it, answered, and the fallback counted.
    let owner_host = owner.replace('o', "h");
    let at = HOSTS.iter().position(|h| *h == owner_host).unwrap();
    let address = format!("{}/32", public(0).ip());
    bed.net.run(&owner_host, &["ip", "addr", "del", &address, "dev", "lo"]);
    let theirs: Vec<usize> = peers.iter().filter(|(_, o)| *o == owner).map(|(i, _)| *i).collect();
    let mut proxied_sent = Vec::new();
    for &i in &theirs {
        let sent = bed.tx_bytes(0);
        let (status, origin, whole, _) = on_one_connection(&bed, public(0), &[url(i)], true)[0].clone();
        proxied_sent.push(bed.tx_bytes(0) - sent);
        assert!(status == 200 && whole && origin == owner, "{}: {status} from {origin}", url(i));
        assert_eq!(hops(&bed, &owner, &url(i)), 2, "{}: proxied through h1's peer forward", url(i));
    }
    handed_sent.sort_unstable();
    proxied_sent.sort_unstable();
    eprintln!(
        "bytes h1's interface sent per {SIZE}-byte answer: handed off {:?} (median {}), proxied {:?} (median {})",
        (handed_sent[0], handed_sent[handed_sent.len() - 1]),
        handed_sent[handed_sent.len() / 2],
        (proxied_sent[0], proxied_sent[proxied_sent.len() - 1]),
        proxied_sent[proxied_sent.len() / 2]
    );
    let refused = bed.metric(0, "cswitch_handoff_fallbacks_total{reason=\"restore_failed\"}");
    assert_eq!(refused, theirs.len() as u64, "each refused hand-off counted");
    bed.net.run(&owner_host, &["ip", "addr", "add", &address, "dev", "lo"]);
    eprintln!("{} hand-offs refused by {owner_host}: proxied, all answered", theirs.len());

    // 4. The peer's hand-off agent gone (its switch and capacity reports still up): each
    //    hand-off finds no agent and the request is proxied.
    drop(bed.hosts[at].handoffs.take());
    for &i in &theirs {
        let (status, origin, whole, _) = on_one_connection(&bed, public(0), &[url(i)], true)[0].clone();
        assert!(status == 200 && whole && origin == owner, "{}: {status} from {origin}", url(i));
        assert_eq!(hops(&bed, &owner, &url(i)), 2, "{}: proxied", url(i));
    }
    let no_agent = bed.metric(0, "cswitch_handoff_fallbacks_total{reason=\"no_agent\"}");
    assert_eq!(no_agent, theirs.len() as u64, "each hand-off without an agent counted");
    bed.hosts[at].handoffs = Some(bed.start_handoffs(at));
    eprintln!("{no_agent} hand-offs to {owner_host} without its agent: proxied, all answered");

    // 5. The same peer reached through a router (the third host): not on h1's segment, so
    //    no hand-off is tried (steering rewrites MACs only); proxied, counted.
    let (router, owner_ip) = (3 - at, ip_of(private(at)));
    bed.net.run(HOSTS[router], &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    bed.net.run("h1", &["ip", "route", "add", &format!("{owner_ip}/32"), "via", &ip_of(private(router))]);
    std::thread::sleep(Duration::from_millis(1_100)); // the workers' view of the routes: ≤ 1 s old
    for &i in &theirs {
        let (status, origin, whole, _) = on_one_connection(&bed, public(0), &[url(i)], true)[0].clone();
        assert!(status == 200 && whole && origin == owner, "{}: {status} from {origin}", url(i));
        assert_eq!(hops(&bed, &owner, &url(i)), 2, "{}: proxied through the router", url(i));
    }
    let off = bed.metric(0, "cswitch_handoff_fallbacks_total{reason=\"not_on_segment\"}");
    assert_eq!(off, theirs.len() as u64, "each hand-off to a routed host counted, none tried");
    assert_eq!(bed.metric(0, "cswitch_handoff_fallbacks_total{reason=\"no_agent\"}"), no_agent);
    eprintln!(
        "{off} hand-offs to {owner_host} routed through {}: not tried, proxied, all answered",
        HOSTS[router]
    );
    bed.net.run("h1", &["ip", "route", "del", &format!("{owner_ip}/32")]);
    std::thread::sleep(Duration::from_millis(1_100));

    // 6. h2 leaves and comes back under a client loop through h1 and h3.
    leave_and_join_under_load(&mut bed);
}

/// A bounded client loop (4 clients, ≤ 30 s, ≤ 4,000 requests) through h1 and h3 while h2
/// leaves — its switch stopped (SIGTERM) and its reports with it; its hand-off agent kept
/// until the others weigh it 0 and its relays are done — and starts again.
fn leave_and_join_under_load(bed: &mut Bed) {
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let sent = Arc::new(AtomicUsize::new(0));
    let handed_and_fell = |bed: &Bed| -> (u64, u64) {
        let sum = |name: &str| bed.metric(0, name) + bed.metric(2, name);
        (sum("cswitch_handoffs_total"), sum("cswitch_handoff_fallbacks_total"))
    };
    let before = handed_and_fell(bed);
    let loops: Vec<_> = (0..4)
        .map(|w| {
            let (stop, failures, sent) = (Arc::clone(&stop), Arc::clone(&failures), Arc::clone(&sent));
            bed.net.thread("cl", move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                let deadline = Instant::now() + Duration::from_secs(30);
                let mut i = w;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline && i < 4_000 {
                    let to = if i % 2 == 0 { public(0) } else { public(2) };
                    let target = format!("/big/20000?obj={}", i % 48);
                    let got = rt.block_on(async {
                        let mut c = RawClient::connect(to).await.map_err(|e| e.to_string())?;
                        let req = format!("GET {target} HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n");
                        c.send(req.as_bytes()).await.map_err(|e| e.to_string())?;
                        let r = tokio::time::timeout(Duration::from_secs(10), c.read_response())
                            .await
                            .map_err(|_| "no answer in 10 s".to_string())?
                            .map_err(|e| e.to_string())?;
                        match (r.status, r.body.len()) {
                            (200, 20_000) => Ok(()),
                            (s, n) => Err(format!("status {s}, {n} bytes")),
                        }
                    });
                    if let Err(e) = got {
                        failures.lock().unwrap().push(format!("{target} via {to}: {e}"));
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                    i += 4;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let h2 = &mut bed.hosts[1];
    let mut switch = h2.switch.take().unwrap();
    let pid = switch.child.id().to_string();
    testkit::netns::sh(&["kill", "-TERM", &pid]);
    assert!(switch.child.wait().unwrap().success(), "h2's switch stopped cleanly");
    drop(h2.reports.take());
    let gone = Instant::now();
    for i in [0, 2] {
        bed.until_weighs(i, &["h1", "h3"], Duration::from_secs(3));
    }
    eprintln!("h2 weighed 0 by h1 and h3 {:?} after it stopped", gone.elapsed());
    std::thread::sleep(Duration::from_millis(500));
    drop(bed.hosts[1].handoffs.take());
    std::thread::sleep(Duration::from_millis(500));
    let o2_before = bed.origins[1].requests().len();
    bed.start_host(1);
    let back = Instant::now();
    for i in [0, 2] {
        bed.until_weighs(i, &HOSTS, Duration::from_secs(5));
    }
    eprintln!("h2 weighed again {:?} after it started", back.elapsed());
    std::thread::sleep(Duration::from_millis(800));
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.join().unwrap();
    }
    let failures = failures.lock().unwrap();
    let total = sent.load(Ordering::Relaxed);
    let o2_after = bed.origins[1].requests().len() - o2_before;
    let after = handed_and_fell(bed);
    let (handed, fell) = (after.0 - before.0, after.1 - before.1);
    eprintln!(
        "{total} requests through h1 and h3 while h2 left and joined: {} failed; {handed} handed off, {fell} served two-way after a failed hand-off; o2 served {o2_after} after h2 came back",
        failures.len()
    );
    assert!(failures.is_empty(), "failed requests: {:?}", &failures[..failures.len().min(10)]);
    assert!(total > 100, "the loop ran: {total}");
    assert!(handed > 0, "peers' shares handed off during the loop");
    assert!(o2_after > 0, "h2's host serves again after it joined");
}
