//! TLS session IDs move with a binary upgrade (issue 16, "state that moves"): eight clients
//! start TLS 1.2 sessions through a passthrough listener (round robin over four servers in
//! each of two workers, each server with its own session cache), the binary is upgraded, and
//! each client resumes through the new process on the server that holds its session — the
//! new process's round robin would send most of them elsewhere (resumed in reverse order)
//! if it had not learnt the IDs.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::tls12::{client_config, talk, tls_server};
use common::upgrading::Switch;
use rustls::ClientConfig;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn tls_session_ids_move_with_the_upgrade() {
    let names = ["t1", "t2", "t3", "t4"];
    let servers: Vec<String> =
        names.iter().map(|&n| format!("{{ name = \"{n}\", addr = \"{}\" }}", tls_server(n))).collect();
    let more = format!(
        "[[listener]]\nname = \"pass\"\nprotocol = \"tls\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"tls\"\n\
         [[group]]\nname = \"tls\"\nscheduler = \"rr\"\nservers = [ {} ]\n",
        servers.join(", ")
    );
    let mut switch = Switch::start("upgrade-tls-sessions", &more, None);
    let pass = switch.addr("pass");
    let clients: Vec<Arc<ClientConfig>> = (0..8).map(|_| client_config()).collect();
    let first: Vec<String> = clients
        .iter()
        .map(|c| {
            let (server, resumed) = talk(pass, c);
            assert!(!resumed, "a first session is a full handshake");
            server
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = first.iter().collect();
    assert!(distinct.len() >= 3, "round robin spread the clients: {first:?}");

    let out = switch.upgrade_in_background().join().unwrap();
    assert!(out.status.success(), "upgrade: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    switch.others.push(u32::try_from(report["new_pid"].as_u64().unwrap()).unwrap());
    switch.first_exits_within(Duration::from_secs(10));

    for (client, server) in clients.iter().zip(&first).rev() {
        let (again, resumed) = talk(pass, client);
        assert_eq!(&again, server, "after the upgrade the session went to another server");
        assert!(resumed, "the session resumed on its server");
    }
}
