//! The cswitch data plane.
