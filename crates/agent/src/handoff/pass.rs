//! Giving a restored connection's descriptor to a local server that takes descriptors
//! (`SCM_RIGHTS` over a Unix socket, `--pass-fd PATH`; issue 12 part 2): the server then
//! owns the client's connection outright — no relay, no copy, no thread on the agent. The
//! message is one byte with the descriptor attached; the agent keeps one Unix connection
//! to the server and opens it again when it breaks. A server that is not there gets
//! nothing: the caller relays the connection instead, so no request is lost.

use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Mutex;

/// The Unix socket of the server that takes descriptors, and the connection to it.
pub(super) struct Passer {
    path: PathBuf,
    conn: Mutex<Option<UnixStream>>,
}

impl Passer {
    pub(super) fn new(path: PathBuf) -> Passer {
        Passer { path, conn: Mutex::new(None) }
    }

    /// Gives `client` to the server (the agent's copy of the descriptor is closed). `Err`
    /// hands the connection back, untouched, when the server cannot take it.
    pub(super) fn pass(&self, client: TcpStream) -> Result<(), TcpStream> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        // The held connection may have been closed by a restarted server: one more try
        // on a fresh one.
        for _ in 0..2 {
            if conn.is_none() {
                match UnixStream::connect(&self.path) {
                    Ok(c) => *conn = Some(c),
                    Err(e) => {
                        tracing::warn!(path = %self.path.display(), error = %e, "descriptor server unreachable; relayed instead");
                        return Err(client);
                    }
                }
            }
            match conn.as_ref().map(|c| send_fd(c, &client)) {
                Some(Ok(())) => return Ok(()),
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "descriptor not passed; reconnecting");
                    *conn = None;
                }
                None => {}
            }
        }
        Err(client)
    }
}

/// One byte, with `fd` in an `SCM_RIGHTS` message.
fn send_fd(conn: &UnixStream, fd: &impl AsFd) -> io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [fd.as_fd()];
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for the descriptor"));
    }
    let sent = sendmsg(conn, &[IoSlice::new(b"F")], &mut control, SendFlags::NOSIGNAL)?;
    if sent == 1 {
        Ok(())
    } else {
        Err(io::Error::other("descriptor message not sent"))
    }
}
