//! On the ring a socket's receive is multishot where the kernel takes its byte limit, or one
//! receive per wait for bytes with `[global] uring_multishot = false` (what kernels without
//! the limit get; ADR 0026). The kernel's own counts for the worker's ring tell them apart
//! (`/proc/self/fdinfo`: `SqHead` counts the submissions it took, `CqHead` the completions
//! reaped): a multishot receive posts a completion per arrival of bytes with no new
//! submission, a single receive needs a submission per completion.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{get, start};
use std::collections::HashSet;
use testkit::RawClient;

const REQUESTS: u32 = 40;

/// The descriptors of this process's io_uring instances.
fn rings() -> HashSet<String> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            (target.to_string_lossy() == "anon_inode:[io_uring]")
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
        .collect()
}

/// A ring's (submissions taken, completions reaped), from the kernel's fdinfo.
fn heads(fd: &str) -> (u32, u32) {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
    let field = |name: &str| -> u32 {
        let line =
            info.lines().find(|l| l.starts_with(&format!("{name}:"))).unwrap_or_else(|| panic!("{info}"));
        line[name.len() + 1..].trim().parse().unwrap()
    };
    (field("SqHead"), field("CqHead"))
}

/// Completions beyond submissions while one keep-alive client sends `REQUESTS` requests
/// through a one-worker switch configured with `multishot`.
async fn completions_without_submissions(multishot: bool) -> u32 {
    let before = rings();
    let h =
        start(&["s1"], &format!("[global]\nworkers = 1\nio = \"uring\"\nuring_multishot = {multishot}\n"))
            .await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(&get("/small")).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 200);
    let new: Vec<String> = rings().difference(&before).cloned().collect();
    assert_eq!(new.len(), 1, "the switch's worker has one ring (is io_uring allowed here?): {new:?}");
    let ring = &new[0];
    let (sq0, cq0) = heads(ring);
    for _ in 0..REQUESTS {
        c.send(&get("/small")).await.unwrap();
        assert_eq!(c.read_response().await.unwrap().status, 200);
    }
    let (sq1, cq1) = heads(ring);
    let (submitted, completed) = (sq1.wrapping_sub(sq0), cq1.wrapping_sub(cq0));
    assert!(completed >= 4 * REQUESTS, "a request is at least two receives and two sends: {completed}");
    completed.saturating_sub(submitted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multishot_receive_serves_many_arrivals_and_the_single_one_each() {
    // One test, so that no other switch's ring appears meanwhile.
    let multishot = completions_without_submissions(true).await;
    let single = completions_without_submissions(false).await;
    // Multishot: the client's request and the server's answer arrive on receives armed
    // before (two per request, less a few re-arms after a buffer's byte limit).
    assert!(multishot >= REQUESTS, "multishot: only {multishot} completions without a submission");
    // Single: every completion had its submission (a cancellation adds a completion now
    // and then, never one per request).
    assert!(single < REQUESTS / 4, "single: {single} completions without a submission");
}
