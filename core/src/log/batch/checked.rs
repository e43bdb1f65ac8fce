//! The one check an encoded batch passes before a log appends its bytes
//! ([`CheckedBatch`]), and a leader's placing of a checked batch at the log end.

use super::encoded::exactly_one;
use super::header::{
    verify_crc_parsed, BatchHeader, DecodeError, BASE_OFFSET_POS, BATCH_HEADER_LEN, CRC_POS,
    CRC_START, EPOCH_POS, MAX_TIMESTAMP_POS,
};
use super::walk::walk_batch;
use crate::log::codec::CODEC_MASK;
use crate::log::crc::{crc32, shift_difference};
use crate::types::{LeaderEpoch, Offset, TimestampMs};

/// One encoded batch, exactly filling its bytes, that passed the check a log makes before
/// appending bytes verbatim: its CRC, then every record ([`walk_batch`]; decompressed if
/// compressed). Only [`CheckedBatch::check`] makes one, so whatever takes a
/// `CheckedBatch` needs no check of its own: a produced batch is checked once, where the
/// leader's replica takes it on, and the log places and writes it without looking again.
///
/// `B` holds the bytes: `&mut [u8]` for a produced batch a leader places in place
/// ([`CheckedBatch::place`]), `&[u8]` for bytes appended as they are.
#[derive(Debug)]
pub struct CheckedBatch<B> {
    bytes: B,
    header: BatchHeader,
    /// The largest record timestamp, or the first timestamp if larger: what a leader
    /// stamps as the batch's max timestamp.
    max_record_timestamp: TimestampMs,
    /// The records whose offset delta is not their index, as (byte position of the delta,
    /// index): none in a batch as Kafka's producers write them.
    sparse: Vec<(usize, u32)>,
}

impl<B: AsRef<[u8]>> CheckedBatch<B> {
    /// `bytes` as one batch, once its CRC and every record check out.
    pub fn check(bytes: B) -> Result<Self, DecodeError> {
        let header = BatchHeader::parse(bytes.as_ref())?;
        Self::check_parsed(bytes, header)
    }

    /// [`Self::check`] of bytes whose fixed header, `header`, was already parsed from
    /// them (and is trusted only once this passes): the leader's replica reads a produced
    /// batch's header to decide what to do with it, and the header is not read again.
    pub fn check_parsed(bytes: B, header: BatchHeader) -> Result<Self, DecodeError> {
        let buf = bytes.as_ref();
        verify_crc_parsed(buf, &header)?;
        exactly_one(buf, &header)?;
        let first = header.first_timestamp;
        let mut max_record_timestamp = first;
        let mut sparse = Vec::new();
        let mut next = 0u32;
        walk_batch(buf, &header, |r| {
            let ts = first.saturating_add(r.timestamp_delta);
            max_record_timestamp = max_record_timestamp.max(ts);
            if r.offset_delta != next {
                sparse.push((r.pos + 4, next));
            }
            next = next.wrapping_add(1);
        })?;
        debug_assert_eq!(next, header.record_count, "the walk saw every record");
        Ok(Self {
            bytes,
            header,
            max_record_timestamp,
            sparse,
        })
    }

    /// The batch's fixed header (its fields are the batch's: the CRC held).
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    /// Whether the offset deltas are 0, 1, 2, ...: a follower's log requires it, a
    /// leader's renumbers them.
    pub fn is_dense(&self) -> bool {
        self.sparse.is_empty()
    }
}

/// From how many bytes of records on [`CheckedBatch::place`] shifts the old CRC
/// ([`shift_difference`]: ~1,000 instructions whatever the size) instead of hashing the
/// records again (~200 instructions for a typical batch of a few hundred bytes).
pub(super) const CRC_SHIFT_MIN: usize = 4096;

impl<'a> CheckedBatch<&'a mut [u8]> {
    /// Places the batch the way a leader's log places a [`super::RecordBatch`] it
    /// appends: sets the base offset, the leader epoch, dense offset deltas and the max
    /// timestamp (the largest record timestamp) in place and the CRC to match. The bytes
    /// are then exactly what encoding the decoded batch, so placed, would give. A
    /// compressed batch's deltas must already be dense (renumbering would mean
    /// compressing again; Kafka's producers write them dense): otherwise it is refused,
    /// its bytes untouched.
    pub fn place(
        self,
        base_offset: Offset,
        epoch: LeaderEpoch,
    ) -> Result<CheckedBatch<&'a [u8]>, DecodeError> {
        let Self {
            bytes: buf,
            header: h,
            max_record_timestamp: max_ts,
            sparse,
        } = self;
        if !sparse.is_empty() && h.attributes & CODEC_MASK != 0 {
            return Err(DecodeError::Malformed(
                "a compressed batch's offset deltas must be 0, 1, 2, ...".to_string(),
            ));
        }
        let records_len = buf.len() - BATCH_HEADER_LEN;
        let old_fixed = (records_len >= CRC_SHIFT_MIN && sparse.is_empty())
            .then(|| crc32(&buf[CRC_START..BATCH_HEADER_LEN]));
        buf[BASE_OFFSET_POS..BASE_OFFSET_POS + 8].copy_from_slice(&base_offset.to_be_bytes());
        buf[EPOCH_POS..EPOCH_POS + 4].copy_from_slice(&epoch.to_be_bytes());
        buf[MAX_TIMESTAMP_POS..MAX_TIMESTAMP_POS + 8].copy_from_slice(&max_ts.to_be_bytes());
        for &(pos, delta) in &sparse {
            buf[pos..pos + 4].copy_from_slice(&delta.to_be_bytes());
        }
        let crc = match old_fixed {
            // Only the fixed header changed: the new CRC is the old one plus what the
            // header's change becomes past the records.
            Some(old_fixed) => {
                let new_fixed = crc32(&buf[CRC_START..BATCH_HEADER_LEN]);
                h.crc ^ shift_difference(old_fixed ^ new_fixed, records_len)
            }
            None => crc32(&buf[CRC_START..]),
        };
        buf[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
        let header = BatchHeader {
            base_offset,
            crc,
            partition_leader_epoch: epoch,
            max_timestamp: max_ts,
            ..h
        };
        let bytes: &'a [u8] = buf;
        debug_assert_eq!(crc32(&bytes[CRC_START..]), crc, "the CRC matches the bytes");
        debug_assert_eq!(BatchHeader::parse(bytes).as_ref(), Ok(&header));
        Ok(CheckedBatch {
            bytes,
            header,
            max_record_timestamp: max_ts,
            sparse: Vec::new(),
        })
    }
}

/// [`CheckedBatch::check`] of `buf`: its header, and whether its offset deltas are dense.
pub fn check_encoded(buf: &[u8]) -> Result<(BatchHeader, bool), DecodeError> {
    CheckedBatch::check(buf).map(|c| (c.header, c.is_dense()))
}

/// [`CheckedBatch::check`] then [`CheckedBatch::place`] of `buf`: the placed header.
pub fn place_encoded(
    buf: &mut [u8],
    base_offset: Offset,
    epoch: LeaderEpoch,
) -> Result<BatchHeader, DecodeError> {
    let placed = CheckedBatch::check(buf)?.place(base_offset, epoch)?;
    Ok(placed.header)
}
