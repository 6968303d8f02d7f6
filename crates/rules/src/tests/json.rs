//! JSON path extraction details: the scan on its own, then through rules (content types,
//! comparisons, need-more, traces).

use super::{compile, outcome, request};
use crate::json::{JsonPlan, JsonScratch, Source};
use crate::pathstate::PathState;
use crate::{EvalState, Trace};

/// Scans `doc` for `paths` (written as after `json`: `.a[0]`); returns each value,
/// "absent" or "pending".
pub(super) fn scan(doc: &[u8], complete: bool, paths: &[&str]) -> (Vec<String>, Source) {
    let parsed: Vec<_> = paths.iter().map(|p| crate::jsonpath::parse(p).expect("test path")).collect();
    let plan = JsonPlan::new(&parsed);
    let mut s = JsonScratch::default();
    s.scan(&plan, doc, complete);
    let got = (0..parsed.len())
        .map(|i| match s.states[i] {
            PathState::Found => String::from_utf8_lossy(&s.values[i]).into_owned(),
            PathState::Absent => "absent".into(),
            PathState::Pending => "pending".into(),
        })
        .collect();
    (got, s.source)
}

fn values(doc: &str, complete: bool, paths: &[&str]) -> Vec<String> {
    scan(doc.as_bytes(), complete, paths).0
}

#[test]
fn values_are_unescaped_strings_scalar_text_and_container_text() {
    let doc = r#"{"s": "a\"b\\c\/\u00e9\ud83d\ude00\n", "n": -12.5e+3, "t": true, "z": null,
        "o": {"k": [1, 2]}, "e": "", "a": [ ]}"#;
    let got = values(doc, true, &[".s", ".n", ".t", ".z", ".o", ".o.k", ".e", ".a", ".x"]);
    assert_eq!(
        got,
        ["a\"b\\c/é😀\n", "-12.5e+3", "true", "null", r#"{"k": [1, 2]}"#, "[1, 2]", "", "[ ]", "absent"]
    );
}

#[test]
fn indexes_are_zero_based_and_steps_must_fit_the_kind() {
    let doc = r#"{"items": [{"sku": "A"}, {"sku": "B"}, [7, [8, 9]]], "n": 5}"#;
    let paths =
        [".items[0].sku", ".items[1].sku", ".items[2][1][0]", ".items[3]", ".items.sku", ".n[0]", ".n.x"];
    assert_eq!(values(doc, true, &paths), ["A", "B", "8", "absent", "absent", "absent", "absent"]);
    assert_eq!(values("[10, 20]", true, &["[1]", ".a"]), ["20", "absent"]);
}

#[test]
fn quoted_keys_and_escaped_member_names_match_by_their_text() {
    let doc = r#"{"a b": 1, "x.y": 2, "\u0063": 3, "": 4}"#;
    assert_eq!(values(doc, true, &[r#"["a b"]"#, r#"["x.y"]"#, ".c", r#"[""]"#]), ["1", "2", "3", "4"]);
}

#[test]
fn the_first_of_repeated_members_wins() {
    assert_eq!(
        values(r#"{"a": 1, "a": 2, "b": {"c": 3}, "b": {"c": 4}}"#, true, &[".a", ".b.c"]),
        ["1", "3"]
    );
}

#[test]
fn a_path_is_absent_once_its_container_closes_even_mid_body() {
    let doc = r#"{"order": {"id": 7}, "items": [1, "#;
    let got = values(doc, false, &[".order.total", ".order.id", ".items[1]", ".items[5]"]);
    assert_eq!(got, ["absent", "7", "pending", "pending"]);
    assert_eq!(values(doc, true, &[".items[1]"]), ["absent"]);
}

#[test]
fn partial_values_are_never_committed() {
    for cut in [r#"{"a": "52"#, r#"{"a": 520"#, r#"{"a": tr"#, r#"{"a": "x\u00"#, r#"{"a": [1, 2"#, r#"{"a"#]
    {
        assert_eq!(values(cut, false, &[".a"]), ["pending"], "{cut}");
    }
    // A number is whole once something follows it.
    assert_eq!(values(r#"{"a": 520 "#, false, &[".a"]), ["520"]);
}

#[test]
fn malformed_json_keeps_what_was_read_and_makes_the_rest_absent() {
    let (got, source) = scan(br#"{"a": 1, "b" 2, "c": 3}"#, false, &[".a", ".c"]);
    assert_eq!(got, ["1", "absent"]);
    assert_eq!(source, Source::Malformed(13));
    for bad in [
        r#"{"c": 01}"#,
        r#"{"c": tru}"#,
        r#"{"c": "\x"}"#,
        r#"{"c": "\ud800"}"#,
        "{\"c\": \"a\u{1}\"}",
        r#"{"a": 1,}"#,
        r#"{c: 1}"#,
        r#"{"c" 1}"#,
    ] {
        let (got, source) = scan(bad.as_bytes(), false, &[".c"]);
        assert_eq!(got, ["absent"], "{bad}");
        assert!(matches!(source, Source::Malformed(_)), "{bad}");
    }
    assert_eq!(values("[1,]", false, &["[1]"]), ["absent"]);
    // A value no path enters is crossed by counting brackets, not checked.
    assert_eq!(values(r#"{"a": [1 2 :], "c": 1}"#, false, &[".c"]), ["1"]);
    assert_eq!(values("not json", false, &[".a"]), ["absent"]);
    assert_eq!(values("", true, &[".a"]), ["absent"]);
    assert_eq!(values("\"just a string\"", false, &[".a"]), ["absent"]);
}

#[test]
fn scanning_stops_once_every_path_is_resolved() {
    // What follows the resolved paths is never read, so it cannot matter.
    assert_eq!(values(r#"{"a": {"b": 1}, "c": {{{"#, false, &[".a.b"]), ["1"]);
    assert_eq!(values(r#"{"a": 1} trailing"#, true, &[".a", ".b"]), ["1", "absent"]);
}

#[test]
fn deep_nesting_is_counted_not_recursed() {
    let deep = format!("{{\"x\": {}1{}, \"a\": 2}}", "[".repeat(1 << 20), "]".repeat(1 << 20));
    assert_eq!(values(&deep, true, &[".a", ".x[1]"]), ["2", "absent"]);
    let open_only = "[".repeat(1 << 20);
    assert_eq!(values(&open_only, false, &["[0][0][0][0]"]), ["pending"]);
    assert_eq!(values(&open_only, true, &["[0][0][0][0]"]), ["absent"]);
}

const ORDER: &str = r#"{"order": {"id": "A-17", "total": 1200.50, "big": 1.5e3, "vip": true,
"coupon": null, "items": [{"sku": "X1", "qty": 2}, {"sku": "Y9", "qty": 1}]}}"#;

fn post(content_type: &str, body: &str) -> crate::OwnedRequest {
    let raw =
        format!("POST /api HTTP/1.1\r\nContent-Type: {content_type}\r\nContent-Length: 400\r\n\r\n{body}");
    let mut req = request(&raw);
    req.body_complete = true;
    req
}

#[test]
fn rules_compare_json_values_as_numbers_or_strings() {
    let rs = compile(
        r#"
A: if (json.order.total > 1200.4 && json.order.total < 1201) { setHeader("X-A", "1"); }
B: if (json.order.big == 1500 && json.order.items[1].qty < 2) { setHeader("X-B", "1"); }
C: if (json.order.items[0].sku == "X1" && prefix(json.order.id, "A-")) { setHeader("X-C", "1"); }
D: if (exists(json.order.coupon) && json.order.vip == "true" && !exists(json.order.items[2])) { setHeader("X-D", "1"); }
E: if (contains(json.order.items, "Y9") && json.order["id"] != "B") { routeTo(api); }
"#,
    );
    assert_eq!(outcome(&rs, &post("application/json", ORDER)), "E:api/Off+X-A=1+X-B=1+X-C=1+X-D=1");
}

#[test]
fn only_json_content_types_are_read() {
    let rs = compile("A: if (json.order.id == \"A-17\") { routeTo(api); }");
    for ct in [
        "application/json",
        "Application/JSON; charset=utf-8",
        "application/vnd.api+json",
        "application/problem+JSON",
    ] {
        assert_eq!(outcome(&rs, &post(ct, ORDER)), "A:api/Off", "{ct}");
    }
    for ct in ["text/plain", "application/jsonl", "text/xml", "+json", "application/x-www-form-urlencoded"] {
        assert_eq!(outcome(&rs, &post(ct, ORDER)), "-:default", "{ct}");
    }
    // Not JSON: decided from the head, without waiting for the body.
    let cut = request("POST /api HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 400\r\n\r\n{\"or");
    assert_eq!(outcome(&rs, &cut), "-:default");
}

#[test]
fn a_partial_json_body_needs_more_until_the_value_arrives() {
    let rs = compile("A: if (json.order.total > 1000) { routeTo(api); }");
    let head = "POST /api HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n";
    let at = ORDER.find("1200.50").unwrap_or(0);
    for (cut, want) in [(at, "more"), (at + 7, "more"), (at + 8, "A:api/Off")] {
        assert_eq!(outcome(&rs, &request(&format!("{head}{}", &ORDER[..cut]))), want, "cut at {cut}");
    }
}

#[test]
fn traces_show_json_values_and_why_a_path_is_absent() {
    let rs = compile("A: if (json.order.total > 1000 || exists(json[\"a b\"])) { routeTo(api); }");
    let mut st = EvalState::new();
    let mut trace = Trace::new();
    let _ = rs.evaluate(&post("application/json", ORDER), &mut st, Some(&mut trace));
    assert!(
        trace.to_string().contains("json.order.total > 1000 → true  [json.order.total = \"1200.50\"]"),
        "{trace}"
    );
    let _ = rs.evaluate(&post("text/plain", ORDER), &mut st, Some(&mut trace));
    assert!(trace.to_string().contains("json.order.total absent (not a JSON body"), "{trace}");
    let _ = rs.evaluate(&post("application/json", "{\"order\": {\"total\": 12x"), &mut st, Some(&mut trace));
    let text = trace.to_string();
    assert!(text.contains("json[\"a b\"] absent (the body is not valid JSON at byte 22)"), "{text}");
}

#[test]
fn the_order_api_example_of_the_docs() {
    let src = r#"
Review: if (json.order.total > 10000 && !exists(json.order.payment["3ds"])) { routeTo(review); }
Bulk:   if (exists(json.order.items[49])) { routeTo(bulk); }
Eu:     if (json.order["ship to"].country == "FR" || json.order["ship to"].country == "DE") { routeTo(eu); }
"#;
    let rs = crate::RuleSet::compile(src, std::path::Path::new("docs.rules"), &["review", "bulk", "eu"])
        .unwrap_or_else(|e| panic!("{e}"));
    let review = r#"{"order": {"total": 12000, "payment": {"method": "card"}, "items": ["#;
    assert_eq!(outcome(&rs, &request(&format!("{}{review}", head()))), "Review:review/Off");
    let items = vec!["{}"; 50].join(",");
    let bulk = format!(r#"{{"order": {{"total": 5, "items": [{items}"#);
    assert_eq!(outcome(&rs, &request(&format!("{}{bulk}", head()))), "Bulk:bulk/Off");
    let eu = r#"{"order": {"total": 5, "items": [], "ship to": {"country": "DE"}}}"#;
    assert_eq!(outcome(&rs, &post("application/json", eu)), "Eu:eu/Off");
    assert_eq!(outcome(&rs, &post("text/plain", eu)), "-:default");
}

fn head() -> &'static str {
    "POST /orders HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 9999\r\n\r\n"
}
