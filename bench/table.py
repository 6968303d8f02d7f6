#!/usr/bin/env python3
"""Markdown tables for bench/run.sh: one table per workload (workload + connection count).

Per proxy: req/s, p50 and p99 latency, proxy CPU seconds per 100k requests
(= proxy_us_per_req / 10), syscalls and context switches per request; for `idle`: RSS
before/with the connections and bytes per idle connection. Cells are the median over the
reps, with [min–max] when there is more than one. Runs marked `noisy` (foreign CPU above the
harness limit) or `loadgen-failed` are left out and counted as "skipped"; when every run of a
configuration was noisy, its noisy runs are shown instead and the row says so.

Below each table: cswitch ÷ HAProxy and cswitch ÷ nginx, paired by rep (both runs of a pair
ran back to back in the same interleaved invocation): median [min–max] of the per-rep ratios.

usage: bench/table.py [--label L | --all] results.csv [...]
       (default: only the rows of the last label in the files, i.e. the latest bench/run.sh)
"""
import argparse
import csv
import signal
import statistics
import sys

ORDER = ["direct", "haproxy", "nginx", "custom"]
NAME = {"direct": "direct (no proxy)", "haproxy": "HAProxy", "nginx": "nginx", "custom": "cswitch"}
WL_TITLE = {
    "ka-small": "keep-alive, GET /app/small (100 B)",
    "ka-10k": "keep-alive, GET /app/10k (10 KiB)",
    "close-small": "Connection: close (one TCP connection per request), 100 B",
    "close-10k": "Connection: close, 10 KiB",
    "paced-small": "keep-alive, paced",
    "idle": "idle keep-alive client connections (one request each, then held)",
}
WL_ORDER = ["ka-small", "close-small", "ka-10k", "close-10k", "paced-small", "idle"]


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def vals(rows, field, scale=1.0):
    v = [num(r.get(field)) for r in rows]
    return [x * scale for x in v if x is not None]


def cell(rows, field, fmt, scale=1.0):
    v = vals(rows, field, scale)
    if not v:
        return "–"
    m = statistics.median(v)
    if len(v) == 1:
        return fmt.format(m)
    return (fmt + " [" + fmt + "–" + fmt + "]").format(m, min(v), max(v))


def paired(a, b, field):
    """median [min–max] of a/b over reps present in both"""
    ra = {r["rep"]: r for r in a}
    rb = {r["rep"]: r for r in b}
    v = []
    for k in ra:
        if k in rb:
            x, y = num(ra[k].get(field)), num(rb[k].get(field))
            if x is not None and y:
                v.append(x / y)
    if not v:
        return "–", 0
    if len(v) == 1:
        return "%.2f" % v[0], 1
    return "%.2f [%.2f–%.2f]" % (statistics.median(v), min(v), max(v)), len(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--label", help="only rows with this label (default: the last label in the files)")
    ap.add_argument("--all", action="store_true", help="all rows, whatever their label")
    a = ap.parse_args()

    rows = []
    for p in a.csv:
        with open(p, newline="") as f:
            rows += list(csv.DictReader(f))
    if not rows:
        sys.exit("no rows")
    if not a.all:
        label = a.label or rows[-1]["label"]
        rows = [r for r in rows if r["label"] == label]
        if not rows:
            sys.exit("no rows with label %s" % label)
        print("Run `%s`: %d runs, %s … %s.\n" % (label, len(rows), rows[0]["ts"], rows[-1]["ts"]))

    groups, skipped, noisy = {}, {}, {}
    for r in rows:
        key = (r["workload"], int(r["conns"]), r["rules"] or "1", r["proxy"])
        skipped.setdefault(key, 0)
        if r["status"] in ("noisy", "loadgen-failed"):
            skipped[key] += 1
            if r["status"] == "noisy":
                noisy.setdefault(key, []).append(r)
            continue
        groups.setdefault(key, []).append(r)
    # a configuration whose every run was noisy is still shown, from its noisy runs, marked
    fallback = set()
    for key, rs in noisy.items():
        if key not in groups:
            groups[key] = rs
            fallback.add(key)

    tables = sorted({k[:3] for k in skipped},
                    key=lambda t: (WL_ORDER.index(t[0]) if t[0] in WL_ORDER else 99, t[1], int(t[2])))
    for wl, conns, rules in tables:
        def g(proxy):
            return groups.get((wl, conns, rules, proxy), [])
        present = [p for p in ORDER if (wl, conns, rules, p) in skipped]
        present += sorted(k[3] for k in skipped if k[:3] == (wl, conns, rules) and k[3] not in ORDER)
        extra = "" if rules == "1" else ", %s rules" % rules
        print("### %s, %d connections%s\n" % (WL_TITLE.get(wl, wl), conns, extra))
        if wl == "idle":
            print("| proxy | RSS before (KiB) | RSS with conns (KiB) | **bytes per idle conn** | conns opened | runs ok / errors / skipped |")
            print("|---|---|---|---|---|---|")
            for p in present:
                rs = g(p)
                ok = sum(1 for r in rs if r["status"] == "ok")
                errs = sum(1 for r in rs if r["status"] not in ("ok", "noisy"))
                name = "direct (origin's RSS)" if p == "direct" else NAME.get(p, p)
                if (wl, conns, rules, p) in fallback:
                    name += " (noisy runs only)"
                print("| %s | %s | %s | %s | %s | %d / %d / %d |" % (
                    name, cell(rs, "idle_rss_base_kb", "{:,.0f}"), cell(rs, "idle_rss_kb", "{:,.0f}"),
                    cell(rs, "idle_bytes_per_conn", "{:,.0f}"), cell(rs, "requests", "{:.0f}"),
                    ok, errs, skipped[(wl, conns, rules, p)]))
            print()
            for peer in ("haproxy", "nginx"):
                if g("custom") and g(peer):
                    r, n = paired(g("custom"), g(peer), "idle_bytes_per_conn")
                    print("* bytes per idle conn, cswitch ÷ %s: **%s** (%d pairs)" % (NAME[peer], r, n))
            print()
            continue
        print("| proxy | req/s | p50 µs | p99 µs | proxy CPU s / 100k req | syscalls/req | ctx sw/req | proxy CPU % | user share | runs ok / errors / skipped | socket errors / non-2xx |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for p in present:
            rs = g(p)
            se = sum(int(num(r["errors"]) or 0) for r in rs)
            n2 = sum(int(num(r["non2xx"]) or 0) for r in rs)
            name = NAME.get(p, p)
            if (wl, conns, rules, p) in fallback:
                name += " (noisy runs only)"
            errs = sum(1 for r in rs if r["status"] not in ("ok", "noisy"))
            ok = sum(1 for r in rs if r["status"] == "ok")
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d / %d / %d | %d / %d |" % (
                name, cell(rs, "rps", "{:,.0f}"), cell(rs, "p50_us", "{:,.0f}"),
                cell(rs, "p99_us", "{:,.0f}"),
                cell(rs, "proxy_us_per_req", "{:.2f}", 0.1),
                cell(rs, "proxy_syscalls_per_req", "{:.2f}"), cell(rs, "proxy_ctxsw_per_req", "{:.2f}"),
                cell(rs, "proxy_cpu_pct", "{:.0f}"), cell(rs, "proxy_user_share", "{:.2f}"),
                ok, errs, skipped[(wl, conns, rules, p)], se, n2))
        print()
        if g("custom"):
            print("| cswitch ÷ | req/s | p99 | CPU per request | syscalls/req | pairs |")
            print("|---|---|---|---|---|---|")
            for peer in ("haproxy", "nginx"):
                if not g(peer):
                    continue
                rps, n = paired(g("custom"), g(peer), "rps")
                p99, _ = paired(g("custom"), g(peer), "p99_us")
                cpu, _ = paired(g("custom"), g(peer), "proxy_us_per_req")
                sc, _ = paired(g("custom"), g(peer), "proxy_syscalls_per_req")
                print("| %s | %s | %s | %s | %s | %d |" % (NAME[peer], rps, p99, cpu, sc, n))
            print()


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under | head
    main()
