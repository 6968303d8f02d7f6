//! The cswitch admin listener: JSON API, Prometheus metrics and the stats page.
//!
//! Owns the operator's HTTP door into a running [`proxy::Switch`]: it reads the switch's
//! views (status, groups, servers, stick tables, rules), turns them into JSON, Prometheus
//! text and the stats page, and makes run-time edits (add, drain, remove, weight, state,
//! reload) through [`proxy::Switch::apply`] — the same path as a config file reload, so
//! nothing is ever half-applied. It runs on its own thread with a single-threaded runtime,
//! away from the workers: a slow scrape or a reload never takes a worker's event loop.
//!
//! Layout: `server` (accept loop, connection limit, one request per connection), `ctx`
//! (what every handler shares: the switch, the edit lock, the token rule), `http`
//! (request reading with size and time limits, responses), `history` (the stats page's
//! last five minutes, sampled every second), `auth` (the token: Bearer or
//! Basic, compared in constant time), `routes` (path and method → handler, the read-only
//! views and explain), `edits` (the mutations, serialized, and drain-then-remove),
//! `metrics` (the Prometheus exposition built from the views at each scrape), `process`
//! (the standard `process_*` figures from `/proc/self`).

mod auth;
mod ctx;
mod edits;
mod history;
mod http;
mod metrics;
mod process;
mod routes;
mod server;

use proxy::Switch;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// What `POST /api/upgrade` runs (the binary owns binary upgrades): blocks until the new
/// process serves and the old one is drained, then answers with what happened.
pub type UpgradeHook = Arc<dyn Fn() -> Result<serde_json::Value, UpgradeRefused> + Send + Sync>;

/// What `GET /api/upgrade` answers: where a running upgrade is, how the last one ended.
pub type UpgradeStatus = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// Why an upgrade changed nothing, with the status the API answers.
#[derive(Debug)]
pub struct UpgradeRefused {
    /// 409 (one already running), 500 (the new process failed), ...
    pub status: u16,
    /// Why, for the operator.
    pub reason: String,
}

/// How [`start_with`] starts the listener.
#[derive(Default)]
pub struct Options {
    /// A listening socket to serve on instead of binding `[admin] bind` (a binary upgrade
    /// takes over the old process's).
    pub listener: Option<std::net::TcpListener>,
    /// What `POST /api/upgrade` runs (`None`: it answers 501).
    pub upgrade: Option<UpgradeHook>,
    /// What `GET /api/upgrade` answers (`None`: 501).
    pub upgrade_status: Option<UpgradeStatus>,
}

/// The running admin listener. Dropping it stops the listener (as [`AdminHandle::stop`]).
pub struct AdminHandle {
    addr: SocketAddr,
    /// A second descriptor of the listening socket (for a binary upgrade's new process);
    /// closed by `stop`.
    socket: Option<std::net::TcpListener>,
    gate: AcceptGate,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Stops the listener accepting while the connections it has go on (a binary upgrade:
/// the new process accepts on the same socket from then on). Cloneable, thread-safe.
#[derive(Clone, Default)]
pub struct AcceptGate(Arc<(std::sync::atomic::AtomicBool, tokio::sync::Notify)>);

impl AcceptGate {
    /// No more connections are accepted.
    pub fn close(&self) {
        self.0 .0.store(true, std::sync::atomic::Ordering::Release);
        self.0 .1.notify_waiters();
    }

    /// Whether it is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.0 .0.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Accepts again (a binary upgrade's new process died: this one serves on).
    pub fn open(&self) {
        self.0 .0.store(false, std::sync::atomic::Ordering::Release);
        self.0 .1.notify_waiters();
    }

    /// Returns once the gate is closed.
    pub(crate) async fn closed(&self) {
        self.until(true).await;
    }

    /// Returns once the gate is open again.
    pub(crate) async fn opened(&self) {
        self.until(false).await;
    }

    async fn until(&self, closed: bool) {
        loop {
            let notified = self.0 .1.notified();
            if self.0 .0.load(std::sync::atomic::Ordering::Acquire) == closed {
                return;
            }
            notified.await;
        }
    }
}

impl AdminHandle {
    /// The address the listener is bound to (the real port when the config says port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A second descriptor of the listening socket.
    pub fn socket(&self) -> io::Result<std::net::TcpListener> {
        match &self.socket {
            Some(socket) => socket.try_clone(),
            None => Err(io::Error::other("the admin listener is stopped")),
        }
    }

    /// What stops the accepting alone.
    pub fn gate(&self) -> AcceptGate {
        self.gate.clone()
    }

    /// Stops accepting, drops open admin connections and pending drain-then-remove tasks
    /// (a draining server then stays in the config, draining), and waits for the thread.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.socket = None;
    }
}

impl Drop for AdminHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts the admin listener configured in `switch.config().admin`; `Ok(None)` when the
/// config has no `[admin]`. The bind address is read once: a reload that changes it takes
/// effect on restart, while the token is read again on every request.
pub fn start(switch: Arc<Switch>) -> io::Result<Option<AdminHandle>> {
    start_with(switch, Options::default())
}

/// [`start`], with a listening socket given, or `POST /api/upgrade` wired.
pub fn start_with(switch: Arc<Switch>, options: Options) -> io::Result<Option<AdminHandle>> {
    let Some(admin) = switch.config().admin else { return Ok(None) };
    let listener = match options.listener {
        Some(listener) => listener,
        None => std::net::TcpListener::bind(admin.bind)
            .map_err(|e| io::Error::new(e.kind(), format!("[admin] cannot bind {}: {e}", admin.bind)))?,
    };
    listener.set_nonblocking(true)?;
    let socket = listener.try_clone()?;
    let addr = listener.local_addr()?;
    // Built here, not on the thread, so a runtime that cannot start is an error to the caller.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut ctx = ctx::Ctx::new(switch, admin.token, addr, options.upgrade);
    ctx.upgrade_status = options.upgrade_status;
    let ctx = Arc::new(ctx);
    let (stop, stopped) = oneshot::channel();
    let gate = AcceptGate::default();
    let closed = gate.clone();
    let thread = std::thread::Builder::new()
        .name("cswitch-admin".into())
        .spawn(move || runtime.block_on(server::serve(listener, ctx, stopped, closed)))?;
    Ok(Some(AdminHandle { addr, socket: Some(socket), gate, stop: Some(stop), thread: Some(thread) }))
}
