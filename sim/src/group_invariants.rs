//! The consumer-group invariants, checked as a run goes (see docs/groups.md, "In the
//! simulator").
//!
//! Inputs: what the members report after each of their steps ([`GroupObs`]: generation and
//! owned partitions, processed records, acknowledged commits, OffsetFetch answers, explicit
//! resets), what the coordinator hosting the group holds after each broker step (its leader
//! epoch and the group's committed offsets), and which offsets are known to hold records
//! (acknowledged to a producer or read by a consumer). Violations are reported through the
//! run's [`Checker`] under the names below (defined in [`crate::invariants`] with the
//! others), so reports and `[expect]` can name them.

use crate::client_step::GroupObs;
use crate::invariants::offset_map::PerPartition;
use crate::invariants::Checker;
use crate::time::{Human, SimTime};
use skein_core::group::GenerationId;
use skein_core::{LeaderEpoch, NodeId, Offset};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

// The names live with the other invariants' (so `invariants` needs nothing from here);
// re-exported under their usual paths.
pub use crate::invariants::{
    GROUP_ACKED_COMMIT_LOST, GROUP_NAMES as NAMES, GROUP_OFFSET_REGRESSION, GROUP_SINGLE_OWNER,
    GROUP_UNOWNED, GROUP_UNPROCESSED,
};

/// The running group checks of one simulation (one group).
#[derive(Default)]
pub struct GroupChecker {
    partitions: u32,
    /// (generation, partition) -> the member that owned it in that generation.
    claims: BTreeMap<(GenerationId, u32), u32>,
    /// Live members' owned partitions.
    owned: BTreeMap<u32, BTreeSet<u32>>,
    /// Per partition, the intervals it had no owner: `[start, end)`, `None` = still.
    unowned: BTreeMap<u32, Vec<(SimTime, Option<SimTime>)>>,
    /// The highest `__consumer_offsets` leader epoch whose coordinator was seen serving.
    coordinator_epoch: Option<LeaderEpoch>,
    /// Brokers whose coordinator was seen loaded, and at which epoch (a new entry = a load).
    loaded_on: BTreeMap<NodeId, LeaderEpoch>,
    /// Committed offset per partition as last seen at the coordinator in charge.
    committed: BTreeMap<u32, Offset>,
    /// Per partition, (time, highest acknowledged commit so far), in time order; an
    /// explicit reset lowers the running value.
    acked: BTreeMap<u32, Vec<(SimTime, Offset)>>,
    /// Offsets processed, and offsets known to hold a record, per partition: dense sets
    /// (a partition's offsets are), as every acknowledgement and every record read is
    /// reported known, each one several times.
    processed: PerPartition<()>,
    known: PerPartition<()>,
    /// Offsets below this were checked as processed.
    verified: BTreeMap<u32, Offset>,
    reported_unprocessed: BTreeSet<(u32, Offset)>,
    /// Per member: the last state [`GroupChecker::on_member`] took in that claimed nothing
    /// another member had claimed. Every member step reports its state, nearly always
    /// this one again, and taking it in again changes nothing: its claims are all the
    /// member's (claims are never changed once made) and `owned` already holds its
    /// partitions (only the member's own reports change its entry).
    last_member_state: BTreeMap<u32, (GenerationId, Rc<[u32]>)>,
    /// Bumped whenever `coordinator_epoch`, `loaded_on` or `committed` changes: while it
    /// stands still, observing a coordinator state already observed on that broker is a
    /// no-op (see [`GroupChecker::coordinator_unchanged`]).
    version: u64,
    /// Per broker: `version` after its last observation, the stamp of the coordinator
    /// observed (see [`CoordinatorStamp`]) and the state observed. (Asked after every
    /// broker step: slots by id, not a map search.)
    seen: crate::slots::PartitionSlots<(u64, Option<CoordinatorStamp>, CoordinatorState)>,
    /// Coordinator loads of the group seen (failovers + the first load).
    pub loads: u64,
    pub commits_acked: u64,
}

/// What the group's coordinator on one broker holds: `None` unless it is active, else its
/// epoch and the committed offsets of the simulator's topic, by partition.
pub type CoordinatorState = Option<(LeaderEpoch, Vec<(u32, Offset)>)>;

/// Names one coordinator's state without reading it: the broker's incarnation, its
/// `__consumer_offsets` partition count (a new count is a new host) and the coordinator's
/// [`skein_core::group::GroupCoordinator::changes`]. Two observations on one broker with
/// the same stamp saw the same state.
pub type CoordinatorStamp = (u64, u32, u64);

impl GroupChecker {
    pub fn new(partitions: u32) -> Self {
        let mut c = Self {
            partitions,
            ..Self::default()
        };
        for p in 0..partitions {
            c.unowned.insert(p, vec![(0, None)]);
        }
        c
    }

    /// Highest commit acknowledged for `p` at or before `t` (after the latest reset).
    fn acked_at(&self, p: u32, t: SimTime) -> Option<Offset> {
        let list = self.acked.get(&p)?;
        let i = list.partition_point(|(at, _)| *at <= t);
        (i > 0).then(|| list[i - 1].1)
    }

    pub fn on_obs(&mut self, v: &mut Checker, now: SimTime, obs: GroupObs) {
        match obs {
            GroupObs::Member { member, state } => self.on_member(v, now, member, state),
            GroupObs::Processed { p, offsets } => {
                for o in offsets {
                    self.processed.insert(p, o, ());
                }
            }
            GroupObs::CommitAcked { member, offsets } => {
                self.commits_acked += 1;
                for (p, o) in offsets {
                    self.on_commit_acked(v, now, member, p, o);
                }
            }
            GroupObs::Reset { p, to } => {
                // A deliberate move back: commits may go down to `to` from here on.
                let list = self.acked.entry(p).or_default();
                if list.last().is_some_and(|(_, a)| *a > to) {
                    list.push((now, to));
                }
                if let Some(c) = self.committed.get_mut(&p) {
                    if to < *c {
                        *c = to;
                        self.version += 1;
                    }
                }
            }
            GroupObs::Fetched { sent_at, offsets } => {
                for (p, got) in offsets {
                    let Some(a) = self.acked_at(p, sent_at) else {
                        continue;
                    };
                    if got.is_none_or(|g| g < a) {
                        let d = format!("partition {p}: an OffsetFetch sent at {} was answered {got:?}, but a commit of {a} had been acknowledged before", Human(sent_at));
                        v.violation(GROUP_ACKED_COMMIT_LOST, now, d);
                    }
                }
            }
        }
    }

    fn on_member(
        &mut self,
        v: &mut Checker,
        now: SimTime,
        member: u32,
        state: Option<(Option<GenerationId>, Rc<[u32]>)>,
    ) {
        if let Some((Some(g), parts)) = &state {
            if self
                .last_member_state
                .get(&member)
                .is_some_and(|(lg, lp)| lg == g && (Rc::ptr_eq(lp, parts) || **lp == **parts))
            {
                return;
            }
        }
        let set: BTreeSet<u32> = match &state {
            Some((generation, parts)) => {
                if let Some(g) = generation {
                    let mut conflict = false;
                    for &p in parts.iter() {
                        match self.claims.get(&(*g, p)) {
                            Some(&m) if m != member => {
                                conflict = true;
                                let d = format!("partition {p}: members {m} and {member} both own it in generation {g}");
                                v.violation(GROUP_SINGLE_OWNER, now, d);
                            }
                            Some(_) => {}
                            None => {
                                self.claims.insert((*g, p), member);
                            }
                        }
                    }
                    if conflict {
                        self.last_member_state.remove(&member);
                    } else {
                        self.last_member_state
                            .insert(member, (*g, Rc::clone(parts)));
                    }
                } else {
                    self.last_member_state.remove(&member);
                }
                // Most steps own what the last one did: compared before building a set.
                let same = self
                    .owned
                    .get(&member)
                    .is_some_and(|o| o.len() == parts.len() && parts.iter().all(|p| o.contains(p)));
                if same && parts.windows(2).all(|w| w[0] < w[1]) {
                    return;
                }
                parts.iter().copied().collect()
            }
            None => {
                self.last_member_state.remove(&member);
                BTreeSet::new()
            }
        };
        if self.owned.get(&member) == Some(&set) {
            return;
        }
        if set.is_empty() {
            self.owned.remove(&member);
        } else {
            self.owned.insert(member, set);
        }
        for p in 0..self.partitions {
            let has_owner = self.owned.values().any(|s| s.contains(&p));
            let intervals = self.unowned.entry(p).or_default();
            let open = intervals.last().is_some_and(|(_, e)| e.is_none());
            match (has_owner, open) {
                (true, true) => intervals.last_mut().expect("open").1 = Some(now),
                (false, false) => intervals.push((now, None)),
                _ => {}
            }
        }
    }

    fn on_commit_acked(&mut self, v: &mut Checker, now: SimTime, member: u32, p: u32, o: Offset) {
        let list = self.acked.entry(p).or_default();
        let max = list.last().map_or(o, |(_, a)| (*a).max(o));
        list.push((now, max));
        // Commit-after-process: every record known below `o` was processed by someone.
        let from = self.verified.get(&p).copied().unwrap_or(0);
        if o > from {
            self.check_processed(v, now, p, from, o, Some(member));
            self.verified.insert(p, o);
        }
    }

    fn check_processed(
        &mut self,
        v: &mut Checker,
        now: SimTime,
        p: u32,
        from: Offset,
        below: Offset,
        member: Option<u32>,
    ) {
        let missing: Vec<Offset> = self
            .known
            .range(p, from, below)
            .map(|(o, _)| o)
            .filter(|&o| !self.processed.contains(p, o))
            .filter(|&o| !self.reported_unprocessed.contains(&(p, o)))
            .collect();
        if let Some(first) = missing.first() {
            let who = member.map_or("the group".to_string(), |m| format!("member {m}"));
            let d = format!("partition {p}: {who} committed {below}, but offset {first} (a record known to exist) was never processed ({} such offsets)", missing.len());
            v.violation(GROUP_UNPROCESSED, now, d);
            for o in missing {
                self.reported_unprocessed.insert((p, o));
            }
        }
    }

    /// An offset of partition `p` is known to hold a record.
    pub fn on_known(&mut self, p: u32, o: Offset) {
        self.known.insert(p, o, ());
    }

    /// Whether observing `broker`'s coordinator at `epoch` holding `offsets` would change
    /// nothing: the same state was observed there last and nothing the observation reads
    /// or writes has changed since (so it would judge exactly as it did then, finding
    /// nothing new). Lets the world skip building the state on every broker step. The
    /// state is compared only when `stamp` differs from the one last seen there (the
    /// same stamp is the same state); a state found equal takes the new stamp. `state`
    /// gives the state, called only to compare (finding the group's offsets costs a
    /// search, and nearly every step has the stamp seen last).
    pub fn coordinator_unchanged<I: Iterator<Item = (u32, Offset)>>(
        &mut self,
        broker: NodeId,
        stamp: Option<CoordinatorStamp>,
        state: impl FnOnce() -> Option<(LeaderEpoch, I)>,
    ) -> bool {
        let Some((version, seen_stamp, seen)) = self.seen.get_mut(broker) else {
            return false;
        };
        if *version != self.version {
            return false;
        }
        if stamp.is_some() && *seen_stamp == stamp {
            return true;
        }
        let same = match (&*seen, state()) {
            (None, None) => true,
            (Some((e, offsets)), Some((epoch, mut now))) => {
                *e == epoch
                    && offsets.iter().all(|o| now.next() == Some(*o))
                    && now.next().is_none()
            }
            _ => false,
        };
        if same {
            *seen_stamp = stamp;
        }
        same
    }

    /// The coordinator of the group on `broker` is active at `epoch` and holds `offsets`
    /// (committed offsets of the simulator's topic, by partition in ascending order, each
    /// partition once: a `Vec`, not a map, as this runs after every broker step); `None`:
    /// not active there.
    pub fn on_coordinator(
        &mut self,
        v: &mut Checker,
        now: SimTime,
        broker: NodeId,
        stamp: Option<CoordinatorStamp>,
        state: CoordinatorState,
    ) {
        self.judge_coordinator(v, now, broker, state.as_ref());
        self.seen.insert(broker, (self.version, stamp, state));
    }

    fn judge_coordinator(
        &mut self,
        v: &mut Checker,
        now: SimTime,
        broker: NodeId,
        state: Option<&(LeaderEpoch, Vec<(u32, Offset)>)>,
    ) {
        let Some(&(epoch, ref offsets)) = state else {
            if self.loaded_on.remove(&broker).is_some() {
                self.version += 1;
            }
            return;
        };
        if self.coordinator_epoch.is_some_and(|e| epoch < e) {
            return; // a deposed coordinator that has not heard yet: not in charge
        }
        if self.coordinator_epoch != Some(epoch) {
            self.coordinator_epoch = Some(epoch);
            self.version += 1;
        }
        if self.loaded_on.get(&broker) != Some(&epoch) {
            self.loaded_on.insert(broker, epoch);
            self.version += 1;
            self.loads += 1;
            for (&p, list) in &self.acked {
                let Some(&(_, a)) = list.last() else { continue };
                let got = offsets.iter().find(|(q, _)| *q == p).map(|&(_, o)| o);
                if got.is_none_or(|g| g < a) {
                    let d = format!("partition {p}: the coordinator on broker {broker} loaded the group at epoch {epoch} with committed offset {got:?}, but a commit of {a} was acknowledged");
                    v.violation(GROUP_ACKED_COMMIT_LOST, now, d);
                }
            }
        }
        for &(p, o) in offsets {
            if let Some(&prev) = self.committed.get(&p) {
                if o < prev {
                    let d = format!("partition {p}: the committed offset went back from {prev} to {o} (coordinator on broker {broker}, epoch {epoch})");
                    v.violation(GROUP_OFFSET_REGRESSION, now, d);
                }
            }
            self.set_committed(p, o);
        }
    }

    fn set_committed(&mut self, p: u32, o: Offset) {
        if self.committed.insert(p, o) != Some(o) {
            self.version += 1;
        }
    }

    /// The coordinator on `broker` (at `epoch`) made these commits durable, in log order.
    /// Checked one by one: several can become durable in one broker step, so the
    /// coordinator's state seen after the step would hide a regression in between (an
    /// OffsetFetch could have been answered with the lower value).
    pub fn on_committed(
        &mut self,
        v: &mut Checker,
        now: SimTime,
        broker: NodeId,
        epoch: LeaderEpoch,
        offsets: &[(u32, Offset)],
    ) {
        if self.coordinator_epoch.is_some_and(|e| epoch < e) {
            return; // a deposed coordinator that has not heard yet: not in charge
        }
        for &(p, o) in offsets {
            if let Some(&prev) = self.committed.get(&p) {
                if o < prev {
                    let d = format!("partition {p}: the committed offset went back from {prev} to {o} (a commit made durable by the coordinator on broker {broker}, epoch {epoch})");
                    v.violation(GROUP_OFFSET_REGRESSION, now, d);
                }
            }
            self.set_committed(p, o);
        }
    }

    /// A broker's process died: its coordinator is gone.
    pub fn on_broker_down(&mut self, broker: NodeId) {
        if self.loaded_on.remove(&broker).is_some() {
            self.version += 1;
        }
    }

    /// End of run. With `settled_since` (the last fault healed then and nothing happened
    /// after), no partition may have been unowned for longer than `bound` after it.
    pub fn finish(
        &mut self,
        v: &mut Checker,
        now: SimTime,
        settled_since: Option<SimTime>,
        bound: SimTime,
    ) {
        for p in 0..self.partitions {
            if let Some(&(_, a)) = self.acked.get(&p).and_then(|l| l.last()) {
                self.check_processed(v, now, p, 0, a, None);
            }
        }
        let Some(healed) = settled_since else { return };
        for (p, intervals) in &self.unowned {
            for &(s, e) in intervals {
                let start = s.max(healed);
                let end = e.unwrap_or(now);
                if end > start && end - start > bound {
                    let d = format!("partition {p} had no owner in the group for {} from {} (the last fault healed at {}; bound {})", Human(end - start), Human(start), Human(healed), Human(bound));
                    v.violation(GROUP_UNOWNED, now, d);
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(m: u32, g: GenerationId, parts: &[u32]) -> GroupObs {
        GroupObs::Member {
            member: m,
            state: Some((Some(g), parts.into())),
        }
    }

    #[test]
    fn two_owners_in_one_generation_is_caught() {
        let mut v = Checker::new();
        let mut g = GroupChecker::new(2);
        g.on_obs(&mut v, 1, member(1, 1, &[0, 1]));
        g.on_obs(&mut v, 2, member(2, 2, &[1]));
        assert_eq!(v.count(GROUP_SINGLE_OWNER), 0, "different generations");
        g.on_obs(&mut v, 3, member(3, 2, &[1]));
        assert_eq!(v.count(GROUP_SINGLE_OWNER), 1);
    }

    /// A member's unchanged state taken in again (nearly every step) changes nothing, a
    /// conflicting one counts at every report, and one after a crash is taken in anew.
    #[test]
    fn repeated_member_states_are_judged_as_before() {
        let mut v = Checker::new();
        let mut g = GroupChecker::new(2);
        for t in 1..4 {
            g.on_obs(&mut v, t, member(1, 1, &[0, 1]));
        }
        assert_eq!(v.count(GROUP_SINGLE_OWNER), 0);
        g.on_obs(&mut v, 4, member(2, 1, &[1]));
        g.on_obs(&mut v, 5, member(2, 1, &[1]));
        assert_eq!(
            v.count(GROUP_SINGLE_OWNER),
            2,
            "each report of the conflict"
        );
        // Member 1 crashes at 6 and is back in the same state at 8: partition 0 (member 2
        // holds 1) had no owner from 6 to 8.
        let crashed = GroupObs::Member {
            member: 1,
            state: None,
        };
        g.on_obs(&mut v, 6, crashed);
        g.on_obs(&mut v, 8, member(1, 1, &[0, 1]));
        g.on_obs(&mut v, 9, member(1, 1, &[0, 1]));
        assert_eq!(g.unowned[&0], vec![(0, Some(1)), (6, Some(8))]);
        assert_eq!(g.unowned[&1], vec![(0, Some(1))]);
        assert_eq!(v.count(GROUP_SINGLE_OWNER), 2);
    }

    /// The stamp last seen on a broker stands for its state: the same stamp is unchanged
    /// without reading the offsets; another stamp compares them (and, equal, is adopted);
    /// anything the checks recorded since (`version`) makes it changed whatever the stamp.
    #[test]
    fn a_seen_stamp_skips_the_comparison_and_a_new_one_compares() {
        let mut v = Checker::new();
        let mut g = GroupChecker::new(1);
        // The state, never to be built.
        let unread =
            || -> Option<(LeaderEpoch, std::iter::Empty<(u32, Offset)>)> { panic!("read") };
        let state = |o: Offset| move || Some((1, [(0, o)].into_iter()));
        assert!(!g.coordinator_unchanged(1, Some((0, 1, 5)), unread));
        g.on_coordinator(&mut v, 1, 1, Some((0, 1, 5)), Some((1, vec![(0, 3)])));
        assert!(g.coordinator_unchanged(1, Some((0, 1, 5)), unread));
        // Another stamp: the offsets are compared.
        assert!(!g.coordinator_unchanged(1, Some((0, 1, 6)), state(4)));
        assert!(g.coordinator_unchanged(1, Some((0, 1, 6)), state(3)));
        assert!(g.coordinator_unchanged(1, Some((0, 1, 6)), unread));
        // A restarted broker (another incarnation) is compared too.
        assert!(!g.coordinator_unchanged(1, Some((1, 1, 6)), || {
            None::<(LeaderEpoch, std::iter::Empty<(u32, Offset)>)>
        }));
        // Something the checks record changed since: the stamp does not help.
        g.version += 1;
        assert!(!g.coordinator_unchanged(1, Some((0, 1, 6)), state(3)));
    }

    #[test]
    fn unowned_partitions_after_the_heal_are_caught() {
        let mut v = Checker::new();
        let mut g = GroupChecker::new(2);
        g.on_obs(&mut v, 10, member(1, 1, &[0, 1]));
        g.on_obs(&mut v, 20, member(1, 1, &[0]));
        g.finish(&mut v, 100, Some(50), 60);
        assert_eq!(v.count(GROUP_UNOWNED), 0, "50 after the heal is within 60");
        g.finish(&mut v, 100, Some(30), 60);
        assert_eq!(v.count(GROUP_UNOWNED), 1);
    }

    #[test]
    fn regressions_lost_commits_and_unprocessed_records_are_caught() {
        let mut v = Checker::new();
        let mut g = GroupChecker::new(1);
        for o in 0..10 {
            g.on_known(0, o);
        }
        g.on_obs(
            &mut v,
            1,
            GroupObs::Processed {
                p: 0,
                offsets: (0..5).collect(),
            },
        );
        g.on_obs(
            &mut v,
            2,
            GroupObs::CommitAcked {
                member: 1,
                offsets: vec![(0, 5)],
            },
        );
        assert_eq!(v.count(GROUP_UNPROCESSED), 0);
        g.on_coordinator(&mut v, 3, 1, None, Some((1, [(0, 5)].into())));
        assert_eq!(v.count(GROUP_ACKED_COMMIT_LOST), 0);
        g.on_coordinator(&mut v, 4, 1, None, Some((1, [(0, 3)].into())));
        assert_eq!(v.count(GROUP_OFFSET_REGRESSION), 1);
        // A failover to a coordinator that lost the acknowledged commit.
        g.on_coordinator(&mut v, 5, 2, None, Some((2, [(0, 4)].into())));
        assert_eq!(v.count(GROUP_ACKED_COMMIT_LOST), 1);
        // A deposed coordinator is not in charge any more.
        g.on_coordinator(&mut v, 6, 1, None, Some((1, [(0, 0)].into())));
        assert_eq!(v.count(GROUP_OFFSET_REGRESSION), 1);
        // An explicit reset makes a lower commit legitimate.
        g.on_obs(&mut v, 7, GroupObs::Reset { p: 0, to: 2 });
        g.on_coordinator(&mut v, 8, 2, None, Some((2, [(0, 2)].into())));
        assert_eq!(v.count(GROUP_OFFSET_REGRESSION), 1);
        // Committing past records nobody processed.
        g.on_obs(
            &mut v,
            9,
            GroupObs::CommitAcked {
                member: 2,
                offsets: vec![(0, 8)],
            },
        );
        assert_eq!(v.count(GROUP_UNPROCESSED), 1);
        // A fetch answered below an acknowledged commit.
        g.on_obs(
            &mut v,
            10,
            GroupObs::Fetched {
                sent_at: 9,
                offsets: vec![(0, Some(7))],
            },
        );
        assert_eq!(v.count(GROUP_ACKED_COMMIT_LOST), 2);
    }
}
