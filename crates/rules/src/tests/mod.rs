//! Unit and property tests (private access: the AST round trip needs it).

mod check;
mod eval;
mod json;
mod json_props;
mod props;
mod proto;
mod xml;

use std::net::SocketAddr;
use std::path::Path;

use crate::{Action, EvalState, Outcome, OwnedRequest, RuleSet, Trace};

pub(crate) const GROUPS: &[&str] = &["web", "api", "static", "images", "eu.web-1"];

pub(crate) fn compile(src: &str) -> RuleSet {
    match RuleSet::compile(src, Path::new("t.rules"), GROUPS) {
        Ok(rs) => rs,
        Err(e) => panic!("does not compile:\n{e}"),
    }
}

/// The diagnostics text of a source that must fail.
pub(crate) fn errors(src: &str) -> String {
    match RuleSet::compile(src, Path::new("t.rules"), GROUPS) {
        Ok(_) => panic!("compiled but should not:\n{src}"),
        Err(e) => e.to_string(),
    }
}

pub(crate) fn addr(s: &str) -> SocketAddr {
    s.parse().expect("test address")
}

pub(crate) fn request(raw: &str) -> OwnedRequest {
    OwnedRequest::parse(raw.as_bytes(), addr("192.0.2.10:40000"), addr("198.51.100.1:80"))
        .expect("test request")
}

/// A short text for a decision: "label:action", "-:default" or "more".
pub(crate) fn outcome(rs: &RuleSet, req: &impl crate::Request) -> String {
    let mut st = EvalState::new();
    let fast = describe(rs, rs.evaluate(req, &mut st, None));
    let mut trace = Trace::new();
    let mut st2 = EvalState::new();
    let traced = describe(rs, rs.evaluate(req, &mut st2, Some(&mut trace)));
    assert_eq!(fast, traced, "indexed and traced walks disagree:\n{trace}");
    fast
}

pub(crate) fn describe(rs: &RuleSet, out: Outcome<'_>) -> String {
    let d = match out {
        Outcome::NeedMore => return "more".into(),
        Outcome::Decided(d) => d,
    };
    let label = d.rule.map_or("-", |(_, l)| l);
    let action = match d.action {
        Action::Route { group, sticky } => format!("{}/{sticky:?}", rs.groups()[group]),
        Action::Deny { status } => format!("deny {status}"),
        Action::Drop => "drop".into(),
        Action::Redirect { status, location } => format!("redirect {status} {location}"),
        Action::Default => "default".into(),
    };
    let headers: Vec<String> = d.set_headers.iter().map(|(n, v)| format!("+{n}={v}")).collect();
    format!("{label}:{action}{}", headers.concat())
}
