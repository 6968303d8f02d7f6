//! Body scanning: length, close-delimited, and the chunked grammar (RFC 9112 §6, §7.1).

use crate::{BodyError, BodyKind, BodyScanner, Scan};

/// Scans `input` in one call; returns the result and the payload handed to `on_data`.
pub(crate) fn scan_all(kind: BodyKind, max: u64, input: &[u8]) -> (Result<Scan, BodyError>, Vec<u8>) {
    let mut s = BodyScanner::new(kind, max);
    let mut data = Vec::new();
    let r = s.scan_data(input, |d| data.extend_from_slice(d));
    (r, data)
}

fn chunked(input: &[u8]) -> Result<Scan, BodyError> {
    scan_all(BodyKind::Chunked, u64::MAX, input).0
}

#[test]
fn none_is_done_at_once() {
    let mut s = BodyScanner::new(BodyKind::None, 0);
    assert_eq!(s.scan(b"GET / HTTP/1.1"), Ok(Scan { consumed: 0, done: true }));
}

#[test]
fn length() {
    let mut s = BodyScanner::new(BodyKind::Length(5), u64::MAX);
    assert_eq!(s.scan(b"he"), Ok(Scan { consumed: 2, done: false }));
    assert_eq!(s.scan(b""), Ok(Scan { consumed: 0, done: false }));
    assert_eq!(s.scan(b"lloNEXT"), Ok(Scan { consumed: 3, done: true }));
    assert_eq!(s.scan(b"NEXT"), Ok(Scan { consumed: 0, done: true }));
    assert_eq!(s.payload_len(), 5);
    let (r, data) = scan_all(BodyKind::Length(3), 3, b"abcdef");
    assert_eq!((r, data), (Ok(Scan { consumed: 3, done: true }), b"abc".to_vec()));
    assert_eq!(scan_all(BodyKind::Length(4), 3, b"abcd").0, Err(BodyError::TooLarge));
    assert_eq!(scan_all(BodyKind::Length(4), 3, b"").0, Err(BodyError::TooLarge));
}

#[test]
fn until_close() {
    let mut s = BodyScanner::new(BodyKind::UntilClose, 10);
    assert_eq!(s.scan(b"12345"), Ok(Scan { consumed: 5, done: false }));
    assert_eq!(s.scan(b"12345"), Ok(Scan { consumed: 5, done: false }));
    assert_eq!(s.scan(b"1"), Err(BodyError::TooLarge));
}

#[test]
fn chunked_basic() {
    let body = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    let input = [&body[..], b"GET / HTTP/1.1\r\n"].concat();
    let (r, data) = scan_all(BodyKind::Chunked, u64::MAX, &input);
    assert_eq!(r, Ok(Scan { consumed: body.len(), done: true }));
    assert_eq!(data, b"hello world");
}

#[test]
fn chunked_accepted_forms() {
    let cases: &[&[u8]] = &[
        b"0\r\n\r\n",
        b"000\r\n\r\n",
        b"A\r\n0123456789\r\n0\r\n\r\n",
        b"a\r\n0123456789\r\n0\r\n\r\n",
        b"000000000000000a\r\n0123456789\r\n0\r\n\r\n",
        b"1;a\r\nx\r\n0\r\n\r\n",
        b"1;a=b\r\nx\r\n0;c=\"d\"\r\n\r\n",
        b"1 ; a = b ; c\r\nx\r\n0\r\n\r\n",
        b"1;a=\"q \\\" \\\\ \t\x80\"\r\nx\r\n0\r\n\r\n",
        b"1;a=\"\";b\r\nx\r\n0\r\n\r\n",
        b"0\r\nX-Trailer: 1\r\nChecksum:abc \t\r\nE:\r\n\r\n",
    ];
    for input in cases {
        let r = chunked(input);
        assert_eq!(r, Ok(Scan { consumed: input.len(), done: true }), "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn chunked_refusals() {
    use BodyError::*;
    let cases: &[(&[u8], BodyError)] = &[
        (b"\r\n", BadChunkSize),
        (b";a\r\n", BadChunkSize),
        (b"g\r\n", BadChunkSize),
        (b"-1\r\n", BadChunkSize),
        (b"+1\r\n", BadChunkSize),
        (b"0x5\r\n", BadChunkSize),
        (b"00000000000000001\r\n", BadChunkSize),
        (b"10000000000000000\r\n", BadChunkSize),
        (b"5\nhello\r\n", BadChunkSize),
        (b"5\r\rhello\r\n", BadChunkSize),
        (b"5;a\nhello\r\n", BadChunkSize),
        (b"5\r\nhelloX\r\n", BadChunkEnd),
        (b"5\r\nhello\n0\r\n\r\n", BadChunkEnd),
        (b"5\r\nhello\r\r", BadChunkEnd),
        (b"5\r\nhello0\r\n\r\n", BadChunkEnd),
        (b"5 \r\n", BadChunkExtension),
        (b"5;\r\n", BadChunkExtension),
        (b"5;=x\r\n", BadChunkExtension),
        (b"5;a=\r\n", BadChunkExtension),
        (b"5;a b\r\n", BadChunkExtension),
        (b"5;a=b c\r\n", BadChunkExtension),
        (b"5;a=\"x\r\n", BadChunkExtension),
        (b"5;a=\"x\"y\r\n", BadChunkExtension),
        (b"5;a=\"x\" \r\n", BadChunkExtension),
        (b"5;a@\r\n", BadChunkExtension),
        (b"5;a=\"\x01\"\r\n", BadChunkExtension),
        (b"5,a\r\n", BadChunkSize),
        (b"0\r\n\n", BadTrailer),
        (b"0\r\n\r\r", BadTrailer),
        (b"0\r\nX\r\n\r\n", BadTrailer),
        (b"0\r\nX : a\r\n\r\n", BadTrailer),
        (b"0\r\n: a\r\n\r\n", BadTrailer),
        (b"0\r\nX: a\r\n b\r\n\r\n", BadTrailer),
        (b"0\r\n X: a\r\n\r\n", BadTrailer),
        (b"0\r\nX: a\nY: b\r\n\r\n", BadTrailer),
        (b"0\r\nX: a\rY: b\r\n\r\n", BadTrailer),
        (b"0\r\nX: \0\r\n\r\n", BadTrailer),
    ];
    for (input, want) in cases {
        assert_eq!(chunked(input), Err(*want), "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn chunk_line_and_trailer_limits() {
    let mut line = b"1;a=".to_vec();
    line.resize(4094, b'b');
    line.extend_from_slice(b"\r\nx\r\n0\r\n\r\n");
    assert_eq!(chunked(&line).map(|s| s.done), Ok(true));
    let mut long = b"1;a=".to_vec();
    long.resize(4095, b'b');
    long.extend_from_slice(b"\r\n");
    assert_eq!(chunked(&long), Err(BodyError::BadChunkExtension));
    let mut trailer = b"0\r\nX: ".to_vec();
    trailer.resize(16 * 1024 + 3 - 4, b'v');
    trailer.extend_from_slice(b"\r\n\r\n");
    assert_eq!(chunked(&trailer).map(|s| s.done), Ok(true));
    let mut big = b"0\r\nX: ".to_vec();
    big.resize(16 * 1024 + 3 - 3, b'v');
    big.extend_from_slice(b"\r\n\r\n");
    assert_eq!(chunked(&big), Err(BodyError::BadTrailer));
}

#[test]
fn chunked_size_limit() {
    let body = b"5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n";
    assert_eq!(scan_all(BodyKind::Chunked, 10, body).0.map(|s| s.done), Ok(true));
    let (r, data) = scan_all(BodyKind::Chunked, 9, body);
    assert_eq!(r, Err(BodyError::TooLarge));
    // Refused at the second chunk's size line, before any of its data.
    assert_eq!(data, b"hello");
    assert_eq!(
        scan_all(BodyKind::Chunked, u64::MAX - 1, b"ffffffffffffffff\r\n").0,
        Err(BodyError::TooLarge)
    );
    let max = scan_all(BodyKind::Chunked, u64::MAX, b"ffffffffffffffff\r\nab").0;
    assert_eq!(max, Ok(Scan { consumed: 20, done: false }));
}

#[test]
fn chunked_state_survives_splits() {
    let mut s = BodyScanner::new(BodyKind::Chunked, u64::MAX);
    let mut data = Vec::new();
    let mut total = 0;
    for piece in [
        &b"1"[..],
        b"0;",
        b"x=\"",
        b"\\\"",
        b"\"\r",
        b"\n0123",
        b"456789ab",
        b"cdef\r",
        b"\n0",
        b"\r\nT:",
        b" v\r\n\r",
        b"\nNEXT",
    ] {
        let r = s.scan_data(piece, |d| data.extend_from_slice(d)).unwrap();
        total += r.consumed;
        assert_eq!(r.done, piece == b"\nNEXT");
    }
    assert_eq!(data, b"0123456789abcdef");
    assert_eq!(s.payload_len(), 16);
    assert_eq!(s.scan(b"more"), Ok(Scan { consumed: 0, done: true }));
    let whole = b"10;x=\"\\\"\"\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\n";
    assert_eq!(total, whole.len());
}

#[test]
fn errors_are_sticky() {
    let mut s = BodyScanner::new(BodyKind::Chunked, u64::MAX);
    assert_eq!(s.scan(b"z"), Err(BodyError::BadChunkSize));
    assert_eq!(s.scan(b"0\r\n\r\n"), Err(BodyError::BadChunkSize));
    assert_eq!(BodyError::TooLarge.status(), 413);
    assert_eq!(BodyError::BadTrailer.status(), 400);
}

#[test]
fn scan_parts_hands_over_the_trailer_section_across_splits() {
    let body = b"3\r\nabc\r\n0\r\ngrpc-status: 0\r\nx-a: b\r\n\r\nNEXT";
    // Every cut inside the body (its last byte, the final LF, always comes second).
    for cut in 0..body.len() - b"NEXT".len() {
        let mut s = BodyScanner::new(BodyKind::Chunked, u64::MAX);
        let (mut data, mut trailer) = (Vec::new(), Vec::new());
        // The scanner takes everything it is given until the body ends.
        let first = s.scan_parts(&body[..cut], |d| data.extend_from_slice(d), |b| trailer.push(b)).unwrap();
        assert!(!first.done && first.consumed == cut, "cut {cut}");
        let rest = s.scan_parts(&body[cut..], |d| data.extend_from_slice(d), |b| trailer.push(b)).unwrap();
        assert!(rest.done && &body[cut + rest.consumed..] == b"NEXT", "cut {cut}");
        assert_eq!(data, b"abc", "cut {cut}");
        assert_eq!(trailer, b"grpc-status: 0\r\nx-a: b\r\n\r\n", "cut {cut}");
    }
    // No trailer: only the final CRLF.
    let mut s = BodyScanner::new(BodyKind::Chunked, u64::MAX);
    let mut trailer = Vec::new();
    assert!(s.scan_parts(b"0\r\n\r\n", |_| {}, |b| trailer.push(b)).unwrap().done);
    assert_eq!(trailer, b"\r\n");
}
