//! The single-table sections: `[global]`, `[limits]`, `[timeouts]` (`[access_log]` has its
//! own file, `access_log`).
//! Each is optional and each key has its default (the same as in `model.rs` and
//! `docs/config.md`).

use crate::diag::Sink;
use crate::keys::{home_of, GLOBAL_KEYS, LIMITS_KEYS, TIMEOUTS_KEYS};
use crate::walk::Table;
use crate::{Global, IoModel, Limits, Timeouts};
use std::time::Duration;

const MIB: i64 = 1024 * 1024;

pub(crate) fn global(root: &Table, sink: &mut Sink) -> Global {
    let section = root.section(sink, "global");
    let d = default_global();
    let Some(t) = section else {
        return d;
    };
    t.reject_unknown(sink, GLOBAL_KEYS, home_of);
    Global {
        workers: to_usize(t.int_or(sink, "workers", to_i64(d.workers), 0..=256)),
        grace_period: t.duration_or(sink, "grace_period", d.grace_period, true),
        io: io_model(&t, sink),
        uring_multishot: t.bool_or(sink, "uring_multishot", d.uring_multishot),
    }
}

fn default_global() -> Global {
    Global { workers: 0, grace_period: Duration::from_secs(30), io: IoModel::Uring, uring_multishot: true }
}

pub(crate) fn limits(root: &Table, sink: &mut Sink) -> Limits {
    let section = root.section(sink, "limits");
    let Some(t) = section else {
        return default_limits();
    };
    t.reject_unknown(sink, LIMITS_KEYS, home_of);
    let d = default_limits();
    let max_body_bytes = to_u64(t.int_or(sink, "max_body_bytes", 1 << 30, 0..=i64::MAX));
    let retries = u32::try_from(t.int_or(sink, "retries", 2, 0..=100)).unwrap_or(2);
    let mut int = |key: &str, default: usize, min: i64, max: i64| {
        to_usize(t.int_or(sink, key, to_i64(default), min..=max))
    };
    Limits {
        max_client_connections: int("max_client_connections", d.max_client_connections, 1, 10_000_000),
        max_head_bytes: int("max_head_bytes", d.max_head_bytes, 1024, MIB),
        max_headers: int("max_headers", d.max_headers, 1, 1000),
        max_body_bytes,
        max_queue: int("max_queue", d.max_queue, 0, 1_000_000),
        retries,
        pool_idle_per_server: int("pool_idle_per_server", d.pool_idle_per_server, 0, 100_000),
        buffer_bytes: int("buffer_bytes", d.buffer_bytes, 1024, 16 * MIB),
        rule_body_bytes: int("rule_body_bytes", d.rule_body_bytes, 0, 64 * MIB),
        h2_max_concurrent_streams: int("h2_max_concurrent_streams", d.h2_max_concurrent_streams, 1, 10_000),
        h2_connection_bytes: int("h2_connection_bytes", d.h2_connection_bytes, 64 * 1024, 1 << 30),
    }
}

fn default_limits() -> Limits {
    Limits {
        max_client_connections: 10_000,
        max_head_bytes: 16_384,
        max_headers: 100,
        max_body_bytes: 1 << 30,
        max_queue: 100,
        retries: 2,
        pool_idle_per_server: 64,
        buffer_bytes: 16_384,
        rule_body_bytes: 1 << 20,
        h2_max_concurrent_streams: 100,
        h2_connection_bytes: 4 << 20,
    }
}

pub(crate) fn timeouts(root: &Table, sink: &mut Sink) -> Timeouts {
    let d = Timeouts {
        client_head: Duration::from_secs(10),
        client_idle: Duration::from_secs(60),
        client_io: Duration::from_secs(60),
        server_connect: Duration::from_secs(5),
        server_response: Duration::from_secs(60),
        queue: Duration::from_secs(5),
        tunnel_idle: Duration::from_secs(3600),
        pool_idle: Duration::from_secs(30),
        sticky_ip: Duration::from_secs(600),
        tls_session: Duration::from_secs(600),
    };
    let Some(t) = root.section(sink, "timeouts") else {
        return d;
    };
    t.reject_unknown(sink, TIMEOUTS_KEYS, home_of);
    // A zero timeout would fire at once and make the proxy unusable, so none may be 0.
    let mut get = |key: &str, default: Duration| t.duration_or(sink, key, default, false);
    Timeouts {
        client_head: get("client_head", d.client_head),
        client_idle: get("client_idle", d.client_idle),
        client_io: get("client_io", d.client_io),
        server_connect: get("server_connect", d.server_connect),
        server_response: get("server_response", d.server_response),
        queue: get("queue", d.queue),
        tunnel_idle: get("tunnel_idle", d.tunnel_idle),
        pool_idle: get("pool_idle", d.pool_idle),
        sticky_ip: get("sticky_ip", d.sticky_ip),
        tls_session: get("tls_session", d.tls_session),
    }
}

// Integer keys are range-checked before conversion, so these never fall back in practice.
pub(crate) fn to_usize(v: i64) -> usize {
    usize::try_from(v).unwrap_or(0)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn to_i64(v: usize) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// `[global] io`: `"uring"` (default) or `"epoll"`.
fn io_model(t: &Table, sink: &mut Sink) -> IoModel {
    let Some(v) = t.string(sink, "io") else { return IoModel::Uring };
    match v.value {
        "epoll" => IoModel::Epoll,
        "uring" => IoModel::Uring,
        other => {
            let message = format!("unknown io `{other}`; valid: epoll, uring");
            let hint = crate::suggest::hint(other, ["epoll", "uring"]).or_else(|| {
                Some("write `io = \"epoll\"` (readiness for every socket) or leave it out (io_uring)".into())
            });
            sink.error(&v.span, &v.key, message, hint);
            IoModel::Epoll
        }
    }
}
