//! The leader's in-sync replica set and what it knows of each follower in its epoch: the
//! ISR the controller confirmed, the proposals it may still accept, each follower's
//! acknowledged log end and catch-up time. The leader asks it who must hold a record before
//! the high watermark passes it ([`Isr::high_watermark`]), who has fallen behind
//! ([`Isr::lagging`]) and when the first member would ([`Isr::earliest_caught_up`]).
//!
//! Two answers are kept ready rather than recomputed, because the leader asks for them
//! after every step and only a follower's fetch or an ISR change moves them: the maximal
//! ISR as a sorted list, and the earliest catch-up time of the confirmed members. Both are
//! private and every change goes through a method here that keeps them right; debug builds
//! check them against a recomputation after each change, and a proptest checks every
//! answer against a model that computes it from scratch.

use super::node_map::NodeMap;
use crate::types::{earliest, Nanos, NodeId, Offset};
use std::collections::BTreeSet;

/// What the leader knows about one follower in its current epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Last fetch offset that passed validation: the follower's durable log end.
    /// None until the follower fetched in this epoch.
    pub log_end: Option<Offset>,
    /// Last time the follower was caught up to the leader's log end (Kafka's rule: a
    /// fetch at >= the leader's LEO now, or at >= the LEO of the previous fetch time).
    pub last_caught_up: Nanos,
    pub last_fetch: Nanos,
    pub leo_at_last_fetch: Offset,
}

impl Progress {
    /// A follower the leader starts to track at `now`, its log end not known yet: it
    /// counts as caught up now, so it has the full lag time to show up.
    pub fn starting(now: Nanos, leader_log_end: Offset) -> Self {
        Self {
            log_end: None,
            last_caught_up: now,
            last_fetch: now,
            leo_at_last_fetch: leader_log_end,
        }
    }

    /// Kafka's catch-up rule for a fetch at `offset` while the leader's log ends at `leo`.
    fn fetched(&mut self, now: Nanos, offset: Offset, leo: Offset) {
        if offset >= leo {
            self.last_caught_up = now;
        } else if offset >= self.leo_at_last_fetch {
            self.last_caught_up = self.last_caught_up.max(self.last_fetch);
        }
        self.last_fetch = now;
        self.leo_at_last_fetch = leo;
        self.log_end = Some(offset);
    }
}

/// The ISR of one leader epoch (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Isr {
    /// The replica that leads: a member with no progress entry of its own.
    leader: NodeId,
    /// ISR as confirmed by the controller.
    confirmed: BTreeSet<NodeId>,
    /// Union of every ISR proposed at the current partition epoch. Any one of them may
    /// have been (or, delayed in the network, may still be) accepted, so all count until
    /// the controller's answer or metadata moves the partition epoch on.
    proposed: BTreeSet<NodeId>,
    followers: NodeMap<Progress>,
    /// Kept: `confirmed ∪ proposed` in order.
    maximal: Vec<NodeId>,
    /// Kept: the earliest `last_caught_up` of the followers in `confirmed`.
    caught_up: Option<Nanos>,
}

impl Isr {
    /// The ISR `confirmed` of a new epoch led by `leader`, tracking `followers`.
    pub fn new(leader: NodeId, confirmed: &[NodeId], followers: NodeMap<Progress>) -> Self {
        let mut isr = Self {
            leader,
            confirmed: confirmed.iter().copied().collect(),
            proposed: BTreeSet::new(),
            followers,
            maximal: Vec::new(),
            caught_up: None,
        };
        isr.remaximize();
        isr.recount_caught_up();
        isr
    }

    /// Whether `r` is in the confirmed ISR.
    pub fn contains(&self, r: NodeId) -> bool {
        // With no proposal out (nearly always) the maximal list is the confirmed ISR, and
        // a scan of its few ids costs less than a search of the set.
        let found = if self.proposed.is_empty() {
            self.maximal.contains(&r)
        } else {
            self.confirmed.contains(&r)
        };
        debug_assert_eq!(found, self.confirmed.contains(&r));
        found
    }

    /// The ISR as the controller confirmed it.
    pub fn confirmed(&self) -> &BTreeSet<NodeId> {
        &self.confirmed
    }

    /// The confirmed ISR united with every proposal sent at this partition epoch ("maximal
    /// ISR"), in order. Whatever the controller ends up committing is a subset of it, so
    /// requiring every member of it for the HW is safe under every outcome.
    pub fn maximal(&self) -> &[NodeId] {
        &self.maximal
    }

    /// What the leader knows of follower `r` in this epoch.
    pub fn follower(&self, r: NodeId) -> Option<&Progress> {
        self.followers.get(&r)
    }

    /// The controller confirmed `isr`: it settles every proposal made so far.
    pub fn confirm(&mut self, isr: &[NodeId]) {
        self.confirmed = isr.iter().copied().collect();
        self.proposed.clear();
        self.remaximize();
        self.recount_caught_up();
        debug_assert_eq!(self.maximal.len(), self.confirmed.len());
    }

    /// The leader sent `isr` to the controller: until the partition epoch moves on, its
    /// members count for the HW as if confirmed.
    pub fn propose(&mut self, isr: &BTreeSet<NodeId>) {
        self.proposed.extend(isr.iter().copied());
        self.remaximize();
        debug_assert!(isr.iter().all(|r| self.maximal.contains(r)));
    }

    /// Follower `r` fetched from `offset` while the leader's log ended at `leo`.
    pub fn record_fetch(&mut self, now: Nanos, r: NodeId, offset: Offset, leo: Offset) {
        debug_assert_ne!(r, self.leader, "the leader does not fetch from itself");
        let known = self.followers.contains_key(&r);
        let p = self.followers.entry_or_default(r);
        let before = p.last_caught_up;
        p.fetched(now, offset, leo);
        debug_assert!(p.last_caught_up >= before || !known);
        // `last_caught_up` only grows, so the earliest changes only when a new follower
        // appears or the one holding it moves on.
        if !known || self.caught_up == Some(before) {
            self.recount_caught_up();
        }
        debug_assert_eq!(
            self.caught_up,
            self.caught_up_now(),
            "stale ISR catch-up time"
        );
    }

    /// The highest offset every maximal-ISR member holds durably, given the leader's own
    /// durable log end: a follower that has not fetched in this epoch holds nothing yet.
    pub fn high_watermark(&self, leader_durable_end: Offset) -> Offset {
        let mut hw = leader_durable_end;
        for &r in self.maximal.iter().filter(|r| **r != self.leader) {
            let end = self.followers.get(&r).and_then(|p| p.log_end).unwrap_or(0);
            hw = hw.min(end);
        }
        debug_assert!(hw <= leader_durable_end);
        hw
    }

    /// The earliest last catch-up time of a confirmed follower (`None`: the leader is
    /// alone in the ISR): when it passes the lag limit, that follower is lagging.
    pub fn earliest_caught_up(&self) -> Option<Nanos> {
        debug_assert_eq!(
            self.caught_up,
            self.caught_up_now(),
            "stale ISR catch-up time"
        );
        self.caught_up
    }

    /// The confirmed followers not caught up within `lag_max` of `now` (or never seen).
    pub fn lagging(&self, now: Nanos, lag_max: Nanos) -> BTreeSet<NodeId> {
        self.confirmed
            .iter()
            .copied()
            .filter(|r| *r != self.leader)
            .filter(|r| {
                self.followers
                    .get(r)
                    .is_none_or(|p| now.saturating_sub(p.last_caught_up) > lag_max)
            })
            .collect()
    }

    fn remaximize(&mut self) {
        self.maximal.clear();
        self.maximal
            .extend(self.confirmed.union(&self.proposed).copied());
    }

    fn recount_caught_up(&mut self) {
        self.caught_up = self.caught_up_now();
    }

    /// The earliest catch-up time, from `followers` and `confirmed` (the leader has no
    /// progress entry, so it is never considered).
    fn caught_up_now(&self) -> Option<Nanos> {
        let in_isr = self.followers.iter().filter(|(r, _)| self.contains(*r));
        in_isr.fold(None, |at, (_, p)| earliest(at, Some(p.last_caught_up)))
    }

    /// A test hook that breaks the leader's HW invariant on purpose, so the checker's
    /// test can show it is caught. It keeps this type's own caches right.
    #[cfg(test)]
    pub fn force_log_end(&mut self, r: NodeId, log_end: Option<Offset>) {
        self.followers.entry_or_default(r).log_end = log_end;
        self.recount_caught_up();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// The plain definitions: every answer computed from the sets and progress entries.
    #[derive(Default)]
    struct Model {
        leader: NodeId,
        confirmed: BTreeSet<NodeId>,
        proposed: BTreeSet<NodeId>,
        followers: BTreeMap<NodeId, Progress>,
    }

    impl Model {
        fn maximal(&self) -> Vec<NodeId> {
            let all: BTreeSet<NodeId> = self.confirmed.union(&self.proposed).copied().collect();
            all.into_iter().collect()
        }

        fn high_watermark(&self, leader_end: Offset) -> Offset {
            let ends = self
                .maximal()
                .into_iter()
                .filter(|r| *r != self.leader)
                .map(|r| self.followers.get(&r).and_then(|p| p.log_end).unwrap_or(0));
            ends.fold(leader_end, Offset::min)
        }

        fn earliest_caught_up(&self) -> Option<Nanos> {
            let confirmed = self
                .followers
                .iter()
                .filter(|(r, _)| self.confirmed.contains(r));
            confirmed.map(|(_, p)| p.last_caught_up).min()
        }

        fn lagging(&self, now: Nanos, lag_max: Nanos) -> BTreeSet<NodeId> {
            let behind = |r: &NodeId| match self.followers.get(r) {
                None => true,
                Some(p) => now.saturating_sub(p.last_caught_up) > lag_max,
            };
            let followers = self.confirmed.iter().filter(|r| **r != self.leader);
            followers.filter(|r| behind(r)).copied().collect()
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Confirm(BTreeSet<NodeId>),
        Propose(BTreeSet<NodeId>),
        Fetch {
            r: NodeId,
            wait: Nanos,
            offset: Offset,
            leo: Offset,
        },
    }

    fn ids() -> impl Strategy<Value = BTreeSet<NodeId>> {
        proptest::collection::btree_set(1..6u32, 0..5)
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            ids().prop_map(Op::Confirm),
            ids().prop_map(Op::Propose),
            (2..7u32, 0..50u64, 0..20u64, 0..20u64).prop_map(|(r, wait, offset, leo)| Op::Fetch {
                r,
                wait,
                offset,
                leo
            }),
            (2..7u32, 0..50u64, 0..20u64, 0..20u64).prop_map(|(r, wait, offset, leo)| Op::Fetch {
                r,
                wait,
                offset,
                leo
            }),
        ]
    }

    proptest! {
        /// After every change, every answer is the plain definition's.
        #[test]
        fn answers_as_the_plain_definitions(
            initial in ids(),
            tracked in proptest::collection::btree_set(2..6u32, 0..4),
            ops in proptest::collection::vec(op(), 0..60),
        ) {
            let leader = 1;
            let confirmed: Vec<NodeId> = initial.iter().copied().collect();
            let followers: BTreeMap<NodeId, Progress> =
                tracked.iter().map(|r| (*r, Progress::starting(0, 0))).collect();
            let mut isr = Isr::new(leader, &confirmed, followers.clone().into_iter().collect());
            let mut model = Model { leader, confirmed: initial, followers, ..Model::default() };
            let mut now = 0;
            for op in ops {
                match op {
                    Op::Confirm(s) => {
                        isr.confirm(&s.iter().copied().collect::<Vec<_>>());
                        model.confirmed = s;
                        model.proposed.clear();
                    }
                    Op::Propose(s) => {
                        isr.propose(&s);
                        model.proposed.extend(s);
                    }
                    Op::Fetch { r, wait, offset, leo } => {
                        now += wait;
                        isr.record_fetch(now, r, offset, leo);
                        model.followers.entry(r).or_default().fetched(now, offset, leo);
                    }
                }
                for r in 0..8 {
                    prop_assert_eq!(isr.contains(r), model.confirmed.contains(&r));
                    prop_assert_eq!(isr.follower(r), model.followers.get(&r));
                }
                prop_assert_eq!(isr.confirmed(), &model.confirmed);
                prop_assert_eq!(isr.maximal().to_vec(), model.maximal());
                prop_assert_eq!(isr.earliest_caught_up(), model.earliest_caught_up());
                for end in [0, 7, 30] {
                    prop_assert_eq!(isr.high_watermark(end), model.high_watermark(end));
                }
                for lag in [0, 20, 100] {
                    prop_assert_eq!(isr.lagging(now, lag), model.lagging(now, lag));
                }
            }
        }
    }

    /// Kafka's rule: a fetch behind the leader's current log end still counts as caught up
    /// at the previous fetch if it reached the log end the leader had then.
    #[test]
    fn a_follower_reaching_the_previous_log_end_caught_up_at_the_previous_fetch() {
        let mut isr = Isr::new(
            1,
            &[1, 2],
            [(2, Progress::starting(0, 10))].into_iter().collect(),
        );
        isr.record_fetch(5, 2, 10, 12); // behind now, but at the LEO of the last fetch
        assert_eq!(isr.follower(2).map(|p| p.last_caught_up), Some(0));
        isr.record_fetch(9, 2, 12, 15);
        assert_eq!(isr.earliest_caught_up(), Some(5));
        isr.record_fetch(11, 2, 13, 15); // short of the previous fetch's LEO 15: no credit
        assert_eq!(isr.earliest_caught_up(), Some(5));
        assert_eq!(isr.lagging(11, 5), BTreeSet::from([2]));
        assert_eq!(isr.high_watermark(20), 13);
    }
}
