//! One node of the controller quorum: a [`Raft`] node plus the controller logic
//! ([`ControllerState`], the same code the single controller runs) over it.
//!
//! The metadata log is the Raft log: every controller decision (one [`Txn`] batch of
//! metadata records) is one proposed entry. Every node applies committed entries in order to
//! its image; the image (with the record history brokers pull from) is the Raft snapshot.
//! Only the active controller, the Raft leader once it has applied every entry before its
//! term's no-op, decides: it computes each decision against its pending image (committed
//! plus its own proposed batches, like KRaft's), proposes it, and answers only once
//! everything it had proposed when it answered is committed. When it loses the leadership
//! every waiting answer fails with the retriable [`ControllerError::NotController`], and the
//! uncommitted batches are dropped from its image (Raft may still commit them; the clients
//! retry and learn the outcome). Other nodes answer `NotController` with a leader hint,
//! except metadata reads (`FetchMetadata`), which every node serves from its committed
//! records. Broker sessions are not replicated: a new active controller gives every
//! registered broker `restart_grace` before it can fence it.
//!
//! [`Txn`]: super::machine

use super::image::{ImageError, MetadataImage};
use super::machine::{
    failed_response, ControllerConfig, ControllerState, Journal, JournalError, Written,
};
use super::record::MetadataRecord;
use super::request::*;
use crate::log::Storage;
use crate::raft::{
    CompactError, Entry, Index, Message, Payload, ProposeError, Raft, RaftConfig, RaftOpenError,
    RaftOutput, RaftRole, Term,
};
use crate::types::{Nanos, NodeId, Offset};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A quorum controller node's tunables.
#[derive(Clone, Debug)]
pub struct QuorumConfig {
    pub controller: ControllerConfig,
    /// `raft.id` is this node's controller id, `raft.voters` the quorum.
    pub raft: RaftConfig,
    /// A Raft snapshot of the image is taken every this many applied entries.
    pub snapshot_every: u64,
}

impl QuorumConfig {
    pub fn new(id: NodeId, voters: Vec<NodeId>) -> Self {
        Self {
            controller: ControllerConfig::default(),
            raft: RaftConfig::new(id, voters),
            snapshot_every: 64,
        }
    }
}

/// Why a quorum controller node could not open.
#[derive(Debug, thiserror::Error)]
pub enum QuorumOpenError {
    #[error("raft: {0}")]
    Raft(#[from] RaftOpenError),
    #[error("raft snapshot does not decode: {0}")]
    Snapshot(String),
}

/// What a quorum node receives; a driver routes [`QuorumOutput`]s of other nodes here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuorumInput {
    /// From another controller node of the quorum.
    Peer { from: NodeId, message: Message },
    /// From a broker or client, as to the single controller.
    Request {
        from: Requester,
        request: ControllerRequest,
    },
}

/// What a quorum node asks its driver to do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuorumOutput {
    /// Deliver to another controller node (everything it depends on is durable).
    Peer { to: NodeId, message: Message },
    /// A reply to a broker or client, or an event, as the single controller's; replies of
    /// the active controller leave only once their records are committed.
    Controller(ControllerOutput),
    /// This node became, or stopped being, the active controller (or its term or known
    /// leader changed).
    RoleChanged {
        active: bool,
        term: Term,
        leader: Option<NodeId>,
    },
}

/// The Raft snapshot's data: the committed image, and the committed records, which
/// brokers pull by offset (they cannot fetch an image yet, so the history is kept).
#[derive(Serialize, Deserialize)]
struct SnapshotData {
    image: MetadataImage,
    records: Vec<MetadataRecord>,
}

/// Raft proposals as the controller's [`Journal`]: a decision is pending until it commits.
pub struct RaftJournal<S: Storage> {
    raft: Raft<S>,
    /// Index of the last entry this node proposed as active controller (or the index it
    /// activated at): answers wait for it.
    last_proposed: Index,
}

impl<S: Storage> Journal for RaftJournal<S> {
    fn write(
        &mut self,
        _first_offset: Offset,
        records: &[MetadataRecord],
        now: Nanos,
    ) -> Result<Written, JournalError> {
        let data = bincode::serialize(records).expect("metadata records encode");
        match self.raft.propose(now, data) {
            Ok(index) => {
                self.last_proposed = index;
                Ok(Written::Pending)
            }
            Err(ProposeError::NotLeader { leader }) => Err(JournalError::NotController { leader }),
            Err(ProposeError::Stopped(reason)) => Err(JournalError::Storage(reason)),
        }
    }
}

/// One controller node of a Raft quorum.
pub struct QuorumController<S: Storage> {
    state: ControllerState<RaftJournal<S>>,
    snapshot_every: u64,
    /// The image of the committed records (`state`'s image runs ahead on the active
    /// controller; this is what it falls back to when it loses the leadership).
    committed: MetadataImage,
    /// Last Raft index applied to `committed`.
    applied: Index,
    /// While Raft leader: the index of this term's no-op. Activation waits until it is
    /// applied, so the pending image starts from every earlier entry.
    leading_from: Option<Index>,
    active: bool,
    /// Replies and events of the active controller, by the Raft index they wait for.
    deferred: BTreeMap<Index, Vec<ControllerOutput>>,
    outputs: Vec<QuorumOutput>,
}

impl<S: Storage> QuorumController<S> {
    /// Opens (or creates) the node's Raft state and restores the image from its snapshot;
    /// later committed entries arrive as Raft applies them.
    pub fn open(storage: S, config: QuorumConfig, now: Nanos) -> Result<Self, QuorumOpenError> {
        let raft = Raft::open(storage, config.raft, now)?;
        let snapshot = raft.snapshot();
        let applied = snapshot.last_index;
        let data = if snapshot.last_index == 0 {
            SnapshotData {
                image: MetadataImage::new(),
                records: Vec::new(),
            }
        } else {
            bincode::deserialize(&snapshot.data)
                .map_err(|e| QuorumOpenError::Snapshot(e.to_string()))?
        };
        let journal = RaftJournal {
            raft,
            last_proposed: applied,
        };
        let committed = data.image.clone();
        Ok(Self {
            state: ControllerState::new(journal, config.controller, data.records, data.image),
            snapshot_every: config.snapshot_every.max(1),
            committed,
            applied,
            leading_from: None,
            active: false,
            deferred: BTreeMap::new(),
            outputs: Vec::new(),
        })
    }

    // ---- accessors ----

    pub fn id(&self) -> NodeId {
        self.raft().id()
    }
    pub fn raft(&self) -> &Raft<S> {
        &self.state.journal().raft
    }
    /// Whether this node is the active controller (it decides and answers writes).
    pub fn is_active(&self) -> bool {
        self.active
    }
    /// The controller node this one believes active (itself included), if any.
    pub fn leader_hint(&self) -> Option<NodeId> {
        self.raft().leader()
    }
    /// The image of the committed records.
    pub fn committed_image(&self) -> &MetadataImage {
        &self.committed
    }
    /// Every committed record this node holds, in order.
    pub fn records(&self) -> &[MetadataRecord] {
        self.state.records()
    }
    /// The controller logic (its image includes pending batches on the active controller).
    pub fn controller(&self) -> &ControllerState<RaftJournal<S>> {
        &self.state
    }
    /// Set when storage failed: the node must be reopened.
    pub fn failed(&self) -> Option<&str> {
        self.raft().failed().or(self.state.failed())
    }
    pub fn storage(&self) -> &S {
        self.raft().storage()
    }
    /// Stops the node, returning its storage (everything it answered is durable).
    pub fn into_storage(self) -> S {
        self.state.into_journal().raft.into_storage()
    }

    /// Effects produced since the last call, in order.
    pub fn poll_outputs(&mut self) -> Vec<QuorumOutput> {
        std::mem::take(&mut self.outputs)
    }

    /// When `handle_timeout` next has something to do: Raft's timers, and on the active controller
    /// the earliest broker session deadline.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let raft = self.raft().poll_timeout();
        let sessions = if self.active {
            self.state.poll_timeout()
        } else {
            None
        };
        match (raft, sessions) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    // ---- inputs ----

    pub fn step(&mut self, now: Nanos, input: QuorumInput) {
        match input {
            QuorumInput::Peer { from, message } => self.peer(now, from, message),
            QuorumInput::Request { from, request } => self.request(now, from, request),
        }
    }

    /// A Raft message from controller node `from`.
    fn peer(&mut self, now: Nanos, from: NodeId, message: Message) {
        self.catch_up_time(now);
        self.state.journal_mut().raft.step(now, from, message);
        self.pump(now);
    }

    /// Runs Raft's timers up to `now` before an input: a node that was paused (or whose
    /// timer is late) acts on its deadlines first, so a leader paused past its check-quorum
    /// deadline steps down instead of acting as leader on the message that wakes it.
    fn catch_up_time(&mut self, now: Nanos) {
        if self.raft().poll_timeout().is_some_and(|t| t <= now) {
            self.state.journal_mut().raft.handle_timeout(now);
            self.pump(now);
        }
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        self.state.journal_mut().raft.handle_timeout(now);
        self.pump(now);
        if self.active {
            // Session expiries: fencing decisions, replicated like any other.
            self.state.handle_timeout(now);
            self.collect(now);
        }
    }

    /// A request from a broker or client. Metadata reads are served by every node from its
    /// committed records; everything else only by the active controller.
    fn request(&mut self, now: Nanos, from: Requester, request: ControllerRequest) {
        if let ControllerRequest::FetchMetadata { from_offset } = request {
            let response = ControllerResponse::Metadata(self.state.delta_from(from_offset));
            self.outputs
                .push(QuorumOutput::Controller(ControllerOutput::Send {
                    to: from,
                    response,
                }));
            return;
        }
        // Time first: a leader that was paused past its check-quorum deadline steps down
        // now rather than answer as active controller.
        self.catch_up_time(now);
        if !self.active {
            let e = ControllerError::NotController {
                leader: self.leader_hint(),
            };
            let response = failed_response(&request, e);
            self.outputs
                .push(QuorumOutput::Controller(ControllerOutput::Send {
                    to: from,
                    response,
                }));
            return;
        }
        self.state.step(now, from, request);
        self.collect(now);
    }

    // ---- internals ----

    /// Takes the controller logic's replies and events: they wait until everything this
    /// node proposed so far is committed (a reply may depend on any pending decision, even
    /// one it did not make itself, e.g. "topic already exists"). Then drives Raft.
    fn collect(&mut self, now: Nanos) {
        let outs = self.state.poll_outputs();
        let wait_for = self.state.journal().last_proposed;
        if !outs.is_empty() {
            if wait_for <= self.applied {
                for out in outs {
                    let out = self.within_lease(now, out);
                    self.outputs.push(QuorumOutput::Controller(out));
                }
            } else {
                self.deferred.entry(wait_for).or_default().extend(outs);
            }
        }
        self.pump(now);
    }

    /// Handles every Raft output until there are none.
    fn pump(&mut self, now: Nanos) {
        loop {
            let outs = self.state.journal_mut().raft.poll_outputs();
            if outs.is_empty() {
                return;
            }
            for out in outs {
                match out {
                    RaftOutput::Send { to, message } => {
                        self.outputs.push(QuorumOutput::Peer { to, message })
                    }
                    RaftOutput::Apply(entries) => {
                        for e in entries {
                            self.apply(e);
                        }
                        self.release(now);
                        self.maybe_activate(now);
                        self.maybe_compact();
                    }
                    RaftOutput::RestoreSnapshot(s) => {
                        // Only a follower gets a snapshot, so nothing is pending.
                        self.deactivate();
                        match bincode::deserialize::<SnapshotData>(&s.data) {
                            Ok(data) => {
                                self.committed = data.image.clone();
                                self.state.restore(data.records, data.image);
                                self.applied = s.last_index;
                            }
                            Err(e) => self.stop(format!("raft snapshot does not decode: {e}")),
                        }
                    }
                    RaftOutput::RoleChanged { role, term, leader } => {
                        if role == RaftRole::Leader {
                            // become_leader has appended the term's no-op: the last entry.
                            self.leading_from = Some(self.raft().last_index());
                        } else {
                            self.leading_from = None;
                            self.deactivate();
                        }
                        self.outputs.push(QuorumOutput::RoleChanged {
                            active: self.active,
                            term,
                            leader,
                        });
                        self.maybe_activate(now);
                    }
                    RaftOutput::StorageFailed(reason) => {
                        self.deactivate();
                        self.outputs
                            .push(QuorumOutput::Controller(ControllerOutput::Event(
                                ControllerEvent::StorageFailed { reason },
                            )));
                    }
                }
            }
        }
    }

    fn apply(&mut self, e: Entry) {
        debug_assert_eq!(e.index, self.applied + 1, "raft applies in order");
        self.applied = e.index;
        let Payload::Command(data) = e.payload else {
            return;
        };
        let batch: Vec<MetadataRecord> = match bincode::deserialize(&data) {
            Ok(b) => b,
            Err(err) => return self.stop(format!("entry {} does not decode: {err}", e.index)),
        };
        let applied: Result<(), ImageError> =
            batch.iter().try_for_each(|r| self.committed.apply(r));
        if let Err(err) = applied.and_then(|_| self.state.apply_committed(batch)) {
            self.stop(format!("entry {} does not apply: {err}", e.index));
        }
    }

    /// A committed entry that cannot be applied is a bug (every node would hit it): stop
    /// serving rather than diverge.
    fn stop(&mut self, reason: String) {
        debug_assert!(false, "quorum controller {}: {reason}", self.id());
        tracing::error!(id = self.id(), %reason, "quorum controller stopped");
        self.deactivate();
        self.state.fail(reason);
    }

    /// Hands out the replies and events whose entries are now applied. A deferred
    /// heartbeat reply gets its metadata re-read: the records it waited for are now
    /// committed, so the broker sees them (with `fenced` computed against them).
    fn release(&mut self, now: Nanos) {
        let later = self.deferred.split_off(&(self.applied + 1));
        let due = std::mem::replace(&mut self.deferred, later);
        for out in due.into_values().flatten() {
            let out = match out {
                ControllerOutput::Send {
                    to,
                    response: ControllerResponse::BrokerHeartbeat(Ok(mut reply)),
                } => {
                    reply.metadata = self.state.delta_from(reply.metadata.from);
                    ControllerOutput::Send {
                        to,
                        response: ControllerResponse::BrokerHeartbeat(Ok(reply)),
                    }
                }
                other => other,
            };
            let out = self.within_lease(now, out);
            self.outputs.push(QuorumOutput::Controller(out));
        }
    }

    /// A heartbeat reply renews the broker's session lease, so it goes out only while this
    /// controller holds the Raft leader lease (`Raft::has_lease`); after it, the broker is
    /// told `NotController` and looks for the active controller. Without this, a leader
    /// deposed by a partition renewed a broker's lease until check-quorum stepped it down,
    /// while the next leader was already fencing that broker (sim seed 4602:
    /// `fenced-broker-ack`).
    fn within_lease(&self, now: Nanos, out: ControllerOutput) -> ControllerOutput {
        match out {
            ControllerOutput::Send {
                to,
                response: response @ ControllerResponse::BrokerHeartbeat(Ok(_)),
            } if !self.raft().has_lease(now) => ControllerOutput::Send {
                to,
                response: as_error(response, ControllerError::NotController { leader: None }),
            },
            other => other,
        }
    }

    /// The Raft leader becomes the active controller once its no-op is applied: the
    /// committed image then holds every entry of earlier terms, and nothing is pending.
    fn maybe_activate(&mut self, now: Nanos) {
        let Some(from) = self.leading_from else {
            return;
        };
        if self.active || self.applied < from || self.failed().is_some() {
            return;
        }
        debug_assert_eq!(self.state.metadata_end_offset(), self.committed.next_offset);
        self.active = true;
        self.state.journal_mut().last_proposed = self.applied;
        self.state.start_sessions(now);
        self.outputs.push(QuorumOutput::RoleChanged {
            active: true,
            term: self.raft().term(),
            leader: Some(self.id()),
        });
    }

    /// Stops being the active controller: waiting replies fail with `NotController`
    /// (their records may or may not commit under the next leader: the client retries),
    /// waiting events are dropped, and the image falls back to the committed one.
    fn deactivate(&mut self) {
        if !self.active {
            return;
        }
        self.active = false;
        let e = ControllerError::NotController {
            leader: self.leader_hint().filter(|&l| l != self.id()),
        };
        for out in std::mem::take(&mut self.deferred).into_values().flatten() {
            if let ControllerOutput::Send { to, response } = out {
                self.outputs
                    .push(QuorumOutput::Controller(ControllerOutput::Send {
                        to,
                        response: as_error(response, e.clone()),
                    }));
            }
        }
        self.state.deactivate(self.committed.clone());
    }

    fn maybe_compact(&mut self) {
        if self.applied < self.raft().snapshot().last_index + self.snapshot_every {
            return;
        }
        let data = SnapshotData {
            image: self.committed.clone(),
            records: self.state.records().to_vec(),
        };
        let data = bincode::serialize(&data).expect("snapshot encodes");
        let applied = self.applied;
        match self.state.journal_mut().raft.compact(applied, data) {
            Ok(()) => {}
            // The Raft node stopped; its StorageFailed output follows.
            Err(CompactError::Stopped(_)) => {}
            Err(e) => {
                debug_assert!(false, "compact at {applied} refused: {e}");
            }
        }
    }
}

/// `response` with every result replaced by `e` (what it answers is kept).
fn as_error(response: ControllerResponse, e: ControllerError) -> ControllerResponse {
    match response {
        ControllerResponse::RegisterBroker(_) => ControllerResponse::RegisterBroker(Err(e)),
        ControllerResponse::BrokerHeartbeat(_) => ControllerResponse::BrokerHeartbeat(Err(e)),
        ControllerResponse::AlterPartition { tp, .. } => {
            ControllerResponse::AlterPartition { tp, result: Err(e) }
        }
        ControllerResponse::CreateTopic { name, .. } => ControllerResponse::CreateTopic {
            name,
            result: Err(e),
        },
        ControllerResponse::DeleteTopic { name, .. } => ControllerResponse::DeleteTopic {
            name,
            result: Err(e),
        },
        ControllerResponse::UpdateTopicConfig { name, .. } => {
            ControllerResponse::UpdateTopicConfig {
                name,
                result: Err(e),
            }
        }
        ControllerResponse::ElectPreferredLeaders { results } => {
            ControllerResponse::ElectPreferredLeaders {
                results: results
                    .into_iter()
                    .map(|(tp, _)| (tp, Err(e.clone())))
                    .collect(),
            }
        }
        ControllerResponse::InitProducerId(_) => ControllerResponse::InitProducerId(Err(e)),
        // Reads are of committed records: never deferred, never failed.
        ControllerResponse::Metadata(d) => ControllerResponse::Metadata(d),
        ControllerResponse::ControlledShutdown(_) => ControllerResponse::ControlledShutdown(Err(e)),
    }
}
