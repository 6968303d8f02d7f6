//! Cost of one `pick` for every scheduler kind: 16 servers (`srv01`..`srv16`, weights 1 to
//! 4, varied loads, the first four at their maxconn so `first` has to look past them),
//! keys cycling through 1024 URL paths so that hashing schedulers see varied keys.
//!
//! Run one family with a filter, e.g.
//! `cargo bench -p cswitch-balance --bench pick -- 'pick/(rr|wrr|lc)$'`.

// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use cswitch_balance::{Candidate, Member, Params, Scheduler, SchedulerKind};

const SERVERS: usize = 16;
const KEYS: usize = 1024;
const MAXCONN: u32 = 32;

/// Request paths of a web site's usual mix, the same on every run (a fixed LCG).
fn paths() -> Vec<String> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..KEYS)
        .map(|i| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let n = (x >> 33) % 100_000;
            match i % 8 {
                0..=2 => format!("/f/{n}.gif"),
                3 => format!("/img/{}/{n}.jpg", n % 97),
                4 => format!("/docs/{}/index.html", n % 500),
                5 => format!("/cgi-bin/search.cgi?q={n}"),
                6 => format!("/download/pkg-{n}.tar.gz"),
                _ => format!("/api/v1/items/{n}"),
            }
        })
        .collect()
}

fn weight(i: usize) -> u32 {
    1 + (i % 4) as u32
}

/// The group as `pick` sees it: all usable, the first four full, the rest loaded unevenly.
fn candidates() -> Vec<Candidate> {
    (0..SERVERS)
        .map(|i| Candidate {
            weight: weight(i),
            active: if i < 4 { MAXCONN + i as u32 } else { (i as u32 * 7) % 23 },
            maxconn: MAXCONN,
            usable: true,
        })
        .collect()
}

fn scheduler(kind: SchedulerKind, names: &[String]) -> Box<dyn Scheduler> {
    let members: Vec<Member> = names
        .iter()
        .enumerate()
        .map(|(i, name)| Member { name, weight: weight(i), maxconn: MAXCONN })
        .collect();
    let mut s = kind.build(&Params::default());
    s.rebuild(&members);
    s
}

fn pick(c: &mut Criterion) {
    let names: Vec<String> = (1..=SERVERS).map(|i| format!("srv{i:02}")).collect();
    let servers = candidates();
    let keys = paths();
    let mut group = c.benchmark_group("pick");
    for &kind in SchedulerKind::ALL {
        // Built on first use, so kinds the filter leaves out are never constructed.
        let mut built: Option<Box<dyn Scheduler>> = None;
        group.bench_function(kind.name(), |b| {
            let s = built.get_or_insert_with(|| scheduler(kind, &names));
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % KEYS;
                // As the proxy does: a key only for the kinds that read one.
                let key = kind.uses_key().then(|| keys[k].as_bytes());
                s.pick(black_box(&servers), black_box(key))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, pick);
criterion_main!(benches);
