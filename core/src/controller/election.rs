//! Pure placement decisions: leader election and replica assignment.

use super::image::{MetadataImage, PartitionState};
use crate::types::NodeId;
use std::collections::BTreeSet;

/// Outcome of electing a leader for one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Election {
    /// The first live ISR member in assignment order; the ISR stays as it is.
    Clean(NodeId),
    /// No ISR member can lead: the first live eligible leader replica (KIP-966) in
    /// assignment order leads, and the ISR becomes just that replica. Safe: the high
    /// watermark has not moved since it left the ISR, so it holds every committed record.
    Eligible(NodeId),
    /// No ISR or ELR member is alive and unclean election is enabled: a live replica outside
    /// both leads (a last known ELR member first), and the ISR becomes just that replica
    /// (possible data loss).
    Unclean(NodeId),
    /// No eligible replica is alive: the partition stays leaderless.
    Leaderless,
}

/// Elects a leader for a partition whose ISR is `isr` and ELR `elr` (assignment order is
/// taken from `state.replicas`). `offline`: replicas whose broker reported this partition
/// offline (its log failed) or that are shutting down; they are never elected, clean or
/// not.
pub fn elect_leader(
    image: &MetadataImage,
    state: &PartitionState,
    isr: &[NodeId],
    elr: &[NodeId],
    offline: &BTreeSet<NodeId>,
    allow_unclean: bool,
) -> Election {
    let live = |b: &&NodeId| image.is_unfenced(**b) && !offline.contains(*b);
    let first_of = |set: &[NodeId]| {
        state
            .replicas
            .iter()
            .filter(|b| set.contains(b))
            .find(live)
            .copied()
    };
    if let Some(leader) = first_of(isr) {
        return Election::Clean(leader);
    }
    if let Some(leader) = first_of(elr) {
        return Election::Eligible(leader);
    }
    if allow_unclean {
        if let Some(leader) = first_of(&state.last_known_elr).or_else(|| first_of(&state.replicas))
        {
            return Election::Unclean(leader);
        }
    }
    Election::Leaderless
}

/// Deterministic replica assignment over `brokers` (sorted, distinct): partition `p`'s
/// first replica is `brokers[(start + p) % n]`, so leaders spread round-robin from a
/// per-topic start; followers follow at a shift that grows every `n` partitions (as in
/// Kafka), so the same broker pairs do not always share partitions. Needs `rf <= n`.
pub fn assign_replicas(
    brokers: &[NodeId],
    partitions: u32,
    rf: usize,
    start: usize,
) -> Vec<Vec<NodeId>> {
    let n = brokers.len();
    debug_assert!(rf >= 1 && rf <= n, "rf {rf} with {n} brokers");
    (0..partitions as usize)
        .map(|p| {
            let first = (start + p) % n;
            let mut replicas = vec![brokers[first]];
            if n > 1 {
                let shift = (start + p / n) % (n - 1);
                for j in 1..rf {
                    let idx = (first + 1 + (shift + j - 1) % (n - 1)) % n;
                    replicas.push(brokers[idx]);
                }
            }
            replicas
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignment_is_distinct_and_spreads_leaders() {
        let brokers = [1, 2, 3, 4];
        for start in 0..4 {
            for rf in 1..=4 {
                let a = assign_replicas(&brokers, 8, rf, start);
                assert_eq!(a.len(), 8);
                for replicas in &a {
                    let set: BTreeSet<_> = replicas.iter().collect();
                    assert_eq!(set.len(), rf, "{replicas:?}");
                }
                let leaders: BTreeSet<_> = a.iter().map(|r| r[0]).collect();
                assert_eq!(leaders.len(), 4, "every broker leads some partition");
            }
        }
    }

    #[test]
    fn assignment_is_deterministic() {
        assert_eq!(
            assign_replicas(&[1, 2, 3], 5, 2, 1),
            assign_replicas(&[1, 2, 3], 5, 2, 1)
        );
        assert_eq!(assign_replicas(&[1, 2, 3], 1, 3, 0), vec![vec![1, 2, 3]]);
    }
}
