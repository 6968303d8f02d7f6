//! A raw HTTP/2 client: the preface, SETTINGS, one HEADERS frame whose HPACK block is
//! written by hand (literal fields, no Huffman, no indexing, so any bytes can be sent),
//! optional DATA, and what came back for stream 1. For requests a conforming client
//! library refuses to build.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What the switch answered stream 1 with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A response; 0 for a status this decoder does not read (not in the static table).
    Status(u16),
    /// RST_STREAM with this error code.
    Reset(u32),
    /// GOAWAY with this error code, before any answer.
    GoAway(u32),
    /// The connection closed, or nothing came within 5 s.
    Closed,
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An HPACK integer with a 7-bit prefix (RFC 7541 §5.1), H bit clear.
fn length(n: usize, out: &mut Vec<u8>) {
    if n < 127 {
        out.push(n as u8);
        return;
    }
    out.push(127);
    let mut rest = n - 127;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// Literal header fields without indexing, new names (RFC 7541 §6.2.2).
pub fn hpack(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0x00);
        length(name.len(), &mut out);
        out.extend_from_slice(name.as_bytes());
        length(value.len(), &mut out);
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// Sends one request on stream 1 (`data`: one DATA frame that ends the stream; `None`: the
/// HEADERS frame ends it) and reads until the switch answers stream 1.
pub async fn request(addr: SocketAddr, fields: &[(&str, &str)], data: Option<&[u8]>) -> Seen {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let mut out = PREFACE.to_vec();
    out.extend(frame(4, 0, 0, &[]));
    let end_stream = if data.is_none() { 0x1 } else { 0 };
    out.extend(frame(1, 0x4 | end_stream, 1, &hpack(fields)));
    if let Some(d) = data {
        out.extend(frame(0, 0x1, 1, d));
    }
    tcp.write_all(&out).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(5), read_answer(&mut tcp)).await {
        Ok(seen) => seen,
        Err(_) => Seen::Closed,
    }
}

async fn read_answer(tcp: &mut TcpStream) -> Seen {
    loop {
        let mut head = [0u8; 9];
        if tcp.read_exact(&mut head).await.is_err() {
            return Seen::Closed;
        }
        let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        if tcp.read_exact(&mut payload).await.is_err() {
            return Seen::Closed;
        }
        let code =
            |at: usize| payload.get(at..at + 4).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        match (kind, stream) {
            (4, 0) if flags & 0x1 == 0 => {
                let _ = tcp.write_all(&frame(4, 0x1, 0, &[])).await;
            }
            (1, 1) => return Seen::Status(status(&payload)),
            (3, 1) => return Seen::Reset(code(0)),
            (7, _) => return Seen::GoAway(code(4)),
            _ => {}
        }
    }
}

/// `:status` when the block starts with it as an indexed static-table field.
fn status(block: &[u8]) -> u16 {
    match block.first() {
        Some(0x88) => 200,
        Some(0x89) => 204,
        Some(0x8c) => 400,
        Some(0x8d) => 404,
        Some(0x8e) => 500,
        _ => 0,
    }
}

/// A raw connection for floods: frames written as the test says, frames read as they come.
pub struct Raw {
    tcp: TcpStream,
}

/// A frame read: type, flags, stream, payload.
pub type Frame = (u8, u8, u32, Vec<u8>);

impl Raw {
    /// Connects and sends the preface and an empty SETTINGS frame.
    pub async fn open(addr: SocketAddr) -> Raw {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        let mut out = PREFACE.to_vec();
        out.extend(frame(4, 0, 0, &[]));
        tcp.write_all(&out).await.unwrap();
        Raw { tcp }
    }

    /// HEADERS ending the stream (a GET) on `stream`.
    pub fn get(stream: u32, path: &str) -> Vec<u8> {
        let fields = [(":method", "GET"), (":scheme", "http"), (":path", path), (":authority", "a.test")];
        frame(1, 0x5, stream, &hpack(&fields))
    }

    /// HEADERS with `fields` on `stream`, ending it when `end`.
    pub fn headers(stream: u32, fields: &[(&str, &str)], end: bool) -> Vec<u8> {
        frame(1, 0x4 | u8::from(end), stream, &hpack(fields))
    }

    /// DATA with `bytes` on `stream`, ending it when `end`.
    pub fn data(stream: u32, bytes: &[u8], end: bool) -> Vec<u8> {
        frame(0, u8::from(end), stream, bytes)
    }

    /// RST_STREAM CANCEL on `stream`.
    pub fn cancel(stream: u32) -> Vec<u8> {
        frame(3, 0, stream, &8u32.to_be_bytes())
    }

    /// Writes frames; false when the switch has closed the connection.
    pub async fn send(&mut self, bytes: &[u8]) -> bool {
        self.tcp.write_all(bytes).await.is_ok()
    }

    /// The next frame (SETTINGS acknowledged on the way); `None` at the end or after 5 s.
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            let mut head = [0u8; 9];
            let read = tokio::time::timeout(Duration::from_secs(5), self.tcp.read_exact(&mut head)).await;
            if !matches!(read, Ok(Ok(_))) {
                return None;
            }
            let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
            let mut payload = vec![0u8; len];
            self.tcp.read_exact(&mut payload).await.ok()?;
            let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            if head[3] == 4 && head[4] & 0x1 == 0 {
                let _ = self.tcp.write_all(&frame(4, 0x1, 0, &[])).await;
                continue;
            }
            return Some((head[3], head[4], stream, payload));
        }
    }

    /// Reads until a GOAWAY; its error code (`None`: the connection ended without one).
    pub async fn goaway(&mut self) -> Option<u32> {
        while let Some((kind, _, _, payload)) = self.next().await {
            if kind == 7 {
                return payload.get(4..8).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            }
        }
        None
    }
}

impl Raw {
    /// Connects with these SETTINGS (id, value) instead of none.
    pub async fn open_with(addr: SocketAddr, settings: &[(u16, u32)]) -> Raw {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        let mut payload = Vec::new();
        for (id, value) in settings {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&value.to_be_bytes());
        }
        let mut out = PREFACE.to_vec();
        out.extend(frame(4, 0, 0, &payload));
        tcp.write_all(&out).await.unwrap();
        Raw { tcp }
    }

    /// Writes `unit` over and over for `time`, reading nothing; the bytes the switch took.
    pub async fn flood(&mut self, unit: &[u8], time: Duration) -> usize {
        let batch: Vec<u8> =
            unit.iter().copied().cycle().take(unit.len() * (64 * 1024 / unit.len()).max(1)).collect();
        let end = tokio::time::Instant::now() + time;
        let mut written = 0;
        while let Ok(Ok(())) = tokio::time::timeout_at(end, self.tcp.write_all(&batch)).await {
            written += batch.len();
        }
        written
    }
}

/// A PING frame.
pub fn ping() -> Vec<u8> {
    frame(6, 0, 0, &[7; 8])
}

/// A SETTINGS frame that changes nothing (INITIAL_WINDOW_SIZE at its default).
pub fn settings() -> Vec<u8> {
    frame(4, 0, 0, &[0, 4, 0, 0, 0xff, 0xff])
}

/// HEADERS without END_HEADERS on `stream`: a header block that CONTINUATION frames go on.
pub fn headers_open(stream: u32) -> Vec<u8> {
    let fields = [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "a.test")];
    frame(1, 0x1, stream, &hpack(&fields))
}

/// A CONTINUATION frame (never END_HEADERS) with one literal field on `stream`.
pub fn continuation(stream: u32) -> Vec<u8> {
    frame(9, 0, stream, &hpack(&[("x-flood", &"f".repeat(100))]))
}

/// An HPACK bomb on `stream`: one 4000-byte field put in the dynamic table, then referred
/// to `refs` times, so a block of a few KiB decodes to `refs` × 4 KB.
pub fn hpack_bomb(stream: u32, refs: usize) -> Vec<u8> {
    let mut block =
        hpack(&[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "a.test")]);
    // Literal with incremental indexing, new name (RFC 7541 §6.2.1).
    block.push(0x40);
    length(6, &mut block);
    block.extend_from_slice(b"x-bomb");
    length(4000, &mut block);
    block.extend(std::iter::repeat_n(b'b', 4000));
    // Indexed field 62: the newest dynamic-table entry (§6.1), again and again.
    block.extend(std::iter::repeat_n(0xbe, refs));
    frame(1, 0x5, stream, &block)
}

impl Raw {
    /// The first HEADERS, RST_STREAM or GOAWAY frame about `stream` (or the connection):
    /// its type and payload; `None` when the connection ended first.
    pub async fn next_for(&mut self, stream: u32) -> Option<(u8, Vec<u8>)> {
        while let Some((kind, _, on, payload)) = self.next().await {
            if (on == stream && (kind == 1 || kind == 3)) || kind == 7 {
                return Some((kind, payload));
            }
        }
        None
    }
}
