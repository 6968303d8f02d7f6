//! All `match` regexes of one field as one automaton, searched once per request.
//!
//! The lazy DFA is asked for every match directly, one pattern id at a time, so a request
//! that matches one pattern of 2,500 costs one report, not a walk over 2,500 flags (which
//! is what reading regex-automata's `PatternSet` costs). When the lazy DFA cannot answer —
//! it gives up on a thrashing cache, or meets a byte it cannot handle under a Unicode word
//! boundary — the meta regex (which falls back to an NFA) answers instead.

use regex_automata::hybrid::dfa::{self, OverlappingState, DFA};
use regex_automata::meta::{self, Regex};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::{Input, MatchKind, PatternSet};

use crate::check::regex_syntax_config;

/// A field's regex set.
#[derive(Debug)]
pub(crate) struct RegexSet {
    meta: Regex,
    /// `None` when the patterns need what the lazy DFA lacks; `meta` then does all.
    dfa: Option<DFA>,
}

/// Per-worker search state for one [`RegexSet`].
#[derive(Debug)]
pub(crate) struct Scratch {
    meta: meta::Cache,
    patset: PatternSet,
    dfa: Option<dfa::Cache>,
}

impl RegexSet {
    pub fn new(patterns: &[&str]) -> Result<RegexSet, String> {
        // Large sets get more room than the defaults (10 MB NFA, 2 MB lazy-DFA cache per
        // worker) so thousands of patterns stay on the DFA path.
        let big = patterns.len() > 256;
        let nfa_limit = Some(if big { 256 << 20 } else { 10 << 20 });
        let cache = if big { 32 << 20 } else { 2 << 20 };
        let config = meta::Config::new()
            .match_kind(MatchKind::All)
            .utf8_empty(false)
            .nfa_size_limit(nfa_limit)
            .hybrid_cache_capacity(cache)
            .which_captures(WhichCaptures::None);
        let meta = Regex::builder()
            .configure(config)
            .syntax(regex_syntax_config())
            .build_many(patterns)
            .map_err(|e| e.to_string())?;
        let dfa = DFA::builder()
            .configure(
                DFA::config().match_kind(MatchKind::All).cache_capacity(cache).unicode_word_boundary(true),
            )
            .syntax(regex_syntax_config())
            .thompson(
                thompson::Config::new()
                    .which_captures(WhichCaptures::None)
                    .nfa_size_limit(nfa_limit)
                    .utf8(false),
            )
            .build_many(patterns)
            .ok();
        Ok(RegexSet { meta, dfa })
    }

    pub fn scratch(&self) -> Scratch {
        Scratch {
            meta: self.meta.create_cache(),
            patset: PatternSet::new(self.meta.pattern_len()),
            dfa: self.dfa.as_ref().map(DFA::create_cache),
        }
    }

    /// Calls `hit` with the index of every pattern that matches somewhere in `hay` (a
    /// pattern may be reported more than once).
    pub fn matches(&self, scratch: &mut Scratch, hay: &[u8], mut hit: impl FnMut(usize)) {
        let input = Input::new(hay);
        if let (Some(dfa), Some(cache)) = (&self.dfa, &mut scratch.dfa) {
            let mut state = OverlappingState::start();
            let answered = loop {
                if dfa.try_search_overlapping_fwd(cache, &input, &mut state).is_err() {
                    break false;
                }
                match state.get_match() {
                    Some(m) => hit(m.pattern().as_usize()),
                    None => break true,
                }
            };
            if answered {
                return;
            }
        }
        let patset = &mut scratch.patset;
        self.meta.which_overlapping_matches_with(&mut scratch.meta, &input, patset);
        let n = patset.len();
        if n > 0 {
            patset.iter().take(n).for_each(|p| hit(p.as_usize()));
            patset.clear();
        }
    }
}
