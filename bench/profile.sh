#!/usr/bin/env bash
# Per-syscall breakdown per request for cswitch and the peers, under the same load as the
# harness (wrk -t1 on CPU 0; proxy + origin on CPU 1; nice -10; configs the harness generated).
#
# Usage: bench/profile.sh [--conns N] [--duration S] [--path /app/small] [--close] [--areas] [PROXY ...]
#        PROXY: cswitch haproxy nginx (default: all three)
# Needs a previous bench/run.sh (for bench/.run/harness: origin binary and generated configs).
#
# Two bounded wrk runs per proxy, each after a 2 s warm-up:
#  1. perf stat with one syscalls:sys_enter_<name> tracepoint per syscall (exact counts, low overhead)
#     → calls per request, per syscall;
#  2. perf trace -s --errno-summary (heavier: use only for the errno split, e.g. reads that
#     returned EAGAIN) → its raw summary is saved next to the table.
#  3. with --areas: perf record (2 kHz, no call graphs) → bench/areas.py's table of where the
#     CPU goes (kernel TCP/IP, sleeping and waking, io_uring, parsing, tokio, ...).
# Output: markdown on stdout; raw perf output in bench/.run/profile/.
# Every process is started here, recorded by PID and stopped by PID.
set -euo pipefail
bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$bench/.." && pwd)"
h="$bench/.run/harness"
conns=64
duration=5
path=/app/small
close=0
areas=0
proxies=()
while [ $# -gt 0 ]; do
  case "$1" in
    --conns) conns="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --path) path="$2"; shift 2 ;;
    --close) close=1; shift ;;
    --areas) areas=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) proxies+=("$1"); shift ;;
  esac
done
[ ${#proxies[@]} -eq 0 ] && proxies=(cswitch haproxy nginx)
[ "$duration" -le 60 ] || { echo "--duration is capped at 60 s" >&2; exit 2; }
for f in "$h/origin/target/release/bench-origin" "$h/configs/custom-rules1.conf" \
         "$h/configs/haproxy-rules1.cfg" "$h/configs/nginx-proxy-prefix-rules1.conf"; do
  [ -e "$f" ] || { echo "missing $f: run bench/run.sh (QUICK=1 is enough) first" >&2; exit 1; }
done
mkdir -p "$bench/.run"
exec 9>"$bench/.run/lock"   # same lock as bench/run.sh: one benchmark at a time
if ! flock -n 9; then
  echo "waiting for $bench/.run/lock (another bench/run.sh or profile.sh is running)" >&2
  flock -w 3600 9 || exit 1
fi
out="$bench/.run/profile"
csbin="$bench/.run/cswitch-bench-bin"   # the copy bench/run.sh benchmarked
[ -x "$csbin" ] || csbin="$root/target/release/cswitch"
mkdir -p "$out" "$h/.run"
for d in client_body proxy fastcgi uwsgi scgi; do mkdir -p "$h/.run/nginx-proxy-$d"; done
ulimit -n 20000 2>/dev/null || true

SYSCALLS="read write readv writev recvfrom sendto recvmsg sendmsg epoll_wait epoll_pwait epoll_pwait2
epoll_ctl accept accept4 close shutdown socket connect setsockopt getsockopt getsockname getpeername
ioctl fcntl futex io_uring_enter sched_yield timerfd_settime eventfd2 splice sendfile mmap munmap madvise brk
clock_nanosleep nanosleep rt_sigprocmask clock_gettime timer_settime getrandom"
events=""
for s in $SYSCALLS; do
  [ -d "/sys/kernel/tracing/events/syscalls/sys_enter_$s" ] && events="$events,syscalls:sys_enter_$s"
done
events="raw_syscalls:sys_enter,context-switches$events"

PIDS=()
stop_pid() {  # stop one process we started, by PID: TERM, then KILL after 3 s
  local p="$1" i
  kill -TERM "$p" 2>/dev/null || return 0
  for i in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
}
cleanup() { local p; for p in "${PIDS[@]}"; do stop_pid "$p"; done; PIDS=(); }
trap cleanup EXIT

hdr=(-H "Host: bench.local")
[ "$close" = 1 ] && hdr+=(-H "Connection: close")
url="http://127.0.0.1:19100$path"
wrk_run() {  # wrk_run SECONDS → wrk output (bounded by timeout)
  timeout $(( $1 + 20 )) nice -n -10 taskset -c 0 wrk -t 1 -c "$conns" -d "${1}s" --latency --timeout 10s "${hdr[@]}" "$url"
}

nice -n -10 taskset -c 1 "$h/origin/target/release/bench-origin" --threads 1 \
  --listen 127.0.0.1:19101 --listen 127.0.0.1:19102 >"$out/origin.log" 2>&1 &
PIDS+=($!)
sleep 0.3

echo "Per-request syscalls, $conns connections, GET $path$([ "$close" = 1 ] && echo ', Connection: close'), ${duration}s per proxy (perf stat tracepoints)."
echo
declare -A COUNTS REQS
for px in "${proxies[@]}"; do
  case "$px" in
    cswitch) cmd=("$csbin" run --config "$h/configs/custom-rules1.conf") ;;
    haproxy) cmd=(haproxy -db -f "$h/configs/haproxy-rules1.cfg") ;;
    nginx) cmd=(nginx -p "$h/.run" -e "$h/.run/nginx-proxy-error.log" -c "$h/configs/nginx-proxy-prefix-rules1.conf" -g "daemon off;") ;;
    *) echo "unknown proxy $px" >&2; exit 2 ;;
  esac
  nice -n -10 taskset -c 1 "${cmd[@]}" >"$out/proxy-$px.log" 2>&1 &
  ppid=$!
  PIDS+=($ppid)
  for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/19100) 2>/dev/null && break; sleep 0.1; done
  sleep 0.3
  # the proxy's process tree (nginx: master + worker)
  tree="$ppid"
  for c in $(cat /proc/$ppid/task/*/children 2>/dev/null); do tree="$tree,$c"; done

  wrk_run 2 >/dev/null
  perf stat -x, -o "$out/stat-$px.csv" -e "$events" -p "$tree" &
  perf_pid=$!
  PIDS+=($perf_pid)
  sleep 0.3
  wrk_run "$duration" >"$out/wrk-stat-$px.txt"
  kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true

  wrk_run 2 >/dev/null
  timeout $(( duration + 20 )) perf trace -s --errno-summary -p "$tree" -o "$out/trace-$px.txt" -- sleep $(( duration + 1 )) &
  trace_pid=$!
  PIDS+=($trace_pid)
  sleep 0.5
  wrk_run "$duration" >"$out/wrk-trace-$px.txt"
  wait "$trace_pid" 2>/dev/null || true

  if [ "$areas" = 1 ]; then
    wrk_run 2 >/dev/null
    timeout $(( duration + 20 )) perf record -q -F 2000 -p "$tree" -o "$out/perf-$px.data" -- sleep "$duration" \
      >/dev/null 2>&1 &
    rec_pid=$!
    PIDS+=($rec_pid)
    sleep 0.3
    wrk_run "$duration" >"$out/wrk-areas-$px.txt"
    wait "$rec_pid" 2>/dev/null || true
  fi

  stop_pid "$ppid"
  reqs=$(grep -oE '^ *[0-9]+ requests in' "$out/wrk-stat-$px.txt" | grep -oE '[0-9]+' | head -1)
  REQS[$px]="$reqs"
  echo "- $px: $reqs requests in the counted run; $(grep -E 'Requests/sec' "$out/wrk-stat-$px.txt" | tr -s ' ')"
done
echo

# one table: syscall × proxy, calls per request
python3 - "$out" "${proxies[@]}" <<'EOF'
import re, sys
out, proxies = sys.argv[1], sys.argv[2:]
counts, reqs, order = {}, {}, []
for px in proxies:
    txt = open("%s/wrk-stat-%s.txt" % (out, px)).read()
    reqs[px] = int(re.search(r"(\d+) requests in", txt).group(1))
    for line in open("%s/stat-%s.csv" % (out, px)):
        v = line.strip().split(",")
        if len(v) < 3 or not v[0].strip().isdigit():
            continue
        name = v[2].replace("syscalls:sys_enter_", "").replace("raw_syscalls:sys_enter", "ALL syscalls")
        counts.setdefault(name, {})[px] = int(v[0])
        if name not in order:
            order.append(name)
print("| syscall | " + " | ".join(proxies) + " |")
print("|---|" + "---|" * len(proxies))
listed = {px: 0 for px in proxies}
for name in order:
    c = counts[name]
    if not any(c.get(px, 0) / reqs[px] >= 0.005 for px in proxies):
        continue
    cells = []
    for px in proxies:
        v = c.get(px, 0) / reqs[px]
        cells.append("%.3f" % v)
        if name not in ("ALL syscalls", "context-switches"):
            listed[px] += v
    bold = "**" if name == "ALL syscalls" else ""
    print("| %s%s%s | %s |" % (bold, name, bold, " | ".join(bold + x + bold for x in cells)))
print("| (sum of the rows above) | " + " | ".join("%.3f" % listed[px] for px in proxies) + " |")
EOF
echo
echo "errno split (perf trace -s --errno-summary; heavier, so its rates differ slightly): $out/trace-<proxy>.txt"
for px in "${proxies[@]}"; do
  echo
  echo "#### $px"
  echo
  echo '```'
  reqs=$(grep -oE '[0-9]+ requests in' "$out/wrk-trace-$px.txt" | grep -oE '^[0-9]+' | head -1)
  echo "requests during trace: $reqs"
  grep -E '^\s+(syscall|-----|[a-z_0-9]+\s+[0-9])|^\s+E[A-Z]+:|errno' "$out/trace-$px.txt" | head -60
  echo '```'
done
if [ "$areas" = 1 ]; then
  echo
  echo "Where the CPU goes (percent of each proxy's samples, perf record at 2 kHz; bench/areas.py):"
  echo
  cols=()
  for px in "${proxies[@]}"; do cols+=("$px=$out/perf-$px.data"); done
  python3 "$bench/areas.py" "${cols[@]}"
fi
