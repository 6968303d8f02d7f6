#!/usr/bin/env python3
"""Resident memory per client connection, for cswitch and peers.

Usage: bench/conn_memory.py PROXY silent|trickle|idle [N] [--rounds R] [--config-extra TOML]
                           [--template bench/cswitch.toml.tmpl]
  PROXY: a cswitch binary (e.g. target/release/cswitch), or `haproxy` / `nginx` (from PATH)

Starts the proxy with one worker on 127.0.0.1:18080 (config written to a temporary
directory), opens N connections (default 4000), reads the proxy's resident memory (VmRSS
summed over its processes), closes them; three rounds (`--rounds`). The connections:
  silent   connected, nothing sent;
  trickle  the start of a head (`GET / HTTP/1.1\\r\\nHo`), then nothing;
  idle     one keep-alive request (`GET /app/small`, 100-byte answer from a local origin
           this script starts on 127.0.0.1:18081), answered, then held silent: the idle
           keep-alive client connection of the shared harness's `idle` workload.
Clients run in child processes of at most 15,000 connections each (the hard fd limit here is
20,000 per process), and past 20,000 connections they connect from 127.0.0.2, 127.0.0.3, …
(one source address gives ~28,000 ephemeral ports towards one listener). The proxy itself is
one process: it can hold at most its fd limit (`ulimit -Hn`) of connections.
Loopback only; it ends the processes it started.
"""
import asyncio, os, resource, socket, subprocess, sys, tempfile, time

LISTEN, ORIGIN = 18080, 18081
PER_CHILD = 15000
PER_SOURCE = 20000
HOLD = 3.0  # seconds between the last connection opened and the reading, as the harness's --idle-hold
REQUEST = b"GET /app/small HTTP/1.1\r\nHost: bench\r\n\r\n"

CSWITCH = """[global]
workers = 1
[access_log]
enabled = false
[limits]
max_client_connections = 1000000
[timeouts]
client_idle = "120s"
[[listener]]
name = "web"
bind = "127.0.0.1:18080"
default_group = "web"
[[group]]
name = "web"
servers = [ { name = "s1", addr = "127.0.0.1:18081" } ]
"""

# `no strict-limits`: HAProxy would want two fds per connection and refuse to start above
# the hard limit; idle client connections need only one (as the shared harness does).
HAPROXY = """global
    maxconn {maxconn}
    nbthread 1
    no strict-limits
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    timeout http-request 120s
    timeout http-keep-alive 120s
    http-reuse always
frontend web
    bind 127.0.0.1:18080 backlog 4096
    default_backend b
backend b
    server s1 127.0.0.1:18081
"""

NGINX = """daemon off;
worker_processes 1;
worker_rlimit_nofile {nofile};
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections {nofile}; }}
http {{
    access_log off;
    client_header_timeout 120s;
    keepalive_timeout 120s;
    keepalive_requests 100000;
    upstream b {{ server 127.0.0.1:18081; keepalive 64; }}
    server {{
        listen 127.0.0.1:18080 backlog=4096;
        location / {{ proxy_pass http://b; proxy_http_version 1.1; proxy_set_header Connection ""; }}
    }}
}}
"""


def start(proxy, d, n, extra, template):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if proxy == "haproxy":
        conf = os.path.join(d, "haproxy.cfg")
        open(conf, "w").write(HAPROXY.format(maxconn=n + 100))
        return subprocess.Popen(["haproxy", "-db", "-f", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if proxy == "nginx":
        conf = os.path.join(d, "nginx.conf")
        open(conf, "w").write(NGINX.format(dir=d, nofile=hard))
        return subprocess.Popen(["nginx", "-c", conf, "-p", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conf = os.path.join(d, "cswitch.toml")
    text = CSWITCH + extra
    if template:
        text = open(template).read()
        for k, v in (("threads", "1"), ("listen", f"127.0.0.1:{LISTEN}"),
                     ("backend1", f"127.0.0.1:{ORIGIN}"), ("backend2", f"127.0.0.1:{ORIGIN}")):
            text = text.replace("{" + k + "}", v)
    open(conf, "w").write(text)
    return subprocess.Popen([proxy, "run", "--config", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# --- the origin: keep-alive, 100-byte answers (its memory is not measured) ---------------

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\n" + b"x" * 100


async def origin_conn(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if not head:
                break
            writer.write(ANSWER)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    writer.close()


async def origin_main():
    server = await asyncio.start_server(origin_conn, "127.0.0.1", ORIGIN, backlog=4096)
    async with server:
        await server.serve_forever()


# --- the clients -----------------------------------------------------------------------

def connect(index):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    source = index // PER_SOURCE
    if source:
        # the port is chosen at connect, per (source, destination): ~28k ports per source
        s.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24), 1)
        s.bind((f"127.0.0.{1 + source}", 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", LISTEN))
    return s


def one_request(s):
    s.sendall(REQUEST)
    got = b""
    while True:
        head, sep, body = got.partition(b"\r\n\r\n")
        if sep:
            length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n")
                           if l.lower().startswith(b"content-length:")), 0)
            if len(body) >= length:
                return
        b = s.recv(4096)
        if not b:
            raise OSError("closed before the answer")
        got += b


def client_child(mode, first, count, ready, release):
    """Opens connections first..first+count, says how many on `ready`, holds them until
    `release` closes."""
    socks, errors = [], 0
    for i in range(first, first + count):
        try:
            s = connect(i)
            if mode == "trickle":
                s.sendall(b"GET / HTTP/1.1\r\nHo")
            elif mode == "idle":
                one_request(s)
            socks.append(s)
        except OSError:
            errors += 1
    os.write(ready, f"{len(socks)} {errors}\n".encode())
    os.read(release, 1)  # returns at EOF: the parent closed its end
    for s in socks:
        s.close()


def open_conns(mode, n):
    """Forks the client children; returns (opened, errors, release fds, pids)."""
    kids, opened, errors = [], 0, 0
    for first in range(0, n, PER_CHILD):
        ready_r, ready_w = os.pipe()
        rel_r, rel_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            os.close(rel_w)
            for _, w, _ in kids:
                os.close(w)
            try:
                client_child(mode, first, min(PER_CHILD, n - first), ready_w, rel_r)
            finally:
                os._exit(0)
        os.close(ready_w)
        os.close(rel_r)
        line = b""
        deadline = time.time() + 300
        while not line.endswith(b"\n") and time.time() < deadline:
            chunk = os.read(ready_r, 64)
            if not chunk:
                break
            line += chunk
        os.close(ready_r)
        o, e = (int(x) for x in line.split()) if line.strip() else (0, min(PER_CHILD, n - first))
        opened, errors = opened + o, errors + e
        kids.append((pid, rel_w, o))
    return opened, errors, kids


def close_conns(kids):
    for pid, w, _ in kids:
        os.close(w)
    for pid, _, _ in kids:
        os.waitpid(pid, 0)


# --- measuring -------------------------------------------------------------------------

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


def wait_port(port, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def main():
    args = sys.argv[1:]
    if args[:1] == ["--origin"]:
        asyncio.run(origin_main())
        return
    rounds, extra, template = 3, "", None
    if "--template" in args:
        i = args.index("--template")
        template = args[i + 1]
        del args[i:i + 2]
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i:i + 2]
    if "--config-extra" in args:
        i = args.index("--config-extra")
        extra = "\n" + args[i + 1].replace("\\n", "\n") + "\n"
        del args[i:i + 2]
    proxy, mode = args[0], args[1]
    n = int(args[2]) if len(args) > 2 else 4000
    assert mode in ("silent", "trickle", "idle"), mode
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    origin = None
    if mode == "idle":
        origin = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--origin"])
        if not wait_port(ORIGIN):
            sys.exit("the origin did not start")
    p = start(proxy, tempfile.mkdtemp(), n, extra, template)
    try:
        if not wait_port(LISTEN):
            sys.exit(f"{proxy} did not start")
        if mode == "idle":
            # the proxy's first request: its lazily built state (pools, buffers) before the base
            s = connect(0)
            one_request(s)
            s.close()
        time.sleep(1)
        base = rss(p.pid)
        for r in range(rounds):
            opened, errors, kids = open_conns(mode, n)
            time.sleep(HOLD)
            full = rss(p.pid)
            close_conns(kids)
            time.sleep(1.5)
            print(f"{proxy} {mode} round {r}: base {base} KiB, with {opened} of {n} "
                  f"({errors} failed): {full} KiB, per connection {(full - base) * 1024 / max(1, opened):.0f} B, "
                  f"after close {rss(p.pid)} KiB", flush=True)
    finally:
        p.terminate()
        p.wait()
        if origin:
            origin.terminate()
            origin.wait()


if __name__ == "__main__":
    main()
