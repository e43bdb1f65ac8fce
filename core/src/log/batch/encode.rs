//! Encoding a [`RecordBatch`] in the batch format (docs/format.md).

use super::header::*;
use super::record::{Record, RecordBatch};
use crate::log::codec::CODEC_MASK;
use crate::log::crc::crc32;

/// Encoded size of one record, its length field included.
pub(super) fn record_len(r: &Record) -> usize {
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
        out[start + LENGTH_POS..start + LOG_OVERHEAD]
            .copy_from_slice(&((total - LOG_OVERHEAD) as u32).to_be_bytes());
        let crc = crc32(&out[start + CRC_START..]);
        out[start + CRC_POS..start + CRC_START].copy_from_slice(&crc.to_be_bytes());
        Ok(())
    }

    /// The batch encoded with its records section as it is (whatever the codec bits say).
    #[inline]
    pub(super) fn encode_plain_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
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
        put(BASE_OFFSET_POS, &self.base_offset.to_be_bytes());
        put(LENGTH_POS, &((total - LOG_OVERHEAD) as u32).to_be_bytes());
        put(MAGIC_POS, &[BATCH_MAGIC]);
        // CRC_POS..CRC_START stays 0 until the CRC is filled in below.
        put(EPOCH_POS, &self.partition_leader_epoch.to_be_bytes());
        put(ATTRIBUTES_POS, &self.attributes.to_be_bytes());
        put(FIRST_TIMESTAMP_POS, &self.first_timestamp.to_be_bytes());
        put(MAX_TIMESTAMP_POS, &self.max_timestamp.to_be_bytes());
        put(PRODUCER_ID_POS, &pid.to_be_bytes());
        put(PRODUCER_EPOCH_POS, &pepoch.to_be_bytes());
        put(BASE_SEQUENCE_POS, &pseq.to_be_bytes());
        put(RECORD_COUNT_POS, &(self.records.len() as u32).to_be_bytes());
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
        let crc = crc32(&out[start + CRC_START..]);
        out[start + CRC_POS..start + CRC_START].copy_from_slice(&crc.to_be_bytes());
        Ok(())
    }
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
