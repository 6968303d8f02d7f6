//! Every check error and warning, with its position and hint.

use std::path::Path;

use super::{compile, errors, GROUPS};
use crate::{RuleSet, Severity};

/// (source, expected "line:col: error: message" fragment).
const ERRORS: &[(&str, &str)] = &[
    // Unknown names, with suggestions.
    ("A: if (urll == \"x\") { drop(); }", "t.rules:1:8: error: unknown field 'urll' — did you mean 'url'?"),
    (
        "A: if (hedaer(\"X\") == \"x\") { drop(); }",
        "1:8: error: unknown function 'hedaer' — did you mean 'header'?",
    ),
    ("A: if (mach(url, \"x\")) { drop(); }", "1:8: error: unknown function 'mach' — did you mean 'match'?"),
    ("A: if (true) { rooteTo(web); }", "1:16: error: unknown action 'rooteTo' — did you mean 'routeTo'?"),
    ("A: if (true) { frobnicate(web); }", "1:16: error: unknown action 'frobnicate'\n"),
    ("A: if (true) { routeTo(wbe); }", "1:24: error: unknown group 'wbe' — did you mean 'web'?"),
    ("A: if (true) { routeTo(nothing_like_it); }", "error: unknown group 'nothing_like_it'\n"),
    (
        "A: if (true) { routeTo(web, STICKY_PI); }",
        "1:29: error: unknown stickiness 'STICKY_PI' — did you mean 'STICKY_IP'?",
    ),
    // Regexes.
    ("A: if (match(url, \"gif[\")) { drop(); }", "1:23: error: bad regex \"gif[\": unclosed character class"),
    ("A: if (match(url, \"(a\")) { drop(); }", "error: bad regex \"(a\": unclosed group"),
    // Gotos and labels.
    ("A: if (true) { goto A; }", "1:21: error: backward goto to 'A'"),
    ("A: if (true) { drop(); }\nB: if (true) { goto A; }", "2:21: error: backward goto to 'A'"),
    ("A: if (url == \"a\") { goto C; }\nB: if (true) { drop(); }", "1:27: error: goto names no rule 'C'"),
    (
        "A: if (url == \"a\") { goto Bb; }\nBB: if (true) { drop(); }",
        "goto names no rule 'Bb' — did you mean 'BB'?",
    ),
    ("A: if (url == \"a\") { drop(); }\nA: if (true) { drop(); }", "2:1: error: duplicate label 'A'"),
    // Arity and types.
    ("A: if (match(url)) { drop(); }", "1:8: error: match takes 2 arguments (a field and a regex), found 1"),
    ("A: if (exists()) { drop(); }", "error: exists takes 1 argument (a field), found 0"),
    ("A: if (match(\"abc\", \"b\")) { drop(); }", "1:14: error: the first argument of match must be a field"),
    (
        "A: if (contains(url, host)) { drop(); }",
        "1:22: error: the second argument of contains must be a string literal",
    ),
    ("A: if (header(\"\") == \"x\") { drop(); }", "the argument of header must be a non-empty string"),
    ("A: if (header(\"a b\") == \"x\") { drop(); }", "'a b' is not a valid header name"),
    ("A: if (url) { drop(); }", "1:8: error: 'url' is a value, not a condition"),
    ("A: if (strcmp(url, \"a\")) { drop(); }", "error: 'strcmp' returns a number, not a condition"),
    ("A: if (match(url, \"a\") == 1) { drop(); }", "error: 'match(…)' is a condition, not a value"),
    ("A: if ((url == \"a\") == \"b\") { drop(); }", "error: 'url == \"a\"' is a condition, not a value"),
    ("A: if (header == \"a\") { drop(); }", "error: 'header' needs a name"),
    ("A: if (exists == \"a\") { drop(); }", "error: 'exists' is a function"),
    (
        "A: if (strcmp(strcmp(url, \"a\"), \"b\") == 0) { drop(); }",
        "strcmp(…) cannot be an argument of strcmp",
    ),
    ("A: if (inNet(srcip, \"10.0.0.0/33\")) { drop(); }", "1:21: error: bad network \"10.0.0.0/33\""),
    ("A: if (inNet(srcip, \"ten\")) { drop(); }", "bad network \"ten\""),
    // Actions.
    ("A: if (true) { routeTo(); }", "1:16: error: routeTo takes 1 to 2 arguments, found 0"),
    ("A: if (true) { deny(200); }", "1:21: error: bad status '200'"),
    ("A: if (true) { redirect(200, \"/x\"); }", "error: bad status '200'"),
    ("A: if (true) { redirect(301, \"\"); }", "error: the redirect target is empty"),
    (
        "A: if (true) { redirect(301, \"/a\\r\\nSet-Cookie: x\"); }",
        "error: the redirect target contains a line break or NUL",
    ),
    ("A: if (true) { setHeader(\"X Bad\", \"v\"); }", "error: 'X Bad' is not a valid header name"),
    (
        "A: if (true) { setHeader(\"X-A\", \"v\\n\"); }",
        "error: the header value contains a line break or NUL",
    ),
    ("A: if (true) { drop(1); }", "error: drop takes 0 arguments, found 1"),
    // Syntax.
    ("A: if (url = \"a\") { drop(); }", "1:12: error: unexpected character '='"),
    ("A: if (url == \"a) { drop(); }", "1:15: error: unterminated string"),
    ("A: if url == \"a\" { drop(); }", "1:7: error: expected '(' after 'if', found 'url'"),
    ("A if (true) { drop(); }", "1:3: error: expected ':' after the rule label, found 'if'"),
    ("A: if (true) { drop() drop(); }", "1:23: error: expected ';' after the action, found 'drop'"),
    ("A: if (xml.a::b == 1) { drop(); }", "1:8: error: bad XML path 'xml.a::b'"),
    ("A: if (xml.a:0 == 1) { drop(); }", "bad XML path 'xml.a:0'"),
    ("A: if (xml.a/ == 1) { drop(); }", "bad XML path 'xml.a/'"),
    // JSON paths: the caret points into the path.
    (
        "A: if (json.a..b == 1) { drop(); }",
        "1:14: error: bad JSON path 'json.a..b': a key must follow '.', found '.'",
    ),
    (
        "A: if (json.a[x] == 1) { drop(); }",
        "1:14: error: bad JSON path 'json.a[x]': '[x]' is not an array index",
    ),
    (
        "A: if (json.a[-1] == 1) { drop(); }",
        "1:14: error: bad JSON path 'json.a[-1]': '[-1]' is not an array",
    ),
    ("A: if (json.a[1 == 1) { drop(); }", "1:14: error: bad JSON path 'json.a[1': '[' is not closed by ']'"),
    (
        "A: if (json.a[\"b c == 1) { drop(); }",
        "1:14: error: bad JSON path 'json.a[\"b c == 1) { drop(); }': the quoted key is not closed",
    ),
    (
        "A: if (json.a[\"b\"x] == 1) { drop(); }",
        "1:18: error: bad JSON path 'json.a[\"b\"x]': a quoted key must be followed by ']'",
    ),
    ("A: if (json.a]b == 1) { drop(); }", "1:14: error: bad JSON path 'json.a]b': unexpected ']'"),
    (
        "A: if (json.a[4294967296] == 1) { drop(); }",
        "1:15: error: bad JSON path 'json.a[4294967296]': index 4294967296 is too large",
    ),
    ("A: if (json. == 1) { drop(); }", "1:12: error: bad JSON path 'json.': a key must follow '.'"),
    ("A: if (json == 1) { drop(); }", "1:8: error: 'json' needs a path"),
    ("A: if (true) { routeTo(json.eu); }", "1:24: error: routeTo needs a group name"),
];

#[test]
fn every_check_error_is_reported_where_it_is() {
    for (src, want) in ERRORS {
        let text = errors(src);
        assert!(text.contains(want), "for {src:?}\nwant {want:?}\ngot:\n{text}");
        assert!(text.contains('^'), "no caret line:\n{text}");
    }
}

#[test]
fn hints_say_how_to_fix() {
    let text = errors("A: if (true) { routTo(web); }");
    assert!(text.contains("  hint: actions are routeTo, goto, deny, drop, redirect, setHeader"), "{text}");
    let text = errors("A: if (true) { routeTo(nope); }");
    assert!(text.contains("hint: groups are web, api, static, images, eu.web-1"), "{text}");
    let text = errors("A: if (true) { drop(); }\nA: if (true) { drop(); }");
    assert!(text.contains("hint: 'A' is first defined on line 1"), "{text}");
    let text = errors("A: if (json.a[x] == 1) { drop(); }");
    assert!(text.contains("json.order.items[0].sku; quote other keys: json[\"a b\"]"), "{text}");
    let text = errors("A: if (true) { routeTo(json.eu); }");
    assert!(text.contains("hint: quote a group named like a body path: routeTo(\"json.eu\")"), "{text}");
}

#[test]
fn all_errors_of_a_file_are_reported_at_once() {
    let src = "A: if (urll == \"a\") { routTo(web); }\nB: if (true { drop(); }\nC: if (match(url, \"[\")) { routeTo(wbe); }\n";
    let err = RuleSet::compile(src, Path::new("t.rules"), GROUPS).expect_err("errors");
    let lines: Vec<(u32, u32)> = err.iter().map(|d| (d.line, d.col)).collect();
    assert_eq!(lines, vec![(1, 8), (1, 23), (2, 13), (3, 20), (3, 35)], "{err}");
    assert!(err.to_string().ends_with("5 errors"), "{err}");
}

#[test]
fn nesting_is_capped_instead_of_overflowing_the_stack() {
    let deep = format!("A: if ({}url == \"a\"{}) {{ drop(); }}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(errors(&deep).contains("nested more than 64 deep"));
    let nots = format!("A: if ({}true) {{ drop(); }}", "!".repeat(100_000));
    assert!(errors(&nots).contains("nested more than 64 deep"));
}

#[test]
fn group_names_may_be_quoted_and_use_dots_and_dashes() {
    compile("A: if (true) { routeTo(\"eu.web-1\"); }");
    compile("A: if (true) { routeTo(eu.web-1, STICKY_IP); }");
}

fn warnings(src: &str) -> String {
    let rs = compile(src);
    assert!(rs.warnings().iter().all(|d| d.severity == Severity::Warning));
    rs.warnings().to_string()
}

#[test]
fn rules_after_an_unconditional_decision_can_never_fire() {
    let w = warnings("A: if (true) { routeTo(web); }\nB: if (url == \"x\") { drop(); }\n");
    assert!(w.contains("t.rules:2:1: warning: rule 'B' can never fire: no path reaches it"), "{w}");
    assert!(
        w.contains("hint: 'A' (line 1) has a condition that is always true and always ends evaluation"),
        "{w}"
    );
    assert!(w.ends_with("1 warning"), "{w}");
    // A goto target stays reachable; the rules jumped over do not.
    let w = warnings(
        "A: if (true) { goto C; }\nB: if (url == \"x\") { drop(); }\nC: if (url == \"y\") { drop(); }\n",
    );
    assert!(w.contains("rule 'B' can never fire") && !w.contains("rule 'C'"), "{w}");
    assert!(w.contains("always jumps past it (goto C)"), "{w}");
    // `if (false)` with an else is unconditional too.
    let w = warnings("A: if (false) { drop(); } else { drop(); }\nB: if (url == \"x\") { drop(); }\n");
    assert!(w.contains("rule 'B' can never fire"), "{w}");
}

#[test]
fn shadowed_rules_are_warned_about() {
    let w = warnings("A: if (url == \"/x\" && method == \"GET\") { routeTo(web); }\nB: if (url == \"/x\" && method == \"GET\") { routeTo(api); }\n");
    assert!(w.contains("2:1: warning: rule 'B' can never fire: it is shadowed by 'A'"), "{w}");
    let w = warnings("A: if (exists(cookie(\"s\"))) { deny(); }\nB: if (exists(cookie(\"s\"))) { drop(); } else { routeTo(api); }\n");
    assert!(w.contains("the then-branch of rule 'B' can never run"), "{w}");
    // Not shadowed: A only sets a header, or a goto can skip A.
    assert!(compile("A: if (url == \"a\") { setHeader(\"X\", \"1\"); }\nB: if (url == \"a\") { drop(); }")
        .warnings()
        .is_empty());
    let skip = "S: if (host == \"h\") { goto B; }\nA: if (url == \"a\") { drop(); }\nB: if (url == \"a\") { deny(); }";
    assert!(compile(skip).warnings().is_empty());
}

#[test]
fn actions_after_a_decision_are_warned_about() {
    let w = warnings("A: if (url == \"a\") { drop(); setHeader(\"X\", \"1\"); }");
    assert!(w.contains("1:30: warning: this action never runs"), "{w}");
}

#[test]
fn warnings_do_not_fail_and_errors_include_them() {
    let rs = compile("A: if (true) { drop(); }\nB: if (true) { drop(); }");
    assert_eq!(rs.warnings().warning_count(), 1);
    let err = errors("A: if (true) { drop(); }\nB: if (true) { routTo(web); }");
    assert!(err.ends_with("1 error"), "{err}");
}

#[test]
fn diagnostics_print_carets_under_the_offending_text() {
    let err = errors("A: if (true) {\n\tdeny(99);\n}");
    assert!(err.contains("t.rules:2:7: error: bad status '99'\n    \tdeny(99);\n    \t     ^^\n"), "{err}");
}
