//! Property tests: printing and re-parsing gives the same tree; the indexed walk decides
//! exactly as the rule-by-rule walk; nothing panics on arbitrary text or requests; a body
//! prefix decides "need more" or what the whole body decides.

use std::path::Path;

use proptest::prelude::*;

use super::{outcome, request, GROUPS};
use crate::ast::{
    Action, Block, CmpOp, Expr, ExprKind, JsonPath, JsonStep, Name, Program, Rule, Step, XmlPath,
};
use crate::diag::{Reporter, Span};
use crate::{lexer, parser, EvalState, OwnedRequest, RuleSet};

fn parse(src: &str) -> Result<Program, String> {
    let mut rep = Reporter::new(src, Path::new("p"));
    let tokens = lexer::lex(src, &mut rep);
    let prog = parser::parse(&tokens, &mut rep);
    if rep.out.is_empty() {
        Ok(prog)
    } else {
        Err(rep.out.to_string())
    }
}

fn strip_expr(e: &mut Expr) {
    e.span = Span::default();
    match &mut e.kind {
        ExprKind::Call { name, args } => {
            name.span = Span::default();
            args.iter_mut().for_each(strip_expr);
        }
        ExprKind::Not(inner) => strip_expr(inner),
        ExprKind::And(items) | ExprKind::Or(items) => items.iter_mut().for_each(strip_expr),
        ExprKind::Cmp(_, l, r) => {
            strip_expr(l);
            strip_expr(r);
        }
        _ => {}
    }
}

fn strip_block(b: &mut Block) {
    b.span = Span::default();
    for a in &mut b.actions {
        match a {
            Action::Goto { target, span } => {
                target.span = Span::default();
                *span = Span::default();
            }
            Action::Call { name, args, span } => {
                name.span = Span::default();
                *span = Span::default();
                args.iter_mut().for_each(strip_expr);
            }
        }
    }
}

fn strip(p: &mut Program) {
    for r in &mut p.rules {
        r.label.span = Span::default();
        strip_expr(&mut r.cond);
        strip_block(&mut r.then);
        if let Some(e) = &mut r.els {
            strip_block(e);
        }
    }
}

const IDENTS: &[&str] =
    &["url", "host", "srcip", "a-b", "x.y", "_z", "R1", "foo9", "xml", "if", "else", "web"];
/// Labels and action names: no keywords (`else` after a block starts an else branch).
const LABELS: &[&str] = &["url", "a-b", "x.y", "_z", "R1", "foo9", "xml", "web"];

fn name() -> impl Strategy<Value = Name> {
    prop::sample::select(IDENTS).prop_map(|s| Name { text: s.into(), span: Span::default() })
}

fn label() -> impl Strategy<Value = Name> {
    prop::sample::select(LABELS).prop_map(|s| Name { text: s.into(), span: Span::default() })
}

fn expr(k: ExprKind) -> Expr {
    Expr { kind: k, span: Span::default() }
}

fn xml_path() -> impl Strategy<Value = XmlPath> {
    let step = ("[a-zA-Z_][a-zA-Z0-9_-]{0,5}(:[a-z]{1,3})?", prop::option::of(1u32..5))
        .prop_map(|(name, index)| Step { name, index });
    prop::collection::vec(step, 1..4).prop_map(|steps| XmlPath { steps })
}

fn json_path() -> impl Strategy<Value = JsonPath> {
    let step = prop_oneof![
        "[a-zA-Z0-9_$@-]{1,5}".prop_map(JsonStep::Key),
        "[a-z .\\[\\]\"\\\\\né]{0,5}".prop_map(JsonStep::Key),
        (0u32..100).prop_map(JsonStep::Index),
    ];
    prop::collection::vec(step, 1..4).prop_map(|steps| JsonPath { steps })
}

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        any::<bool>().prop_map(|b| expr(ExprKind::Bool(b))),
        "-?[0-9]{1,6}(\\.[0-9]{1,3})?".prop_map(|n| expr(ExprKind::Num(n))),
        any::<String>().prop_map(|s| expr(ExprKind::Str(s))),
        "[\"\\\\a\n\r\t]{0,6}".prop_map(|s| expr(ExprKind::Str(s))),
        name().prop_map(|n| expr(ExprKind::Ident(n.text))),
        xml_path().prop_map(|p| expr(ExprKind::Xml(p))),
        json_path().prop_map(|p| expr(ExprKind::Json(p))),
    ]
}

fn tree() -> impl Strategy<Value = Expr> {
    let ops = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];
    leaf().prop_recursive(5, 48, 4, move |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| expr(ExprKind::Not(Box::new(e)))),
            prop::collection::vec(inner.clone(), 2..4).prop_map(|v| expr(ExprKind::And(v))),
            prop::collection::vec(inner.clone(), 2..4).prop_map(|v| expr(ExprKind::Or(v))),
            (prop::sample::select(ops.to_vec()), inner.clone(), inner.clone())
                .prop_map(|(op, l, r)| expr(ExprKind::Cmp(op, Box::new(l), Box::new(r)))),
            (name(), prop::collection::vec(inner, 0..3))
                .prop_map(|(name, args)| expr(ExprKind::Call { name, args })),
        ]
    })
}

fn block() -> impl Strategy<Value = Block> {
    let action = prop_oneof![
        label().prop_map(|target| Action::Goto { target, span: Span::default() }),
        (label(), prop::collection::vec(tree(), 0..3)).prop_map(|(name, args)| Action::Call {
            name,
            args,
            span: Span::default()
        }),
    ];
    prop::collection::vec(action, 0..3).prop_map(|actions| Block { actions, span: Span::default() })
}

fn program() -> impl Strategy<Value = Program> {
    let rule = (label(), tree(), block(), prop::option::of(block()))
        .prop_map(|(label, cond, then, els)| Rule { label, cond, then, els });
    prop::collection::vec(rule, 0..5).prop_map(|rules| Program { rules })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn print_then_parse_gives_the_same_tree(prog in program()) {
        let printed = prog.to_string();
        let mut again = parse(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
        strip(&mut again);
        prop_assert_eq!(&again, &prog, "printed:\n{}", printed);
        prop_assert_eq!(again.to_string(), printed);
    }
}

/// Conditions the random rule sets are built from (all valid).
const CONDS: &[&str] = &[
    "match(url, \"a\")",
    "match(url, \"^/a/\")",
    "prefix(path, \"/a\")",
    "suffix(url, \"b\")",
    "contains(url, \"ab\")",
    "url == \"/a\"",
    "url == \"/ab\"",
    "header(\"x\") == \"1\"",
    "header(\"x\") > 1",
    "exists(header(\"x\"))",
    "method == \"GET\"",
    "!(url == \"/b\")",
    "strcmp(url, \"/a\") == 0",
    "xml.o/t > 5",
    "xml.o/n == \"k\"",
    "form(\"f\") == \"v\"",
    "json.o.t > 5",
    "json.o[\"n\"] == \"k\"",
    "exists(json.a[1])",
    "true",
    "false",
];

fn random_rules() -> impl Strategy<Value = String> {
    let cond = prop::collection::vec(prop::sample::select(CONDS), 1..4).prop_flat_map(|atoms| {
        (Just(atoms), any::<bool>()).prop_map(|(atoms, and)| atoms.join(if and { " && " } else { " || " }))
    });
    let rule = (cond, 0u8..6, 0usize..8, prop::option::of(0u8..6));
    prop::collection::vec(rule, 1..12).prop_map(|rules| {
        let n = rules.len();
        let mut src = String::new();
        for (i, (cond, then, target, els)) in rules.into_iter().enumerate() {
            let act = |k: u8| match k {
                0 => format!("routeTo({})", GROUPS[i % GROUPS.len()]),
                1 => "deny()".to_string(),
                2 => format!("setHeader(\"X-{i}\", \"v\")"),
                3 if i + 1 < n => format!("goto L{}", (i + 1 + target % (n - i - 1).max(1)).min(n - 1)),
                4 => "redirect(302, \"/r\")".to_string(),
                _ => "drop()".to_string(),
            };
            src.push_str(&format!("L{i}: if ({cond}) {{ {}; }}", act(then)));
            if let Some(e) = els {
                src.push_str(&format!(" else {{ {}; }}", act(e)));
            }
            src.push('\n');
        }
        src
    })
}

fn random_request() -> impl Strategy<Value = OwnedRequest> {
    let target = prop::sample::select(&["/a", "/ab", "/a/b", "/b", "/xab", "/a?b"][..]);
    let header = prop::option::of(prop::sample::select(&["1", "2", "0.5", "x"][..]));
    let body = prop::sample::select(
        &[
            "",
            "<o><t>9</t><n>k</n></o>",
            "<o><t>1</t></o>",
            "f=v&xml=%3Co%3E%3Ct%3E7%3C%2Ft%3E%3C%2Fo%3E",
            "f=w",
            r#"{"o": {"t": 9, "n": "k"}, "a": [0, 1]}"#,
            r#"{"o": {"t": 1e0}, "a": [0]}"#,
        ][..],
    );
    (target, header, body, any::<bool>(), 0usize..40).prop_map(|(t, h, body, get, cut)| {
        let ct = match body.as_bytes().first() {
            Some(b'<') => "text/xml",
            Some(b'{') => "application/json",
            _ => "application/x-www-form-urlencoded",
        };
        let h = h.map_or(String::new(), |v| format!("X: {v}\r\n"));
        let m = if get { "GET" } else { "POST" };
        let raw = format!(
            "{m} {t} HTTP/1.1\r\n{h}Content-Type: {ct}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        request(&raw).with_body_prefix(cut)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn the_index_never_changes_a_decision(src in random_rules(), req in random_request()) {
        let rs = RuleSet::compile(&src, Path::new("r"), GROUPS).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // `outcome` asserts that the indexed and the traced walk agree.
        let got = outcome(&rs, &req);
        if req.body_complete {
            prop_assert_ne!(got.as_str(), "more", "a complete body must decide");
        }
    }

    #[test]
    fn a_body_prefix_decides_need_more_or_the_whole_body_decision(
        src in random_rules(),
        req in random_request(),
        cut in 0usize..40,
    ) {
        let rs = RuleSet::compile(&src, Path::new("r"), GROUPS).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let whole = outcome(&rs, &req);
        let part = outcome(&rs, &req.with_body_prefix(cut));
        prop_assert!(part == "more" || part == whole, "prefix {} decided {} but the body decides {}", cut, part, whole);
    }

    #[test]
    fn compiling_arbitrary_text_never_panics(src in any::<String>()) {
        let _ = RuleSet::compile(&src, Path::new("f"), GROUPS);
    }

    #[test]
    fn compiling_token_soup_never_panics(src in "([A-Za-z]{1,3}|xml\\.[a-z:/.0-9]{0,4}|json[.a-z0-9\\[\\]\"\\\\]{0,6}|\"[a-z\\\\\"]{0,3}\"?|[0-9.-]{1,3}|[(){};:,!=<>&| \n#/]){0,40}") {
        if let Ok(rs) = RuleSet::compile(&src, Path::new("f"), GROUPS) {
            let mut st = EvalState::new();
            let _ = rs.evaluate(&request("GET / HTTP/1.1\r\n\r\n"), &mut st, None);
        }
    }

    #[test]
    fn arbitrary_requests_never_panic(raw in prop::collection::vec(any::<u8>(), 0..400), body in prop::collection::vec(any::<u8>(), 0..200)) {
        let rs = all_fields();
        let src = super::addr("[2001:db8::1]:1");
        for ct in ["text/xml", "application/x-www-form-urlencoded", "application/json"] {
            let mut framed = b"POST /a?b=%zz&c HTTP/1.1\r\nContent-Type: ".to_vec();
            framed.extend_from_slice(ct.as_bytes());
            framed.extend_from_slice(b"\r\n\r\n");
            let mut req = OwnedRequest::parse(&framed, src, src).map_err(|e| TestCaseError::fail(e.to_string()))?;
            req.body.clone_from(&body);
            for complete in [false, true] {
                req.body_complete = complete;
                let mut st = EvalState::new();
                let _ = rs.evaluate(&req, &mut st, Some(&mut crate::Trace::new()));
            }
        }
        if let Ok(req) = OwnedRequest::parse(&raw, src, src) {
            let mut st = EvalState::new();
            let _ = rs.evaluate(&req, &mut st, None);
        }
    }
}

/// A rule set reading every field and using every function.
fn all_fields() -> RuleSet {
    let src = r#"
A: if (exists(srcip) && srcport > 0 && dstip != "x" && dstport < 1 && method == "M" && ext == "e") { drop(); }
B: if (match(url, "a|b") || contains(path, "q") || prefix(query, "x") || suffix(host, "y") || version > "H") { drop(); }
C: if (bodylen > 100 && header("h") <= "z" && cookie("c") == "1" && arg("b") == "2" && form("f") >= "3") { drop(); }
D: if (xml.a/b:2/c > 1 || strcmp(xml.a, "z") < 0 || inNet(header("ip"), "10.0.0.0/8") || form("g") == "h") { drop(); }
E: if (xml.x:3 == xml.y || exists(xml.p:q/r)) { drop(); }
F: if (json.a[2].b > 1 || json["k y"] == json.z || exists(json[0]) || match(json.s, "x")) { drop(); }
"#;
    match RuleSet::compile(src, Path::new("all"), GROUPS) {
        Ok(rs) => rs,
        Err(e) => panic!("{e}"),
    }
}

proptest! {
    #[test]
    fn bitsets_find_and_clear_like_a_bool_vector(
        len in 1usize..9000,
        ones in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
        from in any::<prop::sample::Index>(),
        clear in (any::<prop::sample::Index>(), any::<prop::sample::Index>()),
    ) {
        let mut cand = crate::bits::Candidates::new(len);
        let mut plain = vec![0u64; len.div_ceil(64)];
        let mut naive = vec![false; len];
        for one in &ones {
            let i = one.index(len);
            cand.set(i);
            crate::bits::set(&mut plain, i);
            naive[i] = true;
        }
        let from = from.index(len);
        let want = (from..len).find(|&i| naive[i]);
        prop_assert_eq!(cand.next_set(from), want);
        prop_assert_eq!(crate::bits::next_set(&plain, from), want);
        let below = (from..len.min(from + 100)).find(|&i| naive[i]);
        prop_assert_eq!(crate::bits::next_set_below(&plain, from, len.min(from + 100)), below);
        let (a, b) = (clear.0.index(len + 1), clear.1.index(len + 1));
        let (a, b) = (a.min(b), a.max(b));
        crate::bits::clear_range(&mut plain, a, b);
        for (i, bit) in naive.iter().enumerate() {
            prop_assert_eq!(crate::bits::get(&plain, i), *bit && !(a..b).contains(&i), "bit {}", i);
        }
    }
}

/// Patterns for the regex-set test: literal, anchored, classes, alternation, case-folding,
/// and Unicode word boundaries (which send the lazy DFA to its fallback on non-ASCII).
const PATTERNS: &[&str] = &[
    "a",
    "^/a",
    "b$",
    "a.b",
    "[0-9]+",
    "(?i)CURL",
    "gif|png",
    r"\.gif$",
    r"\bword\b",
    "é",
    "^$",
    "x*",
    r"(?-u:\xff)",
];

proptest! {
    #[test]
    fn regex_sets_report_exactly_the_matching_patterns(
        picked in prop::collection::btree_set(0..PATTERNS.len(), 1..PATTERNS.len()),
        hay in prop::collection::vec(prop::sample::select(&[b'a', b'b', b'/', b'.', b'g', b'i', b'f', b'1', b' ', 0xc3, 0xa9, 0xff, b'w', b'o', b'r', b'd'][..]), 0..24),
    ) {
        let patterns: Vec<&str> = picked.iter().map(|&i| PATTERNS[i]).collect();
        let set = crate::regexset::RegexSet::new(&patterns).map_err(TestCaseError::fail)?;
        let mut scratch = set.scratch();
        let mut got = vec![false; patterns.len()];
        set.matches(&mut scratch, &hay, |p| got[p] = true);
        let syntax = crate::check::regex_syntax_config();
        for (p, pattern) in patterns.iter().enumerate() {
            let one = regex_automata::meta::Regex::builder().syntax(syntax).build(pattern).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(got[p], one.is_match(&hay[..]), "pattern {:?} on {:?}", pattern, hay);
        }
    }
}
