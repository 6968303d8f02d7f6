#!/usr/bin/env python3
"""One-way switching against two-way (cswitch and HAProxy), in network namespaces.

Usage (root): bench/oneway.py CSWITCH_BIN [SECONDS] [SIZES]
  SECONDS per run (default 5), SIZES comma-separated response sizes (default 1k,100k,1m)
  ORIGIN_BIN=target/release/examples/origin (cargo build --release -p cswitch-testkit
  --example origin) adds the descriptor-passing rows: the testkit origin on the server takes
  handed-off connections as descriptors (`cswitch agent --pass-fd`) on a second one-way
  listener (VIP:81), against the same origin without a switch — the server's own stack
  holding the connection, with no relay.

Builds the spike's testbed (a bridge; client, switch and server namespaces; the VIP on the
switch's eth0 and on the server's lo), runs nginx on the server (port 8080, files of each
size) with `cswitch agent --handoff-listen` in front of it for hand-offs, and on the switch
`cswitch run` with a one-way listener (VIP:80) and a two-way one (VIP:8080), and HAProxy
(VIP:8081). wrk in the client namespace drives each path with keep-alive and with a new
connection per request, for each size, and the server directly (no switch: the baseline
one-way keep-alive is held to). Prints req/s and the switch process's CPU per request
(user + system time of cswitch or haproxy; softirq work, such as forwarding the client's
ACKs, is not in it); then, from the switch's /metrics, each hand-off phase's p50 and p99
and the switch CPU per hand-off. Every process is started and stopped by PID; the
namespaces are deleted at the end. Loopback-free: everything stays inside the namespaces.
"""
import os, re, subprocess, sys, tempfile, time, urllib.request

P = "cswb"
VIP = "10.202.0.100"
HOSTS = [("cl", 10), ("sw", 2), ("b1", 11)]
TOKEN = "oneway-bench-token-0123456789"
ORIGIN = os.environ.get("ORIGIN_BIN")


def sh(*argv, check=True):
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit(f"{argv}: {r.stderr.strip()}")
    return r.stdout


def ns(name):
    return P + name


def up():
    down()
    sh("ip", "netns", "add", ns("br"))
    sh("ip", "-n", ns("br"), "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", ns("br"), "link", "set", "br0", "up")
    for name, n in HOSTS:
        sh("ip", "netns", "add", ns(name))
        sh("ip", "-n", ns("br"), "link", "add", "p" + name, "type", "veth", "peer", "name", "eth0", "netns", ns(name))
        sh("ip", "-n", ns("br"), "link", "set", "p" + name, "master", "br0", "up")
        sh("ip", "-n", ns(name), "link", "set", "eth0", "address", f"02:00:00:00:01:{n:02x}")
        sh("ip", "-n", ns(name), "addr", "add", f"10.202.0.{n}/24", "dev", "eth0")
        sh("ip", "-n", ns(name), "link", "set", "eth0", "up")
        sh("ip", "-n", ns(name), "link", "set", "lo", "up")
    sh("ip", "-n", ns("sw"), "addr", "add", f"{VIP}/32", "dev", "eth0")
    for key in ["all.arp_ignore=1", "eth0.arp_ignore=1", "all.arp_announce=2", "eth0.arp_announce=2"]:
        sh("ip", "netns", "exec", ns("b1"), "sysctl", "-qw", "net.ipv4.conf." + key)
    sh("ip", "-n", ns("b1"), "addr", "add", f"{VIP}/32", "dev", "lo")


def down():
    for name in ["cl", "sw", "b1", "br"]:
        subprocess.run(["ip", "netns", "del", ns(name)], capture_output=True)


def spawn(host, argv, log):
    return subprocess.Popen(["ip", "netns", "exec", ns(host)] + argv, stdout=subprocess.DEVNULL,
                            stderr=open(log, "w"))


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url, seconds, close):
    argv = ["ip", "netns", "exec", ns("cl"), "wrk", "-t1", "-c8", f"-d{seconds}s", url]
    if close:
        argv[6:6] = ["-H", "Connection: close"]
    out = sh(*argv, check=False)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    reqs = re.search(r"(\d+) requests in", out)
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)
    return (float(rps.group(1)) if rps else 0.0, int(reqs.group(1)) if reqs else 0, errs.group(0) if errs else "")


def main():
    binary = os.path.abspath(sys.argv[1])
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    sizes = (sys.argv[3] if len(sys.argv) > 3 else "1k,100k,1m").split(",")
    d = tempfile.mkdtemp(prefix="oneway-bench-")
    os.chmod(d, 0o755)  # nginx's workers run as nobody
    www = os.path.join(d, "www")
    os.makedirs(www)
    for s in sizes:
        n = int(s[:-1]) * (1024 if s[-1] == "k" else 1 << 20)
        open(os.path.join(www, s), "wb").write(os.urandom(n))
        os.chmod(os.path.join(www, s), 0o644)
    open(os.path.join(d, "token"), "w").write(TOKEN)
    open(os.path.join(d, "nginx.conf"), "w").write(
        f"daemon off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/nginx.err;\n"
        "events { worker_connections 4096; }\n"
        f"http {{ access_log off; sendfile on; keepalive_requests 1000000; server {{ listen 8080; root {www}; }} }}\n")
    open(os.path.join(d, "cswitch.toml"), "w").write(
        "[global]\nworkers = 1\ngrace_period = \"1s\"\n[access_log]\nenabled = false\n"
        "[admin]\nbind = \"127.0.0.1:9900\"\n"
        "[oneway]\ninterface = \"eth0\"\ntoken_file = \"token\"\nhandoff_timeout = \"200ms\"\n"
        f"[[listener]]\nname = \"oneway\"\nbind = \"{VIP}:80\"\ndefault_group = \"web\"\nmode = \"one-way\"\n"
        f"[[listener]]\nname = \"twoway\"\nbind = \"{VIP}:8080\"\ndefault_group = \"web\"\n"
        "[[group]]\nname = \"web\"\nservers = [ { name = \"b1\", addr = \"10.202.0.11:8080\", "
        "agent = \"10.202.0.11:9000\", mac = \"02:00:00:00:01:0b\" } ]\n" + (
        f"[[listener]]\nname = \"oneway-fd\"\nbind = \"{VIP}:81\"\ndefault_group = \"fd\"\nmode = \"one-way\"\n"
        "[[group]]\nname = \"fd\"\nservers = [ { name = \"b1fd\", addr = \"10.202.0.11:8090\", "
        "agent = \"10.202.0.11:9001\", mac = \"02:00:00:00:01:0b\" } ]\n" if ORIGIN else ""))
    open(os.path.join(d, "haproxy.cfg"), "w").write(
        "global\n  nbthread 1\n  maxconn 4000\ndefaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n"
        f"  timeout server 30s\nfrontend f\n  bind {VIP}:8081\n  default_backend b\nbackend b\n  server b1 10.202.0.11:8080\n")
    procs = []
    try:
        up()
        procs.append(spawn("b1", ["nginx", "-c", os.path.join(d, "nginx.conf"), "-p", d], os.path.join(d, "nginx.log")))
        procs.append(spawn("b1", [binary, "agent", "--handoff-listen", "10.202.0.11:9000", "--handoff-token-file",
                                  os.path.join(d, "token"), "--local", "127.0.0.1:8080"], os.path.join(d, "agent.log")))
        if ORIGIN:
            sock = os.path.join(d, "origin.sock")
            procs.append(spawn("b1", [os.path.abspath(ORIGIN), "b1", "0.0.0.0:8090", sock], os.path.join(d, "origin.log")))
            time.sleep(0.5)
            procs.append(spawn("b1", [binary, "agent", "--handoff-listen", "10.202.0.11:9001", "--handoff-token-file",
                                      os.path.join(d, "token"), "--local", "127.0.0.1:8090", "--pass-fd", sock],
                               os.path.join(d, "agent-fd.log")))
        switch = spawn("sw", [binary, "run", "--config", os.path.join(d, "cswitch.toml")], os.path.join(d, "switch.log"))
        procs.append(switch)
        haproxy = spawn("sw", ["haproxy", "-db", "-f", os.path.join(d, "haproxy.cfg")], os.path.join(d, "haproxy.log"))
        procs.append(haproxy)
        time.sleep(1.5)
        for p, name in [(switch, "switch"), (haproxy, "haproxy")]:
            if p.poll() is not None:
                raise SystemExit(f"{name} exited: " + open(os.path.join(d, name + ".log")).read()[-500:])
        print(f"logs in {d}", file=sys.stderr)
        if os.environ.get("HOLD"):
            time.sleep(int(os.environ["HOLD"]))  # bounded: for looking at the testbed by hand
        paths = [("cswitch one-way", switch, 80), ("cswitch two-way", switch, 8080), ("HAProxy", haproxy, 8081),
                 ("no switch (server direct)", None, None)]
        if ORIGIN:
            paths += [("cswitch one-way, descriptor passed (testkit origin)", switch, 81),
                      ("no switch (testkit origin direct)", None, 8090)]
        print(f"| response | connections | path | req/s | switch CPU µs/req | errors |")
        print("| --- | --- | --- | --- | --- | --- |")
        for size in sizes:
            for close in (False, True):
                for name, proc, port in paths:
                    url = target_url(port, size)
                    before = cpu_seconds(proc.pid) if proc else 0.0
                    rps, reqs, errs = wrk(url, seconds, close)
                    cpu = cpu_seconds(proc.pid) - before if proc else float("nan")
                    per = cpu / reqs * 1e6 if reqs else float("nan")
                    conn = "new per request" if close else "keep-alive, 8"
                    cell = f"{per:.1f}" if proc else "-"
                    print(f"| {size} | {conn} | {name} | {rps:,.0f} | {cell} | {errs or '-'} |", flush=True)
        print_handoff_phases("All one-way runs above (hand-offs under load):", EMPTY, handoff_metrics())
        # One client, one connection at a time: a hand-off's own latency, nothing queued.
        before = handoff_metrics()
        wrk1 = ["ip", "netns", "exec", ns("cl"), "wrk", "-t1", "-c1", f"-d{seconds}s", "-H", "Connection: close",
                f"http://{VIP}:80/{sizes[0]}"]
        sh(*wrk1, check=False)
        print_handoff_phases(f"One client, a new connection per request ({sizes[0]}, {seconds} s):", before, handoff_metrics())
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        down()


EMPTY = ({}, 0.0, 0)


def target_url(port, size):
    """The URL of one path's row: nginx's files by size, the testkit origin's /big/N."""
    n = int(size[:-1]) * (1024 if size[-1] == "k" else 1 << 20)
    if port == 81:
        return f"http://{VIP}:81/big/{n}"
    if port == 8090:
        return f"http://10.202.0.11:8090/big/{n}"
    if port is None:
        return f"http://10.202.0.11:8080/{size}"
    return f"http://{VIP}:{port}/{size}"


def quantile_us(buckets, q):
    """`buckets`: [(upper bound in µs or None, cumulative count)]; interpolated within a bucket."""
    total = buckets[-1][1]
    if total == 0:
        return float("nan")
    rank, lo, seen = q * total, 0.0, 0
    for bound, cum in buckets:
        if cum >= rank:
            hi = bound if bound is not None else lo * 2
            return lo + (hi - lo) * ((rank - seen) / max(cum - seen, 1))
        lo, seen = (bound or lo), cum
    return lo


def handoff_metrics():
    """The switch's hand-off histograms {phase: [(bound µs or None, cumulative)]}, CPU seconds, count."""
    script = "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:9900/metrics',timeout=5).read().decode())"
    text = sh("ip", "netns", "exec", ns("sw"), "python3", "-c", script)
    phases = {}
    for m in re.finditer(r"cswitch_handoff_phase_seconds_bucket\{([^}]*)\} (\d+)", text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        le, phase, cum = labels["le"], labels["phase"], int(m.group(2))
        bound = None if le == "+Inf" else float(le) * 1e6
        phases.setdefault(phase, []).append((bound, cum))
    for b in phases.values():
        b.sort(key=lambda x: float("inf") if x[0] is None else x[0])
    cpu = re.search(r"^cswitch_handoff_cpu_seconds_total ([\d.e+-]+)", text, re.M)
    timed = re.search(r"^cswitch_handoff_timed_total (\d+)", text, re.M)
    return phases, float(cpu.group(1)) if cpu else 0.0, int(timed.group(1)) if timed else 0


def print_handoff_phases(title, before, after):
    """p50/p99 per phase and CPU per hand-off between two `handoff_metrics()` snapshots."""
    (b_phases, b_cpu, b_n), (a_phases, a_cpu, a_n) = before, after
    print(f"\n{title}\n")
    print("| hand-off phase | p50 µs | p99 µs |")
    print("| --- | --- | --- |")
    for phase in ["agent", "freeze", "dump", "ready", "flip", "go", "total"]:
        a = a_phases.get(phase, [])
        b = dict(b_phases.get(phase, []))
        diff = [(bound, cum - b.get(bound, 0)) for bound, cum in a]
        if diff and diff[-1][1] > 0:
            print(f"| {phase} | {quantile_us(diff, 0.5):.1f} | {quantile_us(diff, 0.99):.1f} |")
    if a_n > b_n:
        print(f"\nswitch CPU per hand-off: {(a_cpu - b_cpu) / (a_n - b_n) * 1e6:.1f} µs over {a_n - b_n:,} hand-offs")


if __name__ == "__main__":
    main()
