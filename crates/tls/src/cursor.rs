//! A bounds-checked reader over one length-delimited block of a handshake message.
//!
//! Every read names the field it reads, so an overrun reports which length lied.

use crate::HelloError;

/// Reads big-endian integers and length-prefixed vectors (RFC 8446 §3) from a slice.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Fails with `Trailing` unless the block is used up: a length that claims more than
    /// its fields hold is as wrong as one that claims less.
    pub(crate) fn finish(&self, what: &'static str) -> Result<(), HelloError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(HelloError::Trailing(what))
        }
    }

    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], HelloError> {
        if n > self.buf.len() {
            return Err(HelloError::Overrun(what));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, HelloError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, HelloError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A vector with a one-byte length prefix.
    pub(crate) fn vec8(&mut self, what: &'static str) -> Result<&'a [u8], HelloError> {
        let n = self.u8(what)?;
        self.take(usize::from(n), what)
    }

    /// A vector with a two-byte length prefix.
    pub(crate) fn vec16(&mut self, what: &'static str) -> Result<&'a [u8], HelloError> {
        let n = self.u16(what)?;
        self.take(usize::from(n), what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrun_names_the_field() {
        let mut c = Cursor::new(&[0, 3, 1, 2]);
        assert_eq!(c.vec16("alpn"), Err(HelloError::Overrun("alpn")));
    }

    #[test]
    fn finish_reports_leftovers() {
        let mut c = Cursor::new(&[1, 9, 7]);
        assert_eq!(c.vec8("x"), Ok(&[9][..]));
        assert_eq!(c.finish("x block"), Err(HelloError::Trailing("x block")));
        assert_eq!(c.u8("y"), Ok(7));
        assert!(c.is_empty());
        assert_eq!(c.finish("x block"), Ok(()));
    }
}
