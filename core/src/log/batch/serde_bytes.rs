//! Serde glue: encoded batches serialize as one byte string.

use super::encoded::{EncodedBatch, EncodedBatches};
use serde::{Deserialize, Serialize};
use std::fmt;

/// As one byte string (bincode: the length, then the bytes in one copy) rather than a
/// sequence of `u8`s, which serde's derive would give and bincode writes byte by byte.
impl Serialize for EncodedBatches {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.as_bytes())
    }
}

impl<'de> Deserialize<'de> for EncodedBatches {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_byte_string(d, "encoded record batches").map(EncodedBatches::new)
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

/// A byte string, as [`EncodedBatches`].
impl Serialize for EncodedBatch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.as_bytes())
    }
}

impl<'de> Deserialize<'de> for EncodedBatch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_byte_string(d, "an encoded record batch").map(EncodedBatch::from_bytes)
    }
}
