//! The mutations: add a server, change its weight and state, drain then remove it, reload
//! the config file. Each one, under one lock, reads the config in force, makes a new one
//! with `config::edit` (which validates it like the file loader) and hands it to
//! [`proxy::Switch::apply`] — the reload path — so an edit is applied whole or not at all
//! and a refused one leaves the generation as it was.

use crate::ctx::Ctx;
use crate::http::Response;
use config::edit::{self, EditError};
use config::{Config, Server, ServerState};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a draining server is looked at before it is removed.
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// What an applied edit answers.
#[derive(Serialize)]
struct Applied {
    /// Config generation now in force.
    generation: u64,
    /// What changed, one line each (empty when the edit changed nothing).
    changes: Vec<String>,
}

/// `POST /api/servers`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewServer {
    group: String,
    name: String,
    addr: String,
    weight: Option<u32>,
    maxconn: Option<u32>,
    cookie: Option<String>,
    state: Option<String>,
}

/// `PATCH /api/servers/{group}/{name}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Patch {
    weight: Option<u32>,
    state: Option<String>,
}

pub(crate) async fn add(ctx: &Ctx, body: &[u8]) -> Response {
    let new: NewServer = match parse(body) {
        Ok(n) => n,
        Err(r) => return r,
    };
    let Ok(addr) = new.addr.parse() else {
        return Response::error(400, format!("addr `{}` is not IP:port", new.addr));
    };
    let state = match new.state.as_deref().map(state_named).transpose() {
        Ok(s) => s.unwrap_or(ServerState::Ready),
        Err(r) => return r,
    };
    let server = Server {
        cookie: new.cookie.unwrap_or_else(|| new.name.clone()),
        name: new.name,
        addr,
        weight: new.weight.unwrap_or(1),
        maxconn: new.maxconn.unwrap_or(0),
        state,
        // Added at run time without an agent: served two-way on one-way listeners too.
        handoff: None,
        local_addr: None,
    };
    let why = format!("admin: add server {}/{}", new.group, server.name);
    match commit(ctx, &why, |c| edit::add_server(c, &new.group, server)).await {
        Ok(applied) => Response::json(201, &applied),
        Err(r) => r,
    }
}

pub(crate) async fn patch(ctx: &Ctx, group: &str, name: &str, body: &[u8]) -> Response {
    let patch: Patch = match parse(body) {
        Ok(p) => p,
        Err(r) => return r,
    };
    if patch.weight.is_none() && patch.state.is_none() {
        return Response::error(400, "nothing to change: give \"weight\" and/or \"state\"");
    }
    let state = match patch.state.as_deref().map(state_named).transpose() {
        Ok(s) => s,
        Err(r) => return r,
    };
    let why = format!("admin: change server {group}/{name}");
    // Weight and state in one new config: one apply, one generation.
    let result = commit(ctx, &why, |c| {
        let c = match patch.weight {
            Some(w) => edit::set_weight(c, group, name, w)?,
            None => c.clone(),
        };
        match state {
            Some(s) => edit::set_state(&c, group, name, s),
            None => Ok(c),
        }
    })
    .await;
    match result {
        Ok(applied) => Response::json(200, &applied),
        Err(r) => r,
    }
}

/// `DELETE`: drain now, remove once idle (or after the group's `drain_timeout`).
pub(crate) async fn delete(ctx: &Arc<Ctx>, group: &str, name: &str) -> Response {
    let current = ctx.switch.config();
    // Refuse up front what removal would refuse (e.g. the last server of a group), so a
    // server is never left draining for a removal that cannot happen.
    if let Err(e) = edit::remove_server(&current, group, name) {
        return edit_error(e);
    }
    let timeout = current.groups.iter().find(|g| g.name == group).map_or(Duration::ZERO, |g| g.drain_timeout);
    let why = format!("admin: drain server {group}/{name} before removal");
    let applied = match commit(ctx, &why, |c| edit::set_state(c, group, name, ServerState::Drain)).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    tokio::spawn(drain_then_remove(Arc::clone(ctx), group.to_string(), name.to_string(), timeout));
    #[derive(Serialize)]
    struct Draining<'a> {
        status: &'static str,
        group: &'a str,
        server: &'a str,
        drain_timeout_ms: u64,
        #[serde(flatten)]
        applied: Applied,
    }
    let drain_timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    Response::json(202, &Draining { status: "draining", group, server: name, drain_timeout_ms, applied })
}

/// `POST /api/reload`: the config file again, as SIGHUP does.
pub(crate) async fn reload(ctx: &Ctx) -> Response {
    let _edits = ctx.edits.lock().await;
    match ctx.switch.reload_file("admin: POST /api/reload") {
        Ok((generation, changes)) => Response::json(200, &applied(generation, &changes)),
        Err(diagnostics) => Response::error(400, diagnostics),
    }
}

/// Waits until the server is idle (nothing in flight or queued, and the drain in force:
/// no new requests) or `timeout` passes, then removes it — unless it was removed or taken
/// out of drain meanwhile.
async fn drain_then_remove(ctx: Arc<Ctx>, group: String, name: String, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut tick = tokio::time::interval(DRAIN_POLL);
    loop {
        tick.tick().await;
        let servers = ctx.switch.servers();
        let Some(s) = servers.iter().find(|s| s.group == group && s.name == name) else { return };
        if s.state != ServerState::Drain.name() {
            tracing::info!("removal of {group}/{name} cancelled: its state is now {}", s.state);
            return;
        }
        if (s.active == 0 && s.queued == 0 && s.effective_weight == 0) || Instant::now() >= deadline {
            break;
        }
    }
    let why = format!("admin: remove drained server {group}/{name}");
    let result = commit(&ctx, &why, |c| match still_draining(c, &group, &name) {
        true => edit::remove_server(c, &group, &name),
        false => Ok(c.clone()),
    })
    .await;
    if let Err(r) = result {
        let error = String::from_utf8_lossy(&r.body).into_owned();
        tracing::warn!("removal of drained server {group}/{name} refused: {error}");
    }
}

fn still_draining(config: &Config, group: &str, name: &str) -> bool {
    config
        .groups
        .iter()
        .filter(|g| g.name == group)
        .flat_map(|g| &g.servers)
        .any(|s| s.name == name && s.state == ServerState::Drain)
}

/// Makes the edit on the config in force and applies it, all under the edit lock. An edit
/// that changes nothing is not applied (no new generation).
async fn commit(
    ctx: &Ctx,
    why: &str,
    make: impl FnOnce(&Config) -> Result<Config, EditError>,
) -> Result<Applied, Response> {
    let _edits = ctx.edits.lock().await;
    // The switch reads, edits and applies under its own writer lock, so a file reload
    // racing with this edit is never undone by it.
    match ctx.switch.edit(why, make) {
        Ok(Some((generation, changes))) => Ok(applied(generation, &changes)),
        Ok(None) => Ok(Applied { generation: ctx.switch.status().generation, changes: Vec::new() }),
        Err(proxy::EditFailed::Edit(e)) => Err(edit_error(e)),
        Err(proxy::EditFailed::Refused(e)) => {
            Err(Response::error(409, format!("the switch refused the new config: {e}")))
        }
    }
}

fn applied(generation: u64, changes: &[config::Change]) -> Applied {
    Applied { generation, changes: changes.iter().map(ToString::to_string).collect() }
}

fn edit_error(e: EditError) -> Response {
    match e {
        EditError::NotFound(m) => Response::error(404, m),
        EditError::Invalid(m) => Response::error(400, m),
    }
}

fn state_named(name: &str) -> Result<ServerState, Response> {
    ServerState::from_name(name)
        .ok_or_else(|| Response::error(400, format!("unknown state `{name}`; valid: ready, drain, maint")))
}

/// A JSON body into `T`; unknown fields, wrong types and an empty body are 400.
fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Response> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Response::error(400, "the body must be a JSON object"));
    }
    serde_json::from_slice(body).map_err(|e| Response::error(400, format!("bad JSON body: {e}")))
}
