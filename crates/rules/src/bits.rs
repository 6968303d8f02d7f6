//! Plain `u64` bitsets for atom results and rule candidates (no dependency needed).

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

/// Clears bits `start..end`.
pub(crate) fn clear_range(bits: &mut [u64], start: usize, end: usize) {
    let mut i = start;
    while i < end {
        if i & 63 == 0 && end - i >= 64 {
            if let Some(w) = bits.get_mut(i / 64) {
                *w = 0;
            }
            i += 64;
        } else {
            if let Some(w) = bits.get_mut(i / 64) {
                *w &= !(1 << (i % 64));
            }
            i += 1;
        }
    }
}
