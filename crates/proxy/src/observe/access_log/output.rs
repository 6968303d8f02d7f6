//! Where access-log lines go: stdout, a file opened for appending, or syslog. One
//! [`LogOutput`] is shared by the workers; [`LogOutput::set`] swaps what it writes to, so a
//! rotated file is reopened (SIGUSR1, `cswitch ctl reopen`, every reload) and a changed
//! `path` or `syslog` applies on reload. A worker writes a whole buffer in one `write` to
//! an `O_APPEND` file, so batches of different workers never mix inside a line, and each
//! batch goes to exactly one file: the old one if it was written before the swap, the new
//! one after.

use super::syslog::Syslog;
use arc_swap::ArcSwap;
use config::AccessLog;
use std::fs::File;
use std::io::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The shared output.
pub struct LogOutput {
    target: ArcSwap<Target>,
}

/// One opened destination.
pub enum Target {
    /// Standard output.
    Stdout,
    /// A file opened for appending.
    File(File),
    /// A syslog socket.
    Syslog(Syslog),
}

impl Target {
    /// Opens what `cfg` names (the file is created if missing, never truncated).
    pub fn open(cfg: &AccessLog) -> io::Result<Target> {
        if let Some(to) = &cfg.syslog {
            return Syslog::open(to, cfg.facility).map(Target::Syslog);
        }
        let Some(path) = &cfg.path else { return Ok(Target::Stdout) };
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(Target::File)
            .map_err(|e| io::Error::new(e.kind(), format!("access log {}: {e}", path.display())))
    }
}

impl LogOutput {
    /// An output writing to what `cfg` names.
    pub fn open(cfg: &AccessLog) -> io::Result<LogOutput> {
        Ok(LogOutput { target: ArcSwap::from_pointee(Target::open(cfg)?) })
    }

    /// From now on, lines go to `target`; the previous file closes when its last writer
    /// is done with it.
    pub fn set(&self, target: Target) {
        self.target.store(Arc::new(target));
    }

    /// Writes a batch of whole lines.
    pub fn write(&self, lines: &[u8]) {
        let res = match &**self.target.load() {
            Target::Stdout => io::stdout().lock().write_all(lines),
            Target::File(f) => (&*f).write_all(lines),
            Target::Syslog(s) => s.send_lines(lines),
        };
        if let Err(e) = res {
            warn_at_most_once_a_second(&e);
        }
    }
}

/// A full disk or an absent syslog daemon would otherwise log a warning per batch.
fn warn_at_most_once_a_second(e: &io::Error) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    if LAST.swap(now, Ordering::Relaxed) != now {
        tracing::warn!(error = %e, "access log write failed; lines lost");
    }
}
