//! The checked program: names resolved, literals parsed, every field read interned once as
//! a [`Fetch`] and every test interned once as an [`Atom`], so two rules that test the same
//! thing share one result per request and structural equality of conditions is `==`.

use std::fmt;
use std::net::IpAddr;

use crate::ast::{CmpOp, JsonPath, XmlPath};

/// Something read from the request. Each distinct fetch is computed at most once per
/// evaluation, only when a condition that reaches it needs it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Fetch {
    SrcIp,
    SrcPort,
    DstIp,
    DstPort,
    Method,
    Url,
    Path,
    Query,
    Ext,
    Host,
    Version,
    BodyLen,
    /// A gRPC call's service (`:path` `/package.Service/Method`), gRPC requests only.
    GrpcService,
    /// A gRPC call's method.
    GrpcMethod,
    /// Lower-cased name.
    Header(String),
    Cookie(String),
    Arg(String),
    Form(String),
    /// Index into `Ir::xml_paths`.
    Xml(u32),
    /// Index into `Ir::json_paths`.
    Json(u32),
    /// A field of the listener's protocol (`tls.sni`, `smtp.rcpt_to`, …).
    Proto(crate::ProtoField),
}

impl Fetch {
    /// Whether the value may depend on body bytes (and so be "not yet known").
    pub fn reads_body(&self) -> bool {
        matches!(self, Fetch::BodyLen | Fetch::Form(_) | Fetch::Xml(_) | Fetch::Json(_))
    }
}

/// How the field is written in rules (for traces); the program holds the body paths.
pub(crate) struct FetchName<'a>(pub &'a Fetch, pub &'a Ir);

impl fmt::Display for FetchName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self.0 {
            Fetch::SrcIp => "srcip",
            Fetch::SrcPort => "srcport",
            Fetch::DstIp => "dstip",
            Fetch::DstPort => "dstport",
            Fetch::Method => "method",
            Fetch::Url => "url",
            Fetch::Path => "path",
            Fetch::Query => "query",
            Fetch::Ext => "ext",
            Fetch::Host => "host",
            Fetch::Version => "version",
            Fetch::BodyLen => "bodylen",
            Fetch::GrpcService => "grpc.service",
            Fetch::GrpcMethod => "grpc.method",
            Fetch::Header(n) => return write!(f, "header({n:?})"),
            Fetch::Cookie(n) => return write!(f, "cookie({n:?})"),
            Fetch::Arg(n) => return write!(f, "arg({n:?})"),
            Fetch::Form(n) => return write!(f, "form({n:?})"),
            Fetch::Xml(i) => return self.1.xml_paths.get(*i as usize).map_or(Ok(()), |p| write!(f, "{p}")),
            Fetch::Json(i) => return self.1.json_paths.get(*i as usize).map_or(Ok(()), |p| write!(f, "{p}")),
            Fetch::Proto(p) => p.name(),
        };
        f.write_str(s)
    }
}

/// A string test answered for all rules at once by the field's automata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SetKind {
    Match,
    Contains,
    Prefix,
    Suffix,
    Eq,
}

/// One elementary test. Atoms are interned: equal tests have equal ids.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Atom {
    /// Indexed: its result comes from the fetch's pattern set.
    Set {
        fetch: u32,
        kind: SetKind,
        lit: String,
    },
    Exists(u32),
    Cmp {
        op: CmpOp,
        l: Operand,
        r: Operand,
    },
    InNet {
        fetch: u32,
        net: IpAddr,
        prefix: u8,
    },
}

impl Atom {
    pub fn set_fetch(&self) -> Option<u32> {
        match self {
            Atom::Set { fetch, .. } => Some(*fetch),
            _ => None,
        }
    }
}

/// A value in a comparison.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Operand {
    Fetch(u32),
    Lit(Lit),
    Strcmp(Box<Operand>, Box<Operand>),
}

/// A literal, with its number reading when it has one.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Lit {
    pub bytes: Box<[u8]>,
    pub num: Option<Num>,
}

/// A number read from text: integers compare exactly, anything with a fraction as f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    /// `[+-]digits[.digits]`, nothing else (no exponents, spaces, `inf`).
    pub fn parse(b: &[u8]) -> Option<Num> {
        let digits = b.strip_prefix(b"-").or_else(|| b.strip_prefix(b"+")).unwrap_or(b);
        let (int, frac) = match memchr::memchr(b'.', digits) {
            Some(i) => (&digits[..i], Some(&digits[i + 1..])),
            None => (digits, None),
        };
        let all_digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
        if !all_digits(int) || matches!(frac, Some(f) if !all_digits(f)) {
            return None;
        }
        let text = std::str::from_utf8(b).ok()?;
        if frac.is_none() {
            if let Ok(i) = text.parse::<i64>() {
                return Some(Num::Int(i));
            }
        }
        text.parse::<f64>().ok().map(Num::Float)
    }

    /// What `parse` reads, and also any JSON number (`1.5e3`): a JSON value that is a
    /// number in JSON's grammar compares as one.
    pub fn parse_json(b: &[u8]) -> Option<Num> {
        Num::parse(b).or_else(|| {
            let f: f64 = std::str::from_utf8(b).ok()?.parse().ok()?;
            (crate::jsonread::is_number(b) && f.is_finite()).then_some(Num::Float(f))
        })
    }

    pub fn cmp(self, other: Num) -> std::cmp::Ordering {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a.cmp(&b),
            (a, b) => a.as_f64().total_cmp(&b.as_f64()),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// A condition over interned atoms. `And`/`Or` are n-ary, as written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cond {
    Const(bool),
    Not(Box<Cond>),
    And(Vec<Cond>),
    Or(Vec<Cond>),
    Atom(u32),
}

/// What ends a block.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum End {
    /// Only setHeader actions (or none): go on with the next rule.
    Next,
    /// `goto`: continue at this rule index (always later than the current one).
    Goto(u32),
    /// A decision: index into `Ir::finals`.
    Final(u32),
}

/// The actions that end evaluation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Final {
    Route { group: u32, sticky: crate::Sticky },
    Deny { status: u16 },
    Drop,
    Redirect { status: u16, location: String },
}

/// A lowered block: setHeader edits (indexes into `Ir::set_headers`), then its end.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LBlock {
    pub headers: Vec<u32>,
    pub end: End,
}

/// A lowered rule.
#[derive(Clone, Debug)]
pub(crate) struct LRule {
    pub label: String,
    pub line: u32,
    pub cond: Cond,
    pub then: LBlock,
    pub els: Option<LBlock>,
}

/// The whole checked program.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ir {
    pub rules: Vec<LRule>,
    pub fetches: Vec<Fetch>,
    pub atoms: Vec<Atom>,
    /// Each atom as written (first occurrence), for traces.
    pub atom_text: Vec<String>,
    pub xml_paths: Vec<XmlPath>,
    pub json_paths: Vec<JsonPath>,
    pub finals: Vec<Final>,
    pub set_headers: Vec<(String, String)>,
}
