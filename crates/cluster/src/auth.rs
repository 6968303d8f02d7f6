//! The gossip transport: chitchat's messages over UDP, each datagram sealed with an
//! HMAC-SHA256 tag made with the cluster key. A datagram whose tag is missing or wrong is
//! dropped before chitchat decodes a byte of it, and counted, so a host without the key
//! can neither join, nor change what the cluster believes, nor make a node parse its input.
//!
//! Replays of a genuine datagram are harmless: Scuttlebutt applies only versions newer than
//! those it holds, so an old delta changes nothing.

use crate::stats::Stats;
use async_trait::async_trait;
use chitchat::transport::{Socket, Transport};
use chitchat::{ChitchatMessage, Deserializable, Serializable};
use ring::hmac;
use std::net::SocketAddr;
use std::sync::Arc;

/// The tag's length: a full HMAC-SHA256.
const TAG_LEN: usize = 32;
/// The largest UDP payload (what chitchat's own transport accepts).
const MAX_DATAGRAM: usize = 65_507;

/// Opens sockets that seal and check every datagram with `key` (no key: datagrams are
/// plain, allowed only on loopback by the config).
pub(crate) struct SealedUdp {
    key: Option<hmac::Key>,
    stats: Arc<Stats>,
    /// A socket already bound (a binary upgrade's), opened instead of binding one.
    bound: std::sync::Mutex<Option<std::net::UdpSocket>>,
}

impl SealedUdp {
    pub(crate) fn new(key: Option<&str>, stats: Arc<Stats>) -> SealedUdp {
        let key = key.map(|k| hmac::Key::new(hmac::HMAC_SHA256, k.as_bytes()));
        SealedUdp { key, stats, bound: std::sync::Mutex::new(None) }
    }

    /// Opens `socket` (bound already) instead of binding a new one.
    pub(crate) fn with_socket(self, socket: Option<std::net::UdpSocket>) -> SealedUdp {
        SealedUdp { bound: std::sync::Mutex::new(socket), ..self }
    }

    /// The socket taken over, if any, for this address.
    fn take_bound(&self, bind: SocketAddr) -> anyhow::Result<Option<tokio::net::UdpSocket>> {
        let taken = self.bound.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(socket) = taken.filter(|s| s.local_addr().is_ok_and(|a| a == bind)) else { return Ok(None) };
        socket.set_nonblocking(true)?;
        Ok(Some(tokio::net::UdpSocket::from_std(socket)?))
    }
}

#[async_trait]
impl Transport for SealedUdp {
    async fn open(&self, bind: SocketAddr) -> anyhow::Result<Box<dyn Socket>> {
        let socket = match self.take_bound(bind)? {
            Some(socket) => socket,
            None => tokio::net::UdpSocket::bind(bind)
                .await
                .map_err(|e| anyhow::anyhow!("[cluster] cannot bind {bind}/udp: {e}"))?,
        };
        Ok(Box::new(SealedSocket {
            socket,
            key: self.key.clone(),
            stats: Arc::clone(&self.stats),
            buf: vec![0; MAX_DATAGRAM],
        }))
    }
}

struct SealedSocket {
    socket: tokio::net::UdpSocket,
    key: Option<hmac::Key>,
    stats: Arc<Stats>,
    buf: Vec<u8>,
}

#[async_trait]
impl Socket for SealedSocket {
    async fn send(&mut self, to: SocketAddr, msg: ChitchatMessage) -> anyhow::Result<()> {
        let datagram = seal(self.key.as_ref(), &msg.serialize_to_vec());
        self.stats.sent(datagram.len());
        // A peer that is down or unreachable is the failure detector's business, not an
        // error that should stop gossip.
        if let Err(e) = self.socket.send_to(&datagram, to).await {
            tracing::debug!(%to, error = %e, "gossip datagram not sent");
        }
        Ok(())
    }

    async fn recv(&mut self) -> anyhow::Result<(SocketAddr, ChitchatMessage)> {
        loop {
            let (n, from) = match self.socket.recv_from(&mut self.buf).await {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::debug!(error = %e, "gossip receive failed");
                    continue;
                }
            };
            self.stats.received(n);
            match open(self.key.as_ref(), &self.buf[..n]) {
                Ok(mut payload) => match ChitchatMessage::deserialize(&mut payload) {
                    Ok(msg) => return Ok((from, msg)),
                    Err(e) => self.stats.reject(from, &format!("undecodable message: {e}")),
                },
                Err(reason) => self.stats.reject(from, reason),
            }
        }
    }
}

/// `payload` followed by its tag (or alone without a key).
pub(crate) fn seal(key: Option<&hmac::Key>, payload: &[u8]) -> Vec<u8> {
    let mut datagram = Vec::with_capacity(payload.len() + TAG_LEN);
    datagram.extend_from_slice(payload);
    if let Some(key) = key {
        datagram.extend_from_slice(hmac::sign(key, payload).as_ref());
    }
    datagram
}

/// The payload of a datagram whose tag checks out (compared in constant time by ring).
pub(crate) fn open<'a>(key: Option<&hmac::Key>, datagram: &'a [u8]) -> Result<&'a [u8], &'static str> {
    let Some(key) = key else { return Ok(datagram) };
    if datagram.len() < TAG_LEN {
        return Err("shorter than its authentication tag");
    }
    let (payload, tag) = datagram.split_at(datagram.len() - TAG_LEN);
    hmac::verify(key, payload, tag).map_err(|_| "wrong authentication tag (not our cluster key)")?;
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> hmac::Key {
        hmac::Key::new(hmac::HMAC_SHA256, k.as_bytes())
    }

    #[test]
    fn a_sealed_datagram_opens_only_with_the_same_key() {
        let sealed = seal(Some(&key("0123456789abcdef")), b"digest");
        assert_eq!(open(Some(&key("0123456789abcdef")), &sealed), Ok(&b"digest"[..]));
        assert!(open(Some(&key("0123456789abcdeX")), &sealed).is_err());
        assert!(open(Some(&key("0123456789abcdef")), b"digest").is_err(), "no tag");
        let mut flipped = sealed.clone();
        flipped[0] ^= 1;
        assert!(open(Some(&key("0123456789abcdef")), &flipped).is_err(), "payload changed");
    }

    #[test]
    fn without_a_key_datagrams_are_plain() {
        assert_eq!(seal(None, b"x"), b"x");
        assert_eq!(open(None, b"x"), Ok(&b"x"[..]));
    }
}
