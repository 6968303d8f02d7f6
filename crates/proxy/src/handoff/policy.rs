//! The one-way listeners' rules as their agents need them (issue 12 part 5): an agent
//! evaluates a handed-off connection's later requests with the switch's rules, to tell
//! whether one goes to another group. Sent on every new control connection after WELCOME,
//! and pushed to every agent after each reload, so connections already handed off follow
//! the rules in force.

use crate::floor::snapshot::Snapshot;
use oneway::{Frame, Policy, Reader};
use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::Duration;

thread_local! {
    /// This worker's policies of the snapshot generation they were made from.
    static CACHE: RefCell<Option<(u64, Rc<[Policy]>)>> = const { RefCell::new(None) };
}

/// The policies of `snap`'s one-way listeners (made once per generation per worker).
pub(super) fn of(snap: &Snapshot) -> Rc<[Policy]> {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        match &*c {
            Some((generation, p)) if *generation == snap.generation => Rc::clone(p),
            _ => {
                let p: Rc<[Policy]> = build(snap).into();
                *c = Some((snap.generation, Rc::clone(&p)));
                p
            }
        }
    })
}

/// This switch process, as agents tell its policies from another's.
fn switch_id() -> u64 {
    static ID: OnceLock<u64> = OnceLock::new();
    *ID.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        (u64::from(std::process::id()) << 32) ^ nanos
    })
}

fn build(snap: &Snapshot) -> Vec<Policy> {
    snap.config
        .listeners
        .iter()
        .zip(&snap.listeners)
        .filter(|(cfg, _)| cfg.mode == config::Mode::OneWay)
        .map(|(cfg, rt)| {
            let (groups, rules) = match &rt.rules {
                Some(r) => (r.groups().to_vec(), r.to_string()),
                None => (Vec::new(), String::new()),
            };
            Policy {
                listener: cfg.name.clone(),
                switch: switch_id(),
                generation: snap.generation,
                default_group: cfg.default_group.clone(),
                groups,
                rules,
            }
        })
        .collect()
}

/// Pushes `snap`'s policies to every agent of its servers, on a thread of its own (each
/// agent within `timeout`; one that cannot be reached gets them with its next hand-off).
pub fn push_all(snap: &Snapshot) {
    let Some(oneway) = &snap.config.oneway else { return };
    let policies = build(snap);
    if policies.is_empty() {
        return;
    }
    let mut agents: Vec<SocketAddr> = snap
        .config
        .groups
        .iter()
        .flat_map(|g| &g.servers)
        .filter_map(|s| s.handoff.map(|h| h.agent))
        .collect();
    agents.sort_unstable();
    agents.dedup();
    let (token, timeout) = (oneway.token.clone(), oneway.handoff_timeout.max(Duration::from_millis(500)));
    let spawned = std::thread::Builder::new().name("policy-push".into()).spawn(move || {
        for agent in agents {
            if let Err(e) = push(agent, &token, &policies, timeout) {
                tracing::warn!(%agent, error = %e, "rules not pushed to the agent; it gets them with its next hand-off");
            }
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the thread that pushes rules to agents");
    }
}

/// One short control connection: HELLO, WELCOME, the policies, close.
fn push(agent: SocketAddr, token: &str, policies: &[Policy], timeout: Duration) -> std::io::Result<()> {
    let mut conn = TcpStream::connect_timeout(&agent, timeout)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    let mut out = Vec::new();
    Frame::Hello { token: token.as_bytes().to_vec() }.encode(&mut out);
    conn.write_all(&out)?;
    let mut reader = Reader::default();
    let mut buf = [0u8; 512];
    let answer = loop {
        if let Some(f) = reader.next_frame().map_err(std::io::Error::other)? {
            break f;
        }
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::Error::other("closed before WELCOME"));
        }
        reader.push(&buf[..n]);
    };
    if answer != Frame::Welcome {
        return Err(std::io::Error::other(format!("refused: {answer:?}")));
    }
    out.clear();
    for p in policies {
        Frame::Policy(p.clone()).encode(&mut out);
    }
    conn.write_all(&out)
}
