//! Server selection for cswitch.
//!
//! Owns the [`Scheduler`] trait and its implementations, one file per algorithm family,
//! and the one `match` ([`SchedulerKind::build`]) from a config name to an implementation.
//! Pure: no I/O, no clocks, no threads. The proxy tells a scheduler who the group's
//! members are ([`Scheduler::rebuild`], on start and on every change of membership or
//! weights), then gives it, per request, a slice of [`Candidate`]s (weight, in-flight
//! count, maxconn, usable or not) and the request's key, and gets an index back.
//!
//! A scheduler instance is owned by one thread at a time (`&mut self`, no locks). Shared
//! load (in-flight requests) reaches it through the candidates, which the proxy fills
//! from atomics shared by all workers. Schedulers whose decisions depend on a table they
//! learn ([`Scheduler::shares_state`]) are kept by the proxy in one instance per group
//! behind a lock, so all workers agree.
//!
//! Layout: `rr.rs` round robin (and the eligibility test all share), `wrr.rs` smooth
//! weighted round robin, `lc.rs` least connections (and the tie-rotating scan),
//! `wlc.rs` weighted least connections, `sed.rs`, `nq.rs`, `first.rs`, `random.rs`,
//! `p2c.rs`, `rng.rs`; hashing: `keyhash.rs` (the stable key hashes), `md5.rs`,
//! `consistent.rs` (with bounded load), `carp.rs`, `modch.rs`, `htrr.rs`, `maglev.rs`,
//! `jump.rs`; locality: `lard.rs` (LARD and LARD/R), `cap.rs`, `sieve.rs`; `params.rs`
//! (the tunables); `journal.rs` (learned assignments kept for a cluster to share); `persist/` (session persistence: stick tables, cookie modes). Every scheduler skips servers that are unusable or have weight 0,
//! returns `None` when none is left, and never allocates in `pick`.

mod cap;
mod carp;
mod consistent;
mod first;
mod htrr;
mod journal;
mod jump;
mod keyhash;
mod lard;
mod lc;
mod maglev;
mod md5;
mod modch;
mod nq;
mod p2c;
mod params;
pub mod persist;
mod random;
mod rng;
mod rr;
mod sed;
mod sieve;
#[cfg(test)]
mod testutil;
mod wlc;
mod wrr;

pub use params::{CapClass, Params};

/// What a scheduler knows about one server of a group at the moment of a pick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Candidate {
    /// Current weight (≥ 1 for a usable server; 0 = never picked). For `sieve` the
    /// weight is the server's capacity.
    pub weight: u32,
    /// Requests currently assigned to the server, across all workers.
    pub active: u32,
    /// The server's `maxconn` (0 = no limit); `first` fills servers up to it.
    pub maxconn: u32,
    /// False when the server must not be picked (already tried for this request, down,
    /// draining).
    pub usable: bool,
}

/// A member of a group as the scheduler is told about it on [`Scheduler::rebuild`]:
/// identity and configured weight. Hashing schedulers place servers by name, so a key
/// stays on its server when other servers come and go or the order changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member<'a> {
    /// The server's name, unique within the group.
    pub name: &'a str,
    /// Configured weight (capacity for `sieve`).
    pub weight: u32,
    /// `maxconn` (0 = no limit).
    pub maxconn: u32,
}

/// A server selection policy.
pub trait Scheduler: Send {
    /// The group's members changed (or this is the first call): servers added, removed,
    /// reordered or reweighted. Later `pick` calls pass candidates in this order.
    /// State kept per server (tables, counters) follows the server by name.
    fn rebuild(&mut self, members: &[Member<'_>]);

    /// Index of the server to use, or `None` when no candidate is usable.
    /// `servers` has the length and order of the last `rebuild`. `key` is the request's
    /// hash key (per the group's `hash_key`), `None` when the request has none; schedulers
    /// that hash then fall back to round robin over the usable servers.
    fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize>;

    /// True when decisions depend on a table learned from earlier picks (`htrr`,
    /// `lard`, `lard_r`): the proxy then shares one instance among its workers.
    fn shares_state(&self) -> bool {
        false
    }

    /// Starts keeping the assignments this scheduler learns, for
    /// [`Scheduler::drain_learned`] (a cluster shares them). Learning schedulers only.
    fn keep_learned(&mut self) {}

    /// Moves the assignments learned since the last call — (key hash, member index), the
    /// hash being XXH3 of the key, alike on every node — to `out`.
    fn drain_learned(&mut self, _out: &mut Vec<(u64, usize)>) {}

    /// Another node learned that the key whose hash is `hash` goes to `member`: remember
    /// it, as if this scheduler had decided it (not journaled again).
    fn teach(&mut self, _hash: u64, _member: usize) {}
}

macro_rules! kinds {
    ($($variant:ident => $name:literal, $ty:path, keyed: $keyed:literal, $doc:literal;)*) => {
        /// The schedulers a group can name in its config.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum SchedulerKind {
            $(#[doc = $doc] $variant,)*
        }

        impl SchedulerKind {
            /// Config names, in the order docs list them.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// Every kind, in the order of [`SchedulerKind::NAMES`].
            pub const ALL: &'static [SchedulerKind] = &[$(SchedulerKind::$variant),*];

            /// The kind a config name denotes.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some(SchedulerKind::$variant),)*
                    _ => None,
                }
            }

            /// The config name of this kind.
            pub fn name(&self) -> &'static str {
                match self {
                    $(SchedulerKind::$variant => $name,)*
                }
            }

            /// True when picks read the request's key (`hash_key`): the proxy extracts
            /// it only for these.
            pub fn uses_key(&self) -> bool {
                match self {
                    $(SchedulerKind::$variant => $keyed,)*
                }
            }

            /// A fresh scheduler of this kind; call [`Scheduler::rebuild`] before `pick`.
            pub fn build(&self, params: &Params) -> Box<dyn Scheduler> {
                match self {
                    $(SchedulerKind::$variant => Box::new(<$ty>::new(params)),)*
                }
            }
        }
    };
}

kinds! {
    RoundRobin => "rr", rr::RoundRobin, keyed: false, "Round robin.";
    WeightedRoundRobin => "wrr", wrr::WeightedRoundRobin, keyed: false, "Smooth weighted round robin (nginx's algorithm).";
    LeastConnections => "lc", lc::LeastConnections, keyed: false, "Least connections (fewest in-flight requests).";
    WeightedLeastConnections => "wlc", wlc::WeightedLeastConnections, keyed: false, "Weighted least connections (IPVS: min (active+1)/weight).";
    ShortestExpectedDelay => "sed", sed::ShortestExpectedDelay, keyed: false, "Shortest expected delay (IPVS).";
    NeverQueue => "nq", nq::NeverQueue, keyed: false, "Never queue (IPVS): an idle server if any, else SED.";
    First => "first", first::First, keyed: false, "Fill servers up to their maxconn, in order.";
    Random => "random", random::Random, keyed: false, "Weighted random.";
    PowerOfTwo => "p2c", p2c::PowerOfTwo, keyed: false, "Power of two choices on in-flight requests.";
    Md5 => "md5", md5::Md5Modulo, keyed: true, "MD5 of the key modulo the number of servers.";
    Consistent => "consistent", consistent::Consistent, keyed: true, "Consistent hashing (ketama ring, virtual nodes; bounded load with hash_balance_factor).";
    Carp => "carp", carp::Carp, keyed: true, "CARP: highest combined hash, weighted.";
    ModifiedConsistent => "modch", modch::ModifiedConsistent, keyed: true, "Consistent hashing with ring points proportional to weight.";
    HashTableRoundRobin => "htrr", htrr::HashTableRoundRobin, keyed: true, "Keys assigned round robin on first sight, then remembered.";
    Maglev => "maglev", maglev::Maglev, keyed: true, "Maglev lookup table.";
    Jump => "jump", jump::Jump, keyed: true, "Jump consistent hash.";
    Lard => "lard", lard::Lard, keyed: true, "Locality-aware request distribution.";
    LardReplicated => "lard_r", lard::LardReplicated, keyed: true, "LARD with replication for hot targets.";
    Cap => "cap", cap::Cap, keyed: true, "Client-aware policy: classes by path, each balanced round robin.";
    Sieve => "sieve", sieve::Sieve, keyed: true, "SIEVE adaptive non-uniform hashing over capacities (HashNAT).";
}
