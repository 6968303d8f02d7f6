//! Connections received as descriptors (`SCM_RIGHTS` over a Unix socket), for the origin
//! that stands for a web server taking connections from `cswitch agent --pass-fd`. A
//! blocking thread accepts the Unix connections and reads their messages; each descriptor
//! becomes a tokio `TcpStream` handed to `serve` on the runtime.

use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::unix::net::{UnixListener, UnixStream};
use tokio::net::TcpStream;
use tokio::runtime::Handle;

/// Accepts on `listener` until it is shut, on threads of its own.
pub(crate) fn spawn(
    listener: UnixListener,
    runtime: Handle,
    serve: impl Fn(TcpStream) + Send + Sync + Clone + 'static,
) -> io::Result<()> {
    std::thread::Builder::new().name("passed-accept".into()).spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let (runtime, serve) = (runtime.clone(), serve.clone());
            let _ = std::thread::Builder::new()
                .name("passed-recv".into())
                .spawn(move || receive(&conn, &runtime, &serve));
        }
    })?;
    Ok(())
}

/// Every descriptor the peer sends, until it closes.
fn receive(conn: &UnixStream, runtime: &Handle, serve: &impl Fn(TcpStream)) {
    loop {
        let mut byte = [0u8; 1];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        match recvmsg(conn, &mut [IoSliceMut::new(&mut byte)], &mut control, RecvFlags::CMSG_CLOEXEC) {
            Ok(m) if m.bytes > 0 => {}
            _ => return,
        }
        for msg in control.drain() {
            let RecvAncillaryMessage::ScmRights(fds) = msg else { continue };
            for fd in fds {
                let std = std::net::TcpStream::from(fd);
                if std.set_nonblocking(true).is_err() {
                    continue;
                }
                let _guard = runtime.enter();
                if let Ok(stream) = TcpStream::from_std(std) {
                    serve(stream);
                }
            }
        }
    }
}
