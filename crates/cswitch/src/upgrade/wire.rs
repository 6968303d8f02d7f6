//! The channel between an old and a new process during a binary upgrade: a Unix
//! `SOCK_SEQPACKET` socket (each message arrives whole, with the descriptors it carries),
//! named in the abstract namespace so nothing is left on disk. A message is one JSON
//! object (its `kind` says what it is), then, after a NUL byte (which JSON text never
//! holds), raw bytes if it carries any (a moved tunnel's buffered bytes), and, with
//! `SCM_RIGHTS`, the sockets it is about.
//! rustix's `sendmsg`/`recvmsg` are safe: descriptors leave as `BorrowedFd`s and arrive
//! as `OwnedFd`s, so this module needs no `unsafe`.

use rustix::net::{
    self, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};
use serde_json::Value;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Duration;

/// The environment variable that names the channel to a new process.
pub const ENV: &str = "CSWITCH_UPGRADE_SOCKET";

/// Most descriptors in one message (the kernel's limit is 253).
pub const MAX_FDS: usize = 64;

/// Largest message (state is sent in pieces below it; the default socket buffer takes
/// some 200 KiB).
pub const MAX_MESSAGE: usize = 64 << 10;

/// A message as it arrived: the JSON, the descriptors, the raw bytes.
pub type Received = (Value, Vec<OwnedFd>, Vec<u8>);

/// One end of the channel.
pub struct Channel(OwnedFd);

/// The old process's end before the new one connects.
pub struct Listener {
    socket: OwnedFd,
    /// The abstract name, for the new process's environment.
    pub name: String,
}

impl Listener {
    /// Listens on a fresh abstract name.
    pub fn bind() -> io::Result<Listener> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let name = format!("cswitch-upgrade-{}-{}", std::process::id(), nanos.as_nanos());
        let socket =
            net::socket_with(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?;
        net::bind(&socket, &SocketAddrUnix::new_abstract_name(name.as_bytes())?)?;
        net::listen(&socket, 1)?;
        Ok(Listener { socket, name })
    }

    /// Waits up to `wait` for the new process (`pid`) to connect; a connection from any
    /// other process is refused.
    pub fn accept(&self, wait: Duration, pid: u32) -> io::Result<Option<Channel>> {
        net::sockopt::set_socket_timeout(&self.socket, net::sockopt::Timeout::Recv, Some(wait))?;
        let socket = match net::accept_with(&self.socket, SocketFlags::CLOEXEC) {
            Ok(s) => s,
            Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::INTR => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let peer = net::sockopt::socket_peercred(&socket)?;
        if peer.pid.as_raw_nonzero().get().unsigned_abs() != pid {
            let who = peer.pid.as_raw_nonzero();
            tracing::warn!(pid = who, "upgrade channel: a process other than the new one connected; refused");
            return Ok(None);
        }
        Ok(Some(Channel(socket)))
    }
}

/// Bytes of entries per state message: well under [`MAX_MESSAGE`] with the envelope.
const STATE_CHUNK: usize = 48 << 10;

impl Channel {
    /// Sends `state` in messages under [`MAX_MESSAGE`]: edits, counters and listeners
    /// first, then servers, sticky, persistence and TLS session entries in pieces (an entry
    /// too large for a message on its own, a huge learned cookie, is left behind).
    pub fn send_state(&self, state: proxy::UpgradeState) -> io::Result<()> {
        let proxy::UpgradeState { edits, counters, listeners, servers, sticky, persistence, tls_sessions } =
            state;
        let head = proxy::UpgradeState { edits, counters, listeners, ..Default::default() };
        self.send(&serde_json::json!({ "kind": "state", "state": head }), &[])?;
        self.send_pieces(servers, |servers| proxy::UpgradeState { servers, ..Default::default() })?;
        self.send_pieces(sticky, |sticky| proxy::UpgradeState { sticky, ..Default::default() })?;
        self.send_pieces(persistence, |persistence| proxy::UpgradeState {
            persistence,
            ..Default::default()
        })?;
        self.send_pieces(tls_sessions, |tls_sessions| proxy::UpgradeState {
            tls_sessions,
            ..Default::default()
        })
    }

    fn send_pieces<T: serde::Serialize>(
        &self,
        items: Vec<T>,
        wrap: impl Fn(Vec<T>) -> proxy::UpgradeState,
    ) -> io::Result<()> {
        let mut piece = Vec::new();
        let mut bytes = 0;
        for item in items {
            let size = serde_json::to_vec(&item).map_or(usize::MAX, |v| v.len());
            if size > STATE_CHUNK {
                tracing::warn!(size, "an upgrade state entry too large to send; left behind");
                continue;
            }
            if bytes + size > STATE_CHUNK {
                let part = wrap(std::mem::take(&mut piece));
                self.send(&serde_json::json!({ "kind": "state", "state": part }), &[])?;
                bytes = 0;
            }
            bytes += size;
            piece.push(item);
        }
        if !piece.is_empty() {
            self.send(&serde_json::json!({ "kind": "state", "state": wrap(piece) }), &[])?;
        }
        Ok(())
    }

    /// Connects to the channel named by [`ENV`], if set (this process is an upgrade's new one).
    pub fn from_env() -> io::Result<Option<Channel>> {
        let Some(name) = std::env::var_os(ENV) else { return Ok(None) };
        let socket =
            net::socket_with(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?;
        net::connect(&socket, &SocketAddrUnix::new_abstract_name(name.as_encoded_bytes())?)?;
        Ok(Some(Channel(socket)))
    }

    /// Sends `message` with `fds` (at most [`MAX_FDS`]).
    pub fn send(&self, message: &Value, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        self.send_with(message, &[], fds)
    }

    /// Sends `message`, raw `bytes` after it, and `fds`; the whole must fit in
    /// [`MAX_MESSAGE`] (else an error, nothing sent).
    pub fn send_with(&self, message: &Value, bytes: &[&[u8]], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        let mut body = serde_json::to_vec(message).map_err(io::Error::other)?;
        let raw: usize = bytes.iter().map(|b| b.len()).sum();
        if raw > 0 {
            if body.len() + 1 + raw > MAX_MESSAGE {
                let why = format!("{raw} buffered bytes do not fit in one message of the upgrade channel");
                return Err(io::Error::other(why));
            }
            body.push(0);
            bytes.iter().for_each(|b| body.extend_from_slice(b));
        }
        let mut space = vec![MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(fds.len().max(1)))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::other("too many descriptors for one message"));
        }
        net::sendmsg(&self.0, &[IoSlice::new(&body)], &mut control, SendFlags::NOSIGNAL)?;
        Ok(())
    }

    /// The next message, its descriptors and the raw bytes after it; `None` once the other
    /// end closed. Waits at most `wait` (`None`: for ever); a timeout is
    /// `ErrorKind::WouldBlock`.
    pub fn recv(&self, wait: Option<Duration>) -> io::Result<Option<Received>> {
        net::sockopt::set_socket_timeout(&self.0, net::sockopt::Timeout::Recv, wait)?;
        let mut body = vec![0u8; MAX_MESSAGE];
        let mut space = vec![MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let flags = RecvFlags::CMSG_CLOEXEC;
        let got = net::recvmsg(&self.0, &mut [IoSliceMut::new(&mut body)], &mut control, flags)?;
        let mut fds = Vec::new();
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = message {
                fds.extend(received);
            }
        }
        if got.bytes == 0 {
            return Ok(None);
        }
        let body = &body[..got.bytes];
        let (text, bytes) = match body.iter().position(|&b| b == 0) {
            Some(nul) => (&body[..nul], body[nul + 1..].to_vec()),
            None => (body, Vec::new()),
        };
        let message = serde_json::from_slice(text).map_err(io::Error::other)?;
        Ok(Some((message, fds, bytes)))
    }
}
