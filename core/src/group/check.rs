//! The group coordinator's own invariants, checked after every call in debug builds.
//!
//! [`GroupCoordinator::check_group`] states what must hold of one group at any moment;
//! [`GroupCoordinator::check_group_since`] what must hold between two moments of one
//! coordinator load, against a [`GroupCheckpoint`]: the generation never goes back, and a
//! partition's committed offset is only ever replaced by one written later in the log
//! (appends complete in log order, so the offset served is always the latest written).
//! Both return a typed [`GroupCheckError`]. In debug builds the coordinator runs both on
//! the group each `handle`, `append_completed` and `tick` touched and panics on a
//! violation. What needs the members' side (one owner per partition across members'
//! views, acknowledged commits never lost across failovers, every record processed) stays
//! in `sim/src/group_invariants.rs`.
//!
//! Cost: O(members' assignments + committed partitions) of the one group touched.

use super::coordinator::GroupCoordinator;
use super::protocol::{GenerationId, GroupId, MemberId};
use super::state::{Group, GroupState};
use crate::types::{Offset, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};

/// A broken group invariant, with the values that break it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupCheckError {
    #[error("group {group}: {tp} is assigned to two members")]
    OwnedTwice { group: GroupId, tp: TopicPartition },
    #[error("group {group}: member {member} has a parked join in state {state:?}")]
    JoinWaiterOutsideRebalance {
        group: GroupId,
        member: MemberId,
        state: GroupState,
    },
    #[error("group {group}: leader {leader:?} is not a member in state {state:?}")]
    LeaderNotAMember {
        group: GroupId,
        leader: Option<MemberId>,
        state: GroupState,
    },
    #[error("group {group}: Empty with {members} members")]
    EmptyWithMembers { group: GroupId, members: usize },
    #[error("group {group}: {tp} counted with no commit in flight")]
    EmptyPendingCommit { group: GroupId, tp: TopicPartition },
    #[error("group {group}: generation went back from {from} to {to}")]
    GenerationRegressed {
        group: GroupId,
        from: GenerationId,
        to: GenerationId,
    },
    /// The committed offset of `tp` was replaced by one written earlier in the log.
    #[error("group {group}: {tp}'s commit went back in the log from offset {from} to {to}")]
    CommitRegressed {
        group: GroupId,
        tp: TopicPartition,
        from: Offset,
        to: Offset,
    },
    #[error("group {group}: {tp}'s committed offset disappeared (was written at {from})")]
    CommitLost {
        group: GroupId,
        tp: TopicPartition,
        from: Offset,
    },
}

/// What [`GroupCoordinator::check_group_since`] compares a later moment with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupCheckpoint {
    generation: GenerationId,
    /// Log offset of the record holding each partition's committed offset.
    commits: BTreeMap<TopicPartition, Offset>,
}

impl Group {
    /// The invariants of this group at this moment.
    pub(crate) fn check(&self) -> Result<(), GroupCheckError> {
        let group = || self.id.clone();
        let mut seen = BTreeSet::new();
        for m in self.members.values() {
            if let Some(tp) = m.assignment.iter().find(|tp| !seen.insert(*tp)) {
                return Err(GroupCheckError::OwnedTwice {
                    group: group(),
                    tp: tp.clone(),
                });
            }
            if self.state != GroupState::PreparingRebalance && m.join_waiter.is_some() {
                return Err(GroupCheckError::JoinWaiterOutsideRebalance {
                    group: group(),
                    member: m.id.clone(),
                    state: self.state,
                });
            }
        }
        let settled = matches!(
            self.state,
            GroupState::CompletingRebalance | GroupState::Stable
        );
        if settled
            && !self
                .leader
                .as_ref()
                .is_some_and(|l| self.members.contains_key(l))
        {
            return Err(GroupCheckError::LeaderNotAMember {
                group: group(),
                leader: self.leader.clone(),
                state: self.state,
            });
        }
        if self.state == GroupState::Empty && !self.members.is_empty() {
            return Err(GroupCheckError::EmptyWithMembers {
                group: group(),
                members: self.members.len(),
            });
        }
        if let Some((tp, _)) = self.pending_commits.iter().find(|(_, n)| **n == 0) {
            return Err(GroupCheckError::EmptyPendingCommit {
                group: group(),
                tp: tp.clone(),
            });
        }
        Ok(())
    }

    fn checkpoint(&self) -> GroupCheckpoint {
        GroupCheckpoint {
            generation: self.generation,
            commits: self
                .offsets
                .iter()
                .map(|(tp, c)| (tp.clone(), c.log_offset))
                .collect(),
        }
    }

    fn check_since(&self, before: &GroupCheckpoint) -> Result<(), GroupCheckError> {
        let group = || self.id.clone();
        if self.generation < before.generation {
            return Err(GroupCheckError::GenerationRegressed {
                group: group(),
                from: before.generation,
                to: self.generation,
            });
        }
        for (tp, &from) in &before.commits {
            match self.offsets.get(tp) {
                None => {
                    return Err(GroupCheckError::CommitLost {
                        group: group(),
                        tp: tp.clone(),
                        from,
                    })
                }
                Some(c) if c.log_offset < from => {
                    return Err(GroupCheckError::CommitRegressed {
                        group: group(),
                        tp: tp.clone(),
                        from,
                        to: c.log_offset,
                    })
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

impl GroupCoordinator {
    /// The invariants of group `group` now (Ok if this coordinator does not hold it).
    pub fn check_group(&self, group: &str) -> Result<(), GroupCheckError> {
        self.group_state(group).map_or(Ok(()), Group::check)
    }

    /// The values [`Self::check_group_since`] compares with (None: no such group).
    pub fn group_checkpoint(&self, group: &str) -> Option<GroupCheckpoint> {
        self.group_state(group).map(Group::checkpoint)
    }

    /// The invariants between `before` (taken in this same load) and now.
    pub fn check_group_since(
        &self,
        group: &str,
        before: &GroupCheckpoint,
    ) -> Result<(), GroupCheckError> {
        match self.group_state(group) {
            Some(g) => g.check_since(before),
            // Only a never-used group is dropped (it had no generation and no commits).
            None => Group::new(group.to_string()).check_since(before),
        }
    }

    /// Debug builds: both checks on `group` against its checkpoint of the previous call,
    /// panicking on a violation. Not with the bug zoo's `no-generation-fencing` on: it
    /// lets zombies commit on purpose, and the simulator's group invariants are the ones
    /// expected to catch it.
    #[cfg(debug_assertions)]
    pub(crate) fn debug_check_group(&mut self, group: &str) {
        let now = self.group_checkpoint(group);
        let before = match now {
            Some(now) => self.debug_checkpoints.insert(group.to_string(), now),
            None => self.debug_checkpoints.remove(group),
        };
        if self.config().no_generation_fencing {
            return;
        }
        let result = self
            .check_group(group)
            .and_then(|()| before.map_or(Ok(()), |b| self.check_group_since(group, &b)));
        if let Err(e) = result {
            debug_assert!(false, "group coordinator invariant broken: {e}");
        }
    }
}

#[cfg(test)]
mod tests;
