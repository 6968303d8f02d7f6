//! A live loopback connection moved from one socket to another with `TCP_REPAIR`, as the
//! switch and an agent do across hosts: the server side reads a request, is dumped and
//! closed silently, and a new socket restored from the dump (with the request put back in
//! its receive queue) reads the request again, answers it, and serves a second request on
//! the same connection. What the client sees is asserted byte for byte, and the restored
//! socket's MSS and options are the original's (spike P4–P6).
//!
//! Needs `CAP_NET_ADMIN`. Without it the test says so and passes, unless
//! `CSWITCH_REQUIRE_KERNEL=1` (set by `.ci/run`, which runs as root) makes it fail.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use cswitch_oneway::{dump, enter_repair, leave_repair, restore, RepairError};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn permitted(e: &std::io::Error) -> bool {
    if e.raw_os_error() == Some(libc_eperm()) {
        assert!(std::env::var_os("CSWITCH_REQUIRE_KERNEL").is_none(), "TCP_REPAIR needs CAP_NET_ADMIN: {e}");
        eprintln!("skipped: TCP_REPAIR needs CAP_NET_ADMIN ({e})");
        return false;
    }
    true
}

fn libc_eperm() -> i32 {
    1
}

/// A loopback listener and a connected client that negotiate an Ethernet-sized MSS (1448),
/// as the hosts of a real deployment do (loopback's own is 65483).
fn connected_pair() -> (TcpStream, TcpStream, std::net::SocketAddr, std::net::SocketAddr) {
    use socket2::{Domain, Socket, Type};
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener.set_mss(1448).unwrap();
    listener.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    listener.listen(8).unwrap();
    let server_addr = listener.local_addr().unwrap().as_socket().unwrap();
    let client = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    client.set_mss(1448).unwrap();
    client.connect(&server_addr.into()).unwrap();
    let (server, client_addr) = listener.accept().unwrap();
    (client.into(), server.into(), server_addr, client_addr.as_socket().unwrap())
}

#[track_caller]
fn read_exactly(s: &mut impl Read, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).unwrap();
    buf
}

#[test]
fn a_connection_moves_to_a_restored_socket_and_goes_on() {
    let (mut client, mut old, server_addr, client_addr) = connected_pair();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

    // The "switch" reads the request head and routes on it.
    let request = b"GET /moved HTTP/1.1\r\nHost: vip\r\n\r\n";
    client.write_all(request).unwrap();
    let head = read_exactly(&mut old, request.len());
    assert_eq!(head, request);
    // A second request arrives before the hand-off: it stays in the kernel's queue and
    // must travel in the dump.
    let pipelined = b"GET /queued HTTP/1.1\r\nHost: vip\r\n\r\n";
    client.write_all(pipelined).unwrap();
    std::thread::sleep(Duration::from_millis(50));

    if let Err(e) = enter_repair(&old) {
        if !permitted(&e) {
            return;
        }
        panic!("TCP_REPAIR: {e}");
    }
    let state = dump(&old).unwrap();
    assert_eq!(state.inq, pipelined, "unread bytes travel in the dump");
    assert!(state.outq.is_empty() && state.unsent == 0);
    assert!(state.tsval.is_some() && state.sack && state.wscale.is_some(), "{state:?}");
    let mss_before = state.mss;
    // Closing in repair mode sends nothing: no FIN, no RST.
    drop(old);

    let restored = match restore(&state, &head, server_addr, client_addr) {
        Ok(s) => s,
        Err(RepairError::Sys { source, .. }) if !permitted(&source) => return,
        Err(e) => panic!("restore: {e}"),
    };
    leave_repair(&restored, true).unwrap();
    let mut new: TcpStream = restored.into();
    new.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

    // The new owner reads the routed request first, then the queued one, as sent.
    assert_eq!(read_exactly(&mut new, request.len()), request);
    assert_eq!(read_exactly(&mut new, pipelined.len()), pipelined);
    let body = vec![b'x'; 100_000];
    let response =
        [format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes(), &body].concat();
    new.write_all(&response).unwrap();
    assert_eq!(read_exactly(&mut client, response.len()), response, "the client reads the answer as sent");

    // The connection goes on both ways with continuous sequence numbers.
    let again = b"GET /again HTTP/1.1\r\nHost: vip\r\n\r\n";
    client.write_all(again).unwrap();
    assert_eq!(read_exactly(&mut new, again.len()), again);
    let no_content = b"HTTP/1.1 204 No Content\r\n\r\n";
    new.write_all(no_content).unwrap();
    assert_eq!(read_exactly(&mut client, no_content.len()), no_content);

    // P5: the restored socket kept the MSS (not the 536 default a bare connect() computes).
    enter_repair(&new).unwrap();
    let after = dump(&new).unwrap();
    leave_repair(&new, false).unwrap();
    assert_eq!((mss_before, after.mss), (1448, 1448));
    assert_eq!(after.wscale, state.wscale);
    // Clean end: the client sees EOF, not a reset.
    drop(new);
    let mut rest = Vec::new();
    assert_eq!(client.read_to_end(&mut rest).unwrap(), 0);
}

#[test]
fn a_restore_onto_a_live_four_tuple_is_refused() {
    let (_client, old, server_addr, client_addr) = connected_pair();
    if let Err(e) = enter_repair(&old) {
        if !permitted(&e) {
            return;
        }
        panic!("TCP_REPAIR: {e}");
    }
    let state = dump(&old).unwrap();
    leave_repair(&old, false).unwrap();
    // `old` still holds the 4-tuple: the kernel refuses (spike P11), and the switch falls
    // back to serving the connection itself.
    match restore(&state, b"", server_addr, client_addr) {
        Err(RepairError::Sys { step: "connect", source }) => {
            assert_eq!(source.raw_os_error(), Some(99), "EADDRNOTAVAIL: {source}");
        }
        other => panic!("expected EADDRNOTAVAIL at connect, got {other:?}"),
    }
}
