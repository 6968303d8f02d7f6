//! The switch's steering table on a real kernel, in network namespaces the test creates: a
//! client's established connection to the VIP reaches the switch's stack; frozen, its
//! packets are dropped (and counted); unfrozen, the retransmission reaches the switch;
//! flipped, its packets go to the server's MAC with the switch's MAC as source (counted on
//! the server's ingress); forgotten, the map entry is gone. A client's FIN on a steered flow
//! lists it in `ended` with the time the client has been quiet since, which its next packet
//! resets; a conditional forget takes it out, and a new flip of the port clears it. Needs
//! root, iproute2 and nftables (`CSWITCH_REQUIRE_KERNEL=1` turns their absence into a
//! failure).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use cswitch_oneway::Steering;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};
use testkit::netns::{self, ip_of, mac_of, Testbed, VIP};

const TABLE: &str = "cswtest";

/// Runs one steering operation inside host `host`: this test binary again, under
/// `ip netns exec`, running only [`steer_op`] with the operation in the environment (the
/// test process itself never leaves its namespace). What the operation printed: the lines
/// after `OUT `.
fn steer(bed: &Testbed, host: &str, op: &[&str]) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &bed.ns(host)])
        .arg(&exe)
        .args(["--exact", "steer_op", "--quiet", "--test-threads", "1", "--nocapture"])
        .env("CSWITCH_STEER_OP", op.join(" "))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "steer {op:?}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().filter_map(|l| l.strip_prefix("OUT ")).map(str::to_string).collect()
}

fn mac(text: &str) -> [u8; 6] {
    let mut out = [0u8; 6];
    for (b, part) in out.iter_mut().zip(text.split(':')) {
        *b = u8::from_str_radix(part, 16).unwrap();
    }
    out
}

/// Not a test of its own: the body of [`steer`], run in a namespace when
/// `CSWITCH_STEER_OP` says which operation (`install IFACE VIP PORT MAC`, `freeze CLIENT`,
/// `unfreeze CLIENT`, `flip CLIENT MAC`, `forget CLIENT`, `remove`, and the ones that
/// print: `ended` (`CLIENT QUIET_MS` per flow), `flows` (`CLIENT` per flow), `forget_ended
/// CLIENT` (`true`, or `false` when it was not ended)), and `flip_many N MAC` (N made-up
/// clients); without it, nothing.
#[test]
fn steer_op() {
    let Ok(op) = std::env::var("CSWITCH_STEER_OP") else { return };
    let a: Vec<&str> = op.split(' ').collect();
    let client = || a[1].parse().unwrap();
    let table = || Steering::open(TABLE).unwrap();
    match a[0] {
        "ended" => {
            for e in table().ended().unwrap() {
                println!("OUT {} {}", e.client, e.quiet.as_millis());
            }
            return;
        }
        "flows" => {
            for c in table().flows().unwrap() {
                println!("OUT {c}");
            }
            return;
        }
        "forget_ended" => {
            println!("OUT {}", table().forget_ended(client()).unwrap());
            return;
        }
        "flip_new" => {
            println!("OUT {}", table().flip_new(client(), mac(a[2])).is_ok());
            return;
        }
        "flip_many" => {
            let mut t = table();
            for i in 0..a[1].parse::<u32>().unwrap() {
                let ip = std::net::Ipv4Addr::from(0x0a63_0000 + (i >> 8));
                t.flip(std::net::SocketAddrV4::new(ip, 10_000 + (i & 0xff) as u16), mac(a[2])).unwrap();
            }
            return;
        }
        _ => {}
    }
    match a[0] {
        "install" => cswitch_oneway::install_steering(&cswitch_oneway::TableSpec {
            table: TABLE.into(),
            iface: a[1].into(),
            vip: a[2].parse().unwrap(),
            ports: vec![a[3].parse().unwrap()],
            switch_mac: mac(a[4]),
            flow_timeout: Duration::from_secs(600),
        }),
        "remove" => cswitch_oneway::remove_steering(TABLE),
        "freeze" => Steering::open(TABLE).unwrap().freeze(client()),
        "unfreeze" => Steering::open(TABLE).unwrap().unfreeze(client()),
        "forget" => Steering::open(TABLE).unwrap().forget(client()),
        "flip" => Steering::open(TABLE).unwrap().flip(client(), mac(a[2])),
        other => panic!("unknown operation {other}"),
    }
    .unwrap();
}

/// A process in a namespace, its stdout as lines, killed on drop.
struct Proc {
    child: Child,
    lines: Receiver<String>,
}

impl Proc {
    fn spawn(bed: &Testbed, host: &str, script: &str) -> Proc {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &bed.ns(host), "python3", "-u", "-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Proc { child, lines }
    }

    fn say(&mut self, line: &str) {
        writeln!(self.child.stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    /// The next line within `wait`, if any.
    fn line(&self, wait: Duration) -> Option<String> {
        self.lines.recv_timeout(wait).ok()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Packets counted by the rule of `chain` in `table` whose text contains `marker`.
fn counted(bed: &Testbed, host: &str, table: &str, chain: &str, marker: &str) -> u64 {
    let out = bed.run(host, &["nft", "list", "chain", "netdev", table, chain]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = text.lines().find(|l| l.contains(marker)).unwrap_or_else(|| panic!("no `{marker}` in {text}"));
    let after = line.split("packets ").nth(1).unwrap_or("0");
    after.split_whitespace().next().unwrap_or("0").parse().unwrap_or(0)
}

fn eventually(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within 5 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn freeze_unfreeze_flip_and_forget_steer_a_live_flow() {
    if !netns::available() {
        return;
    }
    let bed = Testbed::new(&[("cl", 10), ("sw", 2), ("b1", 11)]);
    steer(&bed, "sw", &["install", "eth0", VIP, "80", &mac_of(2)]);
    // The server counts what reaches its ingress from the switch's MAC for the VIP.
    bed.run("b1", &["nft", "add", "table", "netdev", "seen"]);
    let hook = "{ type filter hook ingress device \"eth0\" priority 0; }";
    bed.run("b1", &["nft", "add", "chain", "netdev", "seen", "in", hook]);
    let from_switch = format!("ether saddr {} ip daddr {VIP} tcp dport 80 counter", mac_of(2));
    bed.run("b1", &["sh", "-c", &format!("nft add rule netdev seen in {from_switch}")]);

    let server = Proc::spawn(
        &bed,
        "sw",
        &format!(
            "import socket\nl=socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             l.bind(('{VIP}', 80)); l.listen(4); print('listening')\nc,_=l.accept()\n\
             while True:\n  d=c.recv(100)\n  if not d: break\n  print(d.decode())\n"
        ),
    );
    assert_eq!(server.line(Duration::from_secs(5)).as_deref(), Some("listening"));
    let mut client = Proc::spawn(
        &bed,
        "cl",
        &format!(
            "import socket, sys\ns=socket.socket(); s.bind(('{}', 40000)); s.connect(('{VIP}', 80)); print('connected')\n\
             for line in sys.stdin:\n  s.send(line.strip().encode()); print('sent')\n",
            ip_of(10)
        ),
    );
    assert_eq!(client.line(Duration::from_secs(5)).as_deref(), Some("connected"));
    let flow = format!("{}:40000", ip_of(10));

    // Not steered: the switch's own stack gets the bytes.
    client.say("a");
    assert_eq!(server.line(Duration::from_secs(3)).as_deref(), Some("a"));

    // Frozen: dropped, and counted.
    steer(&bed, "sw", &["freeze", &flow]);
    client.say("b");
    eventually("a frozen packet is counted", || counted(&bed, "sw", TABLE, "vip", "@frozen") > 0);
    assert_eq!(server.line(Duration::from_millis(300)), None, "a frozen flow reaches nobody");

    // Unfrozen: the client's retransmission reaches the switch.
    steer(&bed, "sw", &["unfreeze", &flow]);
    assert_eq!(server.line(Duration::from_secs(5)).as_deref(), Some("b"));

    // Flipped: the flow's packets go to the server, with the switch's MAC as source.
    steer(&bed, "sw", &["flip", &flow, &mac_of(11)]);
    let before = counted(&bed, "b1", "seen", "in", "counter");
    client.say("c");
    eventually("a steered packet reaches the server", || {
        counted(&bed, "b1", "seen", "in", "counter") > before
    });
    assert_eq!(server.line(Duration::from_millis(300)), None, "a steered flow no longer reaches the switch");
    let flows = bed.run("sw", &["nft", "list", "map", "netdev", TABLE, "flows"]);
    assert!(String::from_utf8_lossy(&flows.stdout).contains(&mac_of(11)), "the flow is in the map");
    // The short flip (for ports without an entry) refuses an entry that is there, changing
    // nothing; a second full flip of the same client port to another server replaces it.
    assert_eq!(steer(&bed, "sw", &["flip_new", &flow, &mac_of(12)]), ["false"]);
    let flows = bed.run("sw", &["nft", "list", "map", "netdev", TABLE, "flows"]);
    assert!(String::from_utf8_lossy(&flows.stdout).contains(&mac_of(11)), "unchanged");
    steer(&bed, "sw", &["flip", &flow, &mac_of(12)]);
    let flows =
        String::from_utf8_lossy(&bed.run("sw", &["nft", "list", "map", "netdev", TABLE, "flows"]).stdout)
            .to_string();
    assert!(flows.contains(&mac_of(12)) && !flows.contains(&mac_of(11)), "{flows}");

    // Forgotten: gone from the map (and a second forget is not an error).
    steer(&bed, "sw", &["forget", &flow]);
    steer(&bed, "sw", &["forget", &flow]);
    let flows = bed.run("sw", &["nft", "list", "map", "netdev", TABLE, "flows"]);
    assert!(!String::from_utf8_lossy(&flows.stdout).contains(&mac_of(12)), "the flow left the map");
    // With no entry, the short flip steers it.
    assert_eq!(steer(&bed, "sw", &["flip_new", &flow, &mac_of(11)]), ["true"]);
    let flows = bed.run("sw", &["nft", "list", "map", "netdev", TABLE, "flows"]);
    assert!(String::from_utf8_lossy(&flows.stdout).contains(&mac_of(11)), "steered by the short flip");
    steer(&bed, "sw", &["remove"]);
}

/// Sends one TCP segment with `flags` from the client's port `sport` to the VIP's port 80
/// through a raw socket: no connection needed, since the steering table matches addresses,
/// ports and flags only. Its checksum is 0, so the server's stack drops it (no RST back).
fn segment(bed: &Testbed, sport: u16, flags: u8) {
    let script = format!(
        "import socket, struct\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)\n\
         s.sendto(struct.pack('!HHIIBBHHH', {sport}, 80, 1, 1, 5 << 4, {flags}, 1024, 0, 0), ('{VIP}', 0))"
    );
    bed.run("cl", &["python3", "-c", &script]);
}

/// `ended`'s lines as (client, quiet ms).
fn ended(bed: &Testbed) -> Vec<(String, u64)> {
    steer(bed, "sw", &["ended"])
        .iter()
        .map(|l| {
            let (c, q) = l.split_once(' ').unwrap();
            (c.to_string(), q.parse().unwrap())
        })
        .collect()
}

#[test]
fn a_client_fin_on_a_steered_flow_lists_it_ended_with_its_quiet_time() {
    if !netns::available() {
        return;
    }
    const FIN_ACK: u8 = 0x11;
    const ACK: u8 = 0x10;
    let bed = Testbed::new(&[("cl", 10), ("sw", 2), ("b1", 11)]);
    steer(&bed, "sw", &["install", "eth0", VIP, "80", &mac_of(2)]);
    let flow = format!("{}:40001", ip_of(10));
    steer(&bed, "sw", &["flip", &flow, &mac_of(11)]);
    assert_eq!(steer(&bed, "sw", &["flows"]), [flow.as_str()]);
    assert!(ended(&bed).is_empty());

    // An unsteered port's FIN is not the table's business.
    segment(&bed, 40002, FIN_ACK);
    // The steered flow's FIN: ended, and quiet from then on.
    segment(&bed, 40001, FIN_ACK);
    eventually("the FIN lists the flow in ended", || !ended(&bed).is_empty());
    std::thread::sleep(Duration::from_millis(1500));
    let listed = ended(&bed);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].0, flow);
    assert!((1400..5000).contains(&listed[0].1), "quiet for about 1.5 s: {listed:?}");
    // Any later packet of the flow (an ACK here) says the client is not quiet.
    segment(&bed, 40001, ACK);
    eventually("the ACK resets the quiet time", || ended(&bed).first().is_some_and(|(_, q)| *q < 1000));

    // The conditional forget takes it out of both; a second one finds nothing to do.
    assert_eq!(steer(&bed, "sw", &["forget_ended", &flow]), ["true"]);
    assert!(steer(&bed, "sw", &["flows"]).is_empty());
    assert!(ended(&bed).is_empty());
    assert_eq!(steer(&bed, "sw", &["forget_ended", &flow]), ["false"]);

    // Ended, then flipped again (a new connection on the same port): no longer ended, and
    // the conditional forget leaves the new connection's entry alone.
    steer(&bed, "sw", &["flip", &flow, &mac_of(11)]);
    segment(&bed, 40001, FIN_ACK);
    eventually("ended again", || !ended(&bed).is_empty());
    steer(&bed, "sw", &["flip", &flow, &mac_of(11)]);
    assert!(ended(&bed).is_empty(), "a flip clears the port's ended entry");
    assert_eq!(steer(&bed, "sw", &["forget_ended", &flow]), ["false"]);
    assert_eq!(steer(&bed, "sw", &["flows"]), [flow.as_str()]);

    // A dump of many elements spans many netlink datagrams: every one is listed.
    steer(&bed, "sw", &["flip_many", "5000", &mac_of(11)]);
    assert_eq!(steer(&bed, "sw", &["flows"]).len(), 5001);
    steer(&bed, "sw", &["remove"]);
}
