//! Evaluating conditions for one request: fields are fetched lazily (once each), a field's
//! automata run when it is first fetched and answer all of its indexed tests at once, and
//! the logic is three-valued so a test on body bytes not yet received is "unknown" rather
//! than false.

use std::cmp::Ordering;
use std::net::IpAddr;

use crate::bits;
use crate::check::mask;
use crate::compile::FetchPlan;
use crate::fields::{self, Val};
use crate::ir::{Atom, Cond, Fetch, FetchName, Num, Operand, SetKind};
use crate::json::Source;
use crate::pathstate::PathState;
use crate::request::Request;
use crate::trace::{quote, TraceTest, Truth};
use crate::{EvalState, RuleSet};

/// One evaluation in progress.
pub(crate) struct Ctx<'a, R: Request> {
    pub rs: &'a RuleSet,
    pub st: &'a mut EvalState,
    pub req: &'a R,
}

/// An operand's value.
enum V<'b> {
    Absent,
    Unknown,
    Bytes(&'b [u8], Option<Num>),
}

impl<R: Request> Ctx<'_, R> {
    pub fn cond(&mut self, c: &Cond, tests: &mut Option<&mut Vec<TraceTest>>) -> Truth {
        match c {
            Cond::Const(b) => Truth::from_bool(*b),
            Cond::Not(inner) => self.cond(inner, tests).not(),
            Cond::And(items) => self.fold(items, tests, Truth::False),
            Cond::Or(items) => self.fold(items, tests, Truth::True),
            Cond::Atom(a) => {
                let t = self.atom(*a);
                if let Some(tests) = tests {
                    tests.push(self.trace_test(*a, t));
                }
                t
            }
        }
    }

    /// `&&` (decisive = False) or `||` (decisive = True), Kleene style: a decisive item
    /// settles it even if an earlier one is unknown.
    fn fold(&mut self, items: &[Cond], tests: &mut Option<&mut Vec<TraceTest>>, decisive: Truth) -> Truth {
        let mut unknown = false;
        for item in items {
            match self.cond(item, tests) {
                t if t == decisive => return t,
                Truth::Unknown => unknown = true,
                _ => {}
            }
        }
        if unknown {
            Truth::Unknown
        } else {
            decisive.not()
        }
    }

    fn atom(&mut self, a: u32) -> Truth {
        match &self.rs.ir.atoms[a as usize] {
            Atom::Set { fetch, .. } => match self.fetch(*fetch) {
                Val::Unknown => Truth::Unknown,
                Val::Absent => Truth::False,
                _ => Truth::from_bool(bits::get(&self.st.atom_bits, a as usize)),
            },
            Atom::Exists(f) => match self.fetch(*f) {
                Val::Unknown => Truth::Unknown,
                Val::Absent => Truth::False,
                _ => Truth::True,
            },
            Atom::InNet { fetch, net, prefix } => match self.fetch(*fetch) {
                Val::Unknown => Truth::Unknown,
                Val::Absent => Truth::False,
                v => {
                    let ip = std::str::from_utf8(self.bytes(v)).ok().and_then(|s| s.parse::<IpAddr>().ok());
                    Truth::from_bool(ip.is_some_and(|ip| mask(ip, *prefix) == *net))
                }
            },
            Atom::Cmp { op, l, r } => {
                self.prepare(l);
                self.prepare(r);
                let ordering = compare(self.value(l), self.value(r));
                ordering.map_or(Truth::False, |o| o.map_or(Truth::Unknown, |o| Truth::from_bool(op.holds(o))))
            }
        }
    }

    /// Fetches every field an operand reads, so `value` can then borrow immutably.
    fn prepare(&mut self, op: &Operand) {
        match op {
            Operand::Fetch(f) => {
                self.fetch(*f);
            }
            Operand::Strcmp(a, b) => {
                self.prepare(a);
                self.prepare(b);
            }
            Operand::Lit(_) => {}
        }
    }

    fn value<'b>(&'b self, op: &'b Operand) -> V<'b> {
        match op {
            Operand::Lit(lit) => V::Bytes(&lit.bytes, lit.num),
            Operand::Fetch(f) => match self.st.vals[*f as usize] {
                Val::Absent => V::Absent,
                Val::Unknown => V::Unknown,
                v => {
                    let b = self.bytes(v);
                    let num = if matches!(v, Val::Json(_)) { Num::parse_json(b) } else { Num::parse(b) };
                    V::Bytes(b, num)
                }
            },
            Operand::Strcmp(a, b) => match (self.value(a), self.value(b)) {
                (V::Absent, _) | (_, V::Absent) => V::Absent,
                (V::Unknown, _) | (_, V::Unknown) => V::Unknown,
                (V::Bytes(a, _), V::Bytes(b, _)) => {
                    let (text, n): (&[u8], i64) = match a.cmp(b) {
                        Ordering::Less => (b"-1", -1),
                        Ordering::Equal => (b"0", 0),
                        Ordering::Greater => (b"1", 1),
                    };
                    V::Bytes(text, Some(Num::Int(n)))
                }
            },
        }
    }

    pub fn bytes(&self, v: Val) -> &[u8] {
        val_bytes(&self.st.arena, &self.st.xml.values, &self.st.json.values, v)
    }

    /// The value of fetch `f`, computing it (and its automata) on first use.
    pub fn fetch(&mut self, f: u32) -> Val {
        let i = f as usize;
        if self.st.stamp[i] == self.st.generation {
            return self.st.vals[i];
        }
        let v = match &self.rs.ir.fetches[i] {
            Fetch::Xml(p) => self.xml(*p),
            Fetch::Json(p) => self.json(*p),
            other => fields::read(other, self.req, &mut self.st.arena),
        };
        self.st.vals[i] = v;
        self.st.stamp[i] = self.st.generation;
        self.activate(f, v);
        v
    }

    fn xml(&mut self, path: u32) -> Val {
        if self.st.xml_stamp != self.st.generation {
            self.st.xml_stamp = self.st.generation;
            crate::body::scan_xml(self.rs, self.st, self.req);
        }
        path_val(self.st.xml.states.get(path as usize), Val::Xml(path))
    }

    fn json(&mut self, path: u32) -> Val {
        if self.st.json_stamp != self.st.generation {
            self.st.json_stamp = self.st.generation;
            crate::body::scan_json(self.rs, self.st, self.req);
        }
        path_val(self.st.json.states.get(path as usize), Val::Json(path))
    }

    /// Runs the field's automata, records which of its tests hold, and adds the rules
    /// those tests guard to the candidates.
    fn activate(&mut self, f: u32, v: Val) {
        let plan: &FetchPlan = &self.rs.plans[f as usize];
        let (start, end) = (plan.atoms.start as usize, plan.atoms.end as usize);
        bits::clear_range(&mut self.st.atom_bits, start, end);
        match v {
            Val::Absent => return,
            Val::Unknown => {
                for &r in &plan.guarded {
                    self.st.cand.set(r as usize);
                }
                return;
            }
            _ => {}
        }
        let st = &mut *self.st;
        let hay = val_bytes(&st.arena, &st.xml.values, &st.json.values, v);
        run_automata(plan, f as usize, hay, &mut st.atom_bits, &mut st.regex_scratch);
        let mut a = start;
        while let Some(hit) = bits::next_set_below(&st.atom_bits, a, end) {
            for &r in &self.rs.index.atom_rules[hit] {
                st.cand.set(r as usize);
            }
            a = hit + 1;
        }
    }

    fn trace_test(&mut self, a: u32, result: Truth) -> TraceTest {
        let mut fetches = Vec::new();
        collect_fetches(&self.rs.ir.atoms[a as usize], &mut fetches);
        let saw = fetches
            .into_iter()
            .map(|f| {
                let name = FetchName(&self.rs.ir.fetches[f as usize], &self.rs.ir).to_string();
                match self.fetch(f) {
                    Val::Absent => format!("{name} absent{}", self.absent_note(f)),
                    Val::Unknown => format!("{name} not received yet"),
                    v => format!("{name} = {}", quote(self.bytes(v))),
                }
            })
            .collect();
        TraceTest { test: self.rs.ir.atom_text[a as usize].clone(), saw, result }
    }

    /// Why a JSON path is absent when the scan did not read the body through (traces).
    fn absent_note(&self, f: u32) -> String {
        if !matches!(self.rs.ir.fetches[f as usize], Fetch::Json(_)) {
            return String::new();
        }
        match self.st.json.source {
            Source::Json => String::new(),
            Source::NotJson => " (not a JSON body: Content-Type is not application/json or …+json)".into(),
            Source::Malformed(at) => format!(" (the body is not valid JSON at byte {at})"),
        }
    }
}

/// Where a fetched value's bytes are. The state's parts come apart so the automata can
/// set result bits in the state while they read a value held in it.
fn val_bytes<'s>(arena: &'s [u8], xml: &'s [Vec<u8>], json: &'s [Vec<u8>], v: Val) -> &'s [u8] {
    let body = |values: &'s [Vec<u8>], p: u32| values.get(p as usize).map_or(&[][..], Vec::as_slice);
    match v {
        Val::Arena(start, len) => arena.get(start as usize..(start + len) as usize).unwrap_or_default(),
        Val::Xml(p) => body(xml, p),
        Val::Json(p) => body(json, p),
        Val::Absent | Val::Unknown => &[],
    }
}

/// A body path's value from what its scan knows.
fn path_val(state: Option<&PathState>, found: Val) -> Val {
    match state {
        Some(PathState::Found) => found,
        Some(PathState::Absent) | None => Val::Absent,
        Some(PathState::Pending) => Val::Unknown,
    }
}

fn collect_fetches(atom: &Atom, out: &mut Vec<u32>) {
    fn operand(op: &Operand, out: &mut Vec<u32>) {
        match op {
            Operand::Fetch(f) if !out.contains(f) => out.push(*f),
            Operand::Strcmp(a, b) => {
                operand(a, out);
                operand(b, out);
            }
            _ => {}
        }
    }
    match atom {
        Atom::Set { fetch, .. } | Atom::Exists(fetch) | Atom::InNet { fetch, .. } => out.push(*fetch),
        Atom::Cmp { l, r, .. } => {
            operand(l, out);
            operand(r, out);
        }
    }
}

/// Per-worker regex search state, per field.
pub(crate) type RegexScratch = Vec<Option<crate::regexset::Scratch>>;

/// One pass of each automaton over the value, setting the bit of every test that holds.
fn run_automata(plan: &FetchPlan, f: usize, hay: &[u8], atom_bits: &mut [u64], scratch: &mut RegexScratch) {
    for &a in &plan.always {
        bits::set(atom_bits, a as usize);
    }
    if let Some(&a) = plan.eq.get(hay) {
        bits::set(atom_bits, a as usize);
    }
    if let (Some(re), Some(Some(scratch))) = (&plan.regex, scratch.get_mut(f)) {
        re.matches(scratch, hay, |p| bits::set(atom_bits, plan.regex_atoms[p] as usize));
    }
    if let Some(ac) = &plan.ac {
        for m in ac.find_overlapping_iter(hay) {
            for &(a, kind) in &plan.ac_atoms[m.pattern().as_usize()] {
                let holds = match kind {
                    SetKind::Prefix => m.start() == 0,
                    SetKind::Suffix => m.end() == hay.len(),
                    _ => true,
                };
                if holds {
                    bits::set(atom_bits, a as usize);
                }
            }
        }
    }
}

/// Compares two values: `None` = false (a side is absent), `Some(None)` = unknown.
/// Numbers compare as numbers when both sides are numbers, otherwise bytes compare.
fn compare(l: V<'_>, r: V<'_>) -> Option<Option<Ordering>> {
    match (l, r) {
        (V::Absent, _) | (_, V::Absent) => None,
        (V::Unknown, _) | (_, V::Unknown) => Some(None),
        (V::Bytes(_, Some(na)), V::Bytes(_, Some(nb))) => Some(Some(na.cmp(nb))),
        (V::Bytes(a, _), V::Bytes(b, _)) => Some(Some(a.cmp(b))),
    }
}
