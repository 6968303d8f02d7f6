//! The one-way testbed shared by the one-way test files: processes in namespaces (killed on
//! drop, their stderr readable), the web server, the agent and the switch of a deployment,
//! and what the tests measure (the client's fetch, the switch interface's counters, the
//! switch's metrics). Each test file builds the deployment it needs from these parts.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![allow(dead_code)] // each test file uses part of this

use super::common::tempdir;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testkit::netns::{ip_of, mac_of, Testbed, VIP};

pub const TOKEN: &str = "oneway-test-token-0123456789";
pub const SIZE: usize = 300_000;

/// A process in a namespace, killed on drop; its stderr lines.
pub struct Proc {
    pub child: Child,
    pub lines: std::sync::mpsc::Receiver<String>,
}

impl Proc {
    pub fn spawn(bed: &Testbed, host: &str, argv: &[&str]) -> Proc {
        Proc::spawn_with_env(bed, host, argv, &[])
    }

    /// `spawn` with environment variables set.
    pub fn spawn_with_env(bed: &Testbed, host: &str, argv: &[&str], env: &[(&str, &str)]) -> Proc {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &bed.ns(host)])
            .args(argv)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Proc { child, lines }
    }

    pub fn wait_for(&self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(l) if l.contains(needle) => return,
                Ok(l) => seen.push(l),
                Err(_) => {}
            }
        }
        panic!("no `{needle}` within 10 s:\n{}", seen.join("\n"));
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The switch, the server host's web server and agent, and the file the client fetches.
pub struct Deployment {
    pub bed: Testbed,
    pub dir: std::path::PathBuf,
    pub www: std::path::PathBuf,
    pub switch: Proc,
    pub agent: Option<Proc>,
    pub web: Proc,
    pub body: Vec<u8>,
}

/// One server host `b1` (10.201.0.11) with `http.server` on 8080 and an agent on 9000, the
/// switch with one one-way listener on the VIP's port 80.
pub fn deploy(tag: &str) -> Deployment {
    deploy_with(tag, |bed, www| start_web(bed, "b1", www), &listener("web", 80, None))
}

/// [`deploy`] with the web server `web` starts on `b1` (given the site's directory) and
/// `listeners` (TOML `[[listener]]` tables, see [`listener`]) for the switch.
pub fn deploy_with(
    tag: &str,
    web: impl FnOnce(&Testbed, &std::path::Path) -> Proc,
    listeners: &str,
) -> Deployment {
    let bed = Testbed::new(&[("cl", 10), ("sw", 2), ("b1", 11)]);
    let dir = tempdir(tag);
    let body = write_site(&dir);
    let web = web(&bed, &dir.join("www"));
    let agent = start_agent(&bed, "b1", 11, &dir, &["--local", "127.0.0.1:8080"]);
    let config = format!(
        "{}{listeners}[[group]]\nname = \"web\"\nservers = [ {} ]\n",
        switch_preamble(),
        server_entry("b1", 11, 8080)
    );
    let switch = start_switch(&bed, &dir, &config);
    wait_for_web_on(&bed, "b1");
    Deployment { bed, www: dir.join("www"), dir, switch, agent: Some(agent), web, body }
}

/// A one-way listener on the VIP's `port`, default group `web`, with the rule file `rules`
/// (relative to the config's directory) if given.
pub fn listener(name: &str, port: u16, rules: Option<&str>) -> String {
    let rules = rules.map_or(String::new(), |r| format!("rules = \"{r}\"\n"));
    format!(
        "[[listener]]\nname = \"{name}\"\nbind = \"{VIP}:{port}\"\ndefault_group = \"web\"\n\
         mode = \"one-way\"\n{rules}"
    )
}

/// A small threaded HTTP/1.1 server on port 8080 of `host`: GET answers the file of `www`,
/// POST the SHA-256 (hex) of the body it received; keep-alive until the client closes, or
/// closed after the answer when the request says `Connection: close`. With `hold`, it
/// never closes first: a connection stays open 30 s after the client's end (a server that
/// does not close: its agent's relay is not over).
pub fn start_py_web(bed: &Testbed, host: &str, www: &std::path::Path, hold: bool) -> Proc {
    let www = www.to_string_lossy().to_string();
    let hold = if hold { "hold" } else { "close" };
    Proc::spawn(bed, host, &["python3", "-c", PY_WEB, &www, hold])
}

const PY_WEB: &str = "\
import hashlib, os, socket, sys, threading, time
www, hold = sys.argv[1], sys.argv[2] == 'hold'
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('0.0.0.0', 8080))
l.listen(1024)
def more(c, buf):
    d = c.recv(262144)
    if not d:
        raise EOFError
    return buf + d
def serve(c):
    buf = b''
    try:
        while True:
            while b'\\r\\n\\r\\n' not in buf:
                buf = more(c, buf)
            head, buf = buf.split(b'\\r\\n\\r\\n', 1)
            lines = head.decode('latin-1').split('\\r\\n')
            method, path = lines[0].split(' ')[:2]
            n, close = 0, False
            for line in lines[1:]:
                k, _, v = line.partition(':')
                if k.strip().lower() == 'content-length':
                    n = int(v)
                if k.strip().lower() == 'connection' and v.strip().lower() == 'close':
                    close = not hold
            while len(buf) < n:
                buf = more(c, buf)
            body, buf = buf[:n], buf[n:]
            if method == 'POST':
                out = hashlib.sha256(body).hexdigest().encode()
            else:
                out = open(os.path.join(www, path.lstrip('/')), 'rb').read()
            c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n' % len(out) + out)
            if close:
                break
    except (EOFError, OSError):
        pass
    if hold:
        time.sleep(30)
    c.close()
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
";

/// Writes `www/big.bin` (`SIZE` bytes, not periodic within a page) and the token file
/// under `dir`; the body.
pub fn write_site(dir: &std::path::Path) -> Vec<u8> {
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let body: Vec<u8> = (0..SIZE).map(|i| b"0123456789abcdef"[i % 16] ^ (i / 4096) as u8).collect();
    std::fs::write(www.join("big.bin"), &body).unwrap();
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    body
}

/// Python's `http.server` on port 8080 of `host`, serving `www` (HTTP/1.0: one request per
/// connection).
pub fn start_web(bed: &Testbed, host: &str, www: &std::path::Path) -> Proc {
    start_web_with(bed, host, www, &[])
}

/// `start_web` with more arguments (`--protocol HTTP/1.1` for keep-alive).
pub fn start_web_with(bed: &Testbed, host: &str, www: &std::path::Path, extra: &[&str]) -> Proc {
    let www = www.to_string_lossy().to_string();
    let mut argv = vec!["python3", "-m", "http.server", "8080", "--bind", "0.0.0.0", "--directory", &www];
    argv.extend(extra);
    Proc::spawn(bed, host, &argv)
}

/// `cswitch agent --handoff-listen 10.201.0.N:9000` on `host` with the token of `dir` and
/// `extra` arguments (`--local …`); returns once it listens.
pub fn start_agent(bed: &Testbed, host: &str, n: u8, dir: &std::path::Path, extra: &[&str]) -> Proc {
    let token = dir.join("token").to_string_lossy().to_string();
    let listen = format!("{}:9000", ip_of(n));
    let mut argv = vec![env!("CARGO_BIN_EXE_cswitch"), "agent", "--handoff-listen", &listen];
    argv.extend(["--handoff-token-file", &token]);
    argv.extend(extra);
    let agent = Proc::spawn(bed, host, &argv);
    agent.wait_for("hand-off server listening");
    agent
}

/// The config's `[global]`, `[access_log]`, `[admin]` (127.0.0.1:9900) and `[oneway]`
/// (eth0, the token file, 500 ms hand-off timeout) sections.
pub fn switch_preamble() -> String {
    "[global]\nworkers = 1\ngrace_period = \"1s\"\n[access_log]\nenabled = false\n\
     [admin]\nbind = \"127.0.0.1:9900\"\n\
     [oneway]\ninterface = \"eth0\"\ntoken_file = \"token\"\nhandoff_timeout = \"500ms\"\n"
        .to_string()
}

/// `switch_preamble` for tests that check where requests go, not how fast: a 3 s hand-off
/// timeout, so a loaded CI machine does not turn a hand-off or a move into a (correct, but
/// other) fallback.
pub fn patient_preamble() -> String {
    switch_preamble().replace("handoff_timeout = \"500ms\"", "handoff_timeout = \"3s\"")
}

/// Two server hosts' web servers up: `b1` and `b2`.
pub fn wait_for_webs(bed: &Testbed) {
    wait_for_web_on(bed, "b1");
    wait_for_web_on(bed, "b2");
}

/// A server entry for host 10.201.0.N with its agent on port 9000 and its MAC.
pub fn server_entry(name: &str, n: u8, port: u16) -> String {
    format!(
        "{{ name = \"{name}\", addr = \"{}:{port}\", agent = \"{}:9000\", mac = \"{}\" }}",
        ip_of(n),
        ip_of(n),
        mac_of(n)
    )
}

/// `cswitch run` in `sw` with `config` written to `dir/cswitch.toml`; returns once it
/// listens.
pub fn start_switch(bed: &Testbed, dir: &std::path::Path, config: &str) -> Proc {
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, config).unwrap();
    let bin = env!("CARGO_BIN_EXE_cswitch");
    let switch = Proc::spawn(bed, "sw", &[bin, "run", "--config", &path.to_string_lossy()]);
    switch.wait_for("listening");
    switch
}

/// http.server on `host` takes a moment to bind.
pub fn wait_for_web_on(bed: &Testbed, host: &str) {
    wait_for_port(bed, host, 8080);
}

/// Waits (up to 10 s) until something listens on 127.0.0.1:`port` of `host`.
pub fn wait_for_port(bed: &Testbed, host: &str, port: u16) {
    let probe = format!(
        "import socket,sys\ntry:\n  socket.create_connection(('127.0.0.1',{port}),1)\nexcept OSError:\n  sys.exit(1)"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !bed.try_ok(host, &["python3", "-c", &probe]) {
        assert!(Instant::now() < deadline, "nothing listens on port {port} of {host}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The client fetches `/big.bin` from the VIP: the body it got.
pub fn fetch(bed: &Testbed) -> Vec<u8> {
    let script = format!(
        "import sys, urllib.request\nr = urllib.request.urlopen('http://{VIP}/big.bin', timeout=10)\n\
         sys.stdout.buffer.write(r.read())"
    );
    bed.run("cl", &["python3", "-c", &script]).stdout
}

/// Bytes the switch's interface has sent.
pub fn switch_tx_bytes(bed: &Testbed) -> u64 {
    let out = bed.run("sw", &["cat", "/sys/class/net/eth0/statistics/tx_bytes"]);
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// The steering table's `flows` entries of the client (10.201.0.10).
pub fn steered(bed: &Testbed) -> usize {
    let out = bed.run("sw", &["nft", "list", "map", "netdev", "cswitch", "flows"]);
    String::from_utf8_lossy(&out.stdout).matches(&format!("{} . ", ip_of(10))).count()
}

/// Waits up to `limit` for `ok`; how long it took (panics with `what` past the limit).
pub fn within(limit: Duration, what: &str, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

/// TCP segments with RST sent by the kernel of `host` (`OutRsts`, /proc/net/snmp).
pub fn out_rsts(bed: &Testbed, host: &str) -> u64 {
    let out = bed.run(host, &["cat", "/proc/net/snmp"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut tcp = text.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next().unwrap(), tcp.next().unwrap());
    let at = names.split_whitespace().position(|n| n == "OutRsts").unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// A counter from the switch's /metrics (0 when absent).
pub fn metric(bed: &Testbed, line_start: &str) -> u64 {
    let script = "import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:9900/metrics', timeout=5).read().decode())";
    let out = bed.run("sw", &["python3", "-c", script]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// Counts, in the switch's kernel, every TCP segment with payload it sends from the VIP's
/// port `port` (its own stack's: two-way answers; a hand-off sends none): an nftables
/// output-hook counter, one rule per TCP header length (`ip length` beyond IP + TCP header
/// means payload).
pub fn install_payload_probe(bed: &Testbed, port: u16) {
    let mut rules = String::new();
    for doff in 5..=15u32 {
        let headers = 20 + 4 * doff;
        rules.push_str(&format!(
            "    ip saddr {VIP} tcp sport {port} tcp doff {doff} ip length > {headers} counter name \"payload\"\n"
        ));
    }
    let script = format!(
        "table inet payloadprobe {{\n  counter payload {{ }}\n  chain out {{\n    type filter hook output priority 0; policy accept;\n{rules}  }}\n}}\n"
    );
    let ok = Command::new("ip")
        .args(["netns", "exec", &bed.ns("sw"), "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(script.as_bytes())?;
            c.wait()
        })
        .unwrap();
    assert!(ok.success(), "payload probe not installed");
}

/// Payload segments the switch's stack has sent from the VIP (see `install_payload_probe`).
pub fn payload_segments(bed: &Testbed) -> u64 {
    let out = bed.run("sw", &["nft", "list", "counter", "inet", "payloadprobe", "payload"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split_whitespace()
        .skip_while(|w| *w != "packets")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no payload counter: {text}"))
}
