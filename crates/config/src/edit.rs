//! Run-time edits of a validated [`Config`]: the admin API's mutations (add a server, change
//! its weight or state, remove it). Each returns a new config, checked with the same rules
//! the file loader applies, or an error and nothing changed; the caller applies the new
//! config through the same reload path as a file.

use crate::{Config, Group, Server, ServerState};

/// Why an edit was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The group or server named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The edit would make an invalid config.
    #[error("{0}")]
    Invalid(String),
}

/// Names in logs, metric labels and API paths: letters, digits, '-', '_' and '.'.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Largest weight a server may have (the file's limit too).
pub const MAX_WEIGHT: u32 = 1_000_000;

/// `config` with `server` added at the end of group `group`.
pub fn add_server(config: &Config, group: &str, server: Server) -> Result<Config, EditError> {
    let mut next = config.clone();
    let g = group_mut(&mut next, group)?;
    check_server(&server)?;
    if g.servers.iter().any(|s| s.name == server.name) {
        return Err(EditError::Invalid(format!("group `{group}` already has a server `{}`", server.name)));
    }
    if g.servers.iter().any(|s| s.cookie == server.cookie) {
        let message = format!("group `{group}` already has a server with cookie token `{}`", server.cookie);
        return Err(EditError::Invalid(message));
    }
    g.servers.push(server);
    Ok(next)
}

/// `config` with server `name` of `group` given weight `weight`.
pub fn set_weight(config: &Config, group: &str, name: &str, weight: u32) -> Result<Config, EditError> {
    if weight > MAX_WEIGHT {
        return Err(EditError::Invalid(format!("weight must be between 0 and {MAX_WEIGHT}, found {weight}")));
    }
    edit_server(config, group, name, |s| s.weight = weight)
}

/// `config` with server `name` of `group` in state `state`.
pub fn set_state(config: &Config, group: &str, name: &str, state: ServerState) -> Result<Config, EditError> {
    edit_server(config, group, name, |s| s.state = state)
}

/// `config` without server `name` of `group`; a group keeps at least one server.
pub fn remove_server(config: &Config, group: &str, name: &str) -> Result<Config, EditError> {
    let mut next = config.clone();
    let g = group_mut(&mut next, group)?;
    let index = position(g, name)?;
    if g.servers.len() == 1 {
        let message = format!("`{name}` is the last server of group `{group}`; a group needs at least one");
        return Err(EditError::Invalid(message));
    }
    g.servers.remove(index);
    Ok(next)
}

fn edit_server(
    config: &Config,
    group: &str,
    name: &str,
    change: impl FnOnce(&mut Server),
) -> Result<Config, EditError> {
    let mut next = config.clone();
    let g = group_mut(&mut next, group)?;
    let index = position(g, name)?;
    change(&mut g.servers[index]);
    Ok(next)
}

fn group_mut<'a>(config: &'a mut Config, group: &str) -> Result<&'a mut Group, EditError> {
    config
        .groups
        .iter_mut()
        .find(|g| g.name == group)
        .ok_or_else(|| EditError::NotFound(format!("no group `{group}`")))
}

fn position(group: &Group, name: &str) -> Result<usize, EditError> {
    group
        .servers
        .iter()
        .position(|s| s.name == name)
        .ok_or_else(|| EditError::NotFound(format!("group `{}` has no server `{name}`", group.name)))
}

fn check_server(server: &Server) -> Result<(), EditError> {
    if !valid_name(&server.name) {
        let message = format!("server name `{}` may only use letters, digits, '-', '_' and '.'", server.name);
        return Err(EditError::Invalid(message));
    }
    if !valid_name(&server.cookie) {
        let message =
            format!("cookie token `{}` may only use letters, digits, '-', '_' and '.'", server.cookie);
        return Err(EditError::Invalid(message));
    }
    if server.addr.port() == 0 {
        return Err(EditError::Invalid(format!("`{}` has port 0, which no server listens on", server.addr)));
    }
    if server.weight > MAX_WEIGHT || server.maxconn > 1_000_000 {
        let message = format!("weight and maxconn must be between 0 and {MAX_WEIGHT}");
        return Err(EditError::Invalid(message));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::path::Path;

    fn base() -> Config {
        let text = r#"
[[listener]]
name = "web"
bind = "127.0.0.1:0"
default_group = "web"
[[group]]
name = "web"
servers = [{ name = "s1", addr = "127.0.0.1:9001" }]
"#;
        crate::parse(text, Path::new("c.toml")).unwrap()
    }

    fn server(name: &str) -> Server {
        Server {
            name: name.into(),
            addr: "127.0.0.1:9002".parse().unwrap(),
            weight: 1,
            maxconn: 0,
            cookie: name.into(),
            state: ServerState::Ready,
            handoff: None,
            local_addr: None,
        }
    }

    #[test]
    fn add_then_edit_then_remove() {
        let c = add_server(&base(), "web", server("s2")).unwrap();
        assert_eq!(c.groups[0].servers.len(), 2);
        let c = set_weight(&c, "web", "s2", 5).unwrap();
        assert_eq!(c.groups[0].servers[1].weight, 5);
        let c = set_state(&c, "web", "s2", ServerState::Drain).unwrap();
        assert_eq!(c.groups[0].servers[1].state, ServerState::Drain);
        let c = remove_server(&c, "web", "s2").unwrap();
        assert_eq!(c, base());
    }

    #[test]
    fn refusals_change_nothing_and_say_why() {
        let c = base();
        let dup = add_server(&c, "web", server("s1")).unwrap_err();
        assert!(dup.to_string().contains("already has a server `s1`"), "{dup}");
        assert!(matches!(add_server(&c, "nope", server("s2")), Err(EditError::NotFound(_))));
        assert!(matches!(add_server(&c, "web", server("bad name")), Err(EditError::Invalid(_))));
        assert!(matches!(set_weight(&c, "web", "s9", 1), Err(EditError::NotFound(_))));
        assert!(matches!(set_weight(&c, "web", "s1", MAX_WEIGHT + 1), Err(EditError::Invalid(_))));
        let last = remove_server(&c, "web", "s1").unwrap_err();
        assert!(last.to_string().contains("last server"), "{last}");
    }
}
