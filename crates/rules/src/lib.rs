//! The content-switching rule language of cswitch (seed 000 §5, `docs/rules.md`), sans-io.
//!
//! This crate owns the rules from text to decision: lexing, parsing, checking (every
//! error with file:line:col, a caret line and a suggestion), compiling into per-field
//! automata and a rule index, and evaluating a request — including reading XML tag paths,
//! JSON member paths and urlencoded forms out of a body that may still be arriving. It
//! touches no socket.
//!
//! # API
//!
//! - [`RuleSet::compile`] / [`RuleSet::compile_with`] (`source`, `file`, `groups`
//!   [, [`CompileOptions`]]) → `Result<RuleSet, Diagnostics>`. Warnings (rules that can
//!   never fire) do not fail a load: [`RuleSet::warnings`]. [`Diagnostics`] and
//!   [`Diagnostic`] print as `file:line:col: error: …`, the source line, a caret line and
//!   a `hint:`, then a count.
//! - [`Request`]: what the rules read from a request (addresses, method, target, version,
//!   headers, the body received so far as a [`Body`]). The proxy implements it over its
//!   parsed head; [`OwnedRequest`] parses a raw request for tests and `cswitch explain`.
//! - [`RuleSet::evaluate`]`(req, &mut EvalState, Option<&mut Trace>)` → [`Outcome`]:
//!   [`Outcome::NeedMore`] or [`Outcome::Decided`] with a [`Decision`] (the rule, an
//!   [`Action`] — route to a group index with a [`Sticky`] mode, deny, drop, redirect or
//!   default — and the [`SetHeaders`] edits to apply). [`EvalState`] is per-worker scratch.
//! - [`RuleSet::needs_body`]: whether any rule can read the body.
//! - [`Trace`] (for explain) and `Display for RuleSet` (canonical source).
//!
//! # Feeding it (the proxy's side)
//!
//! Evaluate once the head is parsed, passing the body bytes that came with it (complete
//! when the request has no body). On `NeedMore`, buffer more body (up to the configured
//! cap, [`DEFAULT_BODY_CAP`]; past it answer 413) and evaluate again when the buffered body
//! has doubled since the last try or is complete — each evaluation re-reads the body from
//! its start, so doubling keeps the total work linear. A complete body never yields
//! `NeedMore`. Requests whose deciding rule reads only the head never wait for the body;
//! when [`RuleSet::needs_body`] is false no request does. The body handed over must be
//! de-chunked and contiguous; a `Decision` borrows the rule set and the state, so copy
//! what you need out of it before the next evaluation. Apply the [`SetHeaders`] edits to
//! the forwarded head (rule conditions never see them) and stickiness per [`Sticky`].
//!
//! # Allocation
//!
//! Evaluation allocates nothing once a worker's [`EvalState`] buffers have grown to fit,
//! except that an XML value with entity references is unescaped into a fresh string and a
//! [`Trace`] allocates freely. (JSON values, escapes included, go into reused buffers.)
//!
//! # Layout
//!
//! Front end: `lexer` → `parser` → `ast` (syntax tree, pretty-printer) → `check`
//! (conditions) and `lower` (rules, actions) → `ir` (checked program) → `reach` (can-never-
//! fire warnings); `diag` holds diagnostics. Back end: `compile` (per-field regex set,
//! Aho-Corasick and equality table; the rule index), `regexset`, `ruleset` (the public type),
//! `eval` (the walk, outcome types), `cond` (three-valued conditions, lazy fetches),
//! `fields` (head fields), `form` (urlencoded), `body` (where the document is) + `xml` +
//! `markup` (XML tag paths, one streaming pass), `json` + `jsonread` (JSON paths, one
//! streaming pass; `jsonpath` parses their text), `pathstate` (what both scans know of a
//! path), `trace`, `bits`; `request` (the request trait). Tests: `src/tests/` (unit,
//! property; serde_json and quick-xml as references) and `tests/` (the paper's rules end to
//! end).

mod ast;
mod bits;
mod body;
mod check;
mod compile;
mod cond;
mod diag;
mod eval;
mod fields;
mod form;
mod ir;
mod json;
mod jsonpath;
mod jsonread;
mod lexer;
mod lower;
mod markup;
mod parser;
mod pathstate;
mod proto;
mod reach;
mod regexset;
mod request;
mod ruleset;
mod trace;
mod xml;

#[cfg(test)]
mod tests;

pub use diag::{Diagnostic, Diagnostics, Severity};
pub use eval::{Action, Decision, EvalState, Outcome, SetHeaders};
pub use proto::{ConnectionRequest, ProtoField};
pub use request::{Body, OwnedRequest, Request, RequestError};
pub use ruleset::{CompileOptions, RuleSet};
pub use trace::{Trace, TraceRule, TraceTest, Truth};

/// The body cap the issue prescribes when the configuration sets none: a request whose
/// rules still need body past this many bytes is answered 413.
pub const DEFAULT_BODY_CAP: usize = 1 << 20;

/// Stickiness of a `routeTo` (seed 000 §5.2); the proxy implements it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sticky {
    /// `STICKY_IP_PORT`: the rest of this client connection goes to the same server
    /// without rule matching.
    IpPort,
    /// `STICKY_IP`: requests from this client IP, on any connection, go to the same
    /// server for a configurable time without rule matching.
    Ip,
    /// `NONSTICKY` (the default): every request is matched.
    Off,
}

impl Sticky {
    /// The rule language's keyword for it.
    pub fn keyword(self) -> &'static str {
        match self {
            Sticky::IpPort => "STICKY_IP_PORT",
            Sticky::Ip => "STICKY_IP",
            Sticky::Off => "NONSTICKY",
        }
    }
}
