//! Passwords, kept out of `Debug` output so an event logged with `{:?}` leaks nothing.

use std::fmt;

/// A password or SASL response, as the client sent it (bytes: passwords need not be UTF-8).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// Wraps the bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Secret(bytes.into())
    }

    /// The bytes themselves; call this only to send them to the server.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_hides_the_bytes() {
        assert_eq!(format!("{:?}", super::Secret::new("hunter2")), "Secret(..)");
    }
}
