//! What every handler of the admin listener shares: the switch, the lock that serialises
//! edits, and what the token requirement is judged from.

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
    /// The token when the listener started (see `auth::required_token`).
    token_at_start: Option<String>,
    bound: SocketAddr,
}

impl Ctx {
    pub(crate) fn new(switch: Arc<Switch>, token: Option<String>, bound: SocketAddr) -> Ctx {
        Ctx { switch, edits: Mutex::new(()), token_at_start: token, bound }
    }

    pub(crate) fn required_token(&self) -> Option<String> {
        let config = self.switch.config();
        crate::auth::required_token(config.admin.as_ref(), self.token_at_start.as_deref(), self.bound)
    }
}
