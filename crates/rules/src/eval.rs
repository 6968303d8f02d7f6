//! The evaluator: walks the rules top to bottom, skipping (through the rule index) rules
//! whose guard tests are false, until one routes, denies, drops or redirects. With a
//! trace it tries every rule in order instead, so `explain` shows all of them; both walks
//! decide the same (a property test checks it).

use crate::bits::Candidates;
use crate::cond::Ctx;
use crate::fields::Val;
use crate::ir::{End, Final, LBlock};
use crate::json::JsonScratch;
use crate::request::Request;
use crate::trace::{Trace, TraceRule, Truth};
use crate::xml::XmlScratch;
use crate::{RuleSet, Sticky};

/// Per-worker scratch space, reused across requests so evaluation does not allocate once
/// the buffers have grown to fit. Any `EvalState` works with any [`RuleSet`]: on first
/// use with a rule set (e.g. after a reload) it resizes itself.
#[derive(Debug, Default)]
pub struct EvalState {
    pub(crate) ruleset: u64,
    pub(crate) generation: u32,
    pub(crate) stamp: Vec<u32>,
    pub(crate) vals: Vec<Val>,
    pub(crate) arena: Vec<u8>,
    pub(crate) atom_bits: Vec<u64>,
    pub(crate) cand: Candidates,
    pub(crate) regex_scratch: crate::cond::RegexScratch,
    pub(crate) xml: XmlScratch,
    pub(crate) xml_stamp: u32,
    pub(crate) json: JsonScratch,
    pub(crate) json_stamp: u32,
    pub(crate) form_buf: Vec<u8>,
    pub(crate) headers: Vec<u32>,
}

impl EvalState {
    /// Empty scratch space; it sizes itself on first use.
    pub fn new() -> EvalState {
        EvalState::default()
    }

    /// Starts an evaluation: values of the previous one become stale (by generation, so
    /// nothing proportional to the number of fields is cleared).
    fn begin(&mut self, rs: &RuleSet) {
        if self.ruleset != rs.id {
            self.resize(rs);
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.fill(0);
            self.xml_stamp = 0;
            self.json_stamp = 0;
            self.generation = 1;
        }
        self.arena.clear();
        self.cand.copy_from(&rs.index.unguarded);
        self.headers.clear();
    }

    fn resize(&mut self, rs: &RuleSet) {
        let fetches = rs.ir.fetches.len();
        *self = EvalState {
            ruleset: rs.id,
            stamp: vec![0; fetches],
            vals: vec![Val::Absent; fetches],
            atom_bits: vec![0; rs.ir.atoms.len().div_ceil(64)],
            cand: rs.index.unguarded.clone(),
            regex_scratch: rs.plans.iter().map(|p| p.regex.as_ref().map(|re| re.scratch())).collect(),
            ..std::mem::take(self)
        };
    }
}

/// How a request is answered, when the rules can tell.
#[derive(Debug)]
pub enum Outcome<'a> {
    /// A condition reads body bytes that have not arrived: call again with more body.
    NeedMore,
    /// The rules decided.
    Decided(Decision<'a>),
}

/// The decision of the rules for one request.
#[derive(Debug)]
pub struct Decision<'a> {
    /// The rule whose action decided: (index in file order, label); `None` for `Default`.
    pub rule: Option<(usize, &'a str)>,
    /// What to do with the request.
    pub action: Action<'a>,
    /// setHeader edits from the rules passed on the way, in order: apply them to the
    /// forwarded request (a later edit of the same name replaces an earlier one).
    pub set_headers: SetHeaders<'a>,
}

/// What the rules decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action<'a> {
    /// Send to a server of `groups[group]` (the slice given to `compile`).
    Route {
        /// Index into the compile-time `groups` slice.
        group: usize,
        /// Whether later requests skip the rules.
        sticky: Sticky,
    },
    /// Answer with this status (403 unless the rule said otherwise), then close.
    Deny {
        /// 4xx or 5xx.
        status: u16,
    },
    /// Close the connection without an answer.
    Drop,
    /// Answer with a redirect.
    Redirect {
        /// 301, 302, 303, 307 or 308.
        status: u16,
        /// The Location value.
        location: &'a str,
    },
    /// No rule decided: the listener's default group and its scheduler pick.
    Default,
}

/// A borrowed list of setHeader edits.
#[derive(Clone, Copy, Debug)]
pub struct SetHeaders<'a> {
    table: &'a [(String, String)],
    picked: &'a [u32],
}

impl<'a> SetHeaders<'a> {
    /// The edits, in order, as (name, value).
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let table = self.table;
        self.picked.iter().filter_map(move |&i| table.get(i as usize)).map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// Number of edits.
    pub fn len(&self) -> usize {
        self.picked.len()
    }

    /// True when no setHeader ran.
    pub fn is_empty(&self) -> bool {
        self.picked.is_empty()
    }
}

/// Where the walk goes after a rule.
enum Step {
    Next(usize),
    Done(Option<u32>),
}

impl RuleSet {
    /// Evaluates the rules for one request. Call it once the head is parsed, with the
    /// body bytes received so far; on [`Outcome::NeedMore`] call it again when more body
    /// has arrived (see the crate docs for the policy). `trace`, when given, is cleared
    /// and filled with every rule tried.
    pub fn evaluate<'a>(
        &'a self,
        req: &impl Request,
        state: &'a mut EvalState,
        trace: Option<&mut Trace>,
    ) -> Outcome<'a> {
        state.begin(self);
        let mut ctx = Ctx { rs: self, st: state, req };
        let result = match trace {
            Some(t) => {
                t.clear();
                let r = walk_all(&mut ctx, t);
                t.outcome = self.describe(r);
                r
            }
            None => walk_indexed(&mut ctx),
        };
        let state: &'a EvalState = state;
        let set_headers = SetHeaders { table: &self.ir.set_headers, picked: &state.headers };
        let (rule, fin) = match result {
            None => return Outcome::NeedMore,
            Some(None) => {
                return Outcome::Decided(Decision { rule: None, action: Action::Default, set_headers })
            }
            Some(Some(decided)) => decided,
        };
        let label = self.ir.rules[rule].label.as_str();
        let action = match &self.ir.finals[fin as usize] {
            Final::Route { group, sticky } => Action::Route { group: *group as usize, sticky: *sticky },
            Final::Deny { status } => Action::Deny { status: *status },
            Final::Drop => Action::Drop,
            Final::Redirect { status, location } => Action::Redirect { status: *status, location },
        };
        Outcome::Decided(Decision { rule: Some((rule, label)), action, set_headers })
    }
}

/// `None` = need more; `Some(None)` = default; `Some(Some((rule, final)))` = decided.
type WalkResult = Option<Option<(usize, u32)>>;

fn run_block<R: Request>(ctx: &mut Ctx<'_, R>, block: &LBlock, rule: usize) -> Step {
    ctx.st.headers.extend_from_slice(&block.headers);
    match block.end {
        End::Next => Step::Next(rule + 1),
        End::Goto(t) => Step::Next(t as usize),
        End::Final(f) => Step::Done(Some(f)),
    }
}

/// Runs rule `r` given its condition's truth; `None` when it is unknown.
fn step<R: Request>(ctx: &mut Ctx<'_, R>, r: usize, truth: Truth) -> Option<Step> {
    let rule = &ctx.rs.ir.rules[r];
    Some(match (truth, &rule.els) {
        (Truth::Unknown, _) => return None,
        (Truth::True, _) => run_block(ctx, &rule.then, r),
        (Truth::False, Some(els)) => run_block(ctx, els, r),
        (Truth::False, None) => Step::Next(r + 1),
    })
}

fn walk_indexed<R: Request>(ctx: &mut Ctx<'_, R>) -> WalkResult {
    let n = ctx.rs.ir.rules.len();
    let acts = &ctx.rs.index.activations;
    let (mut i, mut k) = (0, 0);
    loop {
        let mut r = ctx.st.cand.next_set(i).unwrap_or(n);
        // Compute each field before the first rule it guards is passed; that adds the
        // rules whose guards hold (rules guarded by it before `i` were jumped over).
        while k < acts.len() && acts[k].0 as usize <= r {
            ctx.fetch(acts[k].1);
            k += 1;
            r = ctx.st.cand.next_set(i).unwrap_or(n);
        }
        if r >= n {
            return Some(None);
        }
        let cond = &ctx.rs.ir.rules[r].cond;
        let truth = ctx.cond(cond, &mut None);
        match step(ctx, r, truth)? {
            Step::Next(next) => i = next,
            Step::Done(f) => return Some(f.map(|f| (r, f))),
        }
    }
}

fn walk_all<R: Request>(ctx: &mut Ctx<'_, R>, trace: &mut Trace) -> WalkResult {
    let mut i = 0;
    while i < ctx.rs.ir.rules.len() {
        let rule = &ctx.rs.ir.rules[i];
        let mut tests = Vec::new();
        let truth = ctx.cond(&rule.cond, &mut Some(&mut tests));
        let action = ctx.rs.describe_branch(i, truth);
        trace.rules.push(TraceRule {
            label: rule.label.clone(),
            line: rule.line,
            tests,
            result: truth,
            action,
        });
        match step(ctx, i, truth)? {
            Step::Next(next) => i = next,
            Step::Done(f) => return Some(f.map(|f| (i, f))),
        }
    }
    Some(None)
}
