//! Chunked bodies: no panic on any input, and scanning the input cut at a fuzzer-chosen
//! point gives exactly what scanning it whole gives (consumed, done, error, payload).
//! The first two bytes choose the cut; the third, a body limit.
#![no_main]

use cswitch_http1::{BodyError, BodyKind, BodyScanner, Scan};
use libfuzzer_sys::fuzz_target;

/// Scans `pieces` in order as a proxy would: stop at `done` or at the first error.
fn scan(pieces: &[&[u8]], max: u64) -> (Result<Scan, BodyError>, Vec<u8>) {
    let mut scanner = BodyScanner::new(BodyKind::Chunked, max);
    let mut data = Vec::new();
    let mut total = 0;
    for piece in pieces {
        match scanner.scan_data(piece, |d| data.extend_from_slice(d)) {
            Err(e) => return (Err(e), data),
            Ok(s) if s.done => return (Ok(Scan { consumed: total + s.consumed, done: true }), data),
            Ok(s) => {
                assert_eq!(s.consumed, piece.len(), "a scan that is not done takes all its input");
                total += s.consumed;
            }
        }
    }
    (Ok(Scan { consumed: total, done: false }), data)
}

fuzz_target!(|input: &[u8]| {
    let [a, b, limit, body @ ..] = input else { return };
    let cut = usize::from(u16::from_le_bytes([*a, *b])) % (body.len() + 1);
    let max = if *limit == 0 { u64::MAX } else { u64::from(*limit) * 16 };
    let whole = scan(&[body], max);
    let (head, tail) = body.split_at(cut);
    assert_eq!(scan(&[head, tail], max), whole);
    if let (Ok(s), _) = &whole {
        assert!(s.consumed <= body.len());
    }
});
