//! `[cluster]` (issue 13): this node's name, where it gossips, the peers it joins through,
//! and the key every gossip datagram is authenticated with. A gossip address reachable from
//! other hosts without a key is refused, as the admin API's token is. `state_file` keeps an
//! operator's drain across a restart. `[cluster.l4]` is read by `cluster_l4`.

use crate::diag::Sink;
use crate::keys::{home_of, CLUSTER_KEYS};
use crate::walk::{Located, Table};
use crate::{addr, Cluster};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[cluster]`, or `None` when absent or when an error was reported.
pub(crate) fn section(root: &Table, sink: &mut Sink, base: &Path) -> Option<Cluster> {
    let t = root.section(sink, "cluster")?;
    t.reject_unknown(sink, CLUSTER_KEYS, home_of);
    let node = node_name(&t, sink);
    let bind = gossip_bind(&t, sink);
    let seeds = seeds(&t, sink);
    let key = crate::endpoints::read_secret(&t, sink, base, "cluster gossip", ["key", "key_file"]);
    let gossip_interval = t.duration_or(sink, "gossip_interval", Duration::from_millis(100), false);
    let state_file = state_file(&t, sink, base);
    let l4 = crate::cluster_l4::section(&t, sink);
    let (node, bind, seeds, key, l4, state_file) = (node?, bind?, seeds?, key?, l4.ok()?, state_file?);
    if key.is_none() && !bind.value.ip().is_loopback() {
        let message =
            format!("cluster gossip on {} is reachable from other hosts but has no key", bind.value);
        let hint = Some("add key_file = \"…\" (or key = \"…\"), the same on every node".into());
        sink.error(&bind.span, &bind.key, message, hint);
        return None;
    }
    Some(Cluster { node, bind: bind.value, seeds, key, gossip_interval, l4, state_file })
}

/// `state_file`: where this node keeps an operator's `drain` across a restart, relative to
/// the config's directory. The file is written on `drain` and `ready`, so its directory must
/// exist. `Some(None)` when absent, `None` when an error was reported.
fn state_file(t: &Table, sink: &mut Sink, base: &Path) -> Option<Option<PathBuf>> {
    let Some(text) = t.string(sink, "state_file") else { return Some(None) };
    let path = base.join(text.value);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if text.value.is_empty() || text.value.ends_with('/') || !dir.is_dir() {
        let message = format!("state_file `{}`: no directory `{}` to keep it in", text.value, dir.display());
        let hint = Some(
            "create the directory, or name a file in an existing one, e.g. \"/var/lib/cswitch/cs1.state\""
                .into(),
        );
        sink.error(&text.span, &text.key, message, hint);
        return None;
    }
    Some(Some(path))
}

/// `node`: 1 to 64 letters, digits, `-`, `_` or `.`, unique in the cluster.
fn node_name(t: &Table, sink: &mut Sink) -> Option<String> {
    let name = t.required_string(sink, "node", "\"cs1\"")?;
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    if name.value.is_empty() || name.value.len() > 64 || !name.value.chars().all(ok) {
        let message = format!("`{}` is not a node name", name.value);
        let hint = Some("use 1 to 64 letters, digits, '-', '_' or '.', e.g. \"cs1\"".into());
        sink.error(&name.span, &name.key, message, hint);
        return None;
    }
    Some(name.value.to_string())
}

/// `bind`: the UDP address gossip is received on and that peers send to, so it must be a
/// specific address with a real port (peers list it in their `seeds`).
fn gossip_bind(t: &Table, sink: &mut Sink) -> Option<Located<SocketAddr>> {
    let text = t.required_string(sink, "bind", "\"10.0.0.1:7946\"")?;
    let value = match addr::parse_server(text.value) {
        Ok(value) => value,
        Err(e) => {
            sink.error(&text.span, &text.key, e.message, e.hint);
            return None;
        }
    };
    if value.ip().is_unspecified() {
        let message = format!("`{}` is not an address peers can send to", text.value);
        let hint = Some("bind to this host's own address, e.g. \"10.0.0.1:7946\"".into());
        sink.error(&text.span, &text.key, message, hint);
        return None;
    }
    Some(Located { value, span: text.span, key: text.key })
}

/// `seeds`: the gossip addresses of peers to join through (default none: the first node).
fn seeds(t: &Table, sink: &mut Sink) -> Option<Vec<SocketAddr>> {
    let Some(texts) = t.strings(sink, "seeds") else {
        return (!t.has("seeds")).then(Vec::new);
    };
    let mut seeds = Vec::with_capacity(texts.len());
    for text in &texts {
        match addr::parse_server(text) {
            Ok(seed) => seeds.push(seed),
            Err(e) => {
                sink.error(&t.value_span("seeds"), &t.key_path("seeds"), e.message, e.hint);
                return None;
            }
        }
    }
    Some(seeds)
}
