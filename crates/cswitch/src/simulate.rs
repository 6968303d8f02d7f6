//! `cswitch simulate`: replays a URL trace through the schedulers (crate `cswitch-sim`)
//! and prints seed 002's tables, computed: imbalance, hit ratio, disk bytes, keys moved;
//! with `--switches`, seed 002's throughput against servers behind 1..k switch nodes.

use anyhow::Context;
use std::io::IsTerminal;
use std::path::PathBuf;

/// Arguments of `cswitch simulate`.
#[derive(clap::Args)]
pub struct Args {
    /// A SURGE workload directory (or its surge-requests.txt), a plain file of
    /// `URL [size]` lines, or zipf:N_OBJECTS:N_REQUESTS[:ALPHA].
    #[arg(long)]
    trace: String,
    /// Server counts: a range (`1..16`, inclusive), a list (`1,2,4,8,16`), or both.
    #[arg(long, default_value = "1,2,4,8,16")]
    servers: String,
    /// LRU cache per server in MiB; a list (`4,16`) gives one set of cache tables each.
    #[arg(long, default_value = "16")]
    cache_mb: String,
    /// `default` (keyed kinds, consistent+bl125, and rr, wrr, lc, p2c), `all`, or a
    /// comma list of scheduler names and consistent+bl<N>.
    #[arg(long, default_value = "default")]
    algorithms: String,
    /// Requests in flight per server in the load model (the last N × this requests).
    #[arg(long, default_value_t = sim::DEFAULT_INFLIGHT_PER_SERVER)]
    inflight: u32,
    /// Also write every row as CSV to this file.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Instead of the tables above: requests per second (a cost model of the servers)
    /// behind each of these numbers of switch nodes, e.g. `1,2,4`.
    #[arg(long, value_name = "COUNTS")]
    switches: Option<String>,
    /// With --switches: also run learning schedulers (htrr, lard, lard_r) with their tables
    /// shared between the switch nodes, as `[cluster]` shares them.
    #[arg(long, requires = "switches")]
    share_tables: bool,
}

/// Runs the simulation and prints the tables.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let opts = sim::Options {
        servers: parse_servers(&args.servers).map_err(anyhow::Error::msg).context("--servers")?,
        cache_bytes: parse_cache(&args.cache_mb).map_err(anyhow::Error::msg).context("--cache-mb")?,
        algorithms: sim::Algo::parse_list(&args.algorithms)
            .map_err(anyhow::Error::msg)
            .context("--algorithms")?,
        inflight_per_server: args.inflight,
    };
    // The load error already names the file and the OS's reason: one message, not a chain
    // that repeats it.
    let trace = sim::Trace::load(&args.trace).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(switches) = &args.switches {
        let switches = parse_servers(switches).map_err(anyhow::Error::msg).context("--switches")?;
        return throughput(&trace, &opts, &switches, args.share_tables);
    }
    let rows = sim::simulate(&trace, &opts, &mut progress());
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
    print!("{}", sim::report::text(&trace, &opts, &rows));
    if let Some(path) = &args.csv {
        std::fs::write(path, sim::report::csv(&trace, &rows))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `--switches`: every algorithm on every server count behind every switch count.
fn throughput(
    trace: &sim::Trace,
    opts: &sim::Options,
    switches: &[usize],
    share: bool,
) -> anyhow::Result<()> {
    let costs = sim::throughput::Costs::default();
    let mut progress = progress();
    let mut points = Vec::new();
    for algo in &opts.algorithms {
        let shared = if share && algo.kind_learns() { vec![false, true] } else { vec![false] };
        for share in shared {
            for &k in switches.iter().filter(|&&k| !share || k > 1) {
                for &n in &opts.servers {
                    progress(algo, n);
                    let setup = sim::throughput::Setup {
                        servers: n,
                        switches: k,
                        share,
                        inflight_per_server: opts.inflight_per_server,
                    };
                    points.extend(sim::throughput::replay(trace, algo, setup, &opts.cache_bytes, &costs));
                }
            }
        }
    }
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
    print!("{}", sim::throughput::text(&points, &opts.servers, &costs));
    Ok(())
}

/// Progress on one line that rewrites itself when stderr is a terminal; nothing otherwise
/// (a log or a pipe gets no hundreds of lines).
fn progress() -> impl FnMut(&sim::Algo, usize) {
    let terminal = std::io::stderr().is_terminal();
    move |algo, n| {
        if terminal {
            eprint!("\rsimulate: {} on {n} server(s)\x1b[K", algo.label);
        }
    }
}

/// Largest server count accepted: the grid is algorithms × counts replays.
const MAX_SERVERS: usize = 1024;

/// `1..16`, `1,2,4,8,16`, `1..4,8`: inclusive ranges and single counts, in order given,
/// duplicates dropped.
fn parse_servers(spec: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once("..") {
            Some((lo, hi)) => (count(lo)?, count(hi.trim_start_matches('='))?),
            None => (count(part)?, count(part)?),
        };
        if lo > hi {
            return Err(format!("`{part}`: empty range"));
        }
        out.extend((lo..=hi).filter(|n| !out.contains(n)).collect::<Vec<_>>());
    }
    if out.is_empty() {
        return Err("no server count".into());
    }
    Ok(out)
}

fn count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_SERVERS).contains(&n) => Ok(n),
        _ => Err(format!("`{s}`: expected a server count from 1 to {MAX_SERVERS}")),
    }
}

/// `16` or `4,16` (MiB, fractions allowed) → bytes.
fn parse_cache(spec: &str) -> Result<Vec<u64>, String> {
    let sizes: Vec<u64> = spec
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| match p.parse::<f64>() {
            Ok(m) if m >= 0.0 && m.is_finite() && m < 1e9 => Ok((m * 1024.0 * 1024.0).round() as u64),
            _ => Err(format!("`{p}`: expected a size in MiB")),
        })
        .collect::<Result<_, _>>()?;
    if sizes.is_empty() {
        return Err("no cache size".into());
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_counts() {
        assert_eq!(parse_servers("1..16").unwrap(), (1..=16).collect::<Vec<_>>());
        assert_eq!(parse_servers("1,2,4,8,16").unwrap(), [1, 2, 4, 8, 16]);
        assert_eq!(parse_servers("1..=3, 8, 2").unwrap(), [1, 2, 3, 8]);
        assert!(parse_servers("0..4").is_err());
        assert!(parse_servers("4..2").is_err());
        assert!(parse_servers("x").is_err());
        assert!(parse_servers("").is_err());
    }

    #[test]
    fn cache_sizes() {
        assert_eq!(parse_cache("16").unwrap(), [16 << 20]);
        assert_eq!(parse_cache("0.5,4").unwrap(), [1 << 19, 4 << 20]);
        assert!(parse_cache("-1").is_err());
        assert!(parse_cache("big").is_err());
    }
}
