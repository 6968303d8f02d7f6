//! Walking a hello's extension block.

use crate::cursor::Cursor;
use crate::HelloError;

/// Extension types this crate reads (IANA "TLS ExtensionType Values").
pub(crate) const SERVER_NAME: u16 = 0;
pub(crate) const ALPN: u16 = 16;
pub(crate) const SESSION_TICKET: u16 = 35;
pub(crate) const PRE_SHARED_KEY: u16 = 41;
pub(crate) const SUPPORTED_VERSIONS: u16 = 43;

/// One extension: its type, its data, and whether it is the last of the block.
pub(crate) struct Extension<'a> {
    pub(crate) kind: u16,
    pub(crate) data: &'a [u8],
    pub(crate) last: bool,
}

/// Calls `f` for each extension of `block` in order, refusing a type seen twice.
pub(crate) fn each<'a>(
    block: &'a [u8],
    mut f: impl FnMut(Extension<'a>) -> Result<(), HelloError>,
) -> Result<(), HelloError> {
    let mut c = Cursor::new(block);
    let mut seen = Seen::default();
    while !c.is_empty() {
        let kind = c.u16("extension type")?;
        let data = c.vec16("extension data")?;
        if !seen.insert(kind) {
            return Err(HelloError::DuplicateExtension(kind));
        }
        f(Extension { kind, data, last: c.is_empty() })?;
    }
    Ok(())
}

/// The extension types met so far. Types below 64 (most of a real hello's) are bits of a
/// mask; the others are kept sorted (a hostile hello may carry thousands of empty
/// extensions, so a linear scan per extension would be quadratic), the first
/// [`Seen::INLINE`] on the stack (no allocation per connection), the rest in a vector.
#[derive(Default)]
struct Seen {
    low: u64,
    inline: [u16; Seen::INLINE],
    len: usize,
    spilled: Vec<u16>,
}

impl Seen {
    const INLINE: usize = 16;

    /// Adds `kind`; false when it was there already.
    fn insert(&mut self, kind: u16) -> bool {
        if kind < 64 {
            let bit = 1u64 << kind;
            let new = self.low & bit == 0;
            self.low |= bit;
            return new;
        }
        if self.len < Self::INLINE {
            let sorted = &mut self.inline[..self.len];
            let Err(at) = sorted.binary_search(&kind) else { return false };
            self.inline.copy_within(at..self.len, at + 1);
            self.inline[at] = kind;
            self.len += 1;
            return true;
        }
        if self.spilled.is_empty() {
            self.spilled.extend_from_slice(&self.inline);
        }
        match self.spilled.binary_search(&kind) {
            Ok(_) => false,
            Err(at) => {
                self.spilled.insert(at, kind);
                true
            }
        }
    }
}

/// Reads the optional extension block that ends a hello; absent is allowed before TLS 1.3.
pub(crate) fn block<'a>(c: &mut Cursor<'a>, hello: &'static str) -> Result<&'a [u8], HelloError> {
    if c.is_empty() {
        return Ok(&[]);
    }
    let block = c.vec16("extensions")?;
    c.finish(hello)?;
    Ok(block)
}

#[cfg(test)]
mod tests {
    use super::Seen;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// `Seen` says "new" exactly when a set would, on both sides of its inline limit.
        #[test]
        fn seen_agrees_with_a_set(kinds in proptest::collection::vec(prop_oneof![0u16..80, 0xfa00u16..0xfa30], 0..120)) {
            let (mut seen, mut set) = (Seen::default(), BTreeSet::new());
            for kind in kinds {
                prop_assert_eq!(seen.insert(kind), set.insert(kind), "kind {}", kind);
            }
        }
    }
}
