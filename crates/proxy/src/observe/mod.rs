//! What the operator sees: the end of every request and session recorded once
//! (`record`: live figures and the access log line), the access log's formats and per-worker
//! buffers (`access_log`), and read-only views of the running state for the admin API
//! (`view`). The counters and figures themselves are floor state (`floor::stats`,
//! `floor::live`): every wing writes them.

pub mod access_log;
pub mod record;
pub mod view;
