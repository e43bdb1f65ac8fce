//! Skein errors as Kafka error codes (the `error_code` fields of responses). One place, so
//! every API maps the same Skein condition to the same code, and clients retry exactly
//! what Kafka brokers would have them retry (NOT_LEADER_OR_FOLLOWER: refresh metadata and
//! retry; NOT_ENOUGH_REPLICAS: retry; UNKNOWN_TOPIC_OR_PARTITION: refresh, maybe retry).

use crate::client::ClientError;
use kafka_protocol::ResponseError as E;
use skein_core::controller::ControllerError;
use skein_core::group::GroupError;
use skein_core::message::{ConsumerFetchError, ProduceError};

pub const NONE: i16 = 0;

pub fn produce(e: &ProduceError) -> i16 {
    match e {
        ProduceError::NotLeader { .. } => E::NotLeaderOrFollower,
        ProduceError::UnknownTopicOrPartition => E::UnknownTopicOrPartition,
        ProduceError::NotEnoughReplicas { .. } => E::NotEnoughReplicas,
        ProduceError::NotEnoughReplicasAfterAppend { .. } => E::NotEnoughReplicasAfterAppend,
        ProduceError::RequestTimedOut => E::RequestTimedOut,
        ProduceError::OutOfOrderSequence(_) => E::OutOfOrderSequenceNumber,
        ProduceError::InvalidProducerEpoch(_) => E::InvalidProducerEpoch,
        ProduceError::UnknownProducerId(_) => E::UnknownProducerId,
        ProduceError::InvalidRecord(_) => E::InvalidRecord,
        ProduceError::Storage(_) => E::KafkaStorageError,
        ProduceError::CorruptBatch(_) => E::CorruptMessage,
        ProduceError::BatchTooLarge { .. } => E::MessageTooLarge,
        ProduceError::InvalidTxnState(_) => E::InvalidTxnState,
    }
    .code()
}

pub fn fetch(e: &ConsumerFetchError) -> i16 {
    match e {
        ConsumerFetchError::NotLeader { .. } => E::NotLeaderOrFollower,
        ConsumerFetchError::FencedLeaderEpoch { .. } => E::FencedLeaderEpoch,
        ConsumerFetchError::UnknownLeaderEpoch { .. } => E::UnknownLeaderEpoch,
        ConsumerFetchError::UnknownTopicOrPartition => E::UnknownTopicOrPartition,
        ConsumerFetchError::OffsetOutOfRange { .. } => E::OffsetOutOfRange,
        // Only answered to a fetch that names its last fetched epoch, which no version served
        // here carries; were it answered, a pre-v12 client's nearest meaning is this.
        ConsumerFetchError::DivergingEpoch { .. } => E::OffsetOutOfRange,
        ConsumerFetchError::Storage(_) => E::KafkaStorageError,
    }
    .code()
}

/// A topic-admin failure (CreateTopics) from the controller or on the way there.
pub fn admin(e: &ClientError) -> i16 {
    match e {
        ClientError::Controller(c) => match c {
            ControllerError::TopicAlreadyExists { .. } => E::TopicAlreadyExists,
            ControllerError::InvalidTopicName { .. } => E::InvalidTopicException,
            ControllerError::InvalidConfig { .. } => E::InvalidConfig,
            ControllerError::InvalidAssignment { .. } => E::InvalidReplicaAssignment,
            ControllerError::InsufficientBrokers { .. } => E::InvalidReplicationFactor,
            ControllerError::UnknownTopic { .. } => E::UnknownTopicOrPartition,
            ControllerError::InvalidRequest { .. } => E::InvalidRequest,
            _ => E::UnknownServerError,
        },
        ClientError::Timeout { .. } => E::RequestTimedOut,
        ClientError::Connect { .. } | ClientError::Io { .. } => E::NotController,
        _ => E::UnknownServerError,
    }
    .code()
}

/// A group coordinator's refusal.
pub fn group(e: &GroupError) -> i16 {
    match e {
        GroupError::NotCoordinator => E::NotCoordinator,
        GroupError::CoordinatorLoadInProgress => E::CoordinatorLoadInProgress,
        GroupError::CoordinatorNotAvailable => E::CoordinatorNotAvailable,
        GroupError::IllegalGeneration => E::IllegalGeneration,
        GroupError::UnknownMemberId => E::UnknownMemberId,
        GroupError::RebalanceInProgress => E::RebalanceInProgress,
        GroupError::FencedInstanceId => E::FencedInstanceId,
        GroupError::MemberIdRequired(_) => E::MemberIdRequired,
        GroupError::InconsistentGroupProtocol => E::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout => E::InvalidSessionTimeout,
        GroupError::InvalidGroupId => E::InvalidGroupId,
        GroupError::GroupMaxSizeReached => E::GroupMaxSizeReached,
        GroupError::UnstableOffsetCommit => E::UnstableOffsetCommit,
        // Kafka does not check the leader's assignment; the nearest is a bad request.
        GroupError::InvalidAssignment(_) => E::InvalidRequest,
        GroupError::OffsetMetadataTooLarge => E::OffsetMetadataTooLarge,
        // A generation-less commit to a group with members: Kafka answers UNKNOWN_MEMBER_ID.
        GroupError::NonEmptyGroup => E::UnknownMemberId,
        // A newer commit of the member already stands; Kafka has no such code.
        GroupError::StaleCommit => E::UnknownServerError,
        GroupError::GroupIdNotFound => E::GroupIdNotFound,
        // A TxnOffsetCommit of a fenced producer epoch (KIP-447).
        GroupError::InvalidProducerEpoch(_) => E::InvalidProducerEpoch,
    }
    .code()
}

pub fn timed_out() -> i16 {
    E::RequestTimedOut.code()
}

pub fn unknown_topic() -> i16 {
    E::UnknownTopicOrPartition.code()
}

pub fn leader_not_available() -> i16 {
    E::LeaderNotAvailable.code()
}

pub fn corrupt_message() -> i16 {
    E::CorruptMessage.code()
}

/// A produced batch names a compression codec Kafka does not have (attributes 5-7).
pub fn unsupported_compression() -> i16 {
    E::UnsupportedCompressionType.code()
}

pub fn message_too_large() -> i16 {
    E::MessageTooLarge.code()
}

pub fn unsupported_version() -> i16 {
    E::UnsupportedVersion.code()
}

pub fn invalid_request() -> i16 {
    E::InvalidRequest.code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_kafkas() {
        let not_leader = ProduceError::NotLeader {
            leader: Some(2),
            leader_epoch: 3,
        };
        assert_eq!(produce(&not_leader), 6);
        assert_eq!(produce(&ProduceError::UnknownTopicOrPartition), 3);
        let few = ProduceError::NotEnoughReplicas {
            isr: 1,
            min_insync: 2,
        };
        assert_eq!(produce(&few), 19);
        assert_eq!(produce(&ProduceError::RequestTimedOut), 7);
        assert_eq!(produce(&ProduceError::CorruptBatch("crc".into())), 2);
        let big = ProduceError::BatchTooLarge { size: 9, max: 8 };
        assert_eq!(produce(&big), 10);
        let range = ConsumerFetchError::OffsetOutOfRange {
            offset: 9,
            log_start_offset: 0,
            high_watermark: 5,
        };
        assert_eq!(fetch(&range), 1);
        let exists =
            ClientError::Controller(ControllerError::TopicAlreadyExists { topic: "t".into() });
        assert_eq!(admin(&exists), 36);
        assert_eq!(group(&GroupError::NotCoordinator), 16);
        assert_eq!(group(&GroupError::RebalanceInProgress), 27);
        assert_eq!(group(&GroupError::MemberIdRequired("m".into())), 79);
        assert_eq!(unsupported_compression(), 76);
    }
}
