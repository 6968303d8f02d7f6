#!/usr/bin/env bash
# Instructions per request (callgrind) for HTTP/2 over TLS with 1 and 100 streams per
# connection and for plain HTTP/1.1 keep-alive, through one cswitch worker in front of two
# loopback bench-origins (bench/protocols.py's h2 setup). Instruction counts do not depend
# on how busy the machine is, so this A/B works where timings do not (ADR 0020).
#
# Usage: bench/callgrind_h2.sh CSWITCH_BIN [ORIGIN_BIN] [REQUESTS]
#   ORIGIN_BIN: the harness's bench-origin (default: bench/.run/harness/origin/target/release/
#   bench-origin, which bench/protocols.py or bench/run.sh builds); REQUESTS: 20000.
# Output: one line per workload: name, instructions, instructions per request. Needs
# valgrind, h2load (nghttp2-client), openssl, curl. Every process is started here and
# stopped by PID; every load run is bounded in count and time.
set -euo pipefail
bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$(realpath "${1:?usage: bench/callgrind_h2.sh CSWITCH_BIN [ORIGIN_BIN] [REQUESTS]}")"
origin="${2:-$bench/.run/harness/origin/target/release/bench-origin}"
n="${3:-20000}"
[ -x "$origin" ] || { echo "no bench-origin at $origin (run bench/protocols.py once, or pass its path)" >&2; exit 1; }
d="$(mktemp -d /tmp/cswitch-callgrind-h2.XXXXXX)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/site.key" -out "$d/site.pem" \
  -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
cat > "$d/cswitch.toml" <<CONF
[global]
workers = 1
grace_period = "0s"
[access_log]
enabled = false
[limits]
pool_idle_per_server = 1024
[timeouts]
client_idle = "120s"
client_io = "120s"
server_response = "120s"
[[listener]]
name = "h2"
bind = "127.0.0.1:29443"
default_group = "app"
tls = { cert = "$d/site.pem", key = "$d/site.key" }
[[listener]]
name = "h1"
bind = "127.0.0.1:29080"
default_group = "app"
[[group]]
name = "app"
scheduler = "rr"
reuse = "always"
servers = [ { name = "o0", addr = "127.0.0.1:29401" }, { name = "o1", addr = "127.0.0.1:29402" } ]
CONF
"$origin" --listen 127.0.0.1:29401 --listen 127.0.0.1:29402 > "$d/origin.log" 2>&1 &
opid=$!
valgrind --tool=callgrind --callgrind-out-file="$d/cg.%p.out" "$bin" run --config "$d/cswitch.toml" > "$d/cswitch.log" 2>&1 &
cpid=$!
trap 'kill $cpid $opid 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sk --max-time 5 https://127.0.0.1:29443/app/small -o /dev/null && break
  sleep 1
done
measure() { # name, h2load arguments
  local name=$1; shift
  timeout 300 h2load -n $((n / 10)) "$@" > /dev/null 2>&1    # warm-up (pools, free lists)
  callgrind_control -z $cpid > /dev/null 2>&1
  timeout 900 h2load -n "$n" "$@" > "$d/$name.h2load" 2>&1
  callgrind_control -d "$name" $cpid > /dev/null 2>&1
  grep -q "$n succeeded" "$d/$name.h2load" || { echo "$name: not every request succeeded" >&2; cat "$d/$name.h2load" >&2; exit 1; }
  local ir
  ir=$(grep -h '^summary:' "$d"/cg.$cpid.out.* | tail -1 | awk '{print $2}')
  echo "$name $ir $((ir / n))"
}
measure h2-1 -c 4 -m 1 https://127.0.0.1:29443/app/small
measure h2-100 -c 4 -m 100 https://127.0.0.1:29443/app/small
measure h1 --h1 -c 4 -m 1 http://127.0.0.1:29080/app/small
echo "callgrind files: $d"
