#!/usr/bin/env python3
"""A binary upgrade's duration and its effect on latency under load (issue 16).

Usage: bench/upgrade.py CSWITCH_BIN [SECONDS] [UPGRADES] [REPS]
  SECONDS per wrk run (default 12), UPGRADES during each loaded run (default 2, evenly
  spaced), REPS pairs of runs (default 3).

The shared harness's layout: wrk (1 thread, 64 keep-alive connections, GET 100 B) on CPU 0,
cswitch (1 worker) and two bench-origins on CPU 1. Each rep runs wrk twice against the same
switch: once with nothing happening (the baseline) and once while `cswitch ctl --json
upgrade` replaces the binary with itself UPGRADES times. Prints, per run, req/s, p50, p99,
max and errors (wrk --latency), and per upgrade the switch's own answer: the time until the
new process served, until the old one was drained, and the connections moved.

Every process is started and stopped by PID (after an upgrade the switch's PID is the one
the answer names); loopback only; every run is bounded.
"""
import json, os, re, signal, statistics, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from protocols import origin_binary, start, stop, wait_port, wrk_errors  # noqa: E402  (same harness pieces)

LG = "0"
ORIGINS = ["127.0.0.1:19511", "127.0.0.1:19512"]
PORT, ADMIN = 19510, 19519
TOKEN = "upgrade-bench-token-0123456789"


def config():
    servers = ", ".join(f'{{ name = "o{i}", addr = "{a}" }}' for i, a in enumerate(ORIGINS))
    return f"""[global]
workers = 1
grace_period = "10s"
[access_log]
enabled = false
[admin]
bind = "127.0.0.1:{ADMIN}"
token = "{TOKEN}"
[timeouts]
client_idle = "120s"
[[listener]]
name = "bench"
bind = "127.0.0.1:{PORT}"
default_group = "app"
[[group]]
name = "app"
reuse = "always"
servers = [ {servers} ]
"""


def wrk(seconds):
    out = subprocess.run(["taskset", "-c", LG, "timeout", str(seconds + 15), "wrk", "-t1", "-c64", f"-d{seconds}s",
                          "--latency", f"http://127.0.0.1:{PORT}/app/small"], capture_output=True, text=True).stdout

    def micros(label):
        m = re.search(rf"{label}\s+([\d.]+)(us|ms|s)\b", out)
        if not m:
            return float("nan")
        return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    maxm = re.search(r"Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", out)
    mx = float(maxm.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[maxm.group(2)] if maxm else float("nan")
    return {"rps": float(rps.group(1)) if rps else 0.0, "p50": micros("50%"), "p99": micros("99%"), "max": mx,
            "errors": wrk_errors(out)}


def upgrade(binary):
    env = dict(os.environ, CSWITCH_ADMIN_TOKEN=TOKEN)
    r = subprocess.run([binary, "ctl", "--addr", f"127.0.0.1:{ADMIN}", "--json", "upgrade"], capture_output=True,
                       text=True, env=env, timeout=60)
    if r.returncode != 0:
        raise SystemExit(f"upgrade failed: {r.stdout}{r.stderr}")
    return json.loads(r.stdout)


def loaded_run(binary, seconds, upgrades):
    answers = []

    def upgrader():
        for i in range(upgrades):
            time.sleep(seconds / (upgrades + 1) if i == 0 else seconds / (upgrades + 1) - answers[-1]["duration_ms"] / 1e3)
            answers.append(upgrade(binary))
    t = threading.Thread(target=upgrader)
    t.start()
    result = wrk(seconds)
    t.join()
    return result, answers


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    upgrades = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    d = tempfile.mkdtemp(prefix="cswitch-upgrade-bench-")
    path = os.path.join(d, "cswitch.toml")
    open(path, "w").write(config())
    origins = [start([origin_binary(), "--listen", a], os.path.join(d, f"origin{i}.log")) for i, a in enumerate(ORIGINS)]
    switch = start([binary, "run", "--config", path], os.path.join(d, "switch.log"))
    pid = switch.pid
    print(f"scratch in {d}", file=sys.stderr)
    rows, answers = [], []
    try:
        if not wait_port(PORT):
            raise SystemExit(f"the switch did not start: {d}/switch.log")
        for rep in range(reps):
            base = wrk(seconds)
            loaded, got = loaded_run(binary, seconds, upgrades)
            if got:
                pid = got[-1]["new_pid"]
            answers += got
            rows.append((base, loaded))
            print(f"rep {rep + 1}: base {base} upgrades {loaded} {got}", file=sys.stderr, flush=True)
    finally:
        for p in origins:
            stop(p)
        try:
            os.kill(pid, signal.SIGTERM)  # the process serving now: the last upgrade's new one
        except ProcessLookupError:
            pass
        if switch.poll() is None:
            stop(switch)
    print_tables(rows, answers, seconds, upgrades)


def med(values):
    return statistics.median(values), min(values), max(values)


def print_tables(rows, answers, seconds, upgrades):
    print(f"\n| wrk run ({seconds} s, 64 keep-alive connections) | req/s | p50 µs | p99 µs | max µs | errors |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, k in (("no upgrade", 0), (f"{upgrades} upgrades during the run", 1)):
        runs = [r[k] for r in rows]
        cell = lambda key, f="{:,.0f}": "{} [{}–{}]".format(*(f.format(v) for v in med([r[key] for r in runs])))
        print(f"| {label} | {cell('rps')} | {cell('p50')} | {cell('p99')} | {cell('max')} | "
              f"{sum(r['errors'] for r in runs)} |")
    if answers:
        print(f"\n| per upgrade ({len(answers)}) | median | min | max |")
        print("| --- | --- | --- | --- |")
        for key in ("serving_after_ms", "duration_ms", "moved", "finished_in_old", "failed_to_move"):
            m, lo, hi = med([a[key] for a in answers])
            print(f"| {key} | {m:g} | {lo:g} | {hi:g} |")


if __name__ == "__main__":
    main()
