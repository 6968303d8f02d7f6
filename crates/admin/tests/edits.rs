//! The admin listener's mutations over real sockets: weight and state changes that traffic
//! follows, add, drain-then-remove, reload from the file, refused edits that change
//! nothing, and the issue's test — a reload and admin changes while a client loop runs,
//! with zero failed requests.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod rig;

use rig::{bounded, Rig, Spec};
use std::time::{Duration, Instant};

fn count(who: &[String], name: &str) -> usize {
    who.iter().filter(|w| *w == name).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_weight_zero_moves_new_requests_away() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1", "s2"], ..Spec::default() }).await;
        let before = rig.spread(10).await;
        assert!(count(&before, "s1") > 0 && count(&before, "s2") > 0, "{before:?}");
        let r = rig.call("PATCH", "/api/servers/web/s1", r#"{"weight": 0}"#).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json["generation"], 1);
        assert_eq!(r.json["changes"][0], "server `s1` of group `web` changed: weight 1 → 0");
        rig.wait_weight("s1", |w| w == 0).await;
        let after = rig.spread(10).await;
        assert_eq!(count(&after, "s2"), 10, "{after:?}");
        // The same value again is no change: no new generation.
        let same = rig.call("PATCH", "/api/servers/web/s1", r#"{"weight": 0}"#).await;
        assert_eq!((same.status, same.json["generation"].as_u64()), (200, Some(1)));
        assert_eq!(same.json["changes"].as_array().unwrap().len(), 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_state_drain_lets_in_flight_finish_and_starts_nothing_new() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1", "s2"], ..Spec::default() }).await;
        // Two slow requests: rr gives one to each server.
        let web = rig.web;
        let slow: Vec<_> = (0..2).map(|_| tokio::spawn(testkit::get(web, "/slow/600"))).collect();
        rig.wait_servers("both requests in flight", |all| all.iter().all(|s| s["active"] == 1)).await;
        let r = rig.call("PATCH", "/api/servers/web/s1", r#"{"state": "drain", "weight": 4}"#).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json["changes"].as_array().unwrap().len(), 1, "one edit: {}", r.text());
        assert_eq!(r.json["generation"], 1, "weight and state in one generation");
        rig.wait_weight("s1", |w| w == 0).await;
        let during = rig.spread(6).await;
        assert_eq!(count(&during, "s2"), 6, "{during:?}");
        for task in slow {
            assert_eq!(task.await.unwrap().unwrap().status, 200, "in-flight requests complete");
        }
        let s1 = rig.server("s1").await.unwrap();
        assert_eq!((s1["state"].as_str(), s1["weight"].as_u64()), (Some("drain"), Some(4)));
        let back = rig.call("PATCH", "/api/servers/web/s1", r#"{"state": "ready"}"#).await;
        assert_eq!(back.status, 200);
        rig.wait_weight("s1", |w| w == 4).await;
        assert!(count(&rig.spread(10).await, "s1") > 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_patches_and_adds_change_nothing() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1", "s2"], ..Spec::default() }).await;
        let s1 = "/api/servers/web/s1";
        let cases: &[(&str, &str, &str, u16, &str)] = &[
            ("PATCH", s1, "", 400, "the body must be a JSON object"),
            ("PATCH", s1, "{}", 400, "nothing to change"),
            ("PATCH", s1, "{\"weight\": 2", 400, "bad JSON body"),
            ("PATCH", s1, r#"{"weight": "2"}"#, 400, "invalid type"),
            ("PATCH", s1, r#"{"weight": -1}"#, 400, "invalid value"),
            ("PATCH", s1, r#"{"weight": 2, "colour": "red"}"#, 400, "unknown field `colour`"),
            ("PATCH", s1, r#"{"weight": 2, "state": "sleeping"}"#, 400, "unknown state `sleeping`"),
            ("PATCH", s1, r#"{"weight": 2000000}"#, 400, "weight must be between 0 and 1000000"),
            ("PATCH", "/api/servers/web/s9", r#"{"weight": 2}"#, 404, "group `web` has no server `s9`"),
            ("PATCH", "/api/servers/nope/s1", r#"{"weight": 2}"#, 404, "no group `nope`"),
            ("POST", "/api/servers", r#"{"group": "web", "name": "s3"}"#, 400, "missing field `addr`"),
            (
                "POST",
                "/api/servers",
                r#"{"group": "web", "name": "s3", "addr": "localhost:1"}"#,
                400,
                "not IP:port",
            ),
            (
                "POST",
                "/api/servers",
                r#"{"group": "web", "name": "s3", "addr": "127.0.0.1:0"}"#,
                400,
                "port 0",
            ),
            (
                "POST",
                "/api/servers",
                r#"{"group": "web", "name": "s1", "addr": "127.0.0.1:1"}"#,
                400,
                "already has a server `s1`",
            ),
            (
                "POST",
                "/api/servers",
                r#"{"group": "web", "name": "a b", "addr": "127.0.0.1:1"}"#,
                400,
                "may only use letters",
            ),
            (
                "POST",
                "/api/servers",
                r#"{"group": "nope", "name": "s3", "addr": "127.0.0.1:1"}"#,
                404,
                "no group `nope`",
            ),
            ("DELETE", "/api/servers/web/s9", "", 404, "group `web` has no server `s9`"),
        ];
        for (method, path, body, status, error) in cases {
            let r = rig.call(method, path, body).await;
            assert_eq!(r.status, *status, "{method} {path} {body}: {}", r.text());
            assert!(r.error().contains(error), "{method} {path} {body}: {}", r.error());
        }
        assert_eq!(rig.generation().await, 0, "nothing was applied");
        assert_eq!(rig.switch.config().groups[0].servers.len(), 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_server_adds_one_that_gets_traffic() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1", "s2"], in_config: 1, ..Spec::default() }).await;
        assert_eq!(count(&rig.spread(4).await, "s1"), 4);
        let body = format!(
            r#"{{"group": "web", "name": "s2", "addr": "{}", "weight": 3, "maxconn": 10}}"#,
            rig.origin("s2").addr()
        );
        let r = rig.call("POST", "/api/servers", &body).await;
        assert_eq!(r.status, 201, "{}", r.text());
        assert_eq!(r.json["generation"], 1);
        let change = format!("server `s2` ({}) added to group `web`", rig.origin("s2").addr());
        assert_eq!(r.json["changes"][0], change);
        rig.wait_weight("s2", |w| w == 3).await;
        let s2 = rig.server("s2").await.unwrap();
        assert_eq!((s2["maxconn"].as_u64(), s2["state"].as_str()), (Some(10), Some("ready")));
        assert!(count(&rig.spread(8).await, "s2") > 0);
        assert_eq!(rig.switch.config().groups[0].servers[1].cookie, "s2", "cookie defaults to the name");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_drains_then_removes_once_idle() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1", "s2"], ..Spec::default() }).await;
        let web = rig.web;
        let slow: Vec<_> = (0..2).map(|_| tokio::spawn(testkit::get(web, "/slow/800"))).collect();
        rig.wait_servers("both requests in flight", |all| all.iter().all(|s| s["active"] == 1)).await;
        let r = rig.call("DELETE", "/api/servers/web/s2", "").await;
        assert_eq!(r.status, 202, "{}", r.text());
        assert_eq!(r.json["status"], "draining");
        assert_eq!(r.json["server"], "s2");
        assert_eq!(r.json["drain_timeout_ms"], 300_000);
        assert_eq!(r.json["changes"][0], "server `s2` of group `web` changed: state ready → drain");
        let draining = rig.server("s2").await.expect("still listed while its request runs");
        assert_eq!(draining["state"], "drain");
        rig.wait_weight("s2", |w| w == 0).await;
        assert_eq!(count(&rig.spread(4).await, "s1"), 4);
        for task in slow {
            assert_eq!(task.await.unwrap().unwrap().status, 200, "in-flight requests complete");
        }
        rig.wait_servers("s2 removed", |all| all.iter().all(|s| s["name"] != "s2")).await;
        // Drain, then remove (the switch may count one more generation when it drops the
        // removed server from its snapshot).
        assert!(rig.generation().await >= 2);
        assert_eq!(rig.switch.config().groups[0].servers.len(), 1);
        // The last server of a group cannot go: refused before anything drains.
        let last = rig.call("DELETE", "/api/servers/web/s1", "").await;
        assert_eq!(last.status, 400);
        assert!(last.error().contains("last server"), "{}", last.error());
        assert_eq!(rig.server("s1").await.unwrap()["state"], "ready");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_a_busy_server_after_the_drain_timeout() {
    bounded(async {
        let spec = Spec { origins: &["s1", "s2"], group: "drain_timeout = \"300ms\"", ..Spec::default() };
        let rig = Rig::start(spec).await;
        let web = rig.web;
        let slow: Vec<_> = (0..2).map(|_| tokio::spawn(testkit::get(web, "/slow/2500"))).collect();
        rig.wait_servers("both requests in flight", |all| all.iter().all(|s| s["active"] == 1)).await;
        let started = Instant::now();
        assert_eq!(rig.call("DELETE", "/api/servers/web/s2", "").await.status, 202);
        let removed = |rig: &Rig| rig.switch.config().groups[0].servers.len() == 1;
        while !removed(&rig) {
            assert!(started.elapsed() < Duration::from_secs(2), "removed after the 300 ms drain timeout");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(started.elapsed() >= Duration::from_millis(300));
        for task in slow {
            assert_eq!(task.await.unwrap().unwrap().status, 200, "the removed server still finishes");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_reads_the_file_and_refuses_a_broken_one() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1", "s2"], ..Spec::default() }).await;
        let good = std::fs::read_to_string(&rig.path).unwrap();
        std::fs::write(&rig.path, good.replace("scheduler = \"rr\"", "scheduler = \"rrr\"")).unwrap();
        let broken = rig.call("POST", "/api/reload", "").await;
        assert_eq!(broken.status, 400, "{}", broken.text());
        assert!(broken.error().contains("cswitch.toml:"), "file:line:col: {}", broken.error());
        assert!(broken.error().contains("rrr"), "{}", broken.error());
        assert_eq!(rig.generation().await, 0);
        assert_eq!(rig.get_json("/api/status").await["counters"]["reloads_failed"], 1);
        let heavier = good.replace(
            &format!("name = \"s2\", addr = \"{}\" }}", rig.origin("s2").addr()),
            &format!("name = \"s2\", addr = \"{}\", weight = 5 }}", rig.origin("s2").addr()),
        );
        assert_ne!(heavier, good);
        std::fs::write(&rig.path, heavier).unwrap();
        let ok = rig.call("POST", "/api/reload", "").await;
        assert_eq!(ok.status, 200, "{}", ok.text());
        assert_eq!(ok.json["generation"], 1);
        assert_eq!(ok.json["changes"][0], "server `s2` of group `web` changed: weight 1 → 5");
        rig.wait_weight("s2", |w| w == 5).await;
    })
    .await;
}

/// The issue's test: a reload and admin changes while clients send requests; every
/// request must succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_and_admin_changes_under_load_fail_no_request() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1", "s2", "s3"], in_config: 2, ..Spec::default() }).await;
        let web = rig.web;
        let deadline = Instant::now() + Duration::from_secs(2);
        let clients: Vec<_> = (0..4)
            .map(|_| {
                tokio::spawn(async move {
                    let (mut ok, mut failed) = (0u32, Vec::new());
                    while Instant::now() < deadline && ok < 2000 {
                        match testkit::get(web, "/").await {
                            Ok(r) if r.status == 200 => ok += 1,
                            Ok(r) => failed.push(format!("{} {}", r.status, r.body_str())),
                            Err(e) => failed.push(e.to_string()),
                        }
                    }
                    (ok, failed)
                })
            })
            .collect();
        let pause = || tokio::time::sleep(Duration::from_millis(250));
        pause().await;
        let text = std::fs::read_to_string(&rig.path).unwrap();
        std::fs::write(&rig.path, text.replace("scheduler = \"rr\"", "scheduler = \"wrr\"")).unwrap();
        assert_eq!(rig.call("POST", "/api/reload", "").await.status, 200);
        pause().await;
        assert_eq!(rig.call("PATCH", "/api/servers/web/s1", r#"{"weight": 3}"#).await.status, 200);
        pause().await;
        let add = format!(r#"{{"group": "web", "name": "s3", "addr": "{}"}}"#, rig.origin("s3").addr());
        assert_eq!(rig.call("POST", "/api/servers", &add).await.status, 201);
        pause().await;
        assert_eq!(rig.call("PATCH", "/api/servers/web/s2", r#"{"state": "drain"}"#).await.status, 200);
        let (mut total, mut failures) = (0, Vec::new());
        for c in clients {
            let (ok, failed) = c.await.unwrap();
            total += ok;
            failures.extend(failed);
        }
        assert!(
            failures.is_empty(),
            "{} failed of {}: {failures:?}",
            failures.len(),
            total as usize + failures.len()
        );
        assert!(total > 100, "the clients ran: {total}");
        assert_eq!(rig.generation().await, 4);
        assert!(!rig.origin("s3").requests().is_empty(), "the added server took traffic");
    })
    .await;
}
