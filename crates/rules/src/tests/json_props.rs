//! The JSON path scan against serde_json: random documents (serde_json values written with
//! random spacing and random escapes), random paths; every path's value over the whole
//! document is what serde_json's own lookup (`Value::get`) finds, and every prefix of the
//! document decides "pending" or that same value. Mangled documents never panic and keep
//! the prefix property.

use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::ast::{JsonPath, JsonStep};
use crate::json::{JsonPlan, JsonScratch};
use crate::pathstate::PathState;

const KEYS: &[&str] = &["a", "b", "c", "é", "a b", "", "\"q\""];

fn string() -> impl Strategy<Value = String> {
    "[a-c \"\\\\/\u{0}-\u{1f}é€😀\u{7f}]{0,6}"
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        (-1000i32..1000, 0u32..4).prop_map(|(m, e)| Value::from(f64::from(m) / 10f64.powi(e as i32))),
        string().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|members| {
                Value::Object(members.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<Map<_, _>>())
            }),
        ]
    })
}

fn paths() -> impl Strategy<Value = Vec<JsonPath>> {
    let step = prop_oneof![
        prop::sample::select(KEYS).prop_map(|k| JsonStep::Key(k.to_string())),
        (0u32..4).prop_map(JsonStep::Index),
    ];
    prop::collection::vec(prop::collection::vec(step, 1..5), 1..5).prop_map(|all| {
        let mut distinct: Vec<JsonPath> = Vec::new();
        for steps in all {
            let p = JsonPath { steps };
            if !distinct.contains(&p) {
                distinct.push(p); // the checker interns paths: they are distinct
            }
        }
        distinct
    })
}

/// Writes `v` as JSON, `style` choosing spacing and how each character is escaped.
struct Writer<'a> {
    style: &'a [u8],
    at: usize,
    out: String,
}

impl Writer<'_> {
    fn pick(&mut self, n: u8) -> u8 {
        let b = self.style.get(self.at % self.style.len().max(1)).copied().unwrap_or(0);
        self.at += 1;
        b % n
    }

    fn space(&mut self) {
        let s = ["", "", " ", "\n  ", "\t\r\n"][self.pick(5) as usize];
        self.out.push_str(s);
    }

    fn value(&mut self, v: &Value) {
        self.space();
        match v {
            Value::String(s) => self.string(s),
            Value::Array(items) => {
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    self.out.push_str(if i > 0 { "," } else { "" });
                    self.value(item);
                }
                self.space();
                self.out.push(']');
            }
            Value::Object(members) => {
                self.out.push('{');
                for (i, (k, item)) in members.iter().enumerate() {
                    self.out.push_str(if i > 0 { "," } else { "" });
                    self.space();
                    self.string(k);
                    self.space();
                    self.out.push(':');
                    self.value(item);
                }
                self.space();
                self.out.push('}');
            }
            scalar => self.out.push_str(&scalar.to_string()),
        }
        self.space();
    }

    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            let short = match c {
                '"' => Some("\\\""),
                '\\' => Some("\\\\"),
                '/' => Some("\\/"),
                '\n' => Some("\\n"),
                '\t' => Some("\\t"),
                '\u{8}' => Some("\\b"),
                _ => None,
            };
            let must_escape = c < ' ' || c == '"' || c == '\\';
            match (self.pick(3), short) {
                (0, _) if !must_escape => self.out.push(c),
                (1, Some(short)) => self.out.push_str(short),
                _ => {
                    for unit in c.encode_utf16(&mut [0; 2]) {
                        self.out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
            }
        }
        self.out.push('"');
    }
}

fn lookup<'v>(doc: &'v Value, path: &JsonPath) -> Option<&'v Value> {
    path.steps.iter().try_fold(doc, |v, step| match step {
        JsonStep::Key(k) => v.get(k.as_str()),
        JsonStep::Index(i) => v.get(*i as usize),
    })
}

/// Whether the scan's value is serde_json's: a string's text; for anything else, JSON text
/// that serde_json reads as that value.
fn same(ours: &[u8], theirs: &Value) -> bool {
    match theirs {
        Value::String(s) => ours == s.as_bytes(),
        other => serde_json::from_slice::<Value>(ours).ok().as_ref() == Some(other),
    }
}

/// (state, value) per path.
fn scan(plan: &JsonPlan, n: usize, doc: &[u8], complete: bool) -> Vec<(PathState, Vec<u8>)> {
    let mut s = JsonScratch::default();
    s.scan(plan, doc, complete);
    (0..n).map(|i| (s.states[i], s.values[i].clone())).collect()
}

fn consistent(part: &[(PathState, Vec<u8>)], whole: &[(PathState, Vec<u8>)]) -> bool {
    part.iter().zip(whole).all(|(p, w)| p.0 == PathState::Pending || p == w)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn the_scan_agrees_with_serde_json_whole_and_cut(
        doc in value(),
        paths in paths(),
        style in prop::collection::vec(any::<u8>(), 1..64),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 3),
    ) {
        let mut w = Writer { style: &style, at: 0, out: String::new() };
        w.value(&doc);
        let text = w.out;
        // The reference is serde_json's reading of the text (it may round a float
        // differently from the value written).
        let doc: Value = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        let plan = JsonPlan::new(&paths);
        let whole = scan(&plan, paths.len(), text.as_bytes(), true);
        for (path, (state, ours)) in paths.iter().zip(&whole) {
            match lookup(&doc, path) {
                None => prop_assert_eq!(*state, PathState::Absent, "{} in {}", path, text),
                Some(theirs) => {
                    prop_assert_eq!(*state, PathState::Found, "{} in {}", path, text);
                    prop_assert!(same(ours, theirs), "{} in {}: {:?} vs {}", path, text, String::from_utf8_lossy(ours), theirs);
                }
            }
        }
        for cut in cuts {
            let cut = cut.index(text.len() + 1);
            let part = scan(&plan, paths.len(), &text.as_bytes()[..cut], false);
            prop_assert!(consistent(&part, &whole), "prefix {} of {}: {:?} vs {:?}", cut, text, part, whole);
        }
    }

    #[test]
    fn mangled_documents_scan_without_panicking_and_prefixes_agree(
        doc in value(),
        paths in paths(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(&b"{}[]\",:\\ u0e-1tn\x01"[..])), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut text = serde_json::to_vec(&doc).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (at, byte) in edits {
            let i = at.index(text.len());
            text[i] = byte;
        }
        let plan = JsonPlan::new(&paths);
        let whole = scan(&plan, paths.len(), &text, true);
        prop_assert!(whole.iter().all(|(s, _)| *s != PathState::Pending));
        let part = scan(&plan, paths.len(), &text[..cut.index(text.len() + 1)], false);
        prop_assert!(consistent(&part, &whole), "{:?}: {:?} vs {:?}", String::from_utf8_lossy(&text), part, whole);
    }

    #[test]
    fn any_bytes_scan_without_panicking(doc in prop::collection::vec(any::<u8>(), 0..300), paths in paths()) {
        let plan = JsonPlan::new(&paths);
        for cut in [doc.len() / 3, doc.len()] {
            scan(&plan, paths.len(), &doc[..cut], cut == doc.len());
        }
    }
}
