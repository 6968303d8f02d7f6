//! The cluster's namespace testbed (issue 13, "Tests"), made and removed by each test: a
//! client `cl` (10.201.0.10, and .11–.14 for clients of their own), an L4 node `lb`
//! (10.201.0.2, the VIP 10.201.0.100 on its interface; `cswitch run` with `[cluster.l4]`
//! and no listener), three cswitch nodes `n1`–`n3` (10.201.0.21–23, real `cswitch run`
//! processes with `[cluster]`) and a server host `srv` (10.201.0.31) with four testkit
//! origins and four TLS servers, all on one bridge. The nodes send their answers to the
//! clients back through `lb` (a host route), as in any NAT-mode L4 deployment.
//!
//! What the tests read is the kernel's and the processes' own word: a flow probe in `lb`'s
//! forward path (which node each client connection went to, after the tier's DNAT), its
//! nftables ruleset (which nodes the tier sends new flows to), and each node's admin API
//! through `cswitch ctl --json`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![allow(dead_code)] // each test file uses part of this

pub mod client;

use crate::common::tempdir;
use crate::oneway_bed::Proc;
use serde_json::Value;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};
use testkit::netns::{ip_of, Testbed};

pub const TOKEN: &str = "l4-test-admin-token-0123";
pub const KEY: &str = "l4-test-gossip-key-0123456789";
pub const AGENT_TOKEN: &str = "l4-test-agent-token-0123";
pub const VIP: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 100);
/// The VIP's ports: carp by URL, STICKY_IP, an inserted cookie, TLS passthrough.
pub const WEB: u16 = 80;
pub const STICKY: u16 = 81;
pub const COOKIE: u16 = 82;
pub const TLS: u16 = 443;
/// The node names, their last octets.
pub const NODES: [(&str, u8); 3] = [("n1", 21), ("n2", 22), ("n3", 23)];
const SRV: u8 = 31;

/// One testbed: its namespaces, processes and servers.
pub struct Bed {
    pub net: Testbed,
    pub dir: std::path::PathBuf,
    pub lb: Proc,
    /// By node index (n1 = 0); `None` once killed or before started.
    pub nodes: Vec<Option<Proc>>,
    pub origins: Vec<SocketAddr>,
    pub tls_servers: Vec<SocketAddr>,
    stop_servers: std::sync::mpsc::Sender<()>,
    /// What the test added to every node's config.
    extra_toml: String,
}

/// What a test adds to the bed: VIP ports of its own, and config appended to every node's
/// (listeners on those ports, groups of servers it runs in `srv`).
#[derive(Default)]
pub struct Extra {
    pub ports: Vec<u16>,
    pub node_toml: String,
}

/// Tests of one binary share the machine's two cores: one bed at a time keeps the timing
/// bounds (2 s, 1 s) about the cluster, not about the scheduler.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The node at `i` (0-based): its name and address.
pub fn node(i: usize) -> (&'static str, Ipv4Addr) {
    let (name, n) = NODES[i];
    (name, Ipv4Addr::new(10, 201, 0, n))
}

impl Bed {
    /// The bed with `started` of the three nodes running (n1 first), and the L4 tier
    /// sending flows to all of them. `None` (skipped) without root, `ip` and `nft`, unless
    /// CSWITCH_REQUIRE_KERNEL is set (then it fails).
    pub fn start(tag: &str, started: usize) -> Option<Bed> {
        Bed::start_with(tag, started, |_| Extra::default())
    }

    /// [`Bed::start`] with what `extra` adds, made once the namespaces exist (so it can
    /// start servers in `srv`).
    pub fn start_with(tag: &str, started: usize, extra: impl FnOnce(&Testbed) -> Extra) -> Option<Bed> {
        if !testkit::netns::available() {
            return None;
        }
        let hosts: Vec<(&str, u8)> = [("cl", 10), ("lb", 2), ("srv", SRV)].into_iter().chain(NODES).collect();
        let net = Testbed::new(&hosts);
        wire_routes(&net);
        let dir = tempdir(&format!("l4-{tag}"));
        std::fs::write(
            dir.join("sticky.rules"),
            "Pin: if (inNet(srcip, \"10.201.0.0/24\")) { routeTo(pin, STICKY_IP); }\n",
        )
        .unwrap();
        let (origins, tls_servers, stop_servers) = start_servers(&net);
        let extra = extra(&net);
        std::fs::write(dir.join("lb.toml"), lb_config(&extra.ports)).unwrap();
        let lb = spawn_switch(&net, "lb", &dir.join("lb.toml"));
        lb.wait_for("L4 tier installed");
        let mut bed = Bed {
            net,
            dir,
            lb,
            nodes: vec![None, None, None],
            origins,
            tls_servers,
            stop_servers,
            extra_toml: extra.node_toml,
        };
        for i in 0..started {
            bed.start_node(i);
        }
        let names: Vec<&str> = NODES[..started].iter().map(|(n, _)| *n).collect();
        bed.until_targets(&names, Duration::from_secs(10));
        Some(bed)
    }

    /// Starts node `i` (`cswitch run` in its namespace); returns once it listens.
    pub fn start_node(&mut self, i: usize) {
        let (name, _) = node(i);
        let path = self.dir.join(format!("{name}.toml"));
        let config = node_config(i, &self.origins, &self.tls_servers) + &self.extra_toml;
        std::fs::write(&path, config).unwrap();
        let proc = spawn_switch(&self.net, name, &path);
        proc.wait_for("listening");
        self.nodes[i] = Some(proc);
    }

    /// `cswitch ctl --json ARGS` on `host`'s admin API.
    pub fn ctl(&self, host: &str, args: &[&str]) -> Value {
        let bin = env!("CARGO_BIN_EXE_cswitch");
        let mut argv = vec![bin, "ctl", "--json", "--addr", "127.0.0.1:9900", "--token", TOKEN];
        argv.extend_from_slice(args);
        let out = self.net.run(host, &argv);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Polls `host`'s `ctl ARGS` until `ok`; how long it took (panics past `limit`).
    pub fn until(
        &self,
        host: &str,
        args: &[&str],
        limit: Duration,
        what: &str,
        ok: impl Fn(&Value) -> bool,
    ) -> Duration {
        let start = Instant::now();
        loop {
            let v = self.ctl(host, args);
            if ok(&v) {
                return start.elapsed();
            }
            assert!(start.elapsed() < limit, "{what}: not within {limit:?}; last answer: {v:#}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The nodes `lb`'s kernel sends new flows to now, by name, read from its ruleset.
    pub fn targets(&self) -> Vec<String> {
        let out = self.net.run("lb", &["nft", "list", "chain", "ip", "cswitch_l4", "spread"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let Some(map) = text.split_once("map {").map(|(_, m)| m.split('}').next().unwrap_or("").to_string())
        else {
            return Vec::new();
        };
        let mut names: Vec<String> = map
            .split(',')
            .filter_map(|slot| slot.split(':').nth(1))
            .filter_map(|ip| node_name(ip.trim().parse().ok()?))
            .collect();
        names.sort();
        names
    }

    /// Waits (polling `lb`'s ruleset) until the tier's targets are `names`; how long it took.
    pub fn until_targets(&self, names: &[&str], limit: Duration) -> Duration {
        let start = Instant::now();
        loop {
            let now = self.targets();
            if now == names {
                return start.elapsed();
            }
            assert!(start.elapsed() < limit, "L4 targets not {names:?} within {limit:?}: {now:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Which node `lb` sent each client connection to (its flow probe): client address →
    /// node name. Every connection is there, refused ones too; client ports are never
    /// reused (`client`), so each entry is one connection. (A connection whose first SYN
    /// the tier retried elsewhere has two nodes: [`Bed::flow_nodes`].)
    pub fn flows(&self) -> std::collections::HashMap<SocketAddrV4, String> {
        let mut flows = std::collections::HashMap::new();
        for (client, nodes) in self.flow_nodes() {
            if let Some(node) = nodes.into_iter().next() {
                flows.insert(client, node);
            }
        }
        flows
    }

    /// Every node `lb` sent each client connection's new flows to, in name order: one for
    /// most, two when the first went to a dead node and the SYN's retransmit was balanced
    /// anew.
    pub fn flow_nodes(&self) -> std::collections::HashMap<SocketAddrV4, Vec<String>> {
        let out = self.net.run("lb", &["nft", "list", "set", "ip", "probe", "flows"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let elements = text.split_once("elements = {").map_or("", |(_, e)| e);
        let mut flows: std::collections::HashMap<SocketAddrV4, Vec<String>> =
            std::collections::HashMap::new();
        for element in elements.split(',') {
            let parts: Vec<&str> = element.split_whitespace().filter(|w| *w != ".").take(3).collect();
            let [ip, port, node] = parts[..] else { continue };
            let (Ok(ip), Ok(port), Ok(node)) = (ip.parse(), port.parse(), node.parse()) else { continue };
            if let Some(name) = node_name(node) {
                let nodes = flows.entry(SocketAddrV4::new(ip, port)).or_default();
                nodes.push(name);
                nodes.sort();
            }
        }
        flows
    }

    /// Kills node `i` (SIGKILL: no goodbye to gossip).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut proc) = self.nodes[i].take() {
            proc.child.kill().unwrap();
            proc.child.wait().unwrap();
        }
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = self.stop_servers.send(());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A node's address from its name.
pub fn node_ip(name: &str) -> Ipv4Addr {
    NODES.iter().find(|(n, _)| *n == name).map(|(_, n)| Ipv4Addr::new(10, 201, 0, *n)).unwrap()
}

/// A node's name from its address.
pub fn node_name(ip: Ipv4Addr) -> Option<String> {
    NODES.iter().find(|(_, n)| Ipv4Addr::new(10, 201, 0, *n) == ip).map(|(name, _)| name.to_string())
}

/// `lb` forwards (and sends no redirects: clients and nodes share the bridge), owns the VIP;
/// the nodes answer the clients (10.201.0.8/29) through it.
fn wire_routes(net: &Testbed) {
    net.run("lb", &["ip", "addr", "add", &format!("{VIP}/32"), "dev", "eth0"]);
    // The test's probe (not the tier's): every new flow from a client, with the node the
    // tier DNATed it to, kept 10 minutes whatever becomes of the connection.
    nft(
        net,
        "lb",
        "table ip probe {
           set flows { type ipv4_addr . inet_service . ipv4_addr; flags dynamic, timeout; timeout 10m; size 65535; }
           chain seen {
             type filter hook forward priority 10; policy accept;
             ip saddr 10.201.0.8/29 ct state new add @flows { ip saddr . tcp sport . ip daddr }
           }
         }
",
    );
    for key in ["ip_forward=1", "conf.all.send_redirects=0", "conf.eth0.send_redirects=0"] {
        net.run("lb", &["sysctl", "-qw", &format!("net.ipv4.{key}")]);
    }
    for (name, _) in NODES {
        net.run(name, &["ip", "route", "add", "10.201.0.8/29", "via", &ip_of(2)]);
    }
    for n in 11..=14 {
        net.run("cl", &["ip", "addr", "add", &format!("{}/24", ip_of(n)), "dev", "eth0"]);
    }
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

/// `cswitch run --config PATH` in `host`.
fn spawn_switch(net: &Testbed, host: &str, path: &std::path::Path) -> Proc {
    let bin = env!("CARGO_BIN_EXE_cswitch");
    Proc::spawn(net, host, &[bin, "run", "--config", &path.to_string_lossy()])
}

/// Four HTTP origins (o1–o4) and four TLS servers (t1–t4) in `srv`, on a thread that
/// keeps them until the sender is used or dropped.
fn start_servers(net: &Testbed) -> (Vec<SocketAddr>, Vec<SocketAddr>, std::sync::mpsc::Sender<()>) {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let (tx, rx) = std::sync::mpsc::channel();
    net.thread("srv", move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let at: SocketAddr = format!("{}:0", ip_of(SRV)).parse().unwrap();
        let origins: Vec<testkit::Origin> = rt.block_on(async {
            let mut v = Vec::new();
            for name in ["o1", "o2", "o3", "o4"] {
                v.push(testkit::Origin::start_on(name, at).await.unwrap());
            }
            v
        });
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tls: Vec<SocketAddr> = ["t1", "t2", "t3", "t4"]
            .into_iter()
            .map(|n| client::tls_server(n, at, std::sync::Arc::clone(&done)))
            .collect();
        tx.send((origins.iter().map(testkit::Origin::addr).collect::<Vec<_>>(), tls)).unwrap();
        let _ = stopped.recv();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        origins.iter().for_each(testkit::Origin::kill);
        drop(origins);
        drop(rt);
    });
    let (origins, tls) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    (origins, tls, stop)
}

fn lb_config(extra_ports: &[u16]) -> String {
    let seeds: Vec<String> = NODES.iter().map(|(_, n)| format!("\"{}:7946\"", ip_of(*n))).collect();
    let ports: Vec<String> =
        [WEB, STICKY, COOKIE, TLS].iter().chain(extra_ports).map(u16::to_string).collect();
    format!(
        "[global]\nworkers = 1\ngrace_period = \"1s\"\n[access_log]\nenabled = false\n\
         [admin]\nbind = \"127.0.0.1:9900\"\ntoken = \"{TOKEN}\"\n\
         [cluster]\nnode = \"lb\"\nbind = \"{}:7946\"\nseeds = [{}]\nkey = \"{KEY}\"\n\
         [cluster.l4]\nvip = \"{VIP}\"\nports = [{}]\n",
        ip_of(2),
        seeds.join(", "),
        ports.join(", ")
    )
}

/// Node `i`'s config: the same listeners and groups on every node (only the node's name
/// and addresses differ), so every node routes alike.
fn node_config(i: usize, origins: &[SocketAddr], tls: &[SocketAddr]) -> String {
    let (name, ip) = node(i);
    let seeds: String = std::iter::once(ip_of(2))
        .chain(NODES.iter().map(|(_, n)| ip_of(*n)))
        .filter(|s| *s != ip.to_string())
        .map(|s| format!("\"{s}:7946\""))
        .collect::<Vec<String>>()
        .join(", ");
    let servers = |prefix: &str, addrs: &[SocketAddr]| -> String {
        let entries: Vec<String> = addrs
            .iter()
            .enumerate()
            .map(|(k, a)| format!("{{ name = \"{prefix}{}\", addr = \"{a}\" }}", k + 1))
            .collect();
        entries.join(", ")
    };
    let o = servers("o", origins);
    format!(
        "[global]\nworkers = 1\ngrace_period = \"1s\"\n[access_log]\nenabled = false\n\
         [admin]\nbind = \"127.0.0.1:9900\"\ntoken = \"{TOKEN}\"\n\
         [agents]\nbind = \"{ip}:9901\"\ntoken = \"{AGENT_TOKEN}\"\nsilent_after = \"5s\"\n\
         [cluster]\nnode = \"{name}\"\nbind = \"{ip}:7946\"\nseeds = [{seeds}]\nkey = \"{KEY}\"\n\
         state_file = \"{name}.state\"\n\
         [[listener]]\nname = \"web\"\nbind = \"0.0.0.0:{WEB}\"\ndefault_group = \"web\"\n\
         [[listener]]\nname = \"sticky\"\nbind = \"0.0.0.0:{STICKY}\"\ndefault_group = \"pin\"\nrules = \"sticky.rules\"\n\
         [[listener]]\nname = \"cookie\"\nbind = \"0.0.0.0:{COOKIE}\"\ndefault_group = \"ins\"\n\
         [[listener]]\nname = \"tls\"\nbind = \"0.0.0.0:{TLS}\"\nprotocol = \"tls\"\ndefault_group = \"tls\"\n\
         [[group]]\nname = \"web\"\nscheduler = \"carp\"\nhash_key = \"url\"\nservers = [ {o} ]\n\
         [[group]]\nname = \"pin\"\nscheduler = \"rr\"\nservers = [ {o} ]\n\
         [[group]]\nname = \"ins\"\nscheduler = \"rr\"\npersistence = {{ mode = \"insert\", cookie = \"SRV\" }}\nservers = [ {o} ]\n\
         [[group]]\nname = \"tls\"\nscheduler = \"rr\"\nservers = [ {} ]\n\
         [[group]]\nname = \"agents\"\nscheduler = \"wrr\"\nweights = \"agent\"\nservers = [ {o} ]\n",
        servers("t", tls),
    )
}

/// Sends `line` (a report as `cswitch agent` sends it) from `srv` to node `i`'s `[agents]`.
pub fn report(net: &Testbed, i: usize, server: SocketAddr, capacity: u32) {
    let to = SocketAddr::from((node(i).1, 9901));
    let line = format!(
        "cswitch-agent/1 server={server} capacity={capacity} load=0.5 metric=loadavg token={AGENT_TOKEN}\n"
    );
    net.thread("srv", move || {
        std::net::UdpSocket::bind("0.0.0.0:0").unwrap().send_to(line.as_bytes(), to).unwrap();
    })
    .join()
    .unwrap();
}

/// Runs `body` with the bed on a thread inside the client's namespace (so its sockets are
/// the client's); the bed is removed there afterwards. Its panic is the test's.
pub fn as_client(bed: Bed, body: impl FnOnce(&mut Bed) + Send + 'static) {
    let path = format!("/run/netns/{}", bed.net.ns("cl"));
    let net_thread = std::thread::spawn(move || {
        testkit::netns::enter(&path);
        let mut bed = bed;
        body(&mut bed);
    });
    if let Err(panic) = net_thread.join() {
        std::panic::resume_unwind(panic);
    }
}
