//! The replica's use of the control branch's `ProducerStateTable`: one check per incoming
//! batch, mapped onto what the produce path needs.

use crate::log::BatchHeader;
pub use crate::producer::ProducerStateTable;
use crate::producer::SequenceCheck;
use crate::types::Offset;

/// What to do with an incoming batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProducerCheck {
    Append,
    /// Already written: acknowledge with the original offset, once committed.
    Duplicate {
        base_offset: Offset,
    },
    OutOfOrderSequence(String),
    InvalidProducerEpoch(String),
    UnknownProducerId(String),
}

/// `batch`: the incoming batch's header (producer identity and record count).
pub(crate) fn check(table: &ProducerStateTable, batch: &BatchHeader) -> ProducerCheck {
    let Some(info) = &batch.producer else {
        return ProducerCheck::Append;
    };
    match table.check(info, batch.record_count) {
        SequenceCheck::Append => ProducerCheck::Append,
        SequenceCheck::Duplicate { base_offset, .. } => ProducerCheck::Duplicate { base_offset },
        SequenceCheck::OutOfOrderSequence { expected, received } => {
            ProducerCheck::OutOfOrderSequence(format!(
                "producer {}: expected sequence {expected}, got {received}",
                info.producer_id
            ))
        }
        SequenceCheck::InvalidProducerEpoch { current, received } => {
            ProducerCheck::InvalidProducerEpoch(format!(
                "producer {}: epoch {received} is older than {current}",
                info.producer_id
            ))
        }
        SequenceCheck::UnknownProducerId { received } => ProducerCheck::UnknownProducerId(format!(
            "producer {} unknown to this partition; first sequence {received} is not 0",
            info.producer_id
        )),
    }
}

/// Record a batch now in the log at `base_offset` (`batch`: its header as the producer
/// sent it).
pub(crate) fn record(table: &mut ProducerStateTable, batch: &BatchHeader, base_offset: Offset) {
    if let Some(info) = &batch.producer {
        if batch.record_count > 0 {
            let txn = batch.attributes & crate::log::TRANSACTIONAL_BATCH_BIT != 0;
            table.record_append(info, batch.record_count, base_offset, txn);
        }
    }
}
