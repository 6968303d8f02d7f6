//! Just enough WebSocket (RFC 6455) for an echo origin and a test client: the opening
//! handshake's accept key and single, unfragmented frames of up to 64 KiB.

use std::io;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::seen::{Next, SeenRequest};
use crate::wire::{eof, has_token, invalid, Wire};

/// Opcode of a text frame.
pub const WS_TEXT: u8 = 0x1;
/// Opcode of a binary frame.
pub const WS_BINARY: u8 = 0x2;
/// Opcode of a close frame.
pub const WS_CLOSE: u8 = 0x8;
/// Opcode of a ping frame.
pub const WS_PING: u8 = 0x9;
/// Opcode of a pong frame.
pub const WS_PONG: u8 = 0xA;

/// Largest payload either side accepts: what a 16-bit length can say.
const MAX_PAYLOAD: u64 = 0xFFFF;

/// The `Sec-WebSocket-Accept` value answering `key` (RFC 6455 §4.2.2).
pub fn ws_accept_key(key: &str) -> String {
    const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    let digest = sha1_smol::Sha1::from(format!("{}{GUID}", key.trim())).digest();
    base64(&digest.bytes())
}

/// Standard base64 with padding; written here because the handshake is its only use.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let group = byte(0) << 16 | byte(1) << 8 | byte(2);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(group >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A masked, final client frame carrying `payload` as text.
pub fn ws_client_frame(payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    ws_client_frame_op(WS_TEXT, payload, mask)
}

/// A masked, final client frame with any opcode (binary, close, ping).
pub fn ws_client_frame_op(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    encode(opcode, payload, Some(mask))
}

/// Reads one frame from `stream`, using and refilling `pending` (bytes already read);
/// returns its opcode and unmasked payload.
pub async fn ws_read_frame(stream: &mut TcpStream, pending: &mut Vec<u8>) -> io::Result<(u8, Vec<u8>)> {
    loop {
        if let Some((opcode, payload, used)) = decode(pending)? {
            pending.drain(..used);
            return Ok((opcode, payload));
        }
        pending.reserve(16 * 1024);
        if stream.read_buf(pending).await? == 0 {
            return Err(eof("stream ended inside a WebSocket frame"));
        }
    }
}

fn encode(opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = vec![0x80 | (opcode & 0x0F)];
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(mask_bit | n as u8),
        n if n <= 0xFFFF => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(key) => {
            out.extend_from_slice(&key);
            out.extend(payload.iter().zip(key.iter().cycle()).map(|(b, k)| b ^ k));
        }
        None => out.extend_from_slice(payload),
    }
    out
}

/// One frame from the front of `buf`: opcode, unmasked payload, bytes used; `None` if
/// `buf` does not hold a whole frame yet.
fn decode(buf: &[u8]) -> io::Result<Option<(u8, Vec<u8>, usize)>> {
    let [b0, b1, ..] = *buf else { return Ok(None) };
    let (len, mut at) = match b1 & 0x7F {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(None),
        },
        127 => return Err(invalid("WebSocket frame over 64 KiB")),
        n => (u64::from(n), 2),
    };
    if len > MAX_PAYLOAD {
        return Err(invalid("WebSocket frame over 64 KiB"));
    }
    let mask = if b1 & 0x80 != 0 {
        let Some(key) = buf.get(at..at + 4) else {
            return Ok(None);
        };
        at += 4;
        Some([key[0], key[1], key[2], key[3]])
    } else {
        None
    };
    let end = at + len as usize;
    let Some(data) = buf.get(at..end) else {
        return Ok(None);
    };
    let payload = match mask {
        Some(key) => data.iter().zip(key.iter().cycle()).map(|(b, k)| b ^ k).collect(),
        None => data.to_vec(),
    };
    Ok(Some((b0 & 0x0F, payload, end)))
}

/// `/ws`: the opening handshake, then echo every data frame, answer pings, and echo the
/// close frame before ending the connection.
pub(crate) async fn serve(w: &mut Wire<'_>, name: &str, req: &SeenRequest) -> io::Result<Next> {
    let key = req.header("sec-websocket-key");
    let (true, Some(key)) = (has_token(&req.headers, "upgrade", "websocket"), key) else {
        let body = "websocket upgrade required\n";
        let reply = format!(
            "HTTP/1.1 400 Bad Request\r\nX-Origin: {name}\r\nContent-Type: text/plain\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        w.write_all(reply.as_bytes()).await?;
        return Ok(Next::Close);
    };
    let reply = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\nX-Origin: {name}\r\n\r\n",
        ws_accept_key(key)
    );
    w.write_all(reply.as_bytes()).await?;
    loop {
        let (opcode, payload) = loop {
            if let Some((opcode, payload, used)) = decode(w.buf)? {
                w.buf.drain(..used);
                break (opcode, payload);
            }
            if w.fill().await? == 0 {
                return Ok(Next::Close);
            }
        };
        let answer = match opcode {
            WS_PING => WS_PONG,
            WS_PONG => continue,
            other => other,
        };
        w.write_all(&encode(answer, &payload, None)).await?;
        if opcode == WS_CLOSE {
            return Ok(Next::Close);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_matches_rfc_example() {
        assert_eq!(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn base64_pads() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
    }

    #[test]
    fn frames_round_trip() {
        for len in [0, 5, 125, 126, 300, 65535] {
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let frame = ws_client_frame_op(WS_BINARY, &payload, [1, 2, 3, 4]);
            let (op, got, used) = decode(&frame).expect("valid").expect("whole");
            assert_eq!((op, got, used), (WS_BINARY, payload.clone(), frame.len()));
            assert!(decode(&frame[..frame.len() - 1]).expect("valid").is_none());
        }
        assert!(decode(&encode(WS_TEXT, &[0; 70_000], None)).is_err());
    }
}
