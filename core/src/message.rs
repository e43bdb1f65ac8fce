//! Every message a Skein node sends or receives: replica-to-replica fetches, client
//! produce/consume/metadata and consumer-group traffic, and the controller's requests and responses wrapped
//! as they travel between brokers and the controller.
//!
//! Messages are plain data (serde), so the simulator can deliver, drop, duplicate and
//! reorder them, and the node runtime can frame them on a socket. Every request carries a
//! `correlation` id chosen by the sender and echoed in the response; receivers use it to
//! discard answers to requests they no longer wait for (reordering, retries).

use crate::controller::{ControllerRequest, ControllerResponse};
use crate::group::{GroupRequest, GroupResponse};
use crate::log::{EncodedBatch, EncodedBatches, RecordBatch};
use crate::txn::{
    AbortedTxn, IsolationLevel, TxnRequest, TxnResponse, WriteTxnMarkerRequest,
    WriteTxnMarkerResponse,
};
use crate::types::{LeaderEpoch, NodeId, Offset, PartitionEpoch, TimestampMs, TopicPartition};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a message comes from or goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Address {
    /// A broker.
    Node(NodeId),
    /// A controller node, by its controller id (1..=N for a quorum of N; a single
    /// controller is controller 1). Controller ids are their own namespace: controller 1
    /// and broker 1 are different processes.
    Controller(NodeId),
    /// A client connection (producer, consumer, admin), numbered by the driver.
    Client(u64),
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Node(n) => write!(f, "node-{n}"),
            Address::Controller(n) => write!(f, "controller-{n}"),
            Address::Client(c) => write!(f, "client-{c}"),
        }
    }
}

/// All traffic of a Skein cluster.
///
/// Payloads much larger than the common ones are boxed (build them with `From`, e.g.
/// `Message::from(ProduceRequest { .. })`): every message is moved several times between
/// sender and receiver, and a move copies the enum's full size whatever the variant, so
/// one large variant made every fetch cost a 160-byte copy per hop. Serde writes a box
/// exactly as its content, so the wire format is unchanged. `size_of_message_stays_small`
/// pins the size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Message {
    /// Follower -> leader: pull records (also reports the follower's durable log end).
    Fetch(FetchRequest),
    /// Leader -> follower.
    FetchResponse(FetchResponse),
    /// Client -> leader. Boxed: the record batch makes it the largest hot payload.
    Produce(Box<ProduceRequest>),
    /// Leader -> client (never sent for acks = 0).
    ProduceResponse(ProduceResponse),
    /// Client -> leader: read committed records (below the high watermark).
    ConsumerFetch(ConsumerFetchRequest),
    /// Boxed: with a read_committed answer's LSO and aborted list it outgrew the others.
    ConsumerFetchResponse(Box<ConsumerFetchResponse>),
    /// Client -> any broker: who leads what, as of that broker's metadata image.
    Metadata(MetadataRequest),
    MetadataResponse(MetadataResponse),
    /// Client -> leader: earliest / latest (= high watermark) / by-timestamp offsets.
    ListOffsets(ListOffsetsRequest),
    ListOffsetsResponse(ListOffsetsResponse),
    /// Client -> broker: consumer-group protocol. FindCoordinator goes to any broker
    /// (answered from its metadata image); the rest to the group's coordinator, i.e. the
    /// leader of the group's `__consumer_offsets` partition.
    Group {
        correlation: u64,
        request: Box<GroupRequest>,
    },
    /// Broker -> client: the answer to a `Group` request, with its correlation.
    GroupResponse {
        correlation: u64,
        response: Box<GroupResponse>,
    },
    /// Broker or client -> controller.
    ControllerRequest(ControllerRequest),
    /// Controller -> broker or client.
    ControllerResponse(Box<ControllerResponse>),
    /// Controller -> controller: the quorum's Raft traffic (sender and receiver are
    /// `Address::Controller`s).
    Raft(crate::raft::Message),
    /// Replica -> another replica of the partition: my log holds a damaged batch; send
    /// your copy of it (peer repair, see `PartitionLog::replace_damaged`).
    RepairFetch(RepairFetchRequest),
    /// Replica -> the damaged replica: its copy, if it reads intact.
    RepairFetchResponse(Box<RepairFetchResponse>),
    /// Client (or a partition leader verifying a transactional write, KIP-890) -> broker:
    /// the transaction protocol. FindCoordinator goes to any broker; the rest to the
    /// coordinator of the transactional id (the leader of its `__transaction_state`
    /// partition).
    Txn {
        correlation: u64,
        request: Box<TxnRequest>,
    },
    /// Broker -> the sender of a `Txn` request, with its correlation.
    TxnResponse {
        correlation: u64,
        response: Box<TxnResponse>,
    },
    /// Transaction coordinator -> partition leader: write a commit/abort marker.
    WriteTxnMarker(Box<WriteTxnMarkerRequest>),
    /// Partition leader -> coordinator: the marker is committed, or why not.
    WriteTxnMarkerResponse(WriteTxnMarkerResponse),
}

impl From<ProduceRequest> for Message {
    fn from(r: ProduceRequest) -> Self {
        Message::Produce(Box::new(r))
    }
}

impl From<ConsumerFetchResponse> for Message {
    fn from(r: ConsumerFetchResponse) -> Self {
        Message::ConsumerFetchResponse(Box::new(r))
    }
}

impl From<ControllerResponse> for Message {
    fn from(r: ControllerResponse) -> Self {
        Message::ControllerResponse(Box::new(r))
    }
}

impl From<RepairFetchResponse> for Message {
    fn from(r: RepairFetchResponse) -> Self {
        Message::RepairFetchResponse(Box::new(r))
    }
}

impl Message {
    /// The correlation id of a response a broker sends (None for requests and for
    /// controller responses, which are matched by order on their connection).
    pub fn response_correlation(&self) -> Option<u64> {
        Some(match self {
            Message::FetchResponse(r) => r.correlation,
            Message::ProduceResponse(r) => r.correlation,
            Message::ConsumerFetchResponse(r) => r.correlation,
            Message::MetadataResponse(r) => r.correlation,
            Message::ListOffsetsResponse(r) => r.correlation,
            Message::GroupResponse { correlation, .. } => *correlation,
            Message::RepairFetchResponse(r) => r.correlation,
            Message::TxnResponse { correlation, .. } => *correlation,
            Message::WriteTxnMarkerResponse(r) => r.correlation,
            _ => return None,
        })
    }

    /// The correlation id of a request to a broker (None for everything else). An acks=0
    /// produce has one too, though it is never answered.
    pub fn request_correlation(&self) -> Option<u64> {
        Some(match self {
            Message::Produce(r) => r.correlation,
            Message::ConsumerFetch(r) => r.correlation,
            Message::Metadata(r) => r.correlation,
            Message::ListOffsets(r) => r.correlation,
            Message::Fetch(r) => r.correlation,
            Message::RepairFetch(r) => r.correlation,
            Message::Group { correlation, .. } => *correlation,
            Message::Txn { correlation, .. } => *correlation,
            Message::WriteTxnMarker(r) => r.correlation,
            _ => return None,
        })
    }

    /// A consumer-group request.
    pub fn group(correlation: u64, request: GroupRequest) -> Self {
        Message::Group {
            correlation,
            request: Box::new(request),
        }
    }

    /// A transaction-protocol request.
    pub fn txn(correlation: u64, request: TxnRequest) -> Self {
        Message::Txn {
            correlation,
            request: Box::new(request),
        }
    }

    /// The answer to a transaction-protocol request.
    pub fn txn_response(correlation: u64, response: TxnResponse) -> Self {
        Message::TxnResponse {
            correlation,
            response: Box::new(response),
        }
    }

    /// The answer to a consumer-group request.
    pub fn group_response(correlation: u64, response: GroupResponse) -> Self {
        Message::GroupResponse {
            correlation,
            response: Box::new(response),
        }
    }

    /// The variant's name, for logs and traces (one place, so drivers never fall behind).
    pub fn name(&self) -> &'static str {
        match self {
            Message::Fetch(_) => "Fetch",
            Message::FetchResponse(_) => "FetchResponse",
            Message::Produce(_) => "Produce",
            Message::ProduceResponse(_) => "ProduceResponse",
            Message::ConsumerFetch(_) => "ConsumerFetch",
            Message::ConsumerFetchResponse(_) => "ConsumerFetchResponse",
            Message::Metadata(_) => "Metadata",
            Message::MetadataResponse(_) => "MetadataResponse",
            Message::ListOffsets(_) => "ListOffsets",
            Message::ListOffsetsResponse(_) => "ListOffsetsResponse",
            Message::Group { .. } => "Group",
            Message::GroupResponse { .. } => "GroupResponse",
            Message::ControllerRequest(_) => "ControllerRequest",
            Message::ControllerResponse(_) => "ControllerResponse",
            Message::Raft(_) => "Raft",
            Message::RepairFetch(_) => "RepairFetch",
            Message::RepairFetchResponse(_) => "RepairFetchResponse",
            Message::Txn { .. } => "Txn",
            Message::TxnResponse { .. } => "TxnResponse",
            Message::WriteTxnMarker(_) => "WriteTxnMarker",
            Message::WriteTxnMarkerResponse(_) => "WriteTxnMarkerResponse",
        }
    }
}

// ---------------------------------------------------------------------------------------
// Replica fetch
// ---------------------------------------------------------------------------------------

/// A follower's pull. `fetch_offset` is the follower's log end offset, and the follower
/// has fsynced everything below it before sending (so the leader may count it towards the
/// high watermark as durable). `last_fetched_epoch` is the epoch of the follower's last
/// batch; the leader checks it against its epoch cache (KIP-320) before trusting the
/// offset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchRequest {
    pub correlation: u64,
    pub tp: TopicPartition,
    pub replica_id: NodeId,
    /// The leader epoch the follower believes is current; stale -> FencedLeaderEpoch,
    /// newer than the leader knows -> UnknownLeaderEpoch.
    pub current_leader_epoch: LeaderEpoch,
    pub fetch_offset: Offset,
    pub last_fetched_epoch: Option<LeaderEpoch>,
    pub max_bytes: usize,
    /// The follower's high watermark: the leader answers at once if it knows a newer one.
    pub high_watermark: Offset,
    /// Long poll: when the leader has nothing new (no records past `fetch_offset`, no
    /// newer HW), it may hold the fetch this long, answering as soon as that changes.
    /// 0 = answer at once.
    pub max_wait: crate::types::Nanos,
}

/// Peer repair: the batch starting at `offset`, written in leader epoch `epoch`, is damaged
/// on the sender's disk. Any replica may answer, leader or not, online or not, from its
/// own log: by log matching its batch with that offset and epoch is the same batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairFetchRequest {
    pub correlation: u64,
    pub tp: TopicPartition,
    pub offset: Offset,
    pub epoch: LeaderEpoch,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairFetchResponse {
    pub correlation: u64,
    pub tp: TopicPartition,
    pub offset: Offset,
    pub copy: RepairCopy,
}

/// A replica's answer to a peer-repair request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RepairCopy {
    /// Its batch starting at the offset, of the asked epoch, read intact.
    Intact(RecordBatch),
    /// Its log holds no such batch: the partition is not hosted, the offset is outside its
    /// log, or another epoch's batch is there (its log diverged from the asker's). From
    /// the leader this means the damaged batch is not part of the partition's log, so the
    /// asker may cut its log there.
    NotHeld,
    /// It cannot read its copy either (damaged there too, or an I/O error).
    Unreadable,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchResponse {
    pub correlation: u64,
    pub tp: TopicPartition,
    /// The responder's current leader epoch.
    pub leader_epoch: LeaderEpoch,
    pub result: FetchResult,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FetchResult {
    /// The follower's log matches; here are the batches from `fetch_offset` on, as the
    /// leader's log stores them (the follower appends them verbatim).
    Records {
        records: EncodedBatches,
        high_watermark: Offset,
        log_start_offset: Offset,
        log_end_offset: Offset,
    },
    /// The follower's log diverges from the leader's: the leader's largest epoch not
    /// above the follower's last fetched epoch is `epoch`, and it ends at `end_offset`
    /// (KIP-279). `epoch == None` means the leader knows no such epoch at all; the
    /// follower truncates to `end_offset` (the leader's log start). The follower
    /// truncates its divergent suffix and fetches again.
    Diverging {
        epoch: Option<LeaderEpoch>,
        end_offset: Offset,
        high_watermark: Offset,
    },
    Error(FetchError),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum FetchError {
    #[error("fenced leader epoch: request epoch {request} is older than current {current}")]
    FencedLeaderEpoch {
        request: LeaderEpoch,
        current: LeaderEpoch,
    },
    #[error("unknown leader epoch: request epoch {request} is newer than current {current}")]
    UnknownLeaderEpoch {
        request: LeaderEpoch,
        current: LeaderEpoch,
    },
    #[error("this broker is not the leader")]
    NotLeader,
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("replica {0} is not assigned to this partition")]
    NotAssignedReplica(NodeId),
    #[error("fetch offset {fetch_offset} is below the log start offset {log_start_offset}")]
    OffsetOutOfRange {
        fetch_offset: Offset,
        log_start_offset: Offset,
    },
    #[error("storage error on the leader: {0}")]
    Storage(String),
}

// ---------------------------------------------------------------------------------------
// Produce
// ---------------------------------------------------------------------------------------

/// How many replicas must have a write before it is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Acks {
    /// Fire and forget: no response at all.
    None,
    /// Acknowledged once the leader has appended it (not necessarily fsynced).
    Leader,
    /// Acknowledged once the high watermark (durable on every ISR member) passes it and
    /// the ISR has at least `min.insync.replicas` members.
    All,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceRequest {
    pub correlation: u64,
    pub tp: TopicPartition,
    pub acks: Acks,
    /// How long the leader may wait for replication before answering RequestTimedOut.
    pub timeout: crate::types::Nanos,
    /// One batch in the log's format, as the producer encoded it: the leader checks it
    /// and places it (offsets, epoch, max timestamp) without decoding its records, and
    /// checks its producer info (if any) against the partition's producer state table.
    pub batch: EncodedBatch,
    /// The producer's `transactional.id`, required with a transactional batch: the leader
    /// asks its coordinator whether the partition is in the transaction (KIP-890 part 1).
    #[serde(default)]
    pub transactional_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceResponse {
    pub correlation: u64,
    pub tp: TopicPartition,
    pub result: Result<ProduceAck, ProduceError>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceAck {
    /// Offset of the first record of the batch (the original one for a duplicate).
    pub base_offset: Offset,
    /// Epoch of the leader that acknowledged.
    pub leader_epoch: LeaderEpoch,
    /// True when this was a retry of an already-written idempotent batch.
    pub duplicate: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ProduceError {
    #[error("not the leader (known leader {leader:?}, epoch {leader_epoch})")]
    NotLeader {
        leader: Option<NodeId>,
        leader_epoch: LeaderEpoch,
    },
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("not enough in-sync replicas: {isr} < min.insync.replicas {min_insync}")]
    NotEnoughReplicas { isr: usize, min_insync: usize },
    #[error("written but ISR shrank to {isr} < min.insync.replicas {min_insync} before commit")]
    NotEnoughReplicasAfterAppend { isr: usize, min_insync: usize },
    #[error("request timed out waiting for replication")]
    RequestTimedOut,
    #[error("out of order sequence: {0}")]
    OutOfOrderSequence(String),
    #[error("invalid (fenced) producer epoch: {0}")]
    InvalidProducerEpoch(String),
    #[error("unknown producer id: {0}")]
    UnknownProducerId(String),
    #[error("invalid record batch: {0}")]
    InvalidRecord(String),
    #[error("storage error: {0}")]
    Storage(String),
    /// The batch's bytes do not check out (CRC, length, format version, record structure):
    /// damaged on the way or badly encoded. Nothing was written; sending it again cannot help.
    #[error("corrupt record batch: {0}")]
    CorruptBatch(String),
    #[error("record batch of {size} bytes exceeds the partition's limit of {max}")]
    BatchTooLarge { size: usize, max: usize },
    /// A transactional write the coordinator did not verify (KIP-890 part 1: the partition
    /// is not in the producer's ongoing transaction). Kafka's code 48; not retriable.
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
}

// ---------------------------------------------------------------------------------------
// Consumer fetch, metadata, list offsets
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerFetchRequest {
    pub correlation: u64,
    pub tp: TopicPartition,
    pub offset: Offset,
    pub max_bytes: usize,
    /// If set, the leader refuses the read when its epoch differs (KIP-320 for consumers).
    pub current_leader_epoch: Option<LeaderEpoch>,
    /// The epoch of the last batch the reader moved past (leader-epoch markers included),
    /// if it knows one: the leader checks it against its epoch cache exactly as it checks a
    /// follower's (KIP-320) and answers [`ConsumerFetchError::DivergingEpoch`] when its log
    /// no longer holds what the reader read below `offset` (an unclean election truncated
    /// it). None: no check (a reader at its first fetch, or an older client).
    #[serde(default)]
    pub last_fetched_epoch: Option<LeaderEpoch>,
    /// read_committed: only below the last stable offset, with the aborted transactions.
    #[serde(default)]
    pub isolation: IsolationLevel,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerFetchResponse {
    pub correlation: u64,
    pub tp: TopicPartition,
    pub result: Result<ConsumerRecords, ConsumerFetchError>,
}

/// Committed data. Batches hold only records below `high_watermark`; control batches
/// (leader-epoch markers) are left out, so offsets may have gaps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerRecords {
    pub batches: Vec<RecordBatch>,
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
    pub leader_epoch: LeaderEpoch,
    /// Where the next fetch should start: past every batch read, control batches included
    /// (never past the HW). A consumer that took every record returned moves its position
    /// here, so a leader-epoch marker at the end of the committed log does not hold it.
    pub next_offset: Offset,
    /// The leader epoch of the last batch read (the one ending at `next_offset`), control
    /// batches included: the reader's next `last_fetched_epoch`. Markers are left out of
    /// `batches`, so without this a reader moving past one would not know its epoch.
    #[serde(default)]
    pub last_epoch: Option<LeaderEpoch>,
    /// The partition's last stable offset (read_uncommitted answers carry it too).
    #[serde(default)]
    pub last_stable_offset: Offset,
    /// read_committed: the aborted transactions overlapping the returned range, whose
    /// records the reader drops ([`AbortedTxn::covers`]). Empty for read_uncommitted.
    #[serde(default)]
    pub aborted: Vec<AbortedTxn>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ConsumerFetchError {
    #[error("not the leader (known leader {leader:?}, epoch {leader_epoch})")]
    NotLeader {
        leader: Option<NodeId>,
        leader_epoch: LeaderEpoch,
    },
    #[error("fenced leader epoch: request {request}, current {current}")]
    FencedLeaderEpoch {
        request: LeaderEpoch,
        current: LeaderEpoch,
    },
    #[error("unknown leader epoch: request {request}, current {current}")]
    UnknownLeaderEpoch {
        request: LeaderEpoch,
        current: LeaderEpoch,
    },
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    /// The reader's log diverges from the leader's (Kafka's FetchResponse `DivergingEpoch`):
    /// the leader's largest epoch not above the reader's `last_fetched_epoch` is `epoch`
    /// and ends at `end_offset` (`epoch` None: the leader knows no such epoch; `end_offset`
    /// is its log start). Below the reader's position means the log was truncated under it.
    #[error("diverging epoch: the leader's epoch {epoch:?} ends at offset {end_offset}")]
    DivergingEpoch {
        epoch: Option<LeaderEpoch>,
        end_offset: Offset,
    },
    #[error("offset {offset} out of range [{log_start_offset}, {high_watermark}]")]
    OffsetOutOfRange {
        offset: Offset,
        log_start_offset: Offset,
        high_watermark: Offset,
    },
    #[error("storage error: {0}")]
    Storage(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataRequest {
    pub correlation: u64,
    /// None = all topics.
    pub topics: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataResponse {
    pub correlation: u64,
    /// Live (registered, unfenced) brokers as the responder knows them.
    pub brokers: Vec<NodeId>,
    pub partitions: Vec<PartitionMetadata>,
    /// Requested topics the responder does not know.
    pub unknown_topics: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMetadata {
    pub tp: TopicPartition,
    pub leader: Option<NodeId>,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    /// Eligible leader replicas (KIP-966): out of the ISR, but holding every committed
    /// record, so electable when no ISR member can lead.
    #[serde(default)]
    pub elr: Vec<NodeId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OffsetSpec {
    Earliest,
    /// The high watermark (the end of what consumers may read).
    Latest,
    /// The first offset whose timestamp is >= the given one.
    Timestamp(TimestampMs),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListOffsetsRequest {
    pub correlation: u64,
    pub tp: TopicPartition,
    pub spec: OffsetSpec,
    /// read_committed: `Latest` is the last stable offset, not the high watermark.
    #[serde(default)]
    pub isolation: IsolationLevel,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListOffsetsResponse {
    pub correlation: u64,
    pub tp: TopicPartition,
    /// `Ok(None)`: no record at or after the timestamp.
    pub result: Result<Option<ListedOffset>, ConsumerFetchError>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedOffset {
    pub offset: Offset,
    pub leader_epoch: LeaderEpoch,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every move of a message copies this many bytes, and LLVM copies up to 128 inline but
    /// calls memcpy above that: a new payload that grows the enum belongs in a box.
    #[test]
    fn size_of_message_stays_small() {
        assert!(
            std::mem::size_of::<Message>() <= 112,
            "Message grew to {} bytes",
            std::mem::size_of::<Message>()
        );
    }
}
