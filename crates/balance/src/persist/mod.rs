//! Session persistence: keeping a client's requests on the server that holds its session.
//!
//! Owns the stick table (a bounded, expiring, sharded map key → server id shared by all
//! workers) and the cookie modes of seed 001 §IV and HAProxy: programmer cookies
//! ("SERVER=A", read with [`find_cookie`]), cookie insertion ([`InsertMode`]), prefixing
//! the application's cookie ([`PrefixMode`]), cookie learning ([`LearnMode`]) and
//! cookie name rewriting that keeps the header length ([`RenameMode`]); plus the keys of
//! the cookie-less affinities ([`mask_ip`] for `source`, [`url_param`]).
//!
//! Pure like the schedulers: bytes in, bytes or decisions out; no I/O, no clocks (times
//! are passed in: `Instant` for tables, unix seconds where a cookie carries a date),
//! nothing panics on any input. A mode is built once per config snapshot; the proxy calls
//! it on the request path (find the server, restore what the server must see) and on the
//! response path (set or rewrite the cookie, learn). Servers appear in cookies as the
//! proxy's opaque per-server tag (default: the server's name), or for `rename` as a
//! 3-character code ([`rename_code`]).
//!
//! Layout: `stick.rs` [`StickTable`]; `cookie.rs` `Cookie:`/`Set-Cookie:` parsing and
//! editing; `insert.rs`, `prefix.rs`, `learn.rs`, `rename.rs` one mode each; `keys.rs`
//! address masking and URL parameters.

mod cookie;
mod insert;
mod keys;
mod learn;
mod prefix;
mod rename;
mod stick;

pub use cookie::{
    cookie_pairs, find_cookie, is_cookie_name, is_cookie_value, parse_set_cookie, rewrite_cookie_header,
    CookieEdit, CookiePairs, SetCookie,
};
pub use insert::{InsertHit, InsertMode, InsertOptions};
pub use keys::{mask_ip, url_param};
pub use learn::LearnMode;
pub use prefix::{add_prefix, split_prefix, PrefixMode, PREFIX_DELIMITER};
pub use rename::{
    rename_code, rename_index, RenameHit, RenameHits, RenameMode, CODE_COUNT, DEFAULT_CLASS, DEFAULT_KEYWORD,
    MIN_NAME_LEN,
};
pub use stick::{StickTable, DEFAULT_SHARDS};
