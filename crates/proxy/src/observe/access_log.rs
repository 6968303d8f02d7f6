//! Access log: one line per request, text or JSON, written by each worker into its own
//! buffer and flushed in batches (on a timer and when the buffer fills), so logging adds no
//! syscall per request.

use config::LogFormat;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What one request did. Strings borrow from the snapshot and the request.
pub struct Record<'a> {
    /// Client address.
    pub client: SocketAddr,
    /// Listener name.
    pub listener: &'a str,
    /// Rule that routed the request ("-" until rules exist / none matched).
    pub rule: &'a str,
    /// Group name ("-" if none).
    pub group: &'a str,
    /// Server name ("-" if none).
    pub server: &'a str,
    /// Request method.
    pub method: &'a str,
    /// Request-target.
    pub target: &'a str,
    /// Status sent to the client (0 = none sent).
    pub status: u16,
    /// Request bytes received from the client (head + body).
    pub bytes_in: u64,
    /// Response bytes sent to the client (head + body).
    pub bytes_out: u64,
    /// Time to the first response byte, from the request head's arrival.
    pub ttfb: Option<Duration>,
    /// Total time, from the request head's arrival to the end of the response.
    pub total: Duration,
    /// Why the request failed or was refused, if it did.
    pub error: Option<&'static str>,
}

/// Where a worker's lines go.
pub enum Sink {
    /// Standard output.
    Stdout,
    /// A file opened for appending.
    File(std::fs::File),
}

thread_local! {
    /// This worker thread's log (a worker is a thread; see `floor::worker`).
    static LOG: RefCell<Option<AccessLog>> = const { RefCell::new(None) };
}

/// Gives the calling worker thread its log, writing to `sink`.
pub fn install(sink: Sink) {
    LOG.with(|log| *log.borrow_mut() = Some(AccessLog::new(sink)));
}

/// Appends one line to the calling worker's log (nothing on a thread without one).
pub fn write(format: LogFormat, r: &Record<'_>) {
    LOG.with(|log| {
        if let Some(log) = log.borrow().as_ref() {
            log.write(format, r);
        }
    });
}

/// Writes out what the calling worker's log holds.
pub fn flush() {
    LOG.with(|log| {
        if let Some(log) = log.borrow().as_ref() {
            log.flush();
        }
    });
}

/// A worker's access log. Whether it is on and its format come from the snapshot at each
/// write, so a reload can switch them; the sink is fixed at start.
struct AccessLog {
    sink: Sink,
    buf: RefCell<String>,
}

const FLUSH_AT: usize = 32 * 1024;

impl AccessLog {
    /// A log writing to `sink`.
    fn new(sink: Sink) -> Self {
        AccessLog { sink, buf: RefCell::new(String::with_capacity(FLUSH_AT + 1024)) }
    }

    /// Appends one line; flushes when the buffer is large.
    fn write(&self, format: LogFormat, r: &Record<'_>) {
        let full = {
            let mut buf = self.buf.borrow_mut();
            match format {
                LogFormat::Text => write_text(&mut buf, r),
                LogFormat::Json => write_json(&mut buf, r),
            }
            buf.len() >= FLUSH_AT
        };
        if full {
            self.flush();
        }
    }

    /// Writes out what is buffered.
    fn flush(&self) {
        let mut buf = self.buf.borrow_mut();
        if buf.is_empty() {
            return;
        }
        let res = match &self.sink {
            Sink::Stdout => std::io::stdout().lock().write_all(buf.as_bytes()),
            Sink::File(f) => (&*f).write_all(buf.as_bytes()),
        };
        if let Err(e) = res {
            tracing::warn!(error = %e, "access log write failed");
        }
        buf.clear();
    }
}

fn write_text(buf: &mut String, r: &Record<'_>) {
    write_timestamp(buf);
    let _ = write!(
        buf,
        " {} {} {} {} {} \"{} {}\" {} {} {} ttfb={} total={}",
        r.client,
        r.listener,
        r.rule,
        r.group,
        r.server,
        r.method,
        r.target,
        r.status,
        r.bytes_in,
        r.bytes_out,
        Millis(r.ttfb),
        Millis(Some(r.total)),
    );
    if let Some(e) = r.error {
        let _ = write!(buf, " error=\"{e}\"");
    }
    buf.push('\n');
}

fn write_json(buf: &mut String, r: &Record<'_>) {
    buf.push_str("{\"time\":\"");
    write_timestamp(buf);
    let _ = write!(buf, "\",\"client\":\"{}\"", r.client);
    for (key, value) in [
        ("listener", r.listener),
        ("rule", r.rule),
        ("group", r.group),
        ("server", r.server),
        ("method", r.method),
        ("target", r.target),
    ] {
        let _ = write!(buf, ",\"{key}\":\"");
        json_escape(buf, value);
        buf.push('"');
    }
    let _ = write!(
        buf,
        ",\"status\":{},\"bytes_in\":{},\"bytes_out\":{},\"ttfb_ms\":{},\"total_ms\":{}",
        r.status,
        r.bytes_in,
        r.bytes_out,
        JsonMillis(r.ttfb),
        JsonMillis(Some(r.total))
    );
    if let Some(e) = r.error {
        let _ = write!(buf, ",\"error\":\"{e}\"");
    }
    buf.push_str("}\n");
}

fn json_escape(buf: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => buf.push_str("\\\""),
            '\\' => buf.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(buf, "\\u{:04x}", c as u32);
            }
            c => buf.push(c),
        }
    }
}

struct Millis(Option<Duration>);

impl std::fmt::Display for Millis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(d) => write!(f, "{:.3}ms", d.as_secs_f64() * 1e3),
            None => f.write_str("-"),
        }
    }
}

struct JsonMillis(Option<Duration>);

impl std::fmt::Display for JsonMillis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(d) => write!(f, "{:.3}", d.as_secs_f64() * 1e3),
            None => f.write_str("null"),
        }
    }
}

/// RFC 3339 UTC timestamp with milliseconds, without a date crate: days since the epoch to
/// a civil date is a few lines (Howard Hinnant's `civil_from_days`).
fn write_timestamp(buf: &mut String) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let _ = write!(
        buf,
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_millis()
    );
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record<'static> {
        Record {
            client: "127.0.0.1:5000".parse().unwrap(),
            listener: "web",
            rule: "-",
            group: "web",
            server: "s1",
            method: "GET",
            target: "/a\"b",
            status: 200,
            bytes_in: 10,
            bytes_out: 20,
            ttfb: None,
            total: Duration::from_micros(1500),
            error: None,
        }
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
    }

    #[test]
    fn text_and_json_lines() {
        let mut t = String::new();
        write_text(&mut t, &record());
        assert!(
            t.ends_with(" 127.0.0.1:5000 web - web s1 \"GET /a\"b\" 200 10 20 ttfb=- total=1.500ms\n"),
            "{t}"
        );
        let mut j = String::new();
        write_json(&mut j, &record());
        assert!(j.contains("\"target\":\"/a\\\"b\""), "{j}");
        assert!(j.contains("\"ttfb_ms\":null,\"total_ms\":1.500}"), "{j}");
    }
}
