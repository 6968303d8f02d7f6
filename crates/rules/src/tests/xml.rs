//! XML path extraction details.

use crate::ast::{Step, XmlPath};
use crate::pathstate::PathState;
use crate::xml::{XmlPlan, XmlScratch};

fn path(text: &str) -> XmlPath {
    let steps = text
        .split('/')
        .map(|s| match s.split_once('#') {
            Some((n, i)) => Step { name: n.into(), index: Some(i.parse().unwrap_or(1)) },
            None => Step { name: s.into(), index: None },
        })
        .collect();
    XmlPath { steps }
}

/// Scans `doc` for `paths` (steps split by `/`, `name#N` for an index); returns each
/// value, "absent" or "pending".
fn scan(doc: &str, complete: bool, paths: &[&str]) -> Vec<String> {
    let paths: Vec<XmlPath> = paths.iter().map(|p| path(p)).collect();
    let plan = XmlPlan::new(&paths);
    let mut s = XmlScratch::default();
    s.scan(&plan, doc.as_bytes(), complete);
    (0..paths.len())
        .map(|i| match s.states[i] {
            PathState::Found => String::from_utf8_lossy(&s.values[i]).into_owned(),
            PathState::Absent => "absent".into(),
            PathState::Pending => "pending".into(),
        })
        .collect()
}

#[test]
fn values_are_trimmed_text_with_entities_and_cdata() {
    let doc = "<?xml version=\"1.0\"?><!-- c --><a>\n  <b> x &amp; y </b><c><![CDATA[<raw>]]></c><d>1<e>2</e>3</d><f/></a>";
    assert_eq!(
        scan(doc, true, &["a/b", "a/c", "a/d", "a/f", "a/g"]),
        ["x & y", "<raw>", "123", "", "absent"]
    );
}

#[test]
fn indexes_count_same_named_siblings() {
    let doc = "<p><i>1</i><j>x</j><i>2</i><i><s>3</s></i></p><p><i>4</i></p><q/>";
    let got = scan(doc, true, &["p/i", "p/i#2", "p/i#3/s", "p#2/i", "p#3/i", "q", "p/i#4"]);
    assert_eq!(got, ["1", "2", "3", "4", "absent", "", "absent"]);
}

#[test]
fn nested_same_names_and_namespaces() {
    let doc = "<s:Env><s:Body><a><a>in</a></a></s:Body></s:Env>";
    assert_eq!(scan(doc, true, &["s:Env/s:Body/a/a", "s:Env/s:Body/a"]), ["in", "in"]);
}

#[test]
fn a_path_is_absent_once_its_parent_closes_even_mid_body() {
    let doc = "<order><id>7</id></order><order><total>";
    assert_eq!(scan(doc, false, &["order/total", "order/id", "order#2/total"]), ["absent", "7", "pending"]);
    assert_eq!(scan(doc, true, &["order#2/total"]), ["absent"]);
}

#[test]
fn partial_values_are_never_committed() {
    let doc = "<a><b>520";
    assert_eq!(scan(doc, false, &["a/b"]), ["pending"]);
    assert_eq!(scan("<a><b>52000</b", false, &["a/b"]), ["pending"]);
    assert_eq!(scan("<a><b>52000</b>", false, &["a/b"]), ["52000"]);
}

#[test]
fn broken_documents_yield_absent_not_errors() {
    assert_eq!(scan("<a><b>1</b><<<>>>", true, &["a/b", "a/c"]), ["1", "absent"]);
    assert_eq!(scan("not xml at all", true, &["a"]), ["absent"]);
    assert_eq!(scan("</x></y><a>1</a>", true, &["a"]), ["1"]);
    assert_eq!(scan("<a>&bogus;</a>", true, &["a"]), ["&bogus;"]);
}

#[test]
fn scanning_stops_once_every_path_is_resolved() {
    // Garbage after the resolved paths is never read, so it cannot matter.
    let doc = "<a><b>1</b></a><<<!-- unterminated";
    assert_eq!(scan(doc, false, &["a/b"]), ["1"]);
}

mod props {
    use proptest::prelude::*;
    use quick_xml::events::Event;

    use super::path;
    use crate::ast::XmlPath;
    use crate::pathstate::PathState;
    use crate::xml::{XmlPlan, XmlScratch};

    const NAMES: &[&str] = &["a", "b", "c", "ns:d"];

    /// Well-formed element trees with the markup the reader must step over.
    fn element() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            "[a-z0-9 ]{0,6}".prop_map(|t| t),
            Just("<!-- a < b > c -->".to_string()),
            Just("<![CDATA[ <x> ]]>".to_string()),
            Just("<?pi a > b ?>".to_string()),
            Just("&amp;&lt;&#65;".to_string()),
            (prop::sample::select(NAMES), any::<bool>()).prop_map(|(n, q)| if q {
                format!("<{n} k=\"v > w\"/>")
            } else {
                format!("<{n}/>")
            }),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            (prop::sample::select(NAMES), prop::collection::vec(inner, 0..5), any::<bool>()).prop_map(
                |(n, kids, attr)| {
                    let attr = if attr { " x='>' y=\"/<\"" } else { "" };
                    format!("<{n}{attr}>{}</{n}>", kids.concat())
                },
            )
        })
    }

    fn document() -> impl Strategy<Value = String> {
        prop::collection::vec(element(), 1..4)
            .prop_map(|roots| format!("<?xml version=\"1.0\"?>\n{}", roots.join("\n")))
    }

    fn paths() -> impl Strategy<Value = Vec<String>> {
        let step = (prop::sample::select(NAMES), 1u32..3).prop_map(|(n, i)| format!("{n}#{i}"));
        // Distinct, as the checker interns them.
        prop::collection::btree_set(prop::collection::vec(step, 1..4).prop_map(|s| s.join("/")), 1..4)
            .prop_map(|set| set.into_iter().collect())
    }

    struct El {
        name: Vec<u8>,
        children: Vec<usize>,
        text: Vec<u8>,
    }

    /// The paths resolved by their definition over quick-xml's reading of the document.
    fn oracle(doc: &str, paths: &[XmlPath]) -> Vec<Option<Vec<u8>>> {
        let (mut els, mut roots, mut open) = (Vec::<El>::new(), Vec::new(), Vec::<usize>::new());
        let mut reader = quick_xml::Reader::from_str(doc);
        loop {
            let (name, push, text) = match reader.read_event() {
                Ok(Event::Start(e)) => (Some(e.name().as_ref().to_vec()), true, None),
                Ok(Event::Empty(e)) => (Some(e.name().as_ref().to_vec()), false, None),
                Ok(Event::End(_)) => {
                    open.pop();
                    continue;
                }
                Ok(Event::Text(t)) => {
                    (None, false, Some(t.unescape().map(|c| c.into_owned().into_bytes()).unwrap_or_default()))
                }
                Ok(Event::CData(c)) => (None, false, Some(c.to_vec())),
                Ok(Event::Eof) | Err(_) => break,
                Ok(_) => continue,
            };
            if let Some(text) = text {
                open.iter().for_each(|&o| els[o].text.extend_from_slice(&text));
            }
            if let Some(name) = name {
                let id = els.len();
                els.push(El { name, children: Vec::new(), text: Vec::new() });
                match open.last() {
                    Some(&p) => els[p].children.push(id),
                    None => roots.push(id),
                }
                if push {
                    open.push(id);
                }
            }
        }
        let resolve = |p: &XmlPath| {
            let mut level = &roots;
            let mut chosen = None;
            for step in &p.steps {
                let n = step.index.unwrap_or(1) as usize;
                let id = *level.iter().filter(|&&c| els[c].name == step.name.as_bytes()).nth(n - 1)?;
                chosen = Some(id);
                level = &els[id].children;
            }
            let t = &els[chosen?].text;
            let start = t.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(t.len());
            let end = t.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
            Some(t[start..end].to_vec())
        };
        paths.iter().map(|p| Some(resolve(p).unwrap_or_else(|| b"<absent>".to_vec()))).collect()
    }

    fn results(s: &XmlScratch, n: usize) -> Vec<Option<Vec<u8>>> {
        (0..n)
            .map(|i| match s.states[i] {
                PathState::Found => Some(s.values[i].clone()),
                PathState::Absent => Some(b"<absent>".to_vec()),
                PathState::Pending => None,
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn the_scan_agrees_with_quick_xml_and_prefixes_with_the_whole(doc in document(), paths in paths(), cut in 0usize..400) {
            let parsed: Vec<_> = paths.iter().map(|p| path(p)).collect();
            let plan = XmlPlan::new(&parsed);
            let mut scan = XmlScratch::default();
            scan.scan(&plan, doc.as_bytes(), true);
            let whole = results(&scan, parsed.len());
            prop_assert_eq!(&whole, &oracle(&doc, &parsed), "doc {}", doc);
            let cut = cut.min(doc.len());
            scan.scan(&plan, &doc.as_bytes()[..cut], false);
            for (p, w) in results(&scan, parsed.len()).iter().zip(&whole) {
                prop_assert!(p.is_none() || p == w, "prefix {} of {}: {:?} vs {:?}", cut, doc, p, w);
            }
        }

        #[test]
        fn any_bytes_scan_without_panicking(doc in prop::collection::vec(any::<u8>(), 0..300), paths in paths()) {
            let parsed: Vec<_> = paths.iter().map(|p| path(p)).collect();
            let plan = XmlPlan::new(&parsed);
            let mut scan = XmlScratch::default();
            for cut in [doc.len() / 3, doc.len()] {
                scan.scan(&plan, &doc[..cut], cut == doc.len());
            }
        }
    }
}
