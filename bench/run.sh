#!/usr/bin/env bash
# cswitch side by side with HAProxy and nginx (and the origin alone, "direct") on the shared
# harness in ../shared/bench. One command: installs missing tools, builds cswitch, runs the
# workloads interleaved, writes a CSV and prints one markdown table per workload.
#
# Usage:  bench/run.sh [--reps N] [--duration S] [--quick] [--out FILE] [--no-build] [--no-install]
# Env:    REPS (default 3), DURATION (default 8 s), QUICK=1 (reps 1, duration 3, CSV under
#         bench/results/tmp/), HARNESS (default ../shared/bench), OUT (CSV path),
#         WORKLOADS (subset of: ka ka256 close ka10k idle idle19k; default all but idle19k),
#         CSWITCH_BIN (benchmark this binary; skips the build), CSWITCH_TEMPLATE (cswitch's
#         config template; default bench/cswitch.toml.tmpl), BENCH_ARGS (more bench.py
#         arguments, e.g. "--haproxy-reuse safe").
# Output: bench/results/<date>.csv (appended; every invocation gets its own label), tables on
#         stdout (bench/table.py), harness progress on stderr, scratch in bench/.run/.
#
# Workloads (wrk -t1, layout: wrk on CPU 0, proxy + origin on CPU 1, see ../shared/bench):
#   ka-small c=64 and c=256   keep-alive GET /app/small (100 B)
#   close-small c=64          Connection: close, one TCP connection per request
#   ka-10k c=64               keep-alive GET /app/10k (10 KiB)
#   idle c=10000              RSS per idle keep-alive client connection
#   idle19k c=19000           the same with the most connections this host allows (not in the default)
# Every proxy runs single-threaded: HAProxy nbthread 1, nginx worker_processes 1, cswitch workers 1.
set -euo pipefail

bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$bench/.." && pwd)"
shared="${HARNESS:-$root/../shared/bench}"
reps="${REPS:-3}"
duration="${DURATION:-8}"
quick="${QUICK:-0}"
out="${OUT:-}"
build=1
install=1
workloads="${WORKLOADS:-ka ka256 close ka10k idle}"

while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --no-install) install=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$quick" = 1 ]; then
  reps=1
  duration=3
fi
stamp="$(date +%Y%m%dT%H%M%S)"
if [ -z "$out" ]; then
  if [ "$quick" = 1 ]; then
    out="$bench/results/tmp/quick-$stamp.csv"
  else
    out="$bench/results/$(date +%F).csv"
  fi
fi
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
label="cswitch-bench-$stamp"
[ "$quick" = 1 ] && label="$label-quick"

say() { echo "== $*" >&2; }

# one benchmark at a time on this box: two runs would share ports, CPUs and the harness's
# pid file (whose stale-pid cleanup would kill the other run's processes)
mkdir -p "$bench/.run"
exec 9>"$bench/.run/lock"
if ! flock -n 9; then
  say "another bench/run.sh or bench/profile.sh holds $bench/.run/lock; waiting (up to 60 min)"
  flock -w 3600 9 || { echo "gave up waiting for the lock" >&2; exit 1; }
fi

# (a) tools
missing=""
for tool in wrk haproxy nginx taskset perf; do
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

# (b) cswitch (CSWITCH_BIN=path benchmarks that binary instead: no build, e.g. for A/B runs)
if [ -n "${CSWITCH_BIN:-}" ]; then
  build=0
fi
if [ "$build" = 1 ]; then
  say "cargo build --release -p cswitch"
  (cd "$root" && cargo build --release -p cswitch)
fi
src_bin="${CSWITCH_BIN:-$root/target/release/cswitch}"
[ -x "$src_bin" ] || { echo "no $src_bin (build failed?)" >&2; exit 1; }
# benchmark a private copy: others may rebuild target/release/cswitch while the runs go on
mkdir -p "$bench/.run"
cswitch="$bench/.run/cswitch-bench-bin"
[ "$src_bin" -ef "$cswitch" ] || cp -f "$src_bin" "$cswitch"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty="$(git -C "$root" status --porcelain -- crates 2>/dev/null | wc -l)"

# (c) the harness writes .run/, configs/ (and would build origin/target/) next to bench.py,
# and ../shared is read-only for us: run a fresh copy under bench/.run/harness (git-ignored).
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

# the idle workload holds 10000 client connections: raise the soft fd limit (hard limit is 20000
# here); bench.py also raises every child's soft limit to the hard one
hard="$(ulimit -Hn)"
if [ "$hard" = unlimited ] || [ "$hard" -ge 20000 ]; then ulimit -n 20000; else ulimit -n "$hard"; fi
if [ "$(ulimit -n)" -lt 10300 ]; then
  say "warning: fd limit $(ulimit -n) is below the ~10300 the idle workload needs"
fi

common=(
  --proxy direct,haproxy,nginx,custom
  --proxy-threads 1
  --proxy-config-template "$(realpath "${CSWITCH_TEMPLATE:-$bench/cswitch.toml.tmpl}")"
  --proxy-cmd "$cswitch run --config {config}"
  --reps "$reps" --duration "$duration"
  --syscalls --summary --label "$label" --out "$out"
)
# shellcheck disable=SC2206 # BENCH_ARGS is split on spaces on purpose
[ -n "${BENCH_ARGS:-}" ] && common+=(${BENCH_ARGS})
harness_run() {
  say "python3 bench.py $*"
  # CSV rows also go to stdout; the file given by --out is what we report from
  (cd "$harness" && python3 bench.py "${common[@]}" "$@" >/dev/null)
}

say "label $label, reps $reps, duration ${duration}s, CSV $out"
for w in $workloads; do
  case "$w" in
    ka) harness_run --workload ka-small --conns 64 ;;
    ka256) harness_run --workload ka-small --conns 256 ;;
    close) harness_run --workload close-small --conns 64 ;;
    ka10k) harness_run --workload ka-10k --conns 64 ;;
    # no "direct" here: it would measure the origin, which is not restarted between runs and
    # keeps the memory of the previous run's connections (its "before" RSS then already
    # includes them); the RSS per idle connection is a proxy metric
    idle) harness_run --workload idle --conns 10000 --proxy haproxy,nginx,custom ;;
    # the most this host allows: 20,000 descriptors per process (hard limit, not raisable
    # here), for the proxy and for the harness's client holding the connections
    idle19k) harness_run --workload idle --conns 19000 --proxy-maxconn 19500 --proxy haproxy,nginx,custom ;;
    *) echo "unknown workload $w" >&2; exit 2 ;;
  esac
done

# (d) tables
echo "cswitch: $src_bin (sha256 $(sha256sum "$cswitch" | cut -c1-12)); tree at commit $commit with $dirty uncommitted path(s) under crates/ when the run started; reps $reps, ${duration}s per run (+2 s warm-up)."
echo
python3 "$bench/table.py" --label "$label" "$out"
say "CSV: $out (label $label)"
