//! The value of a `txn` event: the micro-operations of one Kafka transaction, as Jepsen's
//! Kafka workload writes them (`[:send k v]`, `[:poll {k [[offset v] ...]}]`), plus the
//! offset commits of read-process-write and the consumer's isolation level.
//!
//! The invocation lists what the client means to do (sends without offsets, polls without
//! records); the completion lists what happened. `ok` means the transaction committed, `fail`
//! that it certainly did not (aborted), `info` that nobody knows.

use crate::history::{CommitValue, EventType, Offset, Partition, SendValue, Text};
use serde::{Deserialize, Serialize};

/// What a consumer's fetches may return (Kafka's `isolation.level`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// Kafka's default: every record up to the high watermark, aborted ones included.
    #[default]
    ReadUncommitted,
    /// Only committed records, up to the last stable offset.
    ReadCommitted,
}

impl Isolation {
    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadUncommitted => "read_uncommitted",
            Isolation::ReadCommitted => "read_committed",
        }
    }
}

/// `txn` value: the micro-operations in the order the client performed them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnValue {
    /// The isolation level of the transaction's polls; absent means Kafka's default,
    /// `read_uncommitted`, which promises nothing about aborted records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// The producer's `transactional.id`, for the reader of a report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Text>,
    pub ops: Vec<MicroOp>,
}

/// One step of a transaction, tagged by `f` like an event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "kebab-case")]
pub enum MicroOp {
    /// A record written; `offset` once the broker acknowledged it (always on `ok`).
    Send(SendValue),
    /// What one poll returned, per partition.
    Poll(PollValueTxn),
    /// Consumer-group offsets committed with the transaction (`send_offsets_to_transaction`):
    /// the next offset to read per input partition.
    #[serde(alias = "commit-offsets")]
    SendOffsets(CommitValue),
}

/// A poll inside a transaction: the records it returned, grouped by partition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PollValueTxn {
    #[serde(default)]
    pub reads: Vec<PollRead>,
}

/// The records one poll returned from one partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PollRead {
    pub topic: Text,
    pub partition: Partition,
    /// `[offset, value]` pairs in the order received.
    #[serde(default)]
    pub records: Vec<(Offset, Text)>,
    /// The exclusive end of what the fetch could return at its isolation level: the last
    /// stable offset (read_committed) or the high watermark (read_uncommitted) that the
    /// fetch response reported. Only a read with `end` says what it did *not* see, so only
    /// such reads give anti-dependency (rw) edges and intermediate reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<Offset>,
}

impl PollRead {
    pub fn new(topic: impl Into<Text>, partition: Partition) -> Self {
        Self {
            topic: topic.into(),
            partition,
            records: Vec::new(),
            end: None,
        }
    }

    pub fn record(mut self, offset: Offset, value: impl Into<Text>) -> Self {
        self.records.push((offset, value.into()));
        self
    }

    pub fn end(mut self, end: Offset) -> Self {
        self.end = Some(end);
        self
    }
}

impl TxnValue {
    pub fn new(isolation: Isolation) -> Self {
        Self {
            isolation: Some(isolation),
            id: None,
            ops: Vec::new(),
        }
    }

    pub fn send(mut self, send: SendValue) -> Self {
        self.ops.push(MicroOp::Send(send));
        self
    }

    pub fn poll(mut self, reads: Vec<PollRead>) -> Self {
        self.ops.push(MicroOp::Poll(PollValueTxn { reads }));
        self
    }

    pub fn send_offsets(mut self, commit: CommitValue) -> Self {
        self.ops.push(MicroOp::SendOffsets(commit));
        self
    }

    /// The isolation the checker judges the polls by.
    pub fn isolation(&self) -> Isolation {
        self.isolation.unwrap_or_default()
    }

    /// The format's rules beyond JSON shape: a committed transaction's sends were all
    /// acknowledged, so each names its offset. (A read past its own `end` is not a format
    /// error: it is what a broker that ignores the last stable offset returns.)
    pub(crate) fn validate(&self, kind: EventType) -> Result<(), String> {
        if kind != EventType::Ok {
            return Ok(());
        }
        for (i, op) in self.ops.iter().enumerate() {
            if matches!(op, MicroOp::Send(s) if s.offset.is_none()) {
                return Err(format!(
                    "an ok txn's send (micro-op {i}) needs its offset: a committed transaction's sends were all acknowledged"
                ));
            }
        }
        Ok(())
    }
}
