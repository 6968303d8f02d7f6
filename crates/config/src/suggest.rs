//! "Did you mean …?" for misspelt keys and names.
//!
//! A Levenshtein distance (with adjacent swaps): the candidate lists are a dozen short words, so the
//! quadratic table costs nothing, and no crate is worth a dependency for twenty lines.

/// The candidate closest to `word`, if it is close enough to be a likely typo.
pub(crate) fn did_you_mean<'c>(word: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let word = word.to_lowercase();
    // Short words are one typo away from everything short, so they get a tighter bound.
    let limit = if word.chars().count() <= 3 { 1 } else { 2 };
    let candidates: Vec<&'c str> = candidates.into_iter().collect();
    let close = candidates
        .iter()
        .map(|c| (levenshtein(&word, &c.to_lowercase()), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c);
    // A truncated key ("grace" for "grace_period") is far in edits but plainly meant.
    close.or_else(|| {
        let long_enough = word.len() >= 4;
        candidates.into_iter().find(|c| long_enough && c.to_lowercase().starts_with(&word))
    })
}

/// `did you mean `x`?` when a candidate is close to `word`.
pub(crate) fn hint<'c>(word: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<String> {
    did_you_mean(word, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// Edits (insert, delete, substitute one character, swap two adjacent ones) that turn `a`
/// into `b`: the optimal-string-alignment distance, so "wcl" is one typo from "wlc".
pub(crate) fn levenshtein(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let width = b.len() + 1;
    let mut d: Vec<usize> = vec![0; (a.len() + 1) * width];
    for (i, row) in d.chunks_mut(width).enumerate() {
        row[0] = i;
    }
    for (j, cell) in d.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::{did_you_mean, levenshtein};

    #[test]
    fn distances() {
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("schedular", "scheduler"), 1);
        assert_eq!(levenshtein("weigth", "weight"), 1);
        assert_eq!(levenshtein("wcl", "wlc"), 1);
    }

    #[test]
    fn suggests_only_close_candidates() {
        let keys = ["name", "scheduler", "servers"];
        assert_eq!(did_you_mean("shedular", keys), Some("scheduler"));
        assert_eq!(did_you_mean("server", keys), Some("servers"));
        assert_eq!(did_you_mean("backends", keys), None);
        assert_eq!(did_you_mean("WLC", ["rr", "wlc"]), Some("wlc"));
        assert_eq!(did_you_mean("wcl", ["rr", "wlc"]), Some("wlc"));
        assert_eq!(did_you_mean("xy", ["rr", "lc"]), None);
        assert_eq!(did_you_mean("grace", ["workers", "grace_period"]), Some("grace_period"));
        assert_eq!(did_you_mean("r", ["rr", "rules"]), Some("rr"));
        assert_eq!(did_you_mean("rul", ["rr", "rules"]), None);
    }
}
