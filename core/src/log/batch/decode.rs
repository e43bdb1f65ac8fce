//! Decoding encoded batches into [`RecordBatch`] values.

use super::header::{verify_crc, BatchHeader, DecodeError, BATCH_HEADER_LEN, MIN_RECORD_LEN};
use super::record::{Header, Record, RecordBatch};
use super::walk::{decompressed, walk_records};
use crate::log::codec::CODEC_MASK;

impl RecordBatch {
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
    pub(super) fn decode_walked(
        buf: &[u8],
        h: &BatchHeader,
    ) -> Result<(RecordBatch, usize), DecodeError> {
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
pub(super) fn decode_fast(buf: &[u8], h: &BatchHeader) -> Option<Vec<Record>> {
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
