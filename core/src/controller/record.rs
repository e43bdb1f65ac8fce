//! Metadata records: the only way controller state changes.
//!
//! The controller never mutates its [`MetadataImage`](super::MetadataImage) directly; it
//! appends records to its metadata log and applies them. Brokers replay the same records
//! (pulled through heartbeats), so every node that has applied records `0..n` holds the
//! same image. That is also what lets a replicated controller quorum replace the single
//! controller later: only the log's replication changes, not the state machine.

use super::topic_config::TopicConfig;
use crate::types::{LeaderEpoch, NodeId, Offset, PartitionEpoch, TopicPartition};
use serde::{Deserialize, Serialize};

/// One entry of the metadata log. The offset of a record in the log is its identity:
/// a broker's *broker epoch* is the offset of its `BrokerRegistered` record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataRecord {
    /// A broker (re-)registered. Its broker epoch becomes the offset of this record and it
    /// is unfenced. `incarnation` distinguishes process restarts of the same broker id.
    BrokerRegistered { broker: NodeId, incarnation: u64 },
    /// The broker missed its session timeout (or restarted): it may not lead or be in an ISR
    /// (except as the last ISR member, see `docs/replication-controller.md`).
    BrokerFenced {
        broker: NodeId,
        broker_epoch: Offset,
    },
    /// A fenced broker is alive again and has caught up with its fencing.
    BrokerUnfenced {
        broker: NodeId,
        broker_epoch: Offset,
    },
    /// A topic was created; its partitions follow as `PartitionChanged` records.
    TopicCreated {
        name: String,
        topic_id: u64,
        config: TopicConfig,
    },
    /// A topic's mutable configuration changed (partition count and replication factor
    /// never change).
    TopicConfigChanged {
        name: String,
        topic_id: u64,
        config: TopicConfig,
    },
    /// A topic and all its partitions were deleted.
    TopicDeleted { name: String, topic_id: u64 },
    /// The full new state of one partition (created, leader change, ISR or ELR change).
    PartitionChanged {
        tp: TopicPartition,
        replicas: Vec<NodeId>,
        isr: Vec<NodeId>,
        /// Eligible leader replicas (KIP-966); see [`super::PartitionState::elr`].
        elr: Vec<NodeId>,
        last_known_elr: Vec<NodeId>,
        leader: Option<NodeId>,
        leader_epoch: LeaderEpoch,
        partition_epoch: PartitionEpoch,
    },
    /// The preceding `PartitionChanged` (same batch) was an unclean recovery (KIP-966):
    /// `leader` leads at `leader_epoch` with the usable log the manager chose it for. A
    /// leader whose log a read found damaged cuts it at the first damaged batch before it
    /// leads, and the partition's replicas may truncate below their high watermark from
    /// now on (reported). Kept in the partition's state as `recovered_at_epoch`.
    UncleanRecovery {
        tp: TopicPartition,
        leader: NodeId,
        leader_epoch: LeaderEpoch,
        log_end: Offset,
    },
    /// Producer ids `first..first + count` are handed out; ids below `first + count` are
    /// never handed out again, even across controller restarts.
    ProducerIdsAllocated { first: u64, count: u64 },
}

impl MetadataRecord {
    /// Encodes the record for the metadata log (bincode).
    pub fn encode(&self) -> Vec<u8> {
        // Encoding an in-memory enum of plain data cannot fail.
        bincode::serialize(self).expect("metadata record encodes")
    }

    /// Decodes a record read back from the metadata log.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        bincode::deserialize(bytes).map_err(|e| e.to_string())
    }
}
