//! Idempotent producers: the broker-side sequence check ([`ProducerStateTable`], one per
//! partition leader) and the client-side sequence allocator ([`IdempotentProducer`]).
//!
//! Data flow: a producer gets an id from the controller (`InitProducerId`), stamps each batch
//! with (producer id, epoch, base sequence), and retries a batch with the same stamp until it
//! gets an answer. The partition leader checks every stamped batch against its table:
//! the next sequence is appended, a retry of one of the last five batches is acknowledged
//! with its original offsets, a gap is refused, and an older epoch is fenced.

pub mod client;
pub mod state;
pub mod txn_index;

pub use client::{
    Completion, IdempotentProducer, InFlightBatch, ProduceOutcome, ProducerError, MAX_IN_FLIGHT,
};
pub use state::{
    BatchMetadata, MarkerCheck, ProducerEntry, ProducerStateTable, SequenceCheck,
    MAX_CACHED_BATCHES,
};
pub use txn_index::TxnIndex;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;
