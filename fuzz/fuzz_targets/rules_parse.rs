//! Rules source: compiling any text never panics; a program that compiles prints as
//! canonical source that compiles to the same print, and evaluates against fixed requests
//! (XML and form bodies, whole and cut) without panicking, the indexed walk deciding as
//! the rule-by-rule traced walk does.
#![no_main]

use cswitch_rules::{Action, EvalState, OwnedRequest, Outcome, RuleSet, Trace};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

const GROUPS: &[&str] = &["web", "api", "server1", "server2", "static"];

fn requests() -> Vec<OwnedRequest> {
    let src = "192.0.2.7:40000".parse().unwrap();
    let dst = "198.51.100.1:80".parse().unwrap();
    let xml = "<purchase><customerName>CCL</customerName><item><subTotal>50000</subTotal></item>\
<totalAmount>52000</totalAmount></purchase><purchase><totalAmount>20000</totalAmount></purchase>";
    let form = "a=1&xml=%3Cpurchase%3E%3CtotalAmount%3E7%3C%2FtotalAmount%3E%3C%2Fpurchase%3E&b=2";
    let mut out = Vec::new();
    for (ct, body) in [("text/xml", xml), ("application/x-www-form-urlencoded", form)] {
        let raw = format!(
            "POST /cgi-bin/xmlprocess.pl?q=1&r=%41 HTTP/1.1\r\nHost: Shop.example:8080\r\nCookie: sid=9; a=b\r\n\
X-Tenant: blue\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let whole = OwnedRequest::parse(raw.as_bytes(), src, dst).unwrap();
        out.push(whole.with_body_prefix(body.len() / 2));
        out.push(whole);
    }
    out.push(OwnedRequest::parse(b"GET /img/a.gif HTTP/1.0\r\n\r\n", src, dst).unwrap());
    out
}

fn summary(out: Outcome<'_>) -> String {
    match out {
        Outcome::NeedMore => "more".into(),
        Outcome::Decided(d) => {
            let action = match d.action {
                Action::Route { group, sticky } => format!("route {group} {sticky:?}"),
                other => format!("{other:?}"),
            };
            format!("{:?} {action} {:?}", d.rule, d.set_headers.iter().collect::<Vec<_>>())
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(rs) = RuleSet::compile(text, Path::new("fuzz.rules"), GROUPS) else { return };
    let printed = rs.to_string();
    let again = RuleSet::compile(&printed, Path::new("printed.rules"), GROUPS).expect("canonical source compiles");
    assert_eq!(again.to_string(), printed);
    let (mut st, mut traced_st, mut trace) = (EvalState::new(), EvalState::new(), Trace::new());
    for req in requests() {
        let fast = summary(rs.evaluate(&req, &mut st, None));
        let traced = summary(rs.evaluate(&req, &mut traced_st, Some(&mut trace)));
        assert_eq!(fast, traced, "{trace}");
        let _ = trace.to_string();
        if req.body_complete {
            assert_ne!(fast, "more");
        }
    }
});
