//! A listener's `tls`: the certificates an HTTP listener terminates TLS with. Written as
//! one table, `tls = { cert = "site.pem", key = "site.key" }`, or an array of them for
//! several sites (`tls = [ { cert, key }, … ]`, chosen by the client's SNI). Paths are
//! relative to the config file; each file must be readable and hold PEM of the right
//! kind. Whether a key matches its certificate is checked when the switch loads them, and by
//! `cswitch check` (the pairs' places go to `refs`).

use crate::diag::Sink;
use crate::keys::{home_of, CERT_KEYS};
use crate::walk::{Located, Table};
use crate::{CertKey, Protocol};
use std::path::{Path, PathBuf};

const SHAPE: &str = "write tls = { cert = \"site.pem\", key = \"site.key\" } or tls = [ { cert, key }, … ]";

/// A listener's `tls` as read: the pairs whose files are good, and whether all were.
pub(crate) struct TlsDraft {
    pub(crate) pairs: Vec<PairDraft>,
    complete: bool,
}

/// One `{ cert, key }` whose files are readable PEM of the right kind, with their places.
pub(crate) struct PairDraft {
    pub(crate) cert: Located<PathBuf>,
    pub(crate) key: Located<PathBuf>,
}

impl TlsDraft {
    /// The certificates, when every pair was good (otherwise an error was reported).
    pub(crate) fn build(self) -> Option<Vec<CertKey>> {
        let pairs = self.pairs.into_iter().map(|p| CertKey { cert: p.cert.value, key: p.key.value });
        self.complete.then(|| pairs.collect())
    }
}

/// The listener's certificates, if `tls` is present: HTTP listeners terminate TLS with them,
/// SMTP / POP3 / IMAP listeners offer STARTTLS / STLS with them.
pub(crate) fn listener_tls(t: &Table, sink: &mut Sink, base: &Path, protocol: Protocol) -> Option<TlsDraft> {
    if !t.has("tls") || protocol == Protocol::Tls {
        return None;
    }
    let tables = match t.section_quiet("tls") {
        Some(one) => vec![one],
        None => t.entries(sink, "tls", SHAPE),
    };
    let pairs: Vec<PairDraft> = tables.iter().filter_map(|c| pair(c, sink, base)).collect();
    if tables.is_empty() {
        let message = "`tls` names no certificate".to_string();
        sink.error(&t.value_span("tls"), &t.key_path("tls"), message, Some(SHAPE.into()));
    }
    let complete = pairs.len() == tables.len() && !pairs.is_empty();
    Some(TlsDraft { pairs, complete })
}

fn pair(c: &Table, sink: &mut Sink, base: &Path) -> Option<PairDraft> {
    c.reject_unknown(sink, CERT_KEYS, home_of);
    let cert = pem_file(c, sink, base, "cert", "\"site.pem\"", &["CERTIFICATE"]);
    let key =
        pem_file(c, sink, base, "key", "\"site.key\"", &["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"]);
    Some(PairDraft { cert: cert?, key: key? })
}

/// A readable file holding a PEM block of one of `kinds` (`-----BEGIN <kind>-----`).
fn pem_file(
    c: &Table,
    sink: &mut Sink,
    base: &Path,
    key: &str,
    example: &str,
    kinds: &[&str],
) -> Option<Located<PathBuf>> {
    let name = c.required_string(sink, key, example)?;
    let path = base.join(name.value);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            let message = format!("cannot read {key} file `{}`: {e}", path.display());
            sink.error(
                &name.span,
                &name.key,
                message,
                Some("give the path of a PEM file, relative to this config".into()),
            );
            return None;
        }
    };
    if !kinds.iter().any(|k| text.contains(&format!("-----BEGIN {k}-----"))) {
        let message = format!("`{}` holds no PEM {}", path.display(), kinds[0]);
        let hint = Some(format!("the file should contain a -----BEGIN {}----- block", kinds[0]));
        sink.error(&name.span, &name.key, message, hint);
        return None;
    }
    Some(Located { value: path, span: name.span, key: name.key })
}
