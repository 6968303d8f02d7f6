//! Process signals: SIGTERM and SIGINT stop the switch gracefully (stop accepting, finish
//! in-flight requests within `grace_period`); SIGHUP reloads the config file, validated
//! first: an invalid file changes nothing and the reason is logged. The listeners' rule
//! files are watched too (their modification time, checked every second): a changed rule
//! file is reloaded the same way (seed 000 §5.1: rules replaced without a restart).

use std::path::Path;
use tokio::signal::unix::{signal, SignalKind};

/// Blocks until SIGTERM / SIGINT, reloading on SIGHUP (when a config path is given), then
/// shuts the switch down.
pub fn serve_until_stopped(switch: &proxy::Switch, config: Option<&Path>) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let mut hup = signal(SignalKind::hangup())?;
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        let mut stamps = rule_file_stamps(&switch.config());
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = int.recv() => break,
                _ = hup.recv() => match config {
                    Some(path) => reload(switch, path, "SIGHUP"),
                    None => tracing::warn!("SIGHUP ignored: no config file to reload"),
                },
                _ = tick.tick() => {
                    let now = rule_file_stamps(&switch.config());
                    if now != stamps {
                        stamps = now;
                        match config {
                            Some(path) => {
                                reload(switch, path, "file watch: a rule file changed");
                            }
                            None => tracing::warn!("a rule file changed; no config file to reload"),
                        }
                    }
                }
            }
        }
        anyhow::Ok(())
    })?;
    tracing::info!("shutting down: finishing in-flight requests");
    switch.shutdown();
    tracing::info!("stopped");
    Ok(())
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
