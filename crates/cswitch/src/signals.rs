//! Process signals: SIGTERM and SIGINT stop the switch gracefully (stop accepting, finish
//! in-flight requests within `grace_period`); SIGHUP reloads the config file, validated
//! first: an invalid file changes nothing and the reason is logged; SIGUSR1 reopens the
//! access log (after rotation, as nginx's `reopen`); SIGUSR2 upgrades the binary (as
//! nginx's, but the new process takes the connections over: `upgrade`). The listeners' rule
//! files are watched too (their modification time, checked every second): a changed rule
//! file is reloaded the same way (seed 000 §5.1: rules replaced without a restart).

use crate::upgrade::Upgrader;
use std::path::Path;
use std::sync::Arc;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// The signal handlers, installed before the switch starts: a SIGHUP or SIGUSR1 that
/// arrives once "listening" is logged (a logrotate hook, a service manager's reload) must
/// not meet the default action, which ends the process.
pub struct Signals {
    rt: tokio::runtime::Runtime,
    term: Signal,
    int: Signal,
    hup: Signal,
    usr1: Signal,
    usr2: Signal,
    /// The rule files' modification times when the config was loaded.
    stamps: Vec<Option<std::time::SystemTime>>,
}

impl Signals {
    /// Installs the handlers, and notes the rule files of `cfg` (the config about to
    /// start) as they are now: an edit made while the switch starts is still seen.
    pub fn install(cfg: &config::Config) -> anyhow::Result<Signals> {
        let stamps = rule_file_stamps(cfg);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (term, int, hup, usr1, usr2) = rt.block_on(async {
            anyhow::Ok((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
                signal(SignalKind::hangup())?,
                signal(SignalKind::user_defined1())?,
                signal(SignalKind::user_defined2())?,
            ))
        })?;
        Ok(Signals { rt, term, int, hup, usr1, usr2, stamps })
    }

    /// Blocks until SIGTERM / SIGINT, reloading on SIGHUP (when a config path is given),
    /// reopening the access log on SIGUSR1 and upgrading the binary on SIGUSR2, then shuts
    /// the switch down. An upgrade that succeeded ends it too (this process has handed over
    /// and drained by then).
    pub fn serve_until_stopped(
        self,
        switch: &proxy::Switch,
        config: Option<&Path>,
        upgrader: Option<&Arc<Upgrader>>,
    ) -> anyhow::Result<()> {
        let never = tokio::sync::Notify::new();
        let upgraded = upgrader.map_or(&never, |u| &u.done);
        let Signals { rt, mut term, mut int, mut hup, mut usr1, mut usr2, mut stamps } = self;
        let handed_over = rt.block_on(async {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = term.recv() => break false,
                    _ = int.recv() => break false,
                    _ = hup.recv() => match config {
                        Some(path) => reload(switch, path, "SIGHUP"),
                        None => tracing::warn!("SIGHUP ignored: no config file to reload"),
                    },
                    _ = usr1.recv() => {
                        // Logged by the switch either way.
                        let _ = switch.reopen_log("SIGUSR1");
                    }
                    _ = usr2.recv() => match upgrader {
                        // On a thread: it blocks until the new process serves and this one is
                        // drained, and SIGTERM must still be heard meanwhile. The outcome is
                        // logged by the upgrade either way.
                        Some(upgrader) => {
                            let upgrader = Arc::clone(upgrader);
                            let _ = std::thread::Builder::new()
                                .name("cswitch-upgrade".into())
                                .spawn(move || upgrader.run("SIGUSR2"));
                        }
                        None => tracing::warn!("SIGUSR2 ignored: this switch cannot upgrade its binary"),
                    },
                    _ = upgraded.notified() => break true,
                    _ = tick.tick() => {
                        let now = rule_file_stamps(&switch.config());
                        if now != stamps {
                            stamps = now;
                            match config {
                                Some(path) => reload(switch, path, "file watch: a rule file changed"),
                                None => tracing::warn!("a rule file changed; no config file to reload"),
                            }
                        }
                    }
                }
            }
        });
        if handed_over {
            tracing::info!("handed over to the new process; stopping");
        } else {
            // First out of the cluster's L4 tier (no new flow may reach a closed listener),
            // then the in-flight requests finish.
            switch.leave_l4_tier(std::time::Duration::from_secs(2));
            tracing::info!("shutting down: finishing in-flight requests");
        }
        switch.shutdown();
        tracing::info!("stopped");
        Ok(())
    }
}

/// Modification times of the listeners' rule files (`None` where unreadable).
fn rule_file_stamps(cfg: &config::Config) -> Vec<Option<std::time::SystemTime>> {
    cfg.listeners
        .iter()
        .filter_map(|l| l.rules.as_ref())
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

fn reload(switch: &proxy::Switch, path: &Path, why: &str) {
    if switch.config().source != path {
        tracing::warn!(path = %path.display(), "reloading a config file other than the running one");
    }
    // A refusal is logged by the switch, with its cause.
    let _ = switch.reload_file(why);
}
