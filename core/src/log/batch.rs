//! Record batches: the unit of append, replication and fetch.
//! The on-disk/wire encoding is documented in `docs/format.md`.

use super::codec::{Codec, CodecError, CODEC_MASK, MAX_DECOMPRESSED_LEN};
use crate::types::{LeaderEpoch, Offset, TimestampMs};
use serde::{Deserialize, Serialize};
use std::fmt;

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

/// Batch attribute bit of a control batch (as in Kafka). The only control batch Skein
/// writes is the leader-epoch marker a new leader appends (`RecordBatch::epoch_marker`).
pub const CONTROL_BATCH_BIT: u16 = 0x20;

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

// ---------------------------------------------------------------------------------------
// Encoding. Layout (format version 1, all integers big-endian), see docs/format.md:
//
//   0  base_offset            u64
//   8  batch_length           u32   bytes after this field (from byte 12 to the end)
//  12  magic                  u8    format version, BATCH_MAGIC
//  13  crc                    u32   CRC-32 (crc32fast) of bytes 17..end
//  17  partition_leader_epoch u32
//  21  attributes             u16
//  23  first_timestamp        i64
//  31  max_timestamp          i64
//  39  producer_id            u64   u64::MAX = no producer
//  47  producer_epoch         u16
//  49  base_sequence          u32
//  53  record_count           u32
//  57  records...
//
// Unlike Kafka, the leader epoch sits after the CRC so that a flipped bit in it is caught;
// the two fields before the CRC (base offset, length) are checked by the log against the
// expected offset and the file length instead.
// ---------------------------------------------------------------------------------------

use thiserror::Error;

/// Current batch format version, stored in the `magic` byte.
pub const BATCH_MAGIC: u8 = 1;
/// Bytes before the `batch_length` field's coverage starts (base offset + length).
pub const LOG_OVERHEAD: usize = 12;
/// Size of the fixed batch header.
pub const BATCH_HEADER_LEN: usize = 57;
/// Byte position of the CRC field.
pub const CRC_POS: usize = 13;
/// First byte covered by the CRC (the leader epoch field).
pub const CRC_START: usize = 17;
/// Byte position of the max timestamp field.
const MAX_TIMESTAMP_POS: usize = 31;
/// Smallest possible encoded record (no key, no value, no headers).
pub const MIN_RECORD_LEN: usize = 4 + 4 + 8 + 4 + 4 + 4;
const NO_PRODUCER: u64 = u64::MAX;

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
        let base_offset = u64::from_be_bytes(be(h, 0));
        let batch_length = u32::from_be_bytes(be(h, 8));
        let magic = h[12];
        if magic != BATCH_MAGIC {
            return Err(DecodeError::UnsupportedVersion(magic));
        }
        if (batch_length as usize) < BATCH_HEADER_LEN - LOG_OVERHEAD {
            return Err(DecodeError::LengthTooSmall(batch_length));
        }
        let producer_id = u64::from_be_bytes(be(h, 39));
        let producer = (producer_id != NO_PRODUCER).then(|| ProducerInfo {
            producer_id,
            producer_epoch: u16::from_be_bytes(be(h, 47)),
            base_sequence: u32::from_be_bytes(be(h, 49)),
        });
        Ok(Self {
            base_offset,
            batch_length,
            magic,
            crc: u32::from_be_bytes(be(h, 13)),
            partition_leader_epoch: u32::from_be_bytes(be(h, 17)),
            attributes: u16::from_be_bytes(be(h, 21)),
            first_timestamp: i64::from_be_bytes(be(h, 23)),
            max_timestamp: i64::from_be_bytes(be(h, 31)),
            producer,
            record_count: u32::from_be_bytes(be(h, 53)),
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
    let computed = crc32fast::hash(&h.whole(buf)?[CRC_START..]);
    if computed != h.crc {
        crate::probe!(LogCrcMismatch);
        return Err(DecodeError::CrcMismatch {
            stored: h.crc,
            computed,
        });
    }
    Ok(h)
}

fn record_len(r: &Record) -> usize {
    MIN_RECORD_LEN
        + r.key.as_ref().map_or(0, |k| k.len())
        + r.value.as_ref().map_or(0, |v| v.len())
        + r.headers
            .iter()
            .map(|h| 8 + h.key.len() + h.value.len())
            .sum::<usize>()
}

impl RecordBatch {
    /// Size of the encoded batch in bytes, uncompressed: exact for a batch without a
    /// codec; a compressed batch's size is only known once compressed (`encode`).
    pub fn encoded_len(&self) -> usize {
        BATCH_HEADER_LEN + self.records.iter().map(record_len).sum::<usize>()
    }

    /// Encodes the batch (format version [`BATCH_MAGIC`]).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Appends the encoded batch to `out`: its records section compressed with the
    /// batch's codec, if it has one.
    #[inline]
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.attributes & CODEC_MASK != 0 {
            return self.encode_compressed_into(out);
        }
        self.encode_plain_into(out)
    }

    /// [`Self::encode_into`] for a batch with a codec: encoded uncompressed (the header
    /// already naming the codec), then the records section compressed behind the same
    /// header, and the length and CRC set for the stored bytes.
    #[inline(never)]
    fn encode_compressed_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let codec = self.codec().map_err(EncodeError::Codec)?;
        let mut plain = Vec::with_capacity(self.encoded_len());
        self.encode_plain_into(&mut plain)?;
        let start = out.len();
        out.extend_from_slice(&plain[..BATCH_HEADER_LEN]);
        codec.compress_into(&plain[BATCH_HEADER_LEN..], out);
        let total = out.len() - start;
        if total - LOG_OVERHEAD > u32::MAX as usize {
            out.truncate(start);
            return Err(EncodeError::TooLarge(total));
        }
        out[start + 8..start + LOG_OVERHEAD]
            .copy_from_slice(&((total - LOG_OVERHEAD) as u32).to_be_bytes());
        let crc = crc32fast::hash(&out[start + CRC_START..]);
        out[start + CRC_POS..start + CRC_START].copy_from_slice(&crc.to_be_bytes());
        Ok(())
    }

    /// The batch encoded with its records section as it is (whatever the codec bits say).
    #[inline]
    fn encode_plain_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let total = self.encoded_len();
        if total - LOG_OVERHEAD > u32::MAX as usize || self.records.len() > u32::MAX as usize {
            return Err(EncodeError::TooLarge(total));
        }
        for r in &self.records {
            if record_len(r) - 4 > i32::MAX as usize {
                return Err(EncodeError::TooLarge(total));
            }
        }
        let (pid, pepoch, pseq) = match self.producer {
            Some(p) if p.producer_id == NO_PRODUCER => {
                return Err(EncodeError::ReservedProducerId(p.producer_id))
            }
            Some(p) => (p.producer_id, p.producer_epoch, p.base_sequence),
            None => (NO_PRODUCER, u16::MAX, u32::MAX),
        };
        let start = out.len();
        out.reserve(total);
        // The fixed header is laid out on the stack and appended once: field by field, each
        // append checked the capacity and moved the length again.
        let mut h = [0u8; BATCH_HEADER_LEN];
        let mut put = |at: usize, b: &[u8]| h[at..at + b.len()].copy_from_slice(b);
        put(0, &self.base_offset.to_be_bytes());
        put(8, &((total - LOG_OVERHEAD) as u32).to_be_bytes());
        put(12, &[BATCH_MAGIC]);
        // CRC_POS..CRC_START stays 0 until the CRC is filled in below.
        put(CRC_START, &self.partition_leader_epoch.to_be_bytes());
        put(21, &self.attributes.to_be_bytes());
        put(23, &self.first_timestamp.to_be_bytes());
        put(31, &self.max_timestamp.to_be_bytes());
        put(39, &pid.to_be_bytes());
        put(47, &pepoch.to_be_bytes());
        put(49, &pseq.to_be_bytes());
        put(53, &(self.records.len() as u32).to_be_bytes());
        out.extend_from_slice(&h);
        for r in &self.records {
            let mut fixed = [0u8; 16];
            fixed[..4].copy_from_slice(&((record_len(r) - 4) as u32).to_be_bytes());
            fixed[4..8].copy_from_slice(&r.offset_delta.to_be_bytes());
            fixed[8..].copy_from_slice(&r.timestamp_delta.to_be_bytes());
            out.extend_from_slice(&fixed);
            put_opt_bytes(out, r.key.as_deref());
            put_opt_bytes(out, r.value.as_deref());
            out.extend_from_slice(&(r.headers.len() as u32).to_be_bytes());
            for h in &r.headers {
                out.extend_from_slice(&(h.key.len() as u32).to_be_bytes());
                out.extend_from_slice(h.key.as_bytes());
                out.extend_from_slice(&(h.value.len() as u32).to_be_bytes());
                out.extend_from_slice(&h.value);
            }
        }
        debug_assert_eq!(out.len() - start, total);
        let crc = crc32fast::hash(&out[start + CRC_START..]);
        out[start + CRC_POS..start + CRC_START].copy_from_slice(&crc.to_be_bytes());
        Ok(())
    }

    /// Decodes one batch from the start of `buf`, returning it and the bytes it used.
    /// Never panics: any malformed input gives a [`DecodeError`].
    pub fn decode(buf: &[u8]) -> Result<(RecordBatch, usize), DecodeError> {
        let h = verify_crc(buf)?;
        Self::decode_verified(buf, &h)
    }

    /// Decodes a batch whose CRC [`verify_crc`] already checked (returning `h`), without
    /// computing it again.
    pub fn decode_verified(
        buf: &[u8],
        h: &BatchHeader,
    ) -> Result<(RecordBatch, usize), DecodeError> {
        if h.attributes & CODEC_MASK != 0 {
            return Self::decode_compressed(buf, h);
        }
        match decode_fast(buf, h) {
            Some(records) => Ok((Self::with_header(h, records), h.total_len())),
            // Something is off (or unusual): the full walk finds the same batch or names
            // the error.
            None => Self::decode_walked(buf, h),
        }
    }

    /// [`Self::decode_verified`] of a compressed batch: its records section decompressed
    /// behind its header, then decoded as an uncompressed batch would be. The batch keeps
    /// its codec (attributes), so encoding it again stores it compressed again.
    #[inline(never)]
    fn decode_compressed(buf: &[u8], h: &BatchHeader) -> Result<(RecordBatch, usize), DecodeError> {
        let (plain, ph) = decompressed(buf, h)?;
        let records = match decode_fast(&plain, &ph) {
            Some(records) => records,
            None => Self::decode_walked(&plain, &ph)?.0.records,
        };
        Ok((Self::with_header(h, records), h.total_len()))
    }

    fn with_header(h: &BatchHeader, records: Vec<Record>) -> RecordBatch {
        RecordBatch {
            base_offset: h.base_offset,
            partition_leader_epoch: h.partition_leader_epoch,
            attributes: h.attributes,
            producer: h.producer,
            first_timestamp: h.first_timestamp,
            max_timestamp: h.max_timestamp,
            records,
        }
    }

    /// [`Self::decode_verified`] by [`walk_records`], which names what is wrong with a
    /// batch that does not decode.
    fn decode_walked(buf: &[u8], h: &BatchHeader) -> Result<(RecordBatch, usize), DecodeError> {
        // The count is checked against the length by the walk: bound it before trusting it.
        let fit = buf.len().min(h.total_len()) / MIN_RECORD_LEN;
        let mut records = Vec::with_capacity((h.record_count as usize).min(fit));
        let total = walk_records(buf, h, |r| {
            records.push(Record {
                offset_delta: r.offset_delta,
                timestamp_delta: r.timestamp_delta,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
                headers: r
                    .headers()
                    .map(|(key, value)| Header {
                        key: key.to_string(),
                        value: value.to_vec(),
                    })
                    .collect(),
            })
        })?;
        Ok((Self::with_header(h, records), total))
    }

    /// Decodes a buffer holding zero or more whole batches back to back.
    pub fn decode_all(mut buf: &[u8]) -> Result<Vec<RecordBatch>, DecodeError> {
        let mut out = Vec::new();
        while !buf.is_empty() {
            let (b, n) = Self::decode(buf)?;
            out.push(b);
            buf = &buf[n..];
        }
        Ok(out)
    }
}

/// The records of the batch at the start of `buf` whose header is `h`, when it is well
/// formed: `None` whenever anything is off (or out of the ordinary), for
/// [`walk_records`] to name the problem. It accepts only what `walk_records` accepts, with
/// the same records, in one pass with no error bookkeeping: reading each record within its
/// length field's bounds and requiring it to fill them exactly is the walk's check that
/// the length matches the fields. A consumer's fetch decodes every batch it returns, and
/// the walk's cursor (an error per field), `RecordRef`s and second header pass were most
/// of the decode's instructions.
fn decode_fast(buf: &[u8], h: &BatchHeader) -> Option<Vec<Record>> {
    let total = h.total_len();
    let count = h.record_count as usize;
    h.base_offset.checked_add(count as u64)?;
    let body = buf.get(BATCH_HEADER_LEN..total)?;
    if count > body.len() / MIN_RECORD_LEN {
        return None;
    }
    let mut rest = body;
    let mut records = Vec::with_capacity(count);
    for _ in 0..count {
        let len = be_u32(&mut rest)? as usize;
        let mut rec = take(&mut rest, len)?;
        let offset_delta = be_u32(&mut rec)?;
        let (ts, tail) = rec.split_first_chunk::<8>()?;
        rec = tail;
        let key = opt_bytes(&mut rec)?;
        let value = opt_bytes(&mut rec)?;
        let header_count = be_u32(&mut rec)? as usize;
        let mut headers = Vec::new();
        if header_count > 0 {
            if header_count > rec.len() / 8 {
                return None;
            }
            headers.reserve_exact(header_count);
            for _ in 0..header_count {
                let klen = be_u32(&mut rec)? as usize;
                let key = std::str::from_utf8(take(&mut rec, klen)?).ok()?;
                let vlen = be_u32(&mut rec)? as usize;
                let value = take(&mut rec, vlen)?;
                headers.push(Header {
                    key: key.to_string(),
                    value: value.to_vec(),
                });
            }
        }
        if !rec.is_empty() {
            return None;
        }
        records.push(Record {
            offset_delta,
            timestamp_delta: i64::from_be_bytes(*ts),
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers,
        });
    }
    rest.is_empty().then_some(records)
}

/// `decode_fast`'s readers: the next bytes of `s`, consumed, or `None` if `s` is short.
#[inline(always)]
fn take<'a>(s: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if n > s.len() {
        return None;
    }
    let (a, b) = s.split_at(n);
    *s = b;
    Some(a)
}

#[inline(always)]
fn be_u32(s: &mut &[u8]) -> Option<u32> {
    let (a, b) = s.split_first_chunk::<4>()?;
    *s = b;
    Some(u32::from_be_bytes(*a))
}

/// A key or value: length -1 is none, other negative lengths are `None` (malformed).
#[inline(always)]
fn opt_bytes<'a>(s: &mut &'a [u8]) -> Option<Option<&'a [u8]>> {
    match be_u32(s)? as i32 {
        -1 => Some(None),
        n if n < 0 => None,
        n => take(s, n as usize).map(Some),
    }
}

/// One record of an encoded batch, borrowed from its bytes, as [`walk_records`] checked it.
pub struct RecordRef<'a> {
    /// Byte position of the record (its length field) in the batch.
    pub pos: usize,
    pub offset_delta: u32,
    pub timestamp_delta: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    header_count: usize,
    /// The encoded headers (already checked: lengths in bounds, keys UTF-8).
    header_bytes: &'a [u8],
}

impl<'a> RecordRef<'a> {
    /// The record's headers, (key, value) in order.
    pub fn headers(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> + 'a {
        let mut c = Cursor::new(self.header_bytes);
        (0..self.header_count).map(move |_| {
            let checked = "checked by walk_records";
            let klen = c.u32("header key length").expect(checked) as usize;
            let key = std::str::from_utf8(c.take(klen, "header key").expect(checked));
            let vlen = c.u32("header value length").expect(checked) as usize;
            (
                key.expect(checked),
                c.take(vlen, "header value").expect(checked),
            )
        })
    }
}

/// Walks the records of the batch at the start of `buf`, whose header is `h` (its CRC is
/// not checked here), handing each to `visit` without copying it. Makes every check
/// decoding makes, so a batch that passes [`verify_crc`] and this decodes. Returns the
/// batch's total length.
pub fn walk_records<'a>(
    buf: &'a [u8],
    h: &BatchHeader,
    mut visit: impl FnMut(RecordRef<'a>),
) -> Result<usize, DecodeError> {
    let body = h.whole(buf)?;
    let total = body.len();
    if h.base_offset.checked_add(h.record_count as u64).is_none() {
        return Err(DecodeError::Malformed(format!(
            "base offset {} + record count {} overflows",
            h.base_offset, h.record_count
        )));
    }
    let mut c = Cursor {
        buf: body,
        pos: BATCH_HEADER_LEN,
    };
    let max_records = (total - BATCH_HEADER_LEN) / MIN_RECORD_LEN;
    if h.record_count as usize > max_records {
        return Err(DecodeError::Malformed(format!(
            "record count {} cannot fit in {} bytes",
            h.record_count,
            total - BATCH_HEADER_LEN
        )));
    }
    for i in 0..h.record_count {
        let pos = c.pos;
        let len = c.u32("record_length")? as usize;
        let rec_start = c.pos;
        let offset_delta = c.u32("offset_delta")?;
        let timestamp_delta = c.i64("timestamp_delta")?;
        let key = c.opt_bytes("key")?;
        let value = c.opt_bytes("value")?;
        let header_count = c.u32("header_count")? as usize;
        if header_count > c.remaining() / 8 {
            return Err(DecodeError::Malformed(format!(
                "record {i}: header count {header_count} cannot fit in the batch"
            )));
        }
        let headers_start = c.pos;
        for _ in 0..header_count {
            let klen = c.u32("header key length")? as usize;
            let kb = c.take(klen, "header key")?;
            if std::str::from_utf8(kb).is_err() {
                return Err(DecodeError::Malformed(format!(
                    "record {i}: header key is not UTF-8"
                )));
            }
            let vlen = c.u32("header value length")? as usize;
            c.take(vlen, "header value")?;
        }
        if c.pos - rec_start != len {
            return Err(DecodeError::Malformed(format!(
                "record {i}: length field says {len} bytes, fields use {}",
                c.pos - rec_start
            )));
        }
        visit(RecordRef {
            pos,
            offset_delta,
            timestamp_delta,
            key,
            value,
            header_count,
            header_bytes: &body[headers_start..c.pos],
        });
    }
    if c.pos != total {
        return Err(DecodeError::Malformed(format!(
            "{} trailing bytes after the last record",
            total - c.pos
        )));
    }
    Ok(total)
}

/// The batch at the start of `buf` (header `h`) with its records section decompressed:
/// the same fixed header (its length field set for the decompressed records) followed by
/// the records, and that header. Only for a batch with a codec.
fn decompressed(buf: &[u8], h: &BatchHeader) -> Result<(Vec<u8>, BatchHeader), DecodeError> {
    crate::probe!(LogDecompressed);
    let whole = h.whole(buf)?;
    let codec = Codec::of_attributes(h.attributes).map_err(DecodeError::Codec)?;
    let guess = (4 * whole.len()).min(MAX_DECOMPRESSED_LEN);
    let mut plain = Vec::with_capacity(BATCH_HEADER_LEN + guess);
    plain.extend_from_slice(&whole[..BATCH_HEADER_LEN]);
    codec
        .decompress_into(&whole[BATCH_HEADER_LEN..], &mut plain, MAX_DECOMPRESSED_LEN)
        .map_err(DecodeError::Codec)?;
    let batch_length = (plain.len() - LOG_OVERHEAD) as u32;
    plain[8..LOG_OVERHEAD].copy_from_slice(&batch_length.to_be_bytes());
    Ok((plain, BatchHeader { batch_length, ..*h }))
}

/// [`walk_records`] of any batch: a compressed one's records are walked decompressed
/// (their `pos` then counts in the decompressed batch). Returns the stored batch's length.
pub fn walk_batch(
    buf: &[u8],
    h: &BatchHeader,
    mut visit: impl FnMut(RecordRef<'_>),
) -> Result<usize, DecodeError> {
    if h.attributes & CODEC_MASK == 0 {
        return walk_records(buf, h, visit);
    }
    let (plain, ph) = decompressed(buf, h)?;
    walk_records(&plain, &ph, &mut visit)?;
    Ok(h.total_len())
}

/// One encoded batch, filling `buf` exactly, checked as a log must before appending it
/// verbatim: its CRC and every record ([`walk_batch`], decompressed if compressed). Also
/// says whether its offset deltas are dense (0, 1, ...), which a follower's log requires.
pub fn check_encoded(buf: &[u8]) -> Result<(BatchHeader, bool), DecodeError> {
    let h = verify_crc(buf)?;
    exactly_one(buf, &h)?;
    let mut next = 0u32;
    let mut dense = true;
    walk_batch(buf, &h, |r| {
        dense &= r.offset_delta == next;
        next = next.wrapping_add(1);
    })?;
    Ok((h, dense))
}

/// Whole encoded batches back to back, exactly as a log stores them (its
/// [`crate::log::PartitionLog::read_raw`]): what a leader sends a follower, which appends
/// them verbatim, so a batch is neither decoded nor encoded again on its way.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EncodedBatches(Vec<u8>);

impl EncodedBatches {
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each batch with its header ([`split_batches`]).
    pub fn iter(&self) -> SplitBatches<'_> {
        split_batches(&self.0)
    }

    /// The first batch's base offset and the last one's next offset, from their headers
    /// (CRCs not checked); `None` when empty or unparsable.
    pub fn offsets(&self) -> Option<(Offset, Offset)> {
        let mut first = None;
        let mut next = None;
        for b in self.iter() {
            let (h, _) = b.ok()?;
            first.get_or_insert(h.base_offset);
            next = Some(h.next_offset());
        }
        Some((first?, next?))
    }
}

/// Sizes and offsets rather than a dump of the bytes.
impl fmt::Debug for EncodedBatches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offsets() {
            Some((first, next)) => write!(
                f,
                "EncodedBatches({} bytes, offsets {first}..{next})",
                self.0.len()
            ),
            None => write!(f, "EncodedBatches({} bytes)", self.0.len()),
        }
    }
}

/// As one byte string (bincode: the length, then the bytes in one copy) rather than a
/// sequence of `u8`s, which serde's derive would give and bincode writes byte by byte.
impl Serialize for EncodedBatches {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for EncodedBatches {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_byte_string(d, "encoded record batches").map(EncodedBatches)
    }
}

/// Reads what `serialize_bytes` wrote: a byte string, or (formats without one, e.g. JSON)
/// a sequence of numbers.
fn deserialize_byte_string<'de, D: serde::Deserializer<'de>>(
    d: D,
    what: &'static str,
) -> Result<Vec<u8>, D::Error> {
    struct BytesVisitor(&'static str);
    impl<'de> serde::de::Visitor<'de> for BytesVisitor {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
            Ok(v.to_vec())
        }
        fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Self::Value, E> {
            Ok(v)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
            while let Some(b) = seq.next_element()? {
                v.push(b);
            }
            Ok(v)
        }
    }
    d.deserialize_byte_buf(BytesVisitor(what))
}

/// One encoded batch as a producer sends it to the leader, in the log's batch format
/// (docs/format.md) but not yet placed: the leader's log checks it and sets base offset,
/// leader epoch, offset deltas and max timestamp in place
/// ([`crate::log::PartitionLog::append_encoded_as_leader`]), so its records are encoded
/// once, by the producer, and never decoded on the way to disk.
///
/// Built from a [`RecordBatch`] by [`EncodedBatch::encode`]; bytes from elsewhere (a
/// frame, a test) are taken as they are by [`EncodedBatch::from_bytes`] and trusted only
/// once checked ([`check_encoded`]).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EncodedBatch(Vec<u8>);

impl EncodedBatch {
    /// `batch` in the log's format.
    pub fn encode(batch: &RecordBatch) -> Result<Self, EncodeError> {
        batch.encode().map(Self)
    }

    /// Bytes as they came, unchecked.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The bytes, for a leader to place in place.
    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        &mut self.0
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fixed header, parsed but not checked against the CRC: its fields are the
    /// sender's word until [`check_encoded`] (or the log's append) has passed.
    pub fn header(&self) -> Result<BatchHeader, DecodeError> {
        BatchHeader::parse(&self.0)
    }

    /// The header's record count, 0 when it does not parse (for counters and displays).
    pub fn record_count(&self) -> u32 {
        self.header().map_or(0, |h| h.record_count)
    }

    /// The batch decoded, once its CRC and structure check out (exactly one batch).
    pub fn decode(&self) -> Result<RecordBatch, DecodeError> {
        let h = verify_crc(&self.0)?;
        exactly_one(&self.0, &h)?;
        RecordBatch::decode_verified(&self.0, &h).map(|(b, _)| b)
    }
}

/// Size and what the header says rather than a dump of the bytes.
impl fmt::Debug for EncodedBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.header() {
            Ok(h) => {
                write!(
                    f,
                    "EncodedBatch({} bytes, {} records",
                    self.0.len(),
                    h.record_count
                )?;
                if let Some(p) = h.producer {
                    write!(
                        f,
                        ", producer {} epoch {} sequence {}",
                        p.producer_id, p.producer_epoch, p.base_sequence
                    )?;
                }
                f.write_str(")")
            }
            Err(_) => write!(f, "EncodedBatch({} bytes, unparsable)", self.0.len()),
        }
    }
}

/// A byte string, as [`EncodedBatches`].
impl Serialize for EncodedBatch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for EncodedBatch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_byte_string(d, "an encoded record batch").map(EncodedBatch)
    }
}

/// Walks a buffer of whole encoded batches back to back, giving each batch's header
/// (parsed, its CRC not checked: [`check_encoded`] does that) and bytes. A header that
/// does not parse, or a batch cut short, ends the walk with its error.
pub fn split_batches(buf: &[u8]) -> SplitBatches<'_> {
    SplitBatches { rest: buf }
}

/// The iterator of [`split_batches`].
pub struct SplitBatches<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for SplitBatches<'a> {
    type Item = Result<(BatchHeader, &'a [u8]), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = BatchHeader::parse(self.rest).and_then(|h| Ok((h, h.whole(self.rest)?)));
        match r {
            Ok((_, bytes)) => self.rest = &self.rest[bytes.len()..],
            Err(_) => self.rest = &[],
        }
        Some(r)
    }
}

fn exactly_one(buf: &[u8], h: &BatchHeader) -> Result<(), DecodeError> {
    match buf.len().checked_sub(h.total_len()) {
        Some(0) => Ok(()),
        Some(extra) => Err(DecodeError::Malformed(format!(
            "{extra} bytes after the batch (one batch expected)"
        ))),
        None => h.whole(buf).map(|_| ()),
    }
}

/// The reflected CRC-32 polynomial (crc32fast's, zlib's).
const CRC_POLY: u32 = 0xedb8_8320;

/// The byte-at-a-time table of the CRC polynomial (zlib's `crc_table[0]`).
const CRC_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ CRC_POLY
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// `crc32fast::hash` of a few bytes (a recovery-point line's digits), a byte at a time:
/// for so few, crc32fast's setup costs more than the bytes.
pub(crate) fn crc32_short(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c = CRC_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// `a * b` modulo the CRC polynomial, both reflected (zlib's `multmodp`).
const fn crc_mul(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut p = 0u32;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                return p;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 {
            (b >> 1) ^ CRC_POLY
        } else {
            b >> 1
        };
    }
}

/// `X2N[k]` = x^(2^k) modulo the CRC polynomial (zlib's `x2n_table`).
const X2N: [u32; 32] = {
    let mut t = [0u32; 32];
    let mut p = 1u32 << 30; // x^1
    t[0] = p;
    let mut k = 1;
    while k < 32 {
        p = crc_mul(p, p);
        t[k] = p;
        k += 1;
    }
    t
};

/// What a difference of `d` between the CRC-32s of two equally long byte strings becomes
/// once both are followed by the same `n` bytes: CRC-32 is affine over GF(2), so the
/// difference is the pure polynomial part, multiplied by x^(8n) (about 0.3 µs for
/// 16 KiB, against a pass over the bytes).
fn crc_shift(d: u32, n: usize) -> u32 {
    // x^(8n) = product of x^(2^k) over the set bits k of 8n.
    let mut x = 1u32 << 31; // x^0
    let mut bits = (n as u64) << 3;
    let mut k = 0;
    while bits != 0 {
        if bits & 1 != 0 {
            x = crc_mul(X2N[k & 31], x);
        }
        bits >>= 1;
        k += 1;
    }
    crc_mul(x, d)
}

/// From how many bytes of records on [`place_encoded`] shifts the CRC ([`crc_shift`], a few
/// bitwise polynomial products, ~1,000 instructions whatever the size) instead of hashing
/// the records again (crc32fast: ~200 instructions for the few hundred bytes of a typical
/// batch, about a quarter of an instruction per byte beyond).
const CRC_SHIFT_MIN: usize = 4096;

/// Places one encoded batch (filling `buf` exactly, as a producer sent it) the way a
/// leader's log places a [`RecordBatch`] it appends: checks the CRC and every record, then
/// sets the base offset, the leader epoch, dense offset deltas and the max timestamp (the
/// largest record timestamp) in place and recomputes the CRC. The bytes are then exactly
/// what encoding the decoded batch, so placed, would give. The records' bytes are hashed
/// once when they are many ([`CRC_SHIFT_MIN`]): with dense deltas only the fixed header
/// changes, and the new CRC follows from the old one and the header's ([`crc_shift`]).
pub fn place_encoded(
    buf: &mut [u8],
    base_offset: Offset,
    epoch: LeaderEpoch,
) -> Result<BatchHeader, DecodeError> {
    let h = verify_crc(buf)?;
    exactly_one(buf, &h)?;
    let shift = buf.len() - BATCH_HEADER_LEN >= CRC_SHIFT_MIN;
    let old_fixed = shift.then(|| crc32fast::hash(&buf[CRC_START..BATCH_HEADER_LEN]));
    let first = h.first_timestamp;
    let mut max_ts = first;
    let mut sparse = Vec::new();
    let mut next = 0u32;
    walk_batch(buf, &h, |r| {
        max_ts = max_ts.max(first.saturating_add(r.timestamp_delta));
        if r.offset_delta != next {
            sparse.push((r.pos + 4, next));
        }
        next = next.wrapping_add(1);
    })?;
    if !sparse.is_empty() && h.attributes & CODEC_MASK != 0 {
        // Renumbering would mean compressing again; Kafka's producers write dense deltas.
        return Err(DecodeError::Malformed(
            "a compressed batch's offset deltas must be 0, 1, 2, ...".to_string(),
        ));
    }
    buf[..8].copy_from_slice(&base_offset.to_be_bytes());
    buf[CRC_START..CRC_START + 4].copy_from_slice(&epoch.to_be_bytes());
    buf[MAX_TIMESTAMP_POS..MAX_TIMESTAMP_POS + 8].copy_from_slice(&max_ts.to_be_bytes());
    for (pos, delta) in &sparse {
        buf[*pos..*pos + 4].copy_from_slice(&delta.to_be_bytes());
    }
    let crc = match old_fixed.filter(|_| sparse.is_empty()) {
        // Only the fixed header changed: CRC-32 is affine, so the new CRC is the old one
        // plus the change the header's difference makes, shifted past the records.
        Some(old_fixed) => {
            let new_fixed = crc32fast::hash(&buf[CRC_START..BATCH_HEADER_LEN]);
            h.crc ^ crc_shift(old_fixed ^ new_fixed, buf.len() - BATCH_HEADER_LEN)
        }
        None => crc32fast::hash(&buf[CRC_START..]),
    };
    buf[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
    Ok(BatchHeader {
        base_offset,
        crc,
        partition_leader_epoch: epoch,
        max_timestamp: max_ts,
        ..h
    })
}

#[inline]
fn put_opt_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
    }
}

/// Bounds-checked big-endian reader: every read names the field it wanted.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    #[inline]
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    #[inline]
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated {
                what,
                pos: self.pos,
                need: n,
                have: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    #[inline]
    fn arr<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
    #[inline]
    fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.arr::<1>(what)?[0])
    }
    #[inline]
    fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.arr(what)?))
    }
    #[inline]
    fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.arr(what)?))
    }
    #[inline]
    fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.arr(what)?))
    }
    #[inline]
    fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.arr(what)?))
    }
    #[inline]
    fn opt_bytes(&mut self, what: &'static str) -> Result<Option<&'a [u8]>, DecodeError> {
        let len = i32::from_be_bytes(self.arr(what)?);
        match len {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError::Malformed(format!(
                "{what} length {n} is negative"
            ))),
            n => Ok(Some(self.take(n as usize, what)?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> RecordBatch {
        RecordBatch {
            base_offset: 42,
            partition_leader_epoch: 7,
            attributes: 0,
            producer: Some(ProducerInfo {
                producer_id: 9,
                producer_epoch: 2,
                base_sequence: 100,
            }),
            first_timestamp: 1_700_000_000_000,
            max_timestamp: 1_700_000_000_005,
            records: vec![
                Record {
                    offset_delta: 0,
                    timestamp_delta: 0,
                    key: Some(b"k".to_vec()),
                    value: Some(b"hello".to_vec()),
                    headers: vec![Header {
                        key: "h".into(),
                        value: b"v".to_vec(),
                    }],
                },
                Record {
                    offset_delta: 1,
                    timestamp_delta: 5,
                    key: None,
                    value: None,
                    headers: vec![],
                },
            ],
        }
    }

    #[test]
    fn builders_place_stamp_and_time_a_batch() {
        let s = sample();
        let built = RecordBatch::of_records(0, s.records.clone())
            .at(42)
            .in_epoch(7)
            .with_producer(s.producer)
            .with_timestamps(1_700_000_000_000, 1_700_000_000_005);
        assert_eq!(built, s);
        let marker = RecordBatch::epoch_marker(5, 3, 0);
        assert!(marker.is_control());
        assert_eq!((marker.base_offset, marker.partition_leader_epoch), (5, 3));
        assert_eq!(
            marker.iter_offsets().map(|(o, _)| o).collect::<Vec<_>>(),
            [5]
        );
        assert_eq!(marker.data_records().count(), 0, "a marker holds no data");
        let placed: Vec<_> = s.offsets_at(1_000).map(|(o, r)| (o, r.clone())).collect();
        let moved = s.clone().at(1_000);
        let want: Vec<_> = moved.iter_offsets().map(|(o, r)| (o, r.clone())).collect();
        assert_eq!(placed, want);
        assert_eq!(placed[1].0, 1_001);
    }

    #[test]
    fn roundtrip_and_length() {
        let b = sample();
        let enc = b.encode().unwrap();
        assert_eq!(enc.len(), b.encoded_len());
        let (dec, n) = RecordBatch::decode(&enc).unwrap();
        assert_eq!((dec, n), (b.clone(), enc.len()));
        let mut two = enc.clone();
        two.extend_from_slice(&enc);
        assert_eq!(RecordBatch::decode_all(&two).unwrap(), vec![b.clone(), b]);
        let h = BatchHeader::parse(&enc).unwrap();
        assert_eq!(
            (h.base_offset, h.record_count, h.next_offset()),
            (42, 2, 44)
        );
    }

    #[test]
    fn zero_length_input() {
        assert!(matches!(
            RecordBatch::decode(&[]),
            Err(DecodeError::Truncated {
                what: "base_offset",
                ..
            })
        ));
        assert_eq!(RecordBatch::decode_all(&[]).unwrap(), vec![]);
    }

    #[test]
    fn truncated_header() {
        let enc = sample().encode().unwrap();
        for cut in 0..BATCH_HEADER_LEN {
            assert!(
                matches!(
                    RecordBatch::decode(&enc[..cut]),
                    Err(DecodeError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn length_past_end() {
        let enc = sample().encode().unwrap();
        for cut in BATCH_HEADER_LEN..enc.len() {
            assert!(matches!(
                RecordBatch::decode(&enc[..cut]),
                Err(DecodeError::Truncated {
                    what: "batch body",
                    ..
                })
            ));
        }
        let mut big = enc.clone();
        big[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            RecordBatch::decode(&big),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn length_too_small() {
        let mut enc = sample().encode().unwrap();
        enc[8..12].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(
            RecordBatch::decode(&enc),
            Err(DecodeError::LengthTooSmall(3))
        );
    }

    #[test]
    fn wrong_crc() {
        let mut enc = sample().encode().unwrap();
        enc[CRC_POS] ^= 0xff;
        assert!(matches!(
            RecordBatch::decode(&enc),
            Err(DecodeError::CrcMismatch { .. })
        ));
    }

    #[test]
    fn unsupported_version() {
        let mut enc = sample().encode().unwrap();
        enc[12] = 9;
        assert_eq!(
            RecordBatch::decode(&enc),
            Err(DecodeError::UnsupportedVersion(9))
        );
    }

    #[test]
    fn every_bit_flip_is_caught_or_harmless() {
        // Flips after the CRC field fail the CRC; flips before it fail the length/version
        // checks, except in the base offset, which the log checks against its position.
        let b = sample();
        let enc = b.encode().unwrap();
        for pos in 0..enc.len() {
            for bit in 0..8 {
                let mut bad = enc.clone();
                bad[pos] ^= 1 << bit;
                if let Ok((d, _)) = RecordBatch::decode(&bad) {
                    assert!(pos < 8, "undetected flip at byte {pos}");
                    assert_ne!(d.base_offset, b.base_offset);
                }
            }
        }
    }

    #[test]
    fn crc_valid_but_malformed_records() {
        // Hand-build a batch whose record length lies, with a correct CRC.
        let mut enc = sample().encode().unwrap();
        let rec0 = BATCH_HEADER_LEN;
        enc[rec0..rec0 + 4].copy_from_slice(&1000u32.to_be_bytes());
        let crc = crc32fast::hash(&enc[CRC_START..]);
        enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            RecordBatch::decode(&enc),
            Err(DecodeError::Malformed(_))
        ));
        // A record count the bytes cannot hold.
        let mut enc = sample().encode().unwrap();
        enc[53..57].copy_from_slice(&u32::MAX.to_be_bytes());
        let crc = crc32fast::hash(&enc[CRC_START..]);
        enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            RecordBatch::decode(&enc),
            Err(DecodeError::Malformed(_))
        ));
    }

    /// `decode_verified`'s fast path against the full walk on `enc` (header parsed from
    /// it, then with a lying record count): the same batch or the same error.
    fn fast_decode_agrees(enc: &[u8]) {
        let Ok(h) = BatchHeader::parse(enc) else {
            return;
        };
        let counts = [h.record_count, h.record_count.wrapping_add(1), 0];
        // Codec bits off: the walk reads the records section as it is stored.
        let attributes = h.attributes & !CODEC_MASK;
        for h in counts.map(|record_count| BatchHeader {
            record_count,
            attributes,
            ..h
        }) {
            assert_eq!(
                RecordBatch::decode_verified(enc, &h),
                RecordBatch::decode_walked(enc, &h),
                "bytes {enc:?}"
            );
        }
    }

    #[test]
    fn short_crc_is_crc32fast() {
        let bytes: Vec<u8> = (0..=255u8).chain(b"1234567890".iter().copied()).collect();
        for n in 0..bytes.len() {
            for s in [&bytes[..n], &bytes[n..]] {
                assert_eq!(crc32_short(s), crc32fast::hash(s));
            }
        }
    }

    #[test]
    fn fast_decode_takes_intact_batches_and_agrees_on_every_damaged_byte() {
        let mut b = sample();
        b.records[1].headers = vec![
            Header {
                key: String::new(),
                value: vec![],
            },
            Header {
                key: "é".into(),
                value: b"xyz".to_vec(),
            },
        ];
        let enc = b.encode().unwrap();
        let h = BatchHeader::parse(&enc).unwrap();
        assert_eq!(decode_fast(&enc, &h), Some(b.records.clone()));
        let mut two = enc.clone();
        two.extend_from_slice(&enc);
        assert_eq!(
            decode_fast(&two, &h),
            Some(b.records.clone()),
            "a next batch"
        );
        let empty = RecordBatch::of_records(0, vec![]).encode().unwrap();
        let eh = BatchHeader::parse(&empty).unwrap();
        assert_eq!(decode_fast(&empty, &eh), Some(vec![]));
        fast_decode_agrees(&empty);
        // Every byte set to values that make lengths, counts and UTF-8 lie.
        for i in 0..enc.len() {
            for v in [
                0x00,
                0x01,
                0x7f,
                0x80,
                0xfe,
                0xff,
                enc[i] ^ 0x01,
                enc[i] ^ 0x20,
            ] {
                let mut bad = enc.clone();
                bad[i] = v;
                fast_decode_agrees(&bad);
            }
        }
        // Cut short, and followed by other bytes.
        for n in 0..enc.len() {
            fast_decode_agrees(&enc[..n]);
        }
        fast_decode_agrees(&two);
    }

    #[test]
    fn reserved_producer_id_refused() {
        let mut b = sample();
        b.producer = Some(ProducerInfo {
            producer_id: u64::MAX,
            producer_epoch: 0,
            base_sequence: 0,
        });
        assert!(matches!(
            b.encode(),
            Err(EncodeError::ReservedProducerId(_))
        ));
    }

    #[test]
    fn encoded_batches_split_travel_as_one_byte_string_and_stop_at_damage() {
        let a = sample().encode().unwrap();
        let b = placed(sample(), 44, 8).encode().unwrap();
        let both = EncodedBatches::new([a.clone(), b.clone()].concat());
        let split: Vec<_> = both.iter().map(|r| r.unwrap()).collect();
        assert_eq!(split.len(), 2);
        assert_eq!((split[0].0.base_offset, split[0].1), (42, &a[..]));
        assert_eq!((split[1].0.base_offset, split[1].1), (44, &b[..]));
        assert_eq!(both.offsets(), Some((42, 46)));
        assert_eq!(
            format!("{both:?}"),
            format!(
                "EncodedBatches({} bytes, offsets 42..46)",
                a.len() + b.len()
            )
        );
        // bincode: a u64 length, then the bytes as they are (not one element per byte).
        let wire = bincode::serialize(&both).unwrap();
        assert_eq!(wire.len(), 8 + a.len() + b.len());
        assert_eq!(&wire[8..], both.as_bytes());
        assert_eq!(bincode::deserialize::<EncodedBatches>(&wire).unwrap(), both);
        // A format without byte strings (JSON) writes numbers; they read back the same.
        let json = serde_json::to_string(&both).unwrap();
        assert_eq!(serde_json::from_str::<EncodedBatches>(&json).unwrap(), both);
        // A cut second batch: the first still splits, then the walk ends with the error.
        let cut = EncodedBatches::new(both.as_bytes()[..a.len() + b.len() - 1].to_vec());
        let mut it = cut.iter();
        assert_eq!(it.next().unwrap().unwrap().1, &a[..]);
        assert!(matches!(
            it.next(),
            Some(Err(DecodeError::Truncated { .. }))
        ));
        assert!(it.next().is_none());
        assert_eq!(cut.offsets(), None);
        assert_eq!(EncodedBatches::default().offsets(), None);
        assert!(EncodedBatches::default().iter().next().is_none());
    }

    /// What a leader's log makes of `b`: placed at `base` in `epoch`, deltas dense, the
    /// max timestamp the largest record timestamp.
    fn placed(mut b: RecordBatch, base: Offset, epoch: LeaderEpoch) -> RecordBatch {
        b.base_offset = base;
        b.partition_leader_epoch = epoch;
        let first = b.first_timestamp;
        b.max_timestamp = first;
        for (i, r) in b.records.iter_mut().enumerate() {
            r.offset_delta = i as u32;
            b.max_timestamp = b.max_timestamp.max(first.saturating_add(r.timestamp_delta));
        }
        b
    }

    #[test]
    fn place_encoded_gives_the_placed_encoding() {
        let b = sample();
        let mut enc = b.encode().unwrap();
        let h = place_encoded(&mut enc, 1000, 9).unwrap();
        let want = placed(b, 1000, 9);
        assert_eq!(enc, want.encode().unwrap());
        assert_eq!(h, BatchHeader::parse(&enc).unwrap());
        assert_eq!((h.base_offset, h.partition_leader_epoch), (1000, 9));
        assert_eq!(h.max_timestamp, 1_700_000_000_005);
        assert_eq!(check_encoded(&enc).unwrap(), (h, true));
    }

    /// Both ways of finding the placed CRC (hashing the records again, shifting the old CRC)
    /// give the placed encoding, at the sizes around where one takes over from the other.
    #[test]
    fn place_encoded_either_side_of_the_crc_shift_threshold() {
        for extra in [0, 1, 100] {
            for size in [CRC_SHIFT_MIN - 200, CRC_SHIFT_MIN, CRC_SHIFT_MIN + 3000] {
                let mut b = sample();
                b.records[1].value = Some(vec![7; size + extra]);
                let records_len = b.encode().unwrap().len() - BATCH_HEADER_LEN;
                assert!(records_len.abs_diff(size) < 200, "{records_len} vs {size}");
                let mut enc = b.encode().unwrap();
                let h = place_encoded(&mut enc, 77, 3).unwrap();
                assert_eq!(enc, placed(b, 77, 3).encode().unwrap(), "size {size}");
                assert_eq!(h, BatchHeader::parse(&enc).unwrap());
            }
        }
    }

    #[test]
    fn encoded_checks_refuse_what_decoding_refuses() {
        let enc = sample().encode().unwrap();
        let mut bad = enc.clone();
        bad[BATCH_HEADER_LEN + 10] ^= 1;
        let before = bad.clone();
        assert!(matches!(
            place_encoded(&mut bad, 5, 1),
            Err(DecodeError::CrcMismatch { .. })
        ));
        assert_eq!(bad, before, "a refused batch is left as it was");
        assert!(matches!(
            check_encoded(&bad),
            Err(DecodeError::CrcMismatch { .. })
        ));
        let mut long = enc.clone();
        long.push(0);
        assert!(matches!(
            check_encoded(&long),
            Err(DecodeError::Malformed(_))
        ));
        assert!(matches!(
            place_encoded(&mut long, 0, 0),
            Err(DecodeError::Malformed(_))
        ));
        let mut short = enc[..enc.len() - 1].to_vec();
        assert!(matches!(
            place_encoded(&mut short, 0, 0),
            Err(DecodeError::Truncated { .. })
        ));
        // A record whose length lies, under a correct CRC.
        let mut lying = enc.clone();
        lying[BATCH_HEADER_LEN..BATCH_HEADER_LEN + 4].copy_from_slice(&1000u32.to_be_bytes());
        let crc = crc32fast::hash(&lying[CRC_START..]);
        lying[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            check_encoded(&lying),
            Err(DecodeError::Malformed(_))
        ));
        assert!(matches!(
            place_encoded(&mut lying, 0, 0),
            Err(DecodeError::Malformed(_))
        ));
        // Sparse deltas: a follower's log must refuse them, a leader's renumbers them.
        let mut sparse = sample();
        sparse.records[1].offset_delta = 7;
        let mut enc = sparse.encode().unwrap();
        assert!(!check_encoded(&enc).unwrap().1);
        place_encoded(&mut enc, 3, 2).unwrap();
        assert_eq!(enc, placed(sparse, 3, 2).encode().unwrap());
        assert!(check_encoded(&enc).unwrap().1);
    }

    /// The encoding, byte for byte, against the format written out field by field
    /// (docs/format.md): with and without a producer, keys, values and headers.
    #[test]
    fn encode_writes_the_documented_layout() {
        fn be(out: &mut Vec<u8>, b: &[u8]) {
            out.extend_from_slice(b);
        }
        for b in [sample(), sample().with_producer(None)] {
            let mut want = Vec::new();
            be(&mut want, &b.base_offset.to_be_bytes());
            be(
                &mut want,
                &((b.encoded_len() - LOG_OVERHEAD) as u32).to_be_bytes(),
            );
            want.push(BATCH_MAGIC);
            be(&mut want, &[0; 4]);
            be(&mut want, &b.partition_leader_epoch.to_be_bytes());
            be(&mut want, &b.attributes.to_be_bytes());
            be(&mut want, &b.first_timestamp.to_be_bytes());
            be(&mut want, &b.max_timestamp.to_be_bytes());
            let p = b.producer.unwrap_or(ProducerInfo {
                producer_id: NO_PRODUCER,
                producer_epoch: u16::MAX,
                base_sequence: u32::MAX,
            });
            be(&mut want, &p.producer_id.to_be_bytes());
            be(&mut want, &p.producer_epoch.to_be_bytes());
            be(&mut want, &p.base_sequence.to_be_bytes());
            be(&mut want, &(b.records.len() as u32).to_be_bytes());
            for r in &b.records {
                be(&mut want, &((record_len(r) - 4) as u32).to_be_bytes());
                be(&mut want, &r.offset_delta.to_be_bytes());
                be(&mut want, &r.timestamp_delta.to_be_bytes());
                for f in [&r.key, &r.value] {
                    match f {
                        None => be(&mut want, &(-1i32).to_be_bytes()),
                        Some(v) => {
                            be(&mut want, &(v.len() as i32).to_be_bytes());
                            be(&mut want, v);
                        }
                    }
                }
                be(&mut want, &(r.headers.len() as u32).to_be_bytes());
                for h in &r.headers {
                    be(&mut want, &(h.key.len() as u32).to_be_bytes());
                    be(&mut want, h.key.as_bytes());
                    be(&mut want, &(h.value.len() as u32).to_be_bytes());
                    be(&mut want, &h.value);
                }
            }
            let crc = crc32fast::hash(&want[CRC_START..]);
            want[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
            assert_eq!(b.encode().unwrap(), want);
            // Appended after other bytes, too.
            let mut out = b"xyz".to_vec();
            b.encode_into(&mut out).unwrap();
            assert_eq!((&out[..3], &out[3..]), (&b"xyz"[..], &want[..]));
        }
    }

    #[test]
    fn encoded_batch_is_the_log_format_as_one_byte_string() {
        let b = sample();
        let e = EncodedBatch::encode(&b).unwrap();
        assert_eq!(e.as_bytes(), &b.encode().unwrap()[..]);
        assert_eq!(
            e.header().unwrap(),
            BatchHeader::parse(e.as_bytes()).unwrap()
        );
        assert_eq!((e.record_count(), e.len()), (2, b.encoded_len()));
        assert_eq!(e.decode().unwrap(), b);
        assert_eq!(
            format!("{e:?}"),
            format!(
                "EncodedBatch({} bytes, 2 records, producer 9 epoch 2 sequence 100)",
                e.len()
            )
        );
        let plain = EncodedBatch::encode(&b.clone().with_producer(None)).unwrap();
        assert_eq!(
            format!("{plain:?}"),
            format!("EncodedBatch({} bytes, 2 records)", plain.len())
        );
        let junk = EncodedBatch::from_bytes(b"junk".to_vec());
        assert_eq!(format!("{junk:?}"), "EncodedBatch(4 bytes, unparsable)");
        assert_eq!(junk.record_count(), 0);
        assert!(matches!(junk.decode(), Err(DecodeError::Truncated { .. })));
        // One batch exactly: trailing bytes are refused.
        let mut long = e.clone().into_bytes();
        long.push(0);
        let long = EncodedBatch::from_bytes(long);
        assert!(matches!(long.decode(), Err(DecodeError::Malformed(_))));
        // bincode: a u64 length, then the bytes as they are.
        let wire = bincode::serialize(&e).unwrap();
        assert_eq!(wire.len(), 8 + e.len());
        assert_eq!(&wire[8..], e.as_bytes());
        assert_eq!(bincode::deserialize::<EncodedBatch>(&wire).unwrap(), e);
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<EncodedBatch>(&json).unwrap(), e);
        assert!(matches!(
            EncodedBatch::encode(&b.with_producer(Some(ProducerInfo {
                producer_id: u64::MAX,
                producer_epoch: 0,
                base_sequence: 0,
            }))),
            Err(EncodeError::ReservedProducerId(_))
        ));
    }

    fn arb_record() -> impl Strategy<Value = Record> {
        (
            any::<u32>(),
            any::<i64>(),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            proptest::collection::vec(
                ("[a-z]{0,5}", proptest::collection::vec(any::<u8>(), 0..5)),
                0..3,
            ),
        )
            .prop_map(|(offset_delta, timestamp_delta, key, value, hs)| Record {
                offset_delta,
                timestamp_delta,
                key,
                value,
                headers: hs
                    .into_iter()
                    .map(|(key, value)| Header { key, value })
                    .collect(),
            })
    }

    fn arb_batch() -> impl Strategy<Value = RecordBatch> {
        (
            0u64..u64::MAX / 2,
            any::<u32>(),
            any::<u16>(),
            proptest::option::of((0u64..u64::MAX - 1, any::<u16>(), any::<u32>())),
            any::<i64>(),
            any::<i64>(),
            proptest::collection::vec(arb_record(), 0..6),
        )
            .prop_map(
                |(base_offset, epoch, attributes, p, ft, mt, records)| RecordBatch {
                    base_offset,
                    partition_leader_epoch: epoch,
                    // Uncompressed: `prop_compressed_*` cover the codecs.
                    attributes: attributes & !CODEC_MASK,
                    producer: p.map(
                        |(producer_id, producer_epoch, base_sequence)| ProducerInfo {
                            producer_id,
                            producer_epoch,
                            base_sequence,
                        },
                    ),
                    first_timestamp: ft,
                    max_timestamp: mt,
                    records,
                },
            )
    }

    /// A compressed batch: the header as the uncompressed encoding's (length and CRC
    /// aside), the records section the codec's compression of the uncompressed one.
    #[test]
    fn compressed_batches_store_the_records_section_compressed() {
        let mut b = sample();
        b.records[0].value = Some(b"hello hello hello hello hello hello".repeat(20));
        for codec in Codec::ALL.into_iter().skip(1) {
            let cb = b.clone().with_codec(codec);
            assert_eq!(cb.codec(), Ok(codec));
            let plain = cb.encode_plain_for_test();
            let enc = cb.encode().unwrap();
            let z = codec.compress(&plain[BATCH_HEADER_LEN..]);
            assert_eq!(&enc[BATCH_HEADER_LEN..], &z[..], "{codec}");
            assert!(enc.len() < plain.len(), "{codec} made it smaller");
            assert_eq!(enc[21..23], cb.attributes.to_be_bytes());
            assert_eq!(
                (&enc[..8], &enc[12..CRC_POS]),
                (&plain[..8], &plain[12..CRC_POS])
            );
            assert_eq!(
                &enc[CRC_START..BATCH_HEADER_LEN],
                &plain[CRC_START..BATCH_HEADER_LEN]
            );
            let h = BatchHeader::parse(&enc).unwrap();
            assert_eq!(h.total_len(), enc.len());
            assert_eq!(h.crc, crc32fast::hash(&enc[CRC_START..]));
            let (d, n) = RecordBatch::decode(&enc).unwrap();
            assert_eq!((d, n), (cb.clone(), enc.len()));
            assert_eq!(check_encoded(&enc).unwrap(), (h, true));
            // Placed by a leader: header fields set, the compressed records untouched.
            let mut placed_enc = enc.clone();
            let ph = place_encoded(&mut placed_enc, 500, 3).unwrap();
            assert_eq!(&placed_enc[BATCH_HEADER_LEN..], &enc[BATCH_HEADER_LEN..]);
            assert_eq!(placed_enc, placed(cb.clone(), 500, 3).encode().unwrap());
            assert_eq!(ph, BatchHeader::parse(&placed_enc).unwrap());
        }
    }

    #[test]
    fn a_compressed_payload_that_does_not_decompress_is_refused_everywhere() {
        let cb = sample().with_codec(Codec::Lz4);
        let mut enc = cb.encode().unwrap();
        // Garbage records under a valid CRC: what only a bad writer (or bit rot before
        // the CRC was computed) makes.
        for byte in &mut enc[BATCH_HEADER_LEN..] {
            *byte = 0xa5;
        }
        let crc = crc32fast::hash(&enc[CRC_START..]);
        enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
        let codec_err = |r: Result<_, DecodeError>| matches!(r, Err(DecodeError::Codec(_)));
        assert!(codec_err(RecordBatch::decode(&enc).map(|_| ())));
        assert!(codec_err(check_encoded(&enc).map(|_| ())));
        let before = enc.clone();
        assert!(codec_err(place_encoded(&mut enc, 1, 1).map(|_| ())));
        assert_eq!(enc, before, "a refused batch is left as it was");
        // Unknown codec bits (5-7): refused when encoding and decoding.
        let mut unknown = sample();
        unknown.attributes = 6;
        assert_eq!(
            unknown.encode(),
            Err(EncodeError::Codec(CodecError::Unknown(6)))
        );
        let mut enc = sample().encode().unwrap();
        enc[22] |= 7;
        let crc = crc32fast::hash(&enc[CRC_START..]);
        enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            RecordBatch::decode(&enc),
            Err(DecodeError::Codec(CodecError::Unknown(7)))
        );
        // Sparse deltas cannot be renumbered inside compressed bytes: refused.
        let mut sparse = sample().with_codec(Codec::Gzip);
        sparse.records[1].offset_delta = 9;
        let mut enc = sparse.encode().unwrap();
        assert!(!check_encoded(&enc).unwrap().1);
        assert!(matches!(
            place_encoded(&mut enc, 0, 0),
            Err(DecodeError::Malformed(_))
        ));
    }

    impl RecordBatch {
        fn encode_plain_for_test(&self) -> Vec<u8> {
            let mut out = Vec::new();
            self.encode_plain_into(&mut out).unwrap();
            out
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        #[test]
        fn prop_compressed_roundtrip(b in arb_batch(), codec in 1u8..=4) {
            let b = b.with_codec(Codec::from_id(codec).unwrap());
            let enc = b.encode().unwrap();
            let (d, n) = RecordBatch::decode(&enc).unwrap();
            prop_assert_eq!(n, enc.len());
            prop_assert_eq!(d, b);
        }

        #[test]
        fn prop_compressed_damage_never_panics(b in arb_batch(), codec in 1u8..=4, edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
            let mut enc = b.with_codec(Codec::from_id(codec).unwrap()).encode().unwrap();
            for (i, v) in edits {
                let i = BATCH_HEADER_LEN + i % (enc.len() - BATCH_HEADER_LEN).max(1);
                if let Some(byte) = enc.get_mut(i) {
                    *byte = v;
                }
            }
            let crc = crc32fast::hash(&enc[CRC_START..]);
            enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
            let decoded = RecordBatch::decode(&enc).ok().filter(|(_, n)| *n == enc.len());
            prop_assert_eq!(check_encoded(&enc).is_ok(), decoded.is_some());
        }

        #[test]
        fn prop_roundtrip(b in arb_batch()) {
            let enc = b.encode().unwrap();
            prop_assert_eq!(enc.len(), b.encoded_len());
            let (d, n) = RecordBatch::decode(&enc).unwrap();
            prop_assert_eq!(n, enc.len());
            prop_assert_eq!(d, b);
        }

        #[test]
        fn prop_place_encoded_matches_encoding_the_placed_batch(b in arb_batch(), base in 0u64..u64::MAX / 4, epoch in any::<u32>()) {
            let mut enc = b.encode().unwrap();
            let h = place_encoded(&mut enc, base, epoch).unwrap();
            prop_assert_eq!(&enc, &placed(b, base, epoch).encode().unwrap());
            prop_assert_eq!(h, BatchHeader::parse(&enc).unwrap());
        }

        #[test]
        fn prop_encoded_checks_agree_with_decode(b in arb_batch(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), fix_crc in any::<bool>()) {
            let mut enc = b.encode().unwrap();
            for (i, v) in edits {
                let i = i % enc.len();
                enc[i] = v;
            }
            if fix_crc {
                let crc = crc32fast::hash(&enc[CRC_START..]);
                enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
            }
            // Exactly one batch: what a decode of the whole buffer accepts.
            let decoded = RecordBatch::decode(&enc).ok().filter(|(_, n)| *n == enc.len());
            let checked = check_encoded(&enc);
            prop_assert_eq!(checked.is_ok(), decoded.is_some());
            let mut placed_bytes = enc.clone();
            let place = place_encoded(&mut placed_bytes, 1, 1);
            prop_assert_eq!(place.is_ok(), decoded.is_some());
            if place.is_err() {
                prop_assert_eq!(&placed_bytes, &enc, "refused: unchanged");
            }
            if let (Ok((h, dense)), Some((d, _))) = (checked, decoded) {
                prop_assert_eq!(h.record_count as usize, d.records.len());
                let want = d.records.iter().enumerate().all(|(i, r)| r.offset_delta == i as u32);
                prop_assert_eq!(dense, want);
            }
        }

        #[test]
        fn prop_fast_decode_is_the_walk(b in arb_batch(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), tail in proptest::collection::vec(any::<u8>(), 0..3)) {
            let mut enc = b.encode().unwrap();
            let h = BatchHeader::parse(&enc).unwrap();
            prop_assert_eq!(decode_fast(&enc, &h), Some(b.records.clone()));
            // Edits past the fixed header, where they reach the records more often.
            for (i, v) in edits {
                let i = BATCH_HEADER_LEN + i % (enc.len() - BATCH_HEADER_LEN + 1);
                if let Some(byte) = enc.get_mut(i) {
                    *byte = v;
                }
            }
            enc.extend(tail);
            fast_decode_agrees(&enc);
        }

        #[test]
        fn prop_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = RecordBatch::decode(&bytes);
            fast_decode_agrees(&bytes);
            let _ = RecordBatch::decode_all(&bytes);
            let _ = BatchHeader::parse(&bytes);
            // What a follower does with a fetch answer's bytes before appending them.
            let _ = split_batches(&bytes).count();
            let _ = EncodedBatches::new(bytes).offsets();
        }

        #[test]
        fn prop_mutated_batch_never_panics(b in arb_batch(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4), fix_crc in any::<bool>()) {
            let mut enc = b.encode().unwrap();
            for (i, v) in edits {
                let i = i % enc.len();
                enc[i] = v;
            }
            if fix_crc && enc.len() >= CRC_START {
                let crc = crc32fast::hash(&enc[CRC_START..]);
                enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
            }
            let _ = RecordBatch::decode(&enc);
            fast_decode_agrees(&enc);
        }
    }
}
