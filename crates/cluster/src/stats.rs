//! What the gossip transport counts: datagrams and bytes each way, and the datagrams
//! refused (wrong or missing authentication tag, undecodable), with the last refusal's
//! sender and reason for the admin view.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Counters shared by the transport and the views.
#[derive(Default)]
pub(crate) struct Stats {
    sent: AtomicU64,
    sent_bytes: AtomicU64,
    received: AtomicU64,
    received_bytes: AtomicU64,
    rejected: AtomicU64,
    last_rejected: Mutex<Option<(SocketAddr, String)>>,
}

/// A copy of the counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Counts {
    /// Datagrams sent.
    pub sent: u64,
    /// Bytes sent (with tags).
    pub sent_bytes: u64,
    /// Datagrams received, refused ones included.
    pub received: u64,
    /// Bytes received.
    pub received_bytes: u64,
    /// Datagrams dropped: wrong or missing tag, or undecodable.
    pub rejected: u64,
    /// Who sent the last refused datagram, and why it was refused.
    pub last_rejected: Option<String>,
}

impl Stats {
    pub(crate) fn sent(&self, bytes: usize) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.sent_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn received(&self, bytes: usize) {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.received_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn reject(&self, from: SocketAddr, reason: &str) {
        let first = self.rejected.fetch_add(1, Ordering::Relaxed) == 0;
        // Logged once at warn (someone is sending to the gossip port without the key),
        // then at debug: a flood must not flood the log too.
        if first {
            tracing::warn!(%from, reason, "gossip datagram refused");
        } else {
            tracing::debug!(%from, reason, "gossip datagram refused");
        }
        if let Ok(mut last) = self.last_rejected.lock() {
            *last = Some((from, reason.to_string()));
        }
    }

    pub(crate) fn counts(&self) -> Counts {
        let last = self.last_rejected.lock().ok().and_then(|l| l.clone());
        Counts {
            sent: self.sent.load(Ordering::Relaxed),
            sent_bytes: self.sent_bytes.load(Ordering::Relaxed),
            received: self.received.load(Ordering::Relaxed),
            received_bytes: self.received_bytes.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            last_rejected: last.map(|(from, why)| format!("{from}: {why}")),
        }
    }
}
