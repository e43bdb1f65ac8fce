//! The controller nodes: one machine per controller id (1..=N). A single controller
//! (`--controllers 1`, the default) is core's `Controller` over its own metadata log; a
//! quorum of 3 or 5 runs core's `QuorumController`s, whose Raft messages travel the
//! simulated network between `Address::Controller`s like any other message. Which one is
//! active, and the committed metadata the world observes, are read from here.

use super::{Slot, World};
use crate::disk::SimDisk;
use skein_core::controller::MetadataImage;
use skein_core::node::ControllerNode;
use skein_core::raft::RaftRole;
use skein_core::NodeId;
use std::collections::BTreeMap;

/// One controller node's state machine (core's driver of a single or quorum controller).
pub(super) type CtlMachine = ControllerNode<SimDisk>;

/// The committed metadata the audits judge ISRs against: [`newest_image`], but with a
/// quorum only while some live node has applied every entry ever seen committed (else the
/// ISR it shows may lag one a leader already acts on: a shrink committed by a leader that
/// then crashed before the others heard of the commit).
pub(super) fn audit_image(
    controllers: &BTreeMap<NodeId, Slot<CtlMachine>>,
    commit_seen: u64,
) -> Option<&MetadataImage> {
    let applied = controllers
        .values()
        .filter_map(|s| s.machine.as_ref()?.raft().map(|r| r.applied_index()))
        .max();
    match applied {
        Some(a) if a < commit_seen => None,
        _ => newest_image(controllers),
    }
}

/// [`World::metadata_view`] over the controllers' slots alone (so the world's other fields
/// stay free to borrow).
pub(super) fn newest_image(
    controllers: &BTreeMap<NodeId, Slot<CtlMachine>>,
) -> Option<&MetadataImage> {
    controllers
        .iter()
        .filter_map(|(&id, s)| s.machine.as_ref().map(|m| (id, m.image())))
        .max_by_key(|(id, image)| (image.next_offset, std::cmp::Reverse(*id)))
        .map(|(_, image)| image)
}

impl World {
    /// The active controller: the one up and active in the newest Raft term (a single
    /// controller, when up). `None` while the quorum has none.
    pub(super) fn active_controller(&self) -> Option<NodeId> {
        self.controllers
            .iter()
            .filter_map(|(&id, s)| s.machine.as_ref().map(|m| (id, m)))
            .filter(|(_, m)| m.is_active())
            .max_by_key(|(id, m)| (m.raft().map_or(0, |r| r.term()), std::cmp::Reverse(*id)))
            .map(|(id, _)| id)
    }

    /// The controller a fault naming "the controller" hits: the active one, or controller
    /// 1 while none is.
    pub(super) fn active_or_first_controller(&self) -> NodeId {
        self.active_controller().unwrap_or(1)
    }

    /// The newest committed metadata a live controller holds (the largest committed
    /// image; ties to the lower id): what the world's observations of "the controller"
    /// read. `None` while every controller is down.
    pub(super) fn metadata_view(&self) -> Option<&MetadataImage> {
        newest_image(&self.controllers)
    }

    /// After a step of controller `id`, the Raft invariants look at its state.
    pub(super) fn observe_raft(&mut self, now: crate::time::SimTime, id: NodeId) {
        let Some(raft) = self
            .controllers
            .get(&id)
            .and_then(|s| s.machine.as_ref())
            .and_then(|m| m.raft())
        else {
            return;
        };
        self.raft_commit_seen = self.raft_commit_seen.max(raft.commit_index());
        let view = crate::invariants::RaftView {
            term: raft.term(),
            leader: raft.role() == RaftRole::Leader,
            snapshot: (raft.snapshot().last_index, raft.snapshot().last_term),
            entries: raft.entries(),
            commit: raft.commit_index(),
        };
        let (term, leader) = (view.term, view.leader);
        self.checker.on_raft(now, id, view);
        self.leader_nemesis(now, id, term, leader);
    }

    /// Feeds `metadata-in-order` controller `id`'s committed metadata records.
    pub(super) fn observe_committed_metadata(&mut self, id: NodeId) {
        let Some(c) = self.controllers.get(&id).and_then(|s| s.machine.as_ref()) else {
            return;
        };
        let records = match c {
            ControllerNode::Single(c) => c.records(),
            ControllerNode::Quorum(q) => q.controller().records(),
        };
        self.checker.on_metadata_committed(records);
    }

    /// After a step of broker `id` (`delta`: the metadata a message delivered in it
    /// carried), `metadata-in-order` looks at its image's offset. Returns whether the
    /// checker judged anything ([`crate::invariants::Checker::on_broker_metadata`]).
    pub(super) fn observe_broker_metadata(
        &mut self,
        now: crate::time::SimTime,
        id: NodeId,
        delta: Option<&skein_core::controller::MetadataDelta>,
    ) -> bool {
        let Some(slot) = self.brokers.get(id) else {
            return false;
        };
        let Some(b) = slot.machine.as_ref() else {
            return false;
        };
        let offset = b.metadata_image().next_offset;
        self.checker
            .on_broker_metadata(now, id, slot.incarnation, offset, delta)
    }

    /// Feeds `fenced-broker-ack` the brokers fenced in the newest committed metadata.
    pub(super) fn observe_fencing(&mut self, now: crate::time::SimTime) {
        let Some(image) = self.metadata_view() else {
            return;
        };
        let offset = image.next_offset;
        let fenced: Vec<(NodeId, skein_core::Offset)> = image
            .brokers
            .values()
            .filter(|b| b.is_fenced())
            .map(|b| (b.id, b.broker_epoch))
            .collect();
        self.checker.on_fencing(now, offset, &fenced);
    }
}
