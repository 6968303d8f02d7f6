//! Tells the service manager which process is the switch after an upgrade. Under systemd
//! (`NOTIFY_SOCKET` set, `NotifyAccess=main`) the old process sends `MAINPID=<new pid>`
//! once the new process serves, so systemd follows the new process instead of taking the
//! old one's exit for the service's end (and stopping everything in its cgroup). Without
//! `NOTIFY_SOCKET` nothing is sent. The protocol is one datagram (`sd_notify(3)`); a crate
//! for it would be more code than this.

use rustix::net::{self, AddressFamily, SendFlags, SocketAddrUnix, SocketFlags, SocketType};

/// Sends `MAINPID=pid` to `$NOTIFY_SOCKET`, if set; a failure is logged.
pub fn main_pid(pid: u32) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let sent = (|| -> std::io::Result<()> {
        let bytes = path.as_encoded_bytes();
        // `@name` is an abstract socket; anything else a path.
        let addr = match bytes.strip_prefix(b"@") {
            Some(name) => SocketAddrUnix::new_abstract_name(name)?,
            None => SocketAddrUnix::new(bytes)?,
        };
        let socket = net::socket_with(AddressFamily::UNIX, SocketType::DGRAM, SocketFlags::CLOEXEC, None)?;
        net::sendto(&socket, format!("MAINPID={pid}\n").as_bytes(), SendFlags::NOSIGNAL, &addr)?;
        Ok(())
    })();
    match sent {
        Ok(()) => tracing::info!(pid, "service manager told: the new process is the main one"),
        Err(e) => tracing::warn!(pid, error = %e, "NOTIFY_SOCKET: MAINPID not sent"),
    }
}
