//! Access-log lines as syslog messages (RFC 5424), one datagram per line, over UDP
//! (RFC 5426) or a local datagram socket (`/dev/log`). No crate: the framing is one line
//! (docs/adr). The socket is non-blocking: a syslog daemon that cannot keep up loses
//! lines (counted in the warning) rather than stalling a worker.

use config::SyslogTarget;
use std::io;
use std::net::UdpSocket;
use std::os::unix::net::UnixDatagram;

/// An open syslog socket and the message header's constant parts.
pub struct Syslog {
    socket: Socket,
    /// `<PRI>1 ` — facility × 8 + severity 6 (informational), version 1.
    pri: String,
    /// ` HOSTNAME cswitch PROCID access - ` after the timestamp.
    rest: String,
}

enum Socket {
    Udp(UdpSocket),
    Unix(UnixDatagram),
}

impl Syslog {
    /// Connects to `to`.
    pub fn open(to: &SyslogTarget, facility: u8) -> io::Result<Syslog> {
        let socket = match to {
            SyslogTarget::Udp(addr) => {
                let any: std::net::SocketAddr =
                    if addr.is_ipv4() { "0.0.0.0:0".parse() } else { "[::]:0".parse() }
                        .map_err(|_| io::Error::other("bad wildcard"))?;
                let s = UdpSocket::bind(any)?;
                s.connect(addr)?;
                s.set_nonblocking(true)?;
                Socket::Udp(s)
            }
            SyslogTarget::Unix(path) => {
                let s = UnixDatagram::unbound()?;
                s.connect(path).map_err(|e| {
                    io::Error::new(e.kind(), format!("syslog socket {}: {e}", path.display()))
                })?;
                s.set_nonblocking(true)?;
                Socket::Unix(s)
            }
        };
        let host = hostname();
        let pri = format!("<{}>1 ", u32::from(facility) * 8 + 6);
        let rest = format!(" {host} cswitch {} access - ", std::process::id());
        Ok(Syslog { socket, pri, rest })
    }

    /// Sends each line of `lines` as one message, stamped now.
    pub fn send_lines(&self, lines: &[u8]) -> io::Result<()> {
        let mut stamp = String::with_capacity(32);
        super::line::timestamp(&mut stamp);
        let mut msg = Vec::with_capacity(512);
        let mut lost = 0usize;
        let mut last_error = None;
        for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            msg.clear();
            msg.extend_from_slice(self.pri.as_bytes());
            msg.extend_from_slice(stamp.as_bytes());
            msg.extend_from_slice(self.rest.as_bytes());
            msg.extend_from_slice(line);
            let sent = match &self.socket {
                Socket::Udp(s) => s.send(&msg),
                Socket::Unix(s) => s.send(&msg),
            };
            if let Err(e) = sent {
                lost += 1;
                last_error = Some(e);
            }
        }
        match last_error {
            None => Ok(()),
            Some(e) => Err(io::Error::new(e.kind(), format!("{e} ({lost} syslog messages lost)"))),
        }
    }
}

/// The host name for the header (`-`, the RFC's nil value, when unknown).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or_else(|| "-".to_string())
}
