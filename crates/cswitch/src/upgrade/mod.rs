//! Binary upgrades (issue 16): `SIGUSR2`, `POST /api/upgrade` and `cswitch ctl upgrade`
//! replace the running binary without losing a connection.
//!
//! The old process starts its binary again (the path it was started from, read from disk
//! anew, with the same arguments) with a channel to it (`wire`), and sends it every
//! listening socket. The new process loads the config, takes the sockets over, starts
//! serving and says so (`child`). Only then does the old one stop accepting (the sockets
//! are the same objects, so the kernel's queues and new SYNs go to the new process) and
//! hand its idle keep-alive connections over, each connection with a request in flight
//! once it is answered; when it holds nothing (or `grace_period` has passed) it exits. A
//! new binary that fails to start, to load the config or to bind changes nothing: the old
//! process goes on serving and the caller gets the reason. A new process that crashes
//! after it said it serves, while the old one still drains, is replaced by the old one
//! again (`recover`). SIGTERM to the old process during an upgrade: before the new one
//! serves, the upgrade is abandoned (the new process is ended); while draining, the old one
//! stops waiting for its connections and shuts down as usual.

mod child;
mod notify;
mod recover;
mod report;
mod wire;

pub use child::Inheritance;

use admin::{AcceptGate, UpgradeRefused};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a new process may take to connect, load its config and serve.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an upgrade waits for this process to finish taking over from its own
/// predecessor (upgrades in a row).
const INHERIT_WAIT: Duration = Duration::from_secs(10);

/// The environment variable that names the binary to start instead of this one's own path
/// (tests point it at a broken binary).
pub const BINARY_ENV: &str = "CSWITCH_UPGRADE_BINARY";

/// Runs binary upgrades of this process, one at a time.
pub struct Upgrader {
    switch: Arc<proxy::Switch>,
    exe: std::io::Result<PathBuf>,
    args: Vec<OsString>,
    admin: Mutex<Option<(std::net::TcpListener, AcceptGate)>>,
    one_at_a_time: Mutex<()>,
    /// Set while this process still receives connections from its predecessor.
    pub(crate) inheriting: Arc<AtomicBool>,
    /// Connections taken over from the predecessor so far.
    pub(crate) adopted: Arc<std::sync::atomic::AtomicU64>,
    handed_over: AtomicBool,
    /// Set when this process is told to stop (SIGTERM, SIGINT): a running upgrade gives up.
    stopping: AtomicBool,
    /// Where the running upgrade is, and how the last one ended.
    progress: Mutex<report::Progress>,
    /// Woken once this process has handed over and drained: it exits.
    pub done: tokio::sync::Notify,
}

impl Upgrader {
    /// Upgrades of `switch`, to the binary this process was started from.
    pub fn new(switch: Arc<proxy::Switch>) -> Upgrader {
        Upgrader {
            switch,
            exe: std::env::current_exe(),
            args: std::env::args_os().skip(1).collect(),
            admin: Mutex::new(None),
            one_at_a_time: Mutex::new(()),
            inheriting: Arc::new(AtomicBool::new(false)),
            adopted: Arc::default(),
            handed_over: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            progress: Mutex::default(),
            done: tokio::sync::Notify::new(),
        }
    }

    /// The admin listener, whose socket goes to the new process too.
    pub fn set_admin(&self, admin: Option<&admin::AdminHandle>) -> std::io::Result<()> {
        let entry = admin.map(|a| a.socket().map(|s| (s, a.gate()))).transpose()?;
        *self.admin.lock().unwrap_or_else(|e| e.into_inner()) = entry;
        Ok(())
    }

    /// One upgrade: on success, what moved (this process then exits); on failure, why
    /// (nothing changed).
    pub fn run(&self, why: &str) -> Result<Value, UpgradeRefused> {
        let refused = |status, reason: String| UpgradeRefused { status, reason };
        let Ok(_one) = self.one_at_a_time.try_lock() else {
            return Err(refused(409, "an upgrade is already running".into()));
        };
        if self.handed_over.load(Ordering::Acquire) {
            return Err(refused(409, "this process has already handed over to a new one".into()));
        }
        let waited = Instant::now();
        while self.inheriting.load(Ordering::Acquire) {
            if waited.elapsed() > INHERIT_WAIT {
                let reason = "still taking over from the previous process; try again";
                return Err(refused(409, reason.into()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let started = Instant::now();
        tracing::info!(cause = why, "upgrade: starting the new binary");
        self.progress().at("starting", json!({ "cause": why }));
        let outcome = self.start_and_hand_over(started);
        let last = match &outcome {
            Ok(report) => json!({ "done": report }),
            Err(refused) => json!({ "failed": refused.reason, "status": refused.status }),
        };
        self.progress().ended(last);
        outcome
    }

    /// `GET /api/upgrade`: where the running upgrade is, and how the last one ended; in
    /// a new process still taking over, how many connections it has taken so far.
    pub fn status(&self) -> Value {
        let mut status = self.progress().status(self.switch.handover_tally(), self.switch.open_connections());
        if self.inheriting.load(Ordering::Acquire) {
            status["taking_over"] = json!({ "adopted_so_far": self.adopted.load(Ordering::Relaxed) });
        }
        status
    }

    fn progress(&self) -> std::sync::MutexGuard<'_, report::Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn start_and_hand_over(&self, started: Instant) -> Result<Value, UpgradeRefused> {
        let refused = |status, reason: String| UpgradeRefused { status, reason };
        match self.start_new() {
            Ok((channel, child)) => self.hand_over(channel, child, started),
            Err(reason) if self.stopping.load(Ordering::Acquire) => {
                tracing::warn!("upgrade given up: {reason}");
                Err(refused(503, reason))
            }
            Err(reason) => {
                tracing::error!("upgrade failed, this process goes on serving: {reason}");
                Err(refused(500, format!("upgrade failed, nothing changed: {reason}")))
            }
        }
    }

    /// This process is told to stop: an upgrade that has not reached the hand-over gives up
    /// (its new process is ended), one that is draining stops waiting. Returns once no
    /// upgrade runs: whether this process has handed over (the new one serves on).
    pub fn abandon(&self) -> bool {
        self.stopping.store(true, Ordering::Release);
        drop(self.one_at_a_time.lock().unwrap_or_else(|e| e.into_inner()));
        self.handed_over.load(Ordering::Acquire)
    }

    /// Starts the new process, sends it the listening sockets and waits until it serves.
    fn start_new(&self) -> Result<(wire::Channel, Child), String> {
        let exe = match std::env::var_os(BINARY_ENV) {
            Some(path) => PathBuf::from(path),
            None => self.exe.as_ref().map_err(|e| format!("this binary's path is unknown: {e}"))?.clone(),
        };
        let listener = wire::Listener::bind().map_err(|e| format!("upgrade channel: {e}"))?;
        let mut child = Command::new(&exe)
            .args(&self.args)
            .env(wire::ENV, &listener.name)
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let pid = child.id();
        tracing::info!(binary = %exe.display(), pid, "upgrade: new process started");
        let deadline = Instant::now() + START_TIMEOUT;
        let stopping = &self.stopping;
        let result = connect(&listener, &mut child, deadline, stopping).and_then(|channel| {
            // A new process that cannot load its config says so and exits, maybe while the
            // sockets are still being sent: its own reason is the one to give.
            let sent = self.send_sockets(&channel);
            wait_serving(&channel, &mut child, deadline, stopping)?;
            sent.map(|()| channel)
        });
        match result {
            Ok(channel) => Ok((channel, child)),
            Err(reason) => {
                end(&mut child);
                Err(reason)
            }
        }
    }

    /// The state the new process needs before it serves, then every listening socket: the
    /// listeners', `[agents]`'s and the admin listener's.
    fn send_sockets(&self, channel: &wire::Channel) -> Result<(), String> {
        let state = self.switch.upgrade_state(false);
        channel
            .send_state(state)
            .map_err(|e| format!("sending the health verdicts and sticky entries: {e}"))?;
        let failed = |e: std::io::Error| format!("sending the listening sockets: {e}");
        let sockets = self.switch.listening_sockets().map_err(failed)?;
        for (name, listeners) in &sockets.listeners {
            for chunk in listeners.chunks(wire::MAX_FDS) {
                let fds: Vec<_> = chunk.iter().map(AsFd::as_fd).collect();
                channel.send(&json!({ "kind": "listener", "name": name }), &fds).map_err(failed)?;
            }
        }
        if let Some(agents) = &sockets.agents {
            channel.send(&json!({ "kind": "agents" }), &[agents.as_fd()]).map_err(failed)?;
        }
        if let Some(gossip) = &sockets.gossip {
            channel.send(&json!({ "kind": "gossip" }), &[gossip.as_fd()]).map_err(failed)?;
        }
        if let Some((admin, _)) = &*self.admin.lock().unwrap_or_else(|e| e.into_inner()) {
            channel.send(&json!({ "kind": "admin" }), &[admin.as_fd()]).map_err(failed)?;
        }
        channel.send(&json!({ "kind": "sockets-end" }), &[]).map_err(failed)
    }

    /// The new process serves: stop accepting, hand idle connections over, wait until
    /// this process holds nothing, and say what happened; or, if the new process crashes
    /// meanwhile, take everything back and say why.
    fn hand_over(
        &self,
        channel: wire::Channel,
        mut child: Child,
        started: Instant,
    ) -> Result<Value, UpgradeRefused> {
        let pid = child.id();
        self.handed_over.store(true, Ordering::Release);
        let serving_after = started.elapsed();
        notify::main_pid(pid);
        if let Some((_, gate)) = &*self.admin.lock().unwrap_or_else(|e| e.into_inner()) {
            gate.close();
        }
        let open_then = self.switch.open_connections();
        let channel = Arc::new(channel);
        let sink = Arc::clone(&channel);
        self.switch.hand_over(Box::new(move |conn: &proxy::Moving| {
            let mut message = json!({
                "kind": "conn",
                "listener": conn.listener,
                "peer": conn.peer.to_string(),
                "served": conn.served,
            });
            let Some(tunnel) = &conn.tunnel else { return sink.send(&message, &[conn.stream.as_fd()]) };
            message["tunnel"] =
                json!({ "kind": tunnel.kind, "to_server": tunnel.to_server.len(), "server": tunnel.server_name });
            let bytes = [tunnel.to_server.as_slice(), &tunnel.to_client];
            sink.send_with(&message, &bytes, &[conn.stream.as_fd(), tunnel.server.as_fd()])
        }));
        tracing::info!(pid, open = open_then, "upgrade: the new process serves; handing connections over");
        self.progress().at("handing_over", json!({ "new_pid": pid, "open_then": open_then }));
        if let Err(status) = self.drain(&mut child) {
            return Err(self.take_back(pid, &status));
        }
        let tally = self.switch.handover_tally().unwrap_or_default();
        let left = self.switch.open_connections();
        if let Err(e) = channel.send_state(self.switch.upgrade_state(true)) {
            tracing::warn!(error = %e, "counters not handed on; the new process counts from zero");
        }
        let _ = channel.send(&json!({ "kind": "done", "moved": tally.moved }), &[]);
        let duration = started.elapsed();
        let report = report::done(&report::Done { pid, serving_after, duration, open_then, left, tally });
        self.done.notify_one();
        Ok(report)
    }

    /// Waits until this process holds no client connection, at most `grace_period`, or
    /// until it is told to stop; `Err` with the new process's exit status if it crashed
    /// meanwhile.
    fn drain(&self, child: &mut Child) -> Result<(), std::process::ExitStatus> {
        let deadline = Instant::now() + self.switch.config().global.grace_period;
        let mut next_line = Instant::now() + Duration::from_secs(1);
        loop {
            if Instant::now() >= next_line {
                next_line += Duration::from_secs(1);
                report::draining(self.switch.handover_tally(), self.switch.open_connections());
            }
            if let Some(status) = recover::crashed(child) {
                return Err(status);
            }
            if self.switch.open_connections() == 0 || Instant::now() >= deadline {
                return Ok(());
            }
            if self.stopping.load(Ordering::Acquire) {
                tracing::info!("told to stop while handing over: not waiting for the rest");
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Why an upgrade gives up when this process is told to stop.
const ABANDONED: &str = "this process is stopping (SIGTERM or SIGINT): the upgrade is abandoned";

/// Waits for the new process to connect to the channel.
fn connect(
    listener: &wire::Listener,
    child: &mut Child,
    deadline: Instant,
    stopping: &AtomicBool,
) -> Result<wire::Channel, String> {
    loop {
        if stopping.load(Ordering::Acquire) {
            return Err(ABANDONED.into());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("the new process exited ({status}) before it connected"));
        }
        if Instant::now() >= deadline {
            return Err(format!("the new process did not connect within {} s", START_TIMEOUT.as_secs()));
        }
        match listener.accept(Duration::from_millis(100), child.id()) {
            Ok(Some(channel)) => return Ok(channel),
            Ok(None) => {}
            Err(e) => return Err(format!("upgrade channel: {e}")),
        }
    }
}

/// Waits until the new process says it serves, or why it cannot.
fn wait_serving(
    channel: &wire::Channel,
    child: &mut Child,
    deadline: Instant,
    stopping: &AtomicBool,
) -> Result<(), String> {
    loop {
        if stopping.load(Ordering::Acquire) {
            return Err(ABANDONED.into());
        }
        if Instant::now() >= deadline {
            return Err(format!("the new process was not serving within {} s", START_TIMEOUT.as_secs()));
        }
        match channel.recv(Some(Duration::from_millis(100))) {
            Ok(Some((message, _, _))) => match message["kind"].as_str() {
                Some("serving") => return Ok(()),
                Some("failed") => {
                    let reason = message["reason"].as_str().unwrap_or("no reason given");
                    return Err(format!("the new process cannot serve: {reason}"));
                }
                _ => return Err(format!("unexpected message from the new process: {message}")),
            },
            Ok(None) => return Err(exited(child)),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Err(exited(child)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(format!("upgrade channel: {e}")),
        }
    }
}

/// Why the new process is gone, once it closed the channel.
fn exited(child: &mut Child) -> String {
    end(child);
    let status = match child.try_wait() {
        Ok(Some(status)) => status.to_string(),
        Ok(None) => "still running".into(),
        Err(e) => e.to_string(),
    };
    format!("the new process exited ({status}) before it was serving")
}

/// Ends a new process that will not serve: waits a moment for it to exit by itself (it
/// said why it fails), then kills it; reaped either way.
fn end(child: &mut Child) {
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}
