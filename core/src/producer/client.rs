//! Client-side idempotence: per-partition sequence numbers and the in-flight batches a
//! producer may have to retry with exactly the same producer id, epoch and sequence.

use crate::controller::ProducerIdAndEpoch;
use crate::log::{ProducerInfo, RecordBatch};
use crate::types::{Offset, TopicPartition};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Most batches in flight per partition (the broker remembers this many for duplicate
/// detection, see [`super::MAX_CACHED_BATCHES`]).
pub const MAX_IN_FLIGHT: usize = super::MAX_CACHED_BATCHES;

/// The broker's answer to one produce attempt, as the producer needs to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProduceOutcome {
    Appended {
        base_offset: Offset,
    },
    /// The batch had already been written (a retry after a lost response).
    Duplicate {
        base_offset: Offset,
    },
    OutOfOrderSequence,
    UnknownProducerId,
    InvalidProducerEpoch,
    /// Not leader, timeout, not enough replicas...: try again with the same sequence.
    Retriable,
}

/// What the producer should do after a response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    /// Acknowledged at `base_offset`; `duplicate` if it was a retry the broker had already.
    Acked {
        base_offset: Offset,
        duplicate: bool,
    },
    /// Send this exact batch again.
    Retry(RecordBatch),
    /// The broker lost track of this producer's sequence: call `bump_epoch`.
    NeedsEpochBump,
    /// A newer epoch of this producer exists; this producer may not write any more.
    Fenced,
}

/// Misuse of the producer, or a state in which it cannot send.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProducerError {
    #[error("no producer id yet: InitProducerId first")]
    NoProducerId,
    #[error("producer {producer_id} epoch {epoch} is fenced by a newer epoch")]
    Fenced { producer_id: u64, epoch: u16 },
    #[error("{tp}: {max} batches already in flight")]
    TooManyInFlight { tp: TopicPartition, max: usize },
    #[error("{tp}: refusing an empty batch")]
    EmptyBatch { tp: TopicPartition },
    #[error("{tp}: no in-flight batch with base sequence {base_sequence}")]
    UnknownBatch {
        tp: TopicPartition,
        base_sequence: u32,
    },
    #[error("producer {producer_id}: epoch exhausted, get a new producer id")]
    EpochExhausted { producer_id: u64 },
}

/// A sent, not yet acknowledged batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlightBatch {
    /// Shared with the host that sends it ([`IdempotentProducer::stamp_shared`]): kept
    /// for retries, it is not copied on every batch.
    pub batch: Arc<RecordBatch>,
    /// Times sent so far.
    pub attempts: u32,
    /// Unanswered sends made before the latest acknowledgement on this partition: their
    /// sequence errors may be stale (the broker lacked a batch that has landed since).
    stale_sends: u32,
    /// Unanswered sends made after it.
    fresh_sends: u32,
    /// Acknowledged, but kept in the window until every batch before it is too.
    acked: bool,
}

impl InFlightBatch {
    pub fn base_sequence(&self) -> u32 {
        self.batch.producer.expect("stamped").base_sequence
    }

    fn sent(&mut self) {
        self.attempts += 1;
        self.fresh_sends += 1;
    }

    /// Accounts for one answer; returns whether it may have been to a stale send.
    fn answered(&mut self, sequence_error: bool) -> bool {
        if sequence_error && self.stale_sends > 0 {
            self.stale_sends -= 1;
            return true;
        }
        if self.fresh_sends > 0 {
            self.fresh_sends -= 1;
        } else {
            self.stale_sends = self.stale_sends.saturating_sub(1);
        }
        false
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PartitionSequences {
    next_sequence: u32,
    /// The send window, oldest first: from the oldest unacknowledged batch to the newest.
    /// Batches acknowledged out of order stay until the ones before them are acknowledged,
    /// so the window never spans more than `MAX_IN_FLIGHT` batches and a retry of its
    /// oldest batch is always among the broker's cached ones. The front is never acked.
    in_flight: VecDeque<InFlightBatch>,
}

/// Sequence allocator and retry tracker of one idempotent producer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdempotentProducer {
    id: Option<ProducerIdAndEpoch>,
    fenced: bool,
    partitions: BTreeMap<TopicPartition, PartitionSequences>,
}

impl IdempotentProducer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adopts the id from an InitProducerId reply; all sequences restart at 0.
    pub fn init(&mut self, id: ProducerIdAndEpoch) {
        self.id = Some(id);
        self.fenced = false;
        self.partitions.clear();
    }

    pub fn producer(&self) -> Option<ProducerIdAndEpoch> {
        self.id
    }

    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// Sequence the next new batch for `tp` will start at.
    pub fn next_sequence(&self, tp: &TopicPartition) -> u32 {
        self.partitions.get(tp).map_or(0, |p| p.next_sequence)
    }

    /// Unacknowledged batches of `tp`, oldest first.
    pub fn in_flight(&self, tp: &TopicPartition) -> impl Iterator<Item = &InFlightBatch> + '_ {
        self.partitions
            .get(tp)
            .into_iter()
            .flat_map(|p| p.in_flight.iter())
            .filter(|b| !b.acked)
    }

    fn usable_id(&self) -> Result<ProducerIdAndEpoch, ProducerError> {
        let id = self.id.ok_or(ProducerError::NoProducerId)?;
        if self.fenced {
            return Err(ProducerError::Fenced {
                producer_id: id.producer_id,
                epoch: id.producer_epoch,
            });
        }
        Ok(id)
    }

    /// Stamps a new batch for `tp` with the producer id, epoch and the next sequences, and
    /// tracks it as in flight. Returns the batch to send.
    pub fn stamp(
        &mut self,
        tp: &TopicPartition,
        batch: RecordBatch,
    ) -> Result<RecordBatch, ProducerError> {
        self.stamp_shared(tp, batch).map(Arc::unwrap_or_clone)
    }

    /// [`Self::stamp`], the batch to send shared with the copy kept for retries.
    pub fn stamp_shared(
        &mut self,
        tp: &TopicPartition,
        mut batch: RecordBatch,
    ) -> Result<Arc<RecordBatch>, ProducerError> {
        let id = self.usable_id()?;
        if batch.records.is_empty() {
            return Err(ProducerError::EmptyBatch { tp: tp.clone() });
        }
        let part = self.partitions.entry(tp.clone()).or_default();
        // The window, not just the unacknowledged count, is bounded (see `in_flight`).
        if part.in_flight.len() >= MAX_IN_FLIGHT {
            return Err(ProducerError::TooManyInFlight {
                tp: tp.clone(),
                max: MAX_IN_FLIGHT,
            });
        }
        batch.producer = Some(ProducerInfo {
            producer_id: id.producer_id,
            producer_epoch: id.producer_epoch,
            base_sequence: part.next_sequence,
        });
        part.next_sequence = part.next_sequence.wrapping_add(batch.record_count());
        let batch = Arc::new(batch);
        part.in_flight.push_back(InFlightBatch {
            batch: Arc::clone(&batch),
            attempts: 1,
            stale_sends: 0,
            fresh_sends: 1,
            acked: false,
        });
        Ok(batch)
    }

    /// The in-flight batch with `base_sequence`, unchanged, to send again.
    pub fn retry(
        &mut self,
        tp: &TopicPartition,
        base_sequence: u32,
    ) -> Result<RecordBatch, ProducerError> {
        self.usable_id()?;
        let entry = self.find(tp, base_sequence)?;
        entry.sent();
        Ok(RecordBatch::clone(&entry.batch))
    }

    fn find(
        &mut self,
        tp: &TopicPartition,
        base_sequence: u32,
    ) -> Result<&mut InFlightBatch, ProducerError> {
        self.partitions
            .get_mut(tp)
            .and_then(|p| {
                p.in_flight
                    .iter_mut()
                    .find(|b| !b.acked && b.base_sequence() == base_sequence)
            })
            .ok_or_else(|| ProducerError::UnknownBatch {
                tp: tp.clone(),
                base_sequence,
            })
    }

    /// Processes the broker's answer for the in-flight batch `base_sequence` of `tp`.
    /// Responses for batches no longer in flight (late duplicates) are `UnknownBatch`.
    pub fn on_response(
        &mut self,
        tp: &TopicPartition,
        base_sequence: u32,
        outcome: ProduceOutcome,
    ) -> Result<Completion, ProducerError> {
        let id = self.id.ok_or(ProducerError::NoProducerId)?;
        let part = self
            .partitions
            .get_mut(tp)
            .ok_or_else(|| ProducerError::UnknownBatch {
                tp: tp.clone(),
                base_sequence,
            })?;
        let pos = part
            .in_flight
            .iter()
            .position(|b| !b.acked && b.base_sequence() == base_sequence)
            .ok_or_else(|| ProducerError::UnknownBatch {
                tp: tp.clone(),
                base_sequence,
            })?;
        // A response to an attempt made under an older epoch cannot reach here: bump_epoch
        // clears the in-flight batches.
        debug_assert_eq!(
            part.in_flight[pos].batch.producer.map(|p| p.producer_epoch),
            Some(id.producer_epoch)
        );
        let sequence_error = matches!(
            outcome,
            ProduceOutcome::OutOfOrderSequence | ProduceOutcome::UnknownProducerId
        );
        let maybe_stale = part.in_flight[pos].answered(sequence_error);
        Ok(match outcome {
            ProduceOutcome::Appended { base_offset }
            | ProduceOutcome::Duplicate { base_offset } => {
                part.in_flight[pos].acked = true;
                while part.in_flight.front().is_some_and(|b| b.acked) {
                    part.in_flight.pop_front();
                }
                // Every batch still in flight may have answers coming to sends made before
                // this one landed.
                for b in part.in_flight.iter_mut() {
                    b.stale_sends += b.fresh_sends;
                    b.fresh_sends = 0;
                }
                Completion::Acked {
                    base_offset,
                    duplicate: matches!(outcome, ProduceOutcome::Duplicate { .. }),
                }
            }
            ProduceOutcome::Retriable => {
                part.in_flight[pos].sent();
                Completion::Retry(RecordBatch::clone(&part.in_flight[pos].batch))
            }
            // A sequence error is transient when an earlier batch has not landed yet (lost or
            // being retried; for the first batches the broker does not even know the
            // producer), or when it answers a send made before the batch ahead landed.
            // The batch is retried (after the earlier ones).
            _ if sequence_error && (pos > 0 || maybe_stale) => {
                part.in_flight[pos].sent();
                Completion::Retry(RecordBatch::clone(&part.in_flight[pos].batch))
            }
            // The oldest batch, sent after everything before it was acknowledged, is out of
            // sequence: the broker lost this producer's state.
            ProduceOutcome::OutOfOrderSequence | ProduceOutcome::UnknownProducerId => {
                Completion::NeedsEpochBump
            }
            ProduceOutcome::InvalidProducerEpoch => {
                self.fenced = true;
                Completion::Fenced
            }
        })
    }

    /// Moves to the next producer epoch (KIP-360): every partition restarts at sequence 0.
    /// Returns the batches that were in flight, whose outcome is now unknown (they may or
    /// may not have been written); re-`stamp` them to send them again at-least-once.
    pub fn bump_epoch(&mut self) -> Result<Vec<(TopicPartition, RecordBatch)>, ProducerError> {
        let id = self.usable_id()?;
        crate::probe!(ProducerEpochBump);
        let producer_epoch =
            id.producer_epoch
                .checked_add(1)
                .ok_or(ProducerError::EpochExhausted {
                    producer_id: id.producer_id,
                })?;
        self.id = Some(ProducerIdAndEpoch {
            producer_id: id.producer_id,
            producer_epoch,
        });
        let abandoned = std::mem::take(&mut self.partitions)
            .into_iter()
            .flat_map(|(tp, p)| {
                p.in_flight
                    .into_iter()
                    .filter(|b| !b.acked)
                    .map(move |b| (tp.clone(), Arc::unwrap_or_clone(b.batch)))
            })
            .collect();
        Ok(abandoned)
    }
}
