//! JSON extraction cost by document size (1 KiB … 1 MiB) with the referenced member at
//! the end (the whole document is read: throughput), and at the start of a 1 MiB document
//! (the scan stops there); the same purchase list as `xml.rs`, as application/json.
#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use cswitch_rules::{EvalState, Outcome, OwnedRequest, RuleSet};

/// A purchase list of about `size` bytes (the XML bench's shape) ending in a summary.
fn document(size: usize) -> String {
    let mut doc = String::from("{\n  \"orders\": [\n");
    let mut i = 0;
    while doc.len() + 200 < size {
        if i > 0 {
            doc.push_str(",\n");
        }
        doc.push_str(&format!(
            "    {{\"customerName\": \"C{i}\", \"item\": {{\"productID\": {i}, \"unitPrice\": 5000, \
\"subTotal\": 50000}},\n     \"totalAmount\": 52000}}"
        ));
        i += 1;
    }
    doc.push_str("\n  ],\n  \"summary\": {\"total\": 123456}\n}\n");
    doc
}

fn post(body: &str) -> OwnedRequest {
    let raw = format!(
        "POST /x HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
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
    let rs = rule("json.summary.total");
    let mut g = c.benchmark_group("json_member_at_end");
    for kib in [1usize, 4, 16, 64, 256, 1024] {
        let req = post(&document(kib << 10));
        let mut st = EvalState::new();
        assert!(run(&rs, &req, &mut st));
        g.throughput(Throughput::Bytes(req.body.len() as u64));
        g.bench_with_input(BenchmarkId::new("application_json_kib", kib), &kib, |b, _| {
            b.iter(|| run(&rs, &req, &mut st))
        });
    }
    g.finish();
}

fn at_start(c: &mut Criterion) {
    let rs = rule("json.orders[0].totalAmount");
    let req = post(&document(1 << 20));
    let mut st = EvalState::new();
    assert!(run(&rs, &req, &mut st));
    c.bench_function("json_member_at_start_1mib", |b| b.iter(|| run(&rs, &req, &mut st)));
}

/// What reading the same 1 MiB document costs without rules, for scale: serde_json
/// building a `Value` of all of it.
fn reference(c: &mut Criterion) {
    let doc = document(1 << 20);
    let mut g = c.benchmark_group("json_reference_1mib");
    g.throughput(Throughput::Bytes(doc.len() as u64));
    g.bench_function("serde_json_value", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(doc.as_bytes())).unwrap())
    });
    g.finish();
}

criterion_group!(benches, at_end, at_start, reference);
criterion_main!(benches);
