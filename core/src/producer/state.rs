//! Broker-side idempotence: per-partition producer state on the leader.
//!
//! For every producer id the table keeps the producer epoch and the sequence ranges and
//! offsets of its last [`MAX_CACHED_BATCHES`] batches (as Kafka does; a producer has at most
//! that many batches in flight per partition). A new leader rebuilds the table from the
//! batches in its log, and so does a replica whose log was truncated: the log is the only
//! source of truth.
//!
//! Transactions (KIP-98) ride on the same replay: a transactional batch opens its
//! producer's transaction on the partition, a marker (control batch) closes it, moves the
//! producer's epoch forward if it carries a newer one (KIP-890 part 2) and records the
//! coordinator epoch it came from; the [`TxnIndex`] keeps the open and aborted
//! transactions and answers the last stable offset.

use super::txn_index::TxnIndex;
use crate::log::{
    LogError, PartitionLog, ProducerInfo, RecordBatch, Storage, TxnMarker, NO_SEQUENCE,
};
use crate::types::{LeaderEpoch, Offset};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Batches remembered per producer for duplicate detection.
pub const MAX_CACHED_BATCHES: usize = 5;

/// What the leader should do with an idempotent batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SequenceCheck {
    /// Next in sequence (or the first batch of a new epoch): append it.
    Append,
    /// A retry of a batch already in the log: acknowledge with the original offsets and do
    /// not write it again.
    Duplicate {
        base_offset: Offset,
        last_offset: Offset,
    },
    /// Not the next sequence (a gap, or a retry older than the cached batches).
    OutOfOrderSequence { expected: u32, received: u32 },
    /// The batch's producer epoch is older than the one the partition has seen: a zombie.
    InvalidProducerEpoch { current: u16, received: u16 },
    /// The partition has no state for this producer (never seen, or its batches were all
    /// removed by retention) and the batch does not start a sequence at 0. The producer
    /// must bump its epoch and restart at 0.
    UnknownProducerId { received: u32 },
}

/// Sequence range and offsets of one appended batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchMetadata {
    pub first_sequence: u32,
    pub last_sequence: u32,
    pub base_offset: Offset,
    pub last_offset: Offset,
}

/// State of one producer on one partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerEntry {
    pub producer_epoch: u16,
    /// Oldest first, at most `MAX_CACHED_BATCHES`. Empty only when a marker made the
    /// entry (or moved its epoch): the next batch then starts a sequence at 0.
    pub batches: VecDeque<BatchMetadata>,
    /// First offset of the producer's open transaction on this partition.
    pub txn_first_offset: Option<Offset>,
    /// The coordinator epoch of the last marker seen: an older coordinator is fenced.
    pub coordinator_epoch: Option<LeaderEpoch>,
}

impl ProducerEntry {
    fn new(producer_epoch: u16) -> Self {
        Self {
            producer_epoch,
            batches: VecDeque::new(),
            txn_first_offset: None,
            coordinator_epoch: None,
        }
    }

    /// Sequence of the last record written at the current epoch (None: none yet).
    pub fn last_sequence(&self) -> Option<u32> {
        self.batches.back().map(|b| b.last_sequence)
    }
}

/// Why the leader refuses a transaction marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerCheck {
    Append,
    /// The marker comes from a coordinator older than the last one this producer heard.
    CoordinatorFenced {
        current: LeaderEpoch,
        received: LeaderEpoch,
    },
    /// The marker's producer epoch is older than the partition's (a late marker of a
    /// finished transaction, KIP-890 part 2).
    InvalidProducerEpoch {
        current: u16,
        received: u16,
    },
}

/// Per-partition producer state table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerStateTable {
    producers: BTreeMap<u64, ProducerEntry>,
    txns: TxnIndex,
}

/// Sequence number of the last record of a batch (sequences wrap around).
fn last_sequence(info: &ProducerInfo, record_count: u32) -> u32 {
    info.base_sequence
        .wrapping_add(record_count.saturating_sub(1))
}

impl ProducerStateTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Rebuilds the table from a log's batches, oldest first (what a new leader does).
    pub fn rebuild<'a>(batches: impl IntoIterator<Item = &'a RecordBatch>) -> Self {
        let mut table = Self::new();
        for batch in batches {
            table.load_batch(batch);
        }
        table
    }

    /// Rebuilds the table from every batch of `log` (from its start offset to its end),
    /// reading `chunk_bytes` at a time.
    pub fn rebuild_from_log<S: Storage>(
        log: &mut PartitionLog<S>,
        chunk_bytes: usize,
    ) -> Result<Self, LogError> {
        let mut table = Self::new();
        let mut next = log.log_start_offset();
        while next < log.log_end_offset() {
            let batches = log.read(next, chunk_bytes)?;
            let Some(last) = batches.last() else { break };
            next = last.next_offset();
            for batch in &batches {
                table.load_batch(batch);
            }
        }
        Ok(table)
    }

    /// Records a batch read from the log (no checks: the log is the truth). A transaction
    /// marker closes its producer's transaction; other control batches (leader-epoch
    /// markers) carry no producer state.
    pub fn load_batch(&mut self, batch: &RecordBatch) {
        if let Some(marker) = batch.as_txn_marker() {
            self.record_marker(&marker, batch.base_offset);
            return;
        }
        if batch.is_control() {
            return;
        }
        if let Some(info) = &batch.producer {
            if batch.record_count() > 0 {
                let txn = batch.is_transactional();
                self.record_append(info, batch.record_count(), batch.base_offset, txn);
            }
        }
    }

    /// The partition's transactions (open, undecided, aborted).
    pub fn txns(&self) -> &TxnIndex {
        &self.txns
    }

    /// The HW moved to `hw`: transactions whose marker it passed are decided.
    pub fn on_high_watermark(&mut self, hw: Offset) {
        self.txns.on_high_watermark(hw);
    }

    /// The last stable offset at high watermark `hw` (see [`TxnIndex::last_stable_offset`]).
    pub fn last_stable_offset(&self, hw: Offset) -> Offset {
        self.txns.last_stable_offset(hw)
    }

    /// Whether `producer_id` at `producer_epoch` has a transaction open on this partition
    /// (KIP-890 part 1: if not, a transactional write must be verified first).
    pub fn has_open_txn(&self, producer_id: u64, producer_epoch: u16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.producer_epoch == producer_epoch && e.txn_first_offset.is_some())
    }

    /// Decides whether a transaction marker may be appended. `bumped`: the coordinator
    /// bumped the epoch at the transaction's end (KIP-890 part 2), so the marker's epoch is
    /// one past its transaction's data.
    pub fn check_marker(&self, marker: &TxnMarker, bumped: bool) -> MarkerCheck {
        let Some(entry) = self.producers.get(&marker.producer_id) else {
            return MarkerCheck::Append;
        };
        if let Some(current) = entry.coordinator_epoch {
            if marker.coordinator_epoch < current {
                return MarkerCheck::CoordinatorFenced {
                    current,
                    received: marker.coordinator_epoch,
                };
            }
        }
        // A bumped marker at the producer's current epoch while a transaction is open at it:
        // that transaction's data carries the epoch this marker's own transaction ended at,
        // so it is the next transaction and the marker a late copy (KAFKA-17754 under part
        // 2; Kafka's transaction-version-2 check, KAFKA-19446). At the same epoch with no
        // transaction open it is a retry, appended as before and closing nothing.
        let stale_bumped = bumped
            && marker.producer_epoch == entry.producer_epoch
            && entry.txn_first_offset.is_some();
        if marker.producer_epoch < entry.producer_epoch || stale_bumped {
            return MarkerCheck::InvalidProducerEpoch {
                current: entry.producer_epoch,
                received: marker.producer_epoch,
            };
        }
        MarkerCheck::Append
    }

    /// Records a marker now in the log at `offset`: it closes the producer's open
    /// transaction (an abort joins the aborted index), and a newer producer epoch becomes
    /// the producer's (its sequence restarts), fencing writes at the older one.
    pub fn record_marker(&mut self, marker: &TxnMarker, offset: Offset) {
        let entry = self
            .producers
            .entry(marker.producer_id)
            .or_insert_with(|| ProducerEntry::new(marker.producer_epoch));
        if marker.producer_epoch > entry.producer_epoch {
            entry.producer_epoch = marker.producer_epoch;
            entry.batches.clear();
        }
        entry.coordinator_epoch = Some(
            entry
                .coordinator_epoch
                .map_or(marker.coordinator_epoch, |e| {
                    e.max(marker.coordinator_epoch)
                }),
        );
        // A marker with no open transaction (a retried marker) closes nothing.
        if let Some(first) = entry.txn_first_offset.take() {
            self.txns
                .complete(marker.producer_id, first, offset, marker.result);
        }
    }

    pub fn entry(&self, producer_id: u64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Decides what to do with a batch of `record_count` records from `info`'s producer.
    pub fn check(&self, info: &ProducerInfo, record_count: u32) -> SequenceCheck {
        if info.base_sequence == NO_SEQUENCE {
            // A coordinator's write for the producer (Kafka's coordinator-origin append):
            // the epoch fences it, no sequence orders it.
            return match self.producers.get(&info.producer_id) {
                Some(e) if info.producer_epoch < e.producer_epoch => {
                    SequenceCheck::InvalidProducerEpoch {
                        current: e.producer_epoch,
                        received: info.producer_epoch,
                    }
                }
                _ => SequenceCheck::Append,
            };
        }
        let Some(entry) = self.producers.get(&info.producer_id) else {
            return if info.base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::UnknownProducerId {
                    received: info.base_sequence,
                }
            };
        };
        if info.producer_epoch < entry.producer_epoch {
            return SequenceCheck::InvalidProducerEpoch {
                current: entry.producer_epoch,
                received: info.producer_epoch,
            };
        }
        let Some(prev_last) = entry.last_sequence() else {
            // Nothing written at this epoch yet (a marker set it): a sequence starts at 0.
            return if info.base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrderSequence {
                    expected: 0,
                    received: info.base_sequence,
                }
            };
        };
        if info.producer_epoch > entry.producer_epoch {
            // A new epoch restarts the sequence.
            return if info.base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrderSequence {
                    expected: 0,
                    received: info.base_sequence,
                }
            };
        }
        let last = last_sequence(info, record_count);
        if let Some(b) = entry
            .batches
            .iter()
            .find(|b| b.first_sequence == info.base_sequence && b.last_sequence == last)
        {
            return SequenceCheck::Duplicate {
                base_offset: b.base_offset,
                last_offset: b.last_offset,
            };
        }
        let expected = prev_last.wrapping_add(1);
        if info.base_sequence == expected {
            SequenceCheck::Append
        } else {
            SequenceCheck::OutOfOrderSequence {
                expected,
                received: info.base_sequence,
            }
        }
    }

    /// Records that a batch was appended at `base_offset` (after `check` said `Append`);
    /// a `transactional` one opens (or extends) the producer's transaction.
    pub fn record_append(
        &mut self,
        info: &ProducerInfo,
        record_count: u32,
        base_offset: Offset,
        transactional: bool,
    ) {
        debug_assert!(record_count > 0, "empty batches are never appended");
        let meta = BatchMetadata {
            first_sequence: info.base_sequence,
            last_sequence: last_sequence(info, record_count),
            base_offset,
            last_offset: base_offset + u64::from(record_count.saturating_sub(1)),
        };
        let entry = self
            .producers
            .entry(info.producer_id)
            .or_insert_with(|| ProducerEntry::new(info.producer_epoch));
        if info.producer_epoch < entry.producer_epoch {
            // A fenced epoch's batch in the log: only the bug zoo's stale-producer-epoch
            // writes one. It does not move the producer back to that epoch.
            return;
        }
        if info.producer_epoch != entry.producer_epoch {
            entry.producer_epoch = info.producer_epoch;
            entry.batches.clear();
        }
        // A batch without a sequence (a coordinator's) leaves the sequence state alone.
        if info.base_sequence != NO_SEQUENCE {
            entry.batches.push_back(meta);
            while entry.batches.len() > MAX_CACHED_BATCHES {
                entry.batches.pop_front();
            }
        }
        if transactional && entry.txn_first_offset.is_none() {
            entry.txn_first_offset = Some(base_offset);
            self.txns.begin(info.producer_id, base_offset);
        }
    }
}
