//! Learning schedulers' tables across `[cluster]` nodes, through running binaries on
//! 127.0.0.x: URLs that `htrr` (round robin on first sight, then remembered) or `lard`
//! (least loaded on first sight, then remembered) placed through node a keep their servers
//! through node b, which sees them in the opposite order (so its own first-sight choice
//! would differ).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cluster_bed;
mod common;

use cluster_bed::*;
use common::tempdir;
use std::time::Duration;

fn urls_keep_their_servers_on_another_node(scheduler: &str, ips: [&str; 2]) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let origins: Vec<testkit::Origin> =
        rt.block_on(async { futures_join(["o1", "o2", "o3", "o4"].map(testkit::Origin::start)).await });
    let dir = tempdir(&format!("cluster-{scheduler}"));
    let servers: Vec<String> =
        origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    let group = format!(
        "[[group]]\nname = \"web\"\nscheduler = \"{scheduler}\"\nservers = [ {} ]\n",
        servers.join(", ")
    );
    let (ga, gb) = (free_udp(ips[0]), free_udp(ips[1]));
    let a = start_with(&dir, "a", ga, &[], KEY, &group);
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group);
    until(&b, &["cluster"], Duration::from_secs(5), "a live at b", |v| node_live(v, "a") == Some(true));
    let ask = |node: &Node, url: &str| -> String {
        rt.block_on(async {
            let mut c = testkit::RawClient::connect(node.web).await.unwrap();
            let req = format!("GET {url} HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n");
            c.send(req.as_bytes()).await.unwrap();
            let response = c.read_response().await.unwrap();
            assert_eq!(response.status, 200);
            response.header("X-Origin").unwrap().to_string()
        })
    };
    let urls: Vec<String> = (0..12).map(|i| format!("/page/{i}")).collect();
    let placed: Vec<String> = urls.iter().map(|u| ask(&a, u)).collect();
    let distinct: std::collections::BTreeSet<&String> = placed.iter().collect();
    assert!(distinct.len() >= 2, "{scheduler} at a spread the URLs: {placed:?}");
    let shared = until(&b, &["cluster"], Duration::from_secs(2), "a's assignments at b", |v| {
        v["nodes"].as_array().unwrap().iter().any(|n| n["name"] == "a" && n["assignments"] == 12)
    });
    eprintln!("{scheduler}: a's 12 assignments visible at b after {shared:?}");
    // Applied at b's next tick after they arrived.
    std::thread::sleep(Duration::from_millis(200));
    for (url, server) in urls.iter().zip(&placed).rev() {
        assert_eq!(&ask(&b, url), server, "{scheduler}: {url} moved at b");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn htrr_urls_keep_their_servers_on_another_node() {
    urls_keep_their_servers_on_another_node("htrr", ["127.0.0.84", "127.0.0.85"]);
}

#[test]
fn lard_urls_keep_their_servers_on_another_node() {
    urls_keep_their_servers_on_another_node("lard", ["127.0.0.86", "127.0.0.87"]);
}
