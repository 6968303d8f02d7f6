//! The load of the tests that count what the running switch does per request (system calls,
//! allocations): one listener and one keep-alive origin, many clients at once, each on its
//! keep-alive connection or on a new connection per request.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use super::{tempdir, Running};
use std::net::SocketAddr;
use std::path::PathBuf;

/// A switch on one data path in front of one origin, with keep-alive clients that have each
/// made 5 requests: every client and server connection open, buffers and pools allocated.
/// Dropped in field order: the clients and the switch before the runtime.
pub struct Warmed {
    pub clients: Vec<testkit::RawClient>,
    pub web: SocketAddr,
    pub run: Running,
    pub dir: PathBuf,
    _origin: testkit::Origin,
    pub rt: tokio::runtime::Runtime,
}

/// [`Warmed`] with `clients` clients, on data path `io`, its files in a directory named
/// after `tag`.
pub fn warmed(tag: &str, io: &str, clients: usize) -> Warmed {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let origin = rt.block_on(testkit::Origin::start("o1"));
    let dir = tempdir(tag);
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, one_origin_config(origin.addr(), io)).unwrap();
    let run = Running::start(&path);
    let web = addr_in(&run.wait_for("listening"));
    let clients = rt.block_on(async { send(connect(web, clients).await, 5).await });
    Warmed { clients, web, run, dir, _origin: origin, rt }
}

/// One worker on data path `io` (`[global] io`), no access log, one listener on a free port,
/// one group of one server (`origin`) whose connections are always reused.
pub fn one_origin_config(origin: SocketAddr, io: &str) -> String {
    format!(
        "[global]\nworkers = 1\ngrace_period = \"0s\"\nio = \"{io}\"\n[access_log]\nenabled = false\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nreuse = \"always\"\nservers = [ {{ name = \"o1\", addr = \"{origin}\" }} ]\n"
    )
}

/// The listener's address in its "listening" log line.
pub fn addr_in(line: &str) -> SocketAddr {
    let field = line.split_whitespace().find_map(|w| w.strip_prefix("addr=")).unwrap();
    field.parse().unwrap_or_else(|_| panic!("{line}"))
}

/// Opens `n` keep-alive client connections.
pub async fn connect(web: SocketAddr, n: usize) -> Vec<testkit::RawClient> {
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(testkit::RawClient::connect(web).await.unwrap());
    }
    clients
}

/// Each client sends `n` requests on its connection, one at a time, all clients at once.
pub async fn send(clients: Vec<testkit::RawClient>, n: usize) -> Vec<testkit::RawClient> {
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                for _ in 0..n {
                    c.send(b"GET /s HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
                    assert_eq!(c.read_response().await.unwrap().status, 200);
                }
                c
            })
        })
        .collect();
    let mut back = Vec::new();
    for t in tasks {
        back.push(t.await.unwrap());
    }
    back
}

/// `clients` clients each open `n` connections one after the other, one request each
/// (`Connection: close`), all clients at once.
pub async fn connect_each_time(web: SocketAddr, clients: usize, n: usize) {
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            tokio::spawn(async move {
                for _ in 0..n {
                    let mut c = testkit::RawClient::connect(web).await.unwrap();
                    c.send(b"GET /s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.unwrap();
                    assert_eq!(c.read_response().await.unwrap().status, 200);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}
