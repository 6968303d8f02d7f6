//! Plain `u64` bitsets for atom results, and a two-level one for rule candidates (so the
//! walk finds the next candidate among 10,000 rules in a few word reads).

pub(crate) fn set(bits: &mut [u64], i: usize) {
    if let Some(w) = bits.get_mut(i / 64) {
        *w |= 1 << (i % 64);
    }
}

pub(crate) fn get(bits: &[u64], i: usize) -> bool {
    bits.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

/// The first set bit at or after `from`, if any.
pub(crate) fn next_set(bits: &[u64], from: usize) -> Option<usize> {
    let mut w = from / 64;
    let mut word = *bits.get(w)? & (u64::MAX << (from % 64));
    loop {
        if word != 0 {
            return Some(w * 64 + word.trailing_zeros() as usize);
        }
        w += 1;
        word = *bits.get(w)?;
    }
}

/// The first set bit in `from..end`, reading no word past `end`.
pub(crate) fn next_set_below(bits: &[u64], from: usize, end: usize) -> Option<usize> {
    let words = bits.get(..end.div_ceil(64).min(bits.len()))?;
    next_set(words, from).filter(|&i| i < end)
}

/// Clears bits `start..end`, a word at a time.
pub(crate) fn clear_range(bits: &mut [u64], start: usize, end: usize) {
    if start >= end {
        return;
    }
    let (first, last) = (start / 64, (end - 1) / 64);
    let head = u64::MAX << (start % 64);
    let tail = u64::MAX >> (63 - (end - 1) % 64);
    if first == last {
        if let Some(word) = bits.get_mut(first) {
            *word &= !(head & tail);
        }
        return;
    }
    if let Some(word) = bits.get_mut(first) {
        *word &= !head;
    }
    if let Some(middle) = bits.get_mut(first + 1..last) {
        middle.fill(0);
    }
    if let Some(word) = bits.get_mut(last) {
        *word &= !tail;
    }
}

/// A bitset with a summary word per 64 words, so finding the next set bit skips empty
/// stretches 4,096 bits at a time.
#[derive(Clone, Debug, Default)]
pub(crate) struct Candidates {
    words: Vec<u64>,
    summary: Vec<u64>,
}

impl Candidates {
    pub fn new(len: usize) -> Candidates {
        let words = len.div_ceil(64);
        Candidates { words: vec![0; words], summary: vec![0; words.div_ceil(64)] }
    }

    pub fn set(&mut self, i: usize) {
        set(&mut self.words, i);
        set(&mut self.summary, i / 64);
    }

    /// Becomes a copy of `other` (same length) without allocating.
    pub fn copy_from(&mut self, other: &Candidates) {
        self.words.copy_from_slice(&other.words);
        self.summary.copy_from_slice(&other.summary);
    }

    /// The first set bit at or after `from`.
    pub fn next_set(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        let word = *self.words.get(w)? & (u64::MAX << (from % 64));
        if word != 0 {
            return Some(w * 64 + word.trailing_zeros() as usize);
        }
        let next = next_set(&self.summary, w + 1)?;
        Some(next * 64 + self.words.get(next)?.trailing_zeros() as usize)
    }
}
