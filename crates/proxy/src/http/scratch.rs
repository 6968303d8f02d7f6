//! Per-request working space, recycled through a per-worker spare list so requests do not
//! allocate (a worker is a thread: the list is a thread-local). A space is boxed, so taking
//! and giving it back moves a pointer, not its ~700 bytes (five copies of them per request,
//! and the request's future held it inline).

use crate::floor::buf::IoBuf;
use crate::floor::spares::Spares;
use crate::http::log_notes::LogNotes;
use crate::upstream::decide::Notes;
use http1::{RequestHead, ResponseHead};
use std::cell::RefCell;

/// Per-request working space.
pub struct Scratch {
    /// The request head being handled.
    pub req: RequestHead,
    /// The response head being forwarded.
    pub resp: ResponseHead,
    /// The edited request head sent to the server (kept for retries).
    pub req_out: Vec<u8>,
    /// Output space for response heads and de-chunked bodies.
    pub resp_out: Vec<u8>,
    /// Buffer for bytes read from the server (empty until the first exchange).
    pub sbuf: IoBuf,
    /// What the access log keeps of the head (the head's bytes are consumed early).
    pub log: LogNotes,
    /// What the routing decision left: rule label, header edits, redirect, persistence.
    pub notes: Notes,
    /// Body bytes read before routing (the rules needed them), raw as they will be forwarded.
    pub held: Vec<u8>,
    /// The same body, de-chunked, for the rules.
    pub payload: Vec<u8>,
    /// The whole body is in `held` (or there is none): the request can be replayed.
    pub body_complete: bool,
    /// The request's hash key for the group's scheduler (valid when `has_key`).
    pub key: Vec<u8>,
    /// Whether `key` holds this request's key.
    pub has_key: bool,
    /// The client connection closes after this response (`connection_persistence = "close"`
    /// and the request changed server).
    pub close_after: bool,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            req: RequestHead { headers: Vec::new(), ..RequestHead::new() },
            resp: ResponseHead { headers: Vec::new(), ..ResponseHead::new() },
            // Allocated when first used (a connection whose head is still arriving holds
            // none of them); recycled scratch spaces keep theirs.
            req_out: Vec::new(),
            resp_out: Vec::new(),
            sbuf: IoBuf::new(0),
            log: LogNotes::default(),
            notes: Notes::default(),
            held: Vec::new(),
            payload: Vec::new(),
            body_complete: false,
            key: Vec::new(),
            has_key: false,
            close_after: false,
        }
    }

    /// Forgets the previous request (and a body buffer a large body grew past 64 KiB, so a
    /// burst of large bodies does not pin its memory in the recycled scratch spaces).
    fn reset(&mut self) {
        if self.held.capacity() > 64 * 1024 {
            self.held = Vec::new();
            self.payload = Vec::new();
        }
        self.notes.reset();
        self.log.clear();
        self.held.clear();
        self.payload.clear();
        self.body_complete = false;
        self.has_key = false;
        self.close_after = false;
    }
}

/// Spare scratch spaces a worker keeps at least; beyond them, those the last second's load
/// did not need are freed (see [`Spares`]).
const KEEP: usize = 16;

thread_local! {
    static SPARE: RefCell<Spares<Box<Scratch>>> = const { RefCell::new(Spares::new(KEEP)) };
}

/// A scratch space, reset, recycled when one is spare.
pub fn take() -> Box<Scratch> {
    let recycled = SPARE.with(|spare| spare.borrow_mut().pop());
    let mut s = recycled.unwrap_or_else(|| Box::new(Scratch::new()));
    s.reset();
    s
}

/// Gives a scratch space back.
pub fn give(scratch: Box<Scratch>) {
    SPARE.with(|spare| spare.borrow_mut().push(scratch));
}

/// Frees the spare scratch spaces the last period's load did not need (the worker's
/// housekeeping, once a second).
pub fn trim() {
    SPARE.with(|spare| spare.borrow_mut().trim());
}
