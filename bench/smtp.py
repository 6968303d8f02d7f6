#!/usr/bin/env python3
"""SMTP relay: cswitch switching on the envelope against HAProxy and nginx carrying the same
sessions as TCP streams (issue 14's "floor of bytes carried": neither peer can route on a
recipient, so they do less work than cswitch's content switch).

Usage: bench/smtp.py CSWITCH_BIN [SECONDS] [REPS] [SESSIONS]
  SECONDS per run (default 5), REPS interleaved repetitions (default 3), SESSIONS concurrent
  client sessions (default 32).

Each client session is what an MTA delivering to an MX does: connect, read the greeting, EHLO,
MAIL FROM, RCPT TO, DATA with a 1 KiB message, QUIT, close; then again, until the time is up.
The client (Python asyncio, one process) runs on CPU 0; the proxy and two SMTP sinks (this
script with --sink, asyncio) on CPU 1, as the other rows. cswitch answers EHLO/MAIL/RCPT
itself, routes at RCPT (a rules file with one rule on the recipient's domain, as a mail
switch would have), connects to a sink, replays the envelope and tunnels DATA; XCLIENT is off
(the sinks do not offer it). HAProxy (`mode tcp`) and nginx (`stream`) balance the sessions
round robin over the sinks. Prints messages/s, the proxy's CPU µs per message (user + system
from /proc) and cswitch's CPU ÷ each peer's, paired by repetition.
"""
import statistics, asyncio, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protocols as p  # noqa: E402  (same process helpers and CPU layout)

SINKS = ["127.0.0.1:19405", "127.0.0.1:19406"]
MESSAGE = ("Subject: bench\r\n\r\n" + ("x" * 70 + "\r\n") * 14).encode()


async def sink_session(reader, writer):
    writer.write(b"220 sink ESMTP\r\n")
    in_data = False
    try:
        while True:
            if in_data:
                await reader.readuntil(b"\r\n.\r\n")
                writer.write(b"250 2.0.0 queued\r\n")
                in_data = False
                continue
            line = await reader.readline()
            if not line:
                break
            verb = line[:4].upper()
            if verb == b"EHLO":
                writer.write(b"250-sink\r\n250-PIPELINING\r\n250 8BITMIME\r\n")
            elif verb == b"DATA":
                writer.write(b"354 go ahead\r\n")
                in_data = True
            elif verb == b"QUIT":
                writer.write(b"221 bye\r\n")
                await writer.drain()
                break
            else:
                writer.write(b"250 ok\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    writer.close()


async def expect(reader, code):
    while True:
        line = await reader.readline()
        if not line.startswith(code):
            raise ConnectionError(f"wanted {code!r}, got {line!r}")
        if line[3:4] != b"-":
            return


async def one_message(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        await expect(reader, b"220")
        for cmd, code in ((b"EHLO client.example", b"250"), (b"MAIL FROM:<a@client.example>", b"250"),
                          (b"RCPT TO:<b@mx.example>", b"250"), (b"DATA", b"354")):
            writer.write(cmd + b"\r\n")
            await expect(reader, code)
        writer.write(MESSAGE + b".\r\n")
        await expect(reader, b"250")
        writer.write(b"QUIT\r\n")
        await expect(reader, b"221")
    finally:
        writer.close()


async def client(port, seconds, sessions):
    end = time.monotonic() + seconds
    done, errors = 0, 0

    async def loop():
        nonlocal done, errors
        while time.monotonic() < end:
            try:
                await asyncio.wait_for(one_message(port), 10)
                done += 1
            except (OSError, ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError):
                errors += 1
    await asyncio.gather(*(loop() for _ in range(sessions)))
    return done, errors


def configs(d):
    servers = ",\n".join(f'  {{ name = "s{i}", addr = "{a}" }}' for i, a in enumerate(SINKS))
    open(os.path.join(d, "mail.rules"), "w").write(
        'MX: if (smtp.rcpt_to_domain == "mx.example") { routeTo(mx); }\n')
    open(os.path.join(d, "cswitch.toml"), "w").write(f"""[global]
workers = 1
grace_period = "0s"
[access_log]
enabled = false
[[listener]]
name = "mx"
protocol = "smtp"
bind = "127.0.0.1:{p.PORT}"
default_group = "mx"
rules = "{d}/mail.rules"
xclient = false
[[group]]
name = "mx"
scheduler = "rr"
servers = [
{servers}
]
""")
    ha = "\n".join(f"    server s{i} {a}" for i, a in enumerate(SINKS))
    open(os.path.join(d, "haproxy.cfg"), "w").write(f"""global
    nbthread 1
    maxconn 9000
defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend mx
    bind 127.0.0.1:{p.PORT}
    default_backend sinks
backend sinks
    balance roundrobin
{ha}
""")
    ng = "\n".join(f"        server {a};" for a in SINKS)
    open(os.path.join(d, "nginx.conf"), "w").write(f"""load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log;
events {{ worker_connections 20000; }}
stream {{
    upstream sinks {{
{ng}
    }}
    server {{ listen 127.0.0.1:{p.PORT}; proxy_pass sinks; }}
}}
""")


def argv(name, d, cswitch):
    return {"cswitch": [cswitch, "run", "--config", os.path.join(d, "cswitch.toml")],
            "haproxy": ["haproxy", "-db", "-f", os.path.join(d, "haproxy.cfg")],
            "nginx": ["nginx", "-g", "daemon off;", "-c", os.path.join(d, "nginx.conf")]}[name]


def one_run(name, d, seconds, sessions, cswitch):
    def clients():
        out = subprocess.run(["taskset", "-c", p.LG, sys.executable, os.path.abspath(__file__), "--client",
                              str(seconds), str(sessions)], capture_output=True, text=True, timeout=seconds + 60)
        done, errors = (int(x) for x in out.stdout.split())
        return done, errors
    return p.measured(argv(name, d, cswitch), os.path.join(d, f"{name}.log"), clients, seconds)


def serve_sink(port):
    async def run():
        server = await asyncio.start_server(sink_session, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()
    asyncio.run(run())


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--sink":
        return serve_sink(int(sys.argv[2]))
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        done, errors = asyncio.run(client(p.PORT, float(sys.argv[2]), int(sys.argv[3])))
        print(done, errors)
        return
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    cswitch = os.path.abspath(sys.argv[1])
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    sessions = int(sys.argv[4]) if len(sys.argv) > 4 else 32
    d = tempfile.mkdtemp(prefix="cswitch-smtp-")
    configs(d)
    sinks = [p.start([sys.executable, os.path.abspath(__file__), "--sink", a.rsplit(":", 1)[1]],
                     os.path.join(d, f"sink{i}.log")) for i, a in enumerate(SINKS)]
    names = ["cswitch", "haproxy", "nginx"]
    try:
        for a in SINKS:
            if not p.wait_port(int(a.rsplit(":", 1)[1])):
                raise SystemExit(f"sink {a} did not start (logs in {d})")
        results = {n: [] for n in names}
        for rep in range(reps):
            for name in names:  # interleaved: drift hits every proxy alike
                results[name].append(one_run(name, d, seconds, sessions, cswitch))
                print(f"smtp rep {rep + 1} {name}: {results[name][-1]}", file=sys.stderr, flush=True)
        print_row(results)
    finally:
        for s in sinks:
            p.stop(s)


def print_row(results):
    print("\n#### smtp (one message per session, 1 KiB)\n")
    print("| proxy | messages/s | CPU µs per message | of which user / system µs | errors | cswitch CPU ÷ this (paired by rep) |")
    print("| --- | --- | --- | --- | --- | --- |")
    ours = [r[1] for r in results["cswitch"]]
    for name, runs in results.items():
        rate, cpu, errs = [r[0] for r in runs], [r[1] for r in runs], sum(r[2] for r in runs)
        ratio = "-" if name == "cswitch" else p.span([o / c for o, c in zip(ours, cpu)], "{:.2f}")
        split = f"{statistics.median(r[3] for r in runs):.1f} / {statistics.median(r[4] for r in runs):.1f}"
        print(f"| {name} | {p.span(rate, '{:,.0f}')} | {p.span(cpu, '{:.1f}')} | {split} | {errs} | {ratio} |")


if __name__ == "__main__":
    main()
