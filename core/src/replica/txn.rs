//! The partition leader's side of transactions (KIP-98, KIP-890): appending a
//! coordinator's commit/abort marker, the last stable offset, and what KIP-890 part 1 asks
//! before a transactional write. The state itself (open transactions, aborted index,
//! producer and coordinator epochs) is the producer table's, rebuilt from the log.

use super::leader::WaitingProduce;
use super::{now_ms, ProduceOrigin, Replica, ReplicaLog, RoleState};
use crate::log::{BatchHeader, RecordBatch, TxnMarker, TRANSACTIONAL_BATCH_BIT};
use crate::producer::MarkerCheck;
use crate::txn::{AbortedTxn, IsolationLevel, MarkerError, WriteTxnMarkerRequest};
use crate::types::{Nanos, Offset};

impl<L: ReplicaLog> Replica<L> {
    /// The last stable offset: read_committed readers read below it (see
    /// [`crate::producer::TxnIndex::last_stable_offset`]). Meaningful on the leader, whose
    /// producer table is rebuilt from its log when it takes over.
    pub fn last_stable_offset(&self) -> Offset {
        self.producers.last_stable_offset(self.high_watermark)
    }

    /// Where a reader at `isolation` must stop: the HW, or for read_committed the LSO
    /// (the HW with the zoo's `no_lso`).
    pub(crate) fn fetch_bound(&self, isolation: IsolationLevel) -> Offset {
        match isolation {
            IsolationLevel::ReadUncommitted => self.high_watermark,
            IsolationLevel::ReadCommitted if self.config.bugs.txn.no_lso => self.high_watermark,
            IsolationLevel::ReadCommitted => self.last_stable_offset(),
        }
    }

    /// The aborted transactions a read_committed read of `[from, to)` must be told about.
    pub fn aborted_overlapping(&self, from: Offset, to: Offset) -> Vec<AbortedTxn> {
        self.producers.txns().aborted_overlapping(from, to)
    }

    /// The producer state table (for views and tests).
    pub fn producer_state(&self) -> &super::ProducerStateTable {
        &self.producers
    }

    /// KIP-890 part 1: whether a transactional batch (its header) must be verified with the
    /// coordinator before it is appended. Only a leader that would append it asks: the
    /// producer has no open transaction here at this epoch, and the batch is next in
    /// sequence (a duplicate, a fenced epoch or a gap is answered as such, unasked).
    pub fn needs_txn_verification(&self, header: &BatchHeader) -> bool {
        if !matches!(self.role, RoleState::Leader(_))
            || header.attributes & TRANSACTIONAL_BATCH_BIT == 0
        {
            return false;
        }
        let Some(info) = header.producer else {
            return false;
        };
        !self
            .producers
            .has_open_txn(info.producer_id, info.producer_epoch)
            && super::idempotence::check(&self.producers, header) == super::ProducerCheck::Append
    }

    /// A coordinator's marker for this partition: checked (leadership, coordinator epoch,
    /// producer epoch), appended at the log end as a control batch and recorded, then left
    /// waiting like an acks=all produce of the broker's own: its answer comes back as a
    /// [`super::ReplicaEffect::LocalMarkerAnswer`] with `correlation` once the HW passes it
    /// (or the wait times out, or leadership is lost). `Err`: refused, nothing written.
    pub fn append_txn_marker(
        &mut self,
        now: Nanos,
        correlation: u64,
        req: &WriteTxnMarkerRequest,
        timeout: Nanos,
    ) -> Result<(), MarkerError> {
        let RoleState::Leader(l) = &self.role else {
            return Err(MarkerError::NotLeader);
        };
        let isr = l.isr.maximal().len();
        let min_insync = self.config.min_insync_replicas;
        if isr < min_insync {
            return Err(MarkerError::NotEnoughReplicas { isr, min_insync });
        }
        let marker = TxnMarker {
            producer_id: req.producer_id,
            producer_epoch: req.producer_epoch,
            result: req.result,
            coordinator_epoch: req.coordinator_epoch,
        };
        match self.producers.check_marker(&marker, req.bumped) {
            MarkerCheck::Append => {}
            MarkerCheck::CoordinatorFenced { current, received } => {
                return Err(MarkerError::CoordinatorFenced {
                    request: received,
                    current,
                })
            }
            MarkerCheck::InvalidProducerEpoch { current, received } => {
                return Err(MarkerError::InvalidProducerEpoch {
                    request: received,
                    current,
                })
            }
        }
        let epoch = self.leader_epoch;
        let batch = RecordBatch::txn_marker(marker, now_ms(now));
        let appended = match self.log.append_as_leader(batch, epoch, now_ms(now)) {
            Ok(a) => a,
            Err(e) => {
                let m = e.0.clone();
                self.log_error("append txn marker", e);
                return Err(MarkerError::Storage(m));
            }
        };
        self.producers.record_marker(&marker, appended.base_offset);
        debug_assert!(
            !self
                .producers
                .has_open_txn(marker.producer_id, marker.producer_epoch),
            "a marker closes its producer's transaction"
        );
        self.after_leader_append(now);
        self.answer_parked(now, false);
        if let RoleState::Leader(l) = &mut self.role {
            l.waiting.push(WaitingProduce {
                client: ProduceOrigin::Marker,
                correlation,
                base_offset: appended.base_offset,
                required: appended.next_offset,
                deadline: now + timeout,
                duplicate: false,
            });
        }
        self.leader_maybe_advance_hw(now);
        Ok(())
    }
}
