//! XML extraction cost by document size (1 KiB … 1 MiB) with the referenced tag at the
//! end (the whole document is read: throughput), and with it at the start of a 1 MiB
//! document (the scan stops there), as text/xml and as an urlencoded form field.
#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use cswitch_rules::{EvalState, Outcome, OwnedRequest, RuleSet};

/// A purchase list of about `size` bytes (seed 000 §4.3 shape) ending in a summary.
fn document(size: usize) -> String {
    let mut doc = String::from("<?xml version=\"1.0\"?>\n<orders>\n");
    let mut i = 0;
    while doc.len() + 200 < size {
        doc.push_str(&format!(
            "  <purchase>\n    <customerName>C{i}</customerName>\n    <item><productID>{i}</productID>\
<unitPrice>5000</unitPrice><subTotal>50000</subTotal></item>\n    <totalAmount>52000</totalAmount>\n  </purchase>\n"
        ));
        i += 1;
    }
    doc.push_str("  <summary><total>123456</total></summary>\n</orders>\n");
    doc
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => (b as char).to_string(),
            b' ' => "+".into(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn post(content_type: &str, body: &str) -> OwnedRequest {
    let raw = format!(
        "POST /x HTTP/1.1\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    OwnedRequest::parse(raw.as_bytes(), "192.0.2.1:5000".parse().unwrap(), "198.51.100.1:80".parse().unwrap())
        .unwrap()
}

fn rule(path: &str) -> RuleSet {
    let src = format!("X: if ({path} > 5) {{ routeTo(api); }}");
    RuleSet::compile(&src, Path::new("bench.rules"), &["api"]).unwrap()
}

fn run(rs: &RuleSet, req: &OwnedRequest, st: &mut EvalState) -> bool {
    match rs.evaluate(black_box(req), st, None) {
        Outcome::Decided(d) => d.rule.is_some(),
        Outcome::NeedMore => false,
    }
}

fn at_end(c: &mut Criterion) {
    let rs = rule("xml.orders/summary/total");
    let mut g = c.benchmark_group("xml_tag_at_end");
    for kib in [1usize, 4, 16, 64, 256, 1024] {
        let req = post("text/xml", &document(kib << 10));
        let mut st = EvalState::new();
        assert!(run(&rs, &req, &mut st));
        g.throughput(Throughput::Bytes(req.body.len() as u64));
        g.bench_with_input(BenchmarkId::new("text_xml_kib", kib), &kib, |b, _| {
            b.iter(|| run(&rs, &req, &mut st))
        });
    }
    for kib in [1usize, 64, 1024] {
        let req =
            post("application/x-www-form-urlencoded", &format!("xml={}", urlencode(&document(kib << 10))));
        let mut st = EvalState::new();
        assert!(run(&rs, &req, &mut st));
        g.throughput(Throughput::Bytes(req.body.len() as u64));
        g.bench_with_input(BenchmarkId::new("form_kib", kib), &kib, |b, _| {
            b.iter(|| run(&rs, &req, &mut st))
        });
    }
    g.finish();
}

fn at_start(c: &mut Criterion) {
    let rs = rule("xml.orders/purchase/totalAmount");
    let doc = document(1 << 20);
    let mut g = c.benchmark_group("xml_tag_at_start_1mib");
    for (name, req) in [
        ("text_xml", post("text/xml", &doc)),
        ("form", post("application/x-www-form-urlencoded", &format!("xml={}", urlencode(&doc)))),
    ] {
        let mut st = EvalState::new();
        assert!(run(&rs, &req, &mut st));
        g.bench_function(name, |b| b.iter(|| run(&rs, &req, &mut st)));
    }
    g.finish();
}

/// What reading the same 1 MiB document costs without rules, for scale: a bare memchr
/// pass counting `<`, and quick-xml producing every event.
fn reference(c: &mut Criterion) {
    let doc = document(1 << 20);
    let mut g = c.benchmark_group("xml_reference_1mib");
    g.throughput(Throughput::Bytes(doc.len() as u64));
    g.bench_function("memchr_count_lt", |b| {
        b.iter(|| memchr::memchr_iter(b'<', black_box(doc.as_bytes())).count())
    });
    g.bench_function("quick_xml_all_events", |b| {
        b.iter(|| {
            let mut reader = quick_xml::Reader::from_reader(black_box(doc.as_bytes()));
            let mut n = 0usize;
            while !matches!(reader.read_event(), Ok(quick_xml::events::Event::Eof) | Err(_)) {
                n += 1;
            }
            n
        })
    });
    g.finish();
}

criterion_group!(benches, at_end, at_start, reference);
criterion_main!(benches);
