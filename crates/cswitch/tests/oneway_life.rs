//! A handed-off flow's life in the switch's steering table, through the binaries in
//! network namespaces (client, switch, server host; `oneway_bed`): the entry lives as long
//! as the connection, idle or not, and goes within seconds of its close — on the agent's
//! report, or, when no report comes (the server keeps its side open), once the client has
//! sent its FIN and been quiet for 10 s; a silent connection goes by the table's idle
//! timeout, and is counted so. The gauge `cswitch_steering_flows` and the
//! counters `cswitch_steering_forgotten_total{reason}` say the same.
//!
//! Needs root, iproute2, nftables and python3; `CSWITCH_REQUIRE_KERNEL=1` (`.ci/run`) turns
//! their absence into a failure.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod oneway_bed;

use oneway_bed::{deploy_with, fetch, listener, metric, start_py_web, steered, within, Proc};
use std::time::Duration;
use testkit::netns::{self, VIP};

const REPORTED: &str = "cswitch_steering_forgotten_total{reason=\"agent_report\"}";
const ENDED: &str = "cswitch_steering_forgotten_total{reason=\"ended\"}";

#[test]
fn a_closed_connection_leaves_the_steering_table_within_seconds() {
    if !netns::available() {
        return;
    }
    let d =
        deploy_with("life-close", |bed, www| start_py_web(bed, "b1", www, false), &listener("web", 80, None));
    assert!(fetch(&d.bed) == d.body, "answered byte for byte");
    assert_eq!(metric(&d.bed, "cswitch_handoffs_total"), 1);
    // The client has closed (fetch returned), the server then: the agent reports the end,
    // and the switch forgets the flow once the client has been quiet for 2 s.
    let took = within(Duration::from_secs(8), "the flow leaves the table", || steered(&d.bed) == 0);
    eprintln!("steering entry gone {took:?} after the client's close");
    within(Duration::from_secs(3), "counted as reported", || metric(&d.bed, REPORTED) == 1);
    assert_eq!(metric(&d.bed, "cswitch_steering_flows"), 0);
    assert_eq!(metric(&d.bed, ENDED), 0);
}

#[test]
fn an_idle_keep_alive_connection_stays_steered_until_it_closes() {
    if !netns::available() {
        return;
    }
    let d =
        deploy_with("life-idle", |bed, www| start_py_web(bed, "b1", www, false), &listener("web", 80, None));
    // One connection: a request, 4 s idle, a second request, then the close.
    let script = format!(
        "import hashlib, socket, sys, time\n\
         want = hashlib.sha256(open('{}', 'rb').read()).hexdigest()\n\
         s = socket.create_connection(('{VIP}', 80), timeout=10)\n\
         def get():\n\
         \ts.sendall(b'GET /big.bin HTTP/1.1\\r\\nHost: vip\\r\\n\\r\\n')\n\
         \tdata = b''\n\
         \twhile b'\\r\\n\\r\\n' not in data or len(data.split(b'\\r\\n\\r\\n', 1)[1]) < {}:\n\
         \t\tdata += s.recv(65536)\n\
         \treturn hashlib.sha256(data.split(b'\\r\\n\\r\\n', 1)[1]).hexdigest() == want\n\
         print('first', get(), file=sys.stderr, flush=True)\n\
         time.sleep(4)\n\
         print('second', get(), file=sys.stderr, flush=True)\n\
         s.close()\n\
         print('closed', file=sys.stderr, flush=True)\n\
         time.sleep(30)",
        d.www.join("big.bin").display(),
        oneway_bed::SIZE
    );
    let client = Proc::spawn(&d.bed, "cl", &["python3", "-c", &script]);
    client.wait_for("first True");
    // Idle, open: still steered (the sweeps of the next 3 s leave it alone).
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(steered(&d.bed), 1, "an open connection keeps its entry");
    assert_eq!(metric(&d.bed, "cswitch_steering_flows"), 1);
    client.wait_for("second True");
    client.wait_for("closed");
    let took = within(Duration::from_secs(8), "the flow leaves the table", || steered(&d.bed) == 0);
    eprintln!("steering entry gone {took:?} after the client's close");
    within(Duration::from_secs(3), "counted as reported", || metric(&d.bed, REPORTED) == 1);
    assert_eq!(metric(&d.bed, "cswitch_handoffs_total"), 1, "one connection, one hand-off");
}

#[test]
fn a_client_that_closed_and_went_quiet_is_forgotten_without_a_report() {
    if !netns::available() {
        return;
    }
    // The server keeps its side open 30 s after the client's close: the relay is not over,
    // so no report; the datapath saw the client's FIN.
    let d =
        deploy_with("life-quiet", |bed, www| start_py_web(bed, "b1", www, true), &listener("web", 80, None));
    assert!(fetch(&d.bed) == d.body, "answered byte for byte");
    assert_eq!(steered(&d.bed), 1);
    let took = within(Duration::from_secs(16), "the flow leaves the table", || steered(&d.bed) == 0);
    eprintln!("steering entry gone {took:?} after the client's FIN, unreported");
    assert!(took >= Duration::from_secs(8), "not before the client was quiet for 10 s: {took:?}");
    within(Duration::from_secs(3), "counted as ended", || metric(&d.bed, ENDED) == 1);
    assert_eq!(metric(&d.bed, REPORTED), 0);
    assert_eq!(metric(&d.bed, "cswitch_steering_flows"), 0);
}

/// A client port reused at once (spike P11): the first connection's end (its report, its
/// FIN in `ended`) must not cost the second connection its entry. The second stays open and
/// idle past the sweep's quiet time, then makes another request on it.
#[test]
fn a_reused_client_port_keeps_the_new_connections_entry() {
    if !netns::available() {
        return;
    }
    let d =
        deploy_with("life-reuse", |bed, www| start_py_web(bed, "b1", www, false), &listener("web", 80, None));
    let script = format!(
        "import hashlib, socket, time\n\
         want = hashlib.sha256(open('{}', 'rb').read()).hexdigest()\n\
         def connect():\n\
         \tfor _ in range(50):\n\
         \t\ts = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         \t\ttry:\n\
         \t\t\ts.bind(('{}', 41000)); s.settimeout(10); s.connect(('{VIP}', 80)); return s\n\
         \t\texcept OSError:\n\
         \t\t\ts.close(); time.sleep(0.01)\n\
         def get(s, close):\n\
         \ts.sendall(b'GET /big.bin HTTP/1.1\\r\\nHost: vip\\r\\n' + (b'Connection: close\\r\\n' if close else b'') + b'\\r\\n')\n\
         \tdata = b''\n\
         \twhile b'\\r\\n\\r\\n' not in data or len(data.split(b'\\r\\n\\r\\n', 1)[1]) < {}:\n\
         \t\tchunk = s.recv(65536)\n\
         \t\tif not chunk: break\n\
         \t\tdata += chunk\n\
         \treturn hashlib.sha256(data.split(b'\\r\\n\\r\\n', 1)[-1]).hexdigest() == want\n\
         s = connect()\n\
         first = get(s, True)\n\
         while s.recv(65536): pass\n\
         s.close()\n\
         s = connect()\n\
         second = get(s, False)\n\
         time.sleep(4)\n\
         third = get(s, False)\n\
         s.close()\n\
         print(first, second, third)",
        d.www.join("big.bin").display(),
        testkit::netns::ip_of(10),
        oneway_bed::SIZE
    );
    let out = d.bed.run("cl", &["python3", "-c", &script]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "True True True", "the reused port's requests");
    assert_eq!(metric(&d.bed, "cswitch_handoffs_total"), 2, "two connections, two hand-offs");
    within(Duration::from_secs(8), "the flow leaves the table", || steered(&d.bed) == 0);
    within(Duration::from_secs(3), "the second connection counted", || metric(&d.bed, REPORTED) >= 1);
}

/// A client that stays connected but silent past `flow_timeout` (2 s here): the table's
/// idle timeout removes the entry, and the sweep counts it once two of its `flows` dumps
/// (10 s apart) have not listed it.
#[test]
fn a_flow_idle_past_flow_timeout_is_counted_expired() {
    if !netns::available() {
        return;
    }
    // The preamble ends in `[oneway]`: the key joins that table.
    let config = format!("flow_timeout = \"2s\"\n{}", listener("web", 80, None));
    let d = deploy_with("life-idle-out", |bed, www| start_py_web(bed, "b1", www, false), &config);
    let script = format!(
        "import socket, sys, time\n\
         s = socket.create_connection(('{VIP}', 80), timeout=10)\n\
         s.sendall(b'GET /big.bin HTTP/1.1\\r\\nHost: vip\\r\\n\\r\\n')\n\
         n = 0\n\
         while n < {}:\n\
         \tn += len(s.recv(65536))\n\
         print('answered', file=sys.stderr, flush=True)\n\
         time.sleep(60)",
        oneway_bed::SIZE
    );
    let client = Proc::spawn(&d.bed, "cl", &["python3", "-c", &script]);
    client.wait_for("answered");
    within(Duration::from_secs(5), "the table's idle timeout", || steered(&d.bed) == 0);
    let took = within(Duration::from_secs(25), "counted as expired", || {
        metric(&d.bed, "cswitch_steering_forgotten_total{reason=\"idle_timeout\"}") == 1
    });
    eprintln!("idle flow counted expired {took:?} after the table dropped it");
    assert_eq!(metric(&d.bed, "cswitch_steering_flows"), 0);
    assert_eq!(metric(&d.bed, REPORTED) + metric(&d.bed, ENDED), 0);
}

/// The stats page (headless Chromium in the switch's namespace, its DOM after a few
/// seconds of polling) shows the hand-offs and the steering entries; skipped without
/// `chromium` unless `CSWITCH_REQUIRE_CHROMIUM` is set.
#[test]
fn the_stats_page_shows_hand_offs_and_steering_entries() {
    if !netns::available() {
        return;
    }
    let Some(chromium) = chromium() else { return };
    let d =
        deploy_with("life-page", |bed, www| start_py_web(bed, "b1", www, false), &listener("web", 80, None));
    for _ in 0..2 {
        assert!(fetch(&d.bed) == d.body);
    }
    within(Duration::from_secs(8), "both flows forgotten", || metric(&d.bed, REPORTED) == 2);
    let profile = d.dir.join("chromium-profile");
    let out = d.bed.run(
        "sw",
        &[
            &chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            &format!("--user-data-dir={}", profile.display()),
            "--virtual-time-budget=3000",
            "--dump-dom",
            "http://127.0.0.1:9900/",
        ],
    );
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    let value = |field: &str| -> String {
        let at =
            dom.find(&format!("data-field=\"{field}\"")).unwrap_or_else(|| panic!("no {field} in {dom}"));
        let cell = &dom[at..dom[at..].find('>').map_or(dom.len(), |e| at + e)];
        cell.split("data-value=\"").nth(1).and_then(|v| v.split('"').next()).unwrap_or("").to_string()
    };
    assert!(dom.contains("<section id=\"oneway\">"), "the one-way table is shown: {dom}");
    assert_eq!(value("handoffs"), "2");
    assert_eq!(value("handoff_no_agent"), "0");
    assert_eq!(value("steering_flows"), "0");
    assert_eq!(value("steering_forgot_reported"), "2");
}

/// `chromium` on PATH, else `None` (a failure under `CSWITCH_REQUIRE_CHROMIUM`).
fn chromium() -> Option<String> {
    let paths = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&paths).map(|d| d.join("chromium")).find(|p| p.is_file());
    if found.is_none() {
        assert!(std::env::var_os("CSWITCH_REQUIRE_CHROMIUM").is_none(), "chromium is not on PATH");
        eprintln!("SKIPPED the stats page check: `chromium` is not on PATH");
    }
    found.map(|p| p.display().to_string())
}
