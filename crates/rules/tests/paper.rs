//! The rules of seed 000 §5.1 (R1–R6) against the purchase documents of §4.3, sent as
//! text/xml and as urlencoded forms (§4.2), through the public API only.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;

use cswitch_rules::{Action, EvalState, Outcome, OwnedRequest, RuleSet, Sticky, Trace};

const GROUPS: &[&str] = &["server1", "server2", "server3", "LBServerGroup", "hsServers", "defaultServers"];

/// R1–R6 as the issue writes them (R3 with match, R6 with routeTo).
const PAPER: &str = r#"
R1: if (xml.purchase/totalAmount > 52000) { routeTo(server1, STICKY_IP_PORT); }
R2: if (strcmp(xml.purchase/customerName, "CCL") == 0) {
    routeTo(server2, NONSTICKY); }
R3: if (match(url, "gif$")) { routeTo(server3, NONSTICKY); }
R4: if (srcip == "128.198.60.1" && dstip == "128.198.192.192" &&
    dstport == 80) { routeTo(LBServerGroup, STICKY_IP); }
R5: if (match(url, "xmlprocess.pl")) { goto R6; }
R6: if(xml.purchase/totalAmount > 5000){routeTo(hsServers, NONSTICKY);}
    else {routeTo(defaultServers, NONSTICKY); }
"#;

/// The §4.3 document with the first purchase's customer and total as given.
fn purchases(customer: &str, total: u32) -> String {
    format!(
        "<purchase>\n  <customerName>{customer}</customerName>\n  <customerID>111222333</customerID>\n  \
<item>\n    <productID>309121544</productID>\n    <unitPrice>5000</unitPrice>\n    <subTotal>50000</subTotal>\n  </item>\n  \
<item>\n    <productID>309121538</productID>\n    <unitPrice>200</unitPrice>\n    <subTotal>2000</subTotal>\n  </item>\n  \
<totalAmount>{total}</totalAmount>\n</purchase>\n<purchase>\n<customerName>CDL</customerName>\n<customerID>111222444</customerID>\n\
<item>\n  <productID>30913555</productID>\n  <unitPrice>3000</unitPrice>\n  <subTotal>20000</subTotal>\n</item>\n\
<totalAmount>20000</totalAmount>\n</purchase>\n"
    )
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            b' ' => "+".into(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn post(path: &str, content_type: &str, body: &str, src: &str, dst: &str) -> OwnedRequest {
    let raw = format!(
        "POST {path} HTTP/1.0\r\nHost: viva.uccs.edu\r\nContent-type: {content_type}\r\nContent-length: {}\r\n\r\n{body}",
        body.len()
    );
    OwnedRequest::parse(raw.as_bytes(), addr(src), addr(dst)).unwrap()
}

fn rules() -> RuleSet {
    RuleSet::compile(PAPER, Path::new("paper.rules"), GROUPS).unwrap()
}

/// (rule label, group name, stickiness) or None for the default.
fn decide(rs: &RuleSet, req: &OwnedRequest) -> Option<(String, String, Sticky)> {
    let mut st = EvalState::new();
    let Outcome::Decided(d) = rs.evaluate(req, &mut st, None) else { panic!("need more on a complete body") };
    let mut trace = Trace::new();
    let mut st2 = EvalState::new();
    let Outcome::Decided(d2) = rs.evaluate(req, &mut st2, Some(&mut trace)) else {
        panic!("trace: need more")
    };
    assert_eq!(d.rule, d2.rule, "indexed and traced walks disagree:\n{trace}");
    match d.action {
        Action::Route { group, sticky } => {
            Some((d.rule.unwrap().1.to_string(), GROUPS[group].to_string(), sticky))
        }
        Action::Default => None,
        other => panic!("unexpected {other:?}"),
    }
}

const CLIENT: &str = "10.0.0.7:40000";
const SWITCH: &str = "128.198.192.192:80";

fn expect(req: &OwnedRequest, want: Option<(&str, &str, Sticky)>) {
    let got = decide(&rules(), req);
    let got = got.as_ref().map(|(r, g, s)| (r.as_str(), g.as_str(), *s));
    assert_eq!(got, want);
}

/// Each case: (first customer, first total, path, client) → expected decision.
type Case = (&'static str, u32, &'static str, &'static str, Option<(&'static str, &'static str, Sticky)>);

const CASES: &[Case] = &[
    // The paper's document: 52000 is not > 52000, the customer is CCL.
    ("CCL", 52000, "/cgi-bin/purchase.pl", CLIENT, Some(("R2", "server2", Sticky::Off))),
    ("CCL", 52001, "/cgi-bin/purchase.pl", CLIENT, Some(("R1", "server1", Sticky::IpPort))),
    ("CDL", 52000, "/img/logo.gif", CLIENT, Some(("R3", "server3", Sticky::Off))),
    ("CDL", 100, "/index.html", "128.198.60.1:1234", Some(("R4", "LBServerGroup", Sticky::Ip))),
    ("CDL", 5001, "/cgi-bin/xmlprocess.pl", CLIENT, Some(("R6", "hsServers", Sticky::Off))),
    ("CDL", 5000, "/cgi-bin/xmlprocess.pl", CLIENT, Some(("R6", "defaultServers", Sticky::Off))),
    // R6 has an else branch, so every request that falls through to it is decided there.
    ("CDL", 100, "/index.html", CLIENT, Some(("R6", "defaultServers", Sticky::Off))),
];

#[test]
fn paper_rules_on_text_xml() {
    for &(customer, total, path, src, want) in CASES {
        let req = post(path, "text/xml", &purchases(customer, total), src, SWITCH);
        expect(&req, want);
        let req = post(path, "application/xml; charset=utf-8", &purchases(customer, total), src, SWITCH);
        expect(&req, want);
    }
}

#[test]
fn paper_rules_on_urlencoded_forms() {
    for &(customer, total, path, src, want) in CASES {
        let doc = urlencode(&purchases(customer, total));
        // The XML in the first field whose value starts with '<', after another field.
        let body = format!("user=bob&order={doc}&submit=Send");
        expect(&post(path, "application/x-www-form-urlencoded", &body, src, SWITCH), want);
        // As the only field.
        let body = format!("xml={doc}");
        expect(&post(path, "application/x-www-form-urlencoded", &body, src, SWITCH), want);
    }
}

#[test]
fn named_form_field_is_used() {
    let opts = cswitch_rules::CompileOptions { xml_form_field: Some("second".into()) };
    let rs = RuleSet::compile_with(PAPER, Path::new("p"), GROUPS, &opts).unwrap();
    let body =
        format!("first={}&second={}", urlencode(&purchases("CCL", 1)), urlencode(&purchases("X", 60000)));
    let req = post("/", "application/x-www-form-urlencoded", &body, CLIENT, SWITCH);
    assert_eq!(decide(&rs, &req).unwrap().0, "R1");
}

#[test]
fn r4_needs_all_three_addresses() {
    let get = |src: &str, dst: &str| {
        let raw = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        OwnedRequest::parse(raw.as_bytes(), addr(src), addr(dst)).unwrap()
    };
    let rs = rules();
    assert_eq!(decide(&rs, &get("128.198.60.1:5555", "128.198.192.192:80")).unwrap().0, "R4");
    // Anything else falls through to R6, whose else branch decides.
    for (src, dst) in [
        ("128.198.60.2:5555", "128.198.192.192:80"),
        ("128.198.60.1:5555", "128.198.192.192:8080"),
        ("128.198.60.1:5555", "128.198.192.193:80"),
    ] {
        assert_eq!(decide(&rs, &get(src, dst)).unwrap().1, "defaultServers");
    }
    // An IPv4-mapped IPv6 client address reads as IPv4.
    assert_eq!(
        decide(&rs, &get("[::ffff:128.198.60.1]:5555", "[::ffff:128.198.192.192]:80")).unwrap().0,
        "R4"
    );
}

#[test]
fn indexed_paths_reach_later_purchases_and_items() {
    let src = r#"
A: if (xml.purchase:2.totalAmount < 15000) { routeTo(server1); }
B: if (xml.purchase:1.item:2.subTotal == 2000 && xml.purchase:2/customerName == "CDL") { routeTo(server2); }
"#;
    let rs = RuleSet::compile(src, Path::new("x"), GROUPS).unwrap();
    let req = post("/", "text/xml", &purchases("CCL", 52000), CLIENT, SWITCH);
    assert_eq!(decide(&rs, &req).unwrap().0, "B");
    let doc =
        purchases("CCL", 52000).replace("<totalAmount>20000</totalAmount>", "<totalAmount>100</totalAmount>");
    assert_eq!(decide(&rs, &post("/", "text/xml", &doc, CLIENT, SWITCH)).unwrap().0, "A");
}

#[test]
fn the_papers_own_r3_compares_literally() {
    let src = r#"R3: if (strcmp(url, "gif$") == 0) { routeTo(server3, NONSTICKY); }"#;
    let rs = RuleSet::compile(src, Path::new("x"), GROUPS).unwrap();
    let get = |target: &str| {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
        OwnedRequest::parse(raw.as_bytes(), addr(CLIENT), addr(SWITCH)).unwrap()
    };
    assert_eq!(decide(&rs, &get("/logo.gif")), None);
    assert_eq!(decide(&rs, &get("gif$")).unwrap().0, "R3");
}

#[test]
fn the_papers_routto_typo_is_reported_with_position() {
    let src = "R6: if(xml.purchase/totalAmount > 5000){routeTo(hsServers, NONSTICKY);}\n    else {routTo(defaultServers, NONSTICKY); }\n";
    let err = RuleSet::compile(src, Path::new("lcs.rules"), GROUPS).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("lcs.rules:2:11: error: unknown action 'routTo' — did you mean 'routeTo'?\n"),
        "{text}"
    );
    assert!(text.contains("\n              ^^^^^^\n"), "{text}");
    assert!(text.ends_with("1 error"), "{text}");
    let d = err.iter().next().unwrap();
    assert_eq!((d.line, d.col), (2, 11));
    assert_eq!(d.message, "unknown action 'routTo' — did you mean 'routeTo'?");
}

#[test]
fn need_more_until_the_path_resolves_then_the_whole_body_decision() {
    let rs = rules();
    for (customer, total) in [("CCL", 52000), ("CCL", 52001), ("CDL", 4000), ("CDL", 6000)] {
        for (ct, body) in [
            ("text/xml", purchases(customer, total)),
            (
                "application/x-www-form-urlencoded",
                format!("a=1&xml={}&b=2", urlencode(&purchases(customer, total))),
            ),
        ] {
            let whole = post("/cgi-bin/xmlprocess.pl", ct, &body, CLIENT, SWITCH);
            let want = decide(&rs, &whole);
            let mut decided_at = None;
            let mut st = EvalState::new();
            for cut in 0..=whole.body.len() {
                let part = whole.with_body_prefix(cut);
                match rs.evaluate(&part, &mut st, None) {
                    Outcome::NeedMore => {
                        assert!(decided_at.is_none(), "need more at {cut} after deciding at {decided_at:?}")
                    }
                    Outcome::Decided(d) => {
                        decided_at.get_or_insert(cut);
                        let got = match d.action {
                            Action::Route { group, sticky } => {
                                Some((d.rule.unwrap().1.to_string(), GROUPS[group].to_string(), sticky))
                            }
                            _ => None,
                        };
                        assert_eq!(got, want, "cut at {cut} of {ct}");
                    }
                }
            }
            let at = decided_at.unwrap();
            assert!(at < whole.body.len(), "{customer} {total} decided only at the end");
        }
    }
}

#[test]
fn rule_sets_are_shared_between_workers_and_states_move_between_threads() {
    fn shared<T: Send + Sync>() {}
    fn movable<T: Send>() {}
    shared::<RuleSet>();
    movable::<EvalState>();
    let rs = std::sync::Arc::new(rules());
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let rs = rs.clone();
            std::thread::spawn(move || {
                decide(&rs, &post("/a.gif", "text/xml", &purchases("X", 1), CLIENT, SWITCH))
            })
        })
        .collect();
    for w in workers {
        assert_eq!(w.join().unwrap().unwrap().0, "R3");
    }
}
