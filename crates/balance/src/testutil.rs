//! Fixtures the unit tests of the schedulers share.

use crate::{Candidate, Member};

/// A usable idle server of weight 1.
pub(crate) fn up() -> Candidate {
    Candidate { weight: 1, active: 0, usable: true, ..Candidate::default() }
}

/// Members of weight 1 with these names.
pub(crate) fn members<'a>(names: &[&'a str]) -> Vec<Member<'a>> {
    names.iter().map(|&name| Member { name, weight: 1, maxconn: 0 }).collect()
}
