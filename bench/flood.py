#!/usr/bin/env python3
"""Availability under a flood of silent connections, for cswitch and peers (issue 17).

Usage: bench/flood.py PROXY [FLOOD] [LIMIT] [SECONDS]
  PROXY: a cswitch binary (e.g. target/release/cswitch), or `haproxy` / `nginx` (from PATH)
  FLOOD: silent connections opened (default 5000), LIMIT: the proxy's connection limit
  (default 1000), SECONDS: length of the run (default 20)

Starts a small origin on 127.0.0.1:18081 and the proxy with one worker on 127.0.0.1:18080,
each proxy configured with the same connection limit and a 10 s timeout for a request's
first bytes (cswitch: max_client_connections + client_idle; HAProxy: maxconn + timeout
http-request; nginx: worker_connections + client_header_timeout). One second in, a flood
opens FLOOD connections that send nothing and keeps them open to the end; meanwhile a probe
client sends one request on a new connection every 50 ms (2 s timeout each). Prints the
share of probes answered, their latency, and the longest stretch with no probe answered.
Loopback only; every loop is bounded by SECONDS; it ends the processes it started.
"""
import http.server, os, resource, socket, subprocess, sys, tempfile, threading, time

CSWITCH = """[global]
workers = 1
[access_log]
enabled = false
[limits]
max_client_connections = {limit}
[timeouts]
client_idle = "10s"
client_head = "10s"
[[listener]]
name = "web"
bind = "127.0.0.1:18080"
default_group = "web"
[[group]]
name = "web"
servers = [ {{ name = "s1", addr = "127.0.0.1:18081" }} ]
"""

HAPROXY = """global
    maxconn {limit}
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 10s
    timeout server 10s
    timeout http-request 10s
frontend web
    bind 127.0.0.1:18080
    default_backend b
backend b
    server s1 127.0.0.1:18081
"""

NGINX = """daemon off;
worker_processes 1;
worker_rlimit_nofile 100000;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections {limit}; }}
http {{
    access_log off;
    client_header_timeout 10s;
    server {{
        listen 127.0.0.1:18080;
        location / {{ proxy_pass http://127.0.0.1:18081; }}
    }}
}}
"""


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a proxy that resets its server connections is not the origin's news


def start(proxy, d, limit):
    def conf(name, text):
        path = os.path.join(d, name)
        open(path, "w").write(text)
        return path
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if proxy == "haproxy":
        return subprocess.Popen(["haproxy", "-db", "-f", conf("h.cfg", HAPROXY.format(limit=limit))], **quiet)
    if proxy == "nginx":
        path = conf("nginx.conf", NGINX.format(dir=d, limit=limit))
        return subprocess.Popen(["nginx", "-c", path, "-p", d], **quiet)
    path = conf("cswitch.toml", CSWITCH.format(limit=limit))
    return subprocess.Popen([proxy, "run", "--config", path], **quiet)


def probe():
    """One request on a new connection: its latency in seconds, or None."""
    began = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", 18080), timeout=2) as s:
            s.settimeout(2)
            s.sendall(b"GET / HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
            got = b""
            while b"\r\n\r\nok" not in got:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
            return time.monotonic() - began if got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok") else None
    except OSError:
        return None


def flood(n, until, held):
    for _ in range(n):
        if time.monotonic() > until:
            return
        try:
            s = socket.create_connection(("127.0.0.1", 18080), timeout=1)
            held.append(s)
        except OSError:
            pass


def main():
    proxy = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 20
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    origin = QuietServer(("127.0.0.1", 18081), Origin)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    p = start(proxy, tempfile.mkdtemp(), limit)
    held = []
    try:
        time.sleep(1)
        t0 = time.monotonic()
        end = t0 + seconds
        flooder = threading.Thread(target=flood, args=(n, end, held), daemon=True)
        threading.Timer(1.0, flooder.start).start()
        results = []
        while time.monotonic() < end:
            at = time.monotonic() - t0
            results.append((at, probe()))
            time.sleep(max(0.0, 0.05 - (time.monotonic() - t0 - at)))
        ok = sorted(r for _, r in results if r is not None)
        longest, gap_start = 0.0, None
        for at, r in results:
            if r is None and gap_start is None:
                gap_start = at
            if r is not None and gap_start is not None:
                longest, gap_start = max(longest, at - gap_start), None
        if gap_start is not None:
            longest = max(longest, results[-1][0] - gap_start)
        pct = lambda q: ok[min(len(ok) - 1, int(q * len(ok)))] * 1000 if ok else float("nan")
        print(f"{proxy}: flood {len(held)}/{n} connections held, limit {limit}, {seconds:.0f} s; "
              f"probes answered {len(ok)}/{len(results)} ({100 * len(ok) / max(1, len(results)):.1f} %), "
              f"p50 {pct(0.5):.1f} ms, p99 {pct(0.99):.1f} ms, longest outage {longest:.1f} s")
    finally:
        for s in held:
            s.close()
        p.terminate()
        p.wait()
        origin.shutdown()


if __name__ == "__main__":
    main()
