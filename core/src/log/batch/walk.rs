//! Walking the records of an encoded batch in place, checking each, without decoding it.

use super::cursor::Cursor;
use super::header::{
    BatchHeader, DecodeError, BATCH_HEADER_LEN, LENGTH_POS, LOG_OVERHEAD, MIN_RECORD_LEN,
};
use crate::log::codec::{Codec, CODEC_MASK, MAX_DECOMPRESSED_LEN};

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
pub(super) fn decompressed(
    buf: &[u8],
    h: &BatchHeader,
) -> Result<(Vec<u8>, BatchHeader), DecodeError> {
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
    plain[LENGTH_POS..LOG_OVERHEAD].copy_from_slice(&batch_length.to_be_bytes());
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
