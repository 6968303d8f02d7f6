//! Properties: a hello reads the same however the stream is cut (into reads or into
//! records), no strict prefix of a hello is enough, and no input makes a reader panic.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::*;
use proptest::prelude::*;
use tls::{ClientHelloReader, Progress, ServerHelloReader};

/// Cuts `bytes` at the given points (any values: taken modulo the length, sorted).
fn pieces<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut out = Vec::new();
    let mut start = 0;
    for end in at.into_iter().chain([bytes.len()]) {
        out.push(&bytes[start..end]);
        start = end;
    }
    out
}

fn client_whole(bytes: &[u8], max: usize) -> (Progress<tls::ClientHello>, usize) {
    let mut reader = ClientHelloReader::new(max);
    (reader.push(bytes), reader.consumed())
}

fn client_split(bytes: &[u8], cuts: &[usize], max: usize) -> (Progress<tls::ClientHello>, usize) {
    let mut reader = ClientHelloReader::new(max);
    (feed_client(&mut reader, pieces(bytes, cuts)), reader.consumed())
}

fn server_verdict(bytes: &[u8], cuts: &[usize]) -> Progress<tls::ServerHello> {
    let mut reader = ServerHelloReader::new(MAX);
    for piece in pieces(bytes, cuts) {
        let verdict = reader.push(piece);
        if verdict != Progress::NeedMore {
            return verdict;
        }
    }
    Progress::NeedMore
}

#[test]
fn real_client_hellos_one_byte_at_a_time() {
    for hello in &samples().client_hellos {
        let (whole, consumed) = client_whole(hello, MAX);
        assert!(matches!(whole, Progress::Done(_)));
        assert_eq!(consumed, hello.len());
        let cuts: Vec<usize> = (1..hello.len()).collect();
        assert_eq!(client_split(hello, &cuts, MAX), (whole, consumed));
    }
}

proptest! {
    #[test]
    fn real_hellos_read_the_same_however_split(which in 0usize..2, cuts in prop::collection::vec(any::<usize>(), 0..12)) {
        let hello = &samples().client_hellos[which];
        prop_assert_eq!(client_split(hello, &cuts, MAX), client_whole(hello, MAX));
        let flight = &samples().server_flights[which];
        prop_assert_eq!(server_verdict(flight, &cuts), server_verdict(flight, &[]));
    }

    #[test]
    fn real_hellos_read_the_same_in_three_records(which in 0usize..2, a in any::<usize>(), b in any::<usize>()) {
        let hello = &samples().client_hellos[which];
        let msg = unframe(hello);
        // Two cut points strictly inside the message: three non-empty records.
        let mut cuts = [1 + a % (msg.len() - 1), 1 + b % (msg.len() - 1)];
        cuts.sort_unstable();
        let cuts: Vec<usize> = if cuts[0] == cuts[1] { vec![cuts[0]] } else { cuts.to_vec() };
        let reframed = reframe(&msg, &cuts);
        let (whole, _) = client_whole(hello, MAX);
        prop_assert_eq!(client_whole(&reframed, MAX).0, whole.clone());
        prop_assert_eq!(client_split(&reframed, &[a, b], MAX).0, whole);
    }

    #[test]
    fn no_strict_prefix_is_a_hello(which in 0usize..2, len in any::<usize>()) {
        let hello = &samples().client_hellos[which];
        let prefix = &hello[..len % hello.len()];
        prop_assert_eq!(client_whole(prefix, MAX).0, Progress::NeedMore);
    }

    #[test]
    fn random_bytes_never_panic_and_split_does_not_matter(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
        max in 0usize..700,
    ) {
        prop_assert_eq!(client_split(&bytes, &cuts, max), client_whole(&bytes, max));
        server_verdict(&bytes, &cuts);
    }

    /// Random bytes behind a valid record and handshake header, to get past the first
    /// checks into the hello parsers.
    #[test]
    fn random_hello_bodies_never_panic(
        kind in 1u8..3,
        body in prop::collection::vec(any::<u8>(), 0..400),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let bytes = record(22, &message(kind, &body));
        prop_assert_eq!(client_split(&bytes, &cuts, MAX), client_whole(&bytes, MAX));
        server_verdict(&bytes, &cuts);
    }

    /// Real hellos with a few bytes changed: deep in the extensions, where a fuzzer would go.
    #[test]
    fn mutated_real_hellos_never_panic(
        which in 0usize..2,
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let mut bytes = samples().client_hellos[which].clone();
        for (at, value) in edits {
            let n = bytes.len();
            bytes[at % n] = value;
        }
        prop_assert_eq!(client_split(&bytes, &cuts, MAX), client_whole(&bytes, MAX));
        let mut flight = samples().server_flights[which].clone();
        let n = flight.len();
        flight[cuts.first().copied().unwrap_or(0) % n] ^= 0x5a;
        server_verdict(&flight, &cuts);
    }
}
