//! Persistence across `[cluster]` nodes, through running binaries on 127.0.0.x: a client
//! pinned by `STICKY_IP`, a session whose cookie a server set (`learn`) or the switch
//! inserted (`insert`), and a resumed TLS session each keep their server when they reach
//! another node.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cluster_bed;
mod common;

use cluster_bed::*;
use common::tempdir;
use std::net::SocketAddr;
use std::time::Duration;

/// A `STICKY_IP` client keeps its server whichever node it reaches: four clients (127.0.0.x
/// source addresses) pinned through node a are served by the same servers through node b,
/// which asks them in the opposite order (so b's own round robin could not agree by chance).
#[test]
fn a_sticky_ip_client_keeps_its_server_on_another_node() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let origins: Vec<testkit::Origin> =
        rt.block_on(async { futures_join(["o1", "o2", "o3", "o4"].map(testkit::Origin::start)).await });
    let dir = tempdir("cluster-sticky");
    std::fs::write(
        dir.join("sticky.rules"),
        "Pin: if (inNet(srcip, \"127.0.0.0/8\")) { routeTo(web, STICKY_IP); }\n",
    )
    .unwrap();
    let servers: Vec<String> =
        origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    let group = format!(
        "rules = \"sticky.rules\"\n[[group]]\nname = \"web\"\nscheduler = \"rr\"\nservers = [ {} ]\n",
        servers.join(", ")
    );
    let (ga, gb) = (free_udp("127.0.0.49"), free_udp("127.0.0.50"));
    let a = start_with(&dir, "a", ga, &[], KEY, &group);
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group);
    until(&b, &["cluster"], Duration::from_secs(5), "a live at b", |v| node_live(v, "a") == Some(true));
    let clients = ["127.0.0.61", "127.0.0.62", "127.0.0.63", "127.0.0.64"];
    let ask = |node: &Node, client: &str| -> String {
        rt.block_on(async {
            let local: SocketAddr = format!("{client}:0").parse().unwrap();
            let mut c = testkit::RawClient::connect_from(local, node.web).await.unwrap();
            c.send(b"GET /cart HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n").await.unwrap();
            let response = c.read_response().await.unwrap();
            assert_eq!(response.status, 200);
            response.header("X-Origin").unwrap().to_string()
        })
    };
    let pinned: Vec<String> = clients.iter().map(|c| ask(&a, c)).collect();
    let distinct: std::collections::BTreeSet<&String> = pinned.iter().collect();
    assert_eq!(distinct.len(), 4, "round robin at a pinned each client to its own server: {pinned:?}");
    let shared = until(&b, &["cluster"], Duration::from_secs(1), "a's four entries at b", |v| {
        v["nodes"].as_array().unwrap().iter().any(|n| n["name"] == "a" && n["sticky_ip"] == 4)
    });
    eprintln!("a's sticky entries visible at b after {shared:?}");
    for (client, server) in clients.iter().zip(&pinned).rev() {
        for _ in 0..3 {
            assert_eq!(&ask(&b, client), server, "client {client} moved to b");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A learned session cookie keeps its client on its server whichever node it reaches: four
/// clients log in through node a (the origin sets `sid`, a learns it) and come back
/// through node b, in the opposite order, carrying the cookie.
#[test]
fn a_learned_cookie_keeps_its_server_on_another_node() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let origins: Vec<testkit::Origin> =
        rt.block_on(async { futures_join(["o1", "o2", "o3", "o4"].map(testkit::Origin::start)).await });
    let dir = tempdir("cluster-learn");
    let servers: Vec<String> =
        origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    let group = format!(
        "[[group]]\nname = \"web\"\nscheduler = \"rr\"\n\
         persistence = {{ mode = \"learn\", cookie = \"sid\", timeout = \"5m\" }}\nservers = [ {} ]\n",
        servers.join(", ")
    );
    let (ga, gb) = (free_udp("127.0.0.53"), free_udp("127.0.0.54"));
    let a = start_with(&dir, "a", ga, &[], KEY, &group);
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group);
    until(&b, &["cluster"], Duration::from_secs(5), "a live at b", |v| node_live(v, "a") == Some(true));
    let ask = |node: &Node, cookie: Option<&str>| -> (String, Option<String>) {
        rt.block_on(async {
            let mut c = testkit::RawClient::connect(node.web).await.unwrap();
            let cookie = cookie.map_or(String::new(), |v| format!("Cookie: sid={v}\r\n"));
            let path = if cookie.is_empty() { "/login/sid" } else { "/cart" };
            let req = format!("GET {path} HTTP/1.1\r\nHost: shop\r\n{cookie}Connection: close\r\n\r\n");
            c.send(req.as_bytes()).await.unwrap();
            let response = c.read_response().await.unwrap();
            assert_eq!(response.status, 200);
            let set = response
                .header("Set-Cookie")
                .and_then(|v| v.strip_prefix("sid="))
                .map(|v| v.split(';').next().unwrap().to_string());
            (response.header("X-Origin").unwrap().to_string(), set)
        })
    };
    let sessions: Vec<(String, String)> = (0..4)
        .map(|_| {
            let (server, set) = ask(&a, None);
            (server, set.expect("the origin sets sid"))
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = sessions.iter().map(|(s, _)| s).collect();
    assert_eq!(distinct.len(), 4, "round robin at a gave each login its own server: {sessions:?}");
    let shared = until(&b, &["cluster"], Duration::from_secs(1), "a's four cookies at b", |v| {
        v["nodes"].as_array().unwrap().iter().any(|n| n["name"] == "a" && n["learned_cookies"] == 4)
    });
    eprintln!("a's learned cookies visible at b after {shared:?}");
    for (server, sid) in sessions.iter().rev() {
        for _ in 0..3 {
            assert_eq!(&ask(&b, Some(sid)).0, server, "session {sid} moved to b");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// An inserted cookie needs nothing shared: it names the server (its `cookie` token), and
/// every node has the same config. Four sessions started through node a keep their servers
/// through node b.
#[test]
fn an_inserted_cookie_keeps_its_server_on_another_node() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let origins: Vec<testkit::Origin> =
        rt.block_on(async { futures_join(["o1", "o2", "o3", "o4"].map(testkit::Origin::start)).await });
    let dir = tempdir("cluster-insert");
    let servers: Vec<String> =
        origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    let group = format!(
        "[[group]]\nname = \"web\"\nscheduler = \"rr\"\n\
         persistence = {{ mode = \"insert\", cookie = \"SRV\" }}\nservers = [ {} ]\n",
        servers.join(", ")
    );
    let (ga, gb) = (free_udp("127.0.0.55"), free_udp("127.0.0.56"));
    let a = start_with(&dir, "a", ga, &[], KEY, &group);
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group);
    let ask = |node: &Node, cookie: Option<&str>| -> (String, Option<String>) {
        rt.block_on(async {
            let mut c = testkit::RawClient::connect(node.web).await.unwrap();
            let cookie = cookie.map_or(String::new(), |v| format!("Cookie: {v}\r\n"));
            let req = format!("GET /cart HTTP/1.1\r\nHost: shop\r\n{cookie}Connection: close\r\n\r\n");
            c.send(req.as_bytes()).await.unwrap();
            let response = c.read_response().await.unwrap();
            assert_eq!(response.status, 200);
            let set = response.header("Set-Cookie").map(|v| v.split(';').next().unwrap().to_string());
            (response.header("X-Origin").unwrap().to_string(), set)
        })
    };
    let sessions: Vec<(String, String)> = (0..4)
        .map(|_| {
            let (server, set) = ask(&a, None);
            (server, set.expect("the switch inserts SRV"))
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = sessions.iter().map(|(s, _)| s).collect();
    assert_eq!(distinct.len(), 4, "round robin at a gave each session its own server: {sessions:?}");
    for (server, cookie) in sessions.iter().rev() {
        assert_eq!(&ask(&b, Some(cookie)).0, server, "session {cookie} moved to b");
    }
    let _ = std::fs::remove_dir_all(dir);
}
