#!/usr/bin/env python3
"""Markdown tables for bench/rules.sh: rule-count scaling (BASELINE.md §3.6, §5 benchmark 3).

1. One table per rule count: req/s, p99, proxy µs/req (= CPU s per 100k requests × 10),
   syscalls/req; median over the clean reps with [min–max] (noisy / loadgen-failed runs left out
   and counted as skipped, as in bench/table.py).
2. Growth of µs/req per proxy: 100 ÷ 1, 1000 ÷ 1 and 1000 ÷ 100 rules, paired by rep (in one
   invocation the harness runs rep r of every rule count and proxy back to back).
3. cswitch ÷ HAProxy and ÷ nginx per rule count (µs/req, req/s, p99), paired by rep.

usage: bench/rules_table.py [--label L] results.csv [...]   (default: the last label in the files)
"""
import argparse
import csv
import os
import signal
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table import NAME, cell, num, paired  # noqa: E402

ORDER = ["haproxy", "nginx", "custom"]


def ratio_by_rep(a, b, field):
    """median [min–max] of a/b over the reps both have (a, b: lists of rows)"""
    return paired(a, b, field)


def median(rows, field):
    v = [num(r.get(field)) for r in rows]
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--label", help="only rows with this label (default: the last label in the files)")
    a = ap.parse_args()

    rows = []
    for p in a.csv:
        with open(p, newline="") as f:
            rows += list(csv.DictReader(f))
    if not rows:
        sys.exit("no rows")
    label = a.label or rows[-1]["label"]
    rows = [r for r in rows if r["label"] == label and r["workload"] != "idle"]
    if not rows:
        sys.exit("no rows with label %s" % label)
    wl = sorted({(r["workload"], r["conns"]) for r in rows})
    print("Run `%s`: %d runs, %s … %s; %s.\n" % (
        label, len(rows), rows[0]["ts"], rows[-1]["ts"],
        ", ".join("%s c=%s" % w for w in wl)))

    groups, skipped, noisy = {}, {}, {}
    for r in rows:
        key = (int(r["rules"] or 1), r["proxy"])
        skipped.setdefault(key, 0)
        if r["status"] in ("noisy", "loadgen-failed"):
            skipped[key] += 1
            if r["status"] == "noisy":
                noisy.setdefault(key, []).append(r)
            continue
        groups.setdefault(key, []).append(r)
    # a configuration whose every run was noisy is shown from its noisy runs, marked (as table.py)
    fallback = {k for k in noisy if k not in groups}
    for k in fallback:
        groups[k] = noisy[k]

    def g(n, p):
        return groups.get((n, p), [])

    counts = sorted({k[0] for k in skipped})
    proxies = [p for p in ORDER if any(k[1] == p for k in skipped)]
    proxies += sorted({k[1] for k in skipped} - set(ORDER))

    for n in counts:
        print("#### %d rule%s (%d rules in the table incl. the 3 fixed ones and /app/)\n"
              % (n, "" if n == 1 else "s", n + 3))
        print("| proxy | req/s | p99 µs | proxy µs/req | CPU s / 100k req | syscalls/req | proxy CPU % | runs ok / errors / skipped | socket errors / non-2xx |")
        print("|---|---|---|---|---|---|---|---|---|")
        for p in proxies:
            if (n, p) not in skipped:
                continue
            rs = g(n, p)
            ok = sum(1 for r in rs if r["status"] == "ok")
            errs = sum(1 for r in rs if r["status"] not in ("ok", "noisy"))
            se = sum(int(num(r["errors"]) or 0) for r in rs)
            n2 = sum(int(num(r["non2xx"]) or 0) for r in rs)
            name = NAME.get(p, p) + (" (noisy runs only)" if (n, p) in fallback else "")
            print("| %s | %s | %s | %s | %s | %s | %s | %d / %d / %d | %d / %d |" % (
                name, cell(rs, "rps", "{:,.0f}"), cell(rs, "p99_us", "{:,.0f}"),
                cell(rs, "proxy_us_per_req", "{:.1f}"), cell(rs, "proxy_us_per_req", "{:.2f}", 0.1),
                cell(rs, "proxy_syscalls_per_req", "{:.2f}"), cell(rs, "proxy_cpu_pct", "{:.0f}"),
                ok, errs, skipped[(n, p)], se, n2))
        print()

    if len(counts) > 1:
        print("#### Growth of proxy µs/req with the rule count (paired by rep)\n")
        steps = [(counts[i], counts[0]) for i in range(1, len(counts))]
        if len(counts) > 2:
            steps.append((counts[-1], counts[-2]))
        head = " | ".join("µs/req @ %d" % n for n in counts)
        head2 = " | ".join("%d ÷ %d" % s for s in steps)
        print("| proxy | %s | %s |" % (head, head2))
        print("|---|" + "---|" * (len(counts) + len(steps)))
        for p in proxies:
            meds = []
            for n in counts:
                m = median(g(n, p), "proxy_us_per_req")
                meds.append("–" if m is None else "%.1f" % m)
            rats = []
            for hi, lo in steps:
                r, k = ratio_by_rep(g(hi, p), g(lo, p), "proxy_us_per_req")
                rats.append("%s (%d)" % (r, k) if k else "–")
            print("| %s | %s | %s |" % (NAME.get(p, p), " | ".join(meds), " | ".join(rats)))
        print("\n(ratio (pairs): median [min–max] of the per-rep ratios)\n")
    if fallback:
        print("Configurations with noisy runs only (shown from them): %s\n" % ", ".join(
            "%s @ %d" % (NAME.get(p, p), n) for n, p in sorted(fallback)))

    if any(k[1] == "custom" for k in skipped):
        print("#### cswitch ÷ peer (paired by rep)\n")
        print("| rules | cswitch ÷ | µs/req | req/s | p99 | pairs |")
        print("|---|---|---|---|---|---|")
        for n in counts:
            for peer in ("haproxy", "nginx"):
                if not g(n, "custom") or not g(n, peer):
                    continue
                cpu, k = paired(g(n, "custom"), g(n, peer), "proxy_us_per_req")
                rps, _ = paired(g(n, "custom"), g(n, peer), "rps")
                p99, _ = paired(g(n, "custom"), g(n, peer), "p99_us")
                b = "**" if n == counts[-1] else ""
                print("| %s%d%s | %s | %s%s%s | %s | %s | %d |" % (b, n, b, NAME[peer], b, cpu, b, rps, p99, k))
        print()


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
