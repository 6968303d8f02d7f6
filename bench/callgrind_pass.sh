#!/usr/bin/env bash
# User-space instructions per TLS passthrough connection (callgrind): one cswitch worker
# routing on the SNI (bench/protocols.py's pass-new listener and rule) in front of nginx
# terminating TLS, h2load --h1 opening connections in rounds of 20 (one request each).
# Instruction counts do not depend on how busy the machine is, so this A/B works where
# timings do not (ADR 0024). Connections without an SNI (h2load sends none for an IP
# address) go to the same server by the listener's default group; the rule is evaluated
# all the same.
#
# Usage: bench/callgrind_pass.sh CSWITCH_BIN [ROUNDS]   (ROUNDS of 20 connections: 50)
# Output: connections, instructions, instructions per connection. Needs valgrind, h2load
# (nghttp2-client), nginx, openssl, curl. Every process is started here and stopped by PID;
# every load run is bounded in count and time.
set -euo pipefail
bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$(realpath "${1:?usage: bench/callgrind_pass.sh CSWITCH_BIN [ROUNDS]}")"
rounds="${2:-50}"
d="$(mktemp -d /tmp/cswitch-callgrind-pass.XXXXXX)"
python3 - "$d" "$bench" <<'PY'
import os, sys
d, bench = sys.argv[1], sys.argv[2]
sys.path.insert(0, bench)
import protocols as p
cert, key = p.certificate(d)
ports = lambda text: text.replace("19400", "29400").replace("19403", "29403")
open(os.path.join(d, "pass.rules"), "w").write('R1: if (tls.sni == "127.0.0.1") { routeTo(tls); }\n')
config = ports(p.cswitch_config(d, "pass-new", cert, key)).replace('default_group = "none"', 'default_group = "tls"')
open(os.path.join(d, "cswitch.toml"), "w").write(config)
open(os.path.join(d, "origin.conf"), "w").write(ports(p.tls_origin_config(d, cert, key)))
PY
nginx -g "daemon off;" -c "$d/origin.conf" > "$d/origin.log" 2>&1 &
opid=$!
valgrind --tool=callgrind --callgrind-out-file="$d/cg.%p.out" "$bin" run --config "$d/cswitch.toml" > "$d/cswitch.log" 2>&1 &
cpid=$!
trap 'kill $cpid $opid 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sk --max-time 5 https://127.0.0.1:29400/ -o /dev/null && break
  sleep 1
done
round() { timeout 60 h2load --h1 -n 20 -c 20 https://127.0.0.1:29400/ > "$d/round.out" 2>&1 || true
  grep -o '[0-9]* succeeded' "$d/round.out" | cut -d' ' -f1; }
for _ in $(seq 10); do round > /dev/null; done   # warm-up (free lists, timer wheel)
callgrind_control -z $cpid > /dev/null 2>&1
done_conns=0
for _ in $(seq "$rounds"); do done_conns=$((done_conns + $(round))); done
callgrind_control -d pass $cpid > /dev/null 2>&1
[ "$done_conns" -eq $((rounds * 20)) ] || { echo "only $done_conns of $((rounds * 20)) connections succeeded" >&2; exit 1; }
ir=$(grep -h '^summary:' "$d"/cg.$cpid.out.* | tail -1 | awk '{print $2}')
echo "pass-new $done_conns $ir $((ir / done_conns))"
echo "callgrind files: $d"
