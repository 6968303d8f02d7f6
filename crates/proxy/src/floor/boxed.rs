//! A future boxed where it is made. `Box::pin(phase())` makes the future on the stack and
//! then copies all of it into the heap: its whole size (the request's phases after the head:
//! 5.4 KB; one request: 1.7 KB), though only the few arguments it starts from were written.
//! Allocating first and making the future straight into the allocation lets the compiler
//! drop the copy (in an optimised build): 9.8 KB of copies per keep-alive request before,
//! 1.4 KB after, all of them bytes of the request and the answer (ADR 0028).

use std::future::Future;
use std::pin::Pin;

/// `make()`'s future, made in its box (call as `pinned(|| phase(args))`: a future passed in
/// by value would be made before the allocation, and copied).
#[inline(always)]
pub fn pinned<F: Future>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    Box::into_pin(Box::write(Box::new_uninit(), make()))
}
