//! Health: active checks (a killed server under load), passive checks, slow start, drain
//! and maintenance, banner and HTTP checks — as a client and the servers see them.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{get, origin_of, server, spread, start_with, wait_for, Harness};
use proxy::Counter;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testkit::RawClient;
use tokio::io::AsyncWriteExt;

fn apply(h: &Harness, edit: impl FnOnce(&config::Config) -> config::Config) {
    let next = edit(&h.switch.config());
    h.switch.apply(next, "test").unwrap();
}

#[derive(Default)]
struct Tally {
    ok: usize,
    failed_gets: usize,
    failed_posts: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_under_load_goes_down_and_only_unreplayable_requests_fail() {
    let health = "health = { check = \"http\", path = \"/health\", interval = \"200ms\", timeout = \"100ms\", rise = 2, fall = 2 }";
    // Lines after the harness's `servers` belong to the `web` group.
    let h = start_with(&["s1", "s2", "s3"], "rr", &format!("{health}\n")).await;
    wait_for(Duration::from_secs(2), || server(&h, "s2").health == "up").await.expect("checked up");

    // Eight clients, keep-alive, each with at most one request in flight: six send GETs
    // (replayable), two send POSTs with a body (never replayed).
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut clients = Vec::new();
    for i in 0..8 {
        let (stop, tally, addr) = (Arc::clone(&stop), Arc::clone(&tally), h.addr);
        clients.push(tokio::spawn(async move {
            let post = i >= 6;
            let deadline = Instant::now() + Duration::from_secs(6);
            let mut c = RawClient::connect(addr).await.unwrap();
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                let req: Vec<u8> = if post {
                    b"POST /slow/20 HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi".to_vec()
                } else {
                    get("/slow/20")
                };
                let status = match c.send(&req).await {
                    Ok(()) => c.read_response().await.map(|r| r.status).unwrap_or(0),
                    Err(_) => 0,
                };
                {
                    let mut t = tally.lock().unwrap();
                    match (status, post) {
                        (200, _) => t.ok += 1,
                        (_, false) => t.failed_gets += 1,
                        (_, true) => t.failed_posts += 1,
                    }
                }
                if status != 200 {
                    // The switch closes a connection after a failed request: start a new one.
                    c = RawClient::connect(addr).await.unwrap();
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    h.origin("s2").kill();
    let killed = Instant::now();
    let down = wait_for(Duration::from_secs(3), || server(&h, "s2").health == "down").await;
    let down = down.expect("s2 marked down");
    // fall × interval, plus one check timeout and scheduling slack.
    assert!(down <= Duration::from_millis(2 * 200 + 100 + 300), "down after {down:?}");
    wait_for(Duration::from_secs(1), || server(&h, "s2").effective_weight == 0).await.expect("weight 0");
    let failed_connects = h.count(Counter::ConnectFailed);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let t = tally.lock().unwrap();
    assert!(t.ok > 100, "load ran: {} ok", t.ok);
    assert_eq!(h.count(Counter::ConnectFailed), failed_connects, "no new connection to the down server");
    assert_eq!(t.failed_gets, 0, "GETs in flight on the reset connections were retried");
    assert!(t.failed_posts <= 2, "only POSTs in flight on s2 at the kill may fail: {}", t.failed_posts);
    assert!(killed.elapsed() > Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_comes_back_is_brought_up_by_its_checks() {
    // A TCP check against a port that first refuses, then listens.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let extra = format!(
        "[[group]]\nname = \"late\"\nhealth = {{ check = \"tcp\", interval = \"100ms\", timeout = \"50ms\", rise = 2, fall = 1 }}\n\
         servers = [ {{ name = \"l1\", addr = \"127.0.0.1:{port}\" }} ]\n"
    );
    let h = start_with(&["s1"], "rr", &extra).await;
    wait_for(Duration::from_secs(2), || server(&h, "l1").health == "down").await.expect("down");
    assert!(server(&h, "l1").last_check.contains("connect"), "{}", server(&h, "l1").last_check);
    let _listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let up = wait_for(Duration::from_secs(2), || server(&h, "l1").health == "up").await;
    assert!(up.is_some(), "up after rise = 2 passes");
    assert!(h.count(Counter::HealthCheckFailures) >= 1);
}

/// A server that writes `greeting` to every connection.
async fn banner_server(greeting: &'static str) -> std::net::SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let _ = s.write_all(greeting.as_bytes()).await;
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn banner_and_http_checks_judge_what_the_server_says() {
    let smtp_ok = banner_server("220 mail.example ESMTP\r\n").await;
    let smtp_bad = banner_server("554 go away\r\n").await;
    let pop_ok = banner_server("+OK POP3 ready\r\n").await;
    let imap_ok = banner_server("* OK IMAP4rev1 ready\r\n").await;
    let check = |name: &str, kind: &str, addr: std::net::SocketAddr| {
        format!(
            "[[group]]\nname = \"{name}\"\nhealth = {{ check = \"{kind}\", interval = \"100ms\", timeout = \"80ms\", fall = 1, rise = 1 }}\n\
             servers = [ {{ name = \"{name}1\", addr = \"{addr}\" }} ]\n"
        )
    };
    let mut extra = check("smtp", "smtp", smtp_ok) + &check("smtpbad", "smtp", smtp_bad);
    extra += &check("pop", "pop3", pop_ok);
    extra += &check("imap", "imap", imap_ok);
    extra += "[[group]]\nname = \"web2\"\nhealth = { check = \"http\", path = \"/status/503\", interval = \"100ms\", timeout = \"80ms\", fall = 1 }\nservers = [ { name = \"w503\", addr = \"ORIGIN\" } ]\n";
    extra += "[[group]]\nname = \"web3\"\nhealth = { check = \"http\", path = \"/\", expect_body = \"not there\", interval = \"100ms\", timeout = \"80ms\", fall = 1 }\nservers = [ { name = \"wbody\", addr = \"ORIGIN\" } ]\n";
    let origin = testkit::Origin::start("o").await;
    let extra = extra.replace("ORIGIN", &origin.addr().to_string());
    let h = start_with(&["s1"], "rr", &extra).await;
    let settled = wait_for(Duration::from_secs(3), || {
        let v = h.switch.servers();
        v.iter().all(|s| s.health != "unchecked" || s.group == "web")
            && v.iter().filter(|s| s.health == "down").count() == 3
    })
    .await;
    let views = h.switch.servers();
    assert!(settled.is_some(), "{views:#?}");
    let health = |n: &str| views.iter().find(|s| s.name == n).unwrap();
    for up in ["smtp1", "pop1", "imap1"] {
        assert_eq!(health(up).health, "up", "{up}");
    }
    assert!(health("smtpbad1").last_check.contains("554 go away"), "{}", health("smtpbad1").last_check);
    assert_eq!(health("w503").last_check, "status 503");
    assert!(health("wbody").last_check.contains("body lacks"), "{}", health("wbody").last_check);
    assert_eq!(health("s1").health, "unchecked", "a group without checks is not judged");
    // A group whose only server is down answers 503 (no usable server).
    let gone = origin.requests().len();
    assert!(gone > 0, "the origin saw the checks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passive_checks_take_a_failing_server_out_for_the_backoff() {
    let h = start_with(&["s1", "s2"], "rr", "").await;
    apply(&h, |c| {
        let mut c = c.clone();
        c.groups[0].passive =
            Some(config::Passive { failures: 2, on_5xx: false, backoff: Duration::from_millis(800) });
        c
    });
    h.origin("s2").kill();
    let all_s1 = spread(&h, 6).await;
    assert!(all_s1.iter().all(|o| o == "s1"), "{all_s1:?}");
    let after_out = h.count(Counter::ConnectFailed);
    assert_eq!(after_out, 2, "two failures took s2 out");
    assert_eq!(h.count(Counter::PassiveOuts), 1);
    assert!(server(&h, "s2").passive_out);
    spread(&h, 10).await;
    assert_eq!(h.count(Counter::ConnectFailed), after_out, "s2 is not tried during the back-off");
    tokio::time::sleep(Duration::from_millis(900)).await;
    wait_for(Duration::from_secs(1), || !server(&h, "s2").passive_out).await.expect("back-off over");
    spread(&h, 6).await;
    assert!(h.count(Counter::ConnectFailed) > after_out, "after the back-off s2 is tried again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passive_5xx_counting_when_configured() {
    let h = start_with(&["s1", "s2"], "rr", "").await;
    apply(&h, |c| {
        let mut c = c.clone();
        c.groups[0].passive =
            Some(config::Passive { failures: 3, on_5xx: true, backoff: Duration::from_secs(30) });
        c
    });
    // /status/500 answers 500 from both servers: after three each both are out, then 503.
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(testkit::get(h.addr, "/status/500").await.unwrap().status);
    }
    assert_eq!(&statuses[..6], &[500; 6]);
    assert_eq!(statuses[6], 503, "{statuses:?}");
    assert_eq!(h.count(Counter::PassiveOuts), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_added_by_reload_ramps_up_over_slow_start() {
    let h = start_with(&["s1"], "wrr", "").await;
    let newcomer = testkit::Origin::start("s2").await;
    apply(&h, |c| {
        let mut c = c.clone();
        c.groups[0].slow_start = Duration::from_secs(2);
        c.groups[0].servers[0].weight = 10;
        let mut s2 = c.groups[0].servers[0].clone();
        s2.name = "s2".into();
        s2.cookie = "s2".into();
        s2.addr = newcomer.addr();
        c.groups[0].servers.push(s2);
        c
    });
    // The control loop applies s1's new weight within a tick.
    wait_for(Duration::from_secs(1), || server(&h, "s1").effective_weight == 10).await.unwrap();
    let first = server(&h, "s2").effective_weight;
    assert!(first <= 2, "starts near 1/10 of 10: {first}");
    assert_eq!(server(&h, "s1").effective_weight, 10, "servers there from the start are not ramped");
    let mid = wait_for(Duration::from_secs(3), || (4..10).contains(&server(&h, "s2").effective_weight)).await;
    assert!(mid.is_some(), "ramps through the middle");
    let full = wait_for(Duration::from_secs(3), || server(&h, "s2").effective_weight == 10).await;
    assert!(full.is_some(), "full weight after slow_start");
    let seen = spread(&h, 20).await;
    assert_eq!(seen.iter().filter(|o| *o == "s2").count(), 10, "wrr at equal weights: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_lets_in_flight_and_sticky_requests_finish_and_starts_nothing_new() {
    let extra = "[[group]]\nname = \"pinned\"\nscheduler = \"first\"\ndrain_timeout = \"700ms\"\n\
                 persistence = { mode = \"source\" }\nservers = [ { name = \"p1\", addr = \"P1\" }, { name = \"p2\", addr = \"P2\" } ]\n\
                 [[listener]]\nname = \"pin\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"pinned\"\n";
    let (p1, p2) = (testkit::Origin::start("p1").await, testkit::Origin::start("p2").await);
    let extra = extra.replace("P1", &p1.addr().to_string()).replace("P2", &p2.addr().to_string());
    let h = start_with(&["s1"], "rr", &extra).await;
    let pin = h.switch.local_addr("pin").unwrap();
    // `first` sends everything to p1; the source table remembers 127.0.0.1 → p1 once a
    // request has been answered.
    assert_eq!(origin_of(&testkit::get(pin, "/warm").await.unwrap()), "p1");
    let mut in_flight = Vec::new();
    for _ in 0..4 {
        in_flight.push(tokio::spawn(async move { testkit::get(pin, "/slow/500").await.unwrap() }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    apply(&h, |c| config::edit::set_state(c, "pinned", "p1", config::ServerState::Drain).unwrap());
    wait_for(Duration::from_secs(1), || server(&h, "p1").effective_weight == 0).await.unwrap();
    assert_eq!(server(&h, "p1").state, "drain");
    assert!(server(&h, "p1").sticky_ok, "sticky traffic still allowed while draining");
    // The sticky client (same address) still reaches p1 while the drain lasts.
    let r = testkit::get(pin, "/during-drain").await.unwrap();
    assert_eq!(origin_of(&r), "p1");
    for t in in_flight {
        let r = t.await.unwrap();
        assert_eq!((r.status, origin_of(&r)), (200, "p1".to_string()), "in-flight requests complete");
    }
    // After drain_timeout, the sticky entry no longer holds: everything goes to p2.
    wait_for(Duration::from_secs(2), || !server(&h, "p1").sticky_ok).await.expect("drain timeout");
    let before = p1.requests().len();
    for _ in 0..5 {
        let r = testkit::get(pin, "/after-drain").await.unwrap();
        assert_eq!(origin_of(&r), "p2");
    }
    assert_eq!(p1.requests().len(), before, "no new request reached the drained server");
    // Ready again: new requests may go back.
    apply(&h, |c| config::edit::set_state(c, "pinned", "p1", config::ServerState::Ready).unwrap());
    wait_for(Duration::from_secs(1), || server(&h, "p1").effective_weight == 1).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_stops_all_traffic_sticky_included() {
    let h = start_with(&["s1", "s2"], "rr", "").await;
    apply(&h, |c| {
        let mut c = c.clone();
        c.groups[0].persistence = Some(config::Persistence {
            mode: config::PersistMode::Source {
                timeout: Duration::from_secs(60),
                netmask_v4: 32,
                netmask_v6: 128,
            },
            table_size: 100,
        });
        c
    });
    let first = spread(&h, 1).await.remove(0);
    let other = if first == "s1" { "s2" } else { "s1" };
    apply(&h, |c| config::edit::set_state(c, "web", &first, config::ServerState::Maint).unwrap());
    wait_for(Duration::from_secs(1), || !server(&h, &first).sticky_ok).await.unwrap();
    let seen = spread(&h, 6).await;
    assert!(seen.iter().all(|o| o == other), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_removed_by_reload_drains_before_it_goes() {
    let h = start_with(&["s1", "s2"], "rr", "").await;
    // Two slow requests: with rr one lands on each server.
    let addr = h.addr;
    let slow: Vec<_> =
        (0..2).map(|_| tokio::spawn(async move { testkit::get(addr, "/slow/600").await.unwrap() })).collect();
    wait_for(Duration::from_secs(1), || server(&h, "s2").active == 1).await.expect("s2 busy");
    let generation = h.switch.status().generation;
    apply(&h, |c| config::edit::remove_server(c, "web", "s2").unwrap());
    // Still listed while its request runs, draining, and taking nothing new.
    let s2 = server(&h, "s2");
    assert_eq!((s2.state, s2.active), ("drain", 1));
    let seen = spread(&h, 4).await;
    assert!(seen.iter().all(|o| o == "s1"), "{seen:?}");
    for t in slow {
        assert_eq!(t.await.unwrap().status, 200, "the request in flight on the removed server completes");
    }
    let gone = wait_for(Duration::from_secs(1), || h.switch.servers().iter().all(|s| s.name != "s2")).await;
    assert!(gone.is_some(), "gone once idle");
    assert_eq!(h.switch.status().generation, generation + 2, "the reload, then the drop");
}
