//! One-way with the connection passed to the web server as a descriptor (`cswitch agent
//! --pass-fd`, `SCM_RIGHTS`; issue 12 part 2), through the binaries in network namespaces:
//! the server host runs the testkit origin taking descriptors on a Unix socket (this test
//! binary, re-run in the namespace), the agent gives it each restored connection, and the
//! origin answers the client directly, with no relay on the server host; with the origin
//! gone, the agent relays to `--local` instead and the client is answered all the same.
//!
//! Needs root, iproute2, nftables and python3 (`CSWITCH_REQUIRE_KERNEL=1` fails without).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod oneway_bed;

use common::tempdir;
use oneway_bed::{
    metric, server_entry, start_agent, start_switch, start_web, switch_preamble, wait_for_web_on, write_site,
    Proc,
};
use std::time::Duration;
use testkit::netns::{self, VIP};

/// Not a test of its own: the origin process of the test below, run in the server's
/// namespace when `CSWITCH_PASSED_ORIGIN` names its Unix socket; without it, nothing.
#[test]
fn passed_origin_process() {
    let Ok(path) = std::env::var("CSWITCH_PASSED_ORIGIN") else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let _origin = rt.block_on(testkit::Origin::start_passed("fd-origin", path.as_ref())).unwrap();
    eprintln!("origin ready");
    // Bounded: the test kills it long before.
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn the_server_takes_the_connection_as_a_descriptor_and_answers_the_client() {
    if !netns::available() {
        return;
    }
    let bed = netns::Testbed::new(&[("cl", 10), ("sw", 2), ("b1", 11)]);
    let dir = tempdir("oneway-passfd");
    write_site(&dir);
    let sock = dir.join("origin.sock");
    let exe = std::env::current_exe().unwrap();
    let origin = Proc::spawn_with_env(
        &bed,
        "b1",
        &[&exe.to_string_lossy(), "--exact", "passed_origin_process", "--nocapture", "--test-threads", "1"],
        &[("CSWITCH_PASSED_ORIGIN", &sock.to_string_lossy())],
    );
    origin.wait_for("origin ready");
    let web = start_web(&bed, "b1", &dir.join("www"));
    let sock_arg = sock.to_string_lossy().to_string();
    let _agent = start_agent(&bed, "b1", 11, &dir, &["--local", "127.0.0.1:8080", "--pass-fd", &sock_arg]);
    let config = format!(
        "{}[[listener]]\nname = \"web\"\nbind = \"{VIP}:80\"\ndefault_group = \"web\"\nmode = \"one-way\"\n\
         [[group]]\nname = \"web\"\nservers = [ {} ]\n",
        switch_preamble(),
        server_entry("b1", 11, 8080)
    );
    let _switch = start_switch(&bed, &dir, &config);
    wait_for_web_on(&bed, "b1");
    let get = format!(
        "import urllib.request\nr = urllib.request.urlopen('http://{VIP}/hello', timeout=10)\n\
         print(r.headers.get('X-Origin', '-'), r.read().decode().strip())"
    );
    // The origin that took the descriptor answers (http.server would say 404 for /hello).
    let out = bed.run("cl", &["python3", "-c", &get]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fd-origin fd-origin GET /hello\n");
    // Without it, relayed to --local: http.server answers (it sets no X-Origin).
    drop(origin);
    let out = bed.run(
        "cl",
        &["python3", "-c", &get.replace("/hello", "/big.bin").replace(".decode().strip()", "[:0]")],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "- b''\n", "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(metric(&bed, "cswitch_handoffs_total"), 2, "both handed off");
    drop(web);
}
