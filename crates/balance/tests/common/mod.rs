//! Fixtures shared by the property tests: telling a scheduler about a group.
#![allow(dead_code)] // each test file uses its own subset

use cswitch_balance::{Candidate, Member, Params, Scheduler, SchedulerKind};

/// A scheduler of `kind` with default parameters, told about `group` (servers `s0`, `s1`, …).
pub fn build(kind: SchedulerKind, group: &[Candidate]) -> Box<dyn Scheduler> {
    let mut s = kind.build(&Params::default());
    rebuild(&mut *s, group);
    s
}

/// Tells `s` that the group is now `group`: names by position, weights as given.
pub fn rebuild(s: &mut dyn Scheduler, group: &[Candidate]) {
    let names: Vec<String> = (0..group.len()).map(|i| format!("s{i}")).collect();
    let members: Vec<Member> = group
        .iter()
        .zip(&names)
        .map(|(c, name)| Member { name, weight: c.weight, maxconn: c.maxconn })
        .collect();
    s.rebuild(&members);
}

/// A server every scheduler may pick: usable and with a non-zero weight.
pub fn eligible(c: &Candidate) -> bool {
    c.usable && c.weight > 0
}
