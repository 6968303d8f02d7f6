//! When the new process dies after it said it serves, while the old one still drains: the
//! old one takes everything back. Its workers accept again on the listening sockets they
//! kept (the same socket objects: connections queued meanwhile are served), its admin
//! listener answers again, a service manager is told its PID again, and its connections
//! stay with it; those already handed over died with the new process. A new process that
//! was stopped in order (exit status 0, SIGTERM, SIGINT: someone stops the service) is not
//! a crash: the old one finishes its drain and exits as after an upgrade.

use super::Upgrader;
use admin::UpgradeRefused;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::sync::atomic::Ordering;

/// The new process's exit status, if it has crashed.
pub(super) fn crashed(child: &mut Child) -> Option<ExitStatus> {
    let status = child.try_wait().ok()??;
    let stopped = status.success() || matches!(status.signal(), Some(libc_sig::TERM | libc_sig::INT));
    if stopped {
        tracing::info!(%status, "upgrade: the new process was stopped while this one drains");
        return None;
    }
    Some(status)
}

/// Signal numbers (the same on every Linux architecture).
mod libc_sig {
    pub const INT: i32 = 2;
    pub const TERM: i32 = 15;
}

impl Upgrader {
    /// Takes the listeners, the admin listener and the service back after the new process
    /// (`pid`) crashed; the refusal the caller gets.
    pub(super) fn take_back(&self, pid: u32, status: &ExitStatus) -> UpgradeRefused {
        let lost = self.switch.handover_tally().unwrap_or_default().moved;
        self.switch.take_back();
        if let Some((_, gate)) = &*self.admin.lock().unwrap_or_else(|e| e.into_inner()) {
            gate.open();
        }
        super::notify::main_pid(std::process::id());
        self.handed_over.store(false, Ordering::Release);
        let reason = format!(
            "the new process {pid} died ({status}) after it said it serves; this process took \
             the listening sockets back and serves on ({lost} connection(s) handed to it were lost)"
        );
        tracing::error!("upgrade failed: {reason}");
        UpgradeRefused { status: 500, reason: format!("upgrade failed: {reason}") }
    }
}
