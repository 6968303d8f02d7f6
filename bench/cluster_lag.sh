#!/usr/bin/env bash
# Replication lag of STICKY_IP entries under a write rate, through a running switch
# (issue 13): starts one `cswitch run` node with [cluster] on 127.0.0.90, then runs
# crates/cluster/examples/lag.rs as a second member on 127.0.0.91 writing RATE entries per
# second for SECS seconds, and prints p50/p99/max lag as the node applied them.
#
#   bench/cluster_lag.sh [RATE] [SECS]      (defaults 1000 5)
#
# Builds the binary and the example (release; PROFILE=debug for a debug build); stops the
# node it started (by PID) at the end.
set -euo pipefail
rate=${1:-1000}
secs=${2:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
work=$(mktemp -d)
trap 'kill "$node_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
profile=${PROFILE:-release}
flag=--release
[ "$profile" = debug ] && flag=
(cd "$root" && cargo build $flag -q -p cswitch && cargo build $flag -q -p cswitch-cluster --example lag)
token=cluster-lag-admin-token
key=cluster-lag-gossip-key-0123
port() { python3 -c "import socket,sys; s=socket.socket(socket.AF_INET, getattr(socket, sys.argv[2])); s.bind((sys.argv[1],0)); print(s.getsockname()[1])" "$1" "$2"; }
gossip="127.0.0.90:$(port 127.0.0.90 SOCK_DGRAM)"
writer="127.0.0.91:$(port 127.0.0.91 SOCK_DGRAM)"
admin="127.0.0.90:$(port 127.0.0.90 SOCK_STREAM)"
cat > "$work/node.toml" <<TOML
[global]
workers = 1
[access_log]
enabled = false
[admin]
bind = "$admin"
token = "$token"
[cluster]
node = "lag-node"
bind = "$gossip"
key = "$key"
[timeouts]
sticky_ip = "10m"
[[listener]]
name = "web"
bind = "127.0.0.90:0"
default_group = "web"
[[group]]
name = "web"
scheduler = "rr"
servers = [ { name = "s1", addr = "127.0.0.1:9" } ]
TOML
"$target/$profile/cswitch" run -c "$work/node.toml" 2>"$work/node.log" &
node_pid=$!
for _ in $(seq 50); do grep -q "admin listener" "$work/node.log" && break; sleep 0.1; done
"$target/$profile/examples/lag" "$writer" "$gossip" "$admin" "$token" "$key" "$rate" "$secs"
