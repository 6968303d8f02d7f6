//! The switch's own endpoints beside its listeners: `[admin]` (the admin API, TCP) and
//! `[agents]` (capacity reports, UDP). Both are a `bind` and a token, required when the
//! address is reachable from other hosts.

use crate::diag::Sink;
use crate::keys::{home_of, ADMIN_KEYS, AGENTS_KEYS};
use crate::walk::{Located, Table};
use crate::{addr, Admin, Agents};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// `[admin]`, located at its `bind` (which the checks across sections compare with the
/// listeners' binds).
pub(crate) fn admin(root: &Table, sink: &mut Sink, base: &Path) -> Option<Located<Admin>> {
    let t = root.section(sink, "admin")?;
    t.reject_unknown(sink, ADMIN_KEYS, home_of);
    let bind = bind(&t, sink, "\"127.0.0.1:9900\"")?;
    let token = token(&t, sink, base, &bind, "the admin API")?;
    Some(Located { value: Admin { bind: bind.value, token }, span: bind.span, key: bind.key })
}

/// `[agents]`.
pub(crate) fn agents(root: &Table, sink: &mut Sink, base: &Path) -> Option<Agents> {
    let t = root.section(sink, "agents")?;
    t.reject_unknown(sink, AGENTS_KEYS, home_of);
    let bind = bind(&t, sink, "\"127.0.0.1:9901\"")?;
    let token = token(&t, sink, base, &bind, "capacity reports")?;
    let silent_after = t.duration_or(sink, "silent_after", Duration::from_secs(2), false);
    Some(Agents { bind: bind.value, token, silent_after })
}

fn bind(t: &Table, sink: &mut Sink, example: &str) -> Option<Located<SocketAddr>> {
    let text = t.required_string(sink, "bind", example)?;
    match addr::parse_bind(text.value) {
        Ok(value) => Some(Located { value, span: text.span, key: text.key }),
        Err(e) => {
            sink.error(&text.span, &text.key, e.message, e.hint);
            None
        }
    }
}

/// `token` or `token_file`; required when the address is reachable from other hosts.
/// `None` (outer) when an error was reported.
fn token(
    t: &Table,
    sink: &mut Sink,
    base: &Path,
    bind: &Located<SocketAddr>,
    what: &str,
) -> Option<Option<String>> {
    let token = read_token(t, sink, base, what)?;
    if token.is_none() && !bind.value.ip().is_loopback() {
        let message = format!("{what} on {} is reachable from other hosts but has no token", bind.value);
        let hint = Some("add token_file = \"…\" (or token = \"…\"), or bind to 127.0.0.1".into());
        sink.error(&bind.span, &bind.key, message, hint);
        return None;
    }
    Some(token)
}

/// `token` or `token_file` (a file keeps the secret out of the config), checked: 16 to 128
/// printable characters. `None` (outer) when an error was reported; `Some(None)` when
/// neither is set.
pub(crate) fn read_token(t: &Table, sink: &mut Sink, base: &Path, what: &str) -> Option<Option<String>> {
    read_secret(t, sink, base, what, ["token", "token_file"])
}

/// A secret written inline under `names[0]` or read from the file named by `names[1]`, with
/// the rules of [`read_token`] (`[cluster]` calls its secret `key`).
pub(crate) fn read_secret(
    t: &Table,
    sink: &mut Sink,
    base: &Path,
    what: &str,
    names: [&str; 2],
) -> Option<Option<String>> {
    let [inline_key, file_key] = names;
    let inline = t.string(sink, inline_key).map(|s| (s.value.to_string(), s));
    let from_file =
        t.string(sink, file_key).and_then(|f| match std::fs::read_to_string(base.join(f.value)) {
            Ok(text) => Some((text.trim().to_string(), f)),
            Err(e) => {
                let message = format!("cannot read {file_key} `{}`: {e}", f.value);
                let hint = format!("give a readable file, or write {inline_key} = \"…\"");
                sink.error(&f.span, &f.key, message, Some(hint));
                None
            }
        });
    let token = match (inline, from_file) {
        (Some((_, s)), Some(_)) => {
            let hint = Some(format!("keep one of them ({file_key} keeps the secret out of this file)"));
            let message = format!("both `{inline_key}` and `{file_key}` are set");
            sink.error(&s.span, &s.key, message, hint);
            return None;
        }
        (Some((v, s)), None) | (None, Some((v, s))) => {
            if v.len() < 16 || v.len() > 128 {
                let message = format!("the {inline_key} for {what} is {} characters; use 16 to 128", v.len());
                sink.error(&s.span, &s.key, message, Some("e.g. `openssl rand -hex 24`".into()));
                return None;
            }
            // Agents send the token in a space-separated line; keep one rule for both.
            if !v.bytes().all(|b| b.is_ascii_graphic()) {
                let message =
                    format!("the {inline_key} for {what} may only use printable ASCII without spaces");
                sink.error(&s.span, &s.key, message, Some("e.g. `openssl rand -hex 24`".into()));
                return None;
            }
            Some(v)
        }
        (None, None) => None,
    };
    Some(token)
}
