use super::*;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn a_full_budget_holds_writers_until_the_other_end_reads() {
    let budget = Budget::new(10);
    let (wing, mut phases) = pipe(&budget);
    let header = crate::floor::budget::Charge::new(&budget, 4);
    // 6 bytes of room: a write of 8 takes 6.
    assert_eq!(wing.writer().write(b"12345678").await.unwrap(), 6);
    assert!(budget.full());
    let blocked = tokio::time::timeout(Duration::from_millis(50), wing.writer().write(b"78")).await;
    assert!(blocked.is_err(), "no room: the writer waits");
    let mut got = [0u8; 6];
    phases.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"123456");
    assert_eq!(budget.held(), 4, "read bytes are released");
    drop(header);
    assert_eq!(wing.writer().write(b"78").await.unwrap(), 2);
}

#[tokio::test]
async fn a_lane_holds_at_most_its_size() {
    let budget = Budget::new(usize::MAX);
    let (wing, mut phases) = pipe(&budget);
    let big = vec![7u8; LANE_BYTES + 100];
    assert_eq!(wing.writer().write(&big).await.unwrap(), LANE_BYTES);
    let blocked = tokio::time::timeout(Duration::from_millis(50), wing.writer().write(b"x")).await;
    assert!(blocked.is_err(), "a full lane holds the writer");
    let mut got = vec![0u8; 100];
    phases.read_exact(&mut got).await.unwrap();
    assert_eq!(wing.writer().write(b"x").await.unwrap(), 1);
}

#[tokio::test]
async fn vectored_answers_arrive_whole_and_end_when_the_phases_go() {
    let budget = Budget::new(1 << 20);
    let (wing, mut phases) = pipe(&budget);
    let parts = [IoSlice::new(b"HTTP/1.1 200 OK\r\n"), IoSlice::new(b"\r\n"), IoSlice::new(b"body")];
    let (_, mut w) = phases.split();
    assert_eq!(w.write_vectored(&parts).await.unwrap(), 23);
    let mut out = Vec::new();
    let mut reader = wing.reader();
    assert_eq!(reader.take_into(&mut out).await, 23);
    assert_eq!(out, b"HTTP/1.1 200 OK\r\n\r\nbody");
    assert_eq!(budget.held(), 0);
    drop(phases);
    assert_eq!(wing.reader().take_into(&mut out).await, 0, "the phases' end gone: end of stream");
}

#[tokio::test]
async fn the_phases_see_the_end_of_the_body_and_writes_after_they_left_fail() {
    let budget = Budget::new(1 << 20);
    let (wing, mut phases) = pipe(&budget);
    wing.writer().write_all(b"abc").await.unwrap();
    wing.close_up();
    let mut got = Vec::new();
    phases.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"abc");
    let (wing, phases) = pipe(&budget);
    wing.writer().write_all(b"unread").await.unwrap();
    drop(phases);
    assert_eq!(budget.held(), 0, "what nobody will read is not held");
    assert!(wing.writer().write(b"more").await.is_err());
}
