//! The TLS wing: passthrough listeners routed on the ClientHello (`passthrough`), and the
//! certificates of terminating listeners and STARTTLS (`termination`). The client stream
//! that is plain or TLS, and the handshake, are floor (`floor::stream`): HTTP and mail use
//! them too. On a one-way listener a routed connection is handed to its server's agent
//! (`handoff`).

mod handoff;
pub mod passthrough;
pub mod termination;
