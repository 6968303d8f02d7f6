//! Results: one [`Row`] per algorithm × server count × cache size, printed as tables in
//! the manner of seed 002 (one table per metric; here algorithms are rows and server
//! counts columns, since there are more algorithms than server counts) or as CSV.

use std::fmt::Write as _;

use crate::trace::Trace;
use crate::Options;

/// The measurements of one algorithm on one server count with one cache size.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Algorithm label.
    pub algorithm: String,
    /// Number of servers.
    pub servers: usize,
    /// Cache per server, bytes.
    pub cache_bytes: u64,
    /// Requests placed.
    pub requests: u64,
    /// Requests the scheduler placed nowhere.
    pub unplaced: u64,
    /// Max/mean requests per server.
    pub imbalance: f64,
    /// Max/mean bytes per server.
    pub byte_imbalance: f64,
    /// Share of requests served from a cache (0–1).
    pub hit_ratio: f64,
    /// Share of bytes served from a cache (0–1).
    pub byte_hit_ratio: f64,
    /// Bytes read from disk (cache misses).
    pub disk_bytes: u64,
    /// Share of distinct keys moved when a server is added (`None`: not keyed).
    pub moved_add: Option<f64>,
    /// … when the last server is removed (`None`: not keyed, or one server).
    pub moved_remove_last: Option<f64>,
    /// … when a middle server is removed.
    pub moved_remove_middle: Option<f64>,
}

const MIB: f64 = 1024.0 * 1024.0;

/// Cache size in MiB without needless decimals.
pub fn mib(bytes: u64) -> String {
    let m = bytes as f64 / MIB;
    if m.fract() == 0.0 {
        format!("{m:.0}")
    } else {
        format!("{m}")
    }
}

/// The tables, one per metric, after a header naming the trace and the model.
pub fn text(trace: &Trace, opts: &Options, rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "trace {}: {} requests, {} distinct objects, {:.1} MiB distinct, {:.1} MiB requested",
        trace.name,
        trace.requests().len(),
        trace.distinct(),
        trace.distinct_bytes() as f64 / MIB,
        trace.requested_bytes() as f64 / MIB,
    );
    let top = trace.top_share();
    let _ = writeln!(
        out,
        "most requested object: {:.2} % of requests \
         (a placement keeping each object on one server has imbalance ≥ max(1, {:.4} × N))",
        top * 100.0,
        top
    );
    let _ = writeln!(
        out,
        "model: servers srv01..srvNN of weight 1; LRU cache per server; in flight: the last {} × N requests",
        opts.inflight_per_server
    );
    let unplaced: u64 = rows.iter().map(|r| r.unplaced).sum();
    if unplaced > 0 {
        let _ = writeln!(out, "warning: {unplaced} requests placed nowhere (pick returned None)");
    }
    let first_cache = opts.cache_bytes.first().copied().unwrap_or(0);
    let once = |r: &Row| r.cache_bytes == first_cache;
    let f2 = |v: f64| format!("{v:.2}");
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1}", v * 100.0));
    let mut t = |title: &str, keep: &dyn Fn(&Row) -> bool, cell: &dyn Fn(&Row) -> String| {
        out.push('\n');
        out.push_str(&table(title, &opts.servers, rows, keep, cell));
    };
    t("Load imbalance: max/mean requests per server", &once, &|r| f2(r.imbalance));
    t("Byte imbalance: max/mean bytes per server", &once, &|r| f2(r.byte_imbalance));
    for &c in &opts.cache_bytes {
        let title = format!("Cache hit ratio, % of requests (LRU {} MiB per server)", mib(c));
        t(&title, &|r| r.cache_bytes == c, &|r| format!("{:.1}", r.hit_ratio * 100.0));
        let title = format!("Read from disk, MiB (LRU {} MiB per server)", mib(c));
        t(&title, &|r| r.cache_bytes == c, &|r| format!("{:.1}", r.disk_bytes as f64 / MIB));
    }
    t("Keys moved, % of distinct keys: a server added (N → N+1)", &once, &|r| pct(r.moved_add));
    t("Keys moved, %: the last server removed (N → N-1)", &once, &|r| pct(r.moved_remove_last));
    t("Keys moved, %: a middle server removed (N → N-1)", &once, &|r| pct(r.moved_remove_middle));
    out
}

/// A pipe table: algorithms (in order of first appearance) down, server counts across.
fn table(
    title: &str,
    servers: &[usize],
    rows: &[Row],
    keep: &dyn Fn(&Row) -> bool,
    cell: &dyn Fn(&Row) -> String,
) -> String {
    let mut algos: Vec<&str> = Vec::new();
    for r in rows {
        if !algos.contains(&r.algorithm.as_str()) {
            algos.push(&r.algorithm);
        }
    }
    let mut grid: Vec<Vec<String>> = vec![std::iter::once("algorithm".to_string())
        .chain(servers.iter().map(|n| format!("N={n}")))
        .collect()];
    for a in &algos {
        let mut line = vec![a.to_string()];
        for &n in servers {
            let found = rows.iter().find(|r| r.algorithm == *a && r.servers == n && keep(r));
            line.push(found.map_or("-".into(), cell));
        }
        grid.push(line);
    }
    let widths: Vec<usize> =
        (0..grid[0].len()).map(|c| grid.iter().map(|l| l[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = format!("{title}\n\n");
    for (i, line) in grid.iter().enumerate() {
        for (c, cellv) in line.iter().enumerate() {
            let _ = if c == 0 {
                write!(out, "| {cellv:<w$} ", w = widths[c])
            } else {
                write!(out, "| {cellv:>w$} ", w = widths[c])
            };
        }
        out.push_str("|\n");
        if i == 0 {
            for (c, w) in widths.iter().enumerate() {
                let dashes = "-".repeat(*w);
                let _ = if c == 0 { write!(out, "|-{dashes}-") } else { write!(out, "|-{dashes}:") };
            }
            out.push_str("|\n");
        }
    }
    out
}

/// The CSV header, matching [`csv`]'s columns.
pub const CSV_HEADER: &str = "trace,algorithm,servers,cache_mib,requests,unplaced,imbalance,byte_imbalance,\
hit_ratio,byte_hit_ratio,disk_bytes,moved_add,moved_remove_last,moved_remove_middle";

/// All rows as CSV (ratios 0–1, empty cells for "not applicable").
pub fn csv(trace: &Trace, rows: &[Row]) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{},{},{},{}",
            csv_field(&trace.name),
            csv_field(&r.algorithm),
            r.servers,
            mib(r.cache_bytes),
            r.requests,
            r.unplaced,
            r.imbalance,
            r.byte_imbalance,
            r.hit_ratio,
            r.byte_hit_ratio,
            r.disk_bytes,
            opt(r.moved_add),
            opt(r.moved_remove_last),
            opt(r.moved_remove_middle),
        );
    }
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(algorithm: &str, servers: usize, cache_bytes: u64) -> Row {
        Row {
            algorithm: algorithm.into(),
            servers,
            cache_bytes,
            requests: 10,
            unplaced: 0,
            imbalance: 1.5,
            byte_imbalance: 2.0,
            hit_ratio: 0.25,
            byte_hit_ratio: 0.5,
            disk_bytes: 3 << 20,
            moved_add: Some(0.125),
            moved_remove_last: (servers > 1).then_some(0.5),
            moved_remove_middle: None,
        }
    }

    #[test]
    fn tables_have_algorithms_down_and_servers_across() {
        let trace = Trace::parse_plain("t", "/a 1\n").unwrap();
        let opts = Options {
            servers: vec![1, 2],
            cache_bytes: vec![1 << 20, 1 << 19],
            algorithms: Vec::new(),
            inflight_per_server: 4,
        };
        let rows =
            [row("rr", 1, 1 << 20), row("rr", 2, 1 << 20), row("rr", 2, 1 << 19), row("md5", 1, 1 << 20)];
        let t = text(&trace, &opts, &rows);
        assert!(t.contains("| algorithm |  N=1 |  N=2 |\n|-----------|-----:|-----:|\n"), "{t}");
        assert!(t.contains("Cache hit ratio, % of requests (LRU 0.5 MiB per server)"), "{t}");
        assert!(t.contains("| rr        | 1.50 | 1.50 |"), "{t}");
        assert!(t.contains("| md5       | 1.50 |    - |"), "{t}");
        assert!(t.contains("| rr        | 12.5 | 12.5 |"), "{t}");
        assert!(t.contains("| rr        |   - | 50.0 |"), "{t}");
        assert!(t.contains("| rr        | 3.0 | 3.0 |"), "disk MiB: {t}");
    }

    #[test]
    fn csv_columns() {
        let trace = Trace::parse_plain("a,b", "/a 1\n").unwrap();
        let c = csv(&trace, &[row("rr", 1, 1 << 20)]);
        let mut lines = c.lines();
        assert_eq!(lines.next(), Some(CSV_HEADER));
        assert_eq!(
            lines.next(),
            Some("\"a,b\",rr,1,1,10,0,1.500000,2.000000,0.250000,0.500000,3145728,0.125000,,")
        );
    }
}
