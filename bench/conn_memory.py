#!/usr/bin/env python3
"""Resident memory per client connection that has not sent a request, for cswitch and peers.

Usage: bench/conn_memory.py PROXY silent|trickle [N]
  PROXY: a cswitch binary (e.g. target/release/cswitch), or `haproxy` / `nginx` (from PATH)

Starts the proxy with one worker on 127.0.0.1:18080 (config written to a temporary
directory), opens N connections (default 4000) that send nothing (`silent`) or the start of
a head (`trickle`), reads the proxy's resident memory (VmRSS summed over its processes),
closes them; three rounds. Loopback only; it ends the processes it started.
"""
import os, resource, socket, subprocess, sys, tempfile, time

CSWITCH = """[global]
workers = 1
[access_log]
enabled = false
[limits]
max_client_connections = 100000
[[listener]]
name = "web"
bind = "127.0.0.1:18080"
default_group = "web"
[[group]]
name = "web"
servers = [ { name = "s1", addr = "127.0.0.1:18081" } ]
"""

HAPROXY = """global
    maxconn 9000
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-request 60s
frontend web
    bind 127.0.0.1:18080
    default_backend b
backend b
    server s1 127.0.0.1:18081
"""

NGINX = """daemon off;
worker_processes 1;
worker_rlimit_nofile 20000;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    client_header_timeout 60s;
    server {{
        listen 127.0.0.1:18080;
        location / {{ proxy_pass http://127.0.0.1:18081; }}
    }}
}}
"""


def start(proxy, d):
    if proxy == "haproxy":
        conf = os.path.join(d, "haproxy.cfg")
        open(conf, "w").write(HAPROXY)
        return subprocess.Popen(["haproxy", "-db", "-f", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if proxy == "nginx":
        conf = os.path.join(d, "nginx.conf")
        open(conf, "w").write(NGINX.format(dir=d))
        return subprocess.Popen(["nginx", "-c", conf, "-p", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conf = os.path.join(d, "cswitch.toml")
    open(conf, "w").write(CSWITCH)
    return subprocess.Popen([proxy, "run", "--config", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def tree(pid):
    """The process and its children (nginx's worker)."""
    pids = [pid]
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                stat = open(f"/proc/{p}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                pids.append(int(p))
    return pids


def rss(pid):
    total = 0
    for p in tree(pid):
        try:
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmRSS"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def main():
    proxy, mode = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 4000
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    p = start(proxy, tempfile.mkdtemp())
    try:
        time.sleep(1)
        base = rss(p.pid)
        for r in range(3):
            socks = []
            for _ in range(n):
                s = socket.create_connection(("127.0.0.1", 18080))
                if mode == "trickle":
                    s.send(b"GET / HTTP/1.1\r\nHo")
                socks.append(s)
            time.sleep(1.0)
            full = rss(p.pid)
            for s in socks:
                s.close()
            time.sleep(1.5)
            print(f"{proxy} {mode} round {r}: base {base} KiB, with {n}: {full} KiB, "
                  f"per connection {(full - base) * 1024 / n:.0f} B, after close {rss(p.pid)} KiB")
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    main()
