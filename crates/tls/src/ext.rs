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
    // Kept sorted: a hostile hello may carry thousands of empty extensions, so a
    // linear scan per extension would be quadratic.
    let mut seen: Vec<u16> = Vec::new();
    while !c.is_empty() {
        let kind = c.u16("extension type")?;
        let data = c.vec16("extension data")?;
        match seen.binary_search(&kind) {
            Ok(_) => return Err(HelloError::DuplicateExtension(kind)),
            Err(at) => seen.insert(at, kind),
        }
        f(Extension { kind, data, last: c.is_empty() })?;
    }
    Ok(())
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
