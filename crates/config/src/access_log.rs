//! `[access_log]`: on or off, the format, which fields a line holds and in what order, and
//! where lines go (stdout, a file, or syslog).

use crate::diag::Sink;
use crate::keys::{home_of, ACCESS_LOG_KEYS};
use crate::walk::{Located, Table};
use crate::{AccessLog, LogField, LogFormat, SyslogTarget};
use std::path::{Path, PathBuf};

/// Syslog facilities by name (RFC 5424 §6.2.1).
const FACILITIES: [(&str, u8); 20] = [
    ("kern", 0),
    ("user", 1),
    ("mail", 2),
    ("daemon", 3),
    ("auth", 4),
    ("syslog", 5),
    ("lpr", 6),
    ("news", 7),
    ("uucp", 8),
    ("cron", 9),
    ("authpriv", 10),
    ("ftp", 11),
    ("local0", 16),
    ("local1", 17),
    ("local2", 18),
    ("local3", 19),
    ("local4", 20),
    ("local5", 21),
    ("local6", 22),
    ("local7", 23),
];

/// `[access_log]`, and where its `path` is written (for `cswitch check`'s report on the file).
pub(crate) fn read(root: &Table, sink: &mut Sink, base: &Path) -> (AccessLog, Option<Located<PathBuf>>) {
    let mut log = AccessLog {
        enabled: true,
        format: LogFormat::Text,
        path: None,
        fields: LogField::DEFAULT_TEXT.to_vec(),
        syslog: None,
        facility: 16,
    };
    let Some(t) = root.section(sink, "access_log") else {
        return (log, None);
    };
    t.reject_unknown(sink, ACCESS_LOG_KEYS, home_of);
    log.enabled = t.bool_or(sink, "enabled", true);
    log.format = format(&t, sink);
    log.fields = fields(&t, sink).unwrap_or_else(|| match log.format {
        LogFormat::Text => LogField::DEFAULT_TEXT.to_vec(),
        LogFormat::Json => LogField::default_json(),
    });
    log.syslog = syslog(&t, sink);
    log.facility = facility(&t, sink);
    let mut at = None;
    if let Some(path) = t.string(sink, "path") {
        if path.value.is_empty() {
            let hint = Some("remove `path` to log to stdout".to_string());
            sink.error(&path.span, &path.key, "`path` is empty", hint);
        } else if log.syslog.is_some() {
            let hint = Some("keep one of `path` and `syslog`".to_string());
            sink.error(&path.span, &path.key, "`path` and `syslog` both set: lines go to one place", hint);
        } else {
            log.path = Some(base.join(path.value));
            at = Some(Located { value: base.join(path.value), span: path.span, key: path.key });
        }
    }
    (log, at)
}

fn format(t: &Table, sink: &mut Sink) -> LogFormat {
    let Some(format) = t.string(sink, "format") else {
        return LogFormat::Text;
    };
    match format.value {
        "text" => LogFormat::Text,
        "json" => LogFormat::Json,
        other => {
            let message = format!("unknown access-log format `{other}`; valid: text, json");
            let hint = crate::suggest::hint(other, ["text", "json"]);
            sink.error(&format.span, &format.key, message, hint);
            LogFormat::Text
        }
    }
}

/// `fields = ["time", "client", …]`: every name must be a field, none twice.
fn fields(t: &Table, sink: &mut Sink) -> Option<Vec<LogField>> {
    let names = t.strings(sink, "fields")?;
    let (span, key) = (t.value_span("fields"), t.key_path("fields"));
    let mut out = Vec::with_capacity(names.len());
    for name in &names {
        match LogField::from_name(name) {
            Some(f) if out.contains(&f) => {
                let hint = Some(format!("remove the second \"{name}\""));
                sink.error(&span, &key, format!("field `{name}` is listed twice"), hint);
            }
            Some(f) => out.push(f),
            None => {
                let valid: Vec<&str> = LogField::ALL.iter().map(|f| f.name()).collect();
                let hint = crate::suggest::hint(name, valid.iter().copied())
                    .or_else(|| Some(format!("valid: {}", valid.join(", "))));
                sink.error(&span, &key, format!("unknown access-log field `{name}`"), hint);
            }
        }
    }
    if out.is_empty() && names.is_empty() {
        let hint = Some("list at least one field, or remove `fields` for the default".to_string());
        sink.error(&span, &key, "`fields` is empty", hint);
    }
    Some(out)
}

/// `syslog = "udp://IP:port"` or `"unix:/dev/log"`.
fn syslog(t: &Table, sink: &mut Sink) -> Option<SyslogTarget> {
    let s = t.string(sink, "syslog")?;
    let hint = || Some("write \"udp://127.0.0.1:514\" or \"unix:/dev/log\"".to_string());
    if let Some(addr) = s.value.strip_prefix("udp://") {
        match addr.parse() {
            Ok(addr) => return Some(SyslogTarget::Udp(addr)),
            Err(_) => sink.error(&s.span, &s.key, format!("`{addr}` is not IP:port"), hint()),
        }
    } else if let Some(path) = s.value.strip_prefix("unix:").filter(|p| !p.is_empty()) {
        return Some(SyslogTarget::Unix(PathBuf::from(path)));
    } else {
        sink.error(&s.span, &s.key, format!("unknown syslog target `{}`", s.value), hint());
    }
    None
}

fn facility(t: &Table, sink: &mut Sink) -> u8 {
    let Some(f) = t.string(sink, "facility") else {
        return 16;
    };
    if let Some((_, code)) = FACILITIES.iter().find(|(name, _)| *name == f.value) {
        return *code;
    }
    let hint = crate::suggest::hint(f.value, FACILITIES.iter().map(|(n, _)| *n))
        .or_else(|| Some("local0 … local7, user, daemon, …".to_string()));
    sink.error(&f.span, &f.key, format!("unknown syslog facility `{}`", f.value), hint);
    16
}
