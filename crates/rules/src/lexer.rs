//! Lexer: source text → tokens with byte spans. Errors are reported and the offending
//! character skipped, so one typo does not hide the errors after it.

use crate::ast::is_bare_key_char;
use crate::diag::{Reporter, Span};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// Letters, digits, `_`, `-`, `.`; starts with a letter or `_`.
    Ident(String),
    /// `xml.` and the tag path after it (without the `xml.`).
    Xml(String),
    /// `json` and the path after it, which starts with `.` or `[` (without the `json`).
    Json(String),
    /// A string literal, escapes resolved.
    Str(String),
    /// A number literal as written (`52000`, `-1.5`).
    Num(String),
    LParen,
    RParen,
    LBrace,
    RBrace,
    Comma,
    Semi,
    Colon,
    Not,
    AndAnd,
    OrOr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Eof,
}

impl Tok {
    /// How the token reads in an "expected …, found …" message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Xml(s) => format!("'xml.{s}'"),
            Tok::Json(s) => format!("'json{s}'"),
            Tok::Str(_) => "a string".into(),
            Tok::Num(n) => format!("'{n}'"),
            Tok::Eof => "the end of the file".into(),
            other => format!("'{}'", punct_text(other)),
        }
    }
}

fn punct_text(t: &Tok) -> &'static str {
    match t {
        Tok::LParen => "(",
        Tok::RParen => ")",
        Tok::LBrace => "{",
        Tok::RBrace => "}",
        Tok::Comma => ",",
        Tok::Semi => ";",
        Tok::Colon => ":",
        Tok::Not => "!",
        Tok::AndAnd => "&&",
        Tok::OrOr => "||",
        Tok::Eq => "==",
        Tok::Ne => "!=",
        Tok::Lt => "<",
        Tok::Le => "<=",
        Tok::Gt => ">",
        Tok::Ge => ">=",
        _ => "?",
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub span: Span,
}

pub(crate) fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

pub(crate) fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// XML names allow any letter; `/` and `.` separate steps, `:` starts an index or is part
/// of a namespace prefix.
fn is_xml_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/')
}

pub(crate) fn lex(src: &str, rep: &mut Reporter<'_>) -> Vec<Token> {
    let mut lx = Lexer { src, pos: 0, out: Vec::new() };
    while let Some(c) = lx.peek() {
        let start = lx.pos;
        match c {
            c if c.is_whitespace() => lx.bump(),
            '#' => lx.skip_line(),
            '/' if lx.src[start..].starts_with("//") => lx.skip_line(),
            '"' => lx.string(rep),
            c if c.is_ascii_digit() => lx.number(),
            '-' if lx.src[start + 1..].starts_with(|c: char| c.is_ascii_digit()) => lx.number(),
            c if is_ident_start(c) => lx.ident(),
            _ => lx.punct(c, rep),
        }
    }
    let end = src.len();
    lx.out.push(Token { tok: Tok::Eof, span: Span::new(end, end) });
    lx.out
}

struct Lexer<'s> {
    src: &'s str,
    pos: usize,
    out: Vec<Token>,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn bump(&mut self) {
        if let Some(c) = self.peek() {
            self.pos += c.len_utf8();
        }
    }

    fn push(&mut self, tok: Tok, start: usize) {
        self.out.push(Token { tok, span: Span::new(start, self.pos) });
    }

    fn skip_line(&mut self) {
        self.pos = self.src[self.pos..].find('\n').map_or(self.src.len(), |i| self.pos + i);
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&f) {
            self.bump();
        }
    }

    fn number(&mut self) {
        let start = self.pos;
        if self.peek() == Some('-') {
            self.bump();
        }
        self.take_while(|c| c.is_ascii_digit());
        let rest = &self.src[self.pos..];
        if rest.starts_with('.') && rest[1..].starts_with(|c: char| c.is_ascii_digit()) {
            self.bump();
            self.take_while(|c| c.is_ascii_digit());
        }
        let text = self.src[start..self.pos].to_string();
        self.push(Tok::Num(text), start);
    }

    fn ident(&mut self) {
        let start = self.pos;
        self.take_while(|c| is_ident_char(c) && c != '.');
        if &self.src[start..self.pos] == "xml" && self.peek() == Some('.') {
            self.bump();
            let path_start = self.pos;
            self.take_while(is_xml_char);
            let path = self.src[path_start..self.pos].to_string();
            return self.push(Tok::Xml(path), start);
        }
        if &self.src[start..self.pos] == "json" && matches!(self.peek(), Some('.' | '[')) {
            let path_start = self.pos;
            self.json_path();
            let path = self.src[path_start..self.pos].to_string();
            return self.push(Tok::Json(path), start);
        }
        self.take_while(is_ident_char);
        let text = self.src[start..self.pos].to_string();
        self.push(Tok::Ident(text), start);
    }

    /// The steps of a JSON path: bare keys, dots, brackets, and quoted keys right after a
    /// `[` (up to their closing quote or the end of the line). Whether they form a path is
    /// the parser's business, so its errors can point at the faulty character.
    fn json_path(&mut self) {
        while let Some(c) = self.peek() {
            if c == '"' && self.src[..self.pos].ends_with('[') {
                self.bump();
                self.quoted_key_rest();
            } else if is_bare_key_char(c) || matches!(c, '.' | '[' | ']') {
                self.bump();
            } else {
                break;
            }
        }
    }

    fn quoted_key_rest(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                '\n' => return,
                '"' => return self.bump(),
                '\\' => {
                    self.bump();
                    if self.peek().is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                _ => self.bump(),
            }
        }
    }

    fn string(&mut self, rep: &mut Reporter<'_>) {
        let start = self.pos;
        self.bump();
        let mut value = String::new();
        loop {
            match self.peek() {
                None | Some('\n') => {
                    let hint = Some("close the string with '\"' on the same line".into());
                    rep.error(Span::new(start, self.pos), "unterminated string", hint);
                    break;
                }
                Some('"') => {
                    self.bump();
                    break;
                }
                Some('\\') => {
                    self.bump();
                    self.escape(&mut value);
                }
                Some(c) => {
                    value.push(c);
                    self.bump();
                }
            }
        }
        self.push(Tok::Str(value), start);
    }

    /// C escapes for quote, backslash and control characters. Any other backslash is kept
    /// as written, so a regex like "\.gif$" means what its author meant.
    fn escape(&mut self, value: &mut String) {
        let resolved = match self.peek() {
            Some('"') => '"',
            Some('\\') => '\\',
            Some('n') => '\n',
            Some('t') => '\t',
            Some('r') => '\r',
            _ => {
                value.push('\\');
                return;
            }
        };
        value.push(resolved);
        self.bump();
    }

    fn punct(&mut self, c: char, rep: &mut Reporter<'_>) {
        let start = self.pos;
        let next = self.src[start + c.len_utf8()..].chars().next();
        let (tok, len) = match (c, next) {
            ('(', _) => (Tok::LParen, 1),
            (')', _) => (Tok::RParen, 1),
            ('{', _) => (Tok::LBrace, 1),
            ('}', _) => (Tok::RBrace, 1),
            (',', _) => (Tok::Comma, 1),
            (';', _) => (Tok::Semi, 1),
            (':', _) => (Tok::Colon, 1),
            ('&', Some('&')) => (Tok::AndAnd, 2),
            ('|', Some('|')) => (Tok::OrOr, 2),
            ('=', Some('=')) => (Tok::Eq, 2),
            ('!', Some('=')) => (Tok::Ne, 2),
            ('!', _) => (Tok::Not, 1),
            ('<', Some('=')) => (Tok::Le, 2),
            ('<', _) => (Tok::Lt, 1),
            ('>', Some('=')) => (Tok::Ge, 2),
            ('>', _) => (Tok::Gt, 1),
            _ => return self.bad_char(c, rep),
        };
        self.pos += len;
        self.push(tok, start);
    }

    fn bad_char(&mut self, c: char, rep: &mut Reporter<'_>) {
        let start = self.pos;
        self.bump();
        let hint = match c {
            '=' => Some("comparison is written '=='".to_string()),
            '&' => Some("logical and is written '&&'".to_string()),
            '|' => Some("logical or is written '||'".to_string()),
            '\'' => Some("strings are written in double quotes".to_string()),
            _ => None,
        };
        rep.error(Span::new(start, self.pos), format!("unexpected character '{}'", c.escape_debug()), hint);
    }
}
