//! Cookie persistence on one-way connections (issue 12 part 6; seed 001 §IV), through the
//! binaries in network namespaces: the answers never pass the switch, so the server host's
//! agent sets or rewrites the cookie — or, under `learn`, reports the session cookie the
//! server set to the switch's table; the switch reads it on the client's next connections
//! and sends them back to the same server, which sees its cookies as it set them. Two
//! server hosts (`b1`, `b2`) in one round-robin group, each running a small HTTP/1.1 app
//! that names itself, echoes the Cookie field it received, and sets a session cookie
//! `PHPSESSID` when the request has none.
//!
//! Needs root, iproute2, nftables and python3 (`CSWITCH_REQUIRE_KERNEL=1` fails without).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod oneway_bed;

use common::tempdir;
use oneway_bed::{
    metric, patient_preamble, server_entry, start_agent, start_switch, wait_for_webs, write_site, Proc,
};
use testkit::netns::{self, Testbed, VIP};

/// The app on each server host (port 8080).
const APP: &str = r#"
import http.server, sys
name = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        cookie = self.headers.get("Cookie", "-")
        body = f"{name} saw {cookie}".encode()
        self.send_response(200)
        if cookie == "-":
            self.send_header("Set-Cookie", f"PHPSESSID=sess-{name}; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", 8080), H).serve_forever()
"#;

struct Bed {
    bed: Testbed,
    _procs: Vec<Proc>,
}

fn deploy(tag: &str, persistence: &str) -> Bed {
    let bed = Testbed::new(&[("cl", 10), ("sw", 2), ("b1", 11), ("b2", 12)]);
    let dir = tempdir(tag);
    write_site(&dir);
    let mut procs = Vec::new();
    for (host, n) in [("b1", 11), ("b2", 12)] {
        procs.push(Proc::spawn(&bed, host, &["python3", "-c", APP, host]));
        procs.push(start_agent(&bed, host, n, &dir, &["--local", "127.0.0.1:8080"]));
    }
    let config = format!(
        "{}[[listener]]\nname = \"web\"\nbind = \"{VIP}:80\"\ndefault_group = \"web\"\nmode = \"one-way\"\n\
         [[group]]\nname = \"web\"\nscheduler = \"rr\"\npersistence = {persistence}\nservers = [ {}, {} ]\n",
        patient_preamble(),
        server_entry("b1", 11, 8080),
        server_entry("b2", 12, 8080)
    );
    procs.push(start_switch(&bed, &dir, &config));
    wait_for_webs(&bed);
    Bed { bed, _procs: procs }
}

/// Each argument is a request on a new connection: the Cookie field to send ("-" for none).
/// Prints, per request, the body and the Set-Cookie fields of the answer.
const CLIENT: &str = r#"
import http.client, sys
vip = sys.argv[1]
for cookie in sys.argv[2:]:
    c = http.client.HTTPConnection(vip, 80, timeout=10)
    c.request("GET", "/", headers={} if cookie == "-" else {"Cookie": cookie})
    r = c.getresponse()
    print(r.read().decode(), "|", ", ".join(r.headers.get_all("Set-Cookie") or []))
    c.close()
"#;

fn requests(bed: &Testbed, cookies: &[&str]) -> Vec<String> {
    let mut argv = vec!["python3", "-c", CLIENT, VIP];
    argv.extend(cookies);
    let out = bed.run("cl", &argv);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn insert_brings_new_connections_back_to_the_server_that_answered() {
    if !netns::available() {
        return;
    }
    let d = deploy("oneway-insert", "{ mode = \"insert\", cookie = \"SRV\" }");
    // The first answer carries our cookie naming its server, set by that server's agent.
    let first = requests(&d.bed, &["-"]);
    let server = if first[0].starts_with("b1") { "b1" } else { "b2" };
    assert!(first[0].contains(&format!("SRV={server}")), "{first:?}");
    // Round robin would alternate; the cookie keeps every new connection on that server,
    // and under `indirect` (the default) the server never sees it.
    let ours = format!("SRV={server}");
    let again = requests(&d.bed, &[ours.as_str(); 4]);
    for line in &again {
        assert!(line.starts_with(&format!("{server} saw -")), "{again:?}");
        assert!(!line.contains("SRV="), "the client already has it: {again:?}");
    }
    assert_eq!(metric(&d.bed, "cswitch_handoffs_total"), 5);
}

#[test]
fn rename_carries_the_server_in_the_session_cookies_name() {
    if !netns::available() {
        return;
    }
    let d = deploy("oneway-rename", "{ mode = \"rename\", cookie = \"PHPSESSID\" }");
    let first = requests(&d.bed, &["-"]);
    let server = if first[0].starts_with("b1") { "b1" } else { "b2" };
    // The server set `PHPSESSID=sess-bN`; the client got the same length with the name
    // rewritten to carry the server (seed 001's cookie-name rewriting).
    let set = first[0].split(" | ").nth(1).unwrap().to_string();
    let renamed = set.split(';').next().unwrap().to_string();
    assert_eq!(renamed.len(), format!("PHPSESSID=sess-{server}").len(), "{set}");
    assert!(!renamed.starts_with("PHPSESSID"), "{set}");
    // Sent back on new connections: the same server, which sees its own cookie's name.
    let again = requests(&d.bed, &[renamed.as_str(); 4]);
    for line in &again {
        assert!(line.starts_with(&format!("{server} saw PHPSESSID=sess-{server}")), "{again:?}");
    }
}

#[test]
fn learn_reports_the_servers_session_cookie_to_the_switchs_table() {
    if !netns::available() {
        return;
    }
    let d = deploy("oneway-learn", "{ mode = \"learn\", cookie = \"PHPSESSID\" }");
    let first = requests(&d.bed, &["-"]);
    let server = if first[0].starts_with("b1") { "b1" } else { "b2" };
    // The client gets the cookie as the server set it (nothing rewritten) …
    assert!(first[0].ends_with(&format!("| PHPSESSID=sess-{server}; Path=/")), "{first:?}");
    // … and the agent reported it (on its control thread's next round, ≤ 100 ms; longer on
    // a loaded machine).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let cookie = format!("PHPSESSID=sess-{server}");
    let again = requests(&d.bed, &[cookie.as_str(); 4]);
    for line in &again {
        assert!(line.starts_with(&format!("{server} saw {cookie}")), "{again:?}");
    }
}
