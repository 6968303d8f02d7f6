//! What a config file names outside itself — rule files, TLS certificates and keys, the
//! access-log file — each with the place in the file that names it. Collected from the
//! drafts, so even a file with errors gives every reference that could be read: `cswitch
//! check` loads, compiles or opens them all and reports what `cswitch run` would refuse in
//! the same report as the config's own errors, at the key that names the file.

use crate::diag::{Place, Sink};
use crate::entries::{GroupDraft, ListenerDraft};
use crate::walk::Located;
use crate::{CertKey, Config, Diagnostics};
use std::path::PathBuf;

/// A file named in the config: its path (resolved against the config's directory) and the
/// place of the value naming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRef {
    /// The path, as the switch would open it.
    pub path: PathBuf,
    /// Where the config names it.
    pub place: Place,
}

/// A listener's rule file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulesRef {
    /// The listener's name, when it has a valid one.
    pub listener: Option<String>,
    /// The rule file (`rules = "…"`).
    pub file: FileRef,
    /// The listener's `xml_form_field`, an option of the rule compiler.
    pub xml_form_field: Option<String>,
}

/// One certificate / key pair of a listener's `tls`, both files readable and holding PEM
/// of the right kind (anything less is already a config error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsRef {
    /// The listener's name, when it has a valid one.
    pub listener: Option<String>,
    /// The certificate chain (`cert = "…"`).
    pub cert: FileRef,
    /// The private key (`key = "…"`).
    pub key: FileRef,
}

impl TlsRef {
    /// The pair as the switch loads it.
    pub fn pair(&self) -> CertKey {
        CertKey { cert: self.cert.path.clone(), key: self.key.path.clone() }
    }
}

/// Everything a config names outside itself, in file order, as far as the file could be
/// read (nothing when it could not be read or parsed as TOML at all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Refs {
    /// The names of the `[[group]]`s read (valid names, each once): what rule files may
    /// route to.
    pub groups: Vec<String>,
    /// Each listener's rule file.
    pub rules: Vec<RulesRef>,
    /// Each listener's TLS certificate / key pairs.
    pub tls: Vec<TlsRef>,
    /// `[access_log] path`, when set (the switch opens it whether or not logging is enabled).
    pub access_log: Option<FileRef>,
    /// `[oneway] interface`, when one-way is configured: the host must have that interface,
    /// `CAP_NET_ADMIN` and the kernel features hand-offs need (`cswitch check` reports there).
    pub oneway: Option<Written<String>>,
    /// `[cluster.l4]`, when this node runs the L4 tier (its table's name, at `vip`): the host
    /// must have `nft` and forward IPv4 (`cswitch check` reports there).
    pub cluster_l4: Option<Written<String>>,
}

/// A value of the config and where it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written<T> {
    /// The value.
    pub value: T,
    /// Where.
    pub place: Place,
}

/// A config file read for `cswitch check`: the validated config or its errors, and what it
/// names outside itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Inspection {
    /// The validated config, or every problem found in the file.
    pub config: Result<Config, Diagnostics>,
    /// The files the config names, with where.
    pub refs: Refs,
}

pub(crate) fn collect(
    sink: &Sink,
    listeners: &[ListenerDraft],
    groups: &[GroupDraft],
    access_log: Option<&Located<PathBuf>>,
) -> Refs {
    let file = |l: &Located<PathBuf>| FileRef { path: l.value.clone(), place: sink.place(&l.span, &l.key) };
    let mut names: Vec<String> = Vec::new();
    for name in groups.iter().filter_map(|g| g.name.as_ref()) {
        if !names.contains(&name.value) {
            names.push(name.value.clone());
        }
    }
    let listener_name = |l: &ListenerDraft| l.name.as_ref().map(|n| n.value.clone());
    let rules = listeners
        .iter()
        .filter_map(|l| {
            let rules = l.rules.as_ref()?;
            Some(RulesRef {
                listener: listener_name(l),
                file: file(rules),
                xml_form_field: l.xml_form_field.clone(),
            })
        })
        .collect();
    let tls = listeners
        .iter()
        .flat_map(|l| {
            let pairs = l.tls.iter().flat_map(|t| &t.pairs);
            pairs.map(move |p| TlsRef { listener: listener_name(l), cert: file(&p.cert), key: file(&p.key) })
        })
        .collect();
    Refs { groups: names, rules, tls, access_log: access_log.map(file), oneway: None, cluster_l4: None }
}
