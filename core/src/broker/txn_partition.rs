//! The partition leader's part in transactions, at the broker (docs/transactions.md,
//! "Partition side"):
//! * **KIP-890 part 1.** A transactional batch whose producer has no open transaction on
//!   the partition at its epoch is held while the leader asks the coordinator of its
//!   transactional id (`AddPartitionsToTxn{verify_only}`) whether the partition is in the
//!   ongoing transaction; the answer appends it or refuses it (`InvalidTxnState`). No
//!   coordinator known, a retriable coordinator error, or no answer within the produce's
//!   timeout: a retriable `RequestTimedOut` (the producer sends the batch again).
//! * **WriteTxnMarker.** The marker is appended through the replica's produce path (the
//!   acks=all wait the group coordinator's appends use, `ProduceOrigin::Marker`) and the
//!   coordinator is answered once the HW passes it. A committed marker on
//!   `__consumer_offsets-p` settles that partition's pending transactional offsets
//!   (`GroupCoordinators::complete_txn`).

use super::Broker;
use crate::group::CONSUMER_OFFSETS_TOPIC;
use crate::log::Storage;
use crate::message::*;
use crate::node::NodeOutput;
use crate::txn::{
    txn_partition, AddPartitionsToTxnRequest, MarkerError, TxnError, TxnRequest, TxnResponse,
    WriteTxnMarkerRequest, WriteTxnMarkerResponse, TRANSACTION_STATE_TOPIC,
};
use crate::types::{Nanos, TopicPartition};
use std::collections::BTreeMap;

/// A transactional produce held for the coordinator's verification.
#[derive(Debug)]
struct Held {
    from: Address,
    req: ProduceRequest,
    deadline: Nanos,
}

/// A marker in the leader's log, waiting for the HW.
#[derive(Debug)]
struct PendingMarker {
    coordinator: Address,
    req: WriteTxnMarkerRequest,
}

#[derive(Default)]
pub(super) struct TxnPartitionHost {
    /// Verification correlation -> the held produce.
    verifying: BTreeMap<u64, Held>,
    /// Marker append correlation -> the coordinator's request.
    markers: BTreeMap<u64, PendingMarker>,
    /// Answers to marker appends (`ReplicaEffect::LocalMarkerAnswer`), not yet processed.
    pub(super) marker_acks: Vec<ProduceResponse>,
    next_correlation: u64,
}

impl TxnPartitionHost {
    fn correlation(&mut self) -> u64 {
        self.next_correlation += 1;
        self.next_correlation
    }

    /// The earliest held produce's deadline; now (0) if marker answers wait to be
    /// processed (one collected outside a step, e.g. by `poll_outputs`).
    pub(super) fn poll_timeout(&self) -> Option<Nanos> {
        if !self.marker_acks.is_empty() {
            return Some(0);
        }
        self.verifying.values().map(|h| h.deadline).min()
    }

    fn settled(&self) -> bool {
        self.marker_acks.is_empty()
    }
}

/// What a marker's produce answer means for the coordinator.
fn marker_result(result: Result<ProduceAck, ProduceError>) -> Result<(), MarkerError> {
    match result {
        Ok(_) => Ok(()),
        // Below the HW all the same: committed, though the ISR shrank meanwhile.
        Err(ProduceError::NotEnoughReplicasAfterAppend { .. }) => Ok(()),
        Err(ProduceError::NotLeader { .. }) => Err(MarkerError::NotLeader),
        Err(ProduceError::UnknownTopicOrPartition) => Err(MarkerError::UnknownTopicOrPartition),
        Err(ProduceError::NotEnoughReplicas { isr, min_insync }) => {
            Err(MarkerError::NotEnoughReplicas { isr, min_insync })
        }
        Err(ProduceError::RequestTimedOut) => Err(MarkerError::RequestTimedOut),
        Err(e) => Err(MarkerError::Storage(e.to_string())),
    }
}

impl<S: Storage + Clone> Broker<S> {
    /// A produce to a partition hosted here: a transactional batch KIP-890 part 1 wants
    /// verified is held, anything else goes to the replica.
    pub(super) fn produce_to_replica(&mut self, now: Nanos, from: Address, req: ProduceRequest) {
        let verify = !self.config.bugs.txn.unverified_txn_partition
            && req.transactional_id.is_some()
            && match (self.replicas.get(&req.tp), req.batch.header()) {
                (Some(r), Ok(h)) => r.needs_txn_verification(&h),
                _ => false,
            };
        if !verify {
            if let Some(r) = self.replicas.get_mut(&req.tp) {
                r.handle_produce(now, from, req);
            }
            return;
        }
        let header = req.batch.header().expect("parsed above");
        let info = header.producer.expect("verified batches have a producer");
        let id = req.transactional_id.clone().expect("checked above");
        let Some(coordinator) = self.txn_coordinator(&id) else {
            // No `__transaction_state` (or no leader for the id's partition) yet: the
            // producer's coordinator is not there either; it retries.
            return self.answer_held(from, &req, Err(ProduceError::RequestTimedOut));
        };
        let correlation = self.txn_partition.correlation();
        let request = TxnRequest::AddPartitionsToTxn(AddPartitionsToTxnRequest {
            transactional_id: id,
            producer_id: info.producer_id,
            producer_epoch: info.producer_epoch,
            partitions: vec![req.tp.clone()],
            verify_only: true,
        });
        let deadline = now + req.timeout;
        self.txn_partition.verifying.insert(
            correlation,
            Held {
                from,
                req,
                deadline,
            },
        );
        self.outputs.push(NodeOutput::Send {
            to: Address::Node(coordinator),
            msg: Message::txn(correlation, request),
        });
    }

    /// The leader of the transactional id's `__transaction_state` partition, per the image.
    fn txn_coordinator(&self, transactional_id: &str) -> Option<crate::types::NodeId> {
        let n = self.image.topic(TRANSACTION_STATE_TOPIC)?.config.partitions;
        if n == 0 {
            return None;
        }
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, txn_partition(transactional_id, n));
        self.image.partition(&tp)?.leader
    }

    fn answer_held(
        &mut self,
        to: Address,
        req: &ProduceRequest,
        result: Result<ProduceAck, ProduceError>,
    ) {
        if req.acks == Acks::None {
            return;
        }
        let resp = ProduceResponse {
            correlation: req.correlation,
            tp: req.tp.clone(),
            result,
        };
        self.reply(to, Message::ProduceResponse(resp));
    }

    /// The messages of the partition side: a coordinator's marker, and its answer to a
    /// verification (only that asks a coordinator from a broker).
    pub(super) fn handle_txn_partition(&mut self, now: Nanos, from: Address, msg: Message) {
        match msg {
            Message::WriteTxnMarker(req) => self.handle_write_txn_marker(now, from, *req),
            Message::TxnResponse {
                correlation,
                response,
            } => self.on_txn_response(now, correlation, *response),
            _ => debug_assert!(false, "not a partition-side transaction message"),
        }
    }

    /// A coordinator's answer to a verification: append the held batch, or refuse it.
    fn on_txn_response(&mut self, now: Nanos, correlation: u64, response: TxnResponse) {
        let Some(held) = self.txn_partition.verifying.remove(&correlation) else {
            return; // timed out and answered already
        };
        let refusal = match response {
            TxnResponse::AddPartitionsToTxn(Ok(())) => None,
            TxnResponse::AddPartitionsToTxn(Err(e)) if e.is_retriable() => {
                Some(ProduceError::RequestTimedOut)
            }
            TxnResponse::AddPartitionsToTxn(Err(TxnError::ProducerFenced(m))) => {
                Some(ProduceError::InvalidProducerEpoch(m))
            }
            TxnResponse::AddPartitionsToTxn(Err(e)) => {
                Some(ProduceError::InvalidTxnState(e.to_string()))
            }
            other => Some(ProduceError::InvalidTxnState(format!(
                "unexpected answer to a verification: {other:?}"
            ))),
        };
        match (refusal, self.replicas.get_mut(&held.req.tp)) {
            (None, Some(r)) => r.handle_produce(now, held.from, held.req),
            (None, None) => self.answer_held(
                held.from,
                &held.req,
                Err(ProduceError::UnknownTopicOrPartition),
            ),
            (Some(e), _) => self.answer_held(held.from, &held.req, Err(e)),
        }
    }

    /// Held produces past their timeout are answered (retriable): the coordinator did not.
    pub(super) fn expire_verifications(&mut self, now: Nanos) {
        let expired: Vec<u64> = (self.txn_partition.verifying.iter())
            .filter(|(_, h)| h.deadline <= now)
            .map(|(c, _)| *c)
            .collect();
        for c in expired {
            if let Some(h) = self.txn_partition.verifying.remove(&c) {
                self.answer_held(h.from, &h.req, Err(ProduceError::RequestTimedOut));
            }
        }
    }

    /// A coordinator's WriteTxnMarker: appended (answered when committed) or refused now.
    fn handle_write_txn_marker(&mut self, now: Nanos, from: Address, req: WriteTxnMarkerRequest) {
        let refused = if self.lapsed {
            // Cut off from the controller: not a leader to speak for the partition.
            Some(MarkerError::NotLeader)
        } else {
            let correlation = self.txn_partition.correlation();
            let timeout = self.config.group_append_timeout;
            match self.replicas.get_mut(&req.tp) {
                None => Some(MarkerError::UnknownTopicOrPartition),
                Some(r) => match r.append_txn_marker(now, correlation, &req, timeout) {
                    Ok(()) => {
                        let pending = PendingMarker {
                            coordinator: from,
                            req: req.clone(),
                        };
                        self.txn_partition.markers.insert(correlation, pending);
                        None
                    }
                    Err(e) => Some(e),
                },
            }
        };
        if let Some(e) = refused {
            self.answer_marker(from, &req, Err(e));
        }
        self.collect_replica_effects();
    }

    fn answer_marker(
        &mut self,
        to: Address,
        req: &WriteTxnMarkerRequest,
        result: Result<(), MarkerError>,
    ) {
        let resp = WriteTxnMarkerResponse {
            correlation: req.correlation,
            tp: req.tp.clone(),
            result,
        };
        self.reply(to, Message::WriteTxnMarkerResponse(resp));
    }

    /// Answer the coordinators of markers whose append finished; a committed marker on
    /// `__consumer_offsets` settles the group coordinator's pending offsets. Whether
    /// anything was done (the group pump then runs again).
    pub(super) fn pump_markers(&mut self, now: Nanos) -> bool {
        self.collect_replica_effects();
        if self.txn_partition.settled() {
            return false;
        }
        let acks = std::mem::take(&mut self.txn_partition.marker_acks);
        for resp in acks {
            let Some(m) = self.txn_partition.markers.remove(&resp.correlation) else {
                continue;
            };
            let mut result = marker_result(resp.result);
            if result.is_ok() && self.lapsed {
                // As a produce answer while cut off: the coordinator asks again.
                result = Err(MarkerError::RequestTimedOut);
            }
            if result.is_ok() && m.req.tp.topic == CONSUMER_OFFSETS_TOPIC {
                if let Some(c) = self.groups.coordinators_mut() {
                    c.complete_txn(now, m.req.tp.partition, m.req.producer_id, m.req.result);
                }
            }
            self.answer_marker(m.coordinator, &m.req, result);
        }
        true
    }
}
