#!/usr/bin/env bash
# Issue 13's benchmark: cswitch's CPU per keep-alive request as one node of a two-node
# [cluster] against the same cswitch alone, alternated in the same session (the harness, ka
# c=64, cswitch only, one rep each way per round). The peer node (b) runs on CPU 0 beside the
# load generator, gossiping with the measured node every 100 ms.
# Usage: CSWITCH_BIN=path bench/cluster_ab.sh [ROUNDS]   (default 3)
set -euo pipefail
bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${CSWITCH_BIN:?set CSWITCH_BIN}"
rounds="${1:-3}"
dir="$(mktemp -d /tmp/cswitch-cluster-ab.XXXXXX)"
cat > "$dir/b.toml" <<TOML
[global]
workers = 1
[access_log]
enabled = false
[cluster]
node = "b"
bind = "127.0.0.1:19951"
seeds = ["127.0.0.1:19950"]
key = "bench-cluster-key-0123456789abcdef"
[[listener]]
name = "b"
bind = "127.0.0.1:19952"
default_group = "app"
[[group]]
name = "app"
servers = [ { name = "o1", addr = "127.0.0.1:19953" } ]
TOML
taskset -c 0 "$bin" run --config "$dir/b.toml" > "$dir/b.log" 2>&1 &
peer=$!
trap 'kill $peer 2>/dev/null; wait $peer 2>/dev/null || true' EXIT
for r in $(seq "$rounds"); do
  for t in cswitch cswitch-cluster; do
    CSWITCH_BIN="$bin" CSWITCH_TEMPLATE="$bench/$t.toml.tmpl" BENCH_ARGS="--proxy custom" WORKLOADS=ka REPS=1 \
      DURATION=5 "$bench/run.sh" --no-install --out "$dir/$t.csv" > "$dir/$t-$r.md" 2>&1
    grep -E '^\| cswitch \|' "$dir/$t-$r.md" | sed "s/^/$t round $r: /"
  done
done
echo "raw: $dir"
