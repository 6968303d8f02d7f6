//! TOML text → validated [`Config`]: parse with spans, read every section, check across
//! entries, and return the config only when nothing was reported — with, in every case, what
//! the file names outside itself ([`Refs`]).

use crate::diag::Sink;
use crate::entries::{self, GroupDraft, ListenerDraft};
use crate::keys::{home_of, TOP_KEYS};
use crate::refs::{self, Inspection, Refs};
use crate::walk::Table;
use crate::{checks, endpoints, sections, Config, Diagnostic, Diagnostics};
use std::path::Path;
use toml_edit::ImDocument;

pub(crate) fn inspect(path: &Path) -> Inspection {
    match std::fs::read_to_string(path) {
        Ok(text) => inspect_text(&text, path),
        Err(e) => {
            let unreadable = Diagnostic {
                file: path.to_path_buf(),
                line: 0,
                col: 0,
                key: String::new(),
                message: format!("cannot read config file: {e}"),
                hint: None,
                source_line: String::new(),
            };
            Inspection { config: Err(Diagnostics(vec![unreadable])), refs: Refs::default() }
        }
    }
}

pub(crate) fn inspect_text(text: &str, path: &Path) -> Inspection {
    let mut sink = Sink::new(path, text);
    let doc = match ImDocument::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            // A syntax error leaves no document to walk, so it is the only report.
            let message = e.message().trim_end().replace('\n', "; ");
            match crate::syntax::unclosed_bracket(text, &message, e.span()) {
                Some((at, close)) => {
                    let message = format!("TOML syntax: this `{}` is never closed", &text[at..=at]);
                    let hint = format!(
                        "close it with `{close}` (an array or inline table ends before the next [section])"
                    );
                    sink.error(&Some(at..at + 1), "", message, Some(hint));
                }
                None => sink.error(&e.span(), "", format!("TOML syntax: {message}"), None),
            }
            return Inspection { config: Err(sink.into_diagnostics()), refs: Refs::default() };
        }
    };
    let (config, refs) = walk(&Table::root(doc.as_table()), &mut sink, path);
    Inspection { config: sink.finish(config), refs }
}

/// Reads every section; the config is valid only if `sink` got no report meanwhile.
fn walk(root: &Table, sink: &mut Sink, path: &Path) -> (Config, Refs) {
    root.reject_unknown(sink, TOP_KEYS, home_of);
    // Relative paths in the file mean "next to this file", wherever the process runs from.
    let base = path.parent().unwrap_or(Path::new(""));
    let global = sections::global(root, sink);
    let (access_log, access_log_path) = crate::access_log::read(root, sink, base);
    let limits = sections::limits(root, sink);
    let timeouts = sections::timeouts(root, sink);
    // A node that only runs the L4 tier (`[cluster.l4]`) may have no listener and no group.
    let l4_only = root.section_quiet("cluster").is_some_and(|c| c.has("l4"));
    let listeners = listeners(root, sink, base, l4_only);
    let groups = groups(root, sink, l4_only);
    let admin = endpoints::admin(root, sink, base);
    let agents = endpoints::agents(root, sink, base);
    let oneway = crate::oneway::section(root, sink, base);
    let cluster = crate::cluster::section(root, sink, base);
    checks::run(&listeners, &groups, admin.as_ref(), sink);
    local_addrs_need_a_cluster(&groups, cluster.is_some(), sink);
    checks::oneway_listeners(&listeners, &groups, root.has("oneway"), sink);
    checks::oneway_hashnat(&listeners, &groups, sink);
    let mut refs = refs::collect(sink, &listeners, &groups, access_log_path.as_ref());
    refs.oneway = oneway.as_ref().map(|o| refs::Written {
        value: o.value.interface.clone(),
        place: sink.place(&o.span, "oneway.interface"),
    });
    refs.cluster_l4 = cluster.as_ref().and_then(|c| c.l4.as_ref()).map(|l4| {
        let l4_table = root.section_quiet("cluster").and_then(|c| c.section_quiet("l4"));
        let span = l4_table.and_then(|t| t.value_span("vip"));
        refs::Written { value: l4.table.clone(), place: sink.place(&span, "cluster.l4.vip") }
    });
    let config = Config {
        source: path.to_path_buf(),
        global,
        access_log,
        limits,
        timeouts,
        listeners: listeners.into_iter().filter_map(ListenerDraft::build).collect(),
        groups: groups.into_iter().filter_map(GroupDraft::build).collect(),
        admin: admin.map(|a| a.value),
        agents,
        oneway: oneway.map(|o| o.value),
        cluster,
    };
    (config, refs)
}

/// A server's `local_addr` means something only to the cluster node named like the server.
fn local_addrs_need_a_cluster(groups: &[GroupDraft], cluster: bool, sink: &mut Sink) {
    if cluster {
        return;
    }
    for local in groups.iter().flat_map(|g| &g.servers).filter_map(|s| s.local_addr.as_ref()) {
        let hint = "add [cluster] (this node's name, gossip bind, seeds, key), or remove local_addr";
        let message = "local_addr is for HashNAT in a cluster, and there is no [cluster]";
        sink.error(&local.span, &local.key, message, Some(hint.into()));
    }
}

fn listeners(root: &Table, sink: &mut Sink, base: &Path, optional: bool) -> Vec<ListenerDraft> {
    let shape = "write each listener as a [[listener]] section (two brackets)";
    let tables = root.entries(sink, "listener", shape);
    let drafts: Vec<ListenerDraft> = tables.iter().map(|t| entries::listener(t, sink, base)).collect();
    if !optional && (!root.has("listener") || root.is_empty_array("listener")) {
        let span = root.value_span("listener");
        let hint = "add [[listener]] with name, bind and default_group, e.g. bind = \"127.0.0.1:8080\"";
        sink.error(&span, "listener", "no [[listener]]: at least one is needed", Some(hint.into()));
    }
    drafts
}

fn groups(root: &Table, sink: &mut Sink, optional: bool) -> Vec<GroupDraft> {
    let shape = "write each group as a [[group]] section (two brackets)";
    let tables = root.entries(sink, "group", shape);
    let drafts: Vec<GroupDraft> = tables.iter().map(|t| entries::group(t, sink)).collect();
    if !optional && (!root.has("group") || root.is_empty_array("group")) {
        let span = root.value_span("group");
        let hint = "add [[group]] with name and servers = [ { name = \"s1\", addr = \"127.0.0.1:9001\" } ]";
        sink.error(&span, "group", "no [[group]]: at least one is needed", Some(hint.into()));
    }
    drafts
}
