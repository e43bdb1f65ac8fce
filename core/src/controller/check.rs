//! The controller's own invariants, checked on every decision in debug builds.
//!
//! Every state change of the controller is one decision: a batch of records computed
//! against a scratch image, then committed (`ControllerState::commit`, reached from every
//! `handle` and `tick`). [`check_decision`] compares the image before and after one
//! decision with the records and events it produced, and returns a typed
//! [`ControllerCheckError`] so tests can assert on it; in debug builds `commit` runs it and
//! panics on a violation. The image's `apply` already refuses a malformed single record
//! (a leader outside its ISR, an ISR outside the replicas, epochs that do not advance);
//! this checks what spans records and events: a leader taken from outside the old ISR and
//! ELR is reported as an unclean election, a fenced broker leads nothing once the decision
//! is done, and, per partition across the decision, epochs never go back and the ISR and
//! ELR stay disjoint and within the assignment.
//!
//! Cost: O(records of the decision), plus O(partitions) for a decision that fences a
//! broker (rare: a session timeout or a restart).

use super::image::{MetadataImage, PartitionState};
use super::machine::{ControllerState, Journal};
use super::record::MetadataRecord;
use super::request::ControllerEvent;
use crate::types::{LeaderEpoch, NodeId, PartitionEpoch, TopicPartition};
use std::collections::BTreeMap;

/// A broken controller invariant, with the values that break it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControllerCheckError {
    #[error("{tp}: leader epoch went back from {from} to {to}")]
    LeaderEpochRegressed {
        tp: TopicPartition,
        from: LeaderEpoch,
        to: LeaderEpoch,
    },
    #[error("{tp}: partition epoch did not advance from {from} (now {to})")]
    PartitionEpochNotAdvanced {
        tp: TopicPartition,
        from: PartitionEpoch,
        to: PartitionEpoch,
    },
    #[error("{tp}: leader {leader} is not in the ISR {isr:?}")]
    LeaderNotInIsr {
        tp: TopicPartition,
        leader: NodeId,
        isr: Vec<NodeId>,
    },
    #[error("{tp}: empty ISR")]
    EmptyIsr { tp: TopicPartition },
    #[error("{tp}: {member} is in both the ISR and the ELR")]
    IsrElrOverlap { tp: TopicPartition, member: NodeId },
    #[error("{tp}: ISR/ELR member {member} is not among the replicas {replicas:?}")]
    NotAReplica {
        tp: TopicPartition,
        member: NodeId,
        replicas: Vec<NodeId>,
    },
    /// A leader from outside the previous ISR and ELR, with no `UncleanLeaderElection`
    /// event: acknowledged records may be lost silently.
    #[error("{tp}: leader {leader} (epoch {leader_epoch}) came from outside the ISR {isr:?} and ELR {elr:?} without an unclean election reported")]
    UnreportedUncleanElection {
        tp: TopicPartition,
        leader: NodeId,
        leader_epoch: LeaderEpoch,
        isr: Vec<NodeId>,
        elr: Vec<NodeId>,
    },
    #[error("{tp}: fenced broker {broker} still leads it")]
    FencedLeader { tp: TopicPartition, broker: NodeId },
}

/// The invariants of one decision: `records` (and `events`) took the image from `before`
/// to `after`. See the module doc.
pub fn check_decision(
    before: &MetadataImage,
    after: &MetadataImage,
    records: &[MetadataRecord],
    events: &[ControllerEvent],
) -> Result<(), ControllerCheckError> {
    // The state of each partition as of the previous record that changed it.
    let mut latest: BTreeMap<&TopicPartition, PartitionState> = BTreeMap::new();
    let mut fenced_any = false;
    for record in records {
        match record {
            r @ MetadataRecord::PartitionChanged { .. } => {
                let (tp, new) = PartitionState::changed_by(r).expect("a partition change");
                let old = latest
                    .get(tp)
                    .cloned()
                    .or_else(|| before.partition(tp).cloned());
                check_partition(tp, &new)?;
                if let Some(old) = &old {
                    check_change(tp, old, &new, events)?;
                }
                latest.insert(tp, new);
            }
            // Re-created under the same name: its partitions start over.
            MetadataRecord::TopicDeleted { name, .. } => latest.retain(|tp, _| tp.topic != *name),
            MetadataRecord::BrokerFenced { .. } => fenced_any = true,
            _ => {}
        }
    }
    if fenced_any {
        check_no_fenced_leader(after)?;
    }
    Ok(())
}

/// One partition state on its own: a non-empty ISR holding the leader, ISR and ELR
/// disjoint and within the replicas.
fn check_partition(tp: &TopicPartition, s: &PartitionState) -> Result<(), ControllerCheckError> {
    if s.isr.is_empty() {
        return Err(ControllerCheckError::EmptyIsr { tp: tp.clone() });
    }
    if let Some(leader) = s.leader.filter(|l| !s.isr.contains(l)) {
        return Err(ControllerCheckError::LeaderNotInIsr {
            tp: tp.clone(),
            leader,
            isr: s.isr.clone(),
        });
    }
    if let Some(&member) = s.isr.iter().chain(&s.elr).find(|m| !s.replicas.contains(m)) {
        return Err(ControllerCheckError::NotAReplica {
            tp: tp.clone(),
            member,
            replicas: s.replicas.clone(),
        });
    }
    if let Some(&member) = s.elr.iter().find(|m| s.isr.contains(m)) {
        return Err(ControllerCheckError::IsrElrOverlap {
            tp: tp.clone(),
            member,
        });
    }
    Ok(())
}

/// One change of a partition: epochs move forward, and a new leader comes from the old
/// ISR or ELR unless the decision reports an unclean election of it.
fn check_change(
    tp: &TopicPartition,
    old: &PartitionState,
    new: &PartitionState,
    events: &[ControllerEvent],
) -> Result<(), ControllerCheckError> {
    if new.leader_epoch < old.leader_epoch {
        return Err(ControllerCheckError::LeaderEpochRegressed {
            tp: tp.clone(),
            from: old.leader_epoch,
            to: new.leader_epoch,
        });
    }
    if new.partition_epoch <= old.partition_epoch {
        return Err(ControllerCheckError::PartitionEpochNotAdvanced {
            tp: tp.clone(),
            from: old.partition_epoch,
            to: new.partition_epoch,
        });
    }
    let Some(leader) = new
        .leader
        .filter(|l| new.leader != old.leader && !eligible(old, *l))
    else {
        return Ok(());
    };
    let reported = events.iter().any(|e| {
        matches!(e, ControllerEvent::UncleanLeaderElection { tp: t, leader: l, .. }
            if t == tp && *l == leader)
    });
    if reported {
        return Ok(());
    }
    Err(ControllerCheckError::UnreportedUncleanElection {
        tp: tp.clone(),
        leader,
        leader_epoch: new.leader_epoch,
        isr: old.isr.clone(),
        elr: old.elr.clone(),
    })
}

/// Whether `b` may be elected cleanly from `s`: an ISR or ELR member (KIP-966).
fn eligible(s: &PartitionState, b: NodeId) -> bool {
    s.isr.contains(&b) || s.elr.contains(&b)
}

fn check_no_fenced_leader(image: &MetadataImage) -> Result<(), ControllerCheckError> {
    for (tp, s) in image.partitions() {
        if let Some(broker) = s.leader.filter(|l| !image.is_unfenced(*l)) {
            return Err(ControllerCheckError::FencedLeader { tp, broker });
        }
    }
    Ok(())
}

impl<J: Journal> ControllerState<J> {
    /// Debug builds: [`check_decision`] on a decision about to be applied, panicking on a
    /// violation. Not with a bug-zoo switch on: `elect-out-of-isr` elects outside the ISR
    /// unreported on purpose (the simulator's `acked-write-lost` is to catch it), and no
    /// bug is worth a panic instead of the simulator's verdict.
    #[cfg(debug_assertions)]
    pub(crate) fn debug_check_decision(
        &self,
        after: &MetadataImage,
        records: &[MetadataRecord],
        events: &[ControllerEvent],
    ) {
        if self.config().bugs.any() {
            return;
        }
        if let Err(e) = check_decision(self.image(), after, records, events) {
            debug_assert!(false, "controller invariant broken: {e}");
        }
    }
}

#[cfg(test)]
mod tests;
