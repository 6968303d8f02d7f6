//! Three members in one process on loopback addresses: they find each other, share a
//! capacity within a second, notice a stopped member within two seconds, and ignore a
//! member whose key differs (counting its datagrams).
#![allow(clippy::unwrap_used)] // in tests a panic is the failure report

use cswitch_cluster::{Cluster, LearnedCookie, Remote, StickyIp, TlsSession, View};
use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const KEY: &str = "0123456789abcdef0123";

/// A free UDP port on `ip` (bound and released; the member binds it right after).
fn free(ip: &str) -> SocketAddr {
    UdpSocket::bind((ip, 0)).unwrap().local_addr().unwrap()
}

/// Hands what other members share to the test.
struct Collect(std::sync::Mutex<mpsc::Sender<Shared>>);

#[derive(Debug, PartialEq)]
enum Shared {
    Capacity(SocketAddr, u32),
    Sticky(StickyIp),
    Learned(LearnedCookie),
    Tls(TlsSession),
}

impl Remote for Collect {
    fn capacity(&self, server: SocketAddr, capacity: u32, _age: Duration) {
        let _ = self.0.lock().unwrap().send(Shared::Capacity(server, capacity));
    }
    fn sticky_ip(&self, entry: &StickyIp, _age: Duration) {
        let _ = self.0.lock().unwrap().send(Shared::Sticky(entry.clone()));
    }
    fn learned_cookie(&self, entry: &LearnedCookie, _age: Duration) {
        let _ = self.0.lock().unwrap().send(Shared::Learned(entry.clone()));
    }
    fn tls_session(&self, entry: &TlsSession, _age: Duration) {
        let _ = self.0.lock().unwrap().send(Shared::Tls(entry.clone()));
    }
}

fn member(
    name: &str,
    bind: SocketAddr,
    seeds: &[SocketAddr],
    key: &str,
) -> (Cluster, mpsc::Receiver<Shared>) {
    let cfg = config::Cluster {
        node: name.into(),
        bind,
        seeds: seeds.to_vec(),
        key: Some(key.into()),
        gossip_interval: Duration::from_millis(100),
        state_file: None,
        l4: None,
    };
    let (tx, rx) = mpsc::channel();
    let remote = Box::new(Collect(std::sync::Mutex::new(tx)));
    (Cluster::start(&cfg, format!("digest-of-{name}"), remote).unwrap(), rx)
}

fn wait_for(what: &str, limit: Duration, cluster: &Cluster, ok: impl Fn(&View) -> bool) -> Duration {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ok(&cluster.view()) {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what} not within {limit:?}: {:#?}", cluster.view());
}

fn live(view: &View, name: &str) -> bool {
    view.nodes.iter().any(|n| n.name == name && n.live)
}

#[test]
fn members_join_share_capacities_and_notice_deaths() {
    let (a_addr, b_addr, c_addr) = (free("127.0.0.21"), free("127.0.0.22"), free("127.0.0.23"));
    let (a, _) = member("a", a_addr, &[], KEY);
    let (b, b_caps) = member("b", b_addr, &[a_addr], KEY);
    let (c, _) = member("c", c_addr, &[a_addr], KEY);
    wait_for("all three live at b", Duration::from_secs(5), &b, |v| {
        ["a", "b", "c"].iter().all(|n| live(v, n))
    });
    let view = b.view();
    let a_seen = view.nodes.iter().find(|n| n.name == "a").unwrap();
    assert_eq!(a_seen.config_digest.as_deref(), Some("digest-of-a"));
    assert!(a_seen.drift, "a's digest differs from b's");
    assert!(a_seen.lag_ms.unwrap() < 1000, "{a_seen:?}");

    let server: SocketAddr = "127.0.0.1:9001".parse().unwrap();
    let start = Instant::now();
    a.publish_capacity(server, 42);
    let got = b_caps.recv_timeout(Duration::from_secs(1)).expect("a's capacity at b within 1 s");
    assert_eq!(got, Shared::Capacity(server, 42));
    eprintln!("capacity a → b in {:?}", start.elapsed());
    let entry = StickyIp {
        listener: "web".into(),
        client: "192.0.2.7".parse().unwrap(),
        group: "shop".into(),
        server: "s2".into(),
    };
    a.publish_sticky_ip(&entry, Duration::from_millis(300));
    let got = b_caps.recv_timeout(Duration::from_secs(1)).expect("a's sticky entry at b within 1 s");
    assert_eq!(got, Shared::Sticky(entry));
    let cookie = LearnedCookie { group: "shop".into(), value: "abc/123".into(), server: "s1".into() };
    a.publish_learned_cookie(&cookie, Duration::from_secs(60));
    let got = b_caps.recv_timeout(Duration::from_secs(1)).expect("a's learned cookie at b within 1 s");
    assert_eq!(got, Shared::Learned(cookie));
    let session = TlsSession { id: vec![1, 2, 3, 254], group: "tls".into(), server: "s3".into() };
    a.publish_tls_session(&session, Duration::from_secs(60));
    let got = b_caps.recv_timeout(Duration::from_secs(1)).expect("a's TLS session at b within 1 s");
    assert_eq!(got, Shared::Tls(session));
    wait_for("a's sticky entry withdrawn after its lifetime", Duration::from_secs(2), &b, |v| {
        v.nodes.iter().any(|n| n.name == "a" && n.sticky_ip == 0)
    });

    c.stop();
    let took = wait_for("c dead at b", Duration::from_secs(2), &b, |v| {
        v.nodes.iter().any(|n| n.name == "c" && !n.live)
    });
    eprintln!("c seen dead at b after {took:?}");
    drop(a);
}

#[test]
fn a_member_without_the_key_is_ignored_and_counted() {
    let (a_addr, x_addr) = (free("127.0.0.24"), free("127.0.0.25"));
    let (a, _) = member("a", a_addr, &[], KEY);
    let (x, _) = member("intruder", x_addr, &[a_addr], "another-key-0123456789");
    wait_for("a refuses the intruder's datagrams", Duration::from_secs(3), &a, |v| v.gossip.rejected >= 3);
    let view = a.view();
    assert!(view.nodes.iter().all(|n| n.name != "intruder"), "{view:#?}");
    assert!(view.gossip.last_rejected.as_deref().unwrap().contains("wrong authentication tag"));
    assert!(x.view().nodes.iter().all(|n| n.name != "a"), "the intruder learns nothing either");
}
