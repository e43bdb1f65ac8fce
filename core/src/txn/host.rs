//! `TxnCoordinators`: what a broker embeds to host the transaction coordinators of the
//! `__transaction_state` partitions it leads (as [`crate::group::GroupCoordinators`] does
//! for groups). It routes each request to the partition its transactional id hashes to,
//! answers NotCoordinator for partitions it does not lead, and merges outputs.
//!
//! Broker wiring:
//! * leader of `__transaction_state`-p at epoch e: `become_leader(p, e)`, `load_batches(p,
//!   ..)` with the log from its start to its end offset, then `complete_load(now, p)`;
//!   follower / no longer a replica: `resign(p)`;
//! * `Message::Txn` (from a client or, `verify_only`, a partition leader):
//!   `step(now, from, correlation, request)`; FindCoordinator is answered by the broker
//!   from its metadata image;
//! * [`TxnOutput::Append`]: acks=all append, `append_completed` in log order;
//!   [`TxnOutput::AllocateProducerId`]: ask the controller, `producer_id_allocated`;
//!   [`TxnOutput::SendMarker`]: to the partition's leader, its answer to
//!   `marker_answered` (routed by [`TxnCoordinator::marker_partition`]);
//! * `handle_timeout(now)` at `poll_timeout()`.

use crate::group::{AppendError, AppendId};
use crate::log::RecordBatch;
use crate::message::Address;
use crate::txn::coordinator::*;
use crate::txn::protocol::*;
use crate::types::{LeaderEpoch, Nanos, Offset};
use std::collections::BTreeMap;

pub struct TxnCoordinators {
    num_partitions: u32,
    config: TxnConfig,
    hosted: BTreeMap<u32, TxnCoordinator>,
    outputs: Vec<TxnOutput>,
}

impl TxnCoordinators {
    pub fn new(num_partitions: u32, config: TxnConfig) -> Self {
        assert!(num_partitions > 0, "__transaction_state needs partitions");
        Self {
            num_partitions,
            config,
            hosted: BTreeMap::new(),
            outputs: Vec::new(),
        }
    }

    pub fn num_partitions(&self) -> u32 {
        self.num_partitions
    }

    pub fn coordinator(&self, p: u32) -> Option<&TxnCoordinator> {
        self.hosted.get(&p)
    }

    /// Every coordinator hosted here, by `__transaction_state` partition.
    pub fn hosted(&self) -> impl Iterator<Item = &TxnCoordinator> {
        self.hosted.values()
    }

    /// The coordinator serving `transactional_id`, if hosted here.
    pub fn coordinator_of(&self, transactional_id: &str) -> Option<&TxnCoordinator> {
        self.hosted
            .get(&txn_partition(transactional_id, self.num_partitions))
    }

    fn with(&mut self, p: u32, f: impl FnOnce(&mut TxnCoordinator)) {
        if let Some(c) = self.hosted.get_mut(&p) {
            f(c);
            self.outputs.extend(c.poll_outputs());
        }
    }

    pub fn become_leader(&mut self, partition: u32, epoch: LeaderEpoch) {
        let (n, cfg) = (self.num_partitions, self.config.clone());
        self.hosted
            .entry(partition)
            .or_insert_with(|| TxnCoordinator::new(partition, n, cfg));
        self.with(partition, |c| c.begin_load(epoch));
    }

    pub fn load_batches(
        &mut self,
        partition: u32,
        batches: &[RecordBatch],
    ) -> Result<(), TxnLoadError> {
        match self.hosted.get_mut(&partition) {
            Some(c) => c.load_batches(batches),
            None => Ok(()),
        }
    }

    /// How many transactional ids the load found (None: not hosted).
    pub fn complete_load(&mut self, now: Nanos, partition: u32) -> Option<usize> {
        let mut n = None;
        self.with(partition, |c| n = Some(c.complete_load(now)));
        n
    }

    pub fn resign(&mut self, partition: u32) {
        if let Some(mut c) = self.hosted.remove(&partition) {
            c.unload();
            self.outputs.extend(c.poll_outputs());
        }
    }

    pub fn step(&mut self, now: Nanos, from: Address, correlation: u64, request: TxnRequest) {
        let p = txn_partition(request.transactional_id(), self.num_partitions);
        match self.hosted.get_mut(&p) {
            Some(c) => {
                c.step(now, from, correlation, request);
                self.outputs.extend(c.poll_outputs());
            }
            None => self.outputs.push(TxnOutput::Respond {
                to: from,
                correlation,
                response: request.error_response(TxnError::NotCoordinator),
            }),
        }
    }

    pub fn append_completed(
        &mut self,
        now: Nanos,
        partition: u32,
        id: AppendId,
        result: Result<Offset, AppendError>,
    ) {
        self.with(partition, |c| c.append_completed(now, id, result));
    }

    pub fn producer_id_allocated(
        &mut self,
        now: Nanos,
        partition: u32,
        transactional_id: &str,
        result: Result<ProducerIdAndEpoch, TxnError>,
    ) {
        self.with(partition, |c| {
            c.producer_id_allocated(now, transactional_id, result)
        });
    }

    pub fn marker_answered(&mut self, now: Nanos, response: WriteTxnMarkerResponse) {
        let p = TxnCoordinator::marker_partition(response.correlation);
        self.with(p, |c| c.marker_answered(now, response));
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        for c in self.hosted.values_mut() {
            c.handle_timeout(now);
            self.outputs.extend(c.poll_outputs());
        }
    }

    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.hosted.values().filter_map(|c| c.poll_timeout()).min()
    }

    pub fn poll_outputs(&mut self) -> Vec<TxnOutput> {
        std::mem::take(&mut self.outputs)
    }

    pub fn has_outputs(&self) -> bool {
        !self.outputs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init(id: &str) -> TxnRequest {
        TxnRequest::InitProducerId(InitProducerIdRequest {
            transactional_id: id.into(),
            transaction_timeout_ms: 1000,
            current: None,
        })
    }

    /// Requests go to the partition their id hashes to; markers' answers find their way
    /// back by correlation; a resigned partition answers NotCoordinator.
    #[test]
    fn routes_requests_and_marker_answers_by_partition() {
        let mut h = TxnCoordinators::new(4, TxnConfig::default());
        let id = "orders-pipeline";
        let p = txn_partition(id, 4);
        let client = Address::Client(3);
        h.step(0, client, 1, init(id));
        assert!(matches!(
            h.poll_outputs()[..],
            [TxnOutput::Respond {
                response: TxnResponse::InitProducerId(Err(TxnError::NotCoordinator)),
                ..
            }]
        ));
        h.become_leader(p, 5);
        h.load_batches(p, &[]).unwrap();
        assert_eq!(h.complete_load(0, p), Some(0));
        h.step(0, client, 2, init(id));
        let Some(TxnOutput::AllocateProducerId {
            partition,
            transactional_id,
        }) = h.poll_outputs().pop()
        else {
            panic!("expected a producer-id request");
        };
        assert_eq!((partition, transactional_id.as_str()), (p, id));
        let pid = ProducerIdAndEpoch {
            producer_id: 77,
            producer_epoch: 0,
        };
        h.producer_id_allocated(0, p, id, Ok(pid));
        let Some(TxnOutput::Append { id: append, .. }) = h.poll_outputs().pop() else {
            panic!("expected the metadata write");
        };
        h.append_completed(0, p, append, Ok(0));
        assert_eq!(
            h.poll_outputs(),
            vec![TxnOutput::Respond {
                to: client,
                correlation: 2,
                response: TxnResponse::InitProducerId(Ok(pid)),
            }]
        );
        assert_eq!(
            h.coordinator_of(id)
                .and_then(|c| c.txn(id))
                .map(|m| m.producer_id),
            Some(77)
        );
        // A transaction with one partition: its marker carries the partition in its
        // correlation, and the answer completes it.
        let tp = crate::types::TopicPartition::new("t", 0);
        h.step(
            0,
            client,
            3,
            TxnRequest::AddPartitionsToTxn(AddPartitionsToTxnRequest {
                transactional_id: id.into(),
                producer_id: 77,
                producer_epoch: 0,
                partitions: vec![tp.clone()],
                verify_only: false,
            }),
        );
        // Commit the AddPartitions write before ending the transaction.
        for o in h.poll_outputs() {
            if let TxnOutput::Append { id, .. } = o {
                h.append_completed(0, p, id, Ok(0));
            }
        }
        h.step(
            0,
            client,
            4,
            TxnRequest::EndTxn(EndTxnRequest {
                transactional_id: id.into(),
                producer_id: 77,
                producer_epoch: 0,
                result: TxnResult::Abort,
                keep_epoch: false,
            }),
        );
        let mut marker = None;
        for _ in 0..4 {
            for o in h.poll_outputs() {
                match o {
                    TxnOutput::Append { id, .. } => h.append_completed(0, p, id, Ok(0)),
                    TxnOutput::SendMarker { partition, request } => {
                        assert_eq!(partition, p);
                        marker = Some(request);
                    }
                    TxnOutput::Respond { .. } | TxnOutput::AllocateProducerId { .. } => {}
                }
            }
        }
        let m = marker.expect("a marker");
        assert_eq!(TxnCoordinator::marker_partition(m.correlation), p);
        assert_eq!((m.coordinator_epoch, m.result), (5, TxnResult::Abort));
        h.marker_answered(
            0,
            WriteTxnMarkerResponse {
                correlation: m.correlation,
                tp,
                result: Ok(()),
            },
        );
        for o in h.poll_outputs() {
            if let TxnOutput::Append { id, .. } = o {
                h.append_completed(0, p, id, Ok(0));
            }
        }
        let state = h
            .coordinator_of(id)
            .and_then(|c| c.txn(id))
            .map(|m| m.state);
        assert_eq!(state, Some(crate::txn::TxnState::CompleteAbort));
        h.resign(p);
        h.step(0, client, 5, init(id));
        assert!(matches!(
            h.poll_outputs()[..],
            [TxnOutput::Respond {
                response: TxnResponse::InitProducerId(Err(TxnError::NotCoordinator)),
                ..
            }]
        ));
    }
}
