//! Encoded batches as they travel: one produced batch ([`EncodedBatch`]), and whole
//! batches back to back as a log stores them ([`EncodedBatches`]).

use super::header::{verify_crc, BatchHeader, DecodeError, EncodeError};
use super::record::RecordBatch;
use crate::types::Offset;
use std::fmt;

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

/// `buf` holds exactly the batch whose header is `h`: no bytes missing, none after it.
pub(super) fn exactly_one(buf: &[u8], h: &BatchHeader) -> Result<(), DecodeError> {
    match buf.len().checked_sub(h.total_len()) {
        Some(0) => Ok(()),
        Some(extra) => Err(DecodeError::Malformed(format!(
            "{extra} bytes after the batch (one batch expected)"
        ))),
        None => h.whole(buf).map(|_| ()),
    }
}
