#!/usr/bin/env bash
# Pre-allocation (seed 000 §3.2): cswitch with `preallocate = true` against `false`, on the
# workload it exists for — every request on a new client connection, from one client address
# whose last server is known, and no pooled server connection to hide the connect (pool off).
# One origin (the shared harness's bench-origin), so the pre-allocated server is always the
# one the request goes to: this measures the best case, the saving per correct guess.
#
# Usage:  bench/prealloc.sh [--reps N] [--duration S] [--no-build]
# Env:    REPS (default 5), DURATION (default 5 s), CONNS (default 16), CSWITCH_BIN.
# Output: one line per run and a median summary on stdout; scratch in bench/.run/prealloc/.
# Layout: wrk on CPU 0, cswitch and the origin on CPU 1 (as bench/run.sh). Waits for
# bench/.run/lock (one benchmark at a time).
set -euo pipefail

bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$bench/.." && pwd)"
reps="${REPS:-5}"
duration="${DURATION:-5}"
conns="${CONNS:-16}"
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
say() { echo "== $*" >&2; }

mkdir -p "$bench/.run"
exec 9>"$bench/.run/lock"
flock -w 3600 9 || { echo "gave up waiting for $bench/.run/lock" >&2; exit 1; }

[ -n "${CSWITCH_BIN:-}" ] && build=0
if [ "$build" = 1 ]; then
  say "cargo build --release -p cswitch"
  (cd "$root" && cargo build --release -p cswitch)
fi
work="$bench/.run/prealloc"
rm -rf "$work"; mkdir -p "$work"
cp -f "${CSWITCH_BIN:-$root/target/release/cswitch}" "$work/cswitch"
origin="$bench/.run/harness/origin/target/release/bench-origin"
if [ ! -x "$origin" ]; then
  say "building the reference origin (bench/run.sh copies the harness to bench/.run/harness)"
  mkdir -p "$bench/.run/harness/origin"
  cp -rf $root/../shared/bench/origin/Cargo.toml $root/../shared/bench/origin/Cargo.lock $root/../shared/bench/origin/src "$bench/.run/harness/origin/"
  (cd "$bench/.run/harness/origin" && cargo build --release -q)
fi

origin_port=19181
proxy_port=19180
for mode in false true; do
  cat > "$work/prealloc-$mode.toml" <<TOML
[global]
workers = 1
grace_period = "0s"
[access_log]
enabled = false
[limits]
pool_idle_per_server = 0         # no pooled server connection: each request needs one
[[listener]]
name = "bench"
bind = "127.0.0.1:$proxy_port"
default_group = "app"
preallocate = $mode
[[group]]
name = "app"
scheduler = "rr"
servers = [ { name = "o1", addr = "127.0.0.1:$origin_port" } ]
TOML
  "$work/cswitch" check --config "$work/prealloc-$mode.toml" >/dev/null
done

taskset -c 1 "$origin" --listen "127.0.0.1:$origin_port" --threads 1 >/dev/null 2>&1 &
origin_pid=$!
trap 'kill $origin_pid 2>/dev/null || true' EXIT
sleep 0.5

results="$work/results.txt"
: > "$results"
for rep in $(seq 1 "$reps"); do
  for mode in false true; do
    taskset -c 1 "$work/cswitch" run --config "$work/prealloc-$mode.toml" >/dev/null 2>&1 &
    pid=$!
    sleep 0.5
    # one warm-up request: the client address's last server becomes known
    curl -s -o /dev/null "http://127.0.0.1:$proxy_port/app/small" || true
    out="$(taskset -c 0 timeout $((duration + 10)) wrk -t1 -c"$conns" -d"${duration}s" --latency \
      -H "Connection: close" "http://127.0.0.1:$proxy_port/app/small")"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rps="$(awk '/Requests\/sec/ {print $2}' <<<"$out")"
    p50="$(awk '$1 == "50%" {print $2}' <<<"$out")"
    p99="$(awk '$1 == "99%" {print $2}' <<<"$out")"
    errs="$(awk '/Socket errors|Non-2xx/ {print}' <<<"$out" | tr '\n' ' ')"
    echo "rep=$rep preallocate=$mode req/s=$rps p50=$p50 p99=$p99 $errs" | tee -a "$results"
  done
done

python3 - "$results" <<'PY'
import re, statistics, sys
rows = [dict(kv.split("=", 1) for kv in line.split() if "=" in kv) for line in open(sys.argv[1])]
def ms(v):
    m = re.match(r"([\d.]+)(us|ms|s)", v)
    n, unit = float(m.group(1)), m.group(2)
    return n / 1000 if unit == "us" else n * 1000 if unit == "s" else n
print("| preallocate | runs | req/s (median) | p50 ms | p99 ms |")
print("|---|---|---|---|---|")
for mode in ("false", "true"):
    r = [x for x in rows if x["preallocate"] == mode]
    rps = statistics.median(float(x["req/s"]) for x in r)
    p50 = statistics.median(ms(x["p50"]) for x in r)
    p99 = statistics.median(ms(x["p99"]) for x in r)
    print(f"| {mode} | {len(r)} | {rps:,.0f} | {p50:.3f} | {p99:.3f} |")
PY
