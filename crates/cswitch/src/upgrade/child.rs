//! The new process's side of a binary upgrade: connect to the old process's channel
//! (named in the environment), say why if the config does not load or the switch does not
//! start (the old process then goes on serving), take over the listening sockets, say
//! when it serves, then adopt the connections the old process hands over until it is done.

use super::wire::{Channel, ENV};
use serde_json::json;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// This process's link to the process it takes over from.
pub struct Inheritance {
    channel: Channel,
}

/// The sockets the old process sent.
pub struct Sockets {
    /// The listeners' and `[agents]`'s.
    pub switch: proxy::Inherited,
    /// The admin listener's.
    pub admin: Option<std::net::TcpListener>,
    /// Health verdicts and sticky entries, to take in before serving.
    pub state: Vec<proxy::UpgradeState>,
}

impl Inheritance {
    /// The link, when this process was started by an upgrade.
    pub fn from_env() -> anyhow::Result<Option<Inheritance>> {
        let channel = Channel::from_env()
            .map_err(|e| anyhow::anyhow!("connecting to the upgrading process ({ENV}): {e}"))?;
        Ok(channel.map(|channel| Inheritance { channel }))
    }

    /// Tells the old process why this one cannot serve (it goes on serving).
    pub fn fail(&self, reason: &str) {
        let _ = self.channel.send(&json!({ "kind": "failed", "reason": reason }), &[]);
    }

    /// The listening sockets the old process sends.
    pub fn sockets(&self) -> anyhow::Result<Sockets> {
        let mut sockets = Sockets { switch: proxy::Inherited::default(), admin: None, state: Vec::new() };
        loop {
            let Some((message, fds, _)) = self.channel.recv(None)? else {
                anyhow::bail!("the upgrading process closed the channel before sending its sockets");
            };
            let kind = message["kind"].as_str().unwrap_or("");
            match kind {
                "listener" => {
                    let name = message["name"].as_str().unwrap_or("").to_string();
                    let listeners = fds.into_iter().map(std::net::TcpListener::from);
                    match sockets.switch.listeners.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, all)) => all.extend(listeners),
                        None => sockets.switch.listeners.push((name, listeners.collect())),
                    }
                }
                "agents" => sockets.switch.agents = fds.into_iter().next().map(std::net::UdpSocket::from),
                "gossip" => sockets.switch.gossip = fds.into_iter().next().map(std::net::UdpSocket::from),
                "admin" => sockets.admin = fds.into_iter().next().map(std::net::TcpListener::from),
                "state" => sockets.state.push(serde_json::from_value(message["state"].clone())?),
                "sockets-end" => return Ok(sockets),
                other => anyhow::bail!("unexpected message from the upgrading process: {other}"),
            }
        }
    }

    /// Tells the old process this one serves, then adopts the connections it hands over
    /// (on a thread of its own) until it is done; `inheriting` is cleared then.
    pub fn serving(
        self,
        switch: Arc<proxy::Switch>,
        inheriting: Arc<AtomicBool>,
        adopted: Arc<AtomicU64>,
    ) -> anyhow::Result<()> {
        inheriting.store(true, Ordering::Release);
        self.channel.send(&json!({ "kind": "serving", "pid": std::process::id() }), &[])?;
        tracing::info!("serving; the old process hands its connections over");
        std::thread::Builder::new().name("cswitch-inherit".into()).spawn(move || {
            let adopted = self.adopt_all(&switch, &adopted);
            tracing::info!(adopted, "the old process is done; taking over complete");
            inheriting.store(false, Ordering::Release);
        })?;
        Ok(())
    }

    fn adopt_all(&self, switch: &proxy::Switch, so_far: &AtomicU64) -> u64 {
        let mut adopted = 0;
        loop {
            let (message, fds, bytes) = match self.channel.recv(None) {
                Ok(Some(m)) => m,
                Ok(None) => return adopted,
                Err(e) => {
                    tracing::warn!(error = %e, "upgrade channel failed; no more connections come from the old process");
                    return adopted;
                }
            };
            match message["kind"].as_str() {
                Some("conn") => {
                    if adopt(switch, &message, fds, bytes) {
                        adopted += 1;
                        so_far.store(adopted, Ordering::Relaxed);
                    }
                }
                Some("state") => match serde_json::from_value(message["state"].clone()) {
                    Ok(state) => switch.import_upgrade_state(&state),
                    Err(e) => tracing::warn!(error = %e, "the old process's state not understood; skipped"),
                },
                Some("done") => return adopted,
                _ => tracing::warn!(%message, "unexpected message from the old process; ignored"),
            }
        }
    }
}

/// One connection the old process handed over: its socket, and for a tunnel the server's
/// socket and the buffered bytes (to the server first, then to the client).
fn adopt(switch: &proxy::Switch, message: &serde_json::Value, fds: Vec<OwnedFd>, bytes: Vec<u8>) -> bool {
    let mut fds = fds.into_iter();
    let Some(fd) = fds.next() else { return false };
    let peer = message["peer"].as_str().and_then(|p| p.parse().ok());
    let Some(peer) = peer else {
        tracing::warn!(%message, "moved connection without a peer address; closed");
        return false;
    };
    switch.adopt(proxy::Moving {
        stream: std::net::TcpStream::from(fd),
        listener: message["listener"].as_str().unwrap_or("").to_string(),
        peer,
        served: message["served"].as_bool().unwrap_or(false),
        tunnel: tunnel(&message["tunnel"], fds.next(), bytes),
    });
    true
}

/// A moved tunnel's other end, when the message is about one.
fn tunnel(
    about: &serde_json::Value,
    server: Option<OwnedFd>,
    mut bytes: Vec<u8>,
) -> Option<Box<proxy::Tunnel>> {
    let kind = about["kind"].as_str()?.to_string();
    let Some(server) = server else {
        tracing::warn!(kind, "moved tunnel without its server's socket; its client is closed");
        return None;
    };
    let to_server_len =
        usize::try_from(about["to_server"].as_u64().unwrap_or(0)).unwrap_or(0).min(bytes.len());
    let to_client = bytes.split_off(to_server_len);
    let server_name = serde_json::from_value(about["server"].clone()).ok().flatten();
    let server = std::net::TcpStream::from(server);
    Some(Box::new(proxy::Tunnel { server, to_server: bytes, to_client, kind, server_name }))
}
