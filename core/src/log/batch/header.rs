//! The wire header of a batch: its layout, the offsets of its fields, the parse of the
//! fixed header and the CRC check of a whole batch; the errors decoding and encoding name.

use super::cursor::Cursor;
use super::record::ProducerInfo;
use crate::log::codec::CodecError;
use crate::log::crc::crc32;
use crate::types::{LeaderEpoch, Offset, TimestampMs};
use thiserror::Error;

// The layout (format version 1, all integers big-endian; docs/format.md). Unlike Kafka,
// the leader epoch sits after the CRC so that a flipped bit in it is caught; the two
// fields before the CRC (base offset, length) are checked by the log against the
// expected offset and the file length instead.

/// Byte position of `base_offset` (u64).
pub(super) const BASE_OFFSET_POS: usize = 0;
/// Byte position of `batch_length` (u32): the bytes after this field, from byte 12 on.
pub(super) const LENGTH_POS: usize = 8;
/// Byte position of `magic` (u8): the format version, [`BATCH_MAGIC`].
pub(super) const MAGIC_POS: usize = 12;
/// Byte position of the CRC field (u32): CRC-32 of bytes [`CRC_START`].. to the end.
pub const CRC_POS: usize = 13;
/// First byte covered by the CRC: `partition_leader_epoch` (u32).
pub const CRC_START: usize = 17;
/// Byte position of `partition_leader_epoch` (u32).
pub(super) const EPOCH_POS: usize = CRC_START;
/// Byte position of `attributes` (u16).
pub(super) const ATTRIBUTES_POS: usize = 21;
/// Byte position of `first_timestamp` (i64).
pub(super) const FIRST_TIMESTAMP_POS: usize = 23;
/// Byte position of `max_timestamp` (i64).
pub(super) const MAX_TIMESTAMP_POS: usize = 31;
/// Byte position of `producer_id` (u64; [`NO_PRODUCER`] for a plain producer).
pub(super) const PRODUCER_ID_POS: usize = 39;
/// Byte position of `producer_epoch` (u16).
pub(super) const PRODUCER_EPOCH_POS: usize = 47;
/// Byte position of `base_sequence` (u32).
pub(super) const BASE_SEQUENCE_POS: usize = 49;
/// Byte position of `record_count` (u32); the records follow the fixed header.
pub(super) const RECORD_COUNT_POS: usize = 53;
/// Size of the fixed batch header.
pub const BATCH_HEADER_LEN: usize = 57;
/// Bytes before the `batch_length` field's coverage starts (base offset + length).
pub const LOG_OVERHEAD: usize = 12;
/// Current batch format version, stored in the `magic` byte.
pub const BATCH_MAGIC: u8 = 1;
/// The producer id that means "no producer".
pub(super) const NO_PRODUCER: u64 = u64::MAX;

// A record: length u32 (of what follows), offset_delta u32, timestamp_delta i64, key and
// value (each a length i32, -1 for none, then the bytes), header count u32, then each
// header as key length u32, key (UTF-8), value length u32, value.

/// Smallest possible encoded record (no key, no value, no headers).
pub const MIN_RECORD_LEN: usize = 4 + 4 + 8 + 4 + 4 + 4;

/// Why a batch could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    #[error("batch too large to encode: {0} bytes")]
    TooLarge(usize),
    #[error("cannot compress the batch: {0}")]
    Codec(CodecError),
    #[error("producer id {0:#x} is reserved to mean 'no producer'")]
    ReservedProducerId(u64),
}

/// Why bytes could not be decoded as a batch. Every variant names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("truncated: {what} needs {need} bytes at byte {pos}, only {have} available")]
    Truncated {
        what: &'static str,
        pos: usize,
        need: usize,
        have: usize,
    },
    #[error("unsupported batch format version {0} (expected {BATCH_MAGIC})")]
    UnsupportedVersion(u8),
    #[error("batch length {0} is smaller than the fixed header")]
    LengthTooSmall(u32),
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("malformed batch: {0}")]
    Malformed(String),
    /// A compressed batch whose codec is unknown or whose records do not decompress
    /// (a CRC-valid batch can still hold a damaged payload if it was written so).
    #[error("compressed records: {0}")]
    Codec(CodecError),
}

/// The fixed header of an encoded batch. Fields after the CRC are only trustworthy once
/// [`verify_crc`] has passed on the whole batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: Offset,
    pub batch_length: u32,
    pub magic: u8,
    pub crc: u32,
    pub partition_leader_epoch: LeaderEpoch,
    pub attributes: u16,
    pub first_timestamp: TimestampMs,
    pub max_timestamp: TimestampMs,
    pub producer: Option<ProducerInfo>,
    pub record_count: u32,
}

impl BatchHeader {
    /// Parses the fixed header at the start of `buf` (which may hold more than one batch).
    /// Checks the version and that the length covers the header; not the CRC.
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<Self, DecodeError> {
        match buf.first_chunk::<BATCH_HEADER_LEN>() {
            Some(h) => Self::parse_whole(h),
            None => Self::parse_short(buf),
        }
    }

    /// [`Self::parse`] of a buffer shorter than a header, field by field: the error names
    /// the first field cut short (or an earlier one that is wrong).
    #[cold]
    #[inline(never)]
    fn parse_short(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut c = Cursor::new(buf);
        let base_offset = c.u64("base_offset")?;
        let batch_length = c.u32("batch_length")?;
        let magic = c.u8("magic")?;
        if magic != BATCH_MAGIC {
            return Err(DecodeError::UnsupportedVersion(magic));
        }
        if (batch_length as usize) < BATCH_HEADER_LEN - LOG_OVERHEAD {
            return Err(DecodeError::LengthTooSmall(batch_length));
        }
        let crc = c.u32("crc")?;
        let partition_leader_epoch = c.u32("partition_leader_epoch")?;
        let attributes = c.u16("attributes")?;
        let first_timestamp = c.i64("first_timestamp")?;
        let max_timestamp = c.i64("max_timestamp")?;
        let producer_id = c.u64("producer_id")?;
        let producer_epoch = c.u16("producer_epoch")?;
        let base_sequence = c.u32("base_sequence")?;
        let record_count = c.u32("record_count")?;
        let producer = (producer_id != NO_PRODUCER).then_some(ProducerInfo {
            producer_id,
            producer_epoch,
            base_sequence,
        });
        Ok(Self {
            base_offset,
            batch_length,
            magic,
            crc,
            partition_leader_epoch,
            attributes,
            first_timestamp,
            max_timestamp,
            producer,
            record_count,
        })
    }

    /// [`Self::parse`] of a buffer that holds the whole header: fields read at their fixed
    /// places, with the same checks in the same order (no field can be truncated). The
    /// cursor's per-field calls were ~1/3 of a log read's instructions.
    #[inline]
    fn parse_whole(h: &[u8; BATCH_HEADER_LEN]) -> Result<Self, DecodeError> {
        fn be<const N: usize>(h: &[u8; BATCH_HEADER_LEN], at: usize) -> [u8; N] {
            let mut a = [0u8; N];
            a.copy_from_slice(&h[at..at + N]);
            a
        }
        let base_offset = u64::from_be_bytes(be(h, BASE_OFFSET_POS));
        let batch_length = u32::from_be_bytes(be(h, LENGTH_POS));
        let magic = h[MAGIC_POS];
        if magic != BATCH_MAGIC {
            return Err(DecodeError::UnsupportedVersion(magic));
        }
        if (batch_length as usize) < BATCH_HEADER_LEN - LOG_OVERHEAD {
            return Err(DecodeError::LengthTooSmall(batch_length));
        }
        let producer_id = u64::from_be_bytes(be(h, PRODUCER_ID_POS));
        let producer = (producer_id != NO_PRODUCER).then(|| ProducerInfo {
            producer_id,
            producer_epoch: u16::from_be_bytes(be(h, PRODUCER_EPOCH_POS)),
            base_sequence: u32::from_be_bytes(be(h, BASE_SEQUENCE_POS)),
        });
        Ok(Self {
            base_offset,
            batch_length,
            magic,
            crc: u32::from_be_bytes(be(h, CRC_POS)),
            partition_leader_epoch: u32::from_be_bytes(be(h, EPOCH_POS)),
            attributes: u16::from_be_bytes(be(h, ATTRIBUTES_POS)),
            first_timestamp: i64::from_be_bytes(be(h, FIRST_TIMESTAMP_POS)),
            max_timestamp: i64::from_be_bytes(be(h, MAX_TIMESTAMP_POS)),
            producer,
            record_count: u32::from_be_bytes(be(h, RECORD_COUNT_POS)),
        })
    }

    /// Total encoded size of the batch, header included.
    pub fn total_len(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }

    /// Offset just past the batch (saturating: a corrupt count cannot overflow).
    pub fn next_offset(&self) -> Offset {
        self.base_offset.saturating_add(self.record_count as u64)
    }

    /// The whole batch (header included) at the start of `buf`, or `Truncated` when `buf`
    /// ends before it does.
    pub fn whole<'a>(&self, buf: &'a [u8]) -> Result<&'a [u8], DecodeError> {
        let total = self.total_len();
        buf.get(..total).ok_or(DecodeError::Truncated {
            what: "batch body",
            pos: 0,
            need: total,
            have: buf.len(),
        })
    }
}

/// Checks the CRC of one whole encoded batch (`buf` must hold exactly or at least the batch).
pub fn verify_crc(buf: &[u8]) -> Result<BatchHeader, DecodeError> {
    let h = BatchHeader::parse(buf)?;
    verify_crc_parsed(buf, &h)?;
    Ok(h)
}

/// [`verify_crc`] for a batch whose header `h` was already parsed from `buf`, so that a
/// header read once (as the leader's replica reads a produced batch's) is not read again.
pub fn verify_crc_parsed(buf: &[u8], h: &BatchHeader) -> Result<(), DecodeError> {
    debug_assert_eq!(BatchHeader::parse(buf).as_ref(), Ok(h), "h is buf's header");
    let computed = crc32(&h.whole(buf)?[CRC_START..]);
    if computed != h.crc {
        crate::probe!(LogCrcMismatch);
        return Err(DecodeError::CrcMismatch {
            stored: h.crc,
            computed,
        });
    }
    Ok(())
}
