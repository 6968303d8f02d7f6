//! Reaching a server, for every listener: the one routing decision (`decide`), the pick
//! (`pick`: schedulers and hash keys), the queue for a server's slots (`slots`), connect or
//! reuse (`connect`, over `floor::pool`; `h2`: HTTP/2 server connections shared by streams,
//! over `floor::h2pool`), connections started ahead (`prealloc`), passive
//! health from live traffic (`passive`), and the byte tunnel after a hand-over (`tunnel`).

pub mod connect;
pub mod decide;
pub mod h2;
pub mod passive;
pub mod pick;
pub mod prealloc;
pub mod slots;
pub mod tunnel;
