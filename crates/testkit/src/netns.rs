//! A testbed of network namespaces the test creates and removes: a bridge, a client, a
//! switch (the VIP on its interface) and servers (the VIP on `lo`, LVS-DR style), each
//! with a fixed MAC, addresses in 10.201.0.0/24 that exist only inside them. Dropped, it
//! deletes every namespace (and with them every interface, socket and table in them).
//! [`Testbed::thread`] runs test code (origins, clients) inside one of its hosts.

use std::process::{Command, Output};

/// The VIP.
pub const VIP: &str = "10.201.0.100";

/// One testbed.
pub struct Testbed {
    prefix: String,
    hosts: Vec<String>,
}

/// A host's address and MAC: `10.201.0.N`, `02:00:00:00:00:NN`.
pub fn ip_of(n: u8) -> String {
    format!("10.201.0.{n}")
}

/// See [`ip_of`].
pub fn mac_of(n: u8) -> String {
    format!("02:00:00:00:00:{n:02x}")
}

impl Testbed {
    /// Creates the bridge and `hosts` (name, last octet); the first named `sw` gets the
    /// VIP, every `b*` gets it on `lo` with the ARP settings of direct server return.
    pub fn new(hosts: &[(&str, u8)]) -> Testbed {
        // Unique per testbed: tests of one binary run at once in one process.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let prefix = format!("csw{}x{n}", std::process::id() % 100_000);
        let mut bed = Testbed { prefix, hosts: Vec::new() };
        let br = bed.ns("br");
        sh(&["ip", "netns", "add", &br]);
        bed.hosts.push(br.clone());
        sh(&["ip", "-n", &br, "link", "add", "br0", "type", "bridge"]);
        sh(&["ip", "-n", &br, "link", "set", "br0", "up"]);
        for (name, n) in hosts {
            let ns = bed.ns(name);
            sh(&["ip", "netns", "add", &ns]);
            bed.hosts.push(ns.clone());
            let port = format!("p{name}");
            sh(&[
                "ip", "-n", &br, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ]);
            sh(&["ip", "-n", &br, "link", "set", &port, "master", "br0", "up"]);
            sh(&["ip", "-n", &ns, "link", "set", "eth0", "address", &mac_of(*n)]);
            sh(&["ip", "-n", &ns, "addr", "add", &format!("{}/24", ip_of(*n)), "dev", "eth0"]);
            sh(&["ip", "-n", &ns, "link", "set", "eth0", "up"]);
            sh(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
            if *name == "sw" {
                sh(&["ip", "-n", &ns, "addr", "add", &format!("{VIP}/32"), "dev", "eth0"]);
            }
            if name.starts_with('b') {
                for key in
                    ["all.arp_ignore=1", "eth0.arp_ignore=1", "all.arp_announce=2", "eth0.arp_announce=2"]
                {
                    sh(&["ip", "netns", "exec", &ns, "sysctl", "-qw", &format!("net.ipv4.conf.{key}")]);
                }
                sh(&["ip", "-n", &ns, "addr", "add", &format!("{VIP}/32"), "dev", "lo"]);
            }
        }
        bed
    }

    /// The namespace's full name.
    pub fn ns(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// Runs `argv` inside host `name`; its output (panics if it fails).
    pub fn run(&self, name: &str, argv: &[&str]) -> Output {
        let ns = self.ns(name);
        let mut full = vec!["ip", "netns", "exec", ns.as_str()];
        full.extend_from_slice(argv);
        sh(&full)
    }
}

impl Testbed {
    /// Whether `argv` succeeds inside host `name`.
    pub fn try_ok(&self, name: &str, argv: &[&str]) -> bool {
        let ns = self.ns(name);
        Command::new("ip").args(["netns", "exec", &ns]).args(argv).output().is_ok_and(|o| o.status.success())
    }
}

impl Testbed {
    /// Runs `work` on a new thread inside host `name`'s network namespace: every socket it
    /// opens (a tokio runtime built there included) lives in that host. A test's origins
    /// and clients run in-process this way.
    pub fn thread<T: Send + 'static>(
        &self,
        name: &str,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let path = format!("/run/netns/{}", self.ns(name));
        std::thread::spawn(move || {
            enter(&path);
            work()
        })
    }
}

/// Moves the calling thread into the network namespace at `path` (setns(2); threads it
/// spawns afterwards start there too).
pub fn enter(path: &str) {
    let ns = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    rustix::thread::move_into_link_name_space(
        std::os::fd::AsFd::as_fd(&ns),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .unwrap_or_else(|e| panic!("setns {path}: {e}"));
}

impl Drop for Testbed {
    fn drop(&mut self) {
        for ns in self.hosts.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// Runs a command; panics with its stderr if it fails.
pub fn sh(argv: &[&str]) -> Output {
    let out = Command::new(argv[0]).args(&argv[1..]).output().unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(out.status.success(), "{argv:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Whether namespaces, `ip` and `nft` are usable here (root); fails under
/// `CSWITCH_REQUIRE_KERNEL=1` when they are not.
pub fn available() -> bool {
    let ok = Command::new("ip").args(["netns", "list"]).output().is_ok_and(|o| o.status.success())
        && Command::new("nft").arg("--version").output().is_ok_and(|o| o.status.success())
        && std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        });
    if !ok {
        assert!(
            std::env::var_os("CSWITCH_REQUIRE_KERNEL").is_none(),
            "network namespaces, ip and nft (as root) are required"
        );
        eprintln!("skipped: needs root, iproute2 and nftables");
    }
    ok
}
