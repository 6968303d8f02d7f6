#!/usr/bin/env python3
"""Resident memory per client connection that has not sent a request.

Usage: bench/conn_memory.py CSWITCH_BINARY silent|trickle [N]

Starts `cswitch run` with one worker on 127.0.0.1:18080 (config written to a temporary
directory), opens N connections (default 4000) that send nothing (`silent`) or the start of
a head (`trickle`), reads the switch's VmRSS, closes them, three rounds. Loopback only; it
ends the switch it started.
"""
import os, resource, socket, subprocess, sys, tempfile, time

CONFIG = """[global]
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

def main():
    binary, mode = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 4000
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    conf = os.path.join(tempfile.mkdtemp(), "cswitch.toml")
    with open(conf, "w") as f:
        f.write(CONFIG)
    p = subprocess.Popen([binary, "run", "--config", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        def rss():
            for line in open(f"/proc/{p.pid}/status"):
                if line.startswith("VmRSS"):
                    return int(line.split()[1])
        base = rss()
        for r in range(3):
            socks = []
            for _ in range(n):
                s = socket.create_connection(("127.0.0.1", 18080))
                if mode == "trickle":
                    s.send(b"GET / HTTP/1.1\r\nHo")
                socks.append(s)
            time.sleep(1.0)
            full = rss()
            for s in socks:
                s.close()
            time.sleep(1.5)
            print(f"round {r}: base {base} KiB, with {n}: {full} KiB, "
                  f"per connection {(full - base) * 1024 / n:.0f} B, after close {rss()} KiB")
    finally:
        p.terminate()
        p.wait()

if __name__ == "__main__":
    main()
