//! Process signals: SIGTERM and SIGINT stop the switch gracefully (stop accepting, finish
//! in-flight requests within `grace_period`); SIGHUP reloads the config file, validated
//! first: an invalid file changes nothing and the reason is logged.

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
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = int.recv() => break,
                _ = hup.recv() => match config {
                    Some(path) => reload(switch, path),
                    None => tracing::warn!("SIGHUP ignored: no config file to reload"),
                },
            }
        }
        anyhow::Ok(())
    })?;
    tracing::info!("shutting down: finishing in-flight requests");
    switch.shutdown();
    tracing::info!("stopped");
    Ok(())
}

fn reload(switch: &proxy::Switch, path: &Path) {
    let new = match config::load(path) {
        Ok(cfg) => cfg,
        Err(diags) => {
            switch.note_failed_reload();
            tracing::error!("reload refused, config unchanged:\n{diags}");
            return;
        }
    };
    let old = switch.config();
    match switch.reload(new.clone()) {
        Ok(generation) => {
            let changes = config::diff(&old, &new);
            tracing::info!(generation, changes = changes.len(), "config reloaded");
            for change in changes {
                tracing::info!("  {change}");
            }
        }
        Err(e) => tracing::error!("reload refused, config unchanged: {e}"),
    }
}
