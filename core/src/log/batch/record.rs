//! The record model: records and batches as values, before encoding and after decoding.

use crate::log::codec::{Codec, CodecError};
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
    /// Attribute bits: the compression codec in the low 3 bits ([`Codec`]), the control
    /// bit ([`CONTROL_BATCH_BIT`]). Zero for plain uncompressed data.
    pub attributes: u16,
    pub producer: Option<ProducerInfo>,
    pub first_timestamp: TimestampMs,
    pub max_timestamp: TimestampMs,
    pub records: Vec<Record>,
}

/// Batch attribute bit of a control batch (as in Kafka): the leader-epoch marker a new
/// leader appends (`RecordBatch::epoch_marker`) and the commit/abort markers of
/// transactions (`RecordBatch::txn_marker`).
pub const CONTROL_BATCH_BIT: u16 = 0x20;

/// Batch attribute bit of a transactional batch (as in Kafka): its records belong to the
/// producer's open transaction and become visible to read_committed readers only when a
/// commit marker follows; a transaction's markers carry it too.
pub const TRANSACTIONAL_BATCH_BIT: u16 = 0x10;

/// The base sequence of a batch that carries its producer's identity but no sequence
/// (Kafka's `NO_SEQUENCE`, -1 on the wire): transaction markers, and the transactional
/// offsets a group coordinator writes for a producer. Only the producer epoch is checked;
/// nothing is deduplicated by sequence. Clients may not send it.
pub const NO_SEQUENCE: u32 = u32::MAX;

/// What a transaction marker says, read back from its control batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: u64,
    pub producer_epoch: u16,
    pub result: crate::txn::TxnResult,
    pub coordinator_epoch: LeaderEpoch,
}

impl Record {
    /// A record at `offset_delta` in its batch, with the batch's timestamp.
    pub fn new(offset_delta: u32, key: Option<Vec<u8>>, value: Option<Vec<u8>>) -> Self {
        Self {
            offset_delta,
            timestamp_delta: 0,
            key,
            value,
            headers: Vec::new(),
        }
    }
}

impl RecordBatch {
    /// A data batch of `(key, value)` records, all stamped `timestamp`, not yet placed in a
    /// log (base offset 0, epoch 0, no producer): the leader assigns offset and epoch on
    /// append, an idempotent producer stamps its id and sequence.
    pub fn new(
        timestamp: TimestampMs,
        records: impl IntoIterator<Item = (Option<Vec<u8>>, Option<Vec<u8>>)>,
    ) -> Self {
        let records = records.into_iter().enumerate();
        Self::of_records(
            timestamp,
            records
                .map(|(i, (key, value))| Record::new(i as u32, key, value))
                .collect(),
        )
    }

    /// A batch of records already numbered (`offset_delta` 0, 1, ...), like
    /// [`RecordBatch::new`] otherwise.
    pub fn of_records(timestamp: TimestampMs, records: Vec<Record>) -> Self {
        Self {
            base_offset: 0,
            partition_leader_epoch: 0,
            attributes: 0,
            producer: None,
            first_timestamp: timestamp,
            max_timestamp: timestamp,
            records,
        }
    }

    /// [`RecordBatch::new`] for records with values and no keys.
    pub fn from_values(timestamp: TimestampMs, values: impl IntoIterator<Item = Vec<u8>>) -> Self {
        Self::new(timestamp, values.into_iter().map(|v| (None, Some(v))))
    }

    /// The control batch a new leader appends at `base_offset` when its `epoch` starts: it
    /// gives the epoch cache its entry at once and a record of the epoch to commit.
    pub fn epoch_marker(base_offset: Offset, epoch: LeaderEpoch, timestamp: TimestampMs) -> Self {
        Self {
            attributes: CONTROL_BATCH_BIT,
            ..Self::new(timestamp, [(None, Some(b"leader-epoch".to_vec()))])
        }
        .at(base_offset)
        .in_epoch(epoch)
    }

    /// A transaction's commit or abort marker, not yet placed (Kafka's format: one control
    /// record whose key is version 0 and the control type, whose value is version 0 and
    /// the coordinator epoch, both big-endian).
    pub fn txn_marker(marker: TxnMarker, timestamp: TimestampMs) -> Self {
        let mut key = 0i16.to_be_bytes().to_vec();
        key.extend_from_slice(&marker.result.control_type().to_be_bytes());
        let mut value = 0i16.to_be_bytes().to_vec();
        value.extend_from_slice(&(marker.coordinator_epoch as i32).to_be_bytes());
        Self {
            attributes: CONTROL_BATCH_BIT | TRANSACTIONAL_BATCH_BIT,
            ..Self::new(timestamp, [(Some(key), Some(value))])
        }
        .with_producer(Some(ProducerInfo {
            producer_id: marker.producer_id,
            producer_epoch: marker.producer_epoch,
            base_sequence: NO_SEQUENCE,
        }))
    }

    /// The transaction marker this batch is, if it is one (None for data batches,
    /// leader-epoch markers and malformed control records).
    pub fn as_txn_marker(&self) -> Option<TxnMarker> {
        if !self.is_control() || !self.is_transactional() {
            return None;
        }
        let producer = self.producer?;
        let [record] = self.records.as_slice() else {
            return None;
        };
        let key = record.key.as_deref()?;
        let value = record.value.as_deref()?;
        if key.len() != 4 || value.len() != 6 || key[..2] != [0, 0] || value[..2] != [0, 0] {
            return None;
        }
        let result =
            crate::txn::TxnResult::from_control_type(i16::from_be_bytes([key[2], key[3]]))?;
        let epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
        Some(TxnMarker {
            producer_id: producer.producer_id,
            producer_epoch: producer.producer_epoch,
            result,
            coordinator_epoch: LeaderEpoch::try_from(epoch).ok()?,
        })
    }

    /// This batch marked transactional (part of its producer's open transaction).
    pub fn transactional(self) -> Self {
        Self {
            attributes: self.attributes | TRANSACTIONAL_BATCH_BIT,
            ..self
        }
    }

    /// Whether the batch belongs to a transaction (data or marker).
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BATCH_BIT != 0
    }

    /// This batch placed at `base_offset` (its records keep their deltas). A leader's log
    /// places what it appends; tests and decoders of other formats build placed batches.
    pub fn at(self, base_offset: Offset) -> Self {
        Self {
            base_offset,
            ..self
        }
    }

    /// This batch as appended by the leader of `epoch`.
    pub fn in_epoch(self, epoch: LeaderEpoch) -> Self {
        Self {
            partition_leader_epoch: epoch,
            ..self
        }
    }

    /// This batch stamped with an idempotent producer's identity (`None`: a plain producer).
    pub fn with_producer(self, producer: Option<ProducerInfo>) -> Self {
        Self { producer, ..self }
    }

    /// This batch with its timestamps spanning `first..=max` (records keep their deltas,
    /// which count from `first`).
    pub fn with_timestamps(self, first: TimestampMs, max: TimestampMs) -> Self {
        Self {
            first_timestamp: first,
            max_timestamp: max,
            ..self
        }
    }

    /// This batch stored with `codec` (its records section compressed when encoded).
    pub fn with_codec(self, codec: Codec) -> Self {
        Self {
            attributes: codec.set_in(self.attributes),
            ..self
        }
    }

    /// The codec the batch is (to be) stored with; `Unknown` for codec bits 5-7.
    pub fn codec(&self) -> Result<Codec, CodecError> {
        Codec::of_attributes(self.attributes)
    }

    /// Whether this is a control batch (a leader-epoch marker), not application data.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BATCH_BIT != 0
    }

    /// Every record with its absolute offset, control records included.
    pub fn iter_offsets(&self) -> impl Iterator<Item = (Offset, &Record)> + '_ {
        self.offsets_at(self.base_offset)
    }

    /// The records with the offsets they take when the batch is placed at `base_offset`
    /// (as [`Self::at`] then [`Self::iter_offsets`], without the copy).
    pub fn offsets_at(&self, base_offset: Offset) -> impl Iterator<Item = (Offset, &Record)> + '_ {
        self.records
            .iter()
            .map(move |r| (base_offset + u64::from(r.offset_delta), r))
    }

    /// The application records with their offsets: nothing for a control batch.
    pub fn data_records(&self) -> impl Iterator<Item = (Offset, &Record)> + '_ {
        let skip = self.is_control();
        self.iter_offsets().filter(move |_| !skip)
    }

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
