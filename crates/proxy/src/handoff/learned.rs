//! Session cookies an agent learned (cookie persistence `learn` on one-way connections,
//! issue 12 part 6): the switch never sees a handed-off connection's answers, so the agent
//! reports each session cookie its server sets ([`oneway::Frame::Learned`]), and the group's
//! learn table records it here — the client's next connections carrying the cookie go to
//! that server, as when the switch learns from an answer it carried.

use crate::floor::persist;

/// Server `tag` of `group` set the cookie of `set_cookie`.
pub(super) fn learned(group: &str, tag: &str, set_cookie: &[u8]) {
    let Some(worker) = super::worker::this() else { return };
    let snap = worker.shared.snapshot.load();
    let Some(g) = snap.groups.iter().find(|g| g.name == group) else { return };
    let (Some(p), Some(server)) = (g.persistence.as_deref(), g.servers.iter().find(|s| s.cookie == tag))
    else {
        return;
    };
    if !persist::learn(p, set_cookie, server.id) {
        tracing::debug!(group, tag, "a learned cookie the group does not learn; ignored");
    }
}
