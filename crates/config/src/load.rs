//! TOML text → validated [`Config`]: parse with spans, read every section, check across
//! entries, and return the config only when nothing was reported.

use crate::diag::Sink;
use crate::entries::{self, GroupDraft, ListenerDraft};
use crate::keys::{home_of, TOP_KEYS};
use crate::sections;
use crate::walk::Table;
use crate::{checks, Config, Diagnostic, Diagnostics};
use std::path::Path;
use toml_edit::ImDocument;

pub(crate) fn load(path: &Path) -> Result<Config, Diagnostics> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text, path),
        Err(e) => Err(Diagnostics(vec![Diagnostic {
            file: path.to_path_buf(),
            line: 0,
            col: 0,
            key: String::new(),
            message: format!("cannot read config file: {e}"),
            hint: None,
            source_line: String::new(),
        }])),
    }
}

pub(crate) fn parse(text: &str, path: &Path) -> Result<Config, Diagnostics> {
    let mut sink = Sink::new(path, text);
    let doc = match ImDocument::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            // A syntax error leaves no document to walk, so it is the only report.
            let message = e.message().trim_end().replace('\n', "; ");
            sink.error(&e.span(), "", format!("TOML syntax: {message}"), None);
            return Err(sink.into_diagnostics());
        }
    };
    let root = Table::root(doc.as_table());
    root.reject_unknown(&mut sink, TOP_KEYS, home_of);
    // Relative paths in the file mean "next to this file", wherever the process runs from.
    let base = path.parent().unwrap_or(Path::new(""));
    let global = sections::global(&root, &mut sink);
    let access_log = sections::access_log(&root, &mut sink, base);
    let limits = sections::limits(&root, &mut sink);
    let timeouts = sections::timeouts(&root, &mut sink);
    let listeners = listeners(&root, &mut sink, base);
    let groups = groups(&root, &mut sink);
    let admin = crate::endpoints::admin(&root, &mut sink, base);
    let agents = crate::endpoints::agents(&root, &mut sink, base);
    checks::run(&listeners, &groups, &mut sink);
    let config = Config {
        source: path.to_path_buf(),
        global,
        access_log,
        limits,
        timeouts,
        listeners: listeners.into_iter().filter_map(ListenerDraft::build).collect(),
        groups: groups.into_iter().filter_map(GroupDraft::build).collect(),
        admin,
        agents,
    };
    sink.finish(config)
}

fn listeners(root: &Table, sink: &mut Sink, base: &Path) -> Vec<ListenerDraft> {
    let shape = "write each listener as a [[listener]] section (two brackets)";
    let tables = root.entries(sink, "listener", shape);
    let drafts: Vec<ListenerDraft> = tables.iter().map(|t| entries::listener(t, sink, base)).collect();
    if !root.has("listener") || root.is_empty_array("listener") {
        let span = root.value_span("listener");
        let hint = "add [[listener]] with name, bind and default_group, e.g. bind = \"127.0.0.1:8080\"";
        sink.error(&span, "listener", "no [[listener]]: at least one is needed", Some(hint.into()));
    }
    drafts
}

fn groups(root: &Table, sink: &mut Sink) -> Vec<GroupDraft> {
    let shape = "write each group as a [[group]] section (two brackets)";
    let tables = root.entries(sink, "group", shape);
    let drafts: Vec<GroupDraft> = tables.iter().map(|t| entries::group(t, sink)).collect();
    if !root.has("group") || root.is_empty_array("group") {
        let span = root.value_span("group");
        let hint = "add [[group]] with name and servers = [ { name = \"s1\", addr = \"127.0.0.1:9001\" } ]";
        sink.error(&span, "group", "no [[group]]: at least one is needed", Some(hint.into()));
    }
    drafts
}
