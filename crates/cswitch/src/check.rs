//! `cswitch check`: everything `cswitch run` would refuse, in one report. The config's own
//! errors, then what `run` does with the files the config names, each reported at the
//! config value that names it ([`config::Refs`]): TLS pairs loaded as the switch loads them,
//! the access log opened (or its directory checked), and every rule file read and compiled —
//! also when the config has errors, against the groups it defines, so one run shows all.

use config::{Diagnostic, FileRef, Refs, RulesRef, TlsRef};
use rustix::fs::Access;
use std::fmt;
use std::path::Path;
use std::process::ExitCode;

/// Checks the config at `path`; prints the report (errors and warnings on stderr, "ok" on
/// stdout) and fails when there is any error.
pub fn run(path: &Path) -> ExitCode {
    let inspection = config::inspect(path);
    let refs = &inspection.refs;
    let mut report = Report::default();
    if let Err(diags) = &inspection.config {
        report.config.extend(diags.0.iter().cloned());
    }
    report.config.extend(refs.tls.iter().filter_map(tls_pair));
    report.config.extend(refs.access_log.iter().filter_map(access_log));
    rule_files(refs, &mut report);
    report.config.extend(refs.oneway.iter().flat_map(oneway_host));
    report.config.extend(refs.cluster_l4.iter().flat_map(l4_host));
    // Back in file order, as the config's own diagnostics are.
    report.config.sort_by_key(|d| (d.line, d.col));
    if report.errors() > 0 {
        eprint!("{report}");
        return ExitCode::FAILURE;
    }
    if report.warnings() > 0 {
        eprint!("{report}");
    }
    if let Ok(cfg) = &inspection.config {
        println!(
            "{}: ok ({} listener(s), {} group(s))",
            path.display(),
            cfg.listeners.len(),
            cfg.groups.len()
        );
    }
    ExitCode::SUCCESS
}

/// Everything found: diagnostics at places in the config, then those in rule files.
#[derive(Default)]
struct Report {
    config: Vec<Diagnostic>,
    rules: Vec<rules::Diagnostics>,
}

impl Report {
    fn errors(&self) -> usize {
        self.config.len() + self.rules.iter().map(rules::Diagnostics::error_count).sum::<usize>()
    }

    fn warnings(&self) -> usize {
        self.rules.iter().map(rules::Diagnostics::warning_count).sum()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.config {
            write!(f, "{d}")?;
        }
        for d in self.rules.iter().flatten() {
            // Rule diagnostics are set apart by a blank line, as `rules::Diagnostics` prints them.
            writeln!(f, "{d}")?;
        }
        let plural = |n: usize, s: &str| format!("{n} {s}{}", if n == 1 { "" } else { "s" });
        match (self.errors(), self.warnings()) {
            (e, 0) => writeln!(f, "{}", plural(e, "error")),
            (0, w) => writeln!(f, "{}", plural(w, "warning")),
            (e, w) => writeln!(f, "{}, {}", plural(e, "error"), plural(w, "warning")),
        }
    }
}

/// One-way switching needs this host's cooperation: each thing it lacks is an error at
/// `[oneway] interface`.
fn oneway_host(interface: &config::Written<String>) -> Vec<Diagnostic> {
    let missing = oneway::missing(Some(&interface.value));
    missing.into_iter().map(|m| interface.place.error(format!("one-way: {}", m.what), Some(m.fix))).collect()
}

/// The L4 tier needs `nft` to install its table and IPv4 forwarding to pass a flow: each
/// missing is an error at `[cluster.l4] vip`.
fn l4_host(l4: &config::Written<String>) -> Vec<Diagnostic> {
    cluster::l4_missing()
        .into_iter()
        .map(|m| l4.place.error(format!("L4 tier: {}", m.what), Some(m.fix)))
        .collect()
}

/// The pair loaded exactly as the switch loads it. The switch's message starts with the
/// file that failed: a certificate that does not load is reported at `cert`; anything else
/// (the key unreadable, of an unsupported kind, or not matching) at `key`.
fn tls_pair(t: &TlsRef) -> Option<Diagnostic> {
    let e = proxy::check_tls_pair(&t.pair()).err()?.to_string();
    let cert_failed = e.starts_with(&format!("{}:", t.cert.path.display()));
    let at = if cert_failed { &t.cert } else { &t.key };
    let of = t.listener.as_ref().map_or(String::new(), |l| format!(" of listener `{l}`"));
    let message = format!("the TLS certificate and key{of} do not load: {e}");
    let hint = match cert_failed {
        true => "give a PEM certificate chain, leaf first",
        false => "give the private key of this certificate (PKCS#8, PKCS#1 or SEC1 PEM)",
    };
    Some(at.place.error(message, Some(hint.into())))
}

/// The switch opens the access log for appending and creates it when missing. An existing
/// file is opened the same way (never truncated); a missing one is not created: its
/// directory must exist and allow this user to create a file in it (access(2), W and X).
fn access_log(log: &FileRef) -> Option<Diagnostic> {
    let path = &log.path;
    let (message, hint) = match std::fs::OpenOptions::new().append(true).open(path) {
        Ok(_) => return None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let problem = match std::fs::metadata(dir) {
                Ok(m) if !m.is_dir() => format!("`{}` is not a directory", dir.display()),
                Ok(_) => match rustix::fs::access(dir, Access::WRITE_OK | Access::EXEC_OK) {
                    Ok(()) => return None,
                    Err(e) => {
                        format!("its directory `{}` does not let this user create it: {e}", dir.display())
                    }
                },
                Err(e) => format!("its directory `{}` cannot be used: {e}", dir.display()),
            };
            let message = format!("cannot create the access log `{}`: {problem}", path.display());
            (message, "create the directory (writable by the switch's user), or change `path`")
        }
        Err(e) => {
            let message = format!("cannot open the access log `{}` for appending: {e}", path.display());
            (message, "give a file the switch's user may write, or change `path`")
        }
    };
    Some(log.place.error(message, Some(hint.into())))
}

/// Reads and compiles each rule file once, as the switch does, against the groups the
/// config defines. An unreadable file is reported at its `rules` value; what the compiler
/// finds, in the rule file itself.
fn rule_files(refs: &Refs, report: &mut Report) {
    let groups: Vec<&str> = refs.groups.iter().map(String::as_str).collect();
    let mut seen: Vec<&RulesRef> = Vec::new();
    for r in &refs.rules {
        // Two listeners sharing a file and its options would repeat the same report.
        if seen.iter().any(|s| s.file.path == r.file.path && s.xml_form_field == r.xml_form_field) {
            continue;
        }
        seen.push(r);
        let path = &r.file.path;
        let source = match std::fs::read_to_string(path) {
            Ok(source) => source,
            Err(e) => {
                let message = format!("cannot read rule file `{}`: {e}", path.display());
                let hint = "give the path of a rule file, relative to this config, or remove `rules`";
                report.config.push(r.file.place.error(message, Some(hint.into())));
                continue;
            }
        };
        let options = rules::CompileOptions { xml_form_field: r.xml_form_field.clone() };
        match rules::RuleSet::compile_with(&source, path, &groups, &options) {
            Ok(set) if !set.warnings().is_empty() => report.rules.push(set.warnings().clone()),
            Ok(_) => {}
            Err(diags) => report.rules.push(diags),
        }
    }
}
