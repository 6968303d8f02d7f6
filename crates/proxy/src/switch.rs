//! The running switch: binds the listeners (one SO_REUSEPORT socket per worker), starts the
//! workers, swaps config snapshots on reload, and shuts down gracefully.

use crate::accept;
use crate::bind::{bind_agents, bind_all, keep_copies, worker_count};
use crate::floor::handover::{Moving, Sink};
use crate::floor::shared::Shared;
use crate::floor::snapshot::{ListenerParts, Snapshot};
use crate::floor::stats::{Counter, Stats};
use crate::floor::tables::sticky_ip::StickyIp;
use crate::floor::tables::tls_sessions::TlsSessions;
use crate::observe::access_log::{LogOutput, Target};
use crate::observe::view;
use crate::tls::termination;
use crate::upgrade::Inherited;
use arc_swap::ArcSwap;
use config::Config;
use rules::{CompileOptions, RuleSet};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Why a reload was refused (the running config stays as it was).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// Listeners cannot change without a restart (their sockets are bound once).
    #[error("listener '{0}' was added, removed or rebound; listeners change only on restart")]
    ListenersChanged(String),
    /// A rule file does not read or compile (every error with file:line:col).
    #[error("{0}")]
    Rules(RuleErrors),
    /// A listener's TLS certificate or key does not load.
    #[error("{0}")]
    Tls(String),
    /// The access log's file or syslog socket does not open.
    #[error("{0}")]
    AccessLog(String),
}

/// Why [`Switch::edit`] changed nothing.
#[derive(Debug)]
pub enum EditFailed<E> {
    /// The edit itself was refused.
    Edit(E),
    /// The switch refused the edited config (see [`ReloadError`]).
    Refused(ReloadError),
}

/// Why listeners' rule files cannot be used: one entry per file, as values (`Display`
/// prints each with file:line:col, as `cswitch check` does).
#[derive(Debug, Default)]
pub struct RuleErrors(pub Vec<RuleFileError>);

/// One rule file that cannot be used.
#[derive(Debug)]
pub enum RuleFileError {
    /// It could not be read.
    Unreadable {
        /// The listener naming it.
        listener: String,
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        error: String,
    },
    /// It does not compile.
    Invalid(rules::Diagnostics),
}

impl std::fmt::Display for RuleErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for e in &self.0 {
            match e {
                RuleFileError::Unreadable { listener, path, error } => writeln!(
                    f,
                    "{}: error: cannot read rules of listener '{listener}': {error}",
                    path.display()
                )?,
                RuleFileError::Invalid(diags) => write!(f, "{diags}")?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for RuleErrors {}

/// Compiled rules of each listener, in config order (`None`: no rule file). Warnings (rules
/// that can never fire) are logged; errors are returned, every one with file:line:col.
pub fn compile_rules(config: &Config) -> Result<Vec<Option<Arc<RuleSet>>>, RuleErrors> {
    let groups: Vec<&str> = config.groups.iter().map(|g| g.name.as_str()).collect();
    let mut out = Vec::with_capacity(config.listeners.len());
    let mut errors = RuleErrors::default();
    for l in &config.listeners {
        let Some(path) = &l.rules else {
            out.push(None);
            continue;
        };
        let source = match std::fs::read_to_string(path) {
            Ok(s) => s,
            Err(e) => {
                let (listener, path, error) = (l.name.clone(), path.clone(), e.to_string());
                errors.0.push(RuleFileError::Unreadable { listener, path, error });
                continue;
            }
        };
        let options = CompileOptions { xml_form_field: l.xml_form_field.clone() };
        match RuleSet::compile_with(&source, path, &groups, &options) {
            Ok(rules) => {
                if !rules.warnings().is_empty() {
                    tracing::warn!("rules of listener '{}':\n{}", l.name, rules.warnings());
                }
                out.push(Some(Arc::new(rules)));
            }
            Err(diags) => errors.0.push(RuleFileError::Invalid(diags)),
        }
    }
    if errors.0.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// A running switch.
pub struct Switch {
    shared: Arc<Shared>,
    /// Where the workers' access-log lines go (reopened on reload and on request).
    log: Arc<LogOutput>,
    addrs: Vec<(String, SocketAddr)>,
    agents_addr: Option<SocketAddr>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The listening sockets (second descriptors of the workers'), for a binary upgrade to
    /// hand to the new process. Closed at shutdown, so nothing is left listening.
    sockets: Mutex<Inherited>,
    /// Each worker's inbox of connections a binary upgrade's old process hands over.
    adopt: Vec<tokio::sync::mpsc::UnboundedSender<Moving>>,
    next_adopt: AtomicUsize,
    /// The config as last loaded from the file: what the admin API changed since is the
    /// difference to the one in force (a binary upgrade carries it over).
    from_file: Mutex<Config>,
}

impl Switch {
    /// Binds every listener and starts the workers. Errors (address in use, bad access-log
    /// path) are returned before anything runs.
    pub fn start(config: Config) -> io::Result<Switch> {
        Switch::start_with(config, Inherited::default())
    }

    /// [`Switch::start`], taking over the listening sockets of `inherited` (a binary
    /// upgrade's old process) where the config binds the same listeners.
    pub fn start_with(config: Config, mut inherited: Inherited) -> io::Result<Switch> {
        let rules =
            compile_rules(&config).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let tls =
            termination::acceptors(&config).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let parts = ListenerParts { rules, tls };
        let from_file = Mutex::new(config.clone());
        let most_inherited = inherited.listeners.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
        // Every inherited socket keeps a worker accepting on it: one closed here would lose
        // the connections queued on it.
        let workers = worker_count(&config).max(most_inherited);
        let (addrs, sockets) = bind_all(&config, workers, &mut inherited)?;
        let kept = keep_copies(&config, &sockets)?;
        let log = Arc::new(LogOutput::open(&config.access_log)?);
        crate::handoff::steering::install(&config)
            .map_err(|e| io::Error::new(e.kind(), format!("one-way steering table: {e}")))?;
        let sticky_lifetime = config.timeouts.sticky_ip;
        let tls_lifetime = config.timeouts.tls_session;
        let agents = match inherited.agents.take() {
            Some(socket) if config.agents.is_some() => Some(socket),
            _ => bind_agents(&config)?,
        };
        let agents_copy = agents.as_ref().map(std::net::UdpSocket::try_clone).transpose()?;
        let agents_addr = agents.as_ref().map(|s| s.local_addr()).transpose()?;
        let listener_count = config.listeners.len();
        let shared = Arc::new(Shared {
            snapshot: ArcSwap::from_pointee(Snapshot::build(config, parts, None, 0)),
            stats: Stats::new(listener_count),
            client_conns: AtomicUsize::new(0),
            shutting_down: AtomicBool::new(false),
            shutdown_notify: tokio::sync::Notify::new(),
            sticky_ip: StickyIp::new(sticky_lifetime),
            last_server: Default::default(),
            tls_sessions: TlsSessions::new(tls_lifetime),
            weights_epoch: Default::default(),
            listeners: (0..listener_count).map(|_| Default::default()).collect(),
            started: std::time::Instant::now(),
            snapshot_writer: Mutex::new(()),
            handover: Default::default(),
            cluster: std::sync::OnceLock::new(),
        });
        crate::health::cluster::join(&shared)?;
        let mut threads = Vec::with_capacity(workers);
        let mut adopt = Vec::with_capacity(workers);
        for (i, listeners) in sockets.into_iter().enumerate() {
            let (shared, log) = (Arc::clone(&shared), Arc::clone(&log));
            let (inbox, adopted) = tokio::sync::mpsc::unbounded_channel();
            adopt.push(inbox);
            let t = std::thread::Builder::new()
                .name(format!("cswitch-worker-{i}"))
                .spawn(move || accept::run(shared, listeners, log, adopted))?;
            threads.push(t);
        }
        threads.push(crate::health::spawn(Arc::clone(&shared), agents)?);
        threads.extend(crate::handoff::life::spawn(Arc::clone(&shared))?);
        let sockets = Mutex::new(Inherited { listeners: kept, agents: agents_copy });
        let next_adopt = AtomicUsize::new(0);
        Ok(Switch {
            shared,
            log,
            addrs,
            agents_addr,
            threads: Mutex::new(threads),
            sockets,
            adopt,
            next_adopt,
            from_file,
        })
    }

    /// The address listener `name` is bound to (useful with port 0).
    pub fn local_addr(&self, name: &str) -> Option<SocketAddr> {
        self.addrs.iter().find(|(n, _)| n == name).map(|(_, a)| *a)
    }

    /// The UDP address agent reports are received on (`[agents]`; useful with port 0).
    pub fn agents_addr(&self) -> Option<SocketAddr> {
        self.agents_addr
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Version, uptime, generation, listeners and counters.
    pub fn status(&self) -> view::StatusView {
        view::status(&self.shared, &self.addrs)
    }

    /// One-way hand-offs: latency by phase and the CPU they cost (process-wide).
    pub fn handoff_timing(&self) -> crate::HandoffTimingView {
        crate::handoff::timing::view()
    }

    /// Every group with its scheduler, checks and load.
    pub fn groups(&self) -> Vec<view::GroupView> {
        view::groups(&self.shared.snapshot.load())
    }

    /// Every server of every group: state, health, weights, capacity, traffic, latency.
    pub fn servers(&self) -> Vec<view::ServerView> {
        view::servers(&self.shared.snapshot.load())
    }

    /// The stick tables and their sizes.
    pub fn stick_tables(&self) -> Vec<view::StickTableView> {
        view::stick_tables(&self.shared, &self.shared.snapshot.load())
    }

    /// How `raw` (a request head and body) from `src` would be routed on `listener`
    /// (default: the first): the running switch's rules, tables and effective weights.
    pub fn explain(
        &self,
        listener: Option<&str>,
        raw: &[u8],
        src: SocketAddr,
    ) -> Result<crate::explain::Explanation, String> {
        let snap = self.shared.snapshot.load();
        let tables = crate::upstream::decide::Tables::of(&self.shared);
        crate::explain::explain(&snap, tables, listener, raw, src)
    }

    /// The cluster as this node sees it (`None` without `[cluster]`).
    pub fn cluster(&self) -> Option<Arc<cluster::View>> {
        self.shared.cluster.get().map(|c| c.view())
    }

    /// Drains this node from the cluster's L4 tier, or makes it ready again
    /// (`None` without `[cluster]` or listeners).
    pub fn set_cluster_serving(&self, serving: cluster::Serving) -> Option<cluster::Serving> {
        crate::health::cluster::set_serving(&self.shared, serving)
    }

    /// Before a clean stop (not a hand-over): drains this node from the cluster's L4 tier
    /// and waits, at most `limit`, until the tier sends it no new flow.
    pub fn leave_l4_tier(&self, limit: std::time::Duration) {
        crate::health::cluster::leave_l4_tier(&self.shared, limit);
    }

    /// Each listener's rules with their hit counts.
    pub fn rules(&self) -> Vec<view::RulesView> {
        view::rules(&self.shared.snapshot.load())
    }

    /// The config in force.
    pub fn config(&self) -> Config {
        self.shared.snapshot.load().config.clone()
    }

    /// Applies a validated config: new requests use it, requests in flight finish on the
    /// old one. Listener and `[agents]` bind changes are refused (nothing changes then).
    pub fn reload(&self, config: Config) -> Result<u64, ReloadError> {
        let _writer = self.shared.snapshot_writer.lock().unwrap_or_else(|e| e.into_inner());
        self.reload_locked(config).map(|(generation, _)| generation)
    }

    /// [`Switch::reload`] with the snapshot writer lock already held; also says how many
    /// listeners' rules changed.
    fn reload_locked(&self, config: Config) -> Result<(u64, usize), ReloadError> {
        let current = self.shared.snapshot.load_full();
        if let Err(e) = same_listeners(&current.config, &config) {
            self.shared.stats.inc(Counter::ReloadsFailed);
            return Err(e);
        }
        let rules = compile_rules(&config).map_err(|e| {
            self.shared.stats.inc(Counter::ReloadsFailed);
            ReloadError::Rules(e)
        })?;
        let tls = termination::acceptors(&config).map_err(|e| {
            self.shared.stats.inc(Counter::ReloadsFailed);
            ReloadError::Tls(e)
        })?;
        // Reopened on every reload (so a reload also follows a rotation), before anything
        // changes: a log that cannot open refuses the reload.
        let log = Target::open(&config.access_log).map_err(|e| {
            self.shared.stats.inc(Counter::ReloadsFailed);
            ReloadError::AccessLog(e.to_string())
        })?;
        let generation = current.generation + 1;
        let rule_files = log_rule_changes(&current, &rules, &config);
        self.log.set(log);
        let parts = ListenerParts { rules, tls };
        let next = Snapshot::build(config, parts, Some(&current), generation);
        let lifetime = next.config.timeouts.sticky_ip;
        self.shared.sticky_ip.reconfigure(lifetime, |id| next.group_of(id).is_some());
        let tls_lifetime = next.config.timeouts.tls_session;
        self.shared.tls_sessions.reconfigure(tls_lifetime, |id| next.group_of(id).is_some());
        // Agents evaluate the later requests of connections they hold with these rules.
        crate::handoff::policy::push_all(&next);
        crate::health::cluster::config_changed(&self.shared, &next.config);
        self.shared.snapshot.store(Arc::new(next));
        self.shared.stats.inc(Counter::Reloads);
        Ok((generation, rule_files))
    }

    /// Applies `config` like [`Switch::reload`] and logs what changed; the changes are
    /// returned. Config file reloads (SIGHUP, the admin API) come through here.
    pub fn apply(&self, config: Config, why: &str) -> Result<(u64, Vec<config::Change>), ReloadError> {
        // Always applied, even when equal: the listeners' rule files are compiled again.
        let loaded = config.clone();
        match self.edit_with(why, |_| Ok::<Config, ReloadError>(config), false) {
            Ok(applied) => {
                *self.from_file.lock().unwrap_or_else(|e| e.into_inner()) = loaded;
                Ok(applied.unwrap_or_else(|| (self.shared.snapshot.load().generation, Vec::new())))
            }
            Err(EditFailed::Edit(e) | EditFailed::Refused(e)) => Err(e),
        }
    }

    /// Reads the config in force, lets `make` derive the next one and applies it, all under
    /// the snapshot writer lock: a file reload and an admin edit that race can never undo
    /// each other. `Ok(None)` when `make` returns the config unchanged (nothing applied,
    /// no new generation).
    pub fn edit<E>(
        &self,
        why: &str,
        make: impl FnOnce(&Config) -> Result<Config, E>,
    ) -> Result<Option<(u64, Vec<config::Change>)>, EditFailed<E>> {
        self.edit_with(why, make, true)
    }

    fn edit_with<E>(
        &self,
        why: &str,
        make: impl FnOnce(&Config) -> Result<Config, E>,
        skip_unchanged: bool,
    ) -> Result<Option<(u64, Vec<config::Change>)>, EditFailed<E>> {
        let _writer = self.shared.snapshot_writer.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.shared.snapshot.load_full();
        let next = make(&current.config).map_err(EditFailed::Edit)?;
        if skip_unchanged && next == current.config {
            return Ok(None);
        }
        let changes = config::diff(&current.config, &next);
        let (generation, rule_files) = self.reload_locked(next).map_err(EditFailed::Refused)?;
        tracing::info!(
            generation,
            changes = changes.len(),
            rule_files_changed = rule_files,
            cause = why,
            "config reloaded"
        );
        for change in &changes {
            tracing::info!("  {change}");
        }
        Ok(Some((generation, changes)))
    }

    /// Re-reads the config file the switch was started with (or last reloaded from) and
    /// applies it. A file that does not validate changes nothing; its diagnostics are
    /// returned (and counted as a failed reload).
    /// A refusal is logged at ERROR with its cause and reason, whoever asked.
    pub fn reload_file(&self, why: &str) -> Result<(u64, Vec<config::Change>), String> {
        let path = self.config().source;
        let result = match config::load(&path) {
            Ok(config) => self.apply(config, why).map_err(|e| e.to_string()),
            Err(diags) => {
                self.note_failed_reload();
                Err(diags.to_string())
            }
        };
        if let Err(reason) = &result {
            tracing::error!("reload refused ({why}), config unchanged:\n{reason}");
        }
        result
    }

    /// Reopens the access log (after the operator rotated it: SIGUSR1, `cswitch ctl
    /// reopen`): lines written from now on go to a file at the configured path, created if
    /// it was moved away. A failure keeps the old file and is returned (and logged).
    pub fn reopen_log(&self, why: &str) -> io::Result<()> {
        let _writer = self.shared.snapshot_writer.lock().unwrap_or_else(|e| e.into_inner());
        match Target::open(&self.shared.snapshot.load().config.access_log) {
            Ok(target) => {
                self.log.set(target);
                tracing::info!(cause = why, "access log reopened");
                Ok(())
            }
            Err(e) => {
                tracing::error!(cause = why, error = %e, "access log not reopened; lines go on to the old file");
                Err(e)
            }
        }
    }

    /// Counts a reload refused before it reached the switch (e.g. an invalid file).
    pub fn note_failed_reload(&self) {
        self.shared.stats.inc(Counter::ReloadsFailed);
    }

    /// Stops accepting, lets in-flight requests finish within the grace period, and waits
    /// for the workers to exit. Idempotent.
    pub fn shutdown(&self) {
        self.shared.shutting_down.store(true, Ordering::Release);
        self.shared.shutdown_notify.notify_waiters();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            let _ = t.join();
        }
        *self.sockets.lock().unwrap_or_else(|e| e.into_inner()) = Inherited::default();
        if self.shared.handover.get().is_none() {
            // After a binary upgrade the table is the new process's.
            crate::handoff::steering::remove();
        }
        crate::health::cluster::leave(&self.shared);
    }

    /// Second descriptors of every listening socket (by listener, one per worker) and of
    /// the `[agents]` socket, for a binary upgrade's new process.
    pub fn listening_sockets(&self) -> io::Result<Inherited> {
        let kept = self.sockets.lock().unwrap_or_else(|e| e.into_inner());
        let mut listeners = Vec::with_capacity(kept.listeners.len());
        for (name, sockets) in &kept.listeners {
            let copies = sockets.iter().map(std::net::TcpListener::try_clone).collect::<io::Result<_>>()?;
            listeners.push((name.clone(), copies));
        }
        let agents = kept.agents.as_ref().map(std::net::UdpSocket::try_clone).transpose()?;
        Ok(Inherited { listeners, agents })
    }

    /// A binary upgrade's new process serves: stop accepting (the listening sockets stay
    /// open for it) and hand every idle plain HTTP connection to `sink`, each connection
    /// with a request in flight once that request is answered. False if a hand-over
    /// already began (nothing changes then).
    pub fn hand_over(&self, sink: Sink) -> bool {
        if self.shared.handover.set(crate::floor::handover::Handover::new(sink)).is_err() {
            return false;
        }
        self.shared.shutdown_notify.notify_waiters();
        true
    }

    /// What the hand-over did so far (`None`: none began).
    pub fn handover_tally(&self) -> Option<crate::HandoverTally> {
        self.shared.handover.get().map(|h| h.tally())
    }

    /// Run-time state for a binary upgrade's new process: what it needs before it serves
    /// (health verdicts, sticky entries), or, once this process is `drained`, its
    /// counters and the sticky entries it made meanwhile.
    pub fn upgrade_state(&self, drained: bool) -> crate::UpgradeState {
        if drained {
            return crate::upgrade::state::when_drained(&self.shared);
        }
        let base = self.from_file.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let edits = crate::upgrade::edits::between(&base, &self.config());
        crate::UpgradeState { edits, ..crate::upgrade::state::before_serving(&self.shared) }
    }

    /// Takes in state the old process of a binary upgrade sent: its run-time admin edits
    /// first (through [`Switch::edit`]; one the new config file no longer allows is
    /// logged and skipped), then the rest.
    pub fn import_upgrade_state(&self, state: &crate::UpgradeState) {
        for edit in &state.edits {
            let why = "upgrade: an admin edit of the old process";
            let reason = match self.edit(why, |c| crate::upgrade::edits::apply(c, edit)) {
                Ok(_) => continue,
                Err(EditFailed::Edit(e)) => e,
                Err(EditFailed::Refused(e)) => e.to_string(),
            };
            tracing::warn!(?edit, reason, "an admin edit of the old process not carried over");
        }
        crate::upgrade::state::import(&self.shared, state);
    }

    /// Client connections open, all listeners.
    pub fn open_connections(&self) -> usize {
        self.shared.client_conns.load(Ordering::Acquire)
    }

    /// Serves a connection the old process handed over (a binary upgrade), on the next
    /// worker in turn.
    pub fn adopt(&self, conn: Moving) {
        let n = self.next_adopt.fetch_add(1, Ordering::Relaxed) % self.adopt.len().max(1);
        if let Some(inbox) = self.adopt.get(n) {
            // A worker that ended drops the connection, which closes it.
            let _ = inbox.send(conn);
        }
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Logs, per listener, how its rules changed in a reload (a rule file can change while the
/// config does not): the file, and the rules added and removed (by label) and changed (same
/// label, other condition or action). Returns how many listeners' rules changed.
fn log_rule_changes(current: &Snapshot, next: &[Option<Arc<RuleSet>>], config: &Config) -> usize {
    let rules = |r: Option<&RuleSet>| -> Vec<(String, String)> {
        let Some(r) = r else { return Vec::new() };
        (0..r.len())
            .map(|i| (r.label(i).unwrap_or("").to_string(), r.rule_text(i).unwrap_or_default()))
            .collect()
    };
    let mut changed_files = 0;
    for ((old, new), l) in current.listeners.iter().zip(next).zip(&config.listeners) {
        let (was, now) = (rules(old.rules.as_deref()), rules(new.as_deref()));
        if was == now {
            continue;
        }
        changed_files += 1;
        let label_in = |set: &[(String, String)], label: &str| set.iter().find(|(l, _)| l == label).cloned();
        let added: Vec<&str> =
            now.iter().filter(|(l, _)| label_in(&was, l).is_none()).map(|(l, _)| l.as_str()).collect();
        let removed: Vec<&str> =
            was.iter().filter(|(l, _)| label_in(&now, l).is_none()).map(|(l, _)| l.as_str()).collect();
        let changed: Vec<&str> = now
            .iter()
            .filter(|(l, text)| label_in(&was, l).is_some_and(|(_, before)| &before != text))
            .map(|(l, _)| l.as_str())
            .collect();
        let file = l.rules.as_ref().map_or("none".to_string(), |p| p.display().to_string());
        tracing::info!(
            listener = %old.name,
            file,
            rules = now.len(),
            added = ?added,
            removed = ?removed,
            changed = ?changed,
            "rules changed"
        );
    }
    changed_files
}

fn same_listeners(old: &Config, new: &Config) -> Result<(), ReloadError> {
    let agents = |c: &Config| c.agents.as_ref().map(|a| a.bind);
    if agents(old) != agents(new) {
        return Err(ReloadError::ListenersChanged("[agents]".into()));
    }
    // Membership is joined once, at start.
    if old.cluster != new.cluster {
        return Err(ReloadError::ListenersChanged("[cluster]".into()));
    }
    let key = |c: &Config| c.listeners.iter().map(|l| (l.name.clone(), l.bind)).collect::<Vec<_>>();
    let (a, b) = (key(old), key(new));
    if a == b {
        return Ok(());
    }
    let changed = b
        .iter()
        .find(|l| !a.contains(l))
        .or_else(|| a.iter().find(|l| !b.contains(l)))
        .map_or_else(String::new, |l| l.0.clone());
    Err(ReloadError::ListenersChanged(changed))
}
