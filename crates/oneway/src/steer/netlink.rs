//! nftables set-element transactions over a raw `NETLINK_NETFILTER` socket: a batch of
//! NEWSETELEM / DESTROYSETELEM messages between BATCH_BEGIN and BATCH_END is one atomic
//! transaction (all or nothing). DESTROYSETELEM (Linux 6.3) deletes without failing when
//! the element is absent, so a flip or an unfreeze never fails on an entry that timed out.

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::time::Duration;

const NETLINK_NETFILTER: i32 = 12;
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DESTROYSETELEM: u16 = 30;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLMSG_ERROR: u16 = 2;
const NFPROTO_NETDEV: u8 = 5;
const NLA_F_NESTED: u16 = 0x8000;
const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
const NFTA_DATA_VALUE: u16 = 1;

/// One element operation.
pub(super) struct Op {
    create: bool,
    set: &'static str,
    key: [u8; 8],
    data: Option<Vec<u8>>,
}

impl Op {
    /// Adds (or refreshes) an element, with map data.
    pub(super) fn add(set: &'static str, key: [u8; 8], data: Option<Vec<u8>>) -> Op {
        Op { create: true, set, key, data }
    }

    /// Deletes an element if it is there.
    pub(super) fn destroy(set: &'static str, key: [u8; 8]) -> Op {
        Op { create: false, set, key, data: None }
    }
}

/// A netlink socket sending batches for one table.
pub(super) struct Batcher {
    sock: Socket,
    table: Vec<u8>,
    seq: u32,
}

impl Batcher {
    pub(super) fn open(table: &str) -> io::Result<Batcher> {
        let sock =
            Socket::new(Domain::from(libc::AF_NETLINK), Type::RAW, Some(Protocol::from(NETLINK_NETFILTER)))?;
        // An unbound netlink socket is bound by the kernel at its first send, and sends to
        // the kernel by default: no sockaddr_nl needs building.
        sock.set_read_timeout(Some(Duration::from_secs(1)))?;
        let mut name = table.as_bytes().to_vec();
        name.push(0);
        Ok(Batcher { sock, table: name, seq: 1 })
    }

    /// Runs `ops` as one transaction; the kernel's first error, if any.
    pub(super) fn run(&mut self, ops: &[Op]) -> io::Result<()> {
        let mut out = Vec::with_capacity(256);
        self.message(&mut out, NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES.to_be(), &[]);
        let first = self.seq;
        for op in ops {
            let payload = self.elements(op);
            let (kind, flags) = match op.create {
                true => (NFT_MSG_NEWSETELEM, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE),
                false => (NFT_MSG_DESTROYSETELEM, NLM_F_REQUEST | NLM_F_ACK),
            };
            self.message(&mut out, (NFNL_SUBSYS_NFTABLES << 8) | kind, flags, NFPROTO_NETDEV, 0, &payload);
        }
        let last = self.seq.wrapping_sub(1);
        self.message(&mut out, NFNL_MSG_BATCH_END, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES.to_be(), &[]);
        self.sock.send(&out)?;
        self.acks(first, last)
    }

    /// Waits for the ACK of every message in `first..=last` (sequence numbers); the first
    /// error wins. An aborted batch may not acknowledge the messages after the failing one.
    fn acks(&mut self, first: u32, last: u32) -> io::Result<()> {
        let mut pending = last.wrapping_sub(first) + 1;
        let mut buf = vec![0u8; 8192];
        while pending > 0 {
            let n = io::Read::read(&mut &self.sock, &mut buf)?;
            let bytes = &buf[..n];
            let mut at = 0;
            while at + 20 <= bytes.len() {
                let len = u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap_or_default()) as usize;
                let kind = u16::from_ne_bytes([bytes[at + 4], bytes[at + 5]]);
                if kind == NLMSG_ERROR {
                    let code = i32::from_ne_bytes(bytes[at + 16..at + 20].try_into().unwrap_or_default());
                    if code != 0 {
                        return Err(io::Error::from_raw_os_error(-code));
                    }
                    pending -= 1;
                }
                at += (len.max(16) + 3) & !3;
            }
        }
        Ok(())
    }

    fn elements(&self, op: &Op) -> Vec<u8> {
        let mut elem = nest(NFTA_SET_ELEM_KEY, &attr(NFTA_DATA_VALUE, &op.key));
        if let Some(data) = &op.data {
            elem.extend_from_slice(&nest(NFTA_SET_ELEM_DATA, &attr(NFTA_DATA_VALUE, data)));
        }
        let mut set = op.set.as_bytes().to_vec();
        set.push(0);
        let mut payload = attr(NFTA_SET_ELEM_LIST_TABLE, &self.table);
        payload.extend_from_slice(&attr(NFTA_SET_ELEM_LIST_SET, &set));
        payload.extend_from_slice(&nest(NFTA_SET_ELEM_LIST_ELEMENTS, &nest(NFTA_LIST_ELEM, &elem)));
        payload
    }

    /// `nlmsghdr` + `nfgenmsg` + payload.
    fn message(&mut self, out: &mut Vec<u8>, kind: u16, flags: u16, family: u8, res_id: u16, payload: &[u8]) {
        let len = u32::try_from(16 + 4 + payload.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(&flags.to_ne_bytes());
        out.extend_from_slice(&self.seq.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(&[family, 0]);
        out.extend_from_slice(&res_id.to_ne_bytes());
        out.extend_from_slice(payload);
        self.seq = self.seq.wrapping_add(1);
    }
}

fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = u16::try_from(4 + value.len()).unwrap_or(u16::MAX);
    let mut out = Vec::with_capacity(8 + value.len());
    out.extend_from_slice(&len.to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    while out.len() % 4 != 0 {
        out.push(0);
    }
    out
}

fn nest(kind: u16, inner: &[u8]) -> Vec<u8> {
    attr(kind | NLA_F_NESTED, inner)
}
