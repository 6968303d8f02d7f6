//! `cswitch simulate` as a user runs it: a small plain trace through a few algorithms,
//! checking the tables' shape, the CSV, and values every correct scheduler must give.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

fn cswitch() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cswitch"))
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cswitch-sim-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// 400 URLs, 8,000 requests with a skewed popularity (the square of a uniform draw
/// favours low ids), sizes 1–64 KiB.
fn plain_trace() -> String {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut out = String::from("# url size\n");
    for _ in 0..8000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        let id = (u * u * 400.0) as u64;
        out.push_str(&format!("/obj/{id}.html {}\n", 1024 * (1 + id * 7 % 64)));
    }
    out
}

/// CSV rows keyed by (algorithm, servers): column name → value.
fn rows(csv: &str) -> HashMap<(String, usize), HashMap<String, String>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            let m: HashMap<String, String> =
                header.iter().zip(l.split(',')).map(|(h, v)| (h.to_string(), v.to_string())).collect();
            ((m["algorithm"].clone(), m["servers"].parse().unwrap()), m)
        })
        .collect()
}

fn num(row: &HashMap<String, String>, col: &str) -> f64 {
    row[col].parse().unwrap_or_else(|_| panic!("{col} = {:?}", row[col]))
}

#[test]
fn simulate_plain_trace() {
    let dir = tempdir("plain");
    let trace = dir.join("trace.txt");
    std::fs::write(&trace, plain_trace()).unwrap();
    let csv = dir.join("out.csv");
    let algos = "rr,lc,md5,consistent,consistent+bl125,jump";
    let out = cswitch()
        .args(["simulate", "--servers", "1..2,4,8", "--cache-mb", "1", "--algorithms", algos, "--trace"])
        .arg(&trace)
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    // stderr is a pipe here, not a terminal: no progress lines.
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    for title in [
        "Load imbalance: max/mean requests per server",
        "Cache hit ratio, % of requests (LRU 1 MiB per server)",
        "Read from disk, MiB (LRU 1 MiB per server)",
        "Keys moved, % of distinct keys: a server added (N → N+1)",
        "Keys moved, %: the last server removed (N → N-1)",
        "Keys moved, %: a middle server removed (N → N-1)",
    ] {
        assert!(stdout.contains(title), "{title}\n{stdout}");
    }
    assert!(stdout.contains("| algorithm        |  N=1 |  N=2 |  N=4 |  N=8 |"), "{stdout}");
    assert!(stdout.contains("8000 requests, 400 distinct objects"), "{stdout}");

    let rows = rows(&std::fs::read_to_string(&csv).unwrap());
    assert_eq!(rows.len(), 6 * 4);
    for ((algo, n), r) in &rows {
        let hit = num(r, "hit_ratio");
        assert!((0.0..=1.0).contains(&hit), "{algo} {n}: hit {hit}");
        assert!(num(r, "imbalance") >= 1.0 - 1e-9, "{algo} {n}");
        assert_eq!(num(r, "requests"), 8000.0);
        assert_eq!(r["unplaced"], "0");
    }
    // One server: one cache, whatever the algorithm.
    let one = num(&rows[&("rr".into(), 1)], "hit_ratio");
    assert!(rows.iter().filter(|(k, _)| k.1 == 1).all(|(_, r)| num(r, "hit_ratio") == one));
    // Round robin is even but spreads every object everywhere; hashing partitions them.
    assert!(num(&rows[&("rr".into(), 8)], "imbalance") < 1.01);
    assert!(num(&rows[&("md5".into(), 8)], "hit_ratio") > num(&rows[&("rr".into(), 8)], "hit_ratio"));
    assert_eq!(rows[&("rr".into(), 8)]["moved_add"], "", "not keyed: no movement");
    for n in [2usize, 4, 8] {
        let md5 = &rows[&("md5".into(), n)];
        assert!(num(md5, "moved_add") > 0.5, "md5 {n}: {}", md5["moved_add"]);
        let ch = &rows[&("consistent".into(), n)];
        let bound = 1.0 / n as f64 + 0.1;
        for col in ["moved_add", "moved_remove_last", "moved_remove_middle"] {
            assert!(num(ch, col) < bound, "consistent {n} {col}: {}", ch[col]);
        }
        let jump = &rows[&("jump".into(), n)];
        assert!(num(jump, "moved_remove_last") < bound, "jump {n}: {}", jump["moved_remove_last"]);
    }
    assert_eq!(rows[&("consistent".into(), 1)]["moved_remove_last"], "");
}

#[test]
fn simulate_zipf_and_errors() {
    let out = cswitch()
        .args(["simulate", "--trace", "zipf:100:1000:1.0", "--servers", "3", "--algorithms", "rr,wlc"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("| wlc       | "));

    let out =
        cswitch().args(["simulate", "--trace", "zipf:100:1000", "--algorithms", "rr,nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown algorithm `nope`"));

    let out = cswitch().args(["simulate", "--trace", "/nonexistent/trace.txt"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/trace.txt"));
    assert_eq!(stderr.matches("No such file").count(), 1, "the reason once: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// `--switches`: seed 002's requests per second behind 1, 2 and 4 switch nodes; hashing
/// gives every switch count the same figure, and `--share-tables` adds `htrr+shared` rows.
#[test]
fn throughput_behind_several_switch_nodes() {
    let out = cswitch()
        .args(["simulate", "--trace", "zipf:500:6000", "--servers", "1,4", "--cache-mb", "1"])
        .args(["--algorithms", "md5,htrr", "--switches", "1,2,4", "--share-tables"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("requests per second, 1 MiB cache per server"), "{text}");
    let rate = |algorithm: &str, switches: usize| -> Vec<String> {
        let row = text
            .lines()
            .find(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                cells.get(1) == Some(&algorithm) && cells.get(2) == Some(&switches.to_string().as_str())
            })
            .unwrap_or_else(|| panic!("no {algorithm} × {switches} row in {text}"));
        row.split('|').map(str::trim).skip(3).filter(|c| !c.is_empty()).map(String::from).collect()
    };
    assert_eq!(rate("md5", 1), rate("md5", 4), "a hash places alike on every switch: {text}");
    assert_eq!(rate("htrr+shared", 2).len(), 2, "{text}");
    assert!(!text.contains("| htrr+shared        |        1 |"), "sharing needs two switches: {text}");
}
