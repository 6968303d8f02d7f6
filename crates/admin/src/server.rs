//! The accept loop and one connection's life: read a request within 10 s, check the token
//! before reading any body, answer, close. At most 64 admin connections are served at
//! once; more wait in the kernel's backlog rather than cost memory here.

use crate::ctx::Ctx;
use crate::http::{self, Request, Response};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};

/// Admin connections served at once.
const MAX_CONNECTIONS: usize = 64;
/// Time to send a whole request (head and body).
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// After answering, how long unread request bytes are drained so closing does not reset
/// the connection (a reset can destroy the answer before the client reads it).
const LINGER: Duration = Duration::from_secs(1);

/// Serves until `stop` fires (or its sender is dropped). Once `gate` closes it accepts no
/// more, and the connections it has go on until `stop`; it accepts again if the gate opens
/// again first (a binary upgrade taken back).
pub(crate) async fn serve(
    listener: std::net::TcpListener,
    ctx: Arc<Ctx>,
    mut stop: oneshot::Receiver<()>,
    gate: crate::AcceptGate,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "admin listener cannot start");
            return;
        }
    };
    // Ends with the runtime when `serve` returns.
    tokio::spawn(sample_history(Arc::clone(&ctx)));
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            _ = &mut stop => return finish(&gate, &slots).await,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (stream, peer) = tokio::select! {
            // The gate first: when both fire at once, the answers still on their way out
            // must be waited for.
            biased;
            _ = gate.closed() => {
                drop(permit);
                // The socket stays open in the process that serves now; kept here too, for
                // the case that process dies and this one takes it back.
                tokio::select! {
                    _ = gate.opened() => continue,
                    _ = &mut stop => return finish(&gate, &slots).await,
                }
            }
            _ = &mut stop => return finish(&gate, &slots).await,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let ctx = Arc::clone(&ctx);
        tokio::spawn(async move {
            connection(stream, peer, &ctx).await;
            drop(permit);
        });
    }
}

/// Once stopped: after a binary upgrade's hand-over (the gate closed), the answers still
/// on their way out (the one to `POST /api/upgrade` among them) are waited for, at most
/// 2 s; otherwise open admin connections are dropped at once.
async fn finish(gate: &crate::AcceptGate, slots: &Semaphore) {
    if !gate.is_closed() {
        return;
    }
    let deadline = tokio::time::Instant::now() + LINGER * 2;
    while slots.available_permits() < MAX_CONNECTIONS && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn connection(mut stream: TcpStream, peer: SocketAddr, ctx: &Arc<Ctx>) {
    let _ = stream.set_nodelay(true);
    let response = match tokio::time::timeout(READ_TIMEOUT, read_request(&mut stream, ctx)).await {
        Ok(Ok(Some(request))) => {
            let response = crate::routes::handle(ctx, &request).await;
            log(peer, &request, response.status);
            response
        }
        Ok(Ok(None)) => return,
        Ok(Err(response)) => response,
        Err(_) => Response::error(408, "request not received within 10 s"),
    };
    if response.write(&mut stream).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    linger(&mut stream).await;
}

/// Requests other than GET are logged at info level (who changed what, and whether it
/// was applied); reads, which the stats page makes every second, only at debug level.
fn log(peer: SocketAddr, request: &Request, status: u16) {
    let (method, path) = (&request.head.method, format!("/{}", request.head.segments.join("/")));
    if method == "GET" {
        tracing::debug!(%peer, %method, %path, status, "admin request");
    } else {
        tracing::info!(%peer, %method, %path, status, "admin request");
    }
}

/// Reads one request; the token is checked before any body is read. `Err` holds the
/// answer to a refused request; `Ok(None)`: the client left without asking.
async fn read_request(stream: &mut TcpStream, ctx: &Ctx) -> Result<Option<Request>, Response> {
    let mut buf = Vec::new();
    let Some(head) = http::read_head(stream, &mut buf).await? else { return Ok(None) };
    if let Some(token) = ctx.required_token() {
        if !crate::auth::authorized(head.authorization.as_deref(), &token) {
            let refused = Response::error(401, "missing or wrong admin token");
            // Only the page itself asks the browser for a password: a challenge on the
            // API would make a browser hold the page's polling requests for a login
            // dialog (headless ones wait forever) instead of showing the 401.
            return Err(if head.segments.iter().all(String::is_empty) {
                refused.with_header("WWW-Authenticate", "Basic realm=\"cswitch\"")
            } else {
                refused
            });
        }
    }
    if head.expect_continue && head.content_length > buf.len() {
        stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await.map_err(|_| Response::silent())?;
    }
    let body = http::read_body(stream, buf, head.content_length).await?;
    Ok(Some(Request { head, body }))
}

/// Reads and drops what the client still sends, for at most [`LINGER`] and 1 MiB.
async fn linger(stream: &mut TcpStream) {
    let drain = async {
        let mut chunk = [0u8; 8192];
        let mut left = http::MAX_BODY;
        while left > 0 {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// Samples `switch` every `history::INTERVAL` into `history`, until the admin runtime stops.
async fn sample_history(ctx: Arc<Ctx>) {
    let mut tick = tokio::time::interval(crate::history::INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let now = ctx.switch.status().uptime_secs;
        let servers = ctx.switch.servers();
        ctx.history().record(now, &servers);
    }
}
