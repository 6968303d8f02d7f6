//! Recursive-descent parser: tokens → [`Program`]. Grammar (docs/rules.md has the EBNF):
//!
//! ```text
//! rule    = label ":" "if" "(" or ")" block [ "else" block ]
//! block   = "{" { action [";"] } "}"
//! action  = "goto" label | name "(" [ or { "," or } ] ")"
//! or      = and { "||" and }        and = unary { "&&" unary }
//! unary   = "!" unary | cmp         cmp = primary [ cmpop primary ]
//! primary = "(" or ")" | "true" | "false" | number | string | xmlpath | jsonpath
//!         | name [ "(" [ or { "," or } ] ")" ]
//! ```
//!
//! After an error the parser skips to the next `Label: if`, so one file reports all its
//! syntax errors at once. Nesting is capped so hostile input cannot overflow the stack.

use crate::ast::{Action, Block, CmpOp, Expr, ExprKind, JsonPath, Name, Program, Rule, Step, XmlPath};
use crate::diag::{Reporter, Span};
use crate::jsonpath;
use crate::lexer::{Tok, Token};

/// Deeper nesting than this is refused (no real rule comes near it).
const MAX_DEPTH: u32 = 64;

/// Words with a meaning of their own, so never labels.
const KEYWORDS: &[&str] = &["if", "else", "goto", "true", "false"];

/// Marker: an error was reported; the caller recovers.
struct Failed;

type PResult<T> = Result<T, Failed>;

pub(crate) fn parse(tokens: &[Token], rep: &mut Reporter<'_>) -> Program {
    let mut p = Parser { toks: tokens, pos: 0, depth: 0, rep };
    let mut rules = Vec::new();
    while p.peek() != &Tok::Eof {
        match p.rule() {
            Ok(rule) => rules.push(rule),
            Err(Failed) => p.recover(),
        }
    }
    Program { rules }
}

struct Parser<'t, 'r, 's> {
    toks: &'t [Token],
    pos: usize,
    depth: u32,
    rep: &'r mut Reporter<'s>,
}

impl Parser<'_, '_, '_> {
    fn peek(&self) -> &Tok {
        &self.tok_at(self.pos).tok
    }

    fn tok_at(&self, i: usize) -> &Token {
        let last = self.toks.len().saturating_sub(1);
        &self.toks[i.min(last)]
    }

    fn span(&self) -> Span {
        self.tok_at(self.pos).span
    }

    fn prev_span(&self) -> Span {
        self.tok_at(self.pos.saturating_sub(1)).span
    }

    fn advance(&mut self) -> Token {
        let t = self.tok_at(self.pos).clone();
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        let hit = self.peek() == tok;
        if hit {
            self.advance();
        }
        hit
    }

    fn fail<T>(&mut self, what: &str, hint: Option<String>) -> PResult<T> {
        let found = self.peek().describe();
        self.rep.error(self.span(), format!("expected {what}, found {found}"), hint);
        Err(Failed)
    }

    fn expect(&mut self, tok: &Tok, what: &str) -> PResult<()> {
        if self.eat(tok) {
            Ok(())
        } else {
            self.fail(what, None)
        }
    }

    fn is_keyword(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == kw)
    }

    fn name(&mut self, what: &str) -> PResult<Name> {
        match self.peek().clone() {
            Tok::Ident(text) => {
                let span = self.advance().span;
                Ok(Name { text, span })
            }
            _ => self.fail(what, None),
        }
    }

    /// Skips to the start of the next rule (`Ident : if`) or the end.
    fn recover(&mut self) {
        self.advance();
        while self.peek() != &Tok::Eof {
            let label_next = matches!(self.peek(), Tok::Ident(_))
                && self.tok_at(self.pos + 1).tok == Tok::Colon
                && matches!(&self.tok_at(self.pos + 2).tok, Tok::Ident(s) if s == "if");
            if label_next {
                return;
            }
            self.advance();
        }
    }

    fn rule(&mut self) -> PResult<Rule> {
        let label = match self.peek() {
            Tok::Ident(s) if KEYWORDS.contains(&s.as_str()) => {
                return self.fail("a rule label like 'R1:'", Some(format!("'{s}' is a reserved word")));
            }
            Tok::Ident(_) => self.name("a rule label")?,
            _ => {
                return self.fail(
                    "a rule label like 'R1:'",
                    Some("a rule is `Label: if (condition) { action; }`".into()),
                )
            }
        };
        self.expect(&Tok::Colon, "':' after the rule label")?;
        if !self.is_keyword("if") {
            return self.fail("'if'", Some("a rule is `Label: if (condition) { action; }`".into()));
        }
        self.advance();
        self.expect(&Tok::LParen, "'(' after 'if'")?;
        let cond = self.or()?;
        self.expect(&Tok::RParen, "')' to close the condition")?;
        let then = self.block()?;
        let els = if self.is_keyword("else") {
            self.advance();
            Some(self.block()?)
        } else {
            None
        };
        Ok(Rule { label, cond, then, els })
    }

    fn block(&mut self) -> PResult<Block> {
        let start = self.span();
        self.expect(&Tok::LBrace, "'{' to start the actions")?;
        let mut actions = Vec::new();
        while !self.eat(&Tok::RBrace) {
            actions.push(self.action()?);
            if !self.eat(&Tok::Semi) && self.peek() != &Tok::RBrace {
                return self.fail("';' after the action", None);
            }
        }
        Ok(Block { actions, span: start.to(self.prev_span()) })
    }

    fn action(&mut self) -> PResult<Action> {
        let start = self.span();
        if self.is_keyword("goto") {
            self.advance();
            let target = self.name("a rule label after 'goto'")?;
            return Ok(Action::Goto { span: start.to(target.span), target });
        }
        let name = match self.peek() {
            Tok::Ident(_) => self.name("an action")?,
            _ => {
                return self.fail(
                    "an action",
                    Some("actions are routeTo, goto, deny, drop, redirect, setHeader".into()),
                )
            }
        };
        if self.peek() != &Tok::LParen {
            return self.fail("'(' after the action name", None);
        }
        let args = self.args()?;
        Ok(Action::Call { name, args, span: start.to(self.prev_span()) })
    }

    /// `( [or {, or}] )`, the opening parenthesis not yet consumed.
    fn args(&mut self) -> PResult<Vec<Expr>> {
        self.expect(&Tok::LParen, "'('")?;
        let mut args = Vec::new();
        if self.eat(&Tok::RParen) {
            return Ok(args);
        }
        loop {
            args.push(self.or()?);
            if self.eat(&Tok::RParen) {
                return Ok(args);
            }
            self.expect(&Tok::Comma, "',' or ')'")?;
        }
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        if self.depth >= MAX_DEPTH {
            self.rep.error(self.span(), format!("condition nested more than {MAX_DEPTH} deep"), None);
            return Err(Failed);
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn or(&mut self) -> PResult<Expr> {
        self.nested(|p| p.chain(&Tok::OrOr, Self::and, ExprKind::Or))
    }

    fn and(&mut self) -> PResult<Expr> {
        self.chain(&Tok::AndAnd, Self::unary, ExprKind::And)
    }

    fn chain(
        &mut self,
        sep: &Tok,
        item: fn(&mut Self) -> PResult<Expr>,
        make: fn(Vec<Expr>) -> ExprKind,
    ) -> PResult<Expr> {
        let first = item(self)?;
        if self.peek() != sep {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat(sep) {
            items.push(item(self)?);
        }
        let span = items[0].span.to(self.prev_span());
        Ok(Expr { kind: make(items), span })
    }

    fn unary(&mut self) -> PResult<Expr> {
        if self.peek() != &Tok::Not {
            return self.cmp();
        }
        let start = self.advance().span;
        let inner = self.nested(Self::unary)?;
        let span = start.to(inner.span);
        Ok(Expr { kind: ExprKind::Not(Box::new(inner)), span })
    }

    fn cmp(&mut self) -> PResult<Expr> {
        let left = self.primary()?;
        let op = match self.peek() {
            Tok::Eq => CmpOp::Eq,
            Tok::Ne => CmpOp::Ne,
            Tok::Lt => CmpOp::Lt,
            Tok::Le => CmpOp::Le,
            Tok::Gt => CmpOp::Gt,
            Tok::Ge => CmpOp::Ge,
            _ => return Ok(left),
        };
        self.advance();
        let right = self.primary()?;
        let span = left.span.to(right.span);
        Ok(Expr { kind: ExprKind::Cmp(op, Box::new(left), Box::new(right)), span })
    }

    fn primary(&mut self) -> PResult<Expr> {
        let start = self.span();
        let kind = match self.peek().clone() {
            Tok::LParen => {
                self.advance();
                let inner = self.or()?;
                self.expect(&Tok::RParen, "')'")?;
                // The parentheses stay out of the tree: the printer re-adds what is needed.
                return Ok(Expr { kind: inner.kind, span: start.to(self.prev_span()) });
            }
            Tok::Num(n) => ExprKind::Num(n),
            Tok::Str(s) => ExprKind::Str(s),
            Tok::Xml(raw) => ExprKind::Xml(self.xml_path(&raw, start)?),
            Tok::Json(raw) => ExprKind::Json(self.json_path(&raw, start)?),
            Tok::Ident(s) if s == "true" || s == "false" => ExprKind::Bool(s == "true"),
            Tok::Ident(text) => {
                self.advance();
                if self.peek() != &Tok::LParen {
                    return Ok(Expr { kind: ExprKind::Ident(text), span: start });
                }
                let name = Name { text, span: start };
                let args = self.args()?;
                return Ok(Expr { kind: ExprKind::Call { name, args }, span: start.to(self.prev_span()) });
            }
            _ => return self.fail("a field, a value or '('", None),
        };
        self.advance();
        Ok(Expr { kind, span: start })
    }

    fn xml_path(&mut self, raw: &str, span: Span) -> PResult<XmlPath> {
        let mut steps = Vec::new();
        for part in raw.split(['/', '.']) {
            match parse_step(part) {
                Some(step) => steps.push(step),
                None => {
                    let hint = "write tag steps like xml.purchase:2/item/subTotal (indexes start at 1)";
                    self.rep.error(span, format!("bad XML path 'xml.{raw}'"), Some(hint.into()));
                    return Err(Failed);
                }
            }
        }
        Ok(XmlPath { steps })
    }

    /// `raw` follows the `json` that starts `span`; an error points into the path.
    fn json_path(&mut self, raw: &str, span: Span) -> PResult<JsonPath> {
        jsonpath::parse(raw).map_err(|e| {
            let at = span.start as usize + "json".len() + e.at;
            let message = format!("bad JSON path 'json{raw}': {}", e.what);
            self.rep.error(Span::new(at, at + e.len), message, Some(jsonpath::HINT.into()));
            Failed
        })
    }
}

/// `name` or `name:N` (N ≥ 1); a colon not followed by digits belongs to the name
/// (namespace prefixes such as `soap:Body`).
fn parse_step(part: &str) -> Option<Step> {
    let (name, index) = match part.rsplit_once(':') {
        Some((name, digits)) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            (name, Some(digits.parse::<u32>().ok().filter(|n| *n >= 1)?))
        }
        _ => (part, None),
    };
    // At most one colon, between a namespace prefix and a local name.
    let valid = !name.is_empty()
        && !name.starts_with(':')
        && !name.ends_with(':')
        && name.bytes().filter(|b| *b == b':').count() <= 1;
    valid.then(|| Step { name: name.to_string(), index })
}
