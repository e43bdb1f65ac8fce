//! A tiny in-memory `ReplicaLog` for unit tests of the replica logic: batches in a Vec,
//! a flushed offset, and `crash()` to lose what was not flushed.

use super::{Appended, LogFailure, ReplicaLog};
use crate::log::RecordBatch;
use crate::types::{LeaderEpoch, Offset, TimestampMs};

#[derive(Clone, Debug, Default)]
pub struct VecLog {
    pub batches: Vec<RecordBatch>,
    pub flushed: Offset,
}

impl VecLog {
    /// Lose every batch that was not flushed.
    pub fn crash(&mut self) {
        let flushed = self.flushed;
        self.batches.retain(|b| b.next_offset() <= flushed);
    }

    fn epochs(&self) -> Vec<(LeaderEpoch, Offset)> {
        let mut out: Vec<(LeaderEpoch, Offset)> = Vec::new();
        for b in &self.batches {
            if out.last().map(|(e, _)| *e) != Some(b.partition_leader_epoch) {
                out.push((b.partition_leader_epoch, b.base_offset));
            }
        }
        out
    }
}

impl ReplicaLog for VecLog {
    fn log_start_offset(&self) -> Offset {
        0
    }
    fn log_end_offset(&self) -> Offset {
        self.batches.last().map(|b| b.next_offset()).unwrap_or(0)
    }
    fn flushed_offset(&self) -> Offset {
        self.flushed.min(self.log_end_offset())
    }
    fn append_as_leader(
        &mut self,
        mut batch: RecordBatch,
        epoch: LeaderEpoch,
        _now_ms: TimestampMs,
    ) -> Result<Appended, LogFailure> {
        if batch.records.is_empty() {
            return Err(LogFailure("empty batch".into()));
        }
        let base = self.log_end_offset();
        batch.base_offset = base;
        batch.partition_leader_epoch = epoch;
        let next = batch.next_offset();
        self.batches.push(batch);
        Ok(Appended {
            base_offset: base,
            next_offset: next,
        })
    }
    fn append_as_follower(
        &mut self,
        batch: RecordBatch,
        _now_ms: TimestampMs,
    ) -> Result<(), LogFailure> {
        if batch.base_offset != self.log_end_offset() {
            return Err(LogFailure(format!(
                "base offset {} != log end {}",
                batch.base_offset,
                self.log_end_offset()
            )));
        }
        self.batches.push(batch);
        Ok(())
    }
    fn read(&mut self, from: Offset, max_bytes: usize) -> Result<Vec<RecordBatch>, LogFailure> {
        let mut out = Vec::new();
        let mut bytes = 0;
        for b in self.batches.iter().filter(|b| b.next_offset() > from) {
            bytes += 64 * b.records.len();
            out.push(b.clone());
            if bytes >= max_bytes {
                break;
            }
        }
        Ok(out)
    }
    fn offset_for_timestamp(&mut self, ts: TimestampMs) -> Result<Option<Offset>, LogFailure> {
        Ok(self
            .batches
            .iter()
            .find(|b| b.max_timestamp >= ts)
            .map(|b| b.base_offset))
    }
    fn truncate_to(&mut self, offset: Offset) -> Result<(), LogFailure> {
        self.batches.retain(|b| b.next_offset() <= offset);
        if self.log_end_offset() != offset.min(self.log_end_offset()) {
            return Err(LogFailure("truncation inside a batch".into()));
        }
        self.flushed = self.flushed.min(self.log_end_offset());
        Ok(())
    }
    fn flush(&mut self) -> Result<(), LogFailure> {
        self.flushed = self.log_end_offset();
        Ok(())
    }
    fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.batches.last().map(|b| b.partition_leader_epoch)
    }
    fn end_offset_for_epoch(&self, requested: LeaderEpoch) -> Option<(LeaderEpoch, Offset)> {
        let epochs = self.epochs();
        let i = epochs.iter().rposition(|(e, _)| *e <= requested)?;
        let end = epochs
            .get(i + 1)
            .map(|(_, s)| *s)
            .unwrap_or(self.log_end_offset());
        Some((epochs[i].0, end))
    }
}
