//! Evaluation: fields, functions, comparisons, actions, gotos, need-more.

use super::{compile, outcome, request};
use crate::{EvalState, Outcome, Trace};

fn get(target: &str, headers: &str) -> crate::OwnedRequest {
    request(&format!("GET {target} HTTP/1.1\r\nHost: Shop.Example:8080\r\n{headers}\r\n"))
}

/// Each field is read as documented: (condition, target, extra headers, fires?).
const FIELD_CASES: &[(&str, &str, &str, bool)] = &[
    ("url == \"/a/b.gif?x=1\"", "/a/b.gif?x=1", "", true),
    ("path == \"/a/b.gif\"", "/a/b.gif?x=1", "", true),
    ("path == \"/p\"", "http://h.example/p?q", "", true),
    ("path == \"/\"", "http://h.example", "", true),
    ("query == \"x=1&y=%41\"", "/a?x=1&y=%41", "", true),
    ("exists(query)", "/a", "", false),
    ("ext == \"gif\"", "/a/b.tar.gif?x=.png", "", true),
    ("exists(ext)", "/a.d/b", "", false),
    ("host == \"shop.example\"", "/", "", true),
    ("host == \"abs.example\"", "http://user@Abs.Example:81/x", "", true),
    ("method == \"GET\"", "/", "", true),
    ("version == \"HTTP/1.1\"", "/", "", true),
    ("header(\"x-tenant\") == \"blue\"", "/", "X-Tenant:  blue \r\n", true),
    ("header(\"X-TENANT\") == \"blue\"", "/", "x-tenant: blue\r\nX-Tenant: red\r\n", true),
    ("cookie(\"sid\") == \"42\"", "/", "Cookie: a=1; sid=42\r\n", true),
    ("cookie(\"sid\") == \"42\"", "/", "Cookie: a=1\r\nCookie: sid=42\r\n", true),
    ("exists(cookie(\"sid\"))", "/", "Cookie: sidx=1\r\n", false),
    ("arg(\"q\") == \"a b/c\"", "/s?x=1&q=a+b%2Fc", "", true),
    ("arg(\"na me\") == \"v\"", "/s?na%20me=v", "", true),
    ("srcip == \"192.0.2.10\" && srcport == 40000", "/", "", true),
    ("dstip == \"198.51.100.1\" && dstport == \"80\"", "/", "", true),
    ("bodylen == 0", "/", "", true),
    // gRPC calls: service and method from the path, only with a gRPC content-type.
    (
        "grpc.service == \"shop.Cart\" && grpc.method == \"Add\"",
        "/shop.Cart/Add",
        "Content-Type: application/grpc\r\n",
        true,
    ),
    ("grpc.method == \"Add\"", "/shop.Cart/Add", "Content-Type: application/grpc+proto\r\n", true),
    ("exists(grpc.service)", "/shop.Cart/Add", "Content-Type: application/json\r\n", false),
    ("exists(grpc.method)", "/shop.Cart/Add", "", false),
    ("exists(grpc.method)", "/shop.Cart/Add/x", "Content-Type: application/grpc\r\n", false),
    ("exists(grpc.service)", "/Add", "Content-Type: application/grpc\r\n", false),
    ("inNet(srcip, \"192.0.2.0/24\")", "/", "", true),
    ("inNet(srcip, \"192.0.3.0/24\")", "/", "", false),
    ("inNet(header(\"x-real-ip\"), \"2001:db8::/32\")", "/", "X-Real-IP: 2001:db8::7\r\n", true),
    ("inNet(header(\"x-real-ip\"), \"10.0.0.0/8\")", "/", "X-Real-IP: garbage\r\n", false),
    // Functions.
    ("match(url, \"^/a/.*\\.gif$\")", "/a/b.gif", "", true),
    ("match(header(\"user-agent\"), \"(?i)curl\")", "/", "User-Agent: CURL/8\r\n", true),
    ("contains(url, \"min\")", "/admin/x", "", true),
    ("prefix(url, \"/admin\")", "/admin/x", "", true),
    ("prefix(url, \"admin\")", "/admin/x", "", false),
    ("suffix(url, \"/x\")", "/admin/x", "", true),
    ("suffix(url, \"/a\")", "/a/admin/x", "", false),
    ("contains(url, \"\") && prefix(url, \"\") && suffix(url, \"\")", "/", "", true),
    ("strcmp(url, \"/b\") < 0", "/a", "", true),
    ("strcmp(url, \"/a\") == 0", "/a", "", true),
    ("strcmp(\"/b\", url) > 0", "/a", "", true),
    ("strcmp(header(\"x\"), \"a\") != 0", "/", "", false),
    // Numbers compare as numbers when both sides are numbers, otherwise as strings.
    ("header(\"x-n\") > 9", "/", "X-N: 10\r\n", true),
    ("header(\"x-n\") == 10", "/", "X-N: 10.0\r\n", true),
    ("header(\"x-n\") > \"9\"", "/", "X-N: 10\r\n", true),
    ("header(\"x-n\") < \"9\"", "/", "X-N: 1a\r\n", true),
    ("header(\"x-n\") > -1.5", "/", "X-N: -1.25\r\n", true),
    ("header(\"x-n\") == 99999999999999999999", "/", "X-N: 99999999999999999999\r\n", true),
    // Absent fields: every comparison false, even !=, and exists false.
    ("header(\"x-none\") != \"a\"", "/", "", false),
    ("header(\"x-none\") < 5", "/", "", false),
    ("!(header(\"x-none\") == \"a\")", "/", "", true),
    ("exists(header(\"x-none\"))", "/", "", false),
    ("match(header(\"x-none\"), \".*\")", "/", "", false),
    // Logic.
    ("url == \"/\" || url == \"/x\"", "/x", "", true),
    ("url == \"/\" && !(method == \"POST\")", "/", "", true),
];

#[test]
fn fields_functions_and_comparisons() {
    for (cond, target, headers, fires) in FIELD_CASES {
        let rs = compile(&format!("R: if ({cond}) {{ routeTo(web); }}"));
        let got = outcome(&rs, &get(target, headers));
        let want = if *fires { "R:web/Off" } else { "-:default" };
        assert_eq!(got, want, "{cond} on {target} {headers:?}");
    }
}

#[test]
fn actions_deny_drop_redirect_and_set_header() {
    let rs = compile(
        r#"
H1: if (true) { setHeader("X-Seen", "1"); }
D: if (prefix(path, "/private")) { deny(); }
D2: if (prefix(path, "/legal")) { deny(451); }
X: if (prefix(path, "/evil")) { drop(); }
H2: if (method == "GET") { setHeader("X-Get", "yes"); setHeader("X-Seen", "2"); }
R: if (path == "/old") { redirect(301, "https://new.example/"); }
S: if (match(url, "\.png$")) { routeTo(images, STICKY_IP); }
"#,
    );
    assert_eq!(outcome(&rs, &get("/private/x", "")), "D:deny 403+X-Seen=1");
    assert_eq!(outcome(&rs, &get("/legal", "")), "D2:deny 451+X-Seen=1");
    assert_eq!(outcome(&rs, &get("/evil", "")), "X:drop+X-Seen=1");
    assert_eq!(
        outcome(&rs, &get("/old", "")),
        "R:redirect 301 https://new.example/+X-Seen=1+X-Get=yes+X-Seen=2"
    );
    assert_eq!(outcome(&rs, &get("/a.png", "")), "S:images/Ip+X-Seen=1+X-Get=yes+X-Seen=2");
    assert_eq!(outcome(&rs, &get("/a.txt", "")), "-:default+X-Seen=1+X-Get=yes+X-Seen=2");
}

#[test]
fn goto_chains_skip_the_rules_between() {
    let rs = compile(
        r#"
A: if (prefix(path, "/api")) { goto C; }
B: if (true) { routeTo(web); }
C: if (header("x-v") == "2") { goto E; } else { setHeader("X-V", "1"); }
D: if (true) { routeTo(api); }
E: if (prefix(path, "/api/img")) { routeTo(images); }
F: if (prefix(path, "/api")) { routeTo(static); }
"#,
    );
    assert_eq!(outcome(&rs, &get("/x", "")), "B:web/Off");
    assert_eq!(outcome(&rs, &get("/api/x", "")), "D:api/Off+X-V=1");
    assert_eq!(outcome(&rs, &get("/api/img/1", "X-V: 2\r\n")), "E:images/Off");
    assert_eq!(outcome(&rs, &get("/api/x", "X-V: 2\r\n")), "F:static/Off");
}

#[test]
fn many_rules_on_one_field_pick_the_first_that_holds() {
    let mut src = String::new();
    for i in 0..500 {
        src.push_str(&format!("U{i}: if (match(url, \"^/u{i}/\")) {{ routeTo(web); }}\n"));
        src.push_str(&format!(
            "P{i}: if (prefix(path, \"/p{i}/\") && method == \"GET\") {{ routeTo(api); }}\n"
        ));
        src.push_str(&format!("H{i}: if (header(\"x-t\") == \"t{i}\" || header(\"x-t\") == \"alt{i}\") {{ routeTo(static); }}\n"));
    }
    let rs = compile(&src);
    assert_eq!(outcome(&rs, &get("/u7/x", "")), "U7:web/Off");
    assert_eq!(outcome(&rs, &get("/p499/x", "")), "P499:api/Off");
    assert_eq!(outcome(&rs, &get("/u1/x", "X-T: t0\r\n")), "H0:static/Off");
    assert_eq!(outcome(&rs, &get("/none", "X-T: alt321\r\n")), "H321:static/Off");
    assert_eq!(outcome(&rs, &get("/none", "")), "-:default");
}

fn form_post(body: &str) -> crate::OwnedRequest {
    request(&format!(
        "POST /f HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ))
}

#[test]
fn form_fields_wait_for_the_body_only_as_long_as_needed() {
    let rs = compile("F: if (form(\"plan\") == \"gold\") { routeTo(api); }\nG: if (true) { routeTo(web); }");
    let whole = form_post("user=a+b&plan=gold&pad=xxxxxxxx");
    assert_eq!(outcome(&rs, &whole), "F:api/Off");
    let at = |n: usize| outcome(&rs, &whole.with_body_prefix(n));
    assert_eq!(at(0), "more");
    assert_eq!(at(13), "more"); // "user=a+b&plan" — could still be "planet"
    assert_eq!(at(18), "more"); // "…&plan=gold" without '&': the value may go on
    assert_eq!(at(19), "F:api/Off");
    let other = form_post("plan=silver");
    assert_eq!(outcome(&rs, &other), "G:web/Off");
    // Not a form: absent, no waiting.
    let json = request("POST /f HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
    assert_eq!(outcome(&rs, &json.with_body_prefix(0)), "G:web/Off");
}

#[test]
fn head_rules_decide_without_the_body() {
    let rs = compile("A: if (prefix(path, \"/static\")) { routeTo(static); }\nB: if (xml.order/total > 10) { routeTo(api); }");
    assert!(rs.needs_body());
    let req =
        request("POST /static/x HTTP/1.1\r\nContent-Type: text/xml\r\nContent-Length: 100\r\n\r\n<order>");
    assert_eq!(outcome(&rs, &req), "A:static/Off");
    let req = request("POST /x HTTP/1.1\r\nContent-Type: text/xml\r\nContent-Length: 100\r\n\r\n<order>");
    assert_eq!(outcome(&rs, &req), "more");
    assert!(!compile("A: if (url == \"/\") { drop(); }").needs_body());
}

#[test]
fn a_false_conjunct_decides_even_when_another_is_unknown() {
    let rs = compile("A: if (xml.order/total > 10 && method == \"PUT\") { routeTo(api); }");
    let req = request("POST /x HTTP/1.1\r\nContent-Type: text/xml\r\nContent-Length: 100\r\n\r\n<order>");
    assert_eq!(outcome(&rs, &req), "-:default");
}

#[test]
fn bodylen_uses_content_length_or_the_complete_body() {
    let rs = compile("A: if (bodylen > 3) { routeTo(api); }");
    let cl = request("POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n12");
    assert_eq!(outcome(&rs, &cl), "A:api/Off");
    let chunked = request("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n3\r\ncde\r\n");
    assert_eq!(outcome(&rs, &chunked), "more");
    let done =
        request("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n");
    assert_eq!(outcome(&rs, &done), "A:api/Off");
}

#[test]
fn one_state_serves_many_requests_and_rule_sets() {
    let a = compile("A: if (url == \"/a\") { routeTo(web); }");
    let b =
        compile("B: if (match(header(\"h\"), \"x\")) { routeTo(api); }\nC: if (url == \"/a\") { deny(); }");
    let mut st = EvalState::new();
    for _ in 0..3 {
        let r = get("/a", "H: xx\r\n");
        assert_eq!(super::describe(&a, a.evaluate(&r, &mut st, None)), "A:web/Off");
        assert_eq!(super::describe(&b, b.evaluate(&r, &mut st, None)), "B:api/Off");
        let r = get("/a", "");
        assert_eq!(super::describe(&b, b.evaluate(&r, &mut st, None)), "C:deny 403");
    }
}

#[test]
fn trace_shows_rules_tests_values_and_outcome() {
    let rs = compile("A: if (match(url, \"gif$\") && header(\"x\") == \"1\") { routeTo(images); }\nB: if (true) { routeTo(web); }");
    let mut st = EvalState::new();
    let mut trace = Trace::new();
    let out = rs.evaluate(&get("/a.gif", ""), &mut st, Some(&mut trace));
    assert!(matches!(out, Outcome::Decided(_)));
    let text = trace.to_string();
    assert!(text.contains("A (line 1): condition false"), "{text}");
    assert!(text.contains("match(url, \"gif$\") → true  [url = \"/a.gif\"]"), "{text}");
    assert!(text.contains("header(\"x\") == \"1\" → false  [header(\"x\") absent]"), "{text}");
    assert!(text.contains("B (line 2): condition true\n    then { routeTo(web); }"), "{text}");
    assert!(text.contains("outcome: rule B routes to group 'web' (NONSTICKY)"), "{text}");
}

#[test]
fn pretty_printing_gives_canonical_source() {
    let src = "# comment\nA:if(((url==\"a\"))&&(exists(host)||true)){drop()}\n// x\nB: if (!(method == \"GET\" || method == \"HEAD\")) { deny(405); } else { setHeader(\"X\", \"q\\\"\"); }";
    let printed = compile(src).to_string();
    let want = "A: if (url == \"a\" && (exists(host) || true)) { drop(); }\nB: if (!(method == \"GET\" || method == \"HEAD\")) { deny(405); } else { setHeader(\"X\", \"q\\\"\"); }\n";
    assert_eq!(printed, want);
    assert_eq!(compile(&printed).to_string(), printed);
}

fn big_order_form(items: usize) -> crate::OwnedRequest {
    let mut doc = String::from("<order><id>7</id>");
    for i in 0..items {
        doc.push_str(&format!("<item n=\"{i}\"><sku>s{i}</sku></item>"));
    }
    doc.push_str("<total>900</total></order>");
    let enc: String = doc
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect();
    form_post(&format!("user=x&doc={enc}&tail=1"))
}

#[test]
fn large_form_documents_decide_from_a_prefix_when_they_can() {
    let req = big_order_form(3000); // about 150 KiB encoded
    assert!(req.body.len() > 100_000);
    let start = compile("A: if (xml.order/id == 7) { routeTo(api); }");
    assert_eq!(outcome(&start, &req), "A:api/Off");
    assert_eq!(outcome(&start, &req.with_body_prefix(3000)), "A:api/Off");
    let end = compile("A: if (xml.order/total == 900) { routeTo(api); }");
    assert_eq!(outcome(&end, &req), "A:api/Off");
    for cut in [1000, 40_000, req.body.len() - 40, req.body.len() - 24] {
        assert_eq!(outcome(&end, &req.with_body_prefix(cut)), "more", "cut at {cut}");
    }
    // `</total>` has arrived, the rest of the field has not: decided.
    assert_eq!(outcome(&end, &req.with_body_prefix(req.body.len() - 21)), "A:api/Off");
}

/// The worked examples of docs/rules.md behave as the text says.
#[test]
fn the_documented_examples_do_what_the_docs_say() {
    let groups = ["static", "api", "hsServers", "defaultServers", "images", "web"];
    let compile = |src: &str| {
        crate::RuleSet::compile(src, std::path::Path::new("doc.rules"), &groups).expect("compiles")
    };
    let firewall = compile(
        r#"
Bots:   if (match(header("User-Agent"), "(?i)(sqlmap|nikto)")) { drop(); }
Admin:  if (prefix(path, "/admin") && !inNet(srcip, "10.0.0.0/8")) { deny(); }
Legal:  if (arg("country") == "XX") { deny(451); }
Moved:  if (path == "/shop") { redirect(301, "https://shop.example.com/"); }
Tag:    if (true) { setHeader("X-Switched-By", "cswitch"); }
Static: if (ext == "gif" || ext == "png" || prefix(path, "/static/")) { routeTo(static); }
Api:    if (host == "api.example.com") { routeTo(api, STICKY_IP); }
"#,
    );
    assert!(firewall.warnings().is_empty());
    assert_eq!(outcome(&firewall, &get("/admin/x", "")), "Admin:deny 403");
    assert_eq!(outcome(&firewall, &get("/logo.png", "")), "Static:static/Off+X-Switched-By=cswitch");
    assert_eq!(outcome(&firewall, &get("/x", "User-Agent: SQLMap/1\r\n")), "Bots:drop");
    assert_eq!(outcome(&firewall, &get("/x?country=XX", "")), "Legal:deny 451");
    assert_eq!(outcome(&firewall, &get("/other", "")), "-:default+X-Switched-By=cswitch");
    let shop = compile(
        r#"
Vip:    if (xml.purchase/totalAmount > 50000 || strcmp(xml.purchase/customerName, "CCL") == 0) {
            routeTo(hsServers, STICKY_IP_PORT);
        }
Second: if (xml.purchase:2.totalAmount < 15000) { routeTo(defaultServers); }
"#,
    );
    let doc = "<purchase><customerName>CCL</customerName><totalAmount>52000</totalAmount></purchase>";
    let post = request(&format!(
        "POST /p HTTP/1.1\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\r\n{doc}",
        doc.len()
    ));
    assert_eq!(outcome(&shop, &post), "Vip:hsServers/IpPort");
    assert_eq!(
        outcome(&shop, &post.with_body_prefix(doc.find("<totalAmount>").unwrap_or(0))),
        "Vip:hsServers/IpPort"
    );
    let chain = compile(
        r#"
IsXml:  if (match(url, "xmlprocess\.pl")) { goto Value; }
Images: if (match(url, "\.(gif|png)$")) { routeTo(images); }
Plain:  if (true) { routeTo(web); }
Value:  if (xml.purchase/totalAmount > 5000) { routeTo(hsServers); } else { routeTo(defaultServers); }
"#,
    );
    assert!(chain.warnings().is_empty(), "{}", chain.warnings());
    assert_eq!(outcome(&chain, &get("/a.gif", "")), "Images:images/Off");
    assert_eq!(outcome(&chain, &get("/xmlprocess.pl", "")), "Value:defaultServers/Off");
}
