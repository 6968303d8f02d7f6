#!/usr/bin/env python3
"""Charts of `cswitch simulate --csv` for docs/balancing.md.

Writes three PNGs next to each other (default prefix docs/balancing):
  <prefix>-hit.png        cache hit ratio vs servers, one line per algorithm, one panel per cache size
  <prefix>-imbalance.png  load imbalance (max/mean requests per server) vs servers
  <prefix>-moved.png      keys moved when a server is added, the last removed, a middle one removed
                          (keyed algorithms only)

usage: bench/balancing_chart.py results.csv [--out-prefix docs/balancing]
needs: matplotlib (pip install matplotlib); CI does not run this script.
"""
import argparse
import csv
import itertools
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLES = list(itertools.product(["-", "--", ":", "-."], ["o", "s", "^", "v", "D", "x"]))
COLORS = plt.get_cmap("tab20").colors


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{path}: no rows")
    return rows


def ordered(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def series(rows, algo, col, **where):
    pts = [
        (int(r["servers"]), float(r[col]))
        for r in rows
        if r["algorithm"] == algo and r[col] != "" and all(r[k] == v for k, v in where.items())
    ]
    pts.sort()
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_lines(ax, rows, algos, col, scale=1.0, **where):
    everyone = ordered(r["algorithm"] for r in rows)  # same style for an algorithm in every chart
    for algo in algos:
        i = everyone.index(algo)
        xs, ys = series(rows, algo, col, **where)
        if not xs:
            continue
        ls, marker = STYLES[i % len(STYLES)]
        color = COLORS[i % len(COLORS)]
        ax.plot(xs, [y * scale for y in ys], ls, color=color, marker=marker, markersize=4, label=algo)
    servers = sorted({int(r["servers"]) for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(servers)
    ax.set_xticklabels([str(s) for s in servers])
    ax.set_xlabel("servers")
    ax.grid(True, alpha=0.3)


def legend_right(fig, ax):
    """One legend for the figure, outside the plots on the right."""
    fig.legend(*ax.get_legend_handles_labels(), loc="center right", fontsize=8)
    fig.tight_layout(rect=(0, 0, 1 - 1.7 / fig.get_figwidth(), 1))


def save(fig, path):
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--out-prefix", default="docs/balancing")
    args = ap.parse_args()
    rows = load(args.csv)
    algos = ordered(r["algorithm"] for r in rows)
    caches = ordered(r["cache_mib"] for r in rows)
    first = caches[0]

    fig, axes = plt.subplots(1, len(caches), figsize=(6.5 * len(caches) + 1.5, 5), squeeze=False)
    for ax, cache in zip(axes[0], caches):
        plot_lines(ax, rows, algos, "hit_ratio", 100.0, cache_mib=cache)
        ax.set_title(f"cache hit ratio, LRU {cache} MiB per server")
        ax.set_ylabel("% of requests served from cache")
    legend_right(fig, axes[0][-1])
    save(fig, f"{args.out_prefix}-hit.png")

    fig, ax = plt.subplots(figsize=(8.5, 5))
    plot_lines(ax, rows, algos, "imbalance", cache_mib=first)
    ax.set_title("load imbalance (max/mean requests per server)")
    ax.set_ylabel("max / mean (1 = even)")
    legend_right(fig, ax)
    save(fig, f"{args.out_prefix}-imbalance.png")

    keyed = [a for a in algos if any(r["algorithm"] == a and r["moved_add"] != "" for r in rows)]
    cols = [
        ("moved_add", "a server added (N → N+1)"),
        ("moved_remove_last", "the last server removed (N → N−1)"),
        ("moved_remove_middle", "a middle server removed (N → N−1)"),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(18, 5), sharey=True)
    for ax, (col, title) in zip(axes, cols):
        plot_lines(ax, rows, keyed, col, 100.0, cache_mib=first)
        ax.set_title(f"keys moved: {title}")
    axes[0].set_ylabel("% of distinct keys on another server")
    # The least any placement can move: the new server's fair share, or the removed one's keys.
    servers = sorted({int(r["servers"]) for r in rows})
    ideals = [
        (servers, [100 / (n + 1) for n in servers], "ideal 1/(N+1)"),
        ([n for n in servers if n > 1], [100 / n for n in servers if n > 1], "ideal 1/N"),
        ([n for n in servers if n > 1], [100 / n for n in servers if n > 1], "ideal 1/N"),
    ]
    for ax, (xs, ys, label) in zip(axes, ideals):
        ax.plot(xs, ys, color="black", lw=3, alpha=0.2, label=label)
    legend_right(fig, axes[-1])
    save(fig, f"{args.out_prefix}-moved.png")


if __name__ == "__main__":
    main()
