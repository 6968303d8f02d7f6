//! Warnings for rules that can never fire: ones no path reaches (an earlier rule with a
//! literal `true` condition always ends evaluation or jumps past them), and ones shadowed by
//! an earlier rule with the same condition that always ends evaluation. Conditions read
//! the request as received (setHeader edits are applied only when forwarding), so equal
//! conditions always agree.

use std::collections::HashMap;

use crate::ast::Program;
use crate::diag::Reporter;
use crate::ir::{Cond, End, Ir, LBlock, LRule};

/// Where control can go after a rule: `None` = evaluation ended.
fn exits(rule: &LRule, index: usize) -> Vec<Option<usize>> {
    let next = |b: &LBlock| match b.end {
        End::Next => Some(index + 1),
        End::Goto(t) => Some(t as usize),
        End::Final(_) => None,
    };
    let on_false = rule.els.as_ref().map_or(Some(index + 1), next);
    match rule.cond {
        Cond::Const(true) => vec![next(&rule.then)],
        Cond::Const(false) => vec![on_false],
        _ => vec![next(&rule.then), on_false],
    }
}

/// What the walk has seen so far: which rules are reachable, which reachable rules end
/// evaluation in their then-branch (by condition), and which reachable rules jump where.
struct Walk {
    reachable: Vec<bool>,
    enders: HashMap<String, Vec<usize>>,
    gotos: Vec<(usize, usize)>,
}

pub(crate) fn warn(prog: &Program, ir: &Ir, rep: &mut Reporter<'_>) {
    let n = ir.rules.len();
    let mut walk = Walk { reachable: vec![false; n + 1], enders: HashMap::new(), gotos: Vec::new() };
    walk.reachable[0] = true;
    for (i, rule) in ir.rules.iter().enumerate() {
        if !walk.reachable[i] {
            let why = blocker(ir, &walk.reachable, i);
            let message = format!("rule '{}' can never fire: no path reaches it", rule.label);
            rep.warning(prog.rules[i].label.span, message, why);
            continue;
        }
        // Conditions hold floats, so they are keyed by their (deterministic) debug text.
        let key = format!("{:?}", rule.cond);
        if !matches!(rule.cond, Cond::Const(_)) {
            shadowed(prog, ir, &walk, &key, i, rep);
        }
        for target in exits(rule, i).into_iter().flatten() {
            walk.reachable[target.min(n)] = true;
        }
        for b in std::iter::once(&rule.then).chain(rule.els.as_ref()) {
            if let End::Goto(t) = b.end {
                walk.gotos.push((i, t as usize));
            }
        }
        if matches!(rule.then.end, End::Final(_)) {
            walk.enders.entry(key).or_default().push(i);
        }
    }
}

/// The last reachable rule before `i` that never falls through to its successor.
fn blocker(ir: &Ir, reachable: &[bool], i: usize) -> Option<String> {
    let k = (0..i).rev().find(|&k| reachable[k])?;
    let rule = &ir.rules[k];
    let how = match rule.then.end {
        End::Goto(t) => format!("always jumps past it (goto {})", ir.rules[t as usize].label),
        _ => "always ends evaluation".to_string(),
    };
    Some(format!("'{}' (line {}) has a condition that is always true and {how}", rule.label, rule.line))
}

/// Warns when an earlier rule on every path to `j` has the same condition and its
/// then-branch always ends evaluation: `j`'s then-branch can then never run.
fn shadowed(prog: &Program, ir: &Ir, walk: &Walk, key: &str, j: usize, rep: &mut Reporter<'_>) {
    let rule = &ir.rules[j];
    let candidates = walk.enders.get(key).map_or(&[][..], Vec::as_slice);
    let Some(&i) =
        candidates.iter().find(|&&i| ir.rules[i].cond == rule.cond && dominates(&walk.gotos, i, j))
    else {
        return;
    };
    let first = &ir.rules[i];
    let hint = Some(format!(
        "'{}' (line {}) has the same condition and always ends evaluation first",
        first.label, first.line
    ));
    let message = match rule.els {
        None => format!("rule '{}' can never fire: it is shadowed by '{}'", rule.label, first.label),
        Some(_) => format!(
            "the then-branch of rule '{}' can never run: it is shadowed by '{}'",
            rule.label, first.label
        ),
    };
    rep.warning(prog.rules[j].label.span, message, hint);
}

/// No reachable rule before `i` jumps to a rule in `i+1..=j`, so every path to `j` passes `i`.
fn dominates(gotos: &[(usize, usize)], i: usize, j: usize) -> bool {
    gotos.iter().all(|&(k, t)| k >= i || !(i + 1..=j).contains(&t))
}
