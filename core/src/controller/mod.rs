//! The metadata controller: broker liveness, topic and partition placement, leader
//! election, ISR changes and producer-id allocation, as one sans-I/O state machine.
//!
//! Data flow: requests arrive through [`Controller::handle`] and time through
//! [`Controller::tick`]; each decision becomes [`MetadataRecord`]s appended (one batch per
//! decision) to the controller's durable metadata log and then applied to its
//! [`MetadataImage`]. Replies and events leave through [`Controller::poll_outputs`].
//! Brokers never get pushed anything: each heartbeat carries the broker's metadata offset
//! and the reply carries the records after it, which the broker applies to its own image,
//! so lost, duplicated or reordered messages are harmless. See
//! `docs/replication-controller.md` for the protocol and its invariants.

mod check;
pub mod election;
pub mod image;
mod machine;
mod metadata_log;
mod quorum;
pub mod record;
pub mod request;
pub mod topic_config;
mod unclean_recovery;

pub use check::{check_decision, ControllerCheckError};
pub use election::{assign_replicas, elect_leader, Election};
pub use image::{
    BrokerInfo, BrokerState, ImageError, MetadataDelta, MetadataImage, PartitionState, TopicInfo,
};
pub use machine::{Controller, ControllerConfig, ControllerState, Journal, JournalError, Written};
pub use metadata_log::ControllerOpenError;
pub use metadata_log::MetadataLog;
pub use quorum::{
    QuorumConfig, QuorumController, QuorumInput, QuorumOpenError, QuorumOutput, RaftJournal,
};
pub use record::MetadataRecord;
pub use request::{
    BrokerRegistration, ControlledShutdownReply, ControllerError, ControllerEvent,
    ControllerOutput, ControllerRequest, ControllerResponse, FenceReason, HeartbeatReply,
    ProducerIdAndEpoch, ReplicaLogInfo, Requester,
};
pub use topic_config::{CleanupPolicy, TopicConfig, UncleanRecoveryStrategy};

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod quorum_tests;
#[cfg(test)]
mod tests;
