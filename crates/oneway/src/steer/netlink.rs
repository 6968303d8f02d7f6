//! nftables set elements over a raw `NETLINK_NETFILTER` socket: a batch of NEWSETELEM /
//! DELSETELEM / DESTROYSETELEM messages between BATCH_BEGIN and BATCH_END is one atomic
//! transaction (all or nothing). DESTROYSETELEM (Linux 6.3) deletes without failing when
//! the element is absent, so a flip or an unfreeze never fails on an entry that timed out;
//! DELSETELEM fails on an absent element, which makes a batch conditional on it. A
//! GETSETELEM dump lists a set's elements with the time each has left.

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::time::Duration;

const NETLINK_NETFILTER: i32 = 12;
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_GETSETELEM: u16 = 13;
const NFT_MSG_DELSETELEM: u16 = 14;
const NFT_MSG_DESTROYSETELEM: u16 = 30;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_CREATE: u16 = 0x400;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NFPROTO_NETDEV: u8 = 5;
const NLA_F_NESTED: u16 = 0x8000;
const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
const NFTA_SET_ELEM_TIMEOUT: u16 = 4;
const NFTA_SET_ELEM_EXPIRATION: u16 = 5;
const NFTA_DATA_VALUE: u16 = 1;
const NLA_TYPE_MASK: u16 = 0x3fff;
/// A dump's datagrams are at most 32 KiB (the kernel's cap for a large receive buffer).
const DUMP_BUF: usize = 64 * 1024;
/// Bounds the datagrams read for one dump (a million-element set is about 3,000).
const MAX_DUMP_DATAGRAMS: usize = 100_000;

/// One element operation.
pub(super) struct Op {
    kind: Kind,
    set: &'static str,
    key: [u8; 8],
    data: Option<Vec<u8>>,
}

#[derive(Clone, Copy)]
enum Kind {
    Add,
    Delete,
    Destroy,
}

impl Op {
    /// Adds (or refreshes) an element, with map data.
    pub(super) fn add(set: &'static str, key: [u8; 8], data: Option<Vec<u8>>) -> Op {
        Op { kind: Kind::Add, set, key, data }
    }

    /// Deletes an element; the whole batch fails (`ENOENT`) if it is not there.
    pub(super) fn delete(set: &'static str, key: [u8; 8]) -> Op {
        Op { kind: Kind::Delete, set, key, data: None }
    }

    /// Deletes an element if it is there.
    pub(super) fn destroy(set: &'static str, key: [u8; 8]) -> Op {
        Op { kind: Kind::Destroy, set, key, data: None }
    }
}

/// A set element as a dump lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Element {
    /// The key's bytes.
    pub(super) key: Vec<u8>,
    /// The element's own timeout, when the kernel lists it (ms).
    pub(super) timeout_ms: Option<u64>,
    /// Time left before it expires (ms).
    pub(super) expires_ms: Option<u64>,
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
        for (i, op) in ops.iter().enumerate() {
            let payload = self.elements(op);
            let (kind, flags) = match op.kind {
                Kind::Add => (NFT_MSG_NEWSETELEM, NLM_F_REQUEST | NLM_F_CREATE),
                Kind::Delete => (NFT_MSG_DELSETELEM, NLM_F_REQUEST),
                Kind::Destroy => (NFT_MSG_DESTROYSETELEM, NLM_F_REQUEST),
            };
            // Only the last message asks for an ACK: the kernel reports every failing one
            // anyway, in order, before it, so one read tells success (each ACK is a
            // datagram of its own: asking for all of them cost one read per operation).
            let ack = if i + 1 == ops.len() { NLM_F_ACK } else { 0 };
            self.message(
                &mut out,
                (NFNL_SUBSYS_NFTABLES << 8) | kind,
                flags | ack,
                NFPROTO_NETDEV,
                0,
                &payload,
            );
        }
        let last = self.seq.wrapping_sub(1);
        self.message(&mut out, NFNL_MSG_BATCH_END, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES.to_be(), &[]);
        self.sock.send(&out)?;
        self.acks(first, last)
    }

    /// Waits for the ACK of the last message (`last`), or the first error of any message in
    /// `first..=last` (sequence numbers), whichever comes first: errors are delivered in
    /// the order of the messages, before the last one's ACK. An aborted batch may not
    /// acknowledge the last message at all, but always reports its error. Replies to other
    /// sequence numbers (an earlier batch's leftovers) are skipped, so they never count for
    /// this one.
    fn acks(&mut self, first: u32, last: u32) -> io::Result<()> {
        let span = last.wrapping_sub(first);
        let mut buf = [0u8; 1024];
        loop {
            let n = io::Read::read(&mut &self.sock, &mut buf)?;
            let bytes = &buf[..n];
            let mut at = 0;
            while at + 20 <= bytes.len() {
                let len = u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap_or_default()) as usize;
                let kind = u16::from_ne_bytes([bytes[at + 4], bytes[at + 5]]);
                let seq = u32::from_ne_bytes(bytes[at + 8..at + 12].try_into().unwrap_or_default());
                if kind == NLMSG_ERROR && seq.wrapping_sub(first) <= span {
                    let code = i32::from_ne_bytes(bytes[at + 16..at + 20].try_into().unwrap_or_default());
                    if code != 0 {
                        return Err(io::Error::from_raw_os_error(-code));
                    }
                    if seq == last {
                        return Ok(());
                    }
                }
                at += (len.max(16) + 3) & !3;
            }
        }
    }

    /// Every element of `set` (one `NFT_MSG_GETSETELEM` dump, read to `NLMSG_DONE`).
    pub(super) fn dump(&mut self, set: &str) -> io::Result<Vec<Element>> {
        let mut name = set.as_bytes().to_vec();
        name.push(0);
        let mut payload = attr(NFTA_SET_ELEM_LIST_TABLE, &self.table);
        payload.extend_from_slice(&attr(NFTA_SET_ELEM_LIST_SET, &name));
        let seq = self.seq;
        let mut out = Vec::with_capacity(64);
        let kind = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETSETELEM;
        self.message(&mut out, kind, NLM_F_REQUEST | NLM_F_DUMP, NFPROTO_NETDEV, 0, &payload);
        self.sock.send(&out)?;
        let mut buf = vec![0u8; DUMP_BUF];
        let mut elements = Vec::new();
        for _ in 0..MAX_DUMP_DATAGRAMS {
            let n = io::Read::read(&mut &self.sock, &mut buf)?;
            if dump_datagram(&buf[..n], seq, &mut elements)? {
                return Ok(elements);
            }
        }
        Err(io::Error::new(io::ErrorKind::InvalidData, "netlink: set dump did not end"))
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

/// Reads one datagram of the dump with sequence number `seq` into `out`; true at its end.
fn dump_datagram(mut bytes: &[u8], seq: u32, out: &mut Vec<Element>) -> io::Result<bool> {
    while bytes.len() >= 16 {
        let len = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        if len < 16 || len > bytes.len() {
            return Err(malformed("message length"));
        }
        let kind = u16::from_ne_bytes([bytes[4], bytes[5]]);
        let msg_seq = u32::from_ne_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        let payload = &bytes[16..len];
        bytes = &bytes[((len + 3) & !3).min(bytes.len())..];
        if msg_seq != seq {
            continue;
        }
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let code = payload.get(..4).ok_or_else(|| malformed("error"))?;
                let code = i32::from_ne_bytes([code[0], code[1], code[2], code[3]]);
                return if code == 0 { Ok(true) } else { Err(io::Error::from_raw_os_error(-code)) };
            }
            _ => elements_of(payload.get(4..).ok_or_else(|| malformed("nfgenmsg"))?, out)?,
        }
    }
    Ok(false)
}

/// A NEWSETELEM message's attributes: ELEMENTS { LIST_ELEM { KEY { VALUE }, TIMEOUT,
/// EXPIRATION, … } … }.
fn elements_of(attrs: &[u8], out: &mut Vec<Element>) -> io::Result<()> {
    for (kind, list) in attributes(attrs)? {
        if kind != NFTA_SET_ELEM_LIST_ELEMENTS {
            continue;
        }
        for (kind, elem) in attributes(list)? {
            if kind != NFTA_LIST_ELEM {
                continue;
            }
            let mut e = Element { key: Vec::new(), timeout_ms: None, expires_ms: None };
            for (kind, value) in attributes(elem)? {
                match kind {
                    NFTA_SET_ELEM_KEY => {
                        let found = attributes(value)?.into_iter().find(|(k, _)| *k == NFTA_DATA_VALUE);
                        e.key = found.map(|(_, v)| v.to_vec()).unwrap_or_default();
                    }
                    NFTA_SET_ELEM_TIMEOUT => e.timeout_ms = be64(value),
                    NFTA_SET_ELEM_EXPIRATION => e.expires_ms = be64(value),
                    _ => {}
                }
            }
            out.push(e);
        }
    }
    Ok(())
}

/// The (type, value) pairs of a run of attributes.
fn attributes(mut buf: &[u8]) -> io::Result<Vec<(u16, &[u8])>> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
        if len < 4 || len > buf.len() {
            return Err(malformed("attribute length"));
        }
        out.push((u16::from_ne_bytes([buf[2], buf[3]]) & NLA_TYPE_MASK, &buf[4..len]));
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    Ok(out)
}

fn be64(value: &[u8]) -> Option<u64> {
    value.try_into().ok().map(u64::from_be_bytes)
}

fn malformed(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("malformed netlink reply: {what}"))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A NEWSETELEM dump message (seq 5) with one element: key, timeout, expiration.
    fn element_message(seq: u32, key: &[u8], timeout_ms: u64, expires_ms: u64) -> Vec<u8> {
        let mut elem = nest(NFTA_SET_ELEM_KEY, &attr(NFTA_DATA_VALUE, key));
        elem.extend(attr(NFTA_SET_ELEM_TIMEOUT, &timeout_ms.to_be_bytes()));
        elem.extend(attr(NFTA_SET_ELEM_EXPIRATION, &expires_ms.to_be_bytes()));
        let mut body = vec![NFPROTO_NETDEV, 0, 0, 0];
        body.extend(nest(NFTA_SET_ELEM_LIST_ELEMENTS, &nest(NFTA_LIST_ELEM, &elem)));
        header((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSETELEM, seq, &body)
    }

    fn header(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(16 + body.len() as u32).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(&0u16.to_ne_bytes());
        out.extend_from_slice(&seq.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn a_dump_yields_keys_and_times_until_done() {
        let key = [10, 0, 0, 10, 0x9c, 0x40, 0, 0];
        let mut datagram = element_message(5, &key, 120_000, 118_500);
        datagram.extend(element_message(4, &[1; 8], 1, 1)); // another request's: skipped
        let mut got = Vec::new();
        assert!(!dump_datagram(&datagram, 5, &mut got).unwrap());
        assert_eq!(
            got,
            [Element { key: key.to_vec(), timeout_ms: Some(120_000), expires_ms: Some(118_500) }]
        );
        assert!(dump_datagram(&header(NLMSG_DONE, 5, &[0; 4]), 5, &mut got).unwrap());
        let error = header(NLMSG_ERROR, 5, &(-libc::ENOENT).to_ne_bytes());
        assert_eq!(dump_datagram(&error, 5, &mut got).unwrap_err().raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn truncated_dumps_are_errors_not_panics() {
        let mut got = Vec::new();
        let mut short = element_message(1, &[0; 8], 1, 1);
        short.truncate(30);
        assert!(dump_datagram(&short, 1, &mut got).is_err());
        assert!(attributes(&[9, 0, 1, 0]).is_err());
        assert_eq!(be64(&[1, 2, 3]), None);
    }
}
