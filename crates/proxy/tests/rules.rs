//! The rule language through the running switch: the paper's rules (seed 000 §5.1) on the
//! §4.3 purchase documents, as text/xml and as urlencoded forms, bodies cut into small
//! writes; stickiness; deny / drop / redirect / setHeader; the body cap; a rule swap
//! under load; JSON bodies routed by their fields (whole, in small writes, past the cap).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use proxy::{Counter, Switch};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use testkit::{Origin, RawClient};
use tokio::io::AsyncWriteExt;

const GROUPS: &[&str] =
    &["web", "server1", "server2", "server3", "LBServerGroup", "hsServers", "defaultServers", "api"];

/// The paper's rules; R4's addresses become loopback ones (the client connects from
/// 127.0.0.2) and its port the listener's.
fn paper_rules(port: u16) -> String {
    format!(
        r#"# seed 000 §5.1
R1: if (xml.purchase/totalAmount > 52000) {{ routeTo(server1, STICKY_IP_PORT); }}
R2: if (strcmp(xml.purchase/customerName, "CCL") == 0) {{ routeTo(server2, NONSTICKY); }}
R3: if (match(url, "gif$")) {{ routeTo(server3, NONSTICKY); }}
R4: if (srcip == "127.0.0.2" && dstip == "127.0.0.1" && dstport == {port}) {{ routeTo(LBServerGroup, STICKY_IP); }}
R5: if (match(url, "xmlprocess.pl")) {{ goto R6; }}
R6: if (xml.purchase/totalAmount > 5000) {{ routeTo(hsServers, NONSTICKY); }} else {{ routeTo(defaultServers, NONSTICKY); }}
"#
    )
}

const PAPER_DOC: &str = "<purchase>\n  <customerName>CCL</customerName>\n  <customerID>111222333</customerID>\n  <item>\n    <productID>309121544</productID>\n    <unitPrice>5000</unitPrice>\n    <subTotal>50000</subTotal>\n  </item>\n  <item>\n    <productID>309121538</productID>\n    <unitPrice>200</unitPrice>\n    <subTotal>2000</subTotal>\n  </item>\n  <totalAmount>52000</totalAmount>\n</purchase>\n<purchase>\n<customerName>CDL</customerName>\n<customerID>111222444</customerID>\n<item>\n  <productID>30913555</productID>\n  <unitPrice>3000</unitPrice>\n  <subTotal>20000</subTotal>\n</item>\n<totalAmount>20000</totalAmount>\n</purchase>\n";

fn purchase(customer: &str, total: u32) -> String {
    format!("<purchase><customerName>{customer}</customerName><item><subTotal>{total}</subTotal></item><totalAmount>{total}</totalAmount></purchase>")
}

struct Rig {
    switch: Switch,
    addr: SocketAddr,
    _origins: Vec<Origin>,
    dir: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One origin per group, named after it; the listener's default group is `web`.
async fn rig(tag: &str, rules: impl Fn(u16) -> String, extra: &str) -> Rig {
    let mut origins = Vec::new();
    let mut groups = String::new();
    for g in GROUPS {
        let o = Origin::start(g).await;
        groups.push_str(&format!(
            "[[group]]\nname = \"{g}\"\nscheduler = \"rr\"\nservers = [ {{ name = \"{g}-1\", addr = \"{}\" }} ]\n",
            o.addr()
        ));
        origins.push(o);
    }
    let dir = std::env::temp_dir().join(format!("cswitch-rules-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    std::fs::write(dir.join("web.rules"), rules(port)).unwrap();
    let text = format!(
        "[global]\nworkers = 1\ngrace_period = \"2s\"\n[access_log]\nenabled = false\n{extra}\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:{port}\"\ndefault_group = \"web\"\nrules = \"web.rules\"\n{groups}"
    );
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, &text).unwrap();
    let cfg = config::load(&path).unwrap();
    let switch = Switch::start(cfg).unwrap();
    let addr = switch.local_addr("web").unwrap();
    Rig { switch, addr, _origins: origins, dir }
}

fn post(path: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!("POST {path} HTTP/1.1\r\nHost: shop\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}", body.len())
        .into_bytes()
}

fn form(xml: &str) -> String {
    let mut enc = String::from("user=ccl&order=");
    for b in xml.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => enc.push(b as char),
            b' ' => enc.push('+'),
            _ => enc.push_str(&format!("%{b:02X}")),
        }
    }
    enc.push_str("&n=1");
    enc
}

async fn who(c: &mut RawClient, req: &[u8]) -> String {
    c.send(req).await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body_str());
    r.header("X-Origin").unwrap().to_string()
}

/// (request, group that must answer), for text/xml or urlencoded bodies.
fn paper_cases(urlencoded: bool) -> Vec<(Vec<u8>, &'static str)> {
    let body = |xml: &str| {
        if urlencoded {
            post("/cgi/xmlprocess.pl", "application/x-www-form-urlencoded", &form(xml))
        } else {
            post("/cgi/xmlprocess.pl", "text/xml", xml)
        }
    };
    vec![
        (body(PAPER_DOC), "server2"),                // R1: 52000 is not > 52000; R2: CCL
        (body(&purchase("XYZ", 7000)), "hsServers"), // R5 → R6 then-branch
        (body(&purchase("XYZ", 3000)), "defaultServers"), // R5 → R6 else-branch
        (b"GET /img/a.gif HTTP/1.1\r\nHost: shop\r\n\r\n".to_vec(), "server3"), // R3
        // Rules run top to bottom: a page reaches R6 too, whose else-branch routes it.
        (b"GET /index.html HTTP/1.1\r\nHost: shop\r\n\r\n".to_vec(), "defaultServers"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paper_rules_route_text_xml_and_urlencoded_purchases() {
    let r = rig("paper", paper_rules, "").await;
    for urlencoded in [false, true] {
        let mut c = RawClient::connect(r.addr).await.unwrap();
        for (req, want) in paper_cases(urlencoded) {
            assert_eq!(
                who(&mut c, &req).await,
                want,
                "urlencoded={urlencoded}: {}",
                String::from_utf8_lossy(&req[..40])
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_in_small_writes_and_content_length_split_decide_the_same() {
    let r = rig("split", paper_rules, "").await;
    let mut c = RawClient::connect(r.addr).await.unwrap();
    for (req, want) in paper_cases(false).into_iter().take(3) {
        // Cut inside the Content-Length value (seed 000 §4.1), then 7-byte pieces.
        let text = String::from_utf8(req.clone()).unwrap();
        let cl = text.find("Content-Length: ").unwrap() + "Content-Length: ".len() + 1;
        let s = c.stream();
        s.write_all(&req[..cl]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        for piece in req[cl..].chunks(7) {
            s.write_all(piece).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let resp = c.read_response().await.unwrap();
        assert_eq!(resp.header("X-Origin"), Some(want));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_origin_gets_the_body_whole_after_the_rules_read_it() {
    let r = rig("whole", paper_rules, "").await;
    let mut c = RawClient::connect(r.addr).await.unwrap();
    let doc = purchase("XYZ", 9000);
    let req = format!("POST /echo/xmlprocess.pl HTTP/1.1\r\nHost: s\r\nContent-Type: text/xml\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{doc}\r\n0\r\n\r\n", doc.len());
    c.send(req.as_bytes()).await.unwrap();
    let resp = c.read_response().await.unwrap();
    assert_eq!(resp.header("X-Origin"), Some("hsServers"));
    let seen = r._origins.iter().find(|o| o.name() == "hsServers").unwrap().requests().pop().unwrap();
    assert_eq!(seen.body, doc.as_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sticky_ip_port_pins_the_rest_of_the_connection() {
    let r = rig("ipport", paper_rules, "").await;
    let mut c = RawClient::connect(r.addr).await.unwrap();
    let big = post("/cgi/xmlprocess.pl", "text/xml", &purchase("XYZ", 60000));
    assert_eq!(who(&mut c, &big).await, "server1"); // R1, STICKY_IP_PORT
    let gif = b"GET /img/a.gif HTTP/1.1\r\nHost: shop\r\n\r\n";
    assert_eq!(who(&mut c, gif).await, "server1", "same connection: no rule matching");
    let mut other = RawClient::connect(r.addr).await.unwrap();
    assert_eq!(who(&mut other, gif).await, "server3", "another connection is matched again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sticky_ip_pins_the_client_address_across_connections() {
    let r = rig("ip", paper_rules, "").await;
    let from: SocketAddr = "127.0.0.2:0".parse().unwrap();
    let mut c = RawClient::connect_from(from, r.addr).await.unwrap();
    let page = b"GET /index.html HTTP/1.1\r\nHost: shop\r\n\r\n";
    assert_eq!(who(&mut c, page).await, "LBServerGroup"); // R4, STICKY_IP
    drop(c);
    let mut again = RawClient::connect_from(from, r.addr).await.unwrap();
    let gif = b"GET /img/a.gif HTTP/1.1\r\nHost: shop\r\n\r\n";
    assert_eq!(who(&mut again, gif).await, "LBServerGroup", "R3 is not even tried");
    let mut local = RawClient::connect(r.addr).await.unwrap();
    assert_eq!(who(&mut local, gif).await, "server3", "127.0.0.1 is not pinned");
}

fn action_rules(_: u16) -> String {
    r#"
D1: if (prefix(path, "/admin")) { deny(); }
D2: if (header("X-Bad") == "1") { drop(); }
D3: if (path == "/old") { redirect(301, "http://shop.example/new"); }
D4: if (exists(cookie("tier"))) { setHeader("X-Tier", "gold"); }
D5: if (prefix(path, "/api")) { routeTo(api); }
D6: if (xml.order/total > 10) { routeTo(server1); }
"#
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_drop_redirect_and_set_header() {
    let r = rig("actions", action_rules, "[limits]\nrule_body_bytes = 1024\n").await;
    let mut c = RawClient::connect(r.addr).await.unwrap();
    c.send(b"GET /admin/users HTTP/1.1\r\nHost: s\r\n\r\n").await.unwrap();
    let resp = c.read_response().await.unwrap();
    assert_eq!(resp.status, 403);
    assert!(c.closed_within(Duration::from_secs(2)).await);

    let mut c = RawClient::connect(r.addr).await.unwrap();
    c.send(b"GET / HTTP/1.1\r\nHost: s\r\nX-Bad: 1\r\n\r\n").await.unwrap();
    assert!(c.closed_within(Duration::from_secs(2)).await, "dropped without an answer");

    let mut c = RawClient::connect(r.addr).await.unwrap();
    c.send(b"GET /old HTTP/1.1\r\nHost: s\r\n\r\n").await.unwrap();
    let resp = c.read_response().await.unwrap();
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("Location"), Some("http://shop.example/new"));
    // The redirect kept the connection: the next request is served on it.
    c.send(b"GET /api/v1 HTTP/1.1\r\nHost: s\r\nCookie: a=1; tier=x\r\n\r\n").await.unwrap();
    let resp = c.read_response().await.unwrap();
    assert_eq!(resp.header("X-Origin"), Some("api"));
    let seen = r._origins.iter().find(|o| o.name() == "api").unwrap().requests().pop().unwrap();
    assert_eq!(seen.header("X-Tier"), Some("gold"));

    // Over the rule body cap: 413.
    let big = format!("<order><note>{}</note><total>11</total></order>", "x".repeat(2000));
    c.send(&post("/buy", "text/xml", &big)).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 413);
    assert_eq!(r.switch.stats().get(Counter::RuleDenied), 1);
    assert_eq!(r.switch.stats().get(Counter::RuleDropped), 1);
    assert_eq!(r.switch.stats().get(Counter::RuleRedirects), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_swap_under_load_fails_no_request() {
    let r = rig("swap", paper_rules, "").await;
    let addr = r.addr;
    let load = tokio::spawn(async move {
        let mut c = RawClient::connect(addr).await.unwrap();
        let mut seen = Vec::new();
        for _ in 0..400 {
            c.send(b"GET /img/a.gif HTTP/1.1\r\nHost: s\r\n\r\n").await.unwrap();
            let resp = c.read_response().await.unwrap();
            assert_eq!(resp.status, 200);
            seen.push(resp.header("X-Origin").unwrap().to_string());
        }
        seen
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    std::fs::write(r.dir.join("web.rules"), "G: if (suffix(path, \".gif\")) { routeTo(api); }\n").unwrap();
    let cfg = config::load(&r.dir.join("cswitch.toml")).unwrap();
    r.switch.reload(cfg).unwrap();
    let seen = load.await.unwrap();
    assert_eq!(seen.len(), 400);
    assert_eq!(seen.first().map(String::as_str), Some("server3"));
    assert_eq!(seen.last().map(String::as_str), Some("api"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_rule_file_is_refused_with_its_position() {
    let r = rig("bad", paper_rules, "").await;
    std::fs::write(
        r.dir.join("web.rules"),
        "R6: if (xml.purchase/totalAmount > 5000) { routeTo(hsServers); } else { routTo(defaultServers); }\n",
    )
    .unwrap();
    let cfg = config::load(&r.dir.join("cswitch.toml")).unwrap();
    let err = r.switch.reload(cfg).unwrap_err().to_string();
    assert!(err.contains("web.rules:1:"), "{err}");
    assert!(err.contains("unknown action 'routTo' — did you mean 'routeTo'?"), "{err}");
    // The old rules still run.
    let mut c = RawClient::connect(r.addr).await.unwrap();
    assert_eq!(who(&mut c, b"GET /a.gif HTTP/1.1\r\nHost: s\r\n\r\n").await, "server3");
}

/// JSON fields (issue 15 part 6): the order's total, a quoted key, an array element.
fn json_rules(_: u16) -> String {
    r#"
Vip: if (json.order.total > 50000 || json.order.customer["full name"] == "CCL") { routeTo(server1); }
Sku: if (json.order.items[1].sku == "X-9") { routeTo(server2); }
Api: if (exists(json.order)) { routeTo(api); }
"#
    .to_string()
}

fn order(total: u32, second_sku: &str, note: &str) -> String {
    format!(
        r#"{{"order": {{"note": "{note}", "customer": {{"full name": "C\u0044L"}}, "items": [{{"sku": "A-1"}}, {{"sku": "{second_sku}"}}], "total": {total}}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_bodies_route_by_their_fields() {
    let r = rig("json", json_rules, "").await;
    let mut c = RawClient::connect(r.addr).await.unwrap();
    let cases = [
        (post("/api/orders", "application/json", &order(60000, "B-2", "")), "server1"),
        (post("/api/orders", "application/json; charset=utf-8", &order(100, "X-9", "")), "server2"),
        (post("/api/orders", "application/vnd.shop+json", &order(100, "B-2", "")), "api"),
        (
            post("/api/orders", "application/json", r#"{"order": {"customer": {"full name": "CCL"}}}"#),
            "server1",
        ),
        // Not JSON by its Content-Type: the JSON rules read nothing; the default group.
        (post("/api/orders", "text/plain", &order(60000, "X-9", "")), "web"),
        // Malformed before the fields: they are absent.
        (post("/api/orders", "application/json", r#"{"order": {"total" 60000}}"#), "web"),
    ];
    for (req, want) in cases {
        assert_eq!(who(&mut c, &req).await, want, "{}", String::from_utf8_lossy(&req));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_body_in_small_writes_decides_as_whole_and_reaches_the_origin_whole() {
    let r = rig("json-split", json_rules, "").await;
    let mut c = RawClient::connect(r.addr).await.unwrap();
    for (doc, want) in [(order(60000, "B-2", "a b"), "server1"), (order(7, "X-9", "c"), "server2")] {
        let req = post("/api/orders", "application/json", &doc);
        let s = c.stream();
        for piece in req.chunks(7) {
            s.write_all(piece).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let resp = c.read_response().await.unwrap();
        assert_eq!(resp.header("X-Origin"), Some(want));
        let seen = r._origins.iter().find(|o| o.name() == want).unwrap().requests().pop().unwrap();
        assert_eq!(seen.body, doc.as_bytes());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_field_beyond_the_rule_body_limit_is_answered_413() {
    let r = rig("json-413", json_rules, "[limits]\nrule_body_bytes = 1024\n").await;
    let note = "n".repeat(2000);
    // The total comes after 2 KB of note: the rules cannot decide within 1 KiB.
    let mut c = RawClient::connect(r.addr).await.unwrap();
    c.send(&post("/api/orders", "application/json", &order(60000, "B-2", &note))).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 413);
    // The same size with the deciding member first: decided in the first bytes, forwarded.
    let first = format!(r#"{{"order": {{"total": 60000, "note": "{note}"}}}}"#);
    let mut c = RawClient::connect(r.addr).await.unwrap();
    assert_eq!(who(&mut c, &post("/api/orders", "application/json", &first)).await, "server1");
    // A large body that is not JSON never waits for the JSON rules.
    let mut c = RawClient::connect(r.addr).await.unwrap();
    assert_eq!(who(&mut c, &post("/api/orders", "text/plain", &note)).await, "web");
}
