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
