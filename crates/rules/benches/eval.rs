//! Evaluation cost per request as the rule count grows (1 … 10,000 rules): url regexes,
//! path prefixes, header equalities and contains/regex alternatives, plus one XML numeric
//! rule at the end that decides. The request matches none of the others, so every rule
//! has to be ruled out — the paper's Fig. 6a worst case.
#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use cswitch_rules::{EvalState, Outcome, OwnedRequest, RuleSet};

const GROUPS: &[&str] = &["web", "api", "static", "images"];

pub fn rules(n: usize) -> String {
    let mut src = String::new();
    for i in 0..n.saturating_sub(1) {
        let rule = match i % 4 {
            0 => format!("U{i}: if (match(url, \"^/app{i}/.*\\.(gif|png)$\")) {{ routeTo(images); }}\n"),
            1 => format!("P{i}: if (prefix(path, \"/svc{i}/\") && method == \"GET\") {{ routeTo(api); }}\n"),
            2 => format!("H{i}: if (header(\"x-tenant\") == \"tenant{i}\") {{ routeTo(web, STICKY_IP); }}\n"),
            _ => format!(
                "C{i}: if (contains(url, \"/q{i}/\") || match(header(\"user-agent\"), \"bot{i}$\")) {{ routeTo(static); }}\n"
            ),
        };
        src.push_str(&rule);
    }
    src.push_str("X: if (xml.order/total > 1000) { routeTo(api); }\n");
    src
}

pub fn request() -> OwnedRequest {
    request_to("/shop/cart/checkout?id=7&step=2")
}

fn request_to(target: &str) -> OwnedRequest {
    let body = "<order><id>17</id><customer>CCL</customer><total>1500</total></order>";
    let raw = format!(
        "POST {target} HTTP/1.1\r\nHost: shop.example\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n\
X-Tenant: nobody\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    OwnedRequest::parse(raw.as_bytes(), "192.0.2.1:5000".parse().unwrap(), "198.51.100.1:80".parse().unwrap())
        .unwrap()
}

fn eval(c: &mut Criterion) {
    let req = request();
    let mut g = c.benchmark_group("eval");
    for n in [1usize, 10, 100, 1_000, 10_000] {
        let rs = RuleSet::compile(&rules(n), Path::new("bench.rules"), GROUPS).unwrap();
        let mut st = EvalState::new();
        match rs.evaluate(&req, &mut st, None) {
            Outcome::Decided(d) => assert_eq!(d.rule.unwrap().1, "X"),
            Outcome::NeedMore => panic!("need more"),
        }
        g.bench_with_input(BenchmarkId::new("rules", n), &n, |b, _| {
            b.iter(|| matches!(rs.evaluate(black_box(&req), &mut st, None), Outcome::Decided(_)))
        });
    }
    g.finish();
}

/// 1,024 distinct targets, half of them matching one of the url regexes somewhere in
/// the list: the regex sets see varied input, as with real traffic.
fn mixed(c: &mut Criterion) {
    let mut g = c.benchmark_group("eval_mixed_traffic");
    for n in [10usize, 10_000] {
        let rs = RuleSet::compile(&rules(n), Path::new("bench.rules"), GROUPS).unwrap();
        let reqs: Vec<OwnedRequest> = (0..1024u64)
            .map(|i| {
                let x = i.wrapping_mul(2_654_435_761) % 100_000;
                let ext = if i % 2 == 0 { "gif" } else { "jpg" };
                request_to(&format!("/app{}/img/{x}.{ext}", 4 * (x % (n as u64 / 4).max(1))))
            })
            .collect();
        let mut st = EvalState::new();
        let mut i = 0;
        g.bench_with_input(BenchmarkId::new("rules", n), &n, |b, _| {
            b.iter(|| {
                i = (i + 1) % reqs.len();
                matches!(rs.evaluate(black_box(&reqs[i]), &mut st, None), Outcome::Decided(_))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, eval, mixed);
criterion_main!(benches);
