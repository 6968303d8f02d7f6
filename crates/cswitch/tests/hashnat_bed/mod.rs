//! HashNAT's namespace testbed with hand-offs (ADR 0019), made and removed by each test: a
//! client `cl` (10.201.0.10) and three hosts `h1`–`h3` on one bridge. Each host has a
//! private address (10.201.0.21–23: gossip, peer listener, agents) and a public one that
//! clients reach it at (10.201.0.121–123, on its `eth0`; as round-robin DNS would hand
//! out); every host holds the other hosts' public addresses on `lo` (never answered in
//! ARP), so it can answer for them the connections they hand it. On each host: a testkit
//! origin on 127.0.0.1:8080, `cswitch run` (a one-way listener on the public address's
//! port 80, another with `connection_persistence = "close"` on its port 81, a peer listener, `[cluster]`, `[oneway]`), a `cswitch agent` that serves hand-offs and
//! another that reports the host's capacity from a load file.
//!
//! What the tests read: the origins' own record of each request (a handed-off request
//! arrives as the client sent it, with no `X-Forwarded-For`), each host's kernel (an
//! nftables counter of the answer segments its stack sends from its public address; its
//! interface's byte counters) and each node's `/metrics` and admin API.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![allow(dead_code)] // each test file uses part of this

use crate::common::tempdir;
use crate::oneway_bed::Proc;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use testkit::netns::{ip_of, mac_of, Testbed};

pub const KEY: &str = "hashnat-test-gossip-key-0123";
pub const AGENT_TOKEN: &str = "hashnat-test-handoff-token-0123";
pub const HOSTS: [&str; 3] = ["h1", "h2", "h3"];

/// Host `i`'s (0-based) private address's last octet.
pub fn private(i: usize) -> u8 {
    21 + i as u8
}

/// Host `i`'s public address, where clients reach it (port 80).
pub fn public(i: usize) -> SocketAddr {
    format!("{}:80", ip_of(121 + i as u8)).parse().unwrap()
}

/// Host `i`'s public address, port 81: the same one-way listener with
/// `connection_persistence = "close"` (every request placed on a connection of its own).
pub fn public_close(i: usize) -> SocketAddr {
    SocketAddr::new(public(i).ip(), 81)
}

/// One host's processes.
pub struct Host {
    pub switch: Option<Proc>,
    pub handoffs: Option<Proc>,
    pub reports: Option<Proc>,
}

pub struct Bed {
    pub net: Testbed,
    pub dir: PathBuf,
    pub hosts: Vec<Host>,
    /// The hosts' origins (o1–o3), by host index.
    pub origins: Vec<testkit::Origin>,
    stop_origins: Vec<std::sync::mpsc::Sender<()>>,
}

impl Bed {
    /// The bed with every host running and every node weighing all three hosts. `None`
    /// (skipped) without root, `ip` and `nft`, unless CSWITCH_REQUIRE_KERNEL is set.
    pub fn start(tag: &str) -> Option<Bed> {
        if !testkit::netns::available() {
            return None;
        }
        let names: Vec<(&str, u8)> = std::iter::once(("cl", 10))
            .chain(HOSTS.iter().enumerate().map(|(i, h)| (*h, private(i))))
            .collect();
        let net = Testbed::new(&names);
        addresses(&net);
        let dir = tempdir(&format!("hashnat-{tag}"));
        std::fs::write(dir.join("token"), AGENT_TOKEN).unwrap();
        let (mut origins, mut stop_origins) = (Vec::new(), Vec::new());
        for (i, h) in HOSTS.iter().enumerate() {
            let (origin, stop) = start_origin(&net, h, &format!("o{}", i + 1));
            origins.push(origin);
            stop_origins.push(stop);
        }
        let hosts = (0..3).map(|_| Host { switch: None, handoffs: None, reports: None }).collect();
        let mut bed = Bed { net, dir, hosts, origins, stop_origins };
        for i in 0..3 {
            bed.set_load(i, "1");
            bed.start_host(i);
        }
        for i in 0..3 {
            bed.until_weighs(i, &HOSTS, Duration::from_secs(10));
        }
        Some(bed)
    }

    /// Starts host `i`: its hand-off agent first (so a share given to it can be taken),
    /// then its switch, then its capacity reports (which give it its share).
    pub fn start_host(&mut self, i: usize) {
        let host = HOSTS[i];
        let handoffs = self.start_handoffs(i);
        let path = self.dir.join(format!("{host}.toml"));
        std::fs::write(&path, node_config(i)).unwrap();
        let switch = Proc::spawn(&self.net, host, &[bin(), "run", "--config", &path.to_string_lossy()]);
        switch.wait_for("listening");
        let peer = format!("{}:8081", ip_of(private(i)));
        let load = format!("file:{}", self.load_file(i).display());
        let reports = Proc::spawn(
            &self.net,
            host,
            &[bin(), "agent", "--server", &peer, "--switch", "127.0.0.1:9901", "--metric", &load]
                .into_iter()
                .chain(["--interval", "200ms", "--capacity", "1000", "--max-load", "10"])
                .collect::<Vec<_>>(),
        );
        self.hosts[i] = Host { switch: Some(switch), handoffs: Some(handoffs), reports: Some(reports) };
    }

    /// Host `i`'s hand-off agent (`cswitch agent --handoff-listen`, relaying to its origin);
    /// returns once it listens.
    pub fn start_handoffs(&self, i: usize) -> Proc {
        let token = self.dir.join("token").to_string_lossy().to_string();
        let listen = format!("{}:9000", ip_of(private(i)));
        let argv = [
            bin(),
            "agent",
            "--handoff-listen",
            &listen,
            "--handoff-token-file",
            &token,
            "--local",
            "127.0.0.1:8080",
        ];
        let handoffs = Proc::spawn(&self.net, HOSTS[i], &argv);
        handoffs.wait_for("hand-off server listening");
        handoffs
    }

    fn load_file(&self, i: usize) -> PathBuf {
        self.dir.join(format!("load{}", i + 1))
    }

    /// Writes host `i`'s load (what its capacity agent reads).
    pub fn set_load(&self, i: usize, load: &str) {
        let tmp = self.load_file(i).with_extension("tmp");
        std::fs::write(&tmp, load).unwrap();
        std::fs::rename(tmp, self.load_file(i)).unwrap();
    }

    /// `cswitch ctl --json ARGS` on host `i`.
    pub fn ctl(&self, i: usize, args: &[&str]) -> serde_json::Value {
        let mut argv = vec![bin(), "ctl", "--json", "--addr", "127.0.0.1:9900"];
        argv.extend_from_slice(args);
        serde_json::from_slice(&self.net.run(HOSTS[i], &argv).stdout).unwrap()
    }

    /// Whether node `i` weighs the hosts in `up` by their capacities and the others at 0.
    pub fn weighs(&self, i: usize, up: &[&str]) -> bool {
        let v = self.ctl(i, &["servers"]);
        let servers = v.as_array().unwrap();
        HOSTS.iter().all(|name| {
            let s = servers.iter().find(|s| s["name"] == *name).unwrap();
            let weight = s["effective_weight"].as_u64().unwrap_or(0);
            match up.contains(name) {
                true => weight > 0 && s["capacity"].as_u64() == Some(weight),
                false => weight == 0,
            }
        })
    }

    /// Waits until node `i` weighs as [`Bed::weighs`] says; how long it took.
    pub fn until_weighs(&self, i: usize, up: &[&str], limit: Duration) -> Duration {
        let start = Instant::now();
        while !self.weighs(i, up) {
            assert!(start.elapsed() < limit, "{} does not weigh {up:?} within {limit:?}", HOSTS[i]);
            std::thread::sleep(Duration::from_millis(50));
        }
        start.elapsed()
    }

    /// The sum of node `i`'s /metrics lines that start with `line_start` (a counter, or
    /// all of a counter's labels; 0 when absent).
    pub fn metric(&self, i: usize, line_start: &str) -> u64 {
        let script = "import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:9900/metrics', timeout=5).read().decode())";
        let out = self.net.run(HOSTS[i], &["python3", "-c", script]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with(line_start))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum()
    }

    /// Bytes host `i`'s interface has sent.
    pub fn tx_bytes(&self, i: usize) -> u64 {
        let out = self.net.run(HOSTS[i], &["cat", "/sys/class/net/eth0/statistics/tx_bytes"]);
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    /// Counts, in host `i`'s kernel, each TCP segment with payload its stack sends from its
    /// public address's port 80 (answers it gives or carries itself; a hand-off sends none).
    pub fn install_payload_probe(&self, i: usize) {
        let ip = public(i).ip();
        let rules: String = (5..=15u32)
            .map(|doff| {
                format!("    ip saddr {ip} tcp sport 80 tcp doff {doff} ip length > {} counter name \"payload\"\n", 20 + 4 * doff)
            })
            .collect();
        nft(
            &self.net,
            HOSTS[i],
            &format!(
                "table inet payloadprobe {{\n  counter payload {{ }}\n  chain out {{\n    type filter hook output priority 0; policy accept;\n{rules}  }}\n}}\n"
            ),
        );
    }

    /// Payload segments host `i`'s stack has sent (see `install_payload_probe`).
    pub fn payload_segments(&self, i: usize) -> u64 {
        let out = self.net.run(HOSTS[i], &["nft", "list", "counter", "inet", "payloadprobe", "payload"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.split_whitespace()
            .skip_while(|w| *w != "packets")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no payload counter: {text}"))
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        for h in &mut self.hosts {
            // Switches first: each removes its steering table as it stops.
            drop(h.switch.take());
            drop(h.reports.take());
            drop(h.handoffs.take());
        }
        self.stop_origins.iter().for_each(|s| {
            let _ = s.send(());
        });
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `cswitch`.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_cswitch")
}

/// Public addresses: each host's own on `eth0`, the others' on `lo`; ARP answered only for
/// addresses on the interface asked (LVS-DR's settings).
fn addresses(net: &Testbed) {
    for (i, host) in HOSTS.iter().enumerate() {
        for key in ["all.arp_ignore=1", "eth0.arp_ignore=1", "all.arp_announce=2", "eth0.arp_announce=2"] {
            net.run(host, &["sysctl", "-qw", &format!("net.ipv4.conf.{key}")]);
        }
        for j in 0..3 {
            let dev = if i == j { "eth0" } else { "lo" };
            net.run(host, &["ip", "addr", "add", &format!("{}/32", public(j).ip()), "dev", dev]);
        }
    }
}

/// A testkit origin named `name` on 127.0.0.1:8080 of `host`, on a runtime of its own that
/// lives until the sender is used or dropped.
fn start_origin(net: &Testbed, host: &str, name: &str) -> (testkit::Origin, std::sync::mpsc::Sender<()>) {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let (tx, rx) = std::sync::mpsc::channel();
    let name = name.to_string();
    net.thread(host, move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let at: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let origin = rt.block_on(testkit::Origin::start_on(&name, at)).unwrap();
        tx.send(origin.clone()).unwrap();
        let _ = stopped.recv();
        origin.kill();
        drop(rt);
    });
    (rx.recv_timeout(Duration::from_secs(10)).unwrap(), stop)
}

/// Node `i`'s config: the same groups on every node, only its name and addresses differ.
fn node_config(i: usize) -> String {
    let me = ip_of(private(i));
    let seeds: Vec<String> =
        (0..3).filter(|j| *j != i).map(|j| format!("\"{}:7946\"", ip_of(private(j)))).collect();
    let servers: Vec<String> = (0..3)
        .map(|j| {
            let ip = ip_of(private(j));
            format!(
                "{{ name = \"{}\", addr = \"{ip}:8081\", local_addr = \"127.0.0.1:8080\", agent = \"{ip}:9000\", mac = \"{}\" }}",
                HOSTS[j],
                mac_of(private(j))
            )
        })
        .collect();
    format!(
        "[global]\nworkers = 1\ngrace_period = \"1s\"\n[access_log]\nenabled = false\n\
         [admin]\nbind = \"127.0.0.1:9900\"\n\
         [agents]\nbind = \"127.0.0.1:9901\"\nsilent_after = \"1s\"\n\
         [cluster]\nnode = \"{}\"\nbind = \"{me}:7946\"\nseeds = [{}]\nkey = \"{KEY}\"\n\
         [oneway]\ninterface = \"eth0\"\ntoken_file = \"token\"\nhandoff_timeout = \"2s\"\n\
         [[listener]]\nname = \"web\"\nbind = \"{}\"\ndefault_group = \"web\"\nmode = \"one-way\"\n\
         [[listener]]\nname = \"web-close\"\nbind = \"{}\"\ndefault_group = \"web\"\nmode = \"one-way\"\n\
         connection_persistence = \"close\"\n\
         [[listener]]\nname = \"peer\"\nbind = \"{me}:8081\"\ndefault_group = \"here\"\n\
         [[group]]\nname = \"web\"\nscheduler = \"sieve\"\nweights = \"agent\"\nservers = [ {} ]\n\
         [[group]]\nname = \"here\"\nservers = [ {{ name = \"origin\", addr = \"127.0.0.1:8080\" }} ]\n",
        HOSTS[i],
        seeds.join(", "),
        public(i),
        public_close(i),
        servers.join(", ")
    )
}

/// Loads `script` with `nft -f -` in `host` (panics if nft refuses it).
pub fn nft(net: &Testbed, host: &str, script: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", &net.ns(host), "nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "nft refused in {host}: {script}");
}
