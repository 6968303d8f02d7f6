//! The fuzz targets' seed corpora (`fuzz/seeds/<target>/`) replayed through the same
//! bodies the cargo-fuzz targets run (`fuzz/bodies.rs`), on stable Rust: every reader of
//! network input gets its seeds, and whatever a fuzzing run found and was committed, in
//! every test run. Each seed must also be accepted where it is a valid input (a check that
//! the seeds exercise more than the first refusal).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

#[path = "../../../fuzz/bodies.rs"]
mod bodies;

use std::path::Path;

#[test]
fn every_seed_of_every_target_runs_clean() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let mut ran = 0;
    for (name, body) in bodies::TARGETS {
        let dir = seeds.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "target {name} has no seed");
        for file in files {
            let data = std::fs::read(&file).unwrap();
            body(&data);
            // Every prefix too: readers meet inputs cut anywhere.
            for cut in (0..data.len()).step_by(data.len() / 16 + 1) {
                body(&data[..cut]);
            }
            ran += 1;
        }
    }
    assert!(ran >= 2 * bodies::TARGETS.len(), "{ran} seeds");
}

#[test]
fn the_seeds_are_valid_inputs_where_they_should_be() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let read = |p: &str| std::fs::read(seeds.join(p)).unwrap();
    let report = read("agent_report/report");
    assert!(agent::wire::Report::parse(&report).is_ok());
    let hello = read("tls_client_hello/tls13");
    let mut reader = tls::ClientHelloReader::new(tls::DEFAULT_MAX_BYTES);
    assert!(
        matches!(reader.push(&hello[1..]), tls::Progress::Done(h) if h.sni.as_deref() == Some("shop.example"))
    );
    let head = read("request_head/get");
    let mut req = http1::RequestHead::new();
    assert_eq!(req.parse(&head, &http1::HeadLimits::default()), Ok(http1::Parse::Complete));
    let session = read("smtp_front/session");
    let mut front = mail::smtp::Front::new(mail::smtp::FrontConfig::default());
    front.feed(&session[1..]);
    let mut out = Vec::new();
    let mut saw_data = false;
    while let Some(event) = front.poll(&mut out) {
        match event {
            mail::smtp::Event::Mail { .. } => front.accept_mail(&mut out),
            mail::smtp::Event::Rcpt { .. } => {
                front.answer_rcpt(&mail::smtp::Reply::new(250, "2.1.5 Ok"), &mut out)
            }
            mail::smtp::Event::Data => saw_data = true,
            _ => {}
        }
    }
    assert!(saw_data, "the SMTP seed reaches DATA");
    for (seed, decision) in [
        ("json_body/order", "\"A\")) route 1"),
        ("json_body/malformed", "\"B\")) route 0"),
        ("json_body/array", "\"C\")) Deny"),
        ("json_body/deep", "\"D\")) Drop"),
    ] {
        let (whole, _) = bodies::json_outcomes(&read(seed)[1..], 0);
        assert!(whole.contains(decision), "{seed}: {whole}");
    }
    for config in ["config_load/cswitch.toml", "config_load/demo.toml"] {
        let text = String::from_utf8(read(config)).unwrap();
        let _ = config::parse(&text, Path::new(config)); // examples may name files elsewhere
    }
}
