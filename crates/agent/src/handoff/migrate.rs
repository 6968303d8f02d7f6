//! The agent's side of moving a connection it serves to another server
//! (`connection_persistence = "migrate"`): the session that read the request registers
//! the connection here and sends `Migrate`; the switch's answers come on any control
//! connection and are handled by the control thread that reads them — `Dump` (the flow is
//! frozen: the socket goes into repair mode and its state goes back as `Dumped`), then
//! `Abort` (moved: the session drops the socket, still in repair mode, so nothing is sent)
//! or `Go` (not moved: out of repair mode, with a window probe, and the session serves the
//! request itself).

use oneway::Frame;
use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Mutex;

/// What became of a migration.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The connection is another server's now.
    Moved,
    /// It stays here: serve the request.
    Stays,
}

/// A connection waiting for the switch.
struct Waiting {
    /// A duplicate of the client socket's descriptor.
    sock: TcpStream,
    /// It was dumped (and is in repair mode).
    dumped: bool,
    tell: SyncSender<Outcome>,
}

/// The migrations under way, by hand-off id.
#[derive(Default)]
pub(super) struct Migrations {
    waiting: Mutex<HashMap<u64, Waiting>>,
}

impl Migrations {
    /// Hand-off `id`'s session asks to move the connection (`sock` duplicates it).
    pub(super) fn ask(&self, id: u64, sock: TcpStream) -> Receiver<Outcome> {
        let (tell, outcome) = mpsc::sync_channel(1);
        self.lock().insert(id, Waiting { sock, dumped: false, tell });
        outcome
    }

    /// The session stopped waiting (the switch never answered): a connection not yet
    /// dumped is its own again (true); a dumped one may be another server's: dropped.
    pub(super) fn give_up(&self, id: u64) -> bool {
        self.lock().remove(&id).is_some_and(|w| !w.dumped)
    }

    /// `Dump{id}`: the answer to send, or `None` when `id` is no migration of ours.
    pub(super) fn dump(&self, id: u64) -> Option<Frame> {
        let mut waiting = self.lock();
        let w = waiting.get_mut(&id)?;
        let dumped = match oneway::enter_repair(&w.sock) {
            Err(e) => Err(e.to_string()),
            Ok(()) => oneway::dump(&w.sock).map_err(|e| {
                let _ = oneway::leave_repair(&w.sock, false);
                e.to_string()
            }),
        };
        Some(match dumped {
            Ok(state) => {
                w.dumped = true;
                Frame::Dumped { id, state }
            }
            Err(e) => {
                tracing::warn!(error = %e, "migration: dump failed; the request stays");
                Frame::Failed { id, reason: format!("dump: {e}") }
            }
        })
    }

    /// `Go{id}` or `Abort{id}` for a migration: the session is told; false when `id` is
    /// no migration of ours.
    pub(super) fn answer(&self, id: u64, moved: bool) -> bool {
        let Some(w) = self.lock().remove(&id) else { return false };
        if !moved && w.dumped {
            // Back from repair mode; the probe makes the client resend what the freeze
            // dropped.
            if let Err(e) = oneway::leave_repair(&w.sock, true) {
                tracing::warn!(error = %e, "migration: leaving repair mode failed");
            }
        }
        let _ = w.tell.send(if moved { Outcome::Moved } else { Outcome::Stays });
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waiting>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}
