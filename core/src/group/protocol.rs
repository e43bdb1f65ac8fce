//! The consumer-group wire vocabulary: requests, responses and typed errors of Kafka's classic
//! group protocol (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
//! OffsetFetch), and the placement of a group onto a partition of `__consumer_offsets`.

use crate::types::{LeaderEpoch, NodeId, Offset, TopicPartition};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Name of the internal, replicated topic holding group metadata and committed offsets.
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";
/// The only protocol type the coordinator knows: consumers with topic subscriptions.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

pub type GroupId = String;
/// Coordinator-chosen member id, unique within a group for the group's lifetime.
pub type MemberId = String;
/// Static membership: a stable, user-chosen instance id (`group.instance.id`).
pub type InstanceId = String;
/// Generation of a group: bumped on every completed rebalance. 0 = never rebalanced.
pub type GenerationId = u32;
/// Opaque connection id of a client as the host broker knows it (`Address::Client(u64)`).
pub type ClientId = u64;
/// Client-chosen request id, echoed in the matching response.
pub type CorrelationId = u64;

/// Which `__consumer_offsets` partition holds `group_id`: CRC-32 (IEEE, as computed by
/// `crc32fast`) of the group id's UTF-8 bytes, modulo `num_partitions`. Stable across
/// platforms, Rust versions and runs, unlike std's `DefaultHasher`.
pub fn coordinator_partition(group_id: &str, num_partitions: u32) -> u32 {
    assert!(
        num_partitions > 0,
        "__consumer_offsets needs at least one partition"
    );
    crc32fast::hash(group_id.as_bytes()) % num_partitions
}

/// Answer a FindCoordinator request on any broker: the coordinator of a group is the
/// current leader of its `__consumer_offsets` partition. `leader_of` looks a partition
/// up in the broker's metadata image.
pub fn find_coordinator(
    group_id: &str,
    num_partitions: u32,
    leader_of: impl Fn(u32) -> Option<NodeId>,
) -> Result<CoordinatorInfo, GroupError> {
    if group_id.is_empty() {
        return Err(GroupError::InvalidGroupId);
    }
    if num_partitions == 0 {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    let partition = coordinator_partition(group_id, num_partitions);
    match leader_of(partition) {
        Some(node) => Ok(CoordinatorInfo { node, partition }),
        None => Err(GroupError::CoordinatorNotAvailable),
    }
}

/// A consumer's subscription, carried as the metadata of each protocol it proposes.
/// `owned` and `generation` feed sticky assignors (KIP-429): what the member held, and in
/// which generation, so a stale claim loses to a fresher one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    pub topics: Vec<String>,
    pub owned: Vec<TopicPartition>,
    pub generation: Option<GenerationId>,
}

/// One protocol (assignor) a member supports, in its order of preference.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtocolMetadata {
    pub name: String,
    pub subscription: Subscription,
}

/// Partitions given to one member for one generation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberAssignment {
    pub partitions: Vec<TopicPartition>,
}

/// A committed position: the next offset the group should consume, with optional metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetAndMetadata {
    pub offset: Offset,
    /// Leader epoch of the last consumed record, if known (lets a consumer detect truncation).
    pub leader_epoch: Option<LeaderEpoch>,
    pub metadata: String,
}

impl OffsetAndMetadata {
    pub fn new(offset: Offset) -> Self {
        Self {
            offset,
            leader_epoch: None,
            metadata: String::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinGroupRequest {
    pub group_id: GroupId,
    /// `None` for a member joining for the first time (it is then given an id and asked to
    /// rejoin with it, KIP-394), else the id the coordinator gave it.
    pub member_id: Option<MemberId>,
    pub group_instance_id: Option<InstanceId>,
    pub session_timeout: crate::types::Nanos,
    pub rebalance_timeout: crate::types::Nanos,
    pub protocol_type: String,
    pub protocols: Vec<ProtocolMetadata>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinedMember {
    pub member_id: MemberId,
    pub group_instance_id: Option<InstanceId>,
    pub subscription: Subscription,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinGroupResponse {
    pub generation: GenerationId,
    /// The assignor the group agreed on.
    pub protocol: String,
    pub leader: MemberId,
    pub member_id: MemberId,
    /// Every member with its subscription for the chosen protocol; only sent to the leader.
    pub members: Vec<JoinedMember>,
    /// KIP-814: the assignment of this generation is already settled (a static member
    /// rejoined without a rebalance); the leader must not compute a new one, just sync.
    pub skip_assignment: bool,
}

impl JoinGroupResponse {
    pub fn is_leader(&self) -> bool {
        self.leader == self.member_id
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncGroupRequest {
    pub group_id: GroupId,
    pub generation: GenerationId,
    pub member_id: MemberId,
    pub group_instance_id: Option<InstanceId>,
    /// The leader's assignment for every member; empty from followers.
    pub assignments: BTreeMap<MemberId, MemberAssignment>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatRequest {
    pub group_id: GroupId,
    pub generation: GenerationId,
    pub member_id: MemberId,
    pub group_instance_id: Option<InstanceId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaveGroupRequest {
    pub group_id: GroupId,
    pub member_id: MemberId,
    pub group_instance_id: Option<InstanceId>,
}

/// Who is committing. `Member` commits are fenced by generation; `Admin` commits (a simple
/// consumer or an operator's explicit offset reset) are only accepted while the group has no
/// members, so they can never race a live generation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Committer {
    Member {
        member_id: MemberId,
        generation: GenerationId,
        group_instance_id: Option<InstanceId>,
        /// Increases with every commit request of this consumer (retries repeat it): a
        /// commit overtaken in the network by a newer one of the same member is refused
        /// (`StaleCommit`) instead of moving the offset back.
        sequence: u64,
    },
    Admin,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetCommitRequest {
    pub group_id: GroupId,
    pub committer: Committer,
    pub offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetFetchRequest {
    pub group_id: GroupId,
    /// `None` = every partition the group has an offset for.
    pub partitions: Option<Vec<TopicPartition>>,
    /// Refuse with `UnstableOffsetCommit` while a commit for a requested partition is still
    /// being replicated, so a new owner never starts from an offset about to be superseded.
    pub require_stable: bool,
}

/// KIP-447: a transactional producer commits its consumer group's offsets inside its
/// transaction. The coordinator writes them to `__consumer_offsets` as a transactional
/// batch of the producer and keeps them pending until the transaction's marker: the commit
/// marker makes them the group's committed offsets, the abort marker drops them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnOffsetCommitRequest {
    pub group_id: GroupId,
    pub transactional_id: String,
    pub producer_id: u64,
    pub producer_epoch: u16,
    /// The consumer's generation (Kafka's `-1` is `None`: not checked, for a producer that
    /// is not a group member). With `member_id`, checked as an OffsetCommit's is.
    pub generation: Option<GenerationId>,
    /// The consumer's member id (Kafka's empty string is `None`).
    pub member_id: Option<MemberId>,
    pub group_instance_id: Option<InstanceId>,
    pub offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
}

/// Deleting committed offsets, so a partition reads as never committed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetDeleteRequest {
    pub group_id: GroupId,
    pub partitions: Vec<TopicPartition>,
    /// `None`: an operator's OffsetDelete (Kafka's API 47), refused per partition while
    /// the group has members subscribed to its topic. `Some`: a commit of "no position"
    /// (a Kafka client committing offset -1 to reset), checked like that committer's
    /// commits and answered as an OffsetCommit.
    pub committer: Option<Committer>,
}

/// One group as ListGroups reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupListing {
    pub group_id: GroupId,
    /// As [`GroupDescription::state`].
    pub state: String,
    /// `consumer` for every group that ever had members; empty for offsets only.
    pub protocol_type: String,
}

/// A request from a client to a group coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupRequest {
    /// Usually answered by the broker itself via [`find_coordinator`]; a coordinator
    /// answers it only for groups it hosts.
    FindCoordinator {
        group_id: GroupId,
    },
    JoinGroup(JoinGroupRequest),
    SyncGroup(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    /// An operator's view of a group (`skein group describe`): members, generation,
    /// assignment and committed offsets. Read-only; any client may ask.
    DescribeGroup {
        group_id: GroupId,
    },
    /// The groups of every coordinator the answering broker hosts (Kafka's ListGroups is
    /// per broker too). Answered by the broker, not routed by group id.
    ListGroups,
    /// Delete a group with no members: its committed offsets and its metadata
    /// (GroupIdNotFound if it does not exist, NonEmptyGroup while it has members).
    DeleteGroup {
        group_id: GroupId,
    },
    OffsetDelete(OffsetDeleteRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
}

impl GroupRequest {
    pub fn group_id(&self) -> &str {
        match self {
            GroupRequest::FindCoordinator { group_id } => group_id,
            GroupRequest::JoinGroup(r) => &r.group_id,
            GroupRequest::SyncGroup(r) => &r.group_id,
            GroupRequest::Heartbeat(r) => &r.group_id,
            GroupRequest::LeaveGroup(r) => &r.group_id,
            GroupRequest::OffsetCommit(r) => &r.group_id,
            GroupRequest::OffsetFetch(r) => &r.group_id,
            GroupRequest::DescribeGroup { group_id } => group_id,
            GroupRequest::ListGroups => "",
            GroupRequest::DeleteGroup { group_id } => group_id,
            GroupRequest::OffsetDelete(r) => &r.group_id,
            GroupRequest::TxnOffsetCommit(r) => &r.group_id,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinatorInfo {
    pub node: NodeId,
    pub partition: u32,
}

/// A coordinator's answer; each variant matches one request kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupResponse {
    FindCoordinator(Result<CoordinatorInfo, GroupError>),
    JoinGroup(Result<JoinGroupResponse, GroupError>),
    SyncGroup(Result<MemberAssignment, GroupError>),
    Heartbeat(Result<(), GroupError>),
    LeaveGroup(Result<(), GroupError>),
    /// All-or-nothing: the offsets of one request are one append.
    OffsetCommit(Result<(), GroupError>),
    /// Partitions without a committed offset are absent.
    OffsetFetch(Result<BTreeMap<TopicPartition, OffsetAndMetadata>, GroupError>),
    DescribeGroup(Result<GroupDescription, GroupError>),
    ListGroups(Result<Vec<GroupListing>, GroupError>),
    DeleteGroup(Result<(), GroupError>),
    /// The partitions refused because the group is subscribed to their topic; the rest
    /// were deleted.
    OffsetDelete(Result<Vec<TopicPartition>, GroupError>),
    /// The offsets are written (pending until the transaction's marker).
    TxnOffsetCommit(Result<(), GroupError>),
}

/// One member as `DescribeGroup` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberDescription {
    pub member_id: MemberId,
    pub group_instance_id: Option<InstanceId>,
    /// Partitions assigned to it in the current generation (empty while rebalancing).
    pub assignment: Vec<TopicPartition>,
    /// The topics it subscribes to (under the group's protocol, else its first one).
    #[serde(default)]
    pub subscription: Vec<String>,
}

/// A group as its coordinator holds it. A group the coordinator does not know is
/// reported with state `"Dead"`, generation 0 and nothing else.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDescription {
    pub group_id: GroupId,
    /// `Empty`, `PreparingRebalance`, `CompletingRebalance`, `Stable` or `Dead`.
    pub state: String,
    pub generation: GenerationId,
    /// The agreed assignor, once a generation completed.
    pub protocol: Option<String>,
    pub leader: Option<MemberId>,
    pub members: Vec<MemberDescription>,
    pub offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
}

impl GroupResponse {
    /// The error carried by this response, if any.
    pub fn error(&self) -> Option<&GroupError> {
        match self {
            GroupResponse::FindCoordinator(r) => r.as_ref().err(),
            GroupResponse::JoinGroup(r) => r.as_ref().err(),
            GroupResponse::SyncGroup(r) => r.as_ref().err(),
            GroupResponse::Heartbeat(r) => r.as_ref().err(),
            GroupResponse::LeaveGroup(r) => r.as_ref().err(),
            GroupResponse::OffsetCommit(r) => r.as_ref().err(),
            GroupResponse::OffsetFetch(r) => r.as_ref().err(),
            GroupResponse::DescribeGroup(r) => r.as_ref().err(),
            GroupResponse::ListGroups(r) => r.as_ref().err(),
            GroupResponse::DeleteGroup(r) => r.as_ref().err(),
            GroupResponse::OffsetDelete(r) => r.as_ref().err(),
            GroupResponse::TxnOffsetCommit(r) => r.as_ref().err(),
        }
    }

    /// The error response of the same kind as `request`.
    pub fn error_for(request: &GroupRequest, error: GroupError) -> Self {
        match request {
            GroupRequest::FindCoordinator { .. } => GroupResponse::FindCoordinator(Err(error)),
            GroupRequest::JoinGroup(_) => GroupResponse::JoinGroup(Err(error)),
            GroupRequest::SyncGroup(_) => GroupResponse::SyncGroup(Err(error)),
            GroupRequest::Heartbeat(_) => GroupResponse::Heartbeat(Err(error)),
            GroupRequest::LeaveGroup(_) => GroupResponse::LeaveGroup(Err(error)),
            GroupRequest::OffsetCommit(_) => GroupResponse::OffsetCommit(Err(error)),
            GroupRequest::OffsetFetch(_) => GroupResponse::OffsetFetch(Err(error)),
            GroupRequest::DescribeGroup { .. } => GroupResponse::DescribeGroup(Err(error)),
            GroupRequest::ListGroups => GroupResponse::ListGroups(Err(error)),
            GroupRequest::DeleteGroup { .. } => GroupResponse::DeleteGroup(Err(error)),
            GroupRequest::OffsetDelete(r) if r.committer.is_some() => {
                GroupResponse::OffsetCommit(Err(error))
            }
            GroupRequest::OffsetDelete(_) => GroupResponse::OffsetDelete(Err(error)),
            GroupRequest::TxnOffsetCommit(_) => GroupResponse::TxnOffsetCommit(Err(error)),
        }
    }
}

/// Typed group-protocol errors, as in Kafka.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum GroupError {
    #[error("this broker is not the coordinator of the group")]
    NotCoordinator,
    #[error("the coordinator is still loading group state from __consumer_offsets")]
    CoordinatorLoadInProgress,
    #[error("the coordinator is not available")]
    CoordinatorNotAvailable,
    #[error("the generation is not the group's current generation")]
    IllegalGeneration,
    #[error("the member id is not known to the group")]
    UnknownMemberId,
    #[error("the group is rebalancing: rejoin")]
    RebalanceInProgress,
    #[error("another member has taken over this group.instance.id")]
    FencedInstanceId,
    #[error("rejoin with the member id {0} the coordinator assigned")]
    MemberIdRequired(MemberId),
    #[error("the member's protocol type or assignors do not match the group's")]
    InconsistentGroupProtocol,
    #[error("session timeout outside the coordinator's allowed range")]
    InvalidSessionTimeout,
    #[error("the group id is empty")]
    InvalidGroupId,
    #[error("the group has reached its maximum size")]
    GroupMaxSizeReached,
    #[error("a commit for a requested partition is still being replicated: retry")]
    UnstableOffsetCommit,
    #[error("the leader's assignment is invalid: {0}")]
    InvalidAssignment(String),
    #[error("offset metadata is larger than the coordinator accepts")]
    OffsetMetadataTooLarge,
    #[error("the group has active members; only a member of the current generation may commit")]
    NonEmptyGroup,
    #[error("a newer commit of this member supersedes this one")]
    StaleCommit,
    #[error("the group does not exist")]
    GroupIdNotFound,
    /// A TxnOffsetCommit of a producer epoch older than one this coordinator (or the
    /// `__consumer_offsets` partition's producer state) has seen for the producer id: a
    /// newer instance of the transactional producer exists.
    #[error("invalid (fenced) producer epoch: {0}")]
    InvalidProducerEpoch(String),
}

impl GroupError {
    /// Errors after which the client should find the coordinator again.
    pub fn needs_coordinator_lookup(&self) -> bool {
        matches!(
            self,
            GroupError::NotCoordinator | GroupError::CoordinatorNotAvailable
        )
    }

    /// Errors worth retrying unchanged after a backoff.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            GroupError::NotCoordinator
                | GroupError::CoordinatorNotAvailable
                | GroupError::CoordinatorLoadInProgress
                | GroupError::UnstableOffsetCommit
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_stable_crc32() {
        // Golden values: changing the hash would move every group to another coordinator
        // and orphan its committed offsets.
        assert_eq!(crc32fast::hash(b"orders"), 0xe52f_fdee);
        for n in [1u32, 7, 50] {
            assert_eq!(coordinator_partition("orders", n), 0xe52f_fdee % n);
        }
        assert!(coordinator_partition("", 50) < 50);
    }

    #[test]
    fn find_coordinator_names_problems() {
        assert_eq!(
            find_coordinator("", 3, |_| Some(1)),
            Err(GroupError::InvalidGroupId)
        );
        assert_eq!(
            find_coordinator("g", 3, |_| None),
            Err(GroupError::CoordinatorNotAvailable)
        );
        let p = coordinator_partition("g", 3);
        assert_eq!(
            find_coordinator("g", 3, |q| Some(q + 10)),
            Ok(CoordinatorInfo {
                node: p + 10,
                partition: p
            })
        );
    }
}
