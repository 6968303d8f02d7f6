//! Path and method → handler, and the read-only handlers: the switch's views as JSON, the
//! metrics, the stats page and explain. Mutations live in `edits`.

use crate::ctx::Ctx;
use crate::http::{Request, Response};
use std::net::SocketAddr;
use std::sync::Arc;

/// The stats page, one self-contained file.
const STATS_PAGE: &str = include_str!("../assets/stats.html");

/// Where `POST /api/explain` takes the request to come from, unless `?src=` says.
const DEFAULT_SRC: &str = "127.0.0.1:50000";

/// Answers one request.
pub(crate) async fn handle(ctx: &Arc<Ctx>, req: &Request) -> Response {
    let segments: Vec<&str> = req.head.segments.iter().map(String::as_str).collect();
    let method = req.head.method.as_str();
    let allowed: &[&str] = match segments.as_slice() {
        [""]
        | ["metrics"]
        | ["api", "status" | "groups" | "stick-tables" | "rules" | "history" | "cluster"] => &["GET"],
        ["api", "servers"] => &["GET", "POST"],
        ["api", "servers", _, _] => &["PATCH", "DELETE"],
        ["api", "reload" | "reopen" | "explain" | "upgrade"] | ["api", "cluster", "drain" | "ready"] => {
            &["POST"]
        }
        _ => return Response::error(404, format!("no such path: /{}", segments.join("/"))),
    };
    if !allowed.contains(&method) {
        let message = format!("{method} is not allowed here; use {}", allowed.join(" or "));
        return Response::error(405, message).with_header("Allow", allowed.join(", "));
    }
    let switch = &ctx.switch;
    match (method, segments.as_slice()) {
        ("GET", [""]) => Response::body(200, "text/html; charset=utf-8", STATS_PAGE.as_bytes().to_vec()),
        ("GET", ["metrics"]) => {
            Response::body(200, crate::metrics::CONTENT_TYPE, crate::metrics::render(switch))
        }
        ("GET", ["api", "status"]) => Response::json(200, &switch.status()),
        ("GET", ["api", "groups"]) => Response::json(200, &switch.groups()),
        ("GET", ["api", "stick-tables"]) => Response::json(200, &switch.stick_tables()),
        ("GET", ["api", "rules"]) => Response::json(200, &switch.rules()),
        ("GET", ["api", "history"]) => Response::json(200, &ctx.history().view()),
        ("GET", ["api", "cluster"]) => cluster(ctx),
        ("GET", ["api", "servers"]) => servers(ctx, req.head.param("group")),
        ("POST", ["api", "servers"]) => crate::edits::add(ctx, &req.body).await,
        ("PATCH", ["api", "servers", group, name]) => crate::edits::patch(ctx, group, name, &req.body).await,
        ("DELETE", ["api", "servers", group, name]) => crate::edits::delete(ctx, group, name).await,
        ("POST", ["api", "reload"]) => crate::edits::reload(ctx).await,
        ("POST", ["api", "reopen"]) => reopen(ctx),
        ("POST", ["api", "upgrade"]) => upgrade(ctx).await,
        ("POST", ["api", "explain"]) => explain(ctx, req),
        ("POST", ["api", "cluster", "drain"]) => cluster_serving(ctx, cluster::Serving::Draining),
        ("POST", ["api", "cluster", "ready"]) => cluster_serving(ctx, cluster::Serving::Ready),
        _ => Response::error(500, "route table and handlers disagree"),
    }
}

/// `GET /api/servers[?group=NAME]`.
fn servers(ctx: &Ctx, group: Option<&str>) -> Response {
    let mut servers = ctx.switch.servers();
    if let Some(group) = group {
        if !ctx.switch.config().groups.iter().any(|g| g.name == group) {
            return Response::error(404, format!("no group `{group}`"));
        }
        servers.retain(|s| s.group == group);
    }
    Response::json(200, &servers)
}

/// `POST /api/reopen`: the access log is reopened at its configured path (after rotation).
/// The cluster as this node sees it; `{"enabled": false}` without `[cluster]`, so a page
/// or script can ask any node.
fn cluster(ctx: &Ctx) -> Response {
    let Some(view) = ctx.switch.cluster() else {
        return Response::json(200, &serde_json::json!({ "enabled": false, "nodes": [] }));
    };
    let mut json = serde_json::to_value(&*view).unwrap_or_default();
    json["enabled"] = true.into();
    Response::json(200, &json)
}

/// `POST /api/cluster/drain` and `/api/cluster/ready`: whether the cluster's L4 tier sends
/// this node new flows (a drained node's open connections finish).
fn cluster_serving(ctx: &Ctx, serving: cluster::Serving) -> Response {
    match ctx.switch.set_cluster_serving(serving) {
        Some(now) => Response::json(200, &serde_json::json!({ "serving": now.as_str() })),
        None => {
            Response::error(409, "this switch takes no flows from an L4 tier (no [cluster], or no listener)")
        }
    }
}

fn reopen(ctx: &Ctx) -> Response {
    match ctx.switch.reopen_log("admin: POST /api/reopen") {
        Ok(()) => Response::json(200, &serde_json::json!({ "reopened": true })),
        Err(e) => Response::error(500, format!("access log not reopened: {e}")),
    }
}

/// `POST /api/upgrade`: a binary upgrade (the binary's hook), answered once the new
/// process serves and this one is drained, or with why nothing changed.
async fn upgrade(ctx: &Ctx) -> Response {
    let Some(hook) = ctx.upgrade.clone() else {
        return Response::error(501, "this switch cannot upgrade (it was not started by `cswitch run`)");
    };
    match tokio::task::spawn_blocking(move || hook()).await {
        Ok(Ok(report)) => Response::json(200, &report),
        Ok(Err(refused)) => Response::error(refused.status, refused.reason),
        Err(e) => Response::error(500, format!("upgrade failed: {e}")),
    }
}

/// `POST /api/explain[?listener=NAME&src=IP:PORT]` with a raw request as the body.
fn explain(ctx: &Ctx, req: &Request) -> Response {
    if let Some((key, _)) = req.head.query.iter().find(|(k, _)| k != "listener" && k != "src") {
        return Response::error(400, format!("unknown query parameter `{key}`; known: listener, src"));
    }
    if req.body.is_empty() {
        return Response::error(400, "the body must be the raw request to explain");
    }
    let src = req.head.param("src").unwrap_or(DEFAULT_SRC);
    let Ok(src) = src.parse::<SocketAddr>() else {
        return Response::error(400, format!("src `{src}` is not IP:port"));
    };
    match ctx.switch.explain(req.head.param("listener"), &req.body, src) {
        Ok(explanation) => Response::json(200, &explanation),
        Err(e) => Response::error(400, e),
    }
}
