//! Admin edits made at run time, carried by a binary upgrade: the new process loads the
//! config file, so what the admin API changed since the file was last loaded (servers
//! added or removed, weights and states) would be lost. The old process lists those edits
//! — the difference between the config last loaded from the file and the one in force — by
//! group and server name, and the new process applies them to the file's config through
//! the same edit path as the API (`config::edit`), each one whole or not at all.

use config::edit::{add_server, remove_server, set_state, set_weight};
use config::{Config, Server, ServerState};

/// One run-time edit.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Edit {
    /// A server the API added.
    Add {
        /// Its group.
        group: String,
        /// Its name.
        name: String,
        /// Where it is.
        addr: std::net::SocketAddr,
        /// Its weight.
        weight: u32,
        /// Its `maxconn`.
        maxconn: u32,
        /// Its persistence cookie token.
        cookie: String,
        /// Its state.
        state: String,
    },
    /// A server the API removed.
    Remove {
        /// Its group.
        group: String,
        /// Its name.
        name: String,
    },
    /// A server whose weight or state the API changed.
    Set {
        /// Its group.
        group: String,
        /// Its name.
        name: String,
        /// The weight now.
        weight: u32,
        /// The state now.
        state: String,
    },
}

/// What `running` changed of `base` (the config last loaded from the file), server by
/// server.
pub fn between(base: &Config, running: &Config) -> Vec<Edit> {
    let mut edits = Vec::new();
    for g in &running.groups {
        let was = base.groups.iter().find(|b| b.name == g.name);
        let before = |name: &str| was.and_then(|b| b.servers.iter().find(|s| s.name == name));
        for s in &g.servers {
            let (group, name, state) = (g.name.clone(), s.name.clone(), s.state.name().to_string());
            match before(&s.name) {
                None => edits.push(Edit::Add {
                    group,
                    name,
                    addr: s.addr,
                    weight: s.weight,
                    maxconn: s.maxconn,
                    cookie: s.cookie.clone(),
                    state,
                }),
                Some(b) if b.weight != s.weight || b.state != s.state => {
                    edits.push(Edit::Set { group, name, weight: s.weight, state })
                }
                Some(_) => {}
            }
        }
        let gone =
            was.into_iter().flat_map(|b| &b.servers).filter(|b| !g.servers.iter().any(|s| s.name == b.name));
        edits.extend(gone.map(|b| Edit::Remove { group: g.name.clone(), name: b.name.clone() }));
    }
    edits
}

/// `config` with `edit` applied, or why it cannot be (the file changed under it).
pub fn apply(config: &Config, edit: &Edit) -> Result<Config, String> {
    let state = |name: &str| ServerState::from_name(name).ok_or_else(|| format!("unknown state `{name}`"));
    let result = match edit {
        Edit::Add { group, name, addr, weight, maxconn, cookie, state: s } => {
            let server = Server {
                name: name.clone(),
                addr: *addr,
                weight: *weight,
                maxconn: *maxconn,
                cookie: cookie.clone(),
                state: state(s)?,
                handoff: None,
                local_addr: None,
            };
            add_server(config, group, server)
        }
        Edit::Remove { group, name } => remove_server(config, group, name),
        Edit::Set { group, name, weight, state: s } => {
            let s = state(s)?;
            set_weight(config, group, name, *weight).and_then(|c| set_state(&c, group, name, s))
        }
    };
    result.map_err(|e| e.to_string())
}
