//! The syntax tree exactly as written (spans kept for diagnostics), and the pretty-printer
//! that turns it back into canonical source. The parser knows no names: whether `url` is
//! a field or `routTo` an action is the checker's business, so printing and re-parsing
//! round-trips any tree the parser can build, meaningful or not.

use std::fmt::{self, Write as _};

use crate::diag::Span;

/// A whole rules file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Program {
    pub rules: Vec<Rule>,
}

/// `Label: if (cond) { … } [else { … }]`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Rule {
    pub label: Name,
    pub cond: Expr,
    pub then: Block,
    pub els: Option<Block>,
}

/// An identifier with where it was written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Name {
    pub text: String,
    pub span: Span,
}

/// `{ action; … }`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Block {
    pub actions: Vec<Action>,
    pub span: Span,
}

/// One statement of a block.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Action {
    /// `goto Label`.
    Goto { target: Name, span: Span },
    /// `name(args)`: routeTo, deny, drop, redirect, setHeader (or a typo of one).
    Call { name: Name, args: Vec<Expr>, span: Span },
}

/// An expression node: conditions, operands and action arguments share one type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ExprKind {
    Bool(bool),
    /// As written, so printing reproduces it.
    Num(String),
    Str(String),
    /// A bare name: a field (`url`), a group or stickiness in `routeTo`.
    Ident(String),
    Xml(XmlPath),
    Json(JsonPath),
    /// `name(args)`: a function (`match`) or a field with an argument (`header`).
    Call {
        name: Name,
        args: Vec<Expr>,
    },
    Not(Box<Expr>),
    /// Two or more operands; a parenthesized `&&` inside stays a separate node.
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    /// Whether `ordering` (left compared to right) satisfies the operator.
    pub fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CmpOp::Eq => ordering == Equal,
            CmpOp::Ne => ordering != Equal,
            CmpOp::Lt => ordering == Less,
            CmpOp::Le => ordering != Greater,
            CmpOp::Gt => ordering == Greater,
            CmpOp::Ge => ordering != Less,
        }
    }
}

/// `purchase:1.item:2.subTotal` as steps; a step without `:N` means the first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct XmlPath {
    pub steps: Vec<Step>,
}

/// One tag of an XML path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Step {
    pub name: String,
    /// 1-based among same-named siblings, as written (`None` = not written = 1).
    pub index: Option<u32>,
}

impl fmt::Display for XmlPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("xml.")?;
        for (i, step) in self.steps.iter().enumerate() {
            if i > 0 {
                f.write_char('/')?;
            }
            f.write_str(&step.name)?;
            if let Some(n) = step.index {
                write!(f, ":{n}")?;
            }
        }
        Ok(())
    }
}

/// `json.order.items[0].sku` as steps.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct JsonPath {
    pub steps: Vec<JsonStep>,
}

/// One step of a JSON path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum JsonStep {
    /// A member of an object, by its name (unescaped).
    Key(String),
    /// An element of an array, 0-based.
    Index(u32),
}

/// Whether a key can be written after a `.` rather than quoted in brackets.
pub(crate) fn is_bare_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(is_bare_key_char)
}

/// Characters of a key written after `.` (any letter or digit, `_`, `-`, `$`, `@`).
pub(crate) fn is_bare_key_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '$' | '@')
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("json")?;
        for step in &self.steps {
            match step {
                JsonStep::Key(k) if is_bare_key(k) => write!(f, ".{k}")?,
                JsonStep::Key(k) => {
                    f.write_char('[')?;
                    write_string(f, k)?;
                    f.write_char(']')?;
                }
                JsonStep::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for rule in &self.rules {
            writeln!(f, "{rule}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: if ({}) {}", self.label.text, self.cond, self.then)?;
        if let Some(els) = &self.els {
            write!(f, " else {els}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('{')?;
        for action in &self.actions {
            write!(f, " {action};")?;
        }
        f.write_str(" }")
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Goto { target, .. } => write!(f, "goto {}", target.text),
            Action::Call { name, args, .. } => write_call(f, &name.text, args),
        }
    }
}

fn write_call(f: &mut fmt::Formatter<'_>, name: &str, args: &[Expr]) -> fmt::Result {
    write!(f, "{name}(")?;
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{arg}")?;
    }
    f.write_char(')')
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Bool(b) => write!(f, "{b}"),
            ExprKind::Num(n) => f.write_str(n),
            ExprKind::Str(s) => write_string(f, s),
            ExprKind::Ident(s) => f.write_str(s),
            ExprKind::Xml(p) => write!(f, "{p}"),
            ExprKind::Json(p) => write!(f, "{p}"),
            ExprKind::Call { name, args } => write_call(f, &name.text, args),
            ExprKind::Not(e) => {
                f.write_char('!')?;
                write_wrapped(f, e, matches!(e.kind, ExprKind::And(_) | ExprKind::Or(_)))
            }
            ExprKind::And(items) => {
                write_chain(f, items, " && ", |k| matches!(k, ExprKind::And(_) | ExprKind::Or(_)))
            }
            ExprKind::Or(items) => write_chain(f, items, " || ", |k| matches!(k, ExprKind::Or(_))),
            ExprKind::Cmp(op, l, r) => {
                write_operand(f, l)?;
                write!(f, " {} ", op.as_str())?;
                write_operand(f, r)
            }
        }
    }
}

/// Parenthesizes exactly what the parser would otherwise group differently.
fn write_chain(
    f: &mut fmt::Formatter<'_>,
    items: &[Expr],
    sep: &str,
    needs_parens: impl Fn(&ExprKind) -> bool,
) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        write_wrapped(f, item, needs_parens(&item.kind))?;
    }
    Ok(())
}

fn write_operand(f: &mut fmt::Formatter<'_>, e: &Expr) -> fmt::Result {
    let wrap = matches!(e.kind, ExprKind::And(_) | ExprKind::Or(_) | ExprKind::Not(_) | ExprKind::Cmp(..));
    write_wrapped(f, e, wrap)
}

fn write_wrapped(f: &mut fmt::Formatter<'_>, e: &Expr, wrap: bool) -> fmt::Result {
    if wrap {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

/// A string literal the lexer reads back to the same value.
pub(crate) fn write_string(f: &mut impl fmt::Write, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}
