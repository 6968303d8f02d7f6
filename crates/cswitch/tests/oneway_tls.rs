//! One-way switching on a TLS passthrough listener, through the running binaries in network
//! namespaces: SNI-routed direct server return. A client, the switch (`cswitch run`, a
//! one-way `protocol = "tls"` listener on VIP:443 whose rules route `a.example` to b1 and
//! `b.example` to b2), and two server hosts, each with the VIP on `lo`, an unmodified TLS
//! web server (Python's `ssl` + `http.server`, a certificate made at test time) and
//! `cswitch agent --local-port 443=…`. Each SNI's answer comes byte for byte from its own
//! server directly (the switch's interface sends a small part of it), both connections are
//! counted as hand-offs and logged with their server; with b2's agent gone, `b.example` is
//! served two-way, the fallback counted, the answer still exact.
//!
//! Needs root, iproute2, nftables and python3; `CSWITCH_REQUIRE_KERNEL=1` (`.ci/run`) turns
//! their absence into a failure.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod oneway_bed;

use oneway_bed::{
    metric, server_entry, start_agent, start_switch, switch_preamble, switch_tx_bytes, wait_for_port,
    write_site, Proc, SIZE,
};
use std::path::Path;
use std::time::{Duration, Instant};
use testkit::netns::{self, Testbed, VIP};

/// An HTTPS server on port 8443 of its host: `http.server` serving `www` over TLS with
/// `cert.pem` / `key.pem` of the test's directory.
const TLS_SERVER: &str = "import functools, http.server, ssl, sys\n\
    www, cert, key = sys.argv[1:4]\n\
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=www)\n\
    srv = http.server.ThreadingHTTPServer(('0.0.0.0', 8443), handler)\n\
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
    ctx.load_cert_chain(cert, key)\n\
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)\n\
    srv.serve_forever()\n";

/// Starts the TLS server on `host`, serving `www`.
fn start_tls_web(bed: &Testbed, host: &str, dir: &Path, www: &Path) -> Proc {
    let path = |p: &Path| p.to_string_lossy().to_string();
    let (www, cert, key) = (path(www), path(&dir.join("cert.pem")), path(&dir.join("key.pem")));
    let web = Proc::spawn(bed, host, &["python3", "-c", TLS_SERVER, &www, &cert, &key]);
    wait_for_port(bed, host, 8443);
    web
}

/// The client fetches `/big.bin` from VIP:443 with SNI `sni` (the certificate is not
/// verified: the test is about where the bytes come from): the body it got.
fn fetch_tls(bed: &Testbed, sni: &str) -> Vec<u8> {
    let script = format!(
        "import socket, ssl, sys\n\
         ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n\
         ctx.check_hostname = False\n\
         ctx.verify_mode = ssl.CERT_NONE\n\
         s = ctx.wrap_socket(socket.create_connection(('{VIP}', 443), timeout=10), server_hostname='{sni}')\n\
         s.sendall(b'GET /big.bin HTTP/1.1\\r\\nHost: {sni}\\r\\nConnection: close\\r\\n\\r\\n')\n\
         data = b''\n\
         while b'\\r\\n\\r\\n' not in data:\n\
         \tchunk = s.recv(65536)\n\
         \tif not chunk: sys.exit('closed in the head')\n\
         \tdata += chunk\n\
         head, body = data.split(b'\\r\\n\\r\\n', 1)\n\
         fields = dict(l.lower().split(b':', 1) for l in head.split(b'\\r\\n')[1:])\n\
         length = int(fields[b'content-length'])\n\
         while len(body) < length:\n\
         \tchunk = s.recv(65536)\n\
         \tif not chunk: break\n\
         \tbody += chunk\n\
         s.close()\n\
         sys.stdout.buffer.write(body)"
    );
    bed.run("cl", &["python3", "-c", &script]).stdout
}

/// The client, the switch, b1 and b2 (each a TLS server and an agent), and what each
/// server serves.
struct Bed {
    bed: Testbed,
    dir: std::path::PathBuf,
    switch: Proc,
    agents: [Option<Proc>; 2],
    _webs: [Proc; 2],
    bodies: [Vec<u8>; 2],
}

fn deploy_tls(tag: &str) -> Bed {
    let bed = Testbed::new(&[("cl", 10), ("sw", 2), ("b1", 11), ("b2", 12)]);
    let dir = common::tempdir(tag);
    // b1 serves write_site's file; b2 another one of the same size, so a body tells its server.
    let b1_body = write_site(&dir);
    let b2_body: Vec<u8> = b1_body.iter().map(|b| b ^ 0x5a).collect();
    std::fs::create_dir_all(dir.join("www2")).unwrap();
    std::fs::write(dir.join("www2/big.bin"), &b2_body).unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["a.example".into(), "b.example".into()]).unwrap();
    std::fs::write(dir.join("cert.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), made.signing_key.serialize_pem()).unwrap();
    let webs = [
        start_tls_web(&bed, "b1", &dir, &dir.join("www")),
        start_tls_web(&bed, "b2", &dir, &dir.join("www2")),
    ];
    // Nothing listens on --local here: a connection the agent relayed there would fail.
    let local = ["--local", "127.0.0.1:8080", "--local-port", "443=127.0.0.1:8443"];
    let agents =
        [Some(start_agent(&bed, "b1", 11, &dir, &local)), Some(start_agent(&bed, "b2", 12, &dir, &local))];
    std::fs::write(
        dir.join("tls.rules"),
        "A: if (tls.sni == \"a.example\") { routeTo(ga); }\nB: if (tls.sni == \"b.example\") { routeTo(gb); }\n",
    )
    .unwrap();
    let log = "[access_log]\nenabled = true\npath = \"access.log\"\nformat = \"json\"\n\
               fields = [\"server\", \"sni\", \"bytes_in\", \"bytes_out\", \"tls_version\", \"error\"]\n";
    let config = format!(
        "{}[[listener]]\nname = \"tls\"\nbind = \"{VIP}:443\"\nprotocol = \"tls\"\ndefault_group = \"ga\"\n\
         mode = \"one-way\"\nrules = \"tls.rules\"\n\
         [[group]]\nname = \"ga\"\nservers = [ {} ]\n[[group]]\nname = \"gb\"\nservers = [ {} ]\n",
        switch_preamble().replace("[access_log]\nenabled = false\n", log),
        server_entry("b1", 11, 8443),
        server_entry("b2", 12, 8443)
    );
    let switch = start_switch(&bed, &dir, &config);
    Bed { bed, dir, switch, agents, _webs: webs, bodies: [b1_body, b2_body] }
}

/// The access log's lines once it has `n` (the workers write it out every 250 ms).
fn access_log(dir: &Path, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        if lines.len() >= n || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn each_sni_is_answered_by_its_own_server_directly_and_fallback_loses_nothing() {
    if !netns::available() {
        return;
    }
    let mut d = deploy_tls("oneway-tls");
    // One-way: each SNI's answer comes from its own server, not through the switch.
    for (sni, body) in [("a.example", &d.bodies[0]), ("b.example", &d.bodies[1])] {
        let before = switch_tx_bytes(&d.bed);
        let got = fetch_tls(&d.bed, sni);
        let sent_by_switch = switch_tx_bytes(&d.bed) - before;
        assert_eq!(got.len(), SIZE, "{sni}");
        assert!(&got == body, "{sni}: the body arrived byte for byte, from its own server");
        assert!(
            sent_by_switch < (SIZE / 20) as u64,
            "{sni}: the switch sent {sent_by_switch} bytes for a {SIZE}-byte answer"
        );
    }
    assert_eq!(metric(&d.bed, "cswitch_handoffs_total"), 2);

    // b2's agent is gone: b.example is served two-way, and answered all the same.
    drop(d.agents[1].take());
    let before = switch_tx_bytes(&d.bed);
    assert!(fetch_tls(&d.bed, "b.example") == d.bodies[1], "served two-way by b2");
    assert!(switch_tx_bytes(&d.bed) - before > SIZE as u64, "this time the switch carried the answer");
    assert_eq!(metric(&d.bed, "cswitch_handoff_fallbacks_total{reason=\"no_agent\"}"), 1);
    assert_eq!(metric(&d.bed, "cswitch_handoffs_total"), 2);

    // The log: the hand-offs with their server and nothing written to the client (the
    // ServerHello went to it directly: no version), the fallback with everything the
    // switch tunnelled (the whole encrypted answer) and its version.
    let lines = access_log(&d.dir, 3);
    assert_eq!(lines.len(), 3, "{lines:?}");
    for (line, (server, sni)) in lines.iter().zip([("b1", "a.example"), ("b2", "b.example")]) {
        assert_eq!((line["server"].as_str(), line["sni"].as_str()), (Some(server), Some(sni)), "{line}");
        assert!(line["bytes_in"].as_u64() > Some(0), "{line}");
        assert_eq!(line["bytes_out"].as_u64(), Some(0), "{line}");
        assert!(line["tls_version"].is_null() && line["error"].is_null(), "{line}");
    }
    let fallback = &lines[2];
    assert_eq!(fallback["server"].as_str(), Some("b2"), "{fallback}");
    assert!(fallback["bytes_out"].as_u64() > Some(SIZE as u64), "{fallback}");
    assert!(fallback["tls_version"].is_string() && fallback["error"].is_null(), "{fallback}");
    drop(d.switch);
}
