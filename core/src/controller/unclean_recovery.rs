//! KIP-966's unclean recovery manager: for a partition none of whose ISR and ELR members
//! can lead, ask every replica what its log holds (last epoch, usable log end, high
//! watermark) and elect the one with the highest last epoch, then the longest log.
//!
//! The state is soft, like the offline reports: a round lives in the active controller
//! only, and a new active controller starts again by asking. The query rides on heartbeat
//! replies and the answers on heartbeats (the controller never pushes to brokers), so a
//! lost query or answer is simply sent again with the next one.

use super::image::{MetadataImage, PartitionState};
use super::request::ReplicaLogInfo;
use super::topic_config::UncleanRecoveryStrategy;
use crate::types::{LeaderEpoch, Nanos, NodeId, Offset, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};

/// One partition's recovery in progress: the leader epoch it is leaderless at, when the
/// query started, and the answers so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Round {
    pub leader_epoch: LeaderEpoch,
    pub started: Nanos,
    pub answers: BTreeMap<NodeId, ReplicaLogInfo>,
}

/// What to do with a round now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// Not enough answers yet, or (Balanced) no answer that keeps every committed record.
    Wait,
    /// Elect `leader`; `committed` is the highest HW any answer reported.
    Elect {
        leader: NodeId,
        log_end: Offset,
        committed: Offset,
    },
}

/// Whether `state` needs an unclean recovery under `strategy`: it has no leader and no
/// ISR or ELR member that can lead (`can_lead`: unfenced and not offline). Balanced also
/// needs every ISR and ELR member's copy damaged (`corrupt`): one that is only fenced or
/// briefly unreadable comes back whole, so it is waited for.
pub(crate) fn needs_recovery(
    strategy: UncleanRecoveryStrategy,
    state: &PartitionState,
    can_lead: impl Fn(NodeId) -> bool,
    corrupt: Option<&BTreeSet<NodeId>>,
) -> bool {
    if state.leader.is_some() {
        return false;
    }
    let mut members = state.isr.iter().chain(&state.elr);
    if members.clone().any(|&b| can_lead(b)) {
        return false;
    }
    match strategy {
        UncleanRecoveryStrategy::None => false,
        UncleanRecoveryStrategy::Aggressive => true,
        UncleanRecoveryStrategy::Balanced => {
            members.all(|b| corrupt.is_some_and(|c| c.contains(b)))
        }
    }
}

/// KIP-966's choice: the highest last epoch, then the longest usable log; ties go to the
/// replica first in assignment order. Only answers from brokers that may lead
/// (`eligible`) count.
/// `backwards`: the bug zoo's `unclean-shorter-log`, the worst answer instead.
fn best<'a>(
    state: &PartitionState,
    round: &'a Round,
    eligible: &impl Fn(NodeId) -> bool,
    backwards: bool,
) -> Option<(NodeId, &'a ReplicaLogInfo)> {
    let position = |b: &NodeId| state.replicas.iter().position(|r| r == b);
    let rank = |(a, x): &(&NodeId, &ReplicaLogInfo), (b, y): &(&NodeId, &ReplicaLogInfo)| {
        (x.last_epoch, x.log_end)
            .cmp(&(y.last_epoch, y.log_end))
            // Earlier in assignment order wins a tie: it compares greater.
            .then_with(|| position(b).cmp(&position(a)))
    };
    let answers = round
        .answers
        .iter()
        .filter(|(b, _)| eligible(**b) && state.replicas.contains(b));
    let chosen = if backwards {
        answers.min_by(rank)
    } else {
        answers.max_by(rank)
    };
    chosen.map(|(&b, info)| (b, info))
}

/// Decides a round. Aggressive elects with the first eligible answer. Balanced waits
/// until every ISR, ELR and last known ELR member has answered or `timeout` has passed
/// since the round started, and elects only a replica whose usable log reaches every high
/// watermark an answer reported (else it keeps waiting: a repair, a replica coming back,
/// or an operator).
pub(crate) fn choose(
    strategy: UncleanRecoveryStrategy,
    state: &PartitionState,
    round: &Round,
    now: Nanos,
    timeout: Nanos,
    eligible: impl Fn(NodeId) -> bool,
    bug_backwards: bool,
) -> Choice {
    let Some((right, info)) = best(state, round, &eligible, false) else {
        return Choice::Wait;
    };
    let (leader, elected) = if bug_backwards {
        best(state, round, &eligible, true).unwrap_or((right, info))
    } else {
        (right, info)
    };
    let committed = round
        .answers
        .values()
        .map(|a| a.high_watermark)
        .max()
        .unwrap_or(0);
    let elect = Choice::Elect {
        leader,
        log_end: elected.log_end,
        committed,
    };
    match strategy {
        UncleanRecoveryStrategy::None => Choice::Wait,
        UncleanRecoveryStrategy::Aggressive => elect,
        UncleanRecoveryStrategy::Balanced => {
            let expected = state
                .isr
                .iter()
                .chain(&state.elr)
                .chain(&state.last_known_elr);
            let all_in = expected.clone().all(|b| round.answers.contains_key(b));
            let waiting = !all_in && now < round.started.saturating_add(timeout);
            // Below a reported HW the choice would forfeit committed records: keep waiting.
            if waiting || info.log_end < committed {
                Choice::Wait
            } else {
                elect
            }
        }
    }
}

/// The rounds in progress, by partition.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rounds {
    rounds: BTreeMap<TopicPartition, Round>,
}

impl Rounds {
    pub fn clear(&mut self) {
        self.rounds.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.rounds.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&TopicPartition, &Round)> {
        self.rounds.iter()
    }

    /// Keeps exactly one round per partition of `needed` (at its leader epoch), starting
    /// new ones at `now`, and drops the others.
    pub fn sync(&mut self, needed: Vec<(TopicPartition, LeaderEpoch)>, now: Nanos) {
        let mut next = BTreeMap::new();
        for (tp, epoch) in needed {
            let round = match self.rounds.remove(&tp) {
                Some(r) if r.leader_epoch == epoch => r,
                _ => Round {
                    leader_epoch: epoch,
                    started: now,
                    answers: BTreeMap::new(),
                },
            };
            next.insert(tp, round);
        }
        self.rounds = next;
    }

    /// Records `broker`'s answers that match a round's partition and epoch.
    pub fn answer(&mut self, broker: NodeId, infos: Vec<ReplicaLogInfo>) {
        for info in infos {
            if let Some(round) = self.rounds.get_mut(&info.tp) {
                if round.leader_epoch == info.leader_epoch {
                    round.answers.insert(broker, info);
                }
            }
        }
    }

    /// What `broker` is asked: every round of a partition it hosts.
    pub fn queries_for(
        &self,
        image: &MetadataImage,
        broker: NodeId,
    ) -> Vec<(TopicPartition, LeaderEpoch)> {
        self.rounds
            .iter()
            .filter(|(tp, _)| {
                image
                    .partition(tp)
                    .is_some_and(|s| s.replicas.contains(&broker))
            })
            .map(|(tp, r)| (tp.clone(), r.leader_epoch))
            .collect()
    }

    /// When a waiting Balanced round times out next.
    pub fn next_deadline(&self, timeout: Nanos) -> Option<Nanos> {
        self.rounds
            .values()
            .map(|r| r.started.saturating_add(timeout))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(isr: &[NodeId], elr: &[NodeId], lkelr: &[NodeId]) -> PartitionState {
        PartitionState {
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            elr: elr.to_vec(),
            last_known_elr: lkelr.to_vec(),
            leader: None,
            leader_epoch: 4,
            partition_epoch: 9,
            recovered_at_epoch: None,
        }
    }

    fn info(last_epoch: u32, log_end: Offset, hw: Offset) -> ReplicaLogInfo {
        ReplicaLogInfo {
            tp: TopicPartition::new("t", 0),
            leader_epoch: 4,
            last_epoch: Some(last_epoch),
            log_end,
            high_watermark: hw,
            damaged_at: None,
        }
    }

    fn round(answers: &[(NodeId, ReplicaLogInfo)]) -> Round {
        Round {
            leader_epoch: 4,
            started: 1_000,
            answers: answers.iter().cloned().collect(),
        }
    }

    const ALL: fn(NodeId) -> bool = |_| true;

    #[test]
    fn the_highest_epoch_wins_then_the_longest_log_then_assignment_order() {
        let s = state(&[1], &[], &[]);
        let r = round(&[
            (1, info(2, 50, 10)),
            (2, info(3, 20, 10)),
            (3, info(3, 30, 10)),
        ]);
        let c = choose(
            UncleanRecoveryStrategy::Aggressive,
            &s,
            &r,
            1_000,
            10,
            ALL,
            false,
        );
        assert_eq!(
            c,
            Choice::Elect {
                leader: 3,
                log_end: 30,
                committed: 10
            }
        );
        let tie = round(&[(3, info(3, 30, 10)), (2, info(3, 30, 10))]);
        let c = choose(
            UncleanRecoveryStrategy::Aggressive,
            &s,
            &tie,
            1_000,
            10,
            ALL,
            false,
        );
        assert!(matches!(c, Choice::Elect { leader: 2, .. }), "{c:?}");
    }

    #[test]
    fn balanced_waits_for_the_isr_elr_and_last_known_elr_until_the_timeout() {
        let s = state(&[1], &[], &[3]);
        let r = round(&[(1, info(2, 50, 40)), (2, info(2, 45, 40))]);
        let balanced = UncleanRecoveryStrategy::Balanced;
        assert_eq!(
            choose(balanced, &s, &r, 1_500, 1_000, ALL, false),
            Choice::Wait
        );
        let c = choose(balanced, &s, &r, 2_000, 1_000, ALL, false);
        assert!(matches!(c, Choice::Elect { leader: 1, .. }), "{c:?}");
        let mut all = r.clone();
        all.answers.insert(3, info(1, 10, 5));
        let c = choose(balanced, &s, &all, 1_500, 1_000, ALL, false);
        assert!(matches!(c, Choice::Elect { leader: 1, .. }), "{c:?}");
    }

    #[test]
    fn balanced_never_elects_below_a_reported_high_watermark_aggressive_does() {
        let s = state(&[1], &[], &[]);
        let mut damaged = info(2, 30, 60);
        damaged.damaged_at = Some(30);
        let r = round(&[(1, damaged), (2, info(2, 25, 20))]);
        assert_eq!(
            choose(
                UncleanRecoveryStrategy::Balanced,
                &s,
                &r,
                9_000,
                10,
                ALL,
                false
            ),
            Choice::Wait
        );
        let c = choose(
            UncleanRecoveryStrategy::Aggressive,
            &s,
            &r,
            1_000,
            10,
            ALL,
            false,
        );
        assert_eq!(
            c,
            Choice::Elect {
                leader: 1,
                log_end: 30,
                committed: 60
            }
        );
        assert_eq!(
            choose(UncleanRecoveryStrategy::None, &s, &r, 9_000, 10, ALL, false),
            Choice::Wait
        );
    }

    /// The bug zoo's `unclean-shorter-log`: the worst answer leads, past Balanced's check
    /// (made against the right one).
    #[test]
    fn the_shorter_log_bug_elects_the_worst_answer() {
        let s = state(&[1], &[], &[]);
        let r = round(&[(1, info(2, 50, 40)), (2, info(2, 20, 10))]);
        let c = choose(UncleanRecoveryStrategy::Balanced, &s, &r, 0, 10, ALL, true);
        assert_eq!(
            c,
            Choice::Elect {
                leader: 2,
                log_end: 20,
                committed: 40
            }
        );
    }

    #[test]
    fn only_eligible_answers_count() {
        let s = state(&[1], &[], &[]);
        let r = round(&[(1, info(2, 50, 10)), (2, info(2, 20, 10))]);
        let c = choose(
            UncleanRecoveryStrategy::Aggressive,
            &s,
            &r,
            0,
            10,
            |b| b != 1,
            false,
        );
        assert!(matches!(c, Choice::Elect { leader: 2, .. }), "{c:?}");
        let none = choose(
            UncleanRecoveryStrategy::Aggressive,
            &s,
            &r,
            0,
            10,
            |_| false,
            false,
        );
        assert_eq!(none, Choice::Wait);
    }

    #[test]
    fn balanced_recovers_only_when_every_isr_and_elr_copy_is_damaged() {
        let s = state(&[1], &[2], &[]);
        let none_lead = |_| false;
        let both: BTreeSet<NodeId> = [1, 2].into();
        let one: BTreeSet<NodeId> = [1].into();
        let balanced = UncleanRecoveryStrategy::Balanced;
        assert!(needs_recovery(balanced, &s, none_lead, Some(&both)));
        assert!(!needs_recovery(balanced, &s, none_lead, Some(&one)));
        assert!(!needs_recovery(balanced, &s, none_lead, None));
        assert!(needs_recovery(
            UncleanRecoveryStrategy::Aggressive,
            &s,
            none_lead,
            None
        ));
        assert!(!needs_recovery(
            UncleanRecoveryStrategy::None,
            &s,
            none_lead,
            Some(&both)
        ));
        assert!(!needs_recovery(
            UncleanRecoveryStrategy::Aggressive,
            &s,
            |b| b == 2,
            None
        ));
        let mut led = s.clone();
        led.isr = vec![3];
        led.leader = Some(3);
        assert!(!needs_recovery(balanced, &led, none_lead, Some(&both)));
    }
}
