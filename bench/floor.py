#!/usr/bin/env python3
"""The floor of a proxy's CPU per request on this machine: cswitch, HAProxy and nginx beside two
byte relays that do no HTTP work at all (bench/floor/: epoll readiness; io_uring completions with
single- and multishot receives; the same completions under a tokio runtime, ring or eventfd in
tokio's epoll). Issue 14 asks whether a completion-based data path
pays; this answers it before cswitch's is ported (ADR 0017).

Usage: bench/floor.py CSWITCH_BIN [SECONDS] [REPS] [ROWS]
  SECONDS per run (default 5), REPS interleaved repetitions (default 3), ROWS comma-separated
  (default ka,ka10k): ka = keep-alive GET 100 B, ka10k = keep-alive GET 10 KiB; wrk -t1 -c64.

Layout as bench/protocols.py (wrk on CPU 0; proxy, relays and the two harness origins on CPU 1;
one worker each; keep-alive toward the origins). A relay pairs each client connection with its
own origin connection (round robin), so under wrk's keep-alive load without pipelining its
kernel work is an HTTP proxy's with connection reuse (a receive and a send per direction per
request) and its user-space work is nearly nothing. CPU is user + system time from /proc.
"""
import os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protocols as p  # noqa: E402  (same harness pieces and configs)

FLOOR = os.path.join(p.HERE, "floor")
TARGET = os.environ.get("FLOOR_TARGET", os.path.join(p.HERE, ".run", "floor-target"))
NAMES = ["cswitch", "haproxy", "nginx", "relay-epoll", "relay-uring", "relay-uring-multishot", "relay-tokio-uring",
         "relay-tokio-uring-defer"]


def relays():
    subprocess.run(["cargo", "build", "--release", "-q"], cwd=FLOOR, check=True,
                   env=dict(os.environ, CARGO_TARGET_DIR=TARGET))
    return os.path.join(TARGET, "release")


def argv(name, d, cswitch, bins):
    if name.startswith("relay"):
        binary = os.path.join(bins, name.removesuffix("-multishot").removesuffix("-defer"))
        extra = ["--multishot"] if name.endswith("multishot") else ["--defer"] if name.endswith("defer") else []
        ups = [x for a in p.ORIGINS for x in ("--upstream", a)]
        return [binary] + extra + ["--listen", f"127.0.0.1:{p.PORT}"] + ups
    return p.proxy_argv(name, d, "post64k", cswitch)  # post64k's configs: plain HTTP keep-alive


def one_run(name, row, d, seconds, cswitch, bins):
    def wrk():
        path = "/app/10k" if row == "ka10k" else "/app/small"
        out = subprocess.run(["taskset", "-c", p.LG, "timeout", str(seconds + 10), "wrk", "-t1", "-c64",
                              f"-d{seconds}s", f"http://127.0.0.1:{p.PORT}{path}"],
                             capture_output=True, text=True).stdout
        done = int(out.split(" requests in")[0].split()[-1]) if " requests in" in out else 0
        return done, p.wrk_errors(out)
    return p.measured(argv(name, d, cswitch, bins), os.path.join(d, f"{name}.log"), wrk, seconds)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    cswitch = os.path.abspath(sys.argv[1])
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    rows = sys.argv[4].split(",") if len(sys.argv) > 4 else ["ka", "ka10k"]
    bins = relays()
    d = tempfile.mkdtemp(prefix="cswitch-floor-")
    cert, key = p.certificate(d)
    p.write_configs(d, cert, key)
    origins = [p.start([p.origin_binary(), "--listen", a], os.path.join(d, f"origin{i}.log"))
               for i, a in enumerate(p.ORIGINS)]
    try:
        for a in p.ORIGINS:
            if not p.wait_port(int(a.rsplit(":", 1)[1])):
                raise SystemExit(f"origin {a} did not start (logs in {d})")
        for row in rows:
            results = {n: [] for n in NAMES}
            for rep in range(reps):
                for name in NAMES:  # interleaved: drift hits every one alike
                    results[name].append(one_run(name, row, d, seconds, cswitch, bins))
                    print(f"{row} rep {rep + 1} {name}: {results[name][-1]}", file=sys.stderr, flush=True)
            p.print_row(row, results, reps)
    finally:
        for o in origins:
            p.stop(o)


if __name__ == "__main__":
    main()
