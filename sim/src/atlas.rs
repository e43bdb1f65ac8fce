//! The fault atlas: which fault kinds struck at which protocol moments.
//!
//! A sweep that crashed brokers a thousand times but never a partition leader while another
//! partition was electing has not tested that moment. When a fault strikes, the world
//! classifies its target's role (a partition leader, a follower only, the controller, a group
//! member, the network) and the cluster's moment (steady; electing, some partition without a
//! serving leader; under-replicated, some ISR smaller than its replica set), and the atlas
//! counts `(kind, role, moment)`. Like probes it only observes: nothing here feeds the run or
//! its trace hash.

use crate::faults::{Fault, NodeRef};
use std::collections::BTreeMap;

/// What the fault's target was doing when it struck.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TargetRole {
    /// A broker leading at least one partition of the workload's topic.
    Leader,
    /// A broker leading none.
    Follower,
    Controller,
    /// The broker hosting the group's coordinator (coordinator-crash).
    Coordinator,
    /// A consumer-group member.
    Member,
    /// Links rather than a process (partitions, clogs).
    Network,
}

/// The cluster's state when the fault struck.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Moment {
    /// Every partition has a serving leader and a full ISR.
    Steady,
    /// Some partition has no serving leader (an election is due or under way).
    Electing,
    /// Every partition is led, but some ISR is smaller than its replica set.
    UnderReplicated,
}

impl TargetRole {
    pub fn name(self) -> &'static str {
        match self {
            TargetRole::Leader => "leader",
            TargetRole::Follower => "follower",
            TargetRole::Controller => "controller",
            TargetRole::Coordinator => "coordinator",
            TargetRole::Member => "member",
            TargetRole::Network => "network",
        }
    }
}

impl Moment {
    pub fn name(self) -> &'static str {
        match self {
            Moment::Steady => "steady",
            Moment::Electing => "electing",
            Moment::UnderReplicated => "under-replicated",
        }
    }
}

/// The one process a fault strikes, if it strikes one process.
pub fn target(f: &Fault) -> Option<NodeRef> {
    match f {
        Fault::Crash { node, .. }
        | Fault::Pause { node, .. }
        | Fault::ClockJump { node, .. }
        | Fault::ClockStall { node, .. }
        | Fault::ClockSkew { node, .. }
        | Fault::BitFlip { node }
        | Fault::ReadErrors { node, .. }
        | Fault::DiskFull { node, .. }
        | Fault::SlowDisk { node, .. } => Some(*node),
        _ => None,
    }
}

/// Counts of `(fault kind, role, moment)`, in a stable order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Atlas {
    counts: BTreeMap<(&'static str, TargetRole, Moment), u64>,
}

impl Atlas {
    pub fn strike(&mut self, kind: &'static str, role: TargetRole, moment: Moment) {
        *self.counts.entry((kind, role, moment)).or_default() += 1;
    }

    /// Entries as `kind@role/moment` with their counts.
    pub fn entries(&self) -> Vec<(String, u64)> {
        self.counts
            .iter()
            .map(|((k, r, m), n)| (format!("{k}@{}/{}", r.name(), m.name()), *n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_named_and_counted() {
        let mut a = Atlas::default();
        a.strike("crash", TargetRole::Leader, Moment::Electing);
        a.strike("crash", TargetRole::Leader, Moment::Electing);
        a.strike("bit-flip", TargetRole::Follower, Moment::Steady);
        assert_eq!(
            a.entries(),
            vec![
                ("bit-flip@follower/steady".to_string(), 1),
                ("crash@leader/electing".to_string(), 2)
            ]
        );
    }
}
