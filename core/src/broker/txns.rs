//! Hosting the transaction coordinators (`crate::txn::TxnCoordinators`) inside a broker,
//! on the shared mechanism of [`super::coordinator_host`] (`HostKind::Txns`).
//!
//! * **Placement.** FindCoordinator for a transactional id is answered by any broker from
//!   its image: the leader of partition `txn_partition(id, n)` of `__transaction_state`. If
//!   the topic does not exist yet, the broker asks the controller to create it (partitions,
//!   replication factor, min.insync from [`super::BrokerConfig`]) and answers
//!   `CoordinatorNotAvailable`, as for `__consumer_offsets`.
//! * **Requests.** `Message::Txn` from a client, or from a partition leader verifying a
//!   transactional write (`verify_only`, `Address::Node`), goes to the coordinator; the
//!   answer goes back to the sender as `Message::TxnResponse`.
//! * **Producer ids.** A coordinator's `AllocateProducerId` becomes the controller's
//!   `InitProducerId`; the controller answers in order, so the answers are matched to a
//!   FIFO of requests. One unanswered for a controller timeout is failed
//!   (`CoordinatorNotAvailable`: the producer retries). A lost or reordered answer only
//!   changes which id gets which (fresh) producer id; a duplicated one would hand the same
//!   producer id to two transactional ids, so an answer naming a producer id already
//!   handed out is dropped (found by the txn workload's 2,000-seed sweep: seeds 770, 1118,
//!   1535 broke exactly-once when two pipelines shared producer id 1).
//! * **Markers.** `SendMarker` goes to the partition's leader in the image as
//!   `Message::WriteTxnMarker`; with no leader known the coordinator hears `NotLeader` at
//!   once and retries after its backoff. `Message::WriteTxnMarkerResponse` goes back to the
//!   coordinator that sent the marker (by its correlation).
//!
//! Nothing here runs before `__transaction_state` exists: a cluster without transactions
//! behaves exactly as before.

use super::coordinator_host::{CoordinatorHost, HostKind, HostedCoordinators, LeaderView};
use super::Broker;
use crate::controller::ControllerRequest;
use crate::group::{AppendError, AppendId};
use crate::log::{RecordBatch, Storage};
use crate::message::*;
use crate::node::NodeOutput;
use crate::replica::ReplicaRole;
use crate::txn::{
    txn_partition, MarkerError, ProducerIdAndEpoch, TxnConfig, TxnCoordinatorInfo, TxnCoordinators,
    TxnError, TxnOutput, TxnRequest, TxnResponse, WriteTxnMarkerResponse, TRANSACTION_STATE_TOPIC,
};
use crate::types::{LeaderEpoch, Nanos, Offset, TopicPartition};
use std::collections::VecDeque;

/// What the broker keeps to host transaction coordinators.
/// How many handed-out producer ids a broker remembers to recognise duplicated answers
/// (each is one InitProducerId of a new or exhausted transactional id: few per run).
const PIDS_REMEMBERED: usize = 1024;

#[derive(Default)]
pub(super) struct TxnHost {
    /// Created once `__transaction_state` is in the image, with its partition count.
    pub(super) coordinators: Option<TxnCoordinators>,
    pub(super) host: CoordinatorHost,
    /// InitProducerId requests sent to the controller, oldest first: (sent at, partition,
    /// transactional id).
    pid_requests: VecDeque<(Nanos, u32, String)>,
    /// Producer ids this broker's answers handed out, newest last (at most
    /// [`PIDS_REMEMBERED`]): a network-duplicated answer carries one of them again and is
    /// dropped, since the FIFO would give it to the next request (two transactional ids with
    /// one producer id: their markers would settle each other's transactions).
    pids_handed_out: VecDeque<u64>,
    /// Whether `__transaction_state` is in the image as of the image's `next_offset` (the
    /// pump asks after every step; a lookup by name compares strings).
    topic_known: Option<(Offset, bool)>,
}

impl TxnHost {
    /// Whether there is nothing to pump: no coordinator and nothing in flight.
    fn idle(&self) -> bool {
        self.coordinators.is_none() && self.host.leading.is_empty() && self.host.acks.is_empty()
    }
}

impl HostedCoordinators for TxnCoordinators {
    fn become_leader(&mut self, p: u32, epoch: LeaderEpoch) {
        TxnCoordinators::become_leader(self, p, epoch);
    }

    fn resign(&mut self, p: u32) {
        TxnCoordinators::resign(self, p);
    }

    fn load(&mut self, now: Nanos, p: u32, batches: &[RecordBatch]) {
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, p);
        if let Err(e) = self.load_batches(p, batches) {
            // The coordinator is LoadFailed and answers CoordinatorNotAvailable.
            tracing::error!(%tp, error = %e, "cannot load __transaction_state");
        }
        let ids = self.complete_load(now, p);
        tracing::info!(%tp, ?ids, "transaction coordinator loaded");
    }

    fn append_completed(
        &mut self,
        now: Nanos,
        p: u32,
        id: AppendId,
        result: Result<Offset, AppendError>,
    ) {
        TxnCoordinators::append_completed(self, now, p, id, result);
    }
}

impl<S: Storage + Clone> Broker<S> {
    /// The transaction coordinators hosted here (None until `__transaction_state` exists).
    pub fn txn_coordinators(&self) -> Option<&TxnCoordinators> {
        self.txns.coordinators.as_ref()
    }

    /// `Message::Txn` (from a client, or a partition leader's verify_only) and
    /// `Message::WriteTxnMarkerResponse`.
    pub(super) fn handle_txn_message(&mut self, now: Nanos, from: Address, msg: Message) {
        match (msg, from) {
            (Message::Txn { .. }, Address::Controller(_)) => {
                tracing::debug!(%from, "txn request from a controller ignored")
            }
            (
                Message::Txn {
                    correlation,
                    request,
                },
                _,
            ) => self.handle_txn(now, from, correlation, *request),
            (Message::WriteTxnMarkerResponse(resp), _) => self.handle_marker_response(now, resp),
            (other, _) => debug_assert!(false, "not a txn message: {}", other.name()),
        }
    }

    /// A transaction-protocol request from a client or (verify_only) a partition leader.
    fn handle_txn(&mut self, now: Nanos, from: Address, correlation: u64, request: TxnRequest) {
        if let TxnRequest::FindCoordinator { transactional_id } = &request {
            let r = self.find_txn_coordinator(now, transactional_id);
            self.send_txn_response(from, correlation, TxnResponse::FindCoordinator(r));
            return;
        }
        if let TxnRequest::AddPartitionsToTxn(r) = &request {
            // Kafka answers UNKNOWN_TOPIC_OR_PARTITION for a partition not in the metadata:
            // a transaction must not wait on markers to a partition that does not exist.
            let unknown = r
                .partitions
                .iter()
                .find(|tp| self.image.partition(tp).is_none());
            if let Some(tp) = unknown {
                let e = TxnError::UnknownTopicOrPartition(tp.clone());
                self.send_txn_response(from, correlation, request.error_response(e));
                return;
            }
        }
        match &mut self.txns.coordinators {
            Some(c) => c.step(now, from, correlation, request),
            None => {
                let response = request.error_response(TxnError::NotCoordinator);
                self.send_txn_response(from, correlation, response);
            }
        }
    }

    fn find_txn_coordinator(
        &mut self,
        now: Nanos,
        transactional_id: &str,
    ) -> Result<TxnCoordinatorInfo, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidTransactionalId);
        }
        let Some(topic) = self.image.topic(TRANSACTION_STATE_TOPIC) else {
            let config = crate::controller::TopicConfig {
                partitions: self.config.transaction_state_topic_partitions,
                replication_factor: self.config.transaction_state_topic_replication_factor,
                min_insync_replicas: self.config.transaction_state_topic_min_insync_replicas,
                ..Default::default()
            };
            self.request_internal_topic(now, HostKind::Txns, config);
            return Err(TxnError::CoordinatorNotAvailable);
        };
        let partition = txn_partition(transactional_id, topic.config.partitions.max(1));
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, partition);
        match self.image.partition(&tp).and_then(|s| s.leader) {
            Some(node) => Ok(TxnCoordinatorInfo { node, partition }),
            None => Err(TxnError::CoordinatorNotAvailable),
        }
    }

    fn send_txn_response(&mut self, to: Address, correlation: u64, response: TxnResponse) {
        self.outputs.push(NodeOutput::Send {
            to,
            msg: Message::txn_response(correlation, response),
        });
    }

    /// A partition leader's answer to a marker this broker's coordinator sent.
    fn handle_marker_response(&mut self, now: Nanos, resp: WriteTxnMarkerResponse) {
        if let Some(c) = &mut self.txns.coordinators {
            c.marker_answered(now, resp);
        }
    }

    /// The controller's answer to the oldest InitProducerId this broker asked.
    pub(super) fn on_producer_id(
        &mut self,
        now: Nanos,
        result: Result<ProducerIdAndEpoch, crate::controller::ControllerError>,
    ) {
        if let Ok(pid) = &result {
            if self.txns.pids_handed_out.contains(&pid.producer_id) {
                tracing::warn!(
                    producer_id = pid.producer_id,
                    "duplicate InitProducerId answer dropped"
                );
                return;
            }
            if self.txns.pids_handed_out.len() == PIDS_REMEMBERED {
                self.txns.pids_handed_out.pop_front();
            }
            self.txns.pids_handed_out.push_back(pid.producer_id);
        }
        let Some((_, p, id)) = self.txns.pid_requests.pop_front() else {
            return; // one already given up on
        };
        let result = result.map_err(|e| {
            tracing::warn!(error = %e, "no producer id from the controller");
            TxnError::CoordinatorNotAvailable
        });
        if let Some(c) = &mut self.txns.coordinators {
            c.producer_id_allocated(now, p, &id, result);
        }
    }

    /// Timers of the transaction coordinators, and producer-id requests given up on.
    pub(super) fn txn_timeout(&mut self, now: Nanos) {
        let limit = self.config.controller_timeout;
        while let Some((sent, p, id)) = self.txns.pid_requests.front().cloned() {
            if now < sent + limit {
                break;
            }
            self.txns.pid_requests.pop_front();
            if let Some(c) = &mut self.txns.coordinators {
                c.producer_id_allocated(now, p, &id, Err(TxnError::CoordinatorNotAvailable));
            }
        }
        if let Some(c) = &mut self.txns.coordinators {
            c.handle_timeout(now);
        }
    }

    pub(super) fn txn_poll_timeout(&self) -> Option<Nanos> {
        let c = self.txns.coordinators.as_ref()?;
        let pid = self
            .txns
            .pid_requests
            .front()
            .map(|(sent, _, _)| sent + self.config.controller_timeout);
        match (c.poll_timeout(), pid) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Transaction messages this broker sent itself (a coordinator's marker to a partition
    /// it leads, the leader's answer, a leader's `verify_only` to the coordinator it hosts,
    /// the answer): handled here, since drivers do not route a node's messages to itself
    /// (the node runtime has no connection to itself). Whether any was.
    pub(super) fn deliver_txn_loopback(&mut self, now: Nanos) -> bool {
        if self.txns.coordinators.is_none() {
            return false; // no transactions in this cluster
        }
        let me = Address::Node(self.id);
        let is_mine = |o: &NodeOutput| {
            matches!(o, NodeOutput::Send { to, msg } if *to == me && matches!(msg,
                Message::Txn { .. }
                    | Message::TxnResponse { .. }
                    | Message::WriteTxnMarker(_)
                    | Message::WriteTxnMarkerResponse(_)))
        };
        if !self.outputs.iter().any(is_mine) {
            return false;
        }
        let (mine, rest): (Vec<NodeOutput>, Vec<NodeOutput>) = std::mem::take(&mut self.outputs)
            .into_iter()
            .partition(is_mine);
        self.outputs = rest;
        for o in mine {
            if let NodeOutput::Send { msg, .. } = o {
                self.handle_inner(now, me, msg);
            }
        }
        true
    }

    /// Run the transaction coordinators' side to a fixpoint (as the group pump does).
    /// Whether anything happened. A no-op until `__transaction_state` exists.
    pub(super) fn pump_txns(&mut self, now: Nanos) -> bool {
        if self.txns.idle() {
            let at = self.image.next_offset;
            let exists = match self.txns.topic_known {
                Some((seen_at, exists)) if seen_at == at => exists,
                _ => {
                    let exists = self.image.topic(TRANSACTION_STATE_TOPIC).is_some();
                    self.txns.topic_known = Some((at, exists));
                    exists
                }
            };
            if !exists {
                return false;
            }
        }
        let mut any = false;
        for _ in 0..1000 {
            let mut progressed = self.sync_txn_leadership(now);
            self.collect_replica_effects();
            progressed |= self.process_hosted_acks(now, HostKind::Txns);
            let outputs = self
                .txns
                .coordinators
                .as_mut()
                .map(|c| c.poll_outputs())
                .unwrap_or_default();
            progressed |= !outputs.is_empty();
            for o in outputs {
                self.txn_output(now, o);
            }
            if !progressed {
                return any;
            }
            any = true;
        }
        debug_assert!(false, "transaction pump did not settle");
        any
    }

    fn txn_output(&mut self, now: Nanos, o: TxnOutput) {
        match o {
            TxnOutput::Respond {
                to,
                correlation,
                response,
            } => self.send_txn_response(to, correlation, response),
            TxnOutput::Append {
                id,
                partition,
                leader_epoch,
                records,
            } => self.hosted_append(
                now,
                HostKind::Txns,
                partition,
                id,
                leader_epoch,
                records,
                None,
            ),
            TxnOutput::AllocateProducerId {
                partition,
                transactional_id,
            } => {
                self.txns
                    .pid_requests
                    .push_back((now, partition, transactional_id));
                self.send_controller(ControllerRequest::InitProducerId);
            }
            TxnOutput::SendMarker { request, .. } => {
                match self.image.partition(&request.tp).and_then(|s| s.leader) {
                    Some(leader) => self.outputs.push(NodeOutput::Send {
                        to: Address::Node(leader),
                        msg: Message::WriteTxnMarker(Box::new(request)),
                    }),
                    None => {
                        let resp = WriteTxnMarkerResponse {
                            correlation: request.correlation,
                            tp: request.tp,
                            result: Err(MarkerError::NotLeader),
                        };
                        if let Some(c) = &mut self.txns.coordinators {
                            c.marker_answered(now, resp);
                        }
                    }
                }
            }
        }
    }

    /// Make the hosted coordinators follow the local `__transaction_state` replicas.
    fn sync_txn_leadership(&mut self, now: Nanos) -> bool {
        let mut changed = false;
        let n = self
            .image
            .topic(TRANSACTION_STATE_TOPIC)
            .map(|t| t.config.partitions)
            .filter(|&n| n > 0);
        let current = self.txns.coordinators.as_ref().map(|c| c.num_partitions());
        if n != current {
            // Topic created, deleted or re-created with another size: start over.
            if let Some(mut old) = self.txns.coordinators.take() {
                for p in self.txns.host.leading.keys().copied().collect::<Vec<_>>() {
                    old.resign(p);
                    self.txns.host.forget(p);
                }
                for o in old.poll_outputs() {
                    if let TxnOutput::Respond {
                        to,
                        correlation,
                        response,
                    } = o
                    {
                        self.send_txn_response(to, correlation, response);
                    }
                }
            }
            let config = TxnConfig {
                bugs: self.config.bugs.txn,
                offsets_topic_partitions: self.config.offsets_topic_partitions,
                ..self.config.txn.clone()
            };
            self.txns.coordinators = n.map(|n| TxnCoordinators::new(n, config));
            changed = true;
        }
        let Some(n) = n else { return changed };
        for p in 0..n {
            let leads = self
                .replicas
                .get_in(TRANSACTION_STATE_TOPIC, p)
                .filter(|r| r.role() == ReplicaRole::Leader)
                .map(|r| LeaderView {
                    leader_epoch: r.leader_epoch(),
                    high_watermark: r.high_watermark(),
                    log_start_offset: r.log().log_start_offset(),
                    log_end_offset: r.log().log_end_offset(),
                });
            changed |= self.follow_leadership(now, HostKind::Txns, p, leads);
        }
        changed
    }
}
