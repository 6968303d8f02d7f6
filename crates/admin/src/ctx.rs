//! What every handler of the admin listener shares: the switch, the lock that serialises
//! edits, the stats page's history, and what the token requirement is judged from.

use crate::history::History;
use proxy::Switch;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::Mutex;

/// What every handler shares.
pub(crate) struct Ctx {
    pub(crate) switch: Arc<Switch>,
    /// Held by every mutation from reading the config to applying the edit, so two edits
    /// never start from the same config and lose one another.
    pub(crate) edits: Mutex<()>,
    /// Written by the sampler every second, read by `GET /api/history`; never held
    /// across an await.
    history: std::sync::Mutex<History>,
    /// The token when the listener started (see `auth::required_token`).
    token_at_start: Option<String>,
    bound: SocketAddr,
    /// What `POST /api/upgrade` runs.
    pub(crate) upgrade: Option<crate::UpgradeHook>,
    /// What `GET /api/upgrade` answers.
    pub(crate) upgrade_status: Option<crate::UpgradeStatus>,
}

impl Ctx {
    pub(crate) fn new(
        switch: Arc<Switch>,
        token: Option<String>,
        bound: SocketAddr,
        upgrade: Option<crate::UpgradeHook>,
    ) -> Ctx {
        Ctx {
            switch,
            edits: Mutex::new(()),
            history: std::sync::Mutex::new(History::default()),
            token_at_start: token,
            bound,
            upgrade,
            upgrade_status: None,
        }
    }

    pub(crate) fn history(&self) -> std::sync::MutexGuard<'_, History> {
        // A panic while recording leaves at worst a point missing: the data stays usable.
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn required_token(&self) -> Option<String> {
        let config = self.switch.config();
        crate::auth::required_token(config.admin.as_ref(), self.token_at_start.as_deref(), self.bound)
    }
}
