//! [`RuleSet`]: the compiled rules of one listener, and the compile entry point
//! (lex → parse → check → compile, once per load).

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ast::Program;
use crate::compile::{build_index, build_plans, renumber_atoms, FetchPlan, Index, TooBig};
use crate::diag::{Diagnostics, Reporter, Span};
use crate::ir::{FetchName, Final, Ir};
use crate::json::JsonPlan;
use crate::trace::Truth;
use crate::xml::XmlPlan;
use crate::{lexer, lower, parser, reach};

/// Options a listener gives the compiler besides the rules text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// For `application/x-www-form-urlencoded` bodies: the form field that carries the XML
    /// document. `None`: the first field whose decoded value starts with `<`.
    pub xml_form_field: Option<String>,
}

/// Compiled rules, immutable and shareable between workers (`Send + Sync`).
#[derive(Debug)]
pub struct RuleSet {
    pub(crate) id: u64,
    pub(crate) program: Program,
    pub(crate) ir: Ir,
    pub(crate) groups: Vec<String>,
    pub(crate) plans: Vec<FetchPlan>,
    pub(crate) index: Index,
    pub(crate) xml: XmlPlan,
    pub(crate) json: JsonPlan,
    pub(crate) xml_form_field: Option<String>,
    warnings: Diagnostics,
    needs_body: bool,
}

/// Distinguishes rule sets so an [`crate::EvalState`] notices a reload.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl RuleSet {
    /// Parses, checks and compiles `source` (read from `file`, which diagnostics name).
    /// `groups` are the configuration's group names; `routeTo` must name one of them and
    /// decisions refer to them by index into this slice.
    pub fn compile(source: &str, file: &Path, groups: &[&str]) -> Result<RuleSet, Diagnostics> {
        RuleSet::compile_with(source, file, groups, &CompileOptions::default())
    }

    /// [`RuleSet::compile`] with listener options.
    pub fn compile_with(
        source: &str,
        file: &Path,
        groups: &[&str],
        options: &CompileOptions,
    ) -> Result<RuleSet, Diagnostics> {
        let mut rep = Reporter::new(source, file);
        let tokens = lexer::lex(source, &mut rep);
        let program = parser::parse(&tokens, &mut rep);
        let mut ir = lower::lower(&program, groups, &mut rep);
        if !rep.out.has_errors() {
            reach::warn(&program, &ir, &mut rep);
            renumber_atoms(&mut ir);
        }
        let mut plans = Vec::new();
        if !rep.out.has_errors() {
            plans = plans_or_report(&program, &ir, &mut rep);
        }
        let mut diags = rep.out;
        diags.sort();
        if diags.has_errors() {
            return Err(diags);
        }
        let warnings = diags.take_warnings();
        let index = build_index(&ir, &mut plans);
        let needs_body = ir.fetches.iter().any(|f| f.reads_body());
        Ok(RuleSet {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            xml: XmlPlan::new(&ir.xml_paths),
            json: JsonPlan::new(&ir.json_paths),
            program,
            ir,
            groups: groups.iter().map(|g| g.to_string()).collect(),
            plans,
            index,
            xml_form_field: options.xml_form_field.clone(),
            warnings,
            needs_body,
        })
    }

    /// Rules that load but can never fire (empty when there are none).
    pub fn warnings(&self) -> &Diagnostics {
        &self.warnings
    }

    /// Whether some rule reads the body (`xml.…`, `json.…`, `form(…)`, or `bodylen`, which reads the
    /// body only when the request has no Content-Length). When false, evaluation never
    /// returns [`crate::Outcome::NeedMore`] and the body can stream without buffering.
    pub fn needs_body(&self) -> bool {
        self.needs_body
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.ir.rules.len()
    }

    /// The label of rule `r` (rules are numbered in file order, as in decisions).
    pub fn label(&self, r: usize) -> Option<&str> {
        self.ir.rules.get(r).map(|rule| rule.label.as_str())
    }

    /// True for a rules file without rules.
    pub fn is_empty(&self) -> bool {
        self.ir.rules.is_empty()
    }

    /// Rule `r` as source text (normalised: comments and spacing dropped), to tell whether
    /// a rule kept across a reload changed.
    pub fn rule_text(&self, r: usize) -> Option<String> {
        self.program.rules.get(r).map(ToString::to_string)
    }

    /// The group names given to `compile`, indexed as in [`crate::Action::Route`].
    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// What rule `r` does when its condition has the given truth (for traces).
    pub(crate) fn describe_branch(&self, r: usize, truth: Truth) -> String {
        let rule = &self.program.rules[r];
        match (truth, &rule.els) {
            (Truth::True, _) => format!("then {}", rule.then),
            (Truth::False, Some(els)) => format!("else {els}"),
            (Truth::False, None) => "no action; next rule".into(),
            (Truth::Unknown, _) => "waits for more body".into(),
        }
    }

    /// The outcome of a walk in words (for traces).
    pub(crate) fn describe(&self, result: Option<Option<(usize, u32)>>) -> String {
        let Some(decided) = result else {
            return "need more body: a condition reads body bytes not received yet".into();
        };
        let Some((rule, fin)) = decided else {
            return "no rule decided: the listener's default group and its scheduler pick".into();
        };
        let label = &self.ir.rules[rule].label;
        match &self.ir.finals[fin as usize] {
            Final::Route { group, sticky } => {
                let name = self.groups.get(*group as usize).map_or("?", String::as_str);
                format!("rule {label} routes to group '{name}' ({})", sticky.keyword())
            }
            Final::Deny { status } => format!("rule {label} denies with {status}"),
            Final::Drop => format!("rule {label} drops the connection"),
            Final::Redirect { status, location } => {
                format!("rule {label} redirects ({status}) to {location}")
            }
        }
    }
}

/// The per-field automata, or an error when a field's patterns exceed the regex engine's
/// size limits together.
fn plans_or_report(program: &Program, ir: &Ir, rep: &mut Reporter<'_>) -> Vec<FetchPlan> {
    match build_plans(ir) {
        Ok(plans) => plans,
        Err(TooBig(f, why)) => {
            let field = FetchName(&ir.fetches[f as usize], ir).to_string();
            let span = program.rules.first().map_or(Span::default(), |r| r.label.span);
            let hint = Some("split the tests over fewer patterns or simplify the regexes".into());
            rep.error(span, format!("the tests on {field} are too large together: {why}"), hint);
            Vec::new()
        }
    }
}

/// Canonical source: one rule per line, minimal parentheses, comments dropped.
/// Compiling the printed text gives the same rules.
impl fmt::Display for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.program)
    }
}
