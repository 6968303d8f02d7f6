//! What a dumped TCP connection is made of, and how it travels: a fixed header of
//! little-endian integers, then the three byte queues, so the control channel can carry it
//! without a serialisation crate and the agent can refuse a malformed one precisely.

/// The kernel state of an established connection that `TCP_REPAIR` can move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpState {
    /// The MSS the connection uses (`TCP_MAXSEG` in repair mode: the negotiated clamp).
    pub mss: u32,
    /// Window scaling was negotiated: (send scale, receive scale).
    pub wscale: Option<(u8, u8)>,
    /// SACK was negotiated.
    pub sack: bool,
    /// Timestamps were negotiated; the current tsval (with the connection's random offset;
    /// bit 0 is the kernel's usec-timestamp flag, passed through as is).
    pub tsval: Option<u32>,
    /// `write_seq`: the sequence number after the last byte queued to send.
    pub snd_seq: u32,
    /// `rcv_nxt`: the sequence number after the last byte received.
    pub rcv_seq: u32,
    /// The windows (`TCP_REPAIR_WINDOW`).
    pub window: Window,
    /// Bytes sent or queued to send and not yet acknowledged, oldest first.
    pub outq: Vec<u8>,
    /// How many of `outq`'s last bytes were never sent.
    pub unsent: u32,
    /// Bytes received and not read by the application, oldest first.
    pub inq: Vec<u8>,
}

/// `struct tcp_repair_window`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Sequence number of the segment that last updated the send window.
    pub snd_wl1: u32,
    /// The peer's advertised window.
    pub snd_wnd: u32,
    /// The largest window the peer advertised.
    pub max_window: u32,
    /// The window this side advertises.
    pub rcv_wnd: u32,
    /// `rcv_nxt` when the window was last advertised.
    pub rcv_wup: u32,
}

/// Why bytes are not a [`TcpState`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the header or the queues it announces.
    #[error("truncated TCP state: {0} bytes")]
    Truncated(usize),
    /// Another encoding version.
    #[error("TCP state version {0}, this build reads {VERSION}")]
    Version(u8),
    /// Bytes after the queues.
    #[error("{0} bytes after the TCP state")]
    Trailing(usize),
    /// A value no kernel produces (e.g. a window scale above 14, more unsent bytes than queued).
    #[error("TCP state field {0} out of range")]
    Range(&'static str),
}

const VERSION: u8 = 1;
/// version, flags, snd scale, rcv scale, then 13 u32s.
const HEADER: usize = 4 + 13 * 4;

impl TcpState {
    /// Appends the encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let flags =
            u8::from(self.wscale.is_some()) | u8::from(self.sack) << 1 | u8::from(self.tsval.is_some()) << 2;
        let (snd_ws, rcv_ws) = self.wscale.unwrap_or((0, 0));
        out.extend_from_slice(&[VERSION, flags, snd_ws, rcv_ws]);
        let w = &self.window;
        let len = |q: &[u8]| u32::try_from(q.len()).unwrap_or(u32::MAX);
        for v in [
            self.mss,
            self.tsval.unwrap_or(0),
            self.snd_seq,
            self.rcv_seq,
            w.snd_wl1,
            w.snd_wnd,
            w.max_window,
            w.rcv_wnd,
            w.rcv_wup,
            self.unsent,
            len(&self.outq),
            len(&self.inq),
            0, // reserved
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.outq);
        out.extend_from_slice(&self.inq);
    }

    /// Reads an encoding made by [`TcpState::encode`], all of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<TcpState, DecodeError> {
        let header = bytes.get(..HEADER).ok_or(DecodeError::Truncated(bytes.len()))?;
        if header[0] != VERSION {
            return Err(DecodeError::Version(header[0]));
        }
        let (flags, snd_ws, rcv_ws) = (header[1], header[2], header[3]);
        let mut words = header[4..].chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        let mut next = || words.next().unwrap_or(0);
        let (mss, tsval, snd_seq, rcv_seq) = (next(), next(), next(), next());
        let window =
            Window { snd_wl1: next(), snd_wnd: next(), max_window: next(), rcv_wnd: next(), rcv_wup: next() };
        let (unsent, outq_len, inq_len) = (next(), next() as usize, next() as usize);
        let rest = &bytes[HEADER..];
        if rest.len() < outq_len.saturating_add(inq_len) {
            return Err(DecodeError::Truncated(bytes.len()));
        }
        if rest.len() > outq_len + inq_len {
            return Err(DecodeError::Trailing(rest.len() - outq_len - inq_len));
        }
        if flags & 1 != 0 && (snd_ws > 14 || rcv_ws > 14) {
            return Err(DecodeError::Range("wscale"));
        }
        if unsent as usize > outq_len {
            return Err(DecodeError::Range("unsent"));
        }
        if mss == 0 || mss > 65_535 {
            return Err(DecodeError::Range("mss"));
        }
        Ok(TcpState {
            mss,
            wscale: (flags & 1 != 0).then_some((snd_ws, rcv_ws)),
            sack: flags & 2 != 0,
            tsval: (flags & 4 != 0).then_some(tsval),
            snd_seq,
            rcv_seq,
            window,
            outq: rest[..outq_len].to_vec(),
            unsent,
            inq: rest[outq_len..outq_len + inq_len].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TcpState {
        TcpState {
            mss: 1448,
            wscale: Some((10, 7)),
            sack: true,
            tsval: Some(0xdead_beef),
            snd_seq: 1,
            rcv_seq: u32::MAX,
            window: Window { snd_wl1: 2, snd_wnd: 3, max_window: 4, rcv_wnd: 5, rcv_wup: 6 },
            outq: b"sent".to_vec(),
            unsent: 2,
            inq: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        }
    }

    #[test]
    fn round_trips() {
        for state in [
            sample(),
            TcpState { wscale: None, tsval: None, sack: false, outq: vec![], unsent: 0, ..sample() },
        ] {
            let mut bytes = Vec::new();
            state.encode(&mut bytes);
            assert_eq!(TcpState::decode(&bytes), Ok(state));
        }
    }

    #[test]
    fn refuses_what_no_kernel_sends() {
        let mut bytes = Vec::new();
        sample().encode(&mut bytes);
        assert_eq!(TcpState::decode(&bytes[..10]), Err(DecodeError::Truncated(10)));
        assert_eq!(TcpState::decode(&bytes[..bytes.len() - 1]), Err(DecodeError::Truncated(bytes.len() - 1)));
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(TcpState::decode(&longer), Err(DecodeError::Trailing(1)));
        let mut version = bytes.clone();
        version[0] = 9;
        assert_eq!(TcpState::decode(&version), Err(DecodeError::Version(9)));
        let mut scale = bytes.clone();
        scale[2] = 15;
        assert_eq!(TcpState::decode(&scale), Err(DecodeError::Range("wscale")));
        let mut unsent = Vec::new();
        TcpState { unsent: 5, ..sample() }.encode(&mut unsent);
        assert_eq!(TcpState::decode(&unsent), Err(DecodeError::Range("unsent")));
    }
}
