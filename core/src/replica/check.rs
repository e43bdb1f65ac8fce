//! The replica's own invariants, checked after every call in debug builds.
//!
//! [`Replica::check`] states what must hold of one replica at any moment (between calls);
//! [`Replica::check_since`] what must hold of two successive moments (monotonic values),
//! against a [`Checkpoint`] taken at the earlier one. Both return a typed [`CheckError`]
//! so tests can assert on them. In debug builds [`Replica::poll_outputs`] (which every
//! driver calls after each call into the replica: the broker after each message and tick,
//! the test harnesses after each step) runs both through `debug_check` and panics on a
//! violation, so node runs, the madsim suite and property tests check them too, not only
//! the simulator. Cross-node properties (a committed record is on every ISR member, logs
//! agree below the HW, ...) stay in `sim/src/invariants.rs`: one replica cannot see them.
//!
//! Cost: O(maximal ISR) plus O(waiting acks=all produces), which is the size of what
//! `leader_maybe_advance_hw` already walks on every call; no log reads.

use super::{Replica, ReplicaLog, RoleState};
use crate::types::{LeaderEpoch, NodeId, Offset, TopicPartition};
use std::collections::BTreeSet;

/// A broken replica invariant, with the values that break it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error("{tp}: high watermark {hw} is past the log end {leo}")]
    HighWatermarkPastLogEnd {
        tp: TopicPartition,
        hw: Offset,
        leo: Offset,
    },
    #[error("{tp}: flushed offset {flushed} is past the log end {leo}")]
    FlushedPastLogEnd {
        tp: TopicPartition,
        flushed: Offset,
        leo: Offset,
    },
    /// The leader advanced the HW (past its epoch start) over data not yet fsynced.
    #[error("{tp}: leader high watermark {hw} is past its flushed offset {flushed}")]
    HighWatermarkPastFlushed {
        tp: TopicPartition,
        hw: Offset,
        flushed: Offset,
    },
    /// The leader advanced the HW past what a maximal-ISR follower acknowledged.
    /// Checked by [`Replica::check_since`] when the HW moved.
    #[error("{tp}: leader high watermark {hw} is past ISR member {follower}'s log end {log_end}")]
    HighWatermarkPastFollower {
        tp: TopicPartition,
        hw: Offset,
        follower: NodeId,
        log_end: Offset,
    },
    #[error("{tp}: high watermark went back from {from} to {to} within leader epoch {epoch}")]
    HighWatermarkRegressed {
        tp: TopicPartition,
        epoch: LeaderEpoch,
        from: Offset,
        to: Offset,
    },
    /// A leader's last stable offset went back: a read_committed reader may have read
    /// past a transaction that is open again (docs/transactions.md).
    #[error("{tp}: last stable offset went back from {from} to {to} within leader epoch {epoch}")]
    LastStableOffsetRegressed {
        tp: TopicPartition,
        epoch: LeaderEpoch,
        from: Offset,
        to: Offset,
    },
    #[error("{tp}: leader {leader} is not in its confirmed ISR {isr:?}")]
    LeaderNotInIsr {
        tp: TopicPartition,
        leader: NodeId,
        isr: Vec<NodeId>,
    },
    #[error("{tp}: maximal ISR member {member} is not a replica of {replicas:?}")]
    IsrNotAReplica {
        tp: TopicPartition,
        member: NodeId,
        replicas: Vec<NodeId>,
    },
    #[error("{tp}: pending ISR proposal {pending:?} is not within the maximal ISR {maximal:?}")]
    PendingOutsideMaximalIsr {
        tp: TopicPartition,
        pending: Vec<NodeId>,
        maximal: Vec<NodeId>,
    },
    #[error("{tp}: the log's latest epoch {log_epoch} is ahead of the leader's epoch {epoch}")]
    LogEpochAheadOfLeader {
        tp: TopicPartition,
        log_epoch: LeaderEpoch,
        epoch: LeaderEpoch,
    },
    /// The epoch of the last batch went down while the log did not get shorter: a batch
    /// of an older epoch was appended after a newer one.
    #[error("{tp}: log's latest epoch went back from {from} to {to} without a truncation (log end {leo_before} -> {leo})")]
    LogEpochRegressed {
        tp: TopicPartition,
        from: LeaderEpoch,
        to: LeaderEpoch,
        leo_before: Offset,
        leo: Offset,
    },
    #[error("{tp}: waiting produces out of offset order: base {before} then {after}")]
    WaitingOutOfOrder {
        tp: TopicPartition,
        before: Offset,
        after: Offset,
    },
    #[error("{tp}: a produce waits for HW {required} although the HW is {hw}")]
    WaitingAlreadyCommitted {
        tp: TopicPartition,
        required: Offset,
        hw: Offset,
    },
    #[error("{tp}: a produce waits for HW {required}, past the log end {leo}")]
    WaitingPastLogEnd {
        tp: TopicPartition,
        required: Offset,
        leo: Offset,
    },
}

/// What [`Replica::check_since`] compares against: the values that must only move one way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    leader_epoch: LeaderEpoch,
    /// Some(true): leading, Some(false): following, None: offline.
    leading: Option<bool>,
    high_watermark: Offset,
    log_end: Offset,
    latest_log_epoch: Option<LeaderEpoch>,
    /// A leader's LSO (0 otherwise: only a leader's producer table is kept up to date).
    last_stable_offset: Offset,
}

impl<L: ReplicaLog> Replica<L> {
    /// The invariants of this moment (see the module doc).
    pub fn check(&self) -> Result<(), CheckError> {
        let tp = || self.tp.clone();
        let (hw, leo) = (self.high_watermark, self.log.log_end_offset());
        let flushed = self.log.flushed_offset();
        if hw > leo {
            return Err(CheckError::HighWatermarkPastLogEnd { tp: tp(), hw, leo });
        }
        if flushed > leo {
            return Err(CheckError::FlushedPastLogEnd {
                tp: tp(),
                flushed,
                leo,
            });
        }
        match &self.role {
            RoleState::Leader(_) => self.check_leader(),
            // A follower's HW may lag the leader's (it learns it with fetches) and may be
            // ahead of its flushed offset (it is the leader's, capped at the log end only).
            RoleState::Follower(_) | RoleState::Offline => Ok(()),
        }
    }

    fn check_leader(&self) -> Result<(), CheckError> {
        let RoleState::Leader(l) = &self.role else {
            return Ok(());
        };
        let tp = || self.tp.clone();
        let (hw, leo) = (self.high_watermark, self.log.log_end_offset());
        let flushed = self.log.flushed_offset();
        // An HW inherited from following may be ahead of the flushed offset (a follower
        // takes the leader's HW for data it has not fsynced yet), but every HW this
        // leader set itself is past its epoch start and counted durable data only.
        if hw > l.epoch_start_offset && hw > flushed {
            return Err(CheckError::HighWatermarkPastFlushed {
                tp: tp(),
                hw,
                flushed,
            });
        }
        if !l.isr.contains(self.me) {
            return Err(CheckError::LeaderNotInIsr {
                tp: tp(),
                leader: self.me,
                isr: l.isr.confirmed().iter().copied().collect(),
            });
        }
        let maximal: BTreeSet<NodeId> = l.isr.maximal().iter().copied().collect();
        if let Some(&member) = maximal.iter().find(|m| !self.replicas.contains(m)) {
            return Err(CheckError::IsrNotAReplica {
                tp: tp(),
                member,
                replicas: self.replicas.clone(),
            });
        }
        if let Some(p) = l.pending.as_ref().filter(|p| !p.isr.is_subset(&maximal)) {
            return Err(CheckError::PendingOutsideMaximalIsr {
                tp: tp(),
                pending: p.isr.iter().copied().collect(),
                maximal: maximal.into_iter().collect(),
            });
        }
        if let Some(log_epoch) = self.log.latest_epoch().filter(|e| *e > self.leader_epoch) {
            return Err(CheckError::LogEpochAheadOfLeader {
                tp: tp(),
                log_epoch,
                epoch: self.leader_epoch,
            });
        }
        self.check_waiting(leo)
    }

    /// acks=all writes wait for an HW not reached yet, within the log, and new appends
    /// (not duplicates, which point back at their first copy) in offset order.
    fn check_waiting(&self, leo: Offset) -> Result<(), CheckError> {
        let RoleState::Leader(l) = &self.role else {
            return Ok(());
        };
        let tp = || self.tp.clone();
        let hw = self.high_watermark;
        let mut last_new: Option<Offset> = None;
        for w in &l.waiting {
            if w.required <= hw {
                return Err(CheckError::WaitingAlreadyCommitted {
                    tp: tp(),
                    required: w.required,
                    hw,
                });
            }
            if w.required > leo {
                return Err(CheckError::WaitingPastLogEnd {
                    tp: tp(),
                    required: w.required,
                    leo,
                });
            }
            if w.duplicate {
                continue;
            }
            if let Some(before) = last_new.filter(|b| *b >= w.base_offset) {
                return Err(CheckError::WaitingOutOfOrder {
                    tp: tp(),
                    before,
                    after: w.base_offset,
                });
            }
            last_new = Some(w.base_offset);
        }
        Ok(())
    }

    /// Every maximal-ISR follower acknowledged (durably) at least the HW, if this leader
    /// moved it (past its epoch start). Only true right after the HW moved: a follower
    /// the controller has since taken out of the ISR (the leader does not know yet) may
    /// fetch from a lower offset, e.g. after its broker dropped and refetched a damaged log.
    fn check_hw_acknowledged(&self) -> Result<(), CheckError> {
        let RoleState::Leader(l) = &self.role else {
            return Ok(());
        };
        let hw = self.high_watermark;
        if hw <= l.epoch_start_offset {
            return Ok(());
        }
        for &follower in l.isr.maximal().iter().filter(|m| **m != self.me) {
            let log_end = l.isr.follower(follower).and_then(|p| p.log_end);
            if let Some(log_end) = log_end.filter(|e| *e < hw) {
                return Err(CheckError::HighWatermarkPastFollower {
                    tp: self.tp.clone(),
                    hw,
                    follower,
                    log_end,
                });
            }
        }
        Ok(())
    }

    /// The values [`Replica::check_since`] compares a later moment with.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            leader_epoch: self.leader_epoch,
            leading: match self.role {
                RoleState::Leader(_) => Some(true),
                RoleState::Follower(_) => Some(false),
                RoleState::Offline => None,
            },
            high_watermark: self.high_watermark,
            log_end: self.log.log_end_offset(),
            latest_log_epoch: self.log.latest_epoch(),
            last_stable_offset: match self.role {
                RoleState::Leader(_) => self.last_stable_offset(),
                _ => 0,
            },
        }
    }

    /// The invariants between `before` and now: in one role and leader epoch the HW (and a
    /// leader's last stable offset) never goes back, a leader that moved its HW had it acknowledged by its maximal ISR, and
    /// epochs never decrease along the log.
    pub fn check_since(&self, before: &Checkpoint) -> Result<(), CheckError> {
        let now = self.checkpoint();
        let tp = || self.tp.clone();
        let same_leadership = now.leading == Some(true)
            && before.leading == Some(true)
            && now.leader_epoch == before.leader_epoch;
        if !same_leadership || now.high_watermark > before.high_watermark {
            self.check_hw_acknowledged()?;
        }
        // A follower may truncate below its HW only after an unclean election (reported as
        // TruncatedBelowHighWatermark; a truncation cut lower by a damaged batch takes it
        // offline); offline, a repair cuts the log and the HW with it.
        let may_lower = match now.leading {
            Some(true) => false,
            Some(false) => self.config.unclean_leader_election,
            None => true,
        };
        if !may_lower
            && now.leading == before.leading
            && now.leader_epoch == before.leader_epoch
            && now.high_watermark < before.high_watermark
        {
            return Err(CheckError::HighWatermarkRegressed {
                tp: tp(),
                epoch: now.leader_epoch,
                from: before.high_watermark,
                to: now.high_watermark,
            });
        }
        if same_leadership && now.last_stable_offset < before.last_stable_offset {
            return Err(CheckError::LastStableOffsetRegressed {
                tp: tp(),
                epoch: now.leader_epoch,
                from: before.last_stable_offset,
                to: now.last_stable_offset,
            });
        }
        if let (Some(from), Some(to)) = (before.latest_log_epoch, now.latest_log_epoch) {
            if to < from && now.log_end >= before.log_end {
                return Err(CheckError::LogEpochRegressed {
                    tp: tp(),
                    from,
                    to,
                    leo_before: before.log_end,
                    leo: now.log_end,
                });
            }
        }
        Ok(())
    }

    /// Debug builds: both checks against the previous call's checkpoint, panicking on a
    /// violation. Not with a bug-zoo switch on: those deliberately break these rules
    /// (ack-before-isr and fsync-after-ack the HW bounds, unfenced-fetch the epoch order,
    /// truncate-to-hw the HW's monotonicity, ...) and the simulator's own invariants are
    /// the ones expected to catch them, not a panic.
    #[cfg(debug_assertions)]
    pub(crate) fn debug_check(&mut self) {
        let now = self.checkpoint();
        let before = self.debug_checkpoint.replace(now);
        if self.config.bugs.any() {
            return;
        }
        let result = self
            .check()
            .and_then(|()| before.map_or(Ok(()), |b| self.check_since(&b)));
        if let Err(e) = result {
            debug_assert!(false, "replica invariant broken on node {}: {e}", self.me);
        }
    }
}

#[cfg(test)]
mod tests;
