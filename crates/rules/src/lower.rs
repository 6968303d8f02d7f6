//! Checker, part 2: rules and actions. Labels must be unique, gotos must name a later
//! rule (so evaluation always ends), actions and groups must exist, and statuses, header
//! names and URLs must be ones the proxy can send.

use std::collections::HashMap;

use crate::ast::{Action, Block, Expr, ExprKind, Name, Program};
use crate::check::Checker;
use crate::diag::{did_you_mean, Reporter, Span};
use crate::ir::{End, Final, Ir, LBlock, LRule};
use crate::Sticky;

const ACTIONS: &[&str] = &["routeTo", "goto", "deny", "drop", "redirect", "setHeader"];
const STICKY: &[&str] = &["STICKY_IP_PORT", "STICKY_IP", "NONSTICKY"];
const REDIRECTS: &[u16] = &[301, 302, 303, 307, 308];

/// Checks and lowers a parsed program. Errors and warnings go to `rep`.
pub(crate) fn lower(prog: &Program, groups: &[&str], rep: &mut Reporter<'_>) -> Ir {
    let labels = collect_labels(prog, rep);
    let mut ck = Checker::new(rep);
    for (index, rule) in prog.rules.iter().enumerate() {
        let mut lw = Lowerer { ck: &mut ck, groups, labels: &labels, index };
        let cond = lw.ck.cond(&rule.cond);
        let then = lw.block(&rule.then);
        // None: no else; Some(None): an else with errors.
        let els = match rule.els.as_ref().map(|b| lw.block(b)) {
            None => Some(None),
            Some(Some(b)) => Some(Some(b)),
            Some(None) => None,
        };
        let line = lw.ck.rep.line_of(rule.label.span.start);
        if let (Some(cond), Some(then), Some(els)) = (cond, then, els) {
            ck.ir.rules.push(LRule { label: rule.label.text.clone(), line, cond, then, els });
        }
    }
    ck.ir
}

fn collect_labels<'p>(prog: &'p Program, rep: &mut Reporter<'_>) -> HashMap<&'p str, usize> {
    let mut labels: HashMap<&str, usize> = HashMap::new();
    for (i, rule) in prog.rules.iter().enumerate() {
        let name = rule.label.text.as_str();
        match labels.get(name) {
            Some(&first) => {
                let line = rep.line_of(prog.rules[first].label.span.start);
                let hint = format!("'{name}' is first defined on line {line}; rename one of them");
                rep.error(rule.label.span, format!("duplicate label '{name}'"), Some(hint));
            }
            None => {
                labels.insert(name, i);
            }
        }
    }
    labels
}

struct Lowerer<'c, 'r, 's, 'p> {
    ck: &'c mut Checker<'r, 's>,
    groups: &'c [&'c str],
    labels: &'c HashMap<&'p str, usize>,
    index: usize,
}

impl Lowerer<'_, '_, '_, '_> {
    fn block(&mut self, b: &Block) -> Option<LBlock> {
        let mut out = LBlock { headers: Vec::new(), end: End::Next };
        let mut ok = true;
        let mut ended: Option<String> = None;
        for action in &b.actions {
            if let Some(by) = &ended {
                let hint = format!("'{by}' before it already ends this branch");
                self.ck.rep.warning(action_span(action), "this action never runs", Some(hint));
            }
            match self.action(action, &mut out.headers) {
                Some(Some(end)) if ended.is_none() => {
                    out.end = end;
                    ended = Some(action_name(action).to_string());
                }
                Some(_) => {}
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// `Some(Some(end))` for an action that ends the branch, `Some(None)` for setHeader,
    /// `None` after an error.
    fn action(&mut self, action: &Action, headers: &mut Vec<u32>) -> Option<Option<End>> {
        let (name, args) = match action {
            Action::Goto { target, .. } => return self.goto(target).map(Some),
            Action::Call { name, args, .. } => (name, args.as_slice()),
        };
        let fin = match name.text.as_str() {
            "routeTo" => self.route(name, args)?,
            "deny" => self.deny(name, args)?,
            "drop" => {
                self.arity(name, args, 0, 0)?;
                Final::Drop
            }
            "redirect" => self.redirect(name, args)?,
            "setHeader" => {
                headers.push(self.set_header(name, args)?);
                return Some(None);
            }
            _ => return self.unknown_action(name),
        };
        self.ck.ir.finals.push(fin);
        Some(Some(End::Final(self.ck.ir.finals.len() as u32 - 1)))
    }

    fn unknown_action(&mut self, name: &Name) -> Option<Option<End>> {
        let message = match did_you_mean(&name.text, ACTIONS.iter().copied()) {
            Some(s) => format!("unknown action '{}' — did you mean '{s}'?", name.text),
            None => format!("unknown action '{}'", name.text),
        };
        let hint = format!("actions are {}", ACTIONS.join(", "));
        self.ck.rep.error(name.span, message, Some(hint));
        None
    }

    fn arity(&mut self, name: &Name, args: &[Expr], min: usize, max: usize) -> Option<()> {
        if (min..=max).contains(&args.len()) {
            return Some(());
        }
        let want = if min == max { format!("{min}") } else { format!("{min} to {max}") };
        let message = format!(
            "{} takes {want} argument{}, found {}",
            name.text,
            if max == 1 { "" } else { "s" },
            args.len()
        );
        let hint = match name.text.as_str() {
            "routeTo" => "routeTo(group [, STICKY_IP_PORT | STICKY_IP | NONSTICKY])",
            "deny" => "deny() answers 403; deny(451) answers 451",
            "drop" => "drop() closes the connection without an answer",
            "redirect" => "redirect(302, \"https://example.com/\")",
            _ => "setHeader(\"X-Name\", \"value\")",
        };
        self.ck.rep.error(name.span, message, Some(hint.into()));
        None
    }

    fn goto(&mut self, target: &Name) -> Option<End> {
        let Some(&t) = self.labels.get(target.text.as_str()) else {
            let message = match did_you_mean(&target.text, self.labels.keys().copied()) {
                Some(s) => format!("goto names no rule '{}' — did you mean '{s}'?", target.text),
                None => format!("goto names no rule '{}'", target.text),
            };
            self.ck.rep.error(target.span, message, None);
            return None;
        };
        if t <= self.index {
            let hint =
                "goto may only jump forward, so evaluation always ends; move the target rule below this one";
            self.ck.rep.error(target.span, format!("backward goto to '{}'", target.text), Some(hint.into()));
            return None;
        }
        Some(End::Goto(t as u32))
    }

    fn route(&mut self, name: &Name, args: &[Expr]) -> Option<Final> {
        self.arity(name, args, 1, 2)?;
        let group = self.group(&args[0]);
        let sticky = match args.get(1) {
            Some(a) => self.sticky(a)?,
            None => Sticky::Off,
        };
        Some(Final::Route { group: group?, sticky })
    }

    fn group(&mut self, arg: &Expr) -> Option<u32> {
        let name = match &arg.kind {
            ExprKind::Ident(s) | ExprKind::Str(s) => s,
            _ => {
                // `xml.…` and `json…` read as body paths, so such group names need quotes.
                let hint = matches!(arg.kind, ExprKind::Xml(_) | ExprKind::Json(_))
                    .then(|| format!("quote a group named like a body path: routeTo(\"{arg}\")"));
                self.ck.rep.error(arg.span, "routeTo needs a group name", hint);
                return None;
            }
        };
        if let Some(i) = self.groups.iter().position(|g| g == name) {
            return Some(i as u32);
        }
        let message = match did_you_mean(name, self.groups.iter().copied()) {
            Some(s) => format!("unknown group '{name}' — did you mean '{s}'?"),
            None => format!("unknown group '{name}'"),
        };
        let hint = match self.groups.is_empty() {
            true => "the configuration defines no groups".to_string(),
            false => format!("groups are {}", self.groups.join(", ")),
        };
        self.ck.rep.error(arg.span, message, Some(hint));
        None
    }

    fn sticky(&mut self, arg: &Expr) -> Option<Sticky> {
        let word = match &arg.kind {
            ExprKind::Ident(s) => s.as_str(),
            _ => "",
        };
        match word {
            "STICKY_IP_PORT" => return Some(Sticky::IpPort),
            "STICKY_IP" => return Some(Sticky::Ip),
            "NONSTICKY" => return Some(Sticky::Off),
            _ => {}
        }
        let message = match did_you_mean(word, STICKY.iter().copied()) {
            Some(s) => format!("unknown stickiness '{arg}' — did you mean '{s}'?"),
            None => format!("unknown stickiness '{arg}'"),
        };
        self.ck.rep.error(arg.span, message, Some(format!("stickiness is one of {}", STICKY.join(", "))));
        None
    }

    fn status(&mut self, arg: &Expr, ok: impl Fn(u16) -> bool, hint: &str) -> Option<u16> {
        let status = match &arg.kind {
            ExprKind::Num(n) => n.parse::<u16>().ok().filter(|s| ok(*s)),
            _ => None,
        };
        if status.is_none() {
            self.ck.rep.error(arg.span, format!("bad status '{arg}'"), Some(hint.into()));
        }
        status
    }

    fn deny(&mut self, name: &Name, args: &[Expr]) -> Option<Final> {
        self.arity(name, args, 0, 1)?;
        let status = match args.first() {
            Some(a) => self.status(a, |s| (400..=599).contains(&s), "deny takes a 4xx or 5xx status")?,
            None => 403,
        };
        Some(Final::Deny { status })
    }

    fn redirect(&mut self, name: &Name, args: &[Expr]) -> Option<Final> {
        self.arity(name, args, 2, 2)?;
        let status =
            self.status(&args[0], |s| REDIRECTS.contains(&s), "redirect takes 301, 302, 303, 307 or 308");
        let location = self.header_value(&args[1], "redirect target")?;
        if location.is_empty() {
            self.ck.rep.error(args[1].span, "the redirect target is empty", None);
            return None;
        }
        Some(Final::Redirect { status: status?, location })
    }

    fn set_header(&mut self, name: &Name, args: &[Expr]) -> Option<u32> {
        self.arity(name, args, 2, 2)?;
        let header = self.header_value(&args[0], "header name");
        let value = self.header_value(&args[1], "header value")?;
        let header = header?;
        let token = !header.is_empty()
            && header.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            self.ck.rep.error(args[0].span, format!("'{header}' is not a valid header name"), None);
            return None;
        }
        self.ck.ir.set_headers.push((header, value));
        Some(self.ck.ir.set_headers.len() as u32 - 1)
    }

    /// A string literal that can go on the wire: no CR, LF or NUL (no header injection).
    fn header_value(&mut self, arg: &Expr, what: &str) -> Option<String> {
        match &arg.kind {
            ExprKind::Str(s) if !s.contains(['\r', '\n', '\0']) => Some(s.clone()),
            ExprKind::Str(_) => {
                self.ck.rep.error(arg.span, format!("the {what} contains a line break or NUL"), None);
                None
            }
            _ => {
                self.ck.rep.error(arg.span, format!("the {what} must be a string literal"), None);
                None
            }
        }
    }
}

fn action_span(a: &Action) -> Span {
    match a {
        Action::Goto { span, .. } | Action::Call { span, .. } => *span,
    }
}

fn action_name(a: &Action) -> &str {
    match a {
        Action::Goto { .. } => "goto",
        Action::Call { name, .. } => &name.text,
    }
}
