//! Compression codecs of record batches, numbered as Kafka numbers them in the low three
//! bits of a batch's attributes (docs/format.md, "Compressed batches"). A compressed
//! batch keeps its fixed header as is and stores its records section compressed.
//!
//! Every codec is a pure function of its input (fixed levels, no threads, no clock), so
//! the simulator stays deterministic, and each writes the framing Kafka's clients read:
//! gzip (RFC 1952), snappy in xerial's framing (Java's `SnappyOutputStream`, what Kafka
//! writes; raw snappy, what librdkafka writes, is read too), the LZ4 frame format, and
//! zstd frames.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::{Read, Write};
use std::str::FromStr;
use thiserror::Error;

/// The attribute bits holding a batch's codec.
pub const CODEC_MASK: u16 = 0x07;

/// Largest records section a compressed batch may decompress to: the cap on an
/// uncompressed batch on disk, so a small corrupt or hostile payload cannot make a reader
/// allocate without bound.
pub const MAX_DECOMPRESSED_LEN: usize = 64 << 20;

/// Largest zstd window a reader accepts (2^24 = 16 MiB): a frame header names its window
/// and the decoder allocates it, so a few hostile bytes could otherwise claim zstd's own
/// limit of 128 MiB. Level 3, which Kafka's producers use, never needs more than 2 MiB.
const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// zstd level 3: zstd's default, which Kafka also uses.
const ZSTD_LEVEL: i32 = 3;

/// Uncompressed bytes per block of xerial's snappy framing (snappy-java's default).
const SNAPPY_BLOCK: usize = 32 * 1024;

/// xerial's snappy stream header: magic, version 1, minimum compatible version 1.
const SNAPPY_XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// A batch's compression codec.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum Codec {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// Why a codec could not be named or a payload not decompressed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    #[error("unknown compression codec {0} (known: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)")]
    Unknown(u8),
    #[error("unknown compression codec name {0:?} (known: none, gzip, snappy, lz4, zstd)")]
    UnknownName(String),
    #[error("{codec} payload does not decompress: {reason}")]
    Corrupt { codec: Codec, reason: String },
    #[error("{codec} payload decompresses to more than {limit} bytes")]
    TooLarge { codec: Codec, limit: usize },
}

impl Codec {
    /// Every codec, `None` first.
    pub const ALL: [Codec; 5] = [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ];

    /// Kafka's number for the codec.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The codec numbered `id` (0-4), or `Unknown` (5-7 and above).
    pub fn from_id(id: u8) -> Result<Self, CodecError> {
        Self::ALL
            .get(usize::from(id))
            .copied()
            .ok_or(CodecError::Unknown(id))
    }

    /// The codec a batch with these attributes is compressed with.
    pub fn of_attributes(attributes: u16) -> Result<Self, CodecError> {
        Self::from_id((attributes & CODEC_MASK) as u8)
    }

    /// `attributes` with its codec bits set to this codec.
    pub fn set_in(self, attributes: u16) -> u16 {
        (attributes & !CODEC_MASK) | u16::from(self.id())
    }

    /// The name Kafka's `compression.type` uses.
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }

    /// Appends `data` compressed to `out` (`None`: as it is).
    pub fn compress_into(self, data: &[u8], out: &mut Vec<u8>) {
        // Writing into a Vec cannot fail; a failure here is a codec bug.
        const INFALLIBLE: &str = "compressing into memory cannot fail";
        match self {
            Codec::None => out.extend_from_slice(data),
            Codec::Gzip => {
                let mut e = flate2::write::GzEncoder::new(out, flate2::Compression::default());
                e.write_all(data).expect(INFALLIBLE);
                e.finish().expect(INFALLIBLE);
            }
            Codec::Snappy => snappy_xerial_compress(data, out),
            Codec::Lz4 => {
                let mut e = lz4_flex::frame::FrameEncoder::new(out);
                e.write_all(data).expect(INFALLIBLE);
                e.finish().expect(INFALLIBLE);
            }
            Codec::Zstd => {
                let z = zstd::bulk::compress(data, ZSTD_LEVEL).expect(INFALLIBLE);
                out.extend_from_slice(&z);
            }
        }
    }

    /// `data` compressed.
    pub fn compress(self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.compress_into(data, &mut out);
        out
    }

    /// Appends `data` decompressed to `out`, at most `limit` bytes of it. Never panics:
    /// any damage is `Corrupt`, a payload inflating past `limit` is `TooLarge`.
    pub fn decompress_into(
        self,
        data: &[u8],
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), CodecError> {
        let start = out.len();
        let r = match self {
            Codec::None => {
                out.extend_from_slice(data);
                Ok(())
            }
            Codec::Gzip => read_limited(self, flate2::read::MultiGzDecoder::new(data), out, limit),
            Codec::Snappy => snappy_decompress(data, out, limit),
            Codec::Lz4 => read_limited(self, lz4_flex::frame::FrameDecoder::new(data), out, limit),
            Codec::Zstd => zstd::stream::read::Decoder::with_buffer(data)
                .and_then(|mut d| d.window_log_max(ZSTD_WINDOW_LOG_MAX).map(|()| d))
                .map_err(|e| self.corrupt(e.to_string()))
                .and_then(|d| read_limited(self, d, out, limit)),
        }
        .and_then(|()| {
            if out.len() - start > limit {
                return Err(CodecError::TooLarge { codec: self, limit });
            }
            Ok(())
        });
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    /// `data` decompressed (at most [`MAX_DECOMPRESSED_LEN`] bytes).
    pub fn decompress(self, data: &[u8]) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::new();
        self.decompress_into(data, &mut out, MAX_DECOMPRESSED_LEN)?;
        Ok(out)
    }

    fn corrupt(self, reason: impl Into<String>) -> CodecError {
        CodecError::Corrupt {
            codec: self,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Codec {
    type Err = CodecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| CodecError::UnknownName(s.to_string()))
    }
}

/// Reads `r` to its end into `out`, stopping one byte past `limit` (the caller reports
/// `TooLarge`), so a decompression bomb costs at most `limit` bytes of memory.
fn read_limited(
    codec: Codec,
    r: impl Read,
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), CodecError> {
    r.take(limit as u64 + 1)
        .read_to_end(out)
        .map(|_| ())
        .map_err(|e| codec.corrupt(e.to_string()))
}

/// xerial's framing (what Kafka's Java producer writes): the magic header, then blocks of
/// at most [`SNAPPY_BLOCK`] input bytes, each a 4-byte big-endian length and a raw snappy
/// block.
fn snappy_xerial_compress(data: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(SNAPPY_XERIAL_MAGIC);
    let mut enc = snap::raw::Encoder::new();
    for block in data.chunks(SNAPPY_BLOCK) {
        let z = enc
            .compress_vec(block)
            .expect("a block of at most 32 KiB compresses");
        out.extend_from_slice(&(z.len() as u32).to_be_bytes());
        out.extend_from_slice(&z);
    }
}

/// xerial-framed snappy, or raw snappy when the magic header is absent (as Java's
/// `SnappyInputStream` falls back; librdkafka's producer writes raw snappy).
fn snappy_decompress(data: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), CodecError> {
    let Some(mut rest) = data.strip_prefix(&SNAPPY_XERIAL_MAGIC[..]) else {
        return snappy_block(data, out, limit);
    };
    let start = out.len();
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(Codec::Snappy.corrupt("xerial block length cut short"));
        };
        let len = u32::from_be_bytes(*len) as usize;
        let Some(block) = tail.get(..len) else {
            return Err(Codec::Snappy.corrupt(format!(
                "xerial block of {len} bytes runs past the payload's end"
            )));
        };
        // The block's limit is what is left of the payload's; an error names the whole.
        let left = (start + limit).saturating_sub(out.len());
        snappy_block(block, out, left).map_err(|e| match e {
            CodecError::TooLarge { codec, .. } => CodecError::TooLarge { codec, limit },
            e => e,
        })?;
        rest = &tail[len..];
    }
    Ok(())
}

/// One raw snappy block, refused unread if it says it inflates past `limit`.
fn snappy_block(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), CodecError> {
    let corrupt = |e: snap::Error| Codec::Snappy.corrupt(e.to_string());
    let n = snap::raw::decompress_len(block).map_err(corrupt)?;
    if n > limit {
        return Err(CodecError::TooLarge {
            codec: Codec::Snappy,
            limit,
        });
    }
    let at = out.len();
    out.resize(at + n, 0);
    match snap::raw::Decoder::new().decompress(block, &mut out[at..]) {
        Ok(written) if written == n => Ok(()),
        Ok(written) => {
            out.truncate(at);
            Err(Codec::Snappy.corrupt(format!("block gave {written} bytes, said {n}")))
        }
        Err(e) => {
            out.truncate(at);
            Err(corrupt(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zstd frame whose header names a `window_log` window (no single-segment flag: the
    /// encoder is not told the content size).
    fn zstd_with_window(window_log: u32) -> Vec<u8> {
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL).unwrap();
        enc.window_log(window_log).unwrap();
        enc.write_all(&[7u8; 4096]).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn a_zstd_window_past_the_cap_is_refused_not_allocated() {
        let ok = zstd_with_window(ZSTD_WINDOW_LOG_MAX);
        assert_eq!(Codec::Zstd.decompress(&ok).unwrap(), vec![7u8; 4096]);
        let big = zstd_with_window(ZSTD_WINDOW_LOG_MAX + 1);
        let e = Codec::Zstd.decompress(&big).unwrap_err();
        assert!(matches!(e, CodecError::Corrupt { .. }), "{e}");
    }

    /// Records-like bytes: repetitive enough to compress, with some noise.
    fn sample(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| {
                if i % 7 == 0 {
                    (i * 31 % 251) as u8
                } else {
                    b'a' + (i % 5) as u8
                }
            })
            .collect()
    }

    #[test]
    fn every_codec_round_trips_empty_small_and_multi_block_inputs() {
        for codec in Codec::ALL {
            for n in [0, 1, 100, SNAPPY_BLOCK - 1, SNAPPY_BLOCK + 1, 200_000] {
                let data = sample(n);
                let z = codec.compress(&data);
                assert_eq!(codec.decompress(&z).unwrap(), data, "{codec} {n} bytes");
                if codec != Codec::None && n >= 10_000 {
                    assert!(z.len() < data.len() / 2, "{codec} compresses: {}", z.len());
                }
                // Deterministic: the simulator's trace depends on these bytes.
                assert_eq!(codec.compress(&data), z, "{codec} is a pure function");
            }
        }
    }

    #[test]
    fn ids_names_and_attribute_bits_are_kafkas() {
        let ids: Vec<u8> = Codec::ALL.iter().map(|c| c.id()).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4]);
        for c in Codec::ALL {
            assert_eq!(Codec::from_id(c.id()), Ok(c));
            assert_eq!(c.name().parse::<Codec>(), Ok(c));
            assert_eq!(c.to_string(), c.name());
            // The other attribute bits (control 0x20, ...) are kept.
            let a = c.set_in(0x27);
            assert_eq!((a & !CODEC_MASK, Codec::of_attributes(a)), (0x20, Ok(c)));
        }
        for id in 5..=7 {
            assert_eq!(Codec::from_id(id), Err(CodecError::Unknown(id)));
            assert_eq!(
                Codec::of_attributes(0x20 | u16::from(id)),
                Err(CodecError::Unknown(id))
            );
        }
        assert_eq!("LZ4".parse::<Codec>(), Ok(Codec::Lz4));
        assert!(matches!(
            "brotli".parse::<Codec>(),
            Err(CodecError::UnknownName(_))
        ));
    }

    #[test]
    fn snappy_writes_xerial_framing_and_reads_raw_snappy_too() {
        let data = sample(3 * SNAPPY_BLOCK);
        let z = Codec::Snappy.compress(&data);
        assert_eq!(&z[..16], SNAPPY_XERIAL_MAGIC);
        // Three blocks: the first one's length field, then its raw snappy block.
        let len = u32::from_be_bytes(z[16..20].try_into().unwrap()) as usize;
        let first = snap::raw::Decoder::new()
            .decompress_vec(&z[20..20 + len])
            .unwrap();
        assert_eq!(first, &data[..SNAPPY_BLOCK]);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(Codec::Snappy.decompress(&raw).unwrap(), data);
    }

    #[test]
    fn damage_is_an_error_never_a_panic() {
        for codec in Codec::ALL.into_iter().skip(1) {
            let z = codec.compress(&sample(5_000));
            // (Not the last byte: lz4_flex reads a frame whose end mark is cut short.)
            for cut in [0, 1, z.len() / 2] {
                let r = codec.decompress(&z[..cut]);
                assert!(
                    r.is_err() || r.as_deref() != Ok(&sample(5_000)[..]),
                    "{codec} cut {cut}"
                );
            }
            let mut flipped = z.clone();
            for i in (0..z.len()).step_by(7) {
                flipped[i] ^= 0x5a;
            }
            assert!(codec.decompress(&flipped).is_err(), "{codec} garbled");
            assert!(matches!(
                codec.decompress(b"definitely not compressed"),
                Err(CodecError::Corrupt { .. })
            ));
        }
    }

    #[test]
    fn a_payload_inflating_past_the_limit_is_refused() {
        let zeros = vec![0u8; 100_000];
        for codec in Codec::ALL.into_iter().skip(1) {
            let z = codec.compress(&zeros);
            let mut out = b"kept".to_vec();
            assert_eq!(
                codec.decompress_into(&z, &mut out, 99_999),
                Err(CodecError::TooLarge {
                    codec,
                    limit: 99_999
                }),
            );
            assert_eq!(out, b"kept", "{codec}: nothing appended on failure");
            codec.decompress_into(&z, &mut out, 100_000).unwrap();
            assert_eq!(out.len(), 100_004);
        }
    }
}
