//! The grid of docs/balancing.md without building the whole `cswitch` binary: the same
//! library calls as `cswitch simulate --servers 1,2,4,8,16 --cache-mb 16,4
//! --algorithms default`.
//!
//! usage: cargo run --release -p cswitch-sim --example surge -- TRACE [CSV]

use cswitch_sim::{report, Algo, Options, Trace, DEFAULT_INFLIGHT_PER_SERVER};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let spec = args.next().ok_or("usage: surge TRACE [CSV]")?;
    let trace = Trace::load(&spec)?;
    let opts = Options {
        servers: vec![1, 2, 4, 8, 16],
        cache_bytes: vec![16 << 20, 4 << 20],
        algorithms: Algo::defaults(),
        inflight_per_server: DEFAULT_INFLIGHT_PER_SERVER,
    };
    let rows =
        cswitch_sim::simulate(&trace, &opts, &mut |a, n| eprintln!("simulate: {} on {n} server(s)", a.label));
    print!("{}", report::text(&trace, &opts, &rows));
    if let Some(path) = args.next() {
        std::fs::write(path, report::csv(&trace, &rows))?;
    }
    Ok(())
}
