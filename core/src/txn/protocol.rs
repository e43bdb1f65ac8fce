//! The transaction wire vocabulary (KIP-98, KIP-447, KIP-890): the requests a transactional
//! producer sends its transaction coordinator, the coordinator's answers and typed errors,
//! the marker a coordinator writes to every partition of a finished transaction, and the
//! placement of a transactional id onto a partition of `__transaction_state`.
//!
//! Who talks to whom:
//! ```text
//!  producer --Txn{FindCoordinator}-------------> any broker (answered from its image)
//!  producer --Txn{InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn}--> coordinator
//!  producer --Produce (transactional batch)----> partition leader
//!  partition leader --Txn{AddPartitionsToTxn verify_only}--> coordinator   (KIP-890 part 1)
//!  producer --Group{TxnOffsetCommit}-----------> group coordinator          (KIP-447)
//!  coordinator --WriteTxnMarker---------------> leader of each partition in the transaction
//! ```
//! The coordinator of a transactional id is the leader of its `__transaction_state`
//! partition; its *coordinator epoch* is that partition's leader epoch, carried in every
//! marker so a partition refuses markers from a deposed coordinator.

use crate::group::GroupId;
use crate::types::{LeaderEpoch, NodeId, TopicPartition};
use serde::{Deserialize, Serialize};

/// Name of the internal, replicated topic holding the transaction coordinators' state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// The producer's stable, user-chosen id (`transactional.id`).
pub type TransactionalId = String;

/// A producer identity as the coordinator hands it out (same shape as the controller's
/// answer to a plain idempotent producer).
pub use crate::controller::ProducerIdAndEpoch;

/// Which `__transaction_state` partition holds `transactional_id`: the same stable hash as
/// groups use ([`crate::group::coordinator_partition`]).
pub fn txn_partition(transactional_id: &str, num_partitions: u32) -> u32 {
    crate::group::coordinator_partition(transactional_id, num_partitions)
}

/// How a transaction ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TxnResult {
    Commit,
    Abort,
}

impl TxnResult {
    /// Kafka's control record type: 0 = abort, 1 = commit.
    pub fn control_type(self) -> i16 {
        match self {
            TxnResult::Abort => 0,
            TxnResult::Commit => 1,
        }
    }

    pub fn from_control_type(t: i16) -> Option<Self> {
        match t {
            0 => Some(TxnResult::Abort),
            1 => Some(TxnResult::Commit),
            _ => None,
        }
    }
}

/// A consumer's isolation level (Kafka's `isolation.level`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IsolationLevel {
    /// Everything below the high watermark, aborted records included.
    #[default]
    ReadUncommitted,
    /// Only below the last stable offset, with the aborted transactions listed so the
    /// reader drops their records.
    ReadCommitted,
}

/// One aborted transaction overlapping a fetched range (Kafka's FetchResponse
/// `AbortedTransactions`, plus the marker's offset): a read_committed reader drops
/// `producer_id`'s transactional records in `[first_offset, last_offset)`, where
/// `last_offset` is the offset of the abort marker. (Kafka's wire carries only
/// `first_offset` and lets the reader find the marker among the control batches; Skein's
/// own fetch leaves control batches out, so it says where the marker is.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AbortedTxn {
    pub producer_id: u64,
    pub first_offset: crate::types::Offset,
    pub last_offset: crate::types::Offset,
}

impl AbortedTxn {
    /// Whether a transactional record of `producer_id` at `offset` belongs to this aborted
    /// transaction (and so must not be returned to a read_committed reader).
    pub fn covers(&self, producer_id: u64, offset: crate::types::Offset) -> bool {
        self.producer_id == producer_id && self.first_offset <= offset && offset < self.last_offset
    }
}

/// Where a transactional id's coordinator is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnCoordinatorInfo {
    pub node: NodeId,
    pub partition: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitProducerIdRequest {
    pub transactional_id: TransactionalId,
    /// `transaction.timeout.ms`: the coordinator aborts an Ongoing transaction this old.
    pub transaction_timeout_ms: u32,
    /// KIP-360: the identity the producer holds, if any, so a producer that lost track of
    /// its epoch can resume without being fenced by itself. None: a fresh producer.
    pub current: Option<ProducerIdAndEpoch>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddPartitionsToTxnRequest {
    pub transactional_id: TransactionalId,
    pub producer_id: u64,
    pub producer_epoch: u16,
    pub partitions: Vec<TopicPartition>,
    /// KIP-890 part 1: sent by a partition leader before it appends a transactional batch,
    /// asking only whether the partition is already in the producer's ongoing transaction
    /// (nothing is added).
    pub verify_only: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddOffsetsToTxnRequest {
    pub transactional_id: TransactionalId,
    pub producer_id: u64,
    pub producer_epoch: u16,
    /// The group whose offsets the transaction will commit: its `__consumer_offsets`
    /// partition joins the transaction.
    pub group_id: GroupId,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndTxnRequest {
    pub transactional_id: TransactionalId,
    pub producer_id: u64,
    pub producer_epoch: u16,
    pub result: TxnResult,
    /// The client cannot learn a bumped epoch from the answer (Kafka's EndTxn before v5,
    /// i.e. every client of the Kafka listener's non-flexible versions), so the coordinator
    /// ends this transaction at the epoch it has, as Kafka does for such clients: no
    /// KIP-890 part-2 bump, and a retry at the same epoch is answered as the original.
    #[serde(default)]
    pub keep_epoch: bool,
}

/// A request to a transaction coordinator (FindCoordinator: to any broker).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnRequest {
    FindCoordinator { transactional_id: TransactionalId },
    InitProducerId(InitProducerIdRequest),
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    EndTxn(EndTxnRequest),
}

impl TxnRequest {
    pub fn transactional_id(&self) -> &str {
        match self {
            TxnRequest::FindCoordinator { transactional_id } => transactional_id,
            TxnRequest::InitProducerId(r) => &r.transactional_id,
            TxnRequest::AddPartitionsToTxn(r) => &r.transactional_id,
            TxnRequest::AddOffsetsToTxn(r) => &r.transactional_id,
            TxnRequest::EndTxn(r) => &r.transactional_id,
        }
    }

    /// The answer to this request that carries `error`.
    pub fn error_response(&self, error: TxnError) -> TxnResponse {
        match self {
            TxnRequest::FindCoordinator { .. } => TxnResponse::FindCoordinator(Err(error)),
            TxnRequest::InitProducerId(_) => TxnResponse::InitProducerId(Err(error)),
            TxnRequest::AddPartitionsToTxn(_) => TxnResponse::AddPartitionsToTxn(Err(error)),
            TxnRequest::AddOffsetsToTxn(_) => TxnResponse::AddOffsetsToTxn(Err(error)),
            TxnRequest::EndTxn(_) => TxnResponse::EndTxn(Err(error)),
        }
    }
}

/// A coordinator's answer; each variant matches one request kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnResponse {
    FindCoordinator(Result<TxnCoordinatorInfo, TxnError>),
    InitProducerId(Result<ProducerIdAndEpoch, TxnError>),
    AddPartitionsToTxn(Result<(), TxnError>),
    AddOffsetsToTxn(Result<(), TxnError>),
    /// The identity the producer uses from now on: with KIP-890 part 2 the epoch is bumped
    /// at every EndTxn, so a late write or marker of the finished transaction is fenced.
    EndTxn(Result<ProducerIdAndEpoch, TxnError>),
}

impl TxnResponse {
    pub fn error(&self) -> Option<&TxnError> {
        match self {
            TxnResponse::FindCoordinator(r) => r.as_ref().err(),
            TxnResponse::InitProducerId(r) => r.as_ref().err(),
            TxnResponse::AddPartitionsToTxn(r) => r.as_ref().err(),
            TxnResponse::AddOffsetsToTxn(r) => r.as_ref().err(),
            TxnResponse::EndTxn(r) => r.as_ref().err(),
        }
    }
}

/// Errors of the transaction protocol, each with the Kafka error code a client expects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum TxnError {
    #[error("this broker is not the coordinator of the transactional id")]
    NotCoordinator,
    #[error("the coordinator is still loading transaction state from __transaction_state")]
    CoordinatorLoadInProgress,
    #[error("the transaction coordinator is not available")]
    CoordinatorNotAvailable,
    #[error("the transactional id is empty")]
    InvalidTransactionalId,
    #[error("transaction timeout {0} ms is outside the coordinator's allowed range")]
    InvalidTransactionTimeout(u32),
    #[error("the previous transaction is still completing: retry")]
    ConcurrentTransactions,
    #[error("producer fenced: a newer producer with this transactional id exists ({0})")]
    ProducerFenced(String),
    #[error("the producer id does not match the transactional id's ({0})")]
    InvalidProducerIdMapping(String),
    #[error("operation not allowed in the transaction's state: {0}")]
    InvalidTxnState(String),
    /// KIP-890: the transaction cannot go on (e.g. a partition was not verified, or the
    /// coordinator aborted it on timeout); abort it and begin a new one.
    #[error("the transaction must be aborted: {0}")]
    TransactionAbortable(String),
    #[error("unknown topic or partition {0}")]
    UnknownTopicOrPartition(TopicPartition),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
}

impl TxnError {
    /// Errors after which the client should find the coordinator again.
    pub fn needs_rediscovery(&self) -> bool {
        matches!(
            self,
            TxnError::NotCoordinator | TxnError::CoordinatorNotAvailable
        )
    }

    /// Errors a client retries as they are (after a backoff).
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            TxnError::NotCoordinator
                | TxnError::CoordinatorNotAvailable
                | TxnError::CoordinatorLoadInProgress
                | TxnError::ConcurrentTransactions
                // A topic the coordinator's metadata does not know yet (just created, or its
                // image lags): Kafka's clients retry it (an InvalidMetadataException).
                | TxnError::UnknownTopicOrPartition(_)
        )
    }

    /// Kafka's error code for this error.
    pub fn kafka_code(&self) -> i16 {
        match self {
            TxnError::NotCoordinator => 16,
            TxnError::CoordinatorLoadInProgress => 14,
            TxnError::CoordinatorNotAvailable => 15,
            TxnError::InvalidTransactionalId => 53,
            TxnError::InvalidTransactionTimeout(_) => 50,
            TxnError::ConcurrentTransactions => 51,
            TxnError::ProducerFenced(_) => 90,
            TxnError::InvalidProducerIdMapping(_) => 49,
            TxnError::InvalidTxnState(_) => 48,
            TxnError::TransactionAbortable(_) => 120,
            TxnError::UnknownTopicOrPartition(_) => 3,
            TxnError::InvalidRequest(_) => 42,
        }
    }
}

/// Coordinator -> leader of `tp`: append a commit or abort marker for `producer_id`'s
/// transaction (Kafka's WriteTxnMarkers, one partition per request). The leader answers
/// once the marker is committed (acks=all).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteTxnMarkerRequest {
    pub correlation: u64,
    pub tp: TopicPartition,
    pub producer_id: u64,
    /// The transaction's producer epoch (with KIP-890 part 2 the bumped one).
    pub producer_epoch: u16,
    /// The coordinator's epoch (its `__transaction_state` partition's leader epoch): a
    /// partition refuses a marker from a coordinator older than the last one it heard.
    pub coordinator_epoch: LeaderEpoch,
    pub result: TxnResult,
    /// The transaction's end bumped the producer epoch (KIP-890 part 2; Kafka's
    /// transaction version 2): `producer_epoch` is newer than the epoch the transaction
    /// wrote at, so a partition whose open transaction is *at* that epoch (the next
    /// transaction) refuses it as a late copy (KAFKA-19446) instead of closing it.
    #[serde(default)]
    pub bumped: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteTxnMarkerResponse {
    pub correlation: u64,
    pub tp: TopicPartition,
    pub result: Result<(), MarkerError>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum MarkerError {
    #[error("not the leader of the partition")]
    NotLeader,
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("coordinator epoch {request} is older than {current}: a newer coordinator exists")]
    CoordinatorFenced {
        request: LeaderEpoch,
        current: LeaderEpoch,
    },
    #[error("producer epoch {request} is older than the partition's {current}")]
    InvalidProducerEpoch { request: u16, current: u16 },
    /// A bumped marker (KIP-890 part 2) at the epoch the partition's open transaction
    /// writes at: a late copy of the previous transaction's marker (KAFKA-19446).
    #[error(
        "a marker bumped to epoch {request} cannot end a transaction written at epoch \
         {open}: a late copy of an earlier transaction's marker"
    )]
    LateMarker { request: u16, open: u16 },
    #[error("not enough in-sync replicas: {isr} < min.insync.replicas {min_insync}")]
    NotEnoughReplicas { isr: usize, min_insync: usize },
    #[error("timed out waiting for the marker to be replicated")]
    RequestTimedOut,
    #[error("storage error: {0}")]
    Storage(String),
}

impl MarkerError {
    /// Errors after which the coordinator sends the marker again (to the leader it finds
    /// then). A fenced coordinator stops; an epoch error means the marker is obsolete.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            MarkerError::NotLeader
                | MarkerError::UnknownTopicOrPartition
                | MarkerError::NotEnoughReplicas { .. }
                | MarkerError::RequestTimedOut
                | MarkerError::Storage(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{RecordBatch, TxnMarker};

    #[test]
    fn a_marker_reads_back_as_written_and_data_is_no_marker() {
        for result in [TxnResult::Commit, TxnResult::Abort] {
            let marker = TxnMarker {
                producer_id: 7,
                producer_epoch: 3,
                result,
                coordinator_epoch: 12,
            };
            let batch = RecordBatch::txn_marker(marker, 5);
            assert!(batch.is_control() && batch.is_transactional());
            assert_eq!(batch.as_txn_marker(), Some(marker));
        }
        let data = RecordBatch::new(5, [(None, Some(b"x".to_vec()))]).transactional();
        assert_eq!(data.as_txn_marker(), None);
        assert_eq!(RecordBatch::epoch_marker(0, 1, 5).as_txn_marker(), None);
    }

    #[test]
    fn every_error_has_its_kafka_code() {
        assert_eq!(TxnError::ConcurrentTransactions.kafka_code(), 51);
        assert_eq!(TxnError::ProducerFenced(String::new()).kafka_code(), 90);
        assert!(TxnError::NotCoordinator.needs_rediscovery());
        assert!(!TxnError::InvalidTxnState(String::new()).is_retriable());
    }
}
