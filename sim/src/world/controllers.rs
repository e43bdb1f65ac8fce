//! The controller nodes: one machine per controller id (1..=N). A single controller
//! (`--controllers 1`, the default) is core's `Controller` over its own metadata log; a
//! quorum of 3 or 5 runs core's `QuorumController`s, whose Raft messages travel the
//! simulated network between `Address::Controller`s like any other message. Which one is
//! active, and the committed metadata the world observes, are read from here.

use super::{Slot, World};
use crate::disk::SimDisk;
use skein_core::controller::{
    Controller, ControllerOutput, ControllerRequest, MetadataImage, QuorumController, QuorumOutput,
    Requester,
};
use skein_core::raft::{Message as RaftMessage, Raft, Role};
use skein_core::{Nanos, NodeId};
use std::collections::BTreeMap;

/// One controller node's state machine.
pub(super) enum CtlMachine {
    Single(Box<Controller<SimDisk>>),
    Quorum(Box<QuorumController<SimDisk>>),
}

/// What a controller step produced: replies and events, and Raft messages to peers.
pub(super) struct CtlOutputs {
    pub(super) controller: Vec<ControllerOutput>,
    pub(super) peers: Vec<(NodeId, RaftMessage)>,
    /// Role changes of a quorum node (active?, term, leader hint), for the trace.
    pub(super) roles: Vec<(bool, u64, Option<NodeId>)>,
}

impl CtlMachine {
    pub(super) fn handle(&mut self, now: Nanos, from: Requester, request: ControllerRequest) {
        match self {
            CtlMachine::Single(c) => c.handle(now, from, request),
            CtlMachine::Quorum(q) => q.handle(now, from, request),
        }
    }

    /// A Raft message from controller `from` (a single controller has no peers).
    pub(super) fn peer(&mut self, now: Nanos, from: NodeId, message: RaftMessage) {
        if let CtlMachine::Quorum(q) = self {
            q.handle_peer(now, from, message);
        }
    }

    pub(super) fn tick(&mut self, now: Nanos) {
        match self {
            CtlMachine::Single(c) => c.tick(now),
            CtlMachine::Quorum(q) => q.tick(now),
        }
    }

    pub(super) fn next_timeout(&self) -> Option<Nanos> {
        match self {
            CtlMachine::Single(c) => c.next_timeout(),
            CtlMachine::Quorum(q) => q.next_timeout(),
        }
    }

    pub(super) fn drain(&mut self) -> CtlOutputs {
        let mut out = CtlOutputs {
            controller: Vec::new(),
            peers: Vec::new(),
            roles: Vec::new(),
        };
        match self {
            CtlMachine::Single(c) => out.controller = c.drain_outputs(),
            CtlMachine::Quorum(q) => {
                for o in q.drain_outputs() {
                    match o {
                        QuorumOutput::Controller(c) => out.controller.push(c),
                        QuorumOutput::Peer { to, message } => out.peers.push((to, message)),
                        QuorumOutput::RoleChanged {
                            active,
                            term,
                            leader,
                        } => out.roles.push((active, term, leader)),
                    }
                }
            }
        }
        out
    }

    /// The image of the committed metadata records.
    pub(super) fn image(&self) -> &MetadataImage {
        match self {
            CtlMachine::Single(c) => c.image(),
            CtlMachine::Quorum(q) => q.committed_image(),
        }
    }

    /// Whether this node decides (a single controller always does).
    pub(super) fn is_active(&self) -> bool {
        match self {
            CtlMachine::Single(_) => true,
            CtlMachine::Quorum(q) => q.is_active(),
        }
    }

    pub(super) fn raft(&self) -> Option<&Raft<SimDisk>> {
        match self {
            CtlMachine::Single(_) => None,
            CtlMachine::Quorum(q) => Some(q.raft()),
        }
    }
}

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
            leader: raft.role() == Role::Leader,
            snapshot: (raft.snapshot().last_index, raft.snapshot().last_term),
            entries: raft.entries(),
            commit: raft.commit_index(),
        };
        self.checker.on_raft(now, id, view);
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
