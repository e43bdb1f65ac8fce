//! What a replica needs from its partition log, as a small trait.
//!
//! The replica logic is written against this trait rather than `PartitionLog` directly so
//! that it can be exercised against a tiny in-memory log in unit tests, and so the bug zoo
//! can wrap a log if it ever needs to. [`PartitionLog`] implements it by delegation.

use crate::log::{CheckedBatch, EncodedBatches, PartitionLog, RecordBatch, Storage};
use crate::log::{DecodeError, LogError};
use crate::types::{LeaderEpoch, Offset, TimestampMs};

/// Error from the log, rendered as text naming the problem (the replica reports it in a
/// typed response variant; it never panics on a log error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LogFailure(pub String, pub Option<Offset>);

impl LogFailure {
    /// The offset of the damaged batch, when the failure is corruption (a CRC mismatch, a
    /// bad header) rather than an I/O error that may go away.
    pub fn corrupt_at(&self) -> Option<Offset> {
        self.1
    }
}

/// Offsets a leader append was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: Offset,
    /// One past the last record.
    pub next_offset: Offset,
}

/// Why a leader's log did not append a producer's encoded batch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodedAppendError {
    /// The bytes do not check out (CRC, length, version, records): nothing was written and
    /// the log is as it was.
    #[error("corrupt batch: {0}")]
    Corrupt(String),
    /// No records: nothing was written.
    #[error("empty batch")]
    Empty,
    /// Over the log's `max_batch_bytes`: nothing was written.
    #[error("batch of {size} bytes exceeds max_batch_bytes {max}")]
    TooLarge { size: usize, max: usize },
    /// The log itself failed (storage), as any other append may.
    #[error(transparent)]
    Log(LogFailure),
}

pub trait ReplicaLog {
    fn log_start_offset(&self) -> Offset;
    fn log_end_offset(&self) -> Offset;
    /// Every offset below it is durable.
    fn flushed_offset(&self) -> Offset;
    fn append_as_leader(
        &mut self,
        batch: RecordBatch,
        epoch: LeaderEpoch,
        now_ms: TimestampMs,
    ) -> Result<Appended, LogFailure>;
    /// The largest batch the log appends, in bytes.
    fn max_batch_bytes(&self) -> usize;
    /// One encoded batch from a producer, checked ([`CheckedBatch`]), placed in place at
    /// the log end in `epoch` (base offset, epoch, offset deltas, max timestamp), then
    /// written: no record is decoded. A batch refused for what it holds leaves the log
    /// unchanged.
    fn append_encoded_as_leader(
        &mut self,
        batch: CheckedBatch<&mut [u8]>,
        epoch: LeaderEpoch,
        now_ms: TimestampMs,
    ) -> Result<Appended, EncodedAppendError>;
    /// One encoded batch copied from the leader, written verbatim once its CRC and records
    /// check out; its base offset must equal the log end offset.
    fn append_encoded_as_follower(
        &mut self,
        batch: &[u8],
        now_ms: TimestampMs,
    ) -> Result<(), LogFailure>;
    /// Whole batches covering offsets >= `from`, at least one if any.
    fn read(&mut self, from: Offset, max_bytes: usize) -> Result<Vec<RecordBatch>, LogFailure>;
    /// The one batch starting at `from` (None: no batch starts there), read without
    /// looking past it: what a peer asking for one batch gets.
    fn read_batch(&mut self, from: Offset) -> Result<Option<RecordBatch>, LogFailure>;
    /// [`Self::read`]'s batches still encoded, as stored (what a follower's fetch carries);
    /// fails when `read` would, short of a batch whose CRC holds but whose records do not
    /// decode (the follower's append checks those).
    fn read_encoded(
        &mut self,
        from: Offset,
        max_bytes: usize,
    ) -> Result<EncodedBatches, LogFailure>;
    /// [`Self::read`]'s batches holding offsets below `below`, the last one's records at
    /// or past `below` dropped; fails when `read` would.
    fn read_below(
        &mut self,
        from: Offset,
        below: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, LogFailure> {
        let mut out = self.read(from, max_bytes)?;
        out.retain(|b| b.base_offset < below);
        if let Some(b) = out.last_mut().filter(|b| b.next_offset() > below) {
            b.records.truncate((below - b.base_offset) as usize);
        }
        Ok(out)
    }
    fn offset_for_timestamp(&mut self, ts: TimestampMs) -> Result<Option<Offset>, LogFailure>;
    /// Drop every offset >= `offset` (and the epoch-cache entries starting there).
    fn truncate_to(&mut self, offset: Offset) -> Result<(), LogFailure>;
    /// Drop everything and continue at `offset`, possibly past the log end (the leader's
    /// log start, after retention overtook this follower).
    fn truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<(), LogFailure>;
    fn flush(&mut self) -> Result<(), LogFailure>;
    /// Epoch of the last batch in the log.
    fn latest_epoch(&self) -> Option<LeaderEpoch>;
    /// KIP-279: the largest epoch <= `requested` in the log and the start offset of the
    /// epoch after it (or the log end if it is the latest).
    fn end_offset_for_epoch(&self, requested: LeaderEpoch) -> Option<(LeaderEpoch, Offset)>;
    /// The leader epoch of the batch holding `offset`, from the epoch cache.
    fn epoch_at(&self, offset: Offset) -> Option<LeaderEpoch>;
    /// Refill the damaged batch at `batch.base_offset` with another replica's intact copy
    /// (peer repair; see `PartitionLog::replace_damaged` for the checks).
    fn replace_damaged(&mut self, batch: &RecordBatch) -> Result<(), LogFailure>;
    /// The log is compacted (`cleanup.policy` holds `compact`): every record needs a key.
    fn compacted(&self) -> bool {
        false
    }
}

impl<S: Storage> ReplicaLog for PartitionLog<S> {
    fn compacted(&self) -> bool {
        self.config().compaction.is_some()
    }
    fn log_start_offset(&self) -> Offset {
        PartitionLog::log_start_offset(self)
    }
    fn log_end_offset(&self) -> Offset {
        PartitionLog::log_end_offset(self)
    }
    fn flushed_offset(&self) -> Offset {
        PartitionLog::flushed_offset(self)
    }
    fn append_as_leader(
        &mut self,
        batch: RecordBatch,
        epoch: LeaderEpoch,
        now_ms: TimestampMs,
    ) -> Result<Appended, LogFailure> {
        let base = PartitionLog::log_end_offset(self);
        PartitionLog::append_as_leader(self, batch, epoch, now_ms).map_err(fail)?;
        Ok(Appended {
            base_offset: base,
            next_offset: PartitionLog::log_end_offset(self),
        })
    }
    fn max_batch_bytes(&self) -> usize {
        self.config().max_batch_bytes
    }
    fn append_encoded_as_leader(
        &mut self,
        batch: CheckedBatch<&mut [u8]>,
        epoch: LeaderEpoch,
        now_ms: TimestampMs,
    ) -> Result<Appended, EncodedAppendError> {
        match PartitionLog::append_encoded_as_leader(self, batch, epoch, now_ms) {
            Ok(a) => Ok(Appended {
                base_offset: a.base_offset,
                next_offset: a.last_offset + 1,
            }),
            // What the batch holds: the log checked it before touching anything.
            Err(LogError::InvalidBatch(m)) => Err(EncodedAppendError::Corrupt(m)),
            Err(LogError::EmptyBatch) => Err(EncodedAppendError::Empty),
            Err(LogError::BatchTooLarge { size, max }) => {
                Err(EncodedAppendError::TooLarge { size, max })
            }
            Err(e) => Err(EncodedAppendError::Log(fail(e))),
        }
    }
    fn append_encoded_as_follower(
        &mut self,
        batch: &[u8],
        now_ms: TimestampMs,
    ) -> Result<(), LogFailure> {
        PartitionLog::append_encoded_as_follower(self, batch, now_ms)
            .map(|_| ())
            .map_err(fail)
    }
    fn read(&mut self, from: Offset, max_bytes: usize) -> Result<Vec<RecordBatch>, LogFailure> {
        PartitionLog::read(self, from, max_bytes).map_err(fail)
    }
    fn read_batch(&mut self, from: Offset) -> Result<Option<RecordBatch>, LogFailure> {
        PartitionLog::read_batch(self, from).map_err(fail)
    }
    fn read_encoded(
        &mut self,
        from: Offset,
        max_bytes: usize,
    ) -> Result<EncodedBatches, LogFailure> {
        PartitionLog::read_raw(self, from, max_bytes)
            .map(EncodedBatches::new)
            .map_err(fail)
    }
    fn read_below(
        &mut self,
        from: Offset,
        below: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, LogFailure> {
        PartitionLog::read_below(self, from, below, max_bytes).map_err(fail)
    }
    fn offset_for_timestamp(&mut self, ts: TimestampMs) -> Result<Option<Offset>, LogFailure> {
        PartitionLog::offset_for_timestamp(self, ts).map_err(fail)
    }
    fn truncate_to(&mut self, offset: Offset) -> Result<(), LogFailure> {
        PartitionLog::truncate_to(self, offset).map_err(fail)
    }
    fn truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<(), LogFailure> {
        PartitionLog::truncate_fully_and_start_at(self, offset).map_err(fail)
    }
    fn flush(&mut self) -> Result<(), LogFailure> {
        PartitionLog::flush(self).map_err(fail)
    }
    fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.epoch_cache().latest_epoch()
    }
    fn end_offset_for_epoch(&self, requested: LeaderEpoch) -> Option<(LeaderEpoch, Offset)> {
        self.epoch_cache()
            .end_offset_for_epoch(requested, PartitionLog::log_end_offset(self))
    }
    fn epoch_at(&self, offset: Offset) -> Option<LeaderEpoch> {
        self.epoch_cache().epoch_at(offset)
    }
    fn replace_damaged(&mut self, batch: &RecordBatch) -> Result<(), LogFailure> {
        PartitionLog::replace_damaged(self, batch).map_err(fail)
    }
}

/// A batch in a leader's answer that does not even parse.
impl From<DecodeError> for LogFailure {
    fn from(e: DecodeError) -> Self {
        fail(e.into())
    }
}

fn fail(e: LogError) -> LogFailure {
    let corrupt = match &e {
        LogError::Corrupt { offset, .. } => Some(*offset),
        _ => None,
    };
    LogFailure(e.to_string(), corrupt)
}
