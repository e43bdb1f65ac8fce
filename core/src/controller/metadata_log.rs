//! The controller's durable metadata log: one metadata record per log record, one log
//! batch per controller decision (so a decision's records reach the disk all or nothing).
//!
//! PLACEHOLDER until the storage branch's `PartitionLog` lands: records are kept encoded
//! in memory only (not durable). The interface is the one the PartitionLog-backed version
//! keeps.

use super::record::MetadataRecord;
use crate::types::{Nanos, Offset};

/// Why the metadata log could not be opened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControllerOpenError {
    #[error("metadata log: {0}")]
    Log(String),
    #[error("metadata log record at offset {offset} does not decode: {reason}")]
    Decode { offset: Offset, reason: String },
    #[error("metadata log does not replay: {0}")]
    Replay(#[from] super::image::ImageError),
}

pub(crate) struct MetadataLog<S> {
    #[allow(dead_code)]
    storage: S,
    encoded: Vec<Vec<u8>>,
}

impl<S> MetadataLog<S> {
    /// Opens the log in `dir` and returns every record in it, in order.
    pub(crate) fn open(
        storage: S,
        _dir: &str,
    ) -> Result<(Self, Vec<MetadataRecord>), ControllerOpenError> {
        Ok((
            Self {
                storage,
                encoded: Vec::new(),
            },
            Vec::new(),
        ))
    }

    pub(crate) fn end_offset(&self) -> Offset {
        self.encoded.len() as Offset
    }

    /// Appends `records` as one batch and makes them durable before returning.
    pub(crate) fn append(&mut self, records: &[MetadataRecord], _now: Nanos) -> Result<(), String> {
        self.encoded.extend(records.iter().map(|r| r.encode()));
        Ok(())
    }
}
