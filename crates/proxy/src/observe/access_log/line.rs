//! The fields of a line and their two renderings. Absent values are `-` in text and `null`
//! in JSON, one convention for every field. Text puts the values in the configured order,
//! separated by spaces; a value that may hold a space or a quote (`request`, `user_agent`,
//! `error`, …) is quoted, with `"` and `\\` escaped. Durations are milliseconds with three
//! decimals (the field names say `_ms`).

use config::{AccessLog, LogField, LogFormat};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What one request or session did. Strings borrow from the snapshot and the request;
/// an empty string is an absent value.
#[derive(Default)]
pub struct Record<'a> {
    /// Client address (`None` only in tests of absent values).
    pub client: Option<SocketAddr>,
    /// Client IP after the listener's `trusted_proxies` (`None`: not computed).
    pub real_client: Option<IpAddr>,
    /// Listener name.
    pub listener: &'a str,
    /// Label of the rule that decided.
    pub rule: &'a str,
    /// What chose the server (`scheduler`, `persistence`, …).
    pub chosen_by: &'a str,
    /// Group name.
    pub group: &'a str,
    /// Server name.
    pub server: &'a str,
    /// Request method, or the session's protocol.
    pub method: &'a str,
    /// Request-target, or what a session was routed on.
    pub target: &'a str,
    /// HTTP version.
    pub version: &'a str,
    /// `Host` header.
    pub host: &'a str,
    /// `User-Agent` header.
    pub user_agent: &'a str,
    /// Status sent to the client (0 = none sent).
    pub status: u16,
    /// Bytes received from the client.
    pub bytes_in: u64,
    /// Bytes sent to the client.
    pub bytes_out: u64,
    /// Time to connect to the server (or take a pooled connection).
    pub connect: Option<Duration>,
    /// Time to the first response byte, from the request head's arrival.
    pub ttfb: Option<Duration>,
    /// Total time, from the request head's arrival to the end of the response.
    pub total: Option<Duration>,
    /// Other servers tried after failures.
    pub retries: u32,
    /// TLS server name.
    pub sni: &'a str,
    /// TLS version.
    pub tls_version: &'a str,
    /// Why the request failed or was refused, if it did.
    pub error: Option<&'static str>,
}

/// One field's value.
enum Value<'a> {
    Absent,
    /// A string that cannot hold spaces or quotes (names, numbers as text).
    Word(&'a str),
    /// A string that may (printed in quotes in text).
    Text(&'a str),
    Number(u64),
    Millis(Duration),
    Addr(SocketAddr),
    Ip(IpAddr),
    Time,
    /// `method target version`.
    Request,
}

fn value<'a>(r: &Record<'a>, f: LogField) -> Value<'a> {
    let word = |s: &'a str| if s.is_empty() { Value::Absent } else { Value::Word(s) };
    let text = |s: &'a str| if s.is_empty() { Value::Absent } else { Value::Text(s) };
    let ms = |d: Option<Duration>| d.map_or(Value::Absent, Value::Millis);
    match f {
        LogField::Time => Value::Time,
        LogField::Client => r.client.map_or(Value::Absent, Value::Addr),
        LogField::RealClient => r.real_client.map_or(Value::Absent, Value::Ip),
        LogField::Listener => word(r.listener),
        LogField::Rule => word(r.rule),
        LogField::ChosenBy => word(r.chosen_by),
        LogField::Group => word(r.group),
        LogField::Server => word(r.server),
        LogField::Request if r.method.is_empty() => Value::Absent,
        LogField::Request => Value::Request,
        LogField::Method => text(r.method),
        LogField::Target => text(r.target),
        LogField::Version => word(r.version),
        LogField::Host => text(r.host),
        LogField::UserAgent => text(r.user_agent),
        LogField::Status if r.status == 0 => Value::Absent,
        LogField::Status => Value::Number(u64::from(r.status)),
        LogField::BytesIn => Value::Number(r.bytes_in),
        LogField::BytesOut => Value::Number(r.bytes_out),
        LogField::ConnectMs => ms(r.connect),
        LogField::TtfbMs => ms(r.ttfb),
        LogField::TotalMs => ms(r.total),
        LogField::Retries => Value::Number(u64::from(r.retries)),
        LogField::Sni => text(r.sni),
        LogField::TlsVersion => word(r.tls_version),
        LogField::Error => r.error.map_or(Value::Absent, Value::Text),
    }
}

/// Appends `r` as one line in the configured format and fields.
pub fn write(buf: &mut String, cfg: &AccessLog, r: &Record<'_>) {
    match cfg.format {
        LogFormat::Text => write_text(buf, &cfg.fields, r),
        LogFormat::Json => write_json(buf, &cfg.fields, r),
    }
}

fn write_text(buf: &mut String, fields: &[LogField], r: &Record<'_>) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            buf.push(' ');
        }
        match value(r, *f) {
            Value::Absent => buf.push('-'),
            Value::Word(s) => buf.push_str(s),
            Value::Text(s) => quoted(buf, s, text_escape),
            Value::Request => request(buf, r, text_escape),
            v => scalar(buf, &v),
        }
    }
    buf.push('\n');
}

fn write_json(buf: &mut String, fields: &[LogField], r: &Record<'_>) {
    buf.push('{');
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            buf.push(',');
        }
        let _ = write!(buf, "\"{}\":", f.name());
        match value(r, *f) {
            Value::Absent => buf.push_str("null"),
            Value::Word(s) | Value::Text(s) => quoted(buf, s, json_escape),
            Value::Request => request(buf, r, json_escape),
            v @ (Value::Addr(_) | Value::Ip(_) | Value::Time) => {
                buf.push('"');
                scalar(buf, &v);
                buf.push('"');
            }
            v => scalar(buf, &v),
        }
    }
    buf.push_str("}\n");
}

/// Numbers, durations, addresses and the time, the same in both renderings.
fn scalar(buf: &mut String, v: &Value<'_>) {
    let _ = match v {
        Value::Number(n) => write!(buf, "{n}"),
        Value::Millis(d) => write!(buf, "{:.3}", d.as_secs_f64() * 1e3),
        Value::Addr(a) => write!(buf, "{a}"),
        Value::Ip(ip) => write!(buf, "{ip}"),
        Value::Time => {
            timestamp(buf);
            Ok(())
        }
        Value::Absent | Value::Word(_) | Value::Text(_) | Value::Request => Ok(()),
    };
}

/// `"METHOD TARGET VERSION"`, quoted and escaped.
fn request(buf: &mut String, r: &Record<'_>, escape: fn(&mut String, &str)) {
    buf.push('"');
    escape(buf, r.method);
    buf.push(' ');
    escape(buf, r.target);
    if !r.version.is_empty() {
        buf.push(' ');
        buf.push_str(r.version);
    }
    buf.push('"');
}

fn quoted(buf: &mut String, s: &str, escape: fn(&mut String, &str)) {
    buf.push('"');
    escape(buf, s);
    buf.push('"');
}

/// Text escapes: `"` and `\\` with a backslash, control bytes as `\\xHH` (a line stays a line).
fn text_escape(buf: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => buf.push_str("\\\""),
            '\\' => buf.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(buf, "\\x{:02x}", c as u32);
            }
            c => buf.push(c),
        }
    }
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

/// RFC 3339 UTC timestamp with milliseconds, without a date crate: days since the epoch to
/// a civil date is a few lines (Howard Hinnant's `civil_from_days`).
pub(super) fn timestamp(buf: &mut String) {
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
            client: Some("127.0.0.1:5000".parse().unwrap()),
            listener: "web",
            group: "web",
            server: "s1",
            method: "GET",
            target: "/a\"b",
            version: "HTTP/1.1",
            user_agent: "curl/8 (x)",
            status: 200,
            bytes_in: 10,
            bytes_out: 20,
            total: Some(Duration::from_micros(1500)),
            ..Record::default()
        }
    }

    fn cfg(format: LogFormat, fields: &[LogField]) -> AccessLog {
        AccessLog { enabled: true, format, path: None, fields: fields.to_vec(), syslog: None, facility: 16 }
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
    }

    #[test]
    fn default_text_line() {
        let mut t = String::new();
        write(&mut t, &cfg(LogFormat::Text, &LogField::DEFAULT_TEXT), &record());
        let (time, rest) = t.split_once(' ').unwrap();
        assert!(time.ends_with('Z') && time.len() == 24, "{time}");
        assert_eq!(rest, "127.0.0.1:5000 web - web s1 \"GET /a\\\"b HTTP/1.1\" 200 10 20 - 1.500 -\n");
    }

    #[test]
    fn named_fields_in_order_absent_is_null() {
        let fields =
            [LogField::UserAgent, LogField::Status, LogField::Rule, LogField::ConnectMs, LogField::Target];
        let mut j = String::new();
        write(&mut j, &cfg(LogFormat::Json, &fields), &record());
        assert_eq!(
            j,
            "{\"user_agent\":\"curl/8 (x)\",\"status\":200,\"rule\":null,\"connect_ms\":null,\"target\":\"/a\\\"b\"}\n"
        );
        let mut t = String::new();
        write(&mut t, &cfg(LogFormat::Text, &fields), &record());
        assert_eq!(t, "\"curl/8 (x)\" 200 - - \"/a\\\"b\"\n");
    }

    #[test]
    fn every_json_field_parses_as_one_object() {
        let mut j = String::new();
        write(&mut j, &cfg(LogFormat::Json, &LogField::ALL), &Record { error: Some("x\ny"), ..record() });
        assert_eq!(j.matches('\n').count(), 1, "{j}");
        for f in LogField::ALL {
            assert!(j.contains(&format!("\"{}\":", f.name())), "{} missing in {j}", f.name());
        }
        assert!(j.contains("\"error\":\"x\\u000ay\""), "{j}");
    }
}
