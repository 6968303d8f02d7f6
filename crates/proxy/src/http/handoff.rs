//! Phase "hand-off" (one-way listeners, issue 12): before the head is rewritten and the
//! first connect, a request
//! whose server has an agent is not forwarded — its whole connection is handed to that
//! agent (`crate::handoff`), which gives it to the server, and the server answers the
//! client directly. When the hand-off cannot be made the request goes on two-way.
//!
//! A request whose body is still arriving moves too: the freeze drops the client's later
//! segments (it retransmits them to the server after the flip), the dump carries those
//! already in the socket's receive queue, and the switch sends what it read — the head,
//! the body moved aside for the rules, the bytes buffered after them — in that order, in
//! front of that queue. Nothing is read twice or invented.

use crate::floor::stream::ClientStream;
use crate::handoff;
use crate::http::txn::Txn;
use crate::upstream::decide::Decision;
use rules::Sticky;

impl Txn<'_> {
    /// `Some(false)`: handed off, the connection is no longer the switch's (close it
    /// without a word: it is in repair mode). `None`: serve it two-way.
    pub(super) async fn try_hand_off(&mut self, d: &Decision, index: usize) -> Option<bool> {
        let group = d.group;
        let l = &self.snap.config.listeners[self.listener];
        if l.mode != config::Mode::OneWay {
            return None;
        }
        let oneway = self.snap.config.oneway.as_ref()?;
        let target = handoff::target(self.snap, group, index)?;
        let ClientStream::Plain(tcp) = &self.client.stream else { return None };
        let buf = self.client.buf.as_ref()?;
        // What the client sent and the switch read, in order: the head, the body moved
        // aside for the rules, and whatever followed (more body, or a pipelined request).
        let (bytes, head_len) = (buf.filled(), self.s.req.head_len);
        let mut already_read = Vec::with_capacity(bytes.len() + self.s.held.len());
        already_read.extend_from_slice(&bytes[..head_len]);
        already_read.extend_from_slice(&self.s.held);
        already_read.extend_from_slice(&bytes[head_len..]);
        let route = handoff::route::of(self.snap, self.listener, group, index, d.sticky == Sticky::IpPort);
        let server = self.snap.group(group).servers[index].known_as;
        let ask = handoff::Ask {
            client: tcp,
            already_read: &already_read,
            target,
            server,
            oneway,
            snap: self.snap,
            route,
        };
        match handoff::hand_off(&ask).await {
            Ok(()) => {
                self.worker.shared.stats.inc(crate::floor::stats::Counter::Handoffs);
                Some(false)
            }
            Err(reason) => {
                self.worker.shared.stats.inc(reason);
                None
            }
        }
    }
}
