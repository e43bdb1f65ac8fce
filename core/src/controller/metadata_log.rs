//! The controller's durable metadata log: a [`PartitionLog`] holding one log record per
//! metadata record (bincode in the record value). Each controller decision is appended as
//! one batch, so it reaches the disk all or nothing, and is fsynced before the controller
//! applies or answers it. Decisions larger than a batch are split (see the design doc).

use super::image::ImageError;
use super::record::MetadataRecord;
use crate::log::{LogConfig, LogError, PartitionLog, Record, RecordBatch, Storage};
use crate::types::{Nanos, Offset, TimestampMs};

/// Why the controller could not open its metadata log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControllerOpenError {
    #[error("metadata log: {0}")]
    Log(#[from] LogError),
    #[error("metadata log starts at offset {log_start}: the controller needs it from 0")]
    Truncated { log_start: Offset },
    #[error("metadata log record at offset {offset} does not decode: {reason}")]
    Decode { offset: Offset, reason: String },
    #[error("metadata log record at offset {offset} is empty")]
    EmptyRecord { offset: Offset },
    #[error("metadata log does not replay: {0}")]
    Replay(#[from] ImageError),
}

/// Leader epoch stamped on metadata batches. There is one controller; a quorum would use
/// its term here.
const CONTROLLER_EPOCH: u32 = 0;
/// Bytes read per step while replaying.
const REPLAY_CHUNK: usize = 1 << 20;

/// Public only because `Controller` names it; not constructible outside the crate.
pub struct MetadataLog<S: Storage> {
    log: PartitionLog<S>,
}

fn to_ms(now: Nanos) -> TimestampMs {
    (now / 1_000_000) as TimestampMs
}

/// The log config of the metadata log: never any retention (a full replay needs every
/// record from offset 0) and no time-based rolling.
pub(crate) fn metadata_log_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        segment_ms: None,
        retention_bytes: None,
        retention_ms: None,
        ..LogConfig::default()
    }
}

impl<S: Storage> MetadataLog<S> {
    /// Opens the log in `dir` (recovering from a crash) and returns every record in it.
    pub(crate) fn open(
        storage: S,
        dir: &str,
        config: LogConfig,
    ) -> Result<(Self, Vec<MetadataRecord>), ControllerOpenError> {
        let (mut log, recovery) = PartitionLog::open(storage, dir, config)?;
        if recovery.bytes_truncated > 0 {
            // A torn, unsynced tail: those decisions were never applied or answered.
            tracing::info!(
                bytes = recovery.bytes_truncated,
                reason = ?recovery.truncation_reason,
                "controller metadata log: cut unsynced tail"
            );
        }
        if log.log_start_offset() != 0 {
            return Err(ControllerOpenError::Truncated {
                log_start: log.log_start_offset(),
            });
        }
        let end = log.log_end_offset();
        let mut records = Vec::with_capacity(end as usize);
        while (records.len() as Offset) < end {
            let next = records.len() as Offset;
            let batches = log.read(next, REPLAY_CHUNK)?;
            if batches.is_empty() {
                break;
            }
            for batch in batches {
                for (offset, r) in batch.iter_offsets() {
                    if offset < next {
                        continue;
                    }
                    let value = r
                        .value
                        .as_deref()
                        .ok_or(ControllerOpenError::EmptyRecord { offset })?;
                    let record = MetadataRecord::decode(value)
                        .map_err(|reason| ControllerOpenError::Decode { offset, reason })?;
                    debug_assert_eq!(offset, records.len() as Offset);
                    records.push(record);
                }
            }
        }
        Ok((Self { log }, records))
    }

    pub(crate) fn end_offset(&self) -> Offset {
        self.log.log_end_offset()
    }

    pub(crate) fn storage(&self) -> &S {
        self.log.storage()
    }

    pub(crate) fn into_storage(self) -> S {
        self.log.into_storage()
    }

    /// Appends `records` (as few batches as the batch size limit allows) and fsyncs them
    /// before returning.
    pub(crate) fn append(&mut self, records: &[MetadataRecord], now: Nanos) -> Result<(), String> {
        let max = self.log.config().max_batch_bytes;
        let mut batch = empty_batch(now);
        for record in records {
            let r = Record::new(batch.records.len() as u32, None, Some(record.encode()));
            batch.records.push(r);
            if batch.records.len() > 1 && batch.encoded_len() > max {
                let last = batch.records.pop().expect("just pushed");
                self.append_batch(std::mem::replace(&mut batch, empty_batch(now)), now)?;
                batch.records.push(Record {
                    offset_delta: 0,
                    ..last
                });
            }
        }
        if !batch.records.is_empty() {
            self.append_batch(batch, now)?;
        }
        self.log.flush().map_err(|e| e.to_string())
    }

    fn append_batch(&mut self, batch: RecordBatch, now: Nanos) -> Result<(), String> {
        let expected = self.log.log_end_offset();
        let info = self
            .log
            .append_as_leader(batch, CONTROLLER_EPOCH, to_ms(now))
            .map_err(|e| e.to_string())?;
        debug_assert_eq!(info.base_offset, expected);
        Ok(())
    }
}

fn empty_batch(now: Nanos) -> RecordBatch {
    RecordBatch::of_records(to_ms(now), Vec::new()).in_epoch(CONTROLLER_EPOCH)
}
