//! Tunables of the schedulers that have any, with their defaults. The config crate fills
//! one [`Params`] per group; schedulers read what concerns them when built.

/// Per-group scheduler parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Ring points per server for `consistent` (ketama uses 160), and per unit of weight
    /// for `modch`.
    pub virtual_nodes: u32,
    /// Bounded-load consistent hashing (Mirrokni et al.): a server may take at most this
    /// percentage of the mean load (e.g. 125); 0 = off. Applies to `consistent`.
    pub hash_balance_factor: u32,
    /// LARD's low load threshold (in-flight requests): below it a server is underloaded.
    pub lard_low: u32,
    /// LARD's high load threshold: above it a server sheds targets; at twice it, always.
    pub lard_high: u32,
    /// CAP's request classes, tried in order; a path matching none is in the last class.
    pub cap_classes: Vec<CapClass>,
    /// SIEVE's extra hash functions (`f` in L = log₂ n' + f).
    pub sieve_extra_functions: u32,
    /// SIEVE builds its table from the current members and capacities alone, not from
    /// the history of its rebuilds, so every node of a cluster places a key alike
    /// (HashNAT). Not a config key: the proxy sets it when the config has `[cluster]`.
    pub sieve_canonical: bool,
}

/// One CAP class: a name and the patterns that put a request in it. A pattern starting
/// with `.` matches the path's extension, one starting with `/` a path prefix, anything
/// else a substring of the path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapClass {
    /// Class name (`static`, `dynamic`, `cpu`, `disk`, or the operator's own).
    pub name: String,
    /// Patterns, as above.
    pub patterns: Vec<String>,
}

impl Default for Params {
    fn default() -> Self {
        let class = |name: &str, patterns: &[&str]| CapClass {
            name: name.to_string(),
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
        };
        Params {
            virtual_nodes: 160,
            hash_balance_factor: 0,
            // Pai et al. (LARD, ASPLOS '98) used T_low = 25 and T_high = 65 connections.
            lard_low: 25,
            lard_high: 65,
            cap_classes: vec![
                class(
                    "static",
                    &[".html", ".htm", ".gif", ".jpg", ".jpeg", ".png", ".css", ".js", ".ico", ".txt"],
                ),
                class("disk", &[".pdf", ".zip", ".gz", ".tar", ".mp4", ".iso", "/download/"]),
                class("cpu", &["/cgi-bin/", ".cgi", ".pl", ".php"]),
                class("dynamic", &[]),
            ],
            sieve_extra_functions: 2,
            sieve_canonical: false,
        }
    }
}
