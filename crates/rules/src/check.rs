//! Checker, part 1: conditions. Resolves field and function names, checks arity and
//! types (a condition is true/false, an operand is a value), parses literals, regexes and
//! networks, and lowers each condition to interned fetches and atoms. Every problem is
//! reported; lowering goes on after an error so one run lists them all.

use std::collections::HashMap;
use std::net::IpAddr;

use regex_automata::util::syntax;

use crate::ast::{CmpOp, Expr, ExprKind, JsonPath, Name, XmlPath};
use crate::diag::{did_you_mean, Reporter, Span};
use crate::ir::{Atom, Cond, Fetch, Ir, Lit, Num, Operand, SetKind};

/// Fields written as a bare name.
pub(crate) const FIELDS: &[&str] = &[
    "srcip",
    "srcport",
    "dstip",
    "dstport",
    "method",
    "url",
    "path",
    "query",
    "ext",
    "host",
    "version",
    "bodylen",
    "grpc.service",
    "grpc.method",
];
/// Fields that take a name: `header("Host")`.
pub(crate) const NAMED_FIELDS: &[&str] = &["header", "cookie", "arg", "form"];
/// Functions usable in conditions.
pub(crate) const FUNCTIONS: &[&str] = &["match", "strcmp", "exists", "contains", "prefix", "suffix", "inNet"];

/// The regex dialect of `match`: bytes, so any header or body value can be searched.
pub(crate) fn regex_syntax_config() -> syntax::Config {
    syntax::Config::new().utf8(false)
}

pub(crate) struct Checker<'r, 's> {
    pub rep: &'r mut Reporter<'s>,
    pub ir: Ir,
    fetch_ids: HashMap<Fetch, u32>,
    atom_ids: HashMap<String, u32>,
    xml_ids: HashMap<XmlPath, u32>,
    json_ids: HashMap<JsonPath, u32>,
}

impl<'r, 's> Checker<'r, 's> {
    pub fn new(rep: &'r mut Reporter<'s>) -> Self {
        Checker {
            rep,
            ir: Ir::default(),
            fetch_ids: HashMap::new(),
            atom_ids: HashMap::new(),
            xml_ids: HashMap::new(),
            json_ids: HashMap::new(),
        }
    }

    fn fetch(&mut self, f: Fetch) -> u32 {
        let next = self.ir.fetches.len() as u32;
        *self.fetch_ids.entry(f.clone()).or_insert_with(|| {
            self.ir.fetches.push(f);
            next
        })
    }

    fn atom(&mut self, a: Atom, written: &Expr) -> Cond {
        let key = format!("{a:?}");
        let next = self.ir.atoms.len() as u32;
        let id = *self.atom_ids.entry(key).or_insert_with(|| {
            self.ir.atoms.push(a);
            self.ir.atom_text.push(written.to_string());
            next
        });
        Cond::Atom(id)
    }

    /// Lowers a condition; `None` after reporting an error.
    pub fn cond(&mut self, e: &Expr) -> Option<Cond> {
        match &e.kind {
            ExprKind::Bool(b) => Some(Cond::Const(*b)),
            ExprKind::Not(inner) => Some(Cond::Not(Box::new(self.cond(inner)?))),
            ExprKind::And(items) => self.conds(items).map(Cond::And),
            ExprKind::Or(items) => self.conds(items).map(Cond::Or),
            ExprKind::Cmp(op, l, r) => self.compare(*op, l, r, e),
            ExprKind::Call { name, args } if FUNCTIONS.contains(&name.text.as_str()) => {
                self.function(name, args, e)
            }
            _ => {
                if self.value(e).is_some() {
                    let hint = format!("compare it (`{e} == \"…\"`) or test it with `exists({e})`");
                    self.rep.error(e.span, format!("'{e}' is a value, not a condition"), Some(hint));
                }
                None
            }
        }
    }

    fn conds(&mut self, items: &[Expr]) -> Option<Vec<Cond>> {
        let lowered: Vec<Option<Cond>> = items.iter().map(|i| self.cond(i)).collect();
        lowered.into_iter().collect()
    }

    /// Lowers an operand; `None` after reporting an error.
    pub fn value(&mut self, e: &Expr) -> Option<Operand> {
        match &e.kind {
            ExprKind::Num(raw) => Some(Operand::Lit(lit(raw))),
            ExprKind::Str(s) => Some(Operand::Lit(lit(s))),
            ExprKind::Ident(name) => self.bare_field(name, e.span),
            ExprKind::Xml(path) => {
                let next = self.ir.xml_paths.len() as u32;
                let id = *self.xml_ids.entry(path.clone()).or_insert_with(|| {
                    self.ir.xml_paths.push(path.clone());
                    next
                });
                Some(Operand::Fetch(self.fetch(Fetch::Xml(id))))
            }
            ExprKind::Json(path) => {
                let next = self.ir.json_paths.len() as u32;
                let id = *self.json_ids.entry(path.clone()).or_insert_with(|| {
                    self.ir.json_paths.push(path.clone());
                    next
                });
                Some(Operand::Fetch(self.fetch(Fetch::Json(id))))
            }
            ExprKind::Call { name, args } => self.call_value(name, args, e),
            _ => {
                let hint = "compare values, not conditions: `a == b`; combine conditions with && and ||";
                self.rep.error(e.span, format!("'{e}' is a condition, not a value"), Some(hint.into()));
                None
            }
        }
    }

    fn bare_field(&mut self, name: &str, span: Span) -> Option<Operand> {
        let fetch = match name {
            "srcip" => Fetch::SrcIp,
            "srcport" => Fetch::SrcPort,
            "dstip" => Fetch::DstIp,
            "dstport" => Fetch::DstPort,
            "method" => Fetch::Method,
            "url" => Fetch::Url,
            "path" => Fetch::Path,
            "query" => Fetch::Query,
            "ext" => Fetch::Ext,
            "host" => Fetch::Host,
            "version" => Fetch::Version,
            "bodylen" => Fetch::BodyLen,
            "grpc.service" => Fetch::GrpcService,
            "grpc.method" => Fetch::GrpcMethod,
            _ => match crate::ProtoField::from_name(name) {
                Some(field) => Fetch::Proto(field),
                None => return self.unknown_field(name, span),
            },
        };
        Some(Operand::Fetch(self.fetch(fetch)))
    }

    fn unknown_field(&mut self, name: &str, span: Span) -> Option<Operand> {
        if name == "json" || name == "xml" {
            let hint = if name == "json" { crate::jsonpath::HINT } else { "write xml.tag/tag:2" };
            self.rep.error(span, format!("'{name}' needs a path"), Some(hint.into()));
        } else if NAMED_FIELDS.contains(&name) {
            let hint = format!("write {name}(\"name\")");
            self.rep.error(span, format!("'{name}' needs a name"), Some(hint));
        } else if FUNCTIONS.contains(&name) {
            self.rep.error(span, format!("'{name}' is a function"), Some(format!("call it: {name}(…)")));
        } else {
            let proto = crate::ProtoField::ALL.map(|f| f.name());
            let message = match did_you_mean(name, FIELDS.iter().chain(NAMED_FIELDS).chain(&proto).copied()) {
                Some(s) => format!("unknown field '{name}' — did you mean '{s}'?"),
                None => format!("unknown field '{name}'"),
            };
            let hint = format!(
                "fields are {}, header(\"…\"), cookie(\"…\"), arg(\"…\"), form(\"…\"), xml.tag/…, json.key[0]…, tls.sni, smtp.rcpt_to, pop.user, imap.user, …",
                FIELDS.join(", ")
            );
            self.rep.error(span, message, Some(hint));
        }
        None
    }

    fn call_value(&mut self, name: &Name, args: &[Expr], e: &Expr) -> Option<Operand> {
        let n = name.text.as_str();
        if NAMED_FIELDS.contains(&n) {
            let key = self.arity_str(name, args)?;
            let fetch = match n {
                "header" => Fetch::Header(self.header_name(&key, &args[0])?),
                "cookie" => Fetch::Cookie(key),
                "arg" => Fetch::Arg(key),
                _ => Fetch::Form(key),
            };
            return Some(Operand::Fetch(self.fetch(fetch)));
        }
        if n == "strcmp" {
            self.arity(name, args, 2, "two values")?;
            let (a, b) = (self.value(&args[0]), self.value(&args[1]));
            let (a, b) = (a?, b?);
            if matches!(a, Operand::Strcmp(..)) || matches!(b, Operand::Strcmp(..)) {
                let hint = "strcmp compares two strings: fields or quoted text";
                self.rep.error(e.span, "strcmp(…) cannot be an argument of strcmp", Some(hint.into()));
                return None;
            }
            return Some(Operand::Strcmp(Box::new(a), Box::new(b)));
        }
        if FUNCTIONS.contains(&n) {
            let hint = format!("use it as a condition on its own: if ({e}) …");
            self.rep.error(e.span, format!("'{n}(…)' is a condition, not a value"), Some(hint));
            return None;
        }
        self.unknown_function(name)
    }

    fn unknown_function(&mut self, name: &Name) -> Option<Operand> {
        let candidates = FUNCTIONS.iter().chain(NAMED_FIELDS).copied();
        let message = match did_you_mean(&name.text, candidates) {
            Some(s) => format!("unknown function '{}' — did you mean '{s}'?", name.text),
            None => format!("unknown function '{}'", name.text),
        };
        let hint = format!(
            "functions are {}; fields with a name are {}",
            FUNCTIONS.join(", "),
            NAMED_FIELDS.join(", ")
        );
        self.rep.error(name.span, message, Some(hint));
        None
    }

    fn arity(&mut self, name: &Name, args: &[Expr], want: usize, what: &str) -> Option<()> {
        if args.len() == want {
            return Some(());
        }
        let message = format!(
            "{} takes {want} argument{} ({what}), found {}",
            name.text,
            if want == 1 { "" } else { "s" },
            args.len()
        );
        self.rep.error(name.span, message, None);
        None
    }

    /// One argument that must be a non-empty string literal.
    fn arity_str(&mut self, name: &Name, args: &[Expr]) -> Option<String> {
        self.arity(name, args, 1, "a quoted name")?;
        match &args[0].kind {
            ExprKind::Str(s) if !s.is_empty() => Some(s.clone()),
            _ => {
                let hint = format!("write {}(\"name\")", name.text);
                self.rep.error(
                    args[0].span,
                    format!("the argument of {} must be a non-empty string", name.text),
                    Some(hint),
                );
                None
            }
        }
    }

    fn header_name(&mut self, key: &str, arg: &Expr) -> Option<String> {
        let token = key.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if token {
            return Some(key.to_ascii_lowercase());
        }
        self.rep.error(arg.span, format!("'{key}' is not a valid header name"), None);
        None
    }

    fn compare(&mut self, op: CmpOp, l: &Expr, r: &Expr, e: &Expr) -> Option<Cond> {
        let (lv, rv) = (self.value(l), self.value(r));
        let (lv, rv) = (lv?, rv?);
        if let Some((fetch, lit)) = exact_equality(op, &lv, &rv) {
            return Some(self.atom(Atom::Set { fetch, kind: SetKind::Eq, lit }, e));
        }
        Some(self.atom(Atom::Cmp { op, l: lv, r: rv }, e))
    }

    fn function(&mut self, name: &Name, args: &[Expr], e: &Expr) -> Option<Cond> {
        let kind = match name.text.as_str() {
            "match" => SetKind::Match,
            "contains" => SetKind::Contains,
            "prefix" => SetKind::Prefix,
            "suffix" => SetKind::Suffix,
            "exists" => {
                self.arity(name, args, 1, "a field")?;
                let fetch = self.field_arg(name, &args[0])?;
                return Some(self.atom(Atom::Exists(fetch), e));
            }
            "inNet" => return self.in_net(name, args, e),
            _ => {
                let hint = "compare its result: strcmp(a, b) == 0 means equal";
                self.rep.error(e.span, "'strcmp' returns a number, not a condition", Some(hint.into()));
                return None;
            }
        };
        let what = if kind == SetKind::Match { "a field and a regex" } else { "a field and a string" };
        self.arity(name, args, 2, what)?;
        let fetch = self.field_arg(name, &args[0]);
        let lit = self.string_arg(name, &args[1])?;
        if kind == SetKind::Match {
            self.check_regex(&lit, &args[1])?;
        }
        Some(self.atom(Atom::Set { fetch: fetch?, kind, lit }, e))
    }

    fn field_arg(&mut self, name: &Name, arg: &Expr) -> Option<u32> {
        match self.value(arg)? {
            Operand::Fetch(f) => Some(f),
            _ => {
                let hint = "for example url, header(\"Host\") or xml.order/total";
                self.rep.error(
                    arg.span,
                    format!("the first argument of {} must be a field", name.text),
                    Some(hint.into()),
                );
                None
            }
        }
    }

    fn string_arg(&mut self, name: &Name, arg: &Expr) -> Option<String> {
        match &arg.kind {
            ExprKind::Str(s) => Some(s.clone()),
            _ => {
                self.rep.error(
                    arg.span,
                    format!("the second argument of {} must be a string literal", name.text),
                    None,
                );
                None
            }
        }
    }

    fn check_regex(&mut self, pattern: &str, arg: &Expr) -> Option<()> {
        let err = match syntax::parse_with(pattern, &regex_syntax_config()) {
            Ok(_) => return Some(()),
            Err(err) => err,
        };
        let written =
            self.rep.source.get(arg.span.start as usize + 1..(arg.span.end as usize).saturating_sub(1));
        // Point into the regex when the literal has no escapes (offsets then agree).
        let span = match (written == Some(pattern), &err) {
            (true, regex_syntax::Error::Parse(p)) => {
                let at = arg.span.start as usize + 1 + p.span().start.offset;
                Span::new(at, at + 1)
            }
            _ => arg.span,
        };
        let detail = match &err {
            regex_syntax::Error::Parse(p) => p.kind().to_string(),
            regex_syntax::Error::Translate(t) => t.kind().to_string(),
            other => other.to_string(),
        };
        self.rep.error(span, format!("bad regex \"{pattern}\": {detail}"), None);
        None
    }

    fn in_net(&mut self, name: &Name, args: &[Expr], e: &Expr) -> Option<Cond> {
        self.arity(name, args, 2, "a field and a network like \"10.0.0.0/8\"")?;
        let fetch = self.field_arg(name, &args[0]);
        let text = self.string_arg(name, &args[1])?;
        let Some((net, prefix)) = parse_cidr(&text) else {
            let hint = "write an address with an optional prefix length: \"10.0.0.0/8\", \"2001:db8::/32\"";
            self.rep.error(args[1].span, format!("bad network \"{text}\""), Some(hint.into()));
            return None;
        };
        Some(self.atom(Atom::InNet { fetch: fetch?, net, prefix }, e))
    }
}

fn lit(text: &str) -> Lit {
    Lit { bytes: text.as_bytes().into(), num: Num::parse(text.as_bytes()) }
}

/// `field == "text"` (text not a number) and `strcmp(field, "text") == 0` are both exact
/// byte equality, which the field's hash table answers for every rule at once.
fn exact_equality(op: CmpOp, l: &Operand, r: &Operand) -> Option<(u32, String)> {
    if op != CmpOp::Eq {
        return None;
    }
    let text = |lit: &Lit| String::from_utf8(lit.bytes.to_vec()).ok();
    match (l, r) {
        (Operand::Fetch(f), Operand::Lit(lit)) | (Operand::Lit(lit), Operand::Fetch(f))
            if lit.num.is_none() =>
        {
            Some((*f, text(lit)?))
        }
        (Operand::Strcmp(a, b), Operand::Lit(zero)) | (Operand::Lit(zero), Operand::Strcmp(a, b))
            if zero.num.is_some_and(|n| n.cmp(Num::Int(0)).is_eq()) =>
        {
            match (a.as_ref(), b.as_ref()) {
                (Operand::Fetch(f), Operand::Lit(lit)) | (Operand::Lit(lit), Operand::Fetch(f)) => {
                    Some((*f, text(lit)?))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// `addr[/len]`; host bits are masked off.
pub(crate) fn parse_cidr(text: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (text, None),
    };
    let ip: IpAddr = addr.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let prefix = match len {
        Some(l) if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) => l.parse::<u8>().ok()?,
        Some(_) => return None,
        None => max,
    };
    (prefix <= max).then(|| (mask(ip, prefix), prefix))
}

/// `ip` with all but the first `prefix` bits cleared.
pub(crate) fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(32 - u32::from(prefix.min(32))).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & m).into())
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(128 - u32::from(prefix.min(128))).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & m).into())
        }
    }
}
