//! Test harness: testkit origins on port 0 and a switch in front of them, configured from
//! TOML text the way an operator would write it.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![allow(dead_code)]

use proxy::Switch;
use std::net::SocketAddr;
use std::path::Path;
use testkit::Origin;

pub struct Harness {
    pub switch: Switch,
    pub addr: SocketAddr,
    pub origins: Vec<Origin>,
}

impl Harness {
    pub fn origin(&self, name: &str) -> &Origin {
        self.origins.iter().find(|o| o.name() == name).expect("origin")
    }

    pub fn count(&self, c: proxy::Counter) -> u64 {
        self.switch.stats().get(c)
    }
}

/// Starts origins with these names and a switch (1 worker, rr) in front of them.
/// `extra` is appended to the TOML (whole tables such as `[limits]`).
pub async fn start(names: &[&str], extra: &str) -> Harness {
    start_with(names, "rr", extra).await
}

pub async fn start_with(names: &[&str], scheduler: &str, extra: &str) -> Harness {
    let mut origins = Vec::new();
    for n in names {
        origins.push(Origin::start(n).await);
    }
    let text = config_text(&origins, scheduler, extra);
    let cfg = config::parse(&text, Path::new("test.toml")).unwrap_or_else(|d| panic!("{d}\n{text}"));
    let switch = Switch::start(cfg).expect("switch starts");
    let addr = switch.local_addr("web").expect("listener");
    Harness { switch, addr, origins }
}

pub fn config_text(origins: &[Origin], scheduler: &str, extra: &str) -> String {
    let servers: Vec<String> =
        origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    let has = |t: &str| extra.contains(t);
    let mut text = String::new();
    if !has("[global]") {
        text.push_str("[global]\nworkers = 1\ngrace_period = \"2s\"\n");
        // CI runs the proxy's suites a second time on epoll (the default is io_uring), and a
        // third time on the ring with one receive per wait (what kernels without the
        // multishot byte limit get, Debian 12's own among them).
        match std::env::var("CSWITCH_TEST_IO").as_deref() {
            Ok("epoll") => text.push_str("io = \"epoll\"\n"),
            Ok("uring-single") => text.push_str("uring_multishot = false\n"),
            _ => {}
        }
        text.push('\n');
    }
    if !has("[access_log]") {
        text.push_str("[access_log]\nenabled = false\n\n");
    }
    text.push_str(&format!(
        "[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\n\
         [[group]]\nname = \"web\"\nscheduler = \"{scheduler}\"\nservers = [ {} ]\n\n{extra}\n",
        servers.join(", ")
    ));
    text
}

/// A GET with keep-alive.
pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").into_bytes()
}

/// Which origin answered.
pub fn origin_of(r: &testkit::Response) -> String {
    r.header("X-Origin").unwrap_or("-").to_string()
}

/// The admin view of server `name` (any group).
pub fn server(h: &Harness, name: &str) -> proxy::view::ServerView {
    h.switch.servers().into_iter().find(|s| s.name == name).expect("server")
}

/// Polls `cond` every 20 ms for at most `limit`; the time it took, or `None`.
pub async fn wait_for(
    limit: std::time::Duration,
    mut cond: impl FnMut() -> bool,
) -> Option<std::time::Duration> {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    None
}

/// Which origins answered `n` sequential GETs on one keep-alive connection.
pub async fn spread(h: &Harness, n: usize) -> Vec<String> {
    let mut c = testkit::RawClient::connect(h.addr).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..n {
        c.send(&get("/")).await.unwrap();
        let r = c.read_response().await.unwrap();
        assert_eq!(r.status, 200);
        seen.push(origin_of(&r));
    }
    seen
}
