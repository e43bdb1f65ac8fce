//! Record batches: the unit of append, replication and fetch. The format is documented
//! in docs/format.md; each file here holds one part of it:
//!
//! - `record`: records and batches as values ([`RecordBatch`]);
//! - `header`: the wire layout, the fixed header ([`BatchHeader`]) and its CRC check;
//! - `encode` and `decode`: a [`RecordBatch`] to bytes and back;
//! - `walk`: the records of encoded bytes, checked one by one without decoding them;
//! - `encoded`: batches still encoded as they travel ([`EncodedBatch`], [`EncodedBatches`]);
//! - `checked`: the one check a batch passes before a log appends it ([`CheckedBatch`])
//!   and a leader's placing of it at the log end;
//! - `serde_bytes`: encoded batches serialize as one byte string.
//!
//! The CRC itself is in [`crate::log::crc`].

mod checked;
mod cursor;
mod decode;
mod encode;
mod encoded;
mod header;
mod record;
mod serde_bytes;
mod walk;

pub use checked::*;
pub use encoded::*;
pub use header::*;
pub use record::*;
pub use walk::*;

#[cfg(test)]
mod tests;
