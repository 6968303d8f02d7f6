//! Compiler: the checked program → per-field automata and a rule index.
//!
//! Per field ("fetch"), every indexed test is answered in one pass over the value: all
//! `match` regexes form one regex set (`regexset.rs`: regex-automata's lazy DFA, searched
//! for every pattern at once), all `contains`/`prefix`/`suffix` literals one Aho-Corasick automaton,
//! and all exact equalities one hash table. Atoms are renumbered so each field's indexed
//! atoms are contiguous (its result bits are cleared and set as one range).
//!
//! Rule index: a rule without `else` whose condition implies an indexed test on one field
//! (its "guard": an atom of an `&&`, or a test of every `||` branch on the same field) can
//! only fire when one of its guard atoms is true. The evaluator starts from the unguarded
//! rules, and when it reaches the first rule guarded by a field it computes that field and
//! adds exactly the rules whose guards matched, so cost follows the rules that can fire,
//! not the rule count.

use std::collections::HashMap;
use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind as AcKind};

use crate::bits::Candidates;
use crate::ir::{Atom, Cond, Ir, SetKind};
use crate::regexset::RegexSet;

/// The automata answering one field's indexed tests.
#[derive(Debug, Default)]
pub(crate) struct FetchPlan {
    /// The field's indexed atoms (after renumbering).
    pub atoms: Range<u32>,
    pub regex: Option<RegexSet>,
    /// Regex pattern id → atom.
    pub regex_atoms: Vec<u32>,
    pub ac: Option<AhoCorasick>,
    /// AC pattern id → (atom, test).
    pub ac_atoms: Vec<Vec<(u32, SetKind)>>,
    pub eq: HashMap<Box<[u8]>, u32>,
    /// contains/prefix/suffix with an empty string: true for any present value.
    pub always: Vec<u32>,
    /// Rules guarded by this field, ascending.
    pub guarded: Vec<u32>,
}

/// The rule index (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Index {
    /// Rules evaluated whatever the fields hold.
    pub unguarded: Candidates,
    /// Atom → the rules it guards.
    pub atom_rules: Vec<Vec<u32>>,
    /// (first guarded rule, fetch), ascending: where each field must be computed.
    pub activations: Vec<(u32, u32)>,
}

/// A set too large for the regex engine's limits: (fetch, engine message).
pub(crate) struct TooBig(pub u32, pub String);

pub(crate) fn renumber_atoms(ir: &mut Ir) {
    let n = ir.atoms.len();
    let mut order: Vec<u32> = (0..n as u32).collect();
    // Indexed atoms first, grouped by field; the sort is stable so ids stay in source order.
    order.sort_by_key(|&a| ir.atoms[a as usize].set_fetch().unwrap_or(u32::MAX));
    let mut new_id = vec![0u32; n];
    for (new, &old) in order.iter().enumerate() {
        new_id[old as usize] = new as u32;
    }
    ir.atoms = order.iter().map(|&a| ir.atoms[a as usize].clone()).collect();
    ir.atom_text = order.iter().map(|&a| ir.atom_text[a as usize].clone()).collect();
    for rule in &mut ir.rules {
        remap(&mut rule.cond, &new_id);
    }
}

fn remap(c: &mut Cond, new_id: &[u32]) {
    match c {
        Cond::Atom(a) => *a = new_id[*a as usize],
        Cond::Not(inner) => remap(inner, new_id),
        Cond::And(items) | Cond::Or(items) => items.iter_mut().for_each(|i| remap(i, new_id)),
        Cond::Const(_) => {}
    }
}

/// A field's indexed tests, sorted by kind: (regexes, distinct literals).
type Sorted<'a> = (Vec<&'a str>, Vec<&'a str>);

pub(crate) fn build_plans(ir: &Ir) -> Result<Vec<FetchPlan>, TooBig> {
    let mut plans: Vec<FetchPlan> = (0..ir.fetches.len()).map(|_| FetchPlan::default()).collect();
    let mut sorted: Vec<Sorted<'_>> = vec![(Vec::new(), Vec::new()); ir.fetches.len()];
    let mut lit_ids: Vec<HashMap<&str, usize>> = vec![HashMap::new(); ir.fetches.len()];
    for (id, atom) in ir.atoms.iter().enumerate() {
        let Atom::Set { fetch, kind, lit } = atom else { continue };
        let f = *fetch as usize;
        add_atom(&mut plans[f], &mut sorted[f], &mut lit_ids[f], id as u32, *kind, lit);
    }
    for (f, (plan, (regexes, literals))) in plans.iter_mut().zip(&sorted).enumerate() {
        if !regexes.is_empty() {
            plan.regex = Some(RegexSet::new(regexes).map_err(|e| TooBig(f as u32, e))?);
        }
        if !literals.is_empty() {
            let ac = AhoCorasickBuilder::new().match_kind(AcKind::Standard).build(literals);
            plan.ac = Some(ac.map_err(|e| TooBig(f as u32, e.to_string()))?);
        }
    }
    Ok(plans)
}

/// Files indexed atom `id` with its field's regexes, literals or equality table.
fn add_atom<'a>(
    plan: &mut FetchPlan,
    (regexes, literals): &mut Sorted<'a>,
    lit_ids: &mut HashMap<&'a str, usize>,
    id: u32,
    kind: SetKind,
    lit: &'a str,
) {
    if plan.atoms.is_empty() {
        plan.atoms = id..id;
    }
    plan.atoms.end = id + 1;
    match kind {
        SetKind::Match => {
            regexes.push(lit);
            plan.regex_atoms.push(id);
        }
        SetKind::Eq => {
            plan.eq.insert(lit.as_bytes().into(), id);
        }
        _ if lit.is_empty() => plan.always.push(id),
        _ => {
            let next = literals.len();
            let pid = *lit_ids.entry(lit).or_insert(next);
            if pid == next {
                literals.push(lit);
                plan.ac_atoms.push(Vec::new());
            }
            plan.ac_atoms[pid].push((id, kind));
        }
    }
}

/// Indexed atoms a condition implies: if none of them holds (or is unknown), the
/// condition is false. Atoms may be on different fields.
fn guard(c: &Cond, ir: &Ir) -> Option<Vec<u32>> {
    match c {
        Cond::Atom(a) => ir.atoms[*a as usize].set_fetch().map(|_| vec![*a]),
        // Any conjunct's guard will do: prefer head fields (a body field may make the rule
        // wait for the body), then fewer atoms.
        Cond::And(items) => items.iter().filter_map(|i| guard(i, ir)).min_by_key(|g| {
            let reads_body = g.iter().any(|&a| {
                ir.atoms[a as usize].set_fetch().is_some_and(|f| ir.fetches[f as usize].reads_body())
            });
            (reads_body, g.len())
        }),
        Cond::Or(items) => {
            let mut all = Vec::new();
            for item in items {
                all.extend(guard(item, ir)?);
            }
            Some(all)
        }
        Cond::Not(_) | Cond::Const(_) => None,
    }
}

pub(crate) fn build_index(ir: &Ir, plans: &mut [FetchPlan]) -> Index {
    let n = ir.rules.len();
    let mut index = Index {
        unguarded: Candidates::new(n),
        atom_rules: vec![Vec::new(); ir.atoms.len()],
        activations: Vec::new(),
    };
    for (r, rule) in ir.rules.iter().enumerate() {
        // A rule with an else branch acts when its condition is false, so it is always tried.
        let g = if rule.els.is_none() { guard(&rule.cond, ir) } else { None };
        match g {
            Some(atoms) => {
                for a in atoms {
                    index.atom_rules[a as usize].push(r as u32);
                    let f = ir.atoms[a as usize].set_fetch().unwrap_or_default() as usize;
                    // Every field the guard reads is computed before the rule is passed.
                    if plans[f].guarded.last() != Some(&(r as u32)) {
                        plans[f].guarded.push(r as u32);
                    }
                }
            }
            None => index.unguarded.set(r),
        }
    }
    for rules in &mut index.atom_rules {
        rules.dedup();
    }
    for (f, plan) in plans.iter().enumerate() {
        if let Some(&first) = plan.guarded.first() {
            index.activations.push((first, f as u32));
        }
    }
    index.activations.sort_unstable();
    index
}
