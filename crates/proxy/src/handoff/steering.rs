//! The steering table: installed at start for the one-way listeners (one VIP, their
//! ports), removed at stop; each worker thread opens its own netlink handle on it.

use oneway::{Steering, TableSpec};
use std::cell::RefCell;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;

/// The installed table's name (set once, at start).
static TABLE: OnceLock<String> = OnceLock::new();

thread_local! {
    static HANDLE: RefCell<Option<Steering>> = const { RefCell::new(None) };
}

/// The installed table's name, if one is.
pub fn table() -> Option<&'static str> {
    TABLE.get().map(String::as_str)
}

/// Runs `op` on this worker's handle (opened on first use).
pub fn with(op: impl FnOnce(&mut Steering) -> io::Result<()>) -> io::Result<()> {
    let table = TABLE.get().ok_or_else(|| io::Error::other("no steering table installed"))?;
    HANDLE.with(|h| {
        let mut h = h.borrow_mut();
        if h.is_none() {
            *h = Some(Steering::open(table)?);
        }
        match h.as_mut() {
            Some(s) => op(s),
            None => Err(io::Error::other("no steering handle")),
        }
    })
}

/// Installs the table when a listener is one-way: its VIP (one IPv4 address for all of
/// them) and ports, on `[oneway] interface`, with that interface's MAC as the source of
/// steered frames.
pub fn install(config: &config::Config) -> io::Result<()> {
    let Some(oneway) = &config.oneway else { return Ok(()) };
    let binds: Vec<SocketAddr> =
        config.listeners.iter().filter(|l| l.mode == config::Mode::OneWay).map(|l| l.bind).collect();
    let Some(first) = binds.first() else { return Ok(()) };
    let IpAddr::V4(vip) = first.ip() else {
        return Err(io::Error::other("one-way listeners need an IPv4 VIP"));
    };
    if binds.iter().any(|b| b.ip() != first.ip()) {
        return Err(io::Error::other("one-way listeners must share one VIP"));
    }
    let spec = TableSpec {
        table: oneway.table.clone(),
        iface: oneway.interface.clone(),
        vip,
        ports: binds.iter().map(SocketAddr::port).collect(),
        switch_mac: interface_mac(&oneway.interface)?,
        flow_timeout: oneway.flow_timeout,
    };
    oneway::install_steering(&spec)?;
    let _ = TABLE.set(spec.table.clone());
    tracing::info!(table = %spec.table, iface = %spec.iface, %vip, "one-way steering table installed");
    Ok(())
}

/// Removes the table installed at start.
pub fn remove() {
    if let Some(table) = TABLE.get() {
        let _ = oneway::remove_steering(table);
    }
}

fn interface_mac(iface: &str) -> io::Result<[u8; 6]> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{iface}/address"))
        .map_err(|e| io::Error::new(e.kind(), format!("interface {iface}: {e}")))?;
    config::parse_mac(text.trim())
        .ok_or_else(|| io::Error::other(format!("interface {iface}: bad MAC {text:?}")))
}
