//! The client side of the protocol, sans I/O: what a producer, a partition reader and a
//! group consumer decide, separated from how their messages travel. The simulator
//! (`skein-sim`) and the real client (`skein-node`) both drive these types; they keep only
//! history recording, timing and sockets (or the simulated network), so the simulator runs
//! the client logic that ships.
//!
//! Data flow: the host asks [`LeaderCache`] where a partition's leader is (and sends the
//! [`MetadataRequest`](crate::message::MetadataRequest) it asks for when a leader is
//! missing or stale); a producer stamps each batch through [`ProduceClient`], sends it,
//! and hands every answer back to it, which says what to do next ([`ProduceStep`]); a reader
//! keeps a [`FetchCursor`] per partition, which builds each fetch, turns each answer into
//! records and its next position ([`take_records`]) and detects a log truncated under it
//! (KIP-320, reported as a [`Truncation`]); a
//! [`GroupConsumer`](crate::client::GroupConsumer) host translates the consumer's requests to
//! wire messages and their answers back with [`group_wire`]. Every request to the
//! controller quorum goes to [`ControllerRouter::target`], and every answer (or its absence)
//! goes back to the router, which follows `NotController` hints ([`Route`]).
//!
//! ## Produce policy, decided once
//!
//! * **Retriable** ([`retriable`]): not the leader, unknown partition, too few in-sync
//!   replicas (before or after the append), a replication timeout, and a **storage error**.
//!   A storage error means the leader's disk refused the append (the `Storage` trait is
//!   synchronous, so the batch was not written); the broker reports the log offline to the
//!   controller and leadership moves, as Kafka's `KafkaStorageException` is an
//!   invalid-metadata error: refresh the leader and send again. Everything else (an invalid
//!   batch) is certainly not written and final.
//! * **Lost sequence state** (`OutOfOrderSequence`/`UnknownProducerId` on the oldest batch in
//!   flight): only proof of lost producer state if it comes from the real leader. A deposed
//!   leader cut off from the controller answers from a stale log, and acting on its word
//!   would write a batch twice. So the step is [`ProduceStep::CheckLeader`]: the host asks
//!   the controller (the authority; [`ControllerView`]) and reports back. If the answering
//!   broker is not the leader, the same batch (same sequence) goes again. If it is, the
//!   producer moves to the next epoch (KIP-360) and **every batch in flight is re-stamped
//!   and sent again** ([`ProduceStep::EpochBumped`]): their outcome is unknown, and a
//!   producer that silently dropped them would lose acknowledged-to-the-application work.
//!   This is at-least-once for those batches only (a batch written under the old epoch is
//!   not recognised under the new one); every other batch stays exactly-once.
//! * **Fenced** (`InvalidProducerEpoch`): a newer epoch of this producer exists; it stops.

mod fetch;
mod group_consumer;
pub mod group_wire;
mod metadata;
mod produce;
mod router;
mod topic_leaders;
pub mod txn_producer;

pub use fetch::{take_records, FetchCursor, Taken, Truncation};
pub use group_consumer::*;
pub use metadata::{ControllerView, LeaderCache};
pub use produce::{refreshes_metadata, retriable, ProduceClient, ProduceStep};
pub use router::{ControllerRouter, Route};
pub use topic_leaders::TopicLeaders;
pub use txn_producer::{
    TransactionalProducer, TxnClientError, TxnProducerConfig, TxnProducerEvent, TxnProducerOutput,
    TxnProducerRequest, TxnProducerResponse, TxnProducerState,
};

#[cfg(test)]
mod tests;
