#!/usr/bin/env python3
"""cswitch, HAProxy and nginx side by side on the rows the shared harness does not have:
TLS termination, TLS passthrough routed on SNI, and POST bodies (issue 14).

Usage: bench/protocols.py CSWITCH_BIN [SECONDS] [REPS] [ROWS]
  SECONDS per run (default 5), REPS interleaved repetitions (default 3), ROWS comma-separated
  (default all): tls-ka, tls-new, tls-resumed, pass-new, post64k

Layout as the shared harness's (../shared/bench/README.md): the load generator on CPU 0, the
proxy and the origins on CPU 1, every proxy single-threaded (cswitch workers 1, HAProxy
nbthread 1, nginx worker_processes 1), two loopback origins (the harness's bench-origin, plain
HTTP) in round robin with keep-alive pools toward them. One ECDSA P-256 certificate for every
TLS row; TLS 1.3 with X25519 and TLS_AES_256_GCM_SHA384 (what the OpenSSL clients negotiate with
all three; nginx 1.22 is told to offer TLS 1.3, which its defaults leave out).

Rows:
  tls-ka       wrk, keep-alive over TLS, GET 100 B, 64 connections: req/s, proxy CPU µs/req
  tls-new      wrk, a new TLS connection per request (a full handshake each), 64 connections:
               handshakes/s, proxy CPU µs per handshake
  tls-resumed  `openssl s_time -reuse`: one client resuming its session on each new
               connection (serial): connections/s, proxy CPU µs per connection
  pass-new     wrk, a new TLS connection per request through TLS passthrough routed on the SNI
               (the origin is nginx terminating TLS on CPU 1): connections/s, proxy CPU µs
  post64k      wrk, keep-alive POST with a 64 KiB body, 64 connections: req/s, proxy CPU µs/req
  h2-1         h2load, HTTP/2 over TLS (ALPN h2), 64 connections × 1 stream: req/s, CPU µs/req
  h2-100       h2load, HTTP/2 over TLS, 8 connections × 100 concurrent streams: req/s, CPU µs/req

The proxy's CPU is user + system time of its processes (nginx: master and worker) over the
run, from /proc. Every process is started and stopped by PID; loopback only; every run is
bounded by its duration and a timeout. CSWITCH_IO=epoll runs cswitch on its epoll data path
(`[global] io`; default uring), for an A/B of the same binary. Prints one markdown table per row with the median and
[min–max] over the repetitions, and cswitch's CPU ÷ each peer's, paired by repetition.
PROTOCOLS_PERF=DIR adds one run per proxy and row after the measured ones, recorded with `perf
record` (2 kHz, no call graphs) into DIR/<proxy>-<row>.data for bench/areas.py (where the CPU
goes); those runs are not in the table.
"""
import os, re, shutil, signal, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.environ.get("HARNESS", os.path.join(ROOT, "..", "shared", "bench"))
LG, PX = "0", "1"  # CPUs: load generator, proxy + origins
ORIGINS = ["127.0.0.1:19401", "127.0.0.1:19402"]
TLS_ORIGIN = "127.0.0.1:19403"
PORT = 19400
HZ = os.sysconf("SC_CLK_TCK")
ROWS = ["tls-ka", "tls-new", "tls-resumed", "pass-new", "post64k", "h2-1", "h2-100"]


def origin_binary():
    """The harness's bench-origin, built in a private copy (../shared is read-only)."""
    built = os.path.join(SHARED, "origin", "target", "release", "bench-origin")
    if os.access(built, os.X_OK):
        return built
    copy = os.path.join(HERE, ".run", "harness", "origin")
    binary = os.path.join(copy, "target", "release", "bench-origin")
    if not os.access(binary, os.X_OK):
        os.makedirs(copy, exist_ok=True)
        for f in ("Cargo.toml", "Cargo.lock"):
            shutil.copy(os.path.join(SHARED, "origin", f), copy)
        shutil.copytree(os.path.join(SHARED, "origin", "src"), os.path.join(copy, "src"), dirs_exist_ok=True)
        with open(os.path.join(copy, "Cargo.toml"), "a") as f:
            f.write("\n[workspace]\n")  # its own workspace, not the repository's it now sits in
        subprocess.run(["cargo", "build", "--release", "-q"], cwd=copy, check=True)
    return binary


def certificate(d):
    key, cert = os.path.join(d, "site.key"), os.path.join(d, "site.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True)
    with open(os.path.join(d, "site.both.pem"), "w") as both:
        both.write(open(cert).read() + open(key).read())
    return cert, key


def cswitch_config(d, row, cert, key):
    servers = ",\n".join(f'  {{ name = "o{i}", addr = "{a}" }}' for i, a in enumerate(ORIGINS))
    common = f"""[global]
workers = 1
io = "{os.environ.get('CSWITCH_IO', 'uring')}"
grace_period = "0s"
[access_log]
enabled = false
[limits]
pool_idle_per_server = 1024
[timeouts]
client_idle = "120s"
client_io = "120s"
server_response = "120s"
"""
    if row == "pass-new":
        return common + f"""[[listener]]
name = "pass"
bind = "127.0.0.1:{PORT}"
protocol = "tls"
rules = "{d}/pass.rules"
default_group = "none"
[[group]]
name = "tls"
servers = [ {{ name = "t", addr = "{TLS_ORIGIN}" }} ]
[[group]]
name = "none"
servers = [ {{ name = "n", addr = "127.0.0.1:9" }} ]
"""
    tls = f'tls = {{ cert = "{cert}", key = "{key}" }}\n' if row.startswith(("tls", "h2")) else ""
    return common + f"""[[listener]]
name = "bench"
bind = "127.0.0.1:{PORT}"
default_group = "app"
{tls}[[group]]
name = "app"
scheduler = "rr"
reuse = "always"
servers = [
{servers}
]
"""


def haproxy_config(d, row):
    servers = "\n".join(f"    server o{i} {a}" for i, a in enumerate(ORIGINS))
    head = """global
    nbthread 1
    maxconn 9000
    tune.ssl.default-dh-param 2048
defaults
    timeout connect 5s
    timeout client 120s
    timeout server 120s
"""
    if row == "pass-new":
        return head + f"""frontend pass
    mode tcp
    bind 127.0.0.1:{PORT}
    tcp-request inspect-delay 5s
    tcp-request content accept if {{ req_ssl_hello_type 1 }}
    use_backend tls if {{ req_ssl_sni -i 127.0.0.1 }}
backend tls
    mode tcp
    server t {TLS_ORIGIN}
"""
    ssl = f" ssl crt {d}/site.both.pem alpn http/1.1" if row.startswith("tls") else ""
    if row.startswith("h2"):
        ssl = f" ssl crt {d}/site.both.pem alpn h2,http/1.1"
    return head + f"""frontend bench
    mode http
    option http-keep-alive
    bind 127.0.0.1:{PORT}{ssl}
    default_backend app
backend app
    mode http
    balance roundrobin
    http-reuse always
{servers}
"""


def nginx_config(d, row, cert, key):
    head = f"""load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log;
events {{ worker_connections 20000; }}
"""
    if row == "pass-new":
        return head + f"""stream {{
    map $ssl_preread_server_name $up {{ 127.0.0.1 {TLS_ORIGIN}; default 127.0.0.1:9; }}
    server {{ listen 127.0.0.1:{PORT}; ssl_preread on; proxy_pass $up; }}
}}
"""
    servers = "\n".join(f"        server {a};" for a in ORIGINS)
    # nginx 1.22 leaves TLS 1.3 out of its default ssl_protocols: name it, as the others offer it
    ssl = (f" ssl;\n        ssl_certificate {cert};\n        ssl_certificate_key {key};\n"
           "        ssl_protocols TLSv1.2 TLSv1.3;\n"
           "        ssl_session_cache shared:SSL:10m;") if row.startswith(("tls", "h2")) else ";"
    if row.startswith("h2"):
        ssl = " http2" + ssl  # nginx 1.22: `listen … ssl http2`
    return head + f"""http {{
    access_log off;
    keepalive_timeout 120s;
    keepalive_requests 1000000;
    client_max_body_size 1m;
    upstream app {{
{servers}
        keepalive 1024;
    }}
    server {{
        listen 127.0.0.1:{PORT}{ssl}
        location / {{
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_request_buffering off;
        }}
    }}
}}
"""


def tls_origin_config(d, cert, key):
    """nginx terminating TLS and answering 100 B itself: the passthrough rows' server."""
    return f"""worker_processes 1;
pid {d}/origin-nginx.pid;
error_log {d}/origin-nginx-error.log;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    server {{
        listen {TLS_ORIGIN} ssl;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{ return 200 "{'x' * 100}"; }}
    }}
}}
"""


def start(argv, log, cpu=PX):
    return subprocess.Popen(["taskset", "-c", cpu] + argv, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def pids_of(proc):
    """The process and its children (nginx's worker)."""
    pids = [proc.pid]
    try:
        for task in os.listdir(f"/proc/{proc.pid}/task"):
            with open(f"/proc/{proc.pid}/task/{task}/children") as f:
                pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return pids


def cpu_times(proc):
    """User and system CPU seconds of the process and its children (nginx's worker)."""
    user = system = 0
    for pid in pids_of(proc):
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            user += int(fields[11])
            system += int(fields[12])
        except (OSError, IndexError):
            pass
    return user / HZ, system / HZ


def cpu_seconds(proc):
    return sum(cpu_times(proc))


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_port(port, timeout=5.0):
    import socket
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def load(row, d, seconds):
    """Runs the row's client; (completed requests or connections, errors)."""
    if row.startswith("h2"):
        return h2load(row, seconds)
    scheme = "https" if row in ("tls-ka", "tls-new", "pass-new") else "http"
    url = f"{scheme}://127.0.0.1:{PORT}/app/small"
    if row == "tls-resumed":
        out = subprocess.run(["taskset", "-c", LG, "timeout", str(seconds + 10), "openssl", "s_time", "-connect",
                              f"127.0.0.1:{PORT}", "-reuse", "-time", str(seconds), "-www", "/app/small"],
                             capture_output=True, text=True).stdout
        m = re.findall(r"(\d+) connections in [\d.]+s", out)
        return (int(m[-1]) if m else 0), (0 if m else 1)
    argv = ["taskset", "-c", LG, "timeout", str(seconds + 10), "wrk", "-t1", "-c64", f"-d{seconds}s"]
    if row in ("tls-new", "pass-new"):
        argv += ["-H", "Connection: close"]
    if row == "post64k":
        argv += ["-s", os.path.join(d, "post.lua")]
    out = subprocess.run(argv + [url], capture_output=True, text=True).stdout
    m = re.search(r"(\d+) requests in", out)
    return (int(m.group(1)) if m else 0), wrk_errors(out)


def wrk_errors(out):
    """Socket errors and non-2xx/3xx answers in wrk's output."""
    errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    bad = sum(int(x) for x in errs.groups()) if errs else 0
    return bad + (int(non2xx.group(1)) if non2xx else 0)


def h2load(row, seconds):
    """HTTP/2 over TLS (ALPN h2): 64 connections with one stream each, or 8 with 100."""
    conns, streams = (64, 1) if row == "h2-1" else (8, 100)
    out = subprocess.run(["taskset", "-c", LG, "timeout", str(seconds + 15), "h2load", "-c", str(conns), "-m",
                          str(streams), "-D", str(seconds),
                          f"https://127.0.0.1:{PORT}/app/small"], capture_output=True, text=True).stdout
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored",
                  out)
    proto = re.search(r"Application protocol: (\S+)", out)
    if not m or not proto or proto.group(1) != "h2":
        return 0, 1
    return int(m.group(4)), int(m.group(5)) + int(m.group(6))


def proxy_argv(name, d, row, cswitch):
    if name == "cswitch":
        return [cswitch, "run", "--config", os.path.join(d, f"cswitch-{row}.toml")]
    if name == "haproxy":
        return ["haproxy", "-db", "-f", os.path.join(d, f"haproxy-{row}.cfg")]
    return ["nginx", "-g", "daemon off;", "-c", os.path.join(d, f"nginx-{row}.conf")]


def write_configs(d, cert, key):
    open(os.path.join(d, "pass.rules"), "w").write(
        'R1: if (tls.sni == "127.0.0.1") { routeTo(tls); }\n')
    open(os.path.join(d, "post.lua"), "w").write(
        'wrk.method = "POST"\nwrk.body = string.rep("a", 65536)\n'
        'wrk.headers["Content-Type"] = "application/octet-stream"\n')
    for row in ROWS:
        open(os.path.join(d, f"cswitch-{row}.toml"), "w").write(cswitch_config(d, row, cert, key))
        open(os.path.join(d, f"haproxy-{row}.cfg"), "w").write(haproxy_config(d, row))
        open(os.path.join(d, f"nginx-{row}.conf"), "w").write(nginx_config(d, row, cert, key))
    open(os.path.join(d, "origin-nginx.conf"), "w").write(tls_origin_config(d, cert, key))


def one_run(name, row, d, seconds, cswitch, record=None):
    return measured(proxy_argv(name, d, row, cswitch), os.path.join(d, f"{name}-{row}.log"),
                    lambda: load(row, d, seconds), seconds, record)


def recorded(proc, path, seconds):
    """`perf record` of the proxy's processes for the load's `seconds` (bounded), or None."""
    if not path:
        return None
    pids = ",".join(str(p) for p in pids_of(proc))
    return subprocess.Popen(["timeout", str(seconds + 20), "perf", "record", "-q", "-F", "2000", "-p", pids,
                             "-o", path, "--", "sleep", str(seconds)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measured(argv, log, run_load, seconds, record=None):
    """Starts `argv` (the proxy), runs `run_load()` (→ (completed, errors)) once it listens,
    stops it: (completed per second, the proxy's CPU µs per completion, errors, of which
    user µs, of which system µs)."""
    proc = start(argv, log)
    try:
        if not wait_port(PORT):
            raise SystemExit(f"{argv[0]} did not listen: see {log}")
        time.sleep(0.3)
        perf = recorded(proc, record, seconds)
        before = cpu_times(proc)
        done, errors = run_load()
        if perf:
            perf.wait()
        user, system = (after - b for after, b in zip(cpu_times(proc), before))
        per = (lambda t: t / done * 1e6) if done else (lambda t: float("nan"))
        return done / seconds, per(user + system), errors, per(user), per(system)
    finally:
        stop(proc)
        time.sleep(0.3)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    cswitch = os.path.abspath(sys.argv[1])
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    rows = sys.argv[4].split(",") if len(sys.argv) > 4 else ROWS
    d = tempfile.mkdtemp(prefix="cswitch-protocols-")
    cert, key = certificate(d)
    write_configs(d, cert, key)
    origins = [start([origin_binary(), "--listen", a], os.path.join(d, f"origin{i}.log")) for i, a in enumerate(ORIGINS)]
    origins.append(start(["nginx", "-g", "daemon off;", "-c", os.path.join(d, "origin-nginx.conf")],
                         os.path.join(d, "origin-nginx.log")))
    print(f"scratch in {d}", file=sys.stderr)
    names = ["cswitch", "haproxy", "nginx"]
    try:
        for a in ORIGINS + [TLS_ORIGIN]:
            if not wait_port(int(a.rsplit(":", 1)[1])):
                raise SystemExit(f"origin {a} did not start (logs in {d})")
        for row in rows:
            results = {n: [] for n in names}
            for rep in range(reps):
                for name in names:  # interleaved: drift hits every proxy alike
                    results[name].append(one_run(name, row, d, seconds, cswitch))
                    print(f"{row} rep {rep + 1} {name}: {results[name][-1]}", file=sys.stderr, flush=True)
            print_row(row, results, reps)
            perf_dir = os.environ.get("PROTOCOLS_PERF")
            for name in names if perf_dir else []:  # a run of its own: sampling costs the proxy
                one_run(name, row, d, seconds, cswitch, os.path.join(perf_dir, f"{name}-{row}.data"))
    finally:
        for p in origins:
            stop(p)


def span(values, fmt):
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}–{fmt.format(max(values))}]"


def print_row(row, results, reps):
    unit = {"tls-new": "handshakes/s", "tls-resumed": "resumed conns/s", "pass-new": "conns/s"}.get(row, "req/s")
    print(f"\n#### {row}\n")
    per = "connection" if unit != "req/s" else "request"
    print(f"| proxy | {unit} | CPU µs per {per} | of which user / system µs | errors | cswitch CPU ÷ this (paired by rep) |")
    print("| --- | --- | --- | --- | --- | --- |")
    ours = [r[1] for r in results["cswitch"]]
    for name, runs in results.items():
        rate, cpu, errs = [r[0] for r in runs], [r[1] for r in runs], sum(r[2] for r in runs)
        ratio = "-" if name == "cswitch" else span([o / c for o, c in zip(ours, cpu)], "{:.2f}")
        split = f"{statistics.median(r[3] for r in runs):.1f} / {statistics.median(r[4] for r in runs):.1f}"
        print(f"| {name} | {span(rate, '{:,.0f}')} | {span(cpu, '{:.1f}')} | {split} | {errs} | {ratio} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
