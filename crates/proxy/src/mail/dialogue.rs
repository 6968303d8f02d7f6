//! Socket steps shared by the listeners that speak a dialogue before routing (SMTP,
//! POP3, IMAP): flushing the switch's answers, waiting for the client's next commands, and
//! running a sans-io replay against the chosen server until it has an outcome.

use crate::floor::buf::IoBuf;
use crate::floor::io::{read_some, write_all_parts, IoFail};
use crate::floor::snapshot::Snapshot;
use crate::floor::socket::Socket;
use crate::floor::stats::Counter;
use crate::floor::worker::Worker;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

/// Writes the switch's pending answers (`out`, emptied); false when the client is gone.
pub async fn flush<S: AsyncWrite + Unpin>(snap: &Snapshot, client: &mut S, out: &mut Vec<u8>) -> bool {
    if out.is_empty() {
        return true;
    }
    let deadline = Instant::now() + snap.config.timeouts.client_io;
    let ok = write_all_parts(client, &[out], deadline).await.is_ok();
    out.clear();
    ok
}

/// Reads the client's next bytes into `buf` (emptied first). Before routing the client has
/// `client_idle` to type its next command; false when it closed or stayed silent (counted).
pub async fn next_bytes<S: AsyncRead + Unpin>(
    worker: &Worker,
    snap: &Snapshot,
    client: &mut S,
    buf: &mut IoBuf,
) -> bool {
    let deadline = Instant::now() + snap.config.timeouts.client_idle;
    buf.clear();
    match read_some(client, buf, deadline).await {
        Ok(0) | Err(IoFail::Io) => false,
        Ok(_) => true,
        Err(IoFail::Timeout) => {
            worker.shared.stats.inc(Counter::IdleTimeout);
            false
        }
    }
}

/// A sans-io replay the server's bytes are fed to.
pub trait Replay {
    /// How it ends.
    type Outcome;
    /// Takes server bytes, writes commands for the server to `out`; the outcome once known.
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Option<Self::Outcome>;
    /// The server closed, failed or went silent (`why`): the protocol's "try again later".
    fn server_gone(&mut self, why: &str, out: &mut Vec<u8>) -> Self::Outcome;
}

/// Runs `replay` against `server` until it has an outcome; silence for `server_response`
/// (counted `server_timeout`), a close or a failed write (`server_aborted`) ends it through
/// [`Replay::server_gone`].
pub async fn converse<R: Replay>(
    worker: &Worker,
    snap: &Snapshot,
    server: &mut Socket,
    sbuf: &mut IoBuf,
    replay: &mut R,
) -> R::Outcome {
    let deadline = Instant::now() + snap.config.timeouts.server_response;
    let mut to_server = Vec::new();
    loop {
        sbuf.clear();
        let (why, counter) = match read_some(server, sbuf, deadline).await {
            Ok(0) => ("the server closed the connection", Counter::ServerAborted),
            Ok(_) => {
                let ended = replay.feed(sbuf.filled(), &mut to_server);
                if !to_server.is_empty() {
                    let sent = write_all_parts(server, &[&to_server], deadline).await;
                    to_server.clear();
                    if sent.is_err() && ended.is_none() {
                        worker.shared.stats.inc(Counter::ServerAborted);
                        return replay.server_gone("could not write to the server", &mut to_server);
                    }
                }
                match ended {
                    Some(outcome) => return outcome,
                    None => continue,
                }
            }
            Err(IoFail::Timeout) => ("the server did not answer in time", Counter::ServerTimeout),
            Err(IoFail::Io) => ("the server connection failed", Counter::ServerAborted),
        };
        worker.shared.stats.inc(counter);
        return replay.server_gone(why, &mut to_server);
    }
}

impl Replay for mail::login::Replay {
    type Outcome = mail::login::Outcome;
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Option<Self::Outcome> {
        mail::login::Replay::feed(self, bytes, out)
    }
    fn server_gone(&mut self, why: &str, out: &mut Vec<u8>) -> Self::Outcome {
        mail::login::Replay::server_gone(self, why, out)
    }
}

impl Replay for mail::smtp::Replay {
    type Outcome = mail::smtp::Outcome;
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Option<Self::Outcome> {
        mail::smtp::Replay::feed(self, bytes, out)
    }
    fn server_gone(&mut self, why: &str, out: &mut Vec<u8>) -> Self::Outcome {
        mail::smtp::Replay::server_gone(self, why, out)
    }
}

/// What a dialogue session needs besides its stream.
pub struct Ctx<'a> {
    /// The worker.
    pub worker: &'a Worker,
    /// The snapshot the connection started on.
    pub snap: &'a Snapshot,
    /// Listener index.
    pub listener: usize,
    /// Client address.
    pub peer: std::net::SocketAddr,
    /// The address the client connected to.
    pub local: std::net::SocketAddr,
}
