//! cswitch binary.
fn main() {}
