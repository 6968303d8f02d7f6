//! Cluster-wide admission control: a server's `maxconn` holds across the nodes, not per
//! node. Each node publishes, every tick, its requests in flight to each server that has a
//! `maxconn` (`act/<group>\t<server>`, rewritten only when the count changed, so an idle
//! cluster sends nothing), and hands the switch the other live nodes' last-known counts,
//! from which [`Admission::limit`] sets how many slots this node may hold until the next
//! tick:
//!
//! - its **share**: `⌊maxconn / N⌋`, one more for the first `maxconn mod N` nodes by name
//!   (the shares of the N live nodes add up to `maxconn`); always allowed, so stale counts
//!   never starve a node;
//! - beyond it, what it holds plus **a 1/N part of the free slots** (`maxconn` less what
//!   every node holds; the remainder again to the first nodes by name), so N nodes growing
//!   at once from the same view take the free slots once between them, not N times;
//! - and never more than `maxconn` less what the others hold.
//!
//! The overshoot this allows is bounded by what the other nodes took since the counts this
//! node last heard (docs/cluster.md, "Cluster-wide maxconn").

use crate::keys;
use chitchat::NodeState;
use std::collections::HashMap;

/// This node's requests in flight to one server with a `maxconn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlight {
    /// The group's name.
    pub group: String,
    /// The server's name in that group.
    pub server: String,
    /// Requests holding one of the server's slots on this node.
    pub count: u32,
}

/// What the other live nodes hold, as last heard.
#[derive(Clone, Debug, Default)]
pub struct Admission {
    live_nodes: usize,
    /// This node's place among the live nodes by name (0 first).
    rank: usize,
    /// `group\tserver` → the sum of the other live nodes' counts.
    others: HashMap<String, u32>,
}

impl Admission {
    /// Live nodes, this one included (at least 1).
    pub fn live_nodes(&self) -> usize {
        self.live_nodes.max(1)
    }

    /// Requests the other live nodes hold on `server` of `group`.
    pub fn others(&self, group: &str, server: &str) -> u32 {
        self.others.get(&format!("{group}\t{server}")).copied().unwrap_or(0)
    }

    /// How many slots of `server` this node may hold until the next tick, holding `mine`
    /// now.
    pub fn limit(&self, group: &str, server: &str, maxconn: u32, mine: u32) -> u32 {
        let others = self.others(group, server);
        let share = self.part(maxconn);
        let free = maxconn.saturating_sub(mine.saturating_add(others));
        let grow = mine.saturating_add(self.part(free)).min(maxconn.saturating_sub(others));
        share.max(grow)
    }

    /// This node's part of `n` slots split over the live nodes: `⌊n / N⌋`, plus one for the
    /// first `n mod N` nodes by name, so the parts add up to `n`.
    fn part(&self, n: u32) -> u32 {
        let nodes = u32::try_from(self.live_nodes()).unwrap_or(u32::MAX);
        let rank = u32::try_from(self.rank).unwrap_or(u32::MAX);
        n / nodes + u32::from(rank < n % nodes)
    }
}

/// Writes the counts that changed since the last tick into this node's state, and deletes
/// those of servers no longer listed (`last`: key → the count published).
pub(crate) fn publish(state: &mut NodeState, last: &mut HashMap<String, u32>, counts: Vec<InFlight>) {
    let mut listed = HashMap::with_capacity(counts.len());
    for c in counts {
        let key = keys::active_key(&c.group, &c.server);
        if last.get(&key) != Some(&c.count) {
            state.set(&key, c.count);
        }
        listed.insert(key, c.count);
    }
    for key in last.keys().filter(|k| !listed.contains_key(*k)) {
        state.delete(key);
    }
    *last = listed;
}

/// Sums the counts of `others` (the live nodes other than this one); `rank` is this node's
/// place among the live nodes by name.
pub(crate) fn collect<'a>(
    others: impl Iterator<Item = &'a NodeState>,
    live_nodes: usize,
    rank: usize,
) -> Admission {
    let mut sums: HashMap<String, u32> = HashMap::new();
    for state in others {
        for (key, value) in state.iter_prefix(keys::ACTIVE_PREFIX) {
            if let Some((group, server, count)) = keys::parse_active(key, &value.value) {
                *sums.entry(format!("{group}\t{server}")).or_default() += count;
            }
        }
    }
    Admission { live_nodes, rank, others: sums }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(nodes: usize, rank: usize, others: &[(&str, u32)]) -> Admission {
        let others = others.iter().map(|(k, v)| ((*k).to_string(), *v)).collect();
        Admission { live_nodes: nodes, rank, others }
    }

    #[test]
    fn a_lone_node_has_all_of_maxconn() {
        assert_eq!(with(1, 0, &[]).limit("g", "s", 10, 0), 10);
    }

    #[test]
    fn idle_nodes_start_from_shares_that_add_up_to_maxconn() {
        let limits: Vec<u32> = (0..3).map(|r| with(3, r, &[]).limit("g", "s", 10, 0)).collect();
        assert_eq!(limits, [4, 3, 3]);
    }

    #[test]
    fn a_busy_node_grows_by_its_part_of_the_free_slots_up_to_maxconn() {
        let mut mine = 4;
        let mut steps = vec![mine];
        while mine < 10 && steps.len() < 20 {
            mine = with(3, 0, &[]).limit("g", "s", 10, mine);
            steps.push(mine);
        }
        assert_eq!(steps, [4, 6, 8, 9, 10]);
    }

    #[test]
    fn a_node_gets_no_more_than_the_others_leave_but_keeps_its_share() {
        assert_eq!(with(3, 1, &[("g\ts", 4)]).limit("g", "s", 10, 3), 4);
        assert_eq!(with(3, 1, &[("g\ts", 10)]).limit("g", "s", 10, 0), 3);
        assert_eq!(with(3, 0, &[("g\ts", 3)]).limit("g", "s", 10, 10), 7);
        assert_eq!(with(3, 2, &[("g\ts", 40)]).limit("g", "other", 10, 0), 3);
    }
}
