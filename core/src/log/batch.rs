//! Record batches: the unit of append, replication and fetch.
//! The on-disk/wire encoding is documented in `docs/format.md`.

use crate::types::{LeaderEpoch, Offset, TimestampMs};
use serde::{Deserialize, Serialize};

/// A record header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub key: String,
    pub value: Vec<u8>,
}

/// One record inside a batch. Its offset is `batch.base_offset + offset_delta` and its
/// timestamp `batch.first_timestamp + timestamp_delta`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub offset_delta: u32,
    pub timestamp_delta: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
}

/// Idempotent-producer identity carried by a batch (absent for plain producers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerInfo {
    pub producer_id: u64,
    pub producer_epoch: u16,
    /// Sequence number of the first record of the batch; record i has `base_sequence + i`.
    pub base_sequence: u32,
}

/// A batch of records as appended by a leader and copied verbatim by followers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordBatch {
    /// Offset of the first record. Assigned by the leader on append.
    pub base_offset: Offset,
    /// Epoch of the leader that appended the batch. Drives the leader-epoch cache.
    pub partition_leader_epoch: LeaderEpoch,
    /// Attribute bits (compression, control batch...). Zero for plain data today.
    pub attributes: u16,
    pub producer: Option<ProducerInfo>,
    pub first_timestamp: TimestampMs,
    pub max_timestamp: TimestampMs,
    pub records: Vec<Record>,
}

impl RecordBatch {
    /// Number of records in the batch.
    pub fn record_count(&self) -> u32 {
        self.records.len() as u32
    }

    /// Offset of the last record (equal to `base_offset` for an empty batch, which the
    /// log refuses to append).
    pub fn last_offset(&self) -> Offset {
        self.base_offset + self.records.len().saturating_sub(1) as u64
    }

    /// Offset just past the batch.
    pub fn next_offset(&self) -> Offset {
        self.base_offset + self.records.len() as u64
    }
}
