//! Criterion benches for the head parser and the chunked scanner.
#![allow(clippy::unwrap_used, missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use cswitch_http1::{BodyKind, BodyScanner, HeadLimits, RequestHead, ResponseHead};
use std::hint::black_box;

const WRK_REQUEST: &[u8] = b"GET /app/small HTTP/1.1\r\nHost: bench.local\r\n\r\n";
const BROWSER_REQUEST: &[u8] = b"GET /img/photos/2026/a.gif?size=large HTTP/1.1\r\nHost: www.example.com\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n\
Accept: image/avif,image/webp,*/*\r\nAccept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate, br\r\n\
Referer: https://www.example.com/gallery\r\nCookie: session=abcdef0123456789; theme=dark\r\n\
Connection: keep-alive\r\nSec-Fetch-Dest: image\r\nSec-Fetch-Mode: no-cors\r\n\r\n";
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Sun, 22 Nov 2026 00:00:00 GMT\r\n\
Content-Type: text/plain\r\nContent-Length: 100\r\nConnection: keep-alive\r\nAccept-Ranges: bytes\r\n\r\n";

fn heads(c: &mut Criterion) {
    let limits = HeadLimits::default();
    let mut g = c.benchmark_group("head");
    for (name, bytes) in [("request_wrk", WRK_REQUEST), ("request_browser", BROWSER_REQUEST)] {
        let mut head = RequestHead::new();
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(name, |b| b.iter(|| head.parse(black_box(bytes), &limits).unwrap()));
    }
    let mut resp = ResponseHead::new();
    g.throughput(Throughput::Bytes(RESPONSE.len() as u64));
    g.bench_function("response", |b| b.iter(|| resp.parse(black_box(RESPONSE), &limits, false).unwrap()));
    g.finish();
}

fn chunked(c: &mut Criterion) {
    let mut body = Vec::new();
    for _ in 0..64 {
        body.extend_from_slice(b"400\r\n");
        body.extend_from_slice(&[b'x'; 1024]);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let mut g = c.benchmark_group("body");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("chunked_64k", |b| {
        b.iter(|| BodyScanner::new(BodyKind::Chunked, u64::MAX).scan(black_box(&body)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, heads, chunked);
criterion_main!(benches);
