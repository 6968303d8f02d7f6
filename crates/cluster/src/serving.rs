//! Whether a node takes new flows from the L4 tier: `ready` once its listeners are bound,
//! `draining` when an operator drains it (`cswitch ctl cluster drain`); a node that serves
//! no listener (one that only runs the tier) publishes nothing. Published under the key
//! `serve`; the tier (`l4`) reads it from every node. A node that runs the tier also
//! publishes `tier = l4`, so one that only runs it is known as such (its config digest,
//! without listeners or groups, is not drift). With `[cluster] state_file`, what an operator
//! last said (`drain`, `ready`) is kept in that file, so a restarted node comes back drained
//! if it was (like HAProxy's server-state-file): [`read_kept`], [`write_kept`].

use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

/// The gossip key.
pub(crate) const SERVE: &str = "serve";
/// Published (`l4`) by a node that runs the L4 tier.
pub(crate) const TIER: &str = "tier";
/// Published by a node that runs the L4 tier: the nodes its kernel sends new flows to now
/// (names, comma-separated), so a node that drains itself knows when no new flow can come.
pub(crate) const L4_TARGETS: &str = "l4_targets";

/// A node's part in the L4 tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Serving {
    /// Takes new flows.
    Ready,
    /// Takes no new flows; its open connections finish.
    Draining,
}

impl Serving {
    /// The value published under `serve`.
    pub fn as_str(self) -> &'static str {
        match self {
            Serving::Ready => "ready",
            Serving::Draining => "draining",
        }
    }

    /// A published value (`None` for anything else, e.g. a newer node's word).
    pub fn parse(text: &str) -> Option<Serving> {
        match text {
            "ready" => Some(Serving::Ready),
            "draining" => Some(Serving::Draining),
            _ => None,
        }
    }
}

/// This node's state, set by the switch, read by the tick (0: publishes nothing).
#[derive(Default)]
pub(crate) struct Own(AtomicU8);

impl Own {
    pub(crate) fn set(&self, serving: Serving) {
        let code = match serving {
            Serving::Ready => 1,
            Serving::Draining => 2,
        };
        self.0.store(code, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> Option<Serving> {
        match self.0.load(Ordering::Relaxed) {
            1 => Some(Serving::Ready),
            2 => Some(Serving::Draining),
            _ => None,
        }
    }
}

/// What an operator last said before this process started (`state_file`); `None` when the
/// file is absent or says nothing this version knows (logged).
pub(crate) fn read_kept(path: &Path) -> Option<Serving> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cluster: state_file unreadable; ready");
            return None;
        }
    };
    let kept = Serving::parse(text.trim());
    if kept.is_none() {
        tracing::warn!(path = %path.display(), said = %text.trim(), "cluster: state_file says neither `draining` nor `ready`; ready");
    }
    kept
}

/// Keeps `serving` in `path`: written beside it and renamed over it, so a crash leaves the
/// old word or the new one, never half of one.
pub(crate) fn write_kept(path: &Path, serving: Serving) -> io::Result<()> {
    let mut next = path.as_os_str().to_owned();
    next.push(".new");
    let next = std::path::PathBuf::from(next);
    let mut file = std::fs::File::create(&next)?;
    writeln!(file, "{}", serving.as_str())?;
    file.sync_all()?;
    std::fs::rename(&next, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_state_is_read_back_and_a_missing_or_strange_file_means_ready() {
        let path = std::env::temp_dir().join(format!("cswitch-serving-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        assert_eq!(read_kept(&path), None);
        write_kept(&path, Serving::Draining).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_kept(&path), Some(Serving::Draining));
        write_kept(&path, Serving::Ready).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_kept(&path), Some(Serving::Ready));
        std::fs::write(&path, "maybe\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_kept(&path), None);
        let _ = std::fs::remove_file(&path);
    }
}
