//! What the controller accepts and what it sends back.

use super::image::{MetadataDelta, PartitionState};
use super::topic_config::TopicConfig;
use crate::types::{LeaderEpoch, NodeId, Offset, PartitionEpoch, TopicPartition};
use serde::{Deserialize, Serialize};

/// Who sent a request (and so who gets the reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Requester {
    Broker(NodeId),
    /// An admin tool or producer client, by driver-chosen id.
    Client(u64),
}

/// Requests to the controller. Broker-only requests must come from `Requester::Broker` with
/// the same broker id they name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerRequest {
    /// A broker process starts (or retries its registration). `incarnation` must differ
    /// between process lifetimes of the same broker id and stay the same across retries.
    /// `offline_partitions` as in `BrokerHeartbeat`: known before the first heartbeat, so
    /// the registration itself never elects the broker for one of them.
    RegisterBroker {
        broker: NodeId,
        incarnation: u64,
        offline_partitions: Vec<TopicPartition>,
        corrupt_partitions: Vec<TopicPartition>,
    },
    /// Liveness plus metadata pull: the reply carries records from `metadata_offset` on.
    /// `offline_partitions`: every hosted partition whose log this broker cannot serve
    /// (failed to open or to read). The whole set in every heartbeat, so a lost heartbeat
    /// only delays it: the controller takes the broker out of those ISRs and leaderships.
    /// `corrupt_partitions`: the offline ones whose log is damaged (a CRC mismatch, or it
    /// failed to open) rather than briefly unreadable: their copy cannot be vouched for, so
    /// they leave the ELR (KIP-966) once the partition has another leader.
    BrokerHeartbeat {
        broker: NodeId,
        broker_epoch: Offset,
        metadata_offset: Offset,
        offline_partitions: Vec<TopicPartition>,
        corrupt_partitions: Vec<TopicPartition>,
        /// Answers to the unclean recovery manager's queries of the last reply
        /// ([`HeartbeatReply::log_info_queries`]), one per queried partition this broker
        /// can read; sent again with every heartbeat while the query stands.
        log_info: Vec<ReplicaLogInfo>,
    },
    /// A leader proposes a new ISR, naming the epochs its view is based on.
    AlterPartition {
        tp: TopicPartition,
        leader: NodeId,
        leader_epoch: LeaderEpoch,
        partition_epoch: PartitionEpoch,
        new_isr: Vec<NodeId>,
    },
    /// `assignment`, if given, has one replica list per partition (replicas[0] preferred).
    CreateTopic {
        name: String,
        config: TopicConfig,
        assignment: Option<Vec<Vec<NodeId>>>,
    },
    DeleteTopic {
        name: String,
    },
    /// Replace a topic's mutable config (min.insync.replicas, unclean election, retention).
    UpdateTopicConfig {
        name: String,
        config: TopicConfig,
    },
    /// Move leadership back to each partition's first replica where it is eligible.
    /// `None` means every partition.
    ElectPreferredLeaders {
        partitions: Option<Vec<TopicPartition>>,
    },
    /// Allocate a fresh idempotent-producer id (epoch 0).
    InitProducerId,
    /// Metadata pull for non-brokers (tools, simulator observers).
    FetchMetadata {
        from_offset: Offset,
    },
    /// The broker is about to stop (SIGTERM): move every leadership it holds to another
    /// live ISR member and take it out of every ISR, and never elect it or let it back
    /// into an ISR until it registers again with a new incarnation. A partition whose ISR
    /// is only this broker keeps it as leader (moving it would be an unclean election):
    /// it is reported in `remaining`. Retries are answered the same way.
    ControlledShutdown {
        broker: NodeId,
        broker_epoch: Offset,
    },
}

/// Reply to `RegisterBroker`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub broker: NodeId,
    pub broker_epoch: Offset,
}

/// Reply to `BrokerHeartbeat`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    pub broker: NodeId,
    pub broker_epoch: Offset,
    /// Whether the broker is currently fenced (it then may not lead or be in an ISR).
    pub fenced: bool,
    /// Records the broker has not seen (bounded; pull again if `end_offset` is further).
    pub metadata: MetadataDelta,
    /// The unclean recovery manager's query (KIP-966's GetReplicaLogInfo): for each
    /// partition and the leader epoch it is leaderless at, report this broker's replica
    /// in the next heartbeat ([`ReplicaLogInfo`]). Empty unless a partition hosted here
    /// has no ISR or ELR member that can lead.
    pub log_info_queries: Vec<(TopicPartition, LeaderEpoch)>,
}

/// A replica's answer to the unclean recovery manager: what its log holds that it can
/// vouch for. The controller elects the replica with the highest `last_epoch`, then the
/// longest `log_end` (docs/replication-controller.md, "Unclean recovery").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaLogInfo {
    pub tp: TopicPartition,
    /// The partition's leader epoch the query named (answers to an older query are
    /// ignored).
    pub leader_epoch: LeaderEpoch,
    /// The leader epoch of the last record of the usable log (None: empty).
    pub last_epoch: Option<LeaderEpoch>,
    /// Where the usable log ends: the log end offset, or the first damaged batch of a log
    /// that a read found damaged (the replica cuts there if elected).
    pub log_end: Offset,
    /// The replica's high watermark: every record below it was committed.
    pub high_watermark: Offset,
    /// The first damaged batch, if a read found one.
    pub damaged_at: Option<Offset>,
}

/// Producer id and epoch for an idempotent producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdAndEpoch {
    pub producer_id: u64,
    pub producer_epoch: u16,
}

/// Replies, one per request (each names what it answers).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerResponse {
    RegisterBroker(Result<BrokerRegistration, ControllerError>),
    BrokerHeartbeat(Result<HeartbeatReply, ControllerError>),
    /// On success, the partition's new state (with its new partition epoch).
    AlterPartition {
        tp: TopicPartition,
        result: Result<PartitionState, ControllerError>,
    },
    /// On success, the new topic's id.
    CreateTopic {
        name: String,
        result: Result<u64, ControllerError>,
    },
    DeleteTopic {
        name: String,
        result: Result<(), ControllerError>,
    },
    UpdateTopicConfig {
        name: String,
        result: Result<(), ControllerError>,
    },
    /// Per partition: the new leader, or why none was elected.
    ElectPreferredLeaders {
        results: Vec<(TopicPartition, Result<NodeId, ControllerError>)>,
    },
    InitProducerId(Result<ProducerIdAndEpoch, ControllerError>),
    Metadata(MetadataDelta),
    ControlledShutdown(Result<ControlledShutdownReply, ControllerError>),
}

impl ControllerResponse {
    /// `Some(leader hint)` when the reply is a `NotController` refusal (the request was
    /// not acted on: ask the hinted controller, or the next one). A client needs only this
    /// to follow the active controller of a quorum.
    pub fn not_controller(&self) -> Option<Option<NodeId>> {
        let err = match self {
            ControllerResponse::RegisterBroker(r) => r.as_ref().err(),
            ControllerResponse::BrokerHeartbeat(r) => r.as_ref().err(),
            ControllerResponse::AlterPartition { result, .. } => result.as_ref().err(),
            ControllerResponse::CreateTopic { result, .. } => result.as_ref().err(),
            ControllerResponse::DeleteTopic { result, .. }
            | ControllerResponse::UpdateTopicConfig { result, .. } => result.as_ref().err(),
            ControllerResponse::ElectPreferredLeaders { results } => {
                results.first().and_then(|(_, r)| r.as_ref().err())
            }
            ControllerResponse::InitProducerId(r) => r.as_ref().err(),
            ControllerResponse::Metadata(_) => None,
            ControllerResponse::ControlledShutdown(r) => r.as_ref().err(),
        };
        match err {
            Some(ControllerError::NotController { leader }) => Some(*leader),
            _ => None,
        }
    }
}

/// Reply to `ControlledShutdown`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlledShutdownReply {
    pub broker: NodeId,
    /// Partitions this broker still leads (it is their only ISR member).
    pub remaining: Vec<TopicPartition>,
    /// The metadata log's end after the moves: once the broker's image reaches it, the
    /// broker knows it leads only `remaining`.
    pub metadata_offset: Offset,
}

/// Why the controller refused a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ControllerError {
    #[error("invalid request: {reason}")]
    InvalidRequest { reason: String },
    #[error("unknown broker {broker}: register first")]
    UnknownBroker { broker: NodeId },
    #[error("broker {broker}: broker epoch {got} is stale (current {current}); re-register")]
    StaleBrokerEpoch {
        broker: NodeId,
        current: Offset,
        got: Offset,
    },
    #[error("unknown topic {topic:?}")]
    UnknownTopic { topic: String },
    #[error("unknown partition {tp}")]
    UnknownPartition { tp: TopicPartition },
    #[error("topic {topic:?} already exists")]
    TopicAlreadyExists { topic: String },
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: String },
    #[error("invalid topic config: {reason}")]
    InvalidConfig { reason: String },
    #[error("invalid replica assignment: {reason}")]
    InvalidAssignment { reason: String },
    #[error("replication factor {needed} needs that many live brokers, {available} available")]
    InsufficientBrokers { needed: usize, available: usize },
    #[error("{tp}: broker {broker} is not the leader at epoch {leader_epoch} (current leader {current_leader:?}, epoch {current_epoch})")]
    FencedLeaderEpoch {
        tp: TopicPartition,
        broker: NodeId,
        leader_epoch: LeaderEpoch,
        current_leader: Option<NodeId>,
        current_epoch: LeaderEpoch,
    },
    #[error("{tp}: partition epoch {got} is stale (current {current})")]
    InvalidUpdateVersion {
        tp: TopicPartition,
        current: PartitionEpoch,
        got: PartitionEpoch,
    },
    #[error("{tp}: invalid ISR {isr:?}: {reason}")]
    InvalidIsr {
        tp: TopicPartition,
        isr: Vec<NodeId>,
        reason: String,
    },
    #[error("{tp}: broker {broker} is fenced and cannot join the ISR")]
    IneligibleReplica { tp: TopicPartition, broker: NodeId },
    #[error("{tp}: preferred leader {preferred} is not a live ISR member")]
    PreferredLeaderNotAvailable {
        tp: TopicPartition,
        preferred: NodeId,
    },
    #[error("{tp}: preferred leader {leader} already leads")]
    ElectionNotNeeded { tp: TopicPartition, leader: NodeId },
    #[error("internal controller error (a bug): {reason}")]
    Internal { reason: String },
    #[error("producer ids exhausted")]
    ProducerIdsExhausted,
    #[error("controller metadata log failed: {reason}; restart the controller")]
    StorageFailed { reason: String },
    /// Retriable: this controller node is not the active controller of the quorum (or
    /// lost that role before the request's records committed, so their fate is unknown).
    /// `leader` is the node it believes active, if any: send there (or retry later).
    #[error("not the active controller (the active one is {leader:?}); retry there")]
    NotController { leader: Option<NodeId> },
}

impl ControllerError {
    /// Whether retrying the same request (possibly at another controller) may succeed.
    pub fn is_retriable(&self) -> bool {
        matches!(self, ControllerError::NotController { .. })
    }
}

/// Something worth tracing (and asserting on in tests) that the controller decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerEvent {
    BrokerRegistered {
        broker: NodeId,
        broker_epoch: Offset,
    },
    BrokerFenced {
        broker: NodeId,
        reason: FenceReason,
    },
    BrokerUnfenced {
        broker: NodeId,
    },
    LeaderChanged {
        tp: TopicPartition,
        leader: Option<NodeId>,
        leader_epoch: LeaderEpoch,
    },
    /// A partition's eligible leader replicas (KIP-966) changed.
    ElrChanged {
        tp: TopicPartition,
        elr: Vec<NodeId>,
    },
    /// A leader was elected from outside the ISR: records acknowledged by the old ISR may
    /// be lost.
    UncleanLeaderElection {
        tp: TopicPartition,
        leader: NodeId,
        leader_epoch: LeaderEpoch,
        previous_isr: Vec<NodeId>,
    },
    /// The unclean recovery manager elected `leader` (KIP-966): no ISR or ELR member could
    /// lead. `log_end` is where its usable log ends, `committed` the highest high
    /// watermark any answering replica reported (records between the two, if any, are
    /// lost: only Aggressive elects below it), `answers` how many replicas answered.
    UncleanRecovery {
        tp: TopicPartition,
        leader: NodeId,
        leader_epoch: LeaderEpoch,
        log_end: Offset,
        committed: Offset,
        answers: usize,
    },
    /// The metadata log could not be written; the controller refuses everything until it
    /// is reopened (which replays what did reach the disk).
    StorageFailed {
        reason: String,
    },
    /// A broker asked to shut down: its leaderships moved (`moved`), except `remaining`.
    ControlledShutdown {
        broker: NodeId,
        moved: Vec<TopicPartition>,
        remaining: Vec<TopicPartition>,
    },
}

/// Why a broker was fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FenceReason {
    SessionTimeout,
    /// It re-registered with a new incarnation (a process restart).
    Restarted,
}

/// Effects of the controller, collected with `Controller::poll_outputs`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerOutput {
    Send {
        to: Requester,
        response: ControllerResponse,
    },
    Event(ControllerEvent),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_controller_is_read_from_every_refusable_reply() {
        let e = ControllerError::NotController { leader: Some(2) };
        let replies = [
            ControllerResponse::RegisterBroker(Err(e.clone())),
            ControllerResponse::CreateTopic {
                name: "t".into(),
                result: Err(e.clone()),
            },
            ControllerResponse::ElectPreferredLeaders {
                results: vec![(TopicPartition::new("t", 0), Err(e.clone()))],
            },
            ControllerResponse::InitProducerId(Err(e)),
        ];
        for r in &replies {
            assert_eq!(r.not_controller(), Some(Some(2)), "{r:?}");
        }
        let other = ControllerError::InvalidRequest { reason: "x".into() };
        assert_eq!(
            ControllerResponse::DeleteTopic {
                name: "t".into(),
                result: Err(other),
            }
            .not_controller(),
            None
        );
        assert_eq!(
            ControllerResponse::CreateTopic {
                name: "t".into(),
                result: Ok(1),
            }
            .not_controller(),
            None
        );
        let hintless = ControllerResponse::BrokerHeartbeat(Err(ControllerError::NotController {
            leader: None,
        }));
        assert_eq!(hintless.not_controller(), Some(None));
    }
}
