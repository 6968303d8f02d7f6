#!/usr/bin/env bash
# Rule-count scaling (BASELINE.md §3.6 / §5 benchmark 3): cswitch, HAProxy and nginx with the
# harness's routing table at 1, 100 and 1000 rules, keep-alive GET /app/small, 64 connections.
# Every proxy gets the same ordered first-match table (configs/routes-N.json): path_end .gif,
# hdr(host) api.example.com, path_beg /static/, N−1 non-matching path_beg /rNNNN/, and the
# matching path_beg /app/ last. HAProxy: acl + use_backend per rule; nginx: location ^~ (prefix
# tree); cswitch: bench/routes2rules.py turns the JSON into a rules file (one labelled
# `prefix(path, …)`/`suffix`/`host ==` rule each, same order, same groups) before it starts.
#
# Usage:  bench/rules.sh [--reps N] [--duration S] [--rules LIST] [--out FILE] [--no-build] [--no-install]
# Env:    REPS (default 3), DURATION (default 8 s), RULES (default 1,100,1000),
#         HARNESS (default ../shared/bench), OUT (CSV path),
#         CSWITCH_BIN (benchmark this binary; skips the build).
# Output: bench/results/rules-<date>.csv (appended; each invocation has its own label), tables on
#         stdout (bench/rules_table.py), harness progress on stderr, scratch in bench/.run/.
# Waits for bench/.run/lock (one benchmark at a time, shared with run.sh and profile.sh).
set -euo pipefail

bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$bench/.." && pwd)"
shared="${HARNESS:-$root/../shared/bench}"
reps="${REPS:-3}"
duration="${DURATION:-8}"
rules="${RULES:-1,100,1000}"
out="${OUT:-}"
build=1
install=1

while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --rules) rules="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --no-install) install=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
stamp="$(date +%Y%m%dT%H%M%S)"
[ -n "$out" ] || out="$bench/results/rules-$(date +%F).csv"
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
label="cswitch-rules-$stamp"

say() { echo "== $*" >&2; }

# one benchmark at a time on this box (ports, CPUs and the harness's pid file are shared)
mkdir -p "$bench/.run"
exec 9>"$bench/.run/lock"
if ! flock -n 9; then
  say "another benchmark holds $bench/.run/lock; waiting (up to 60 min)"
  flock -w 3600 9 || { echo "gave up waiting for the lock" >&2; exit 1; }
fi
say "got $bench/.run/lock at $(date -u +%H:%M:%S) UTC"

# (a) tools
missing=""
for tool in wrk haproxy nginx taskset perf python3; do
  command -v "$tool" >/dev/null || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  if [ "$install" = 1 ]; then
    say "missing:$missing; running $shared/install.sh"
    bash "$shared/install.sh"
  else
    echo "missing:$missing (run $shared/install.sh)" >&2
    exit 1
  fi
fi

# (b) cswitch, benchmarked from a private copy (others may rebuild target/ meanwhile)
[ -n "${CSWITCH_BIN:-}" ] && build=0
if [ "$build" = 1 ]; then
  say "cargo build --release -p cswitch"
  (cd "$root" && cargo build --release -p cswitch)
fi
src_bin="${CSWITCH_BIN:-$root/target/release/cswitch}"
[ -x "$src_bin" ] || { echo "no $src_bin (build failed?)" >&2; exit 1; }
cswitch="$bench/.run/cswitch-rules-bin"
[ "$src_bin" -ef "$cswitch" ] || cp -f "$src_bin" "$cswitch"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty="$(git -C "$root" status --porcelain -- crates 2>/dev/null | wc -l)"

# (c) a fresh copy of the harness under bench/.run/harness (it writes next to bench.py)
harness="$bench/.run/harness"
mkdir -p "$harness"
for f in bench.py report.py README.md BASELINE.md; do
  cp -f "$shared/$f" "$harness/$f"
done
mkdir -p "$harness/origin"
cp -rf "$shared/origin/Cargo.toml" "$shared/origin/Cargo.lock" "$shared/origin/src" "$harness/origin/"
# its own workspace: under bench/ cargo would take it for a stray member of the repository's
grep -q '^\[workspace\]' "$harness/origin/Cargo.toml" || printf '\n[workspace]\n' >> "$harness/origin/Cargo.toml"
origin_bin="$harness/origin/target/release/bench-origin"
if [ -x "$shared/origin/target/release/bench-origin" ]; then
  mkdir -p "$(dirname "$origin_bin")"
  cp -f "$shared/origin/target/release/bench-origin" "$origin_bin"
elif [ ! -x "$origin_bin" ]; then
  say "building the reference origin in $harness/origin"
  (cd "$harness/origin" && cargo build --release -q)
fi

# (d) check the generated config once per rule count before measuring (rules compile, groups exist)
tmp="$bench/.run/rules-check"
rm -rf "$tmp"; mkdir -p "$tmp"
for n in ${rules//,/ }; do
  python3 - "$harness" "$n" "$tmp" "$bench/cswitch-rules.toml.tmpl" <<'EOF'
import json, sys, types
harness, n, tmp, tmpl = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, harness)
sys.dont_write_bytecode = True
import bench
spec = bench.routes_spec(types.SimpleNamespace(rules=n), 1, [2, 3])
open("%s/routes-%d.json" % (tmp, n), "w").write(json.dumps(spec) + "\n")
v = {"listen": "127.0.0.1:1", "backend1": "127.0.0.1:2", "backend2": "127.0.0.1:3", "threads": 1,
     "rules": n, "run_dir": tmp, "here": tmp, "routes": "%s/routes-%d.json" % (tmp, n)}
open("%s/custom-rules%d.conf" % (tmp, n), "w").write(bench.render_template(open(tmpl).read(), v))
EOF
  python3 "$bench/routes2rules.py" "$tmp/routes-$n.json" > "$tmp/cswitch-$n.rules"
  "$cswitch" check --config "$tmp/custom-rules$n.conf" >&2
done

# (e) the runs: rep 1 of every rule count and proxy, then rep 2, ... (bench.py interleaves)
# The proxy command renders {run_dir}/cswitch-{rules}.rules from {routes} (the JSON the peers'
# configs come from), then execs cswitch on the rendered template, which names that file.
proxy_cmd="sh -c 'python3 $bench/routes2rules.py {routes} > {run_dir}/cswitch-{rules}.rules && exec $cswitch run --config {config}'"
args=(
  --proxy haproxy,nginx,custom --workload ka-small --conns 64 --rules "$rules"
  --proxy-threads 1
  --proxy-config-template "$bench/cswitch-rules.toml.tmpl"
  --proxy-cmd "$proxy_cmd"
  --reps "$reps" --duration "$duration"
  --syscalls --summary --label "$label" --out "$out"
)
say "label $label, rules $rules, reps $reps, duration ${duration}s, CSV $out"
say "python3 bench.py ${args[*]}"
(cd "$harness" && python3 bench.py "${args[@]}" >/dev/null)

# (f) tables
echo "cswitch: $src_bin (sha256 $(sha256sum "$cswitch" | cut -c1-12)); tree at commit $commit with $dirty uncommitted path(s) under crates/ when the run started; reps $reps, ${duration}s per run (+2 s warm-up)."
echo
python3 "$bench/rules_table.py" --label "$label" "$out"
say "CSV: $out (label $label)"
