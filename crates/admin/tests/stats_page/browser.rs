//! Headless Chromium driven over the DevTools protocol: a minimal WebSocket client.

use crate::dom::Dom;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `chromium` on PATH; `None` (the test is skipped) when it is not there and
/// `CSWITCH_REQUIRE_CHROMIUM` is unset.
pub(crate) fn chromium() -> Option<PathBuf> {
    let paths = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&paths).map(|d| d.join("chromium")).find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CSWITCH_REQUIRE_CHROMIUM").is_none(),
            "CSWITCH_REQUIRE_CHROMIUM is set but `chromium` is not on PATH (Debian: apt-get install chromium)"
        );
        eprintln!(
            "SKIPPED stats_page: `chromium` is not on PATH \
             (Debian: apt-get install chromium; .ci/run installs it). \
             Set CSWITCH_REQUIRE_CHROMIUM=1 to make this a failure."
        );
    }
    found
}

/// The headless browser this test started; killed (this process only) when dropped.
pub(crate) struct Browser {
    pub(crate) child: Child,
    pub(crate) profile: PathBuf,
    pub(crate) log: PathBuf,
}

impl Browser {
    pub(crate) fn launch(chromium: &Path, dir: &Path) -> Browser {
        let profile = dir.join("chromium-profile");
        let log = dir.join("chromium.log");
        // A DevToolsActivePort left by an earlier run would name a dead port.
        let _ = std::fs::remove_dir_all(&profile);
        let child = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox", // CI runs as root, where the sandbox cannot start
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--hide-scrollbars",
                "--mute-audio",
                "--remote-debugging-port=0",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("chromium starts");
        Browser { child, profile, log }
    }

    /// A DevTools connection to the browser's page, once chromium is listening.
    pub(crate) async fn page(&mut self) -> Cdp {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(
                Instant::now() < deadline,
                "chromium did not open its DevTools port in 30 s: {}",
                self.log_tail()
            );
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("chromium exited ({status}): {}", self.log_tail());
            }
            // Chromium writes the port it picked here (the first line).
            let port = std::fs::read_to_string(self.profile.join("DevToolsActivePort"))
                .ok()
                .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<u16>().ok()));
            if let Some(port) = port {
                if let Some(path) = page_target(port).await {
                    return Cdp::connect(port, &path).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = text.len().saturating_sub(2000);
        text.get(start..).unwrap_or_default().to_string()
    }

    /// Asks chromium to quit (on the browser's own DevTools endpoint, the second line of
    /// `DevToolsActivePort`), so that it ends its helper processes itself; killed (as on
    /// drop) if it has not exited within 5 s.
    pub(crate) async fn close(mut self, page: Cdp) {
        drop(page);
        let active = std::fs::read_to_string(self.profile.join("DevToolsActivePort")).unwrap_or_default();
        let mut lines = active.lines();
        if let (Some(Ok(port)), Some(path)) = (lines.next().map(|l| l.trim().parse::<u16>()), lines.next()) {
            // Not `call`: chromium may close the connection before it answers.
            let mut browser = Cdp::connect(port, path.trim()).await;
            let quit = json!({ "id": 1, "method": "Browser.close" }).to_string();
            let _ = browser.stream.write_all(&client_frame(quit.as_bytes())).await;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The WebSocket path of the first page target, from `/json/list`.
pub(crate) async fn page_target(port: u16) -> Option<String> {
    let response = testkit::get(SocketAddr::from(([127, 0, 0, 1], port)), "/json/list").await.ok()?;
    let targets: Vec<Value> = serde_json::from_slice(&response.body).ok()?;
    let page = targets.iter().find(|t| t["type"] == "page")?;
    let ws = page["webSocketDebuggerUrl"].as_str()?;
    let path = ws.strip_prefix("ws://")?.split_once('/')?.1;
    Some(format!("/{path}"))
}

/// A DevTools protocol session over a minimal WebSocket client (masked text frames out;
/// whole, possibly fragmented messages in, of any size).
pub(crate) struct Cdp {
    pub(crate) stream: TcpStream,
    pub(crate) buf: Vec<u8>,
    pub(crate) next_id: u64,
}

impl Cdp {
    pub(crate) async fn connect(port: u16, path: &str) -> Cdp {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let handshake = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: Y3N3aXRjaC1zdGF0cy1wYWdl\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(handshake.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        let end = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            assert!(stream.read_buf(&mut buf).await.unwrap() > 0, "DevTools closed during the handshake");
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        assert!(head.starts_with("HTTP/1.1 101"), "DevTools refused the WebSocket: {head}");
        buf.drain(..end);
        Cdp { stream, buf, next_id: 0 }
    }

    /// Sends a command and waits (at most 15 s) for its result; events are skipped.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let text = json!({ "id": id, "method": method, "params": params }).to_string();
        let reply = tokio::time::timeout(Duration::from_secs(15), async {
            self.stream.write_all(&client_frame(text.as_bytes())).await.unwrap();
            loop {
                let message: Value = serde_json::from_slice(&self.message().await).unwrap();
                if message["id"] == id {
                    return message;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("DevTools: no answer to {method} in 15 s"));
        assert!(reply.get("error").is_none(), "DevTools {method}: {}", reply["error"]);
        reply["result"].clone()
    }

    pub(crate) async fn eval(&mut self, expression: &str) -> Value {
        let r =
            self.call("Runtime.evaluate", json!({ "expression": expression, "returnByValue": true })).await;
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }

    /// The DOM once the page has completed `polls` poll rounds (at most 20 s from now).
    pub(crate) async fn dom_after_polls(&mut self, polls: u64) -> Dom {
        self.dom_when("polls", polls).await
    }

    /// The DOM once `body.dataset[key]` (a count the page keeps) reaches `n`, at most 20 s
    /// from now.
    pub(crate) async fn dom_when(&mut self, key: &str, n: u64) -> Dom {
        let deadline = Instant::now() + Duration::from_secs(20);
        let count = format!("Number((document.body && document.body.dataset.{key}) || 0)");
        loop {
            let done = self.eval(&count).await.as_u64().unwrap_or(0);
            let dom = self.eval("document.documentElement.outerHTML").await;
            let dom = Dom(dom.as_str().unwrap_or("").to_string());
            if done >= n {
                return dom;
            }
            assert!(Instant::now() < deadline, "{key}: {done} of {n} in 20 s; banner: {}", dom.banner_text());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One whole message (continuation frames joined).
    pub(crate) async fn message(&mut self) -> Vec<u8> {
        let mut message = Vec::new();
        loop {
            let (fin, opcode, payload) = self.frame().await;
            assert_ne!(opcode, 0x8, "chromium closed the DevTools connection");
            message.extend_from_slice(&payload);
            if fin {
                return message;
            }
        }
    }

    pub(crate) async fn frame(&mut self) -> (bool, u8, Vec<u8>) {
        loop {
            if let Some((fin, opcode, payload, used)) = server_frame(&self.buf) {
                self.buf.drain(..used);
                return (fin, opcode, payload);
            }
            assert!(self.stream.read_buf(&mut self.buf).await.unwrap() > 0, "DevTools connection ended");
        }
    }
}

/// A masked, final text frame (RFC 6455 §5.2).
pub(crate) fn client_frame(payload: &[u8]) -> Vec<u8> {
    testkit::ws_client_frame(payload, [0x5a, 0x17, 0xc3, 0x88])
}

/// An unmasked server frame from the front of `buf`: fin, opcode, payload, bytes used.
pub(crate) fn server_frame(buf: &[u8]) -> Option<(bool, u8, Vec<u8>, usize)> {
    let (&b0, &b1) = (buf.first()?, buf.get(1)?);
    let (len, at) = match b1 & 0x7F {
        126 => (u16::from_be_bytes(buf.get(2..4)?.try_into().ok()?) as usize, 4),
        127 => (u64::from_be_bytes(buf.get(2..10)?.try_into().ok()?) as usize, 10),
        n => (usize::from(n), 2),
    };
    let payload = buf.get(at..at + len)?.to_vec();
    Some((b0 & 0x80 != 0, b0 & 0x0F, payload, at + len))
}
