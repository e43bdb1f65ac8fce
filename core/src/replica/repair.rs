//! Peer repair, the replica's side: a replica offline because of a damaged batch asks the
//! other replicas, one per recheck, for their copy of it, and refills its log with the
//! first intact copy that fits (`PartitionLog::replace_damaged` checks offset, epoch and
//! fit). Every replica answers such requests from its own log, whatever its role, even
//! while offline itself: two copies damaged at different offsets repair each other.
//!
//! Why not wait for the broker's cut ([`Replica::repair_log`])? The cut is only allowed
//! once the controller no longer counts on this copy (out of the ISR and the ELR, another
//! replica leading). A damaged ISR or ELR member may hold committed records no other live
//! copy has; peer repair brings it back whole, so the partition gets a leader again
//! without an unclean election.

use super::{Event, Replica, ReplicaEffect};
use crate::message::{Address, Message, RepairCopy, RepairFetchRequest, RepairFetchResponse};
use crate::replica::log::ReplicaLog;
use crate::types::{Nanos, NodeId, Offset};

impl<L: ReplicaLog> Replica<L> {
    /// Offline with a damaged batch: ask the next other replica for its copy. Called at
    /// every recheck that still finds damage, so each peer is asked in turn.
    pub(crate) fn ask_peer_for_copy(&mut self) {
        let Some(offset) = self.corrupt_at else {
            return;
        };
        // Without the epoch the answer could not be matched to this batch: leave it to
        // the cut.
        let Some(epoch) = self.log.epoch_at(offset) else {
            return;
        };
        let peers: Vec<NodeId> = self
            .replicas
            .iter()
            .copied()
            .filter(|&b| b != self.me)
            .collect();
        if peers.is_empty() {
            return;
        }
        let to = peers[self.repair_asks % peers.len()];
        self.repair_asks += 1;
        let correlation = self.correlation();
        let req = RepairFetchRequest {
            correlation,
            tp: self.tp.clone(),
            offset,
            epoch,
        };
        self.emit(ReplicaEffect::Send {
            to: Address::Node(to),
            msg: Message::RepairFetch(req),
        });
    }

    /// Whether `peer` answered that its log holds no copy of the damaged batch (see
    /// [`RepairCopy::NotHeld`]); from the leader, this lets the broker cut the log.
    pub fn peer_lacks_damaged_batch(&self, peer: NodeId) -> bool {
        self.corrupt_at.is_some() && self.not_held_by.contains(&peer)
    }

    /// Records the first damaged offset; the peers' answers about another offset no
    /// longer count.
    pub(crate) fn set_corrupt_at(&mut self, at: Option<Offset>) {
        if at != self.corrupt_at {
            self.not_held_by.clear();
        }
        self.corrupt_at = at;
    }

    /// Another replica's log is damaged at `req.offset`: our batch starting there, if it
    /// is of the asked epoch and reads intact. Reading changes nothing here: a read error
    /// only means no copy (this replica's own failures are found by its own reads).
    /// Answered to `from` as an effect.
    pub fn handle_repair_fetch(&mut self, from: Address, req: &RepairFetchRequest) {
        let mark = self.effects_mark();
        let held = req.offset >= self.log.log_start_offset()
            && req.offset < self.log.log_end_offset()
            && self.log.epoch_at(req.offset) == Some(req.epoch);
        let copy = if !held {
            RepairCopy::NotHeld
        } else {
            match self.log.read_batch(req.offset) {
                Ok(Some(b)) if b.partition_leader_epoch == req.epoch => RepairCopy::Intact(b),
                Ok(_) => RepairCopy::NotHeld,
                Err(_) => RepairCopy::Unreadable,
            }
        };
        let resp = RepairFetchResponse {
            correlation: req.correlation,
            tp: req.tp.clone(),
            offset: req.offset,
            copy,
        };
        self.reply_at(mark, from, resp.into());
    }

    /// A peer's answer. A copy that fits refills the damaged slot, and the log is read
    /// through at the next tick (back online if that was the only damage; the next
    /// damaged batch is asked for otherwise). No copy, a stale answer, or one that does
    /// not fit: the next recheck asks the next peer.
    pub fn handle_repair_fetch_response(
        &mut self,
        now: Nanos,
        from: NodeId,
        resp: RepairFetchResponse,
    ) {
        if self.failure.is_none() || self.corrupt_at != Some(resp.offset) {
            return;
        }
        let batch = match resp.copy {
            RepairCopy::Intact(batch) => batch,
            RepairCopy::NotHeld => {
                self.not_held_by.insert(from);
                return;
            }
            RepairCopy::Unreadable => return,
        };
        match self.log.replace_damaged(&batch) {
            Ok(()) => {
                crate::probe!(ReplicaPeerRepaired);
                tracing::info!(tp = %self.tp, offset = resp.offset, from, "damaged batch refilled from a peer");
                let tp = self.tp.clone();
                self.event(Event::BatchRepaired {
                    tp,
                    offset: resp.offset,
                    from,
                });
                self.set_corrupt_at(None);
                self.recheck_at = Some(now);
            }
            Err(e) => self.log_error("repair from a peer", e),
        }
    }
}
