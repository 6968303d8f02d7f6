//! Access log: one line per request or session, text or JSON, holding the fields the
//! config names (`[access_log] fields`).
//!
//! Each worker formats lines into its own buffer and writes the buffer out in one go when
//! it fills or on the worker's 250 ms tick, so logging adds no syscall per request. What
//! that means for a reader (docs/config.md): a line reaches the file at most ~250 ms after
//! its request ended; one worker's lines are in the order its requests ended; lines of
//! different workers interleave batch by batch, so the file is not sorted by `time` across
//! workers.
//!
//! - `line`: the fields and their text and JSON renderings.
//! - `output`: where lines go (stdout, a file, syslog), shared by the workers and swapped
//!   by reopen and reload; `syslog`: RFC 5424 framing.

mod line;
mod output;
mod syslog;

pub use line::Record;
pub use output::{LogOutput, Target};

use config::AccessLog;
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// This worker thread's log (a worker is a thread; see `floor::worker`).
    static LOG: RefCell<Option<WorkerLog>> = const { RefCell::new(None) };
}

/// Gives the calling worker thread its log buffer, writing to `output`.
pub fn install(output: Arc<LogOutput>) {
    LOG.with(|log| *log.borrow_mut() = Some(WorkerLog::new(output)));
}

/// Appends one line to the calling worker's log (nothing on a thread without one).
pub fn write(cfg: &AccessLog, r: &Record<'_>) {
    LOG.with(|log| {
        if let Some(log) = log.borrow_mut().as_mut() {
            log.write(cfg, r);
        }
    });
}

/// Writes out what the calling worker's log holds.
pub fn flush() {
    LOG.with(|log| {
        if let Some(log) = log.borrow_mut().as_mut() {
            log.flush();
        }
    });
}

/// A worker's buffer. Whether logging is on, the format and the fields come from the
/// snapshot at each write, so a reload switches them; the output is shared and swapped by
/// reopen and reload.
struct WorkerLog {
    output: Arc<LogOutput>,
    buf: String,
}

const FLUSH_AT: usize = 32 * 1024;

impl WorkerLog {
    fn new(output: Arc<LogOutput>) -> Self {
        WorkerLog { output, buf: String::with_capacity(FLUSH_AT + 1024) }
    }

    /// Appends one line; flushes when the buffer is large.
    fn write(&mut self, cfg: &AccessLog, r: &Record<'_>) {
        line::write(&mut self.buf, cfg, r);
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.output.write(self.buf.as_bytes());
            self.buf.clear();
        }
    }
}
