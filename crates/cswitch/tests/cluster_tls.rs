//! A resumed TLS session keeps its server whichever `[cluster]` node it reaches: through
//! running binaries on 127.0.0.x, four clients start TLS 1.2 sessions through node a's
//! passthrough listener (round robin over four servers, each with its own session cache)
//! and resume them through node b, which learnt the session IDs from a by gossip.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cluster_bed;
mod common;

use cluster_bed::*;
use common::tempdir;
use common::tls12::{client_config, talk, tls_server};
use rustls::ClientConfig;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn a_resumed_tls_session_keeps_its_server_on_another_node() {
    let names = ["t1", "t2", "t3", "t4"];
    let servers: Vec<String> =
        names.iter().map(|&n| format!("{{ name = \"{n}\", addr = \"{}\" }}", tls_server(n))).collect();
    // The listener's protocol, then the group (see `config`: both follow default_group).
    let group = format!(
        "protocol = \"tls\"\n[[group]]\nname = \"web\"\nscheduler = \"rr\"\nservers = [ {} ]\n",
        servers.join(", ")
    );
    let dir = tempdir("cluster-tls");
    let (ga, gb) = (free_udp("127.0.0.57"), free_udp("127.0.0.58"));
    let a = start_with(&dir, "a", ga, &[], KEY, &group);
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group);
    until(&b, &["cluster"], Duration::from_secs(5), "a live at b", |v| node_live(v, "a") == Some(true));
    let clients: Vec<Arc<ClientConfig>> = (0..4).map(|_| client_config()).collect();
    let first: Vec<String> = clients
        .iter()
        .map(|c| {
            let (server, resumed) = talk(a.web, c);
            assert!(!resumed, "a first session is a full handshake");
            server
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = first.iter().collect();
    assert_eq!(distinct.len(), 4, "round robin at a gave each client its own server: {first:?}");
    let shared = until(&b, &["cluster"], Duration::from_secs(1), "a's four sessions at b", |v| {
        v["nodes"].as_array().unwrap().iter().any(|n| n["name"] == "a" && n["tls_sessions"] == 4)
    });
    eprintln!("a's TLS session IDs visible at b after {shared:?}");
    for (client, server) in clients.iter().zip(&first).rev() {
        let (again, resumed) = talk(b.web, client);
        assert_eq!(&again, server, "the resumed session moved to another server through b");
        assert!(resumed, "the session resumed on its server");
    }
    let _ = std::fs::remove_dir_all(dir);
}
