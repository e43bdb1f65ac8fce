//! What one client step takes and gives: its context (time, the history, the client's
//! random stream, the cluster's shape) and what it produced besides history (messages to
//! send, and what producers, consumers and group members observed, for the checks).
//! Below the clients, so the producer, the consumer and the group member share it without
//! importing each other.

use crate::config::SimConfig;
use crate::history::History;
use crate::time::SimTime;
use crate::topic::process_id;
use rand_chacha::ChaCha8Rng;
use skein_core::client::Truncation;
use skein_core::group::GenerationId;
use skein_core::message::{Address, Message};
use skein_core::{LeaderEpoch, NodeId, Offset};
use skein_jepsen::{EventType, Function, Text, Value};
use std::rc::Rc;

/// What a client step produced besides history.
#[derive(Default)]
pub struct ClientOut {
    pub sends: Vec<(Address, Message)>,
    /// Acknowledged acks=all records: (partition, offset, value, leader epoch).
    pub acked: Vec<(u32, Offset, Text, LeaderEpoch)>,
    /// Records read: (partition, offset, value, served by).
    pub read: Vec<(u32, Offset, Text, NodeId)>,
    /// What group members saw, for the group invariants.
    pub group: Vec<GroupObs>,
    /// A group member asks to be paused for this long from now (a pause fault striking).
    pub pause: Option<SimTime>,
    /// What partition consumers' cursors did, for consumer-skipped-records.
    pub cursor: Vec<CursorObs>,
    /// What transactional clients began, were told and wrote, for the transaction
    /// invariants (txn runs only).
    pub txn: Vec<TxnObs>,
}

/// One step of a transactional client, as the transaction invariants see it
/// (`invariants/txn.rs`). `index` names the client instance (its values' `t{index}-`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnObs {
    /// Transaction `seq` of the instance began, writing `values`.
    Begin {
        index: u32,
        id: String,
        seq: u64,
        values: Vec<Text>,
    },
    /// The instance's producer was initialised (InitProducerId answered) as `producer`.
    Initialized {
        index: u32,
        id: String,
        producer: skein_core::controller::ProducerIdAndEpoch,
    },
    /// A transactional write of the instance was acknowledged.
    Written {
        index: u32,
        p: u32,
        base_offset: Offset,
    },
    /// The coordinator told the instance its transaction `seq` ended with `result`; the
    /// instance's identity is `producer` from now on.
    Ended {
        index: u32,
        seq: u64,
        result: skein_core::txn::TxnResult,
        producer: skein_core::controller::ProducerIdAndEpoch,
    },
}

/// One step of a partition consumer's fetch cursor (core's [`FetchCursor`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CursorObs {
    /// A fetch answered by a leader at `epoch` moved the consumer from `from` to `to`,
    /// reading `records` (offset, value) on the way.
    Polled {
        p: u32,
        from: Offset,
        to: Offset,
        records: Vec<(Offset, Text)>,
        epoch: LeaderEpoch,
    },
    /// The cursor detected that the log was truncated under it and moved back.
    Truncated { p: u32, truncation: Truncation },
    /// A group member's cursor starts a stint in `p` at `at` (assigned, reset or sought):
    /// what came before it was another reader's.
    Start { p: u32, at: Offset },
    /// A group member gave `p` up (revoked, lost, crashed): it is judged no more there.
    Stop { p: u32 },
}

/// Shared context of one client step.
pub struct Ctx<'a> {
    pub now: SimTime,
    pub history: &'a mut History,
    pub rng: &'a mut ChaCha8Rng,
    pub out: &'a mut ClientOut,
    pub brokers: u32,
    /// Controller nodes (1, or a quorum of 3 or 5).
    pub controllers: u32,
}

impl<'a> Ctx<'a> {
    /// A client step's context at `now`, for a cluster of `cfg`'s shape.
    pub fn new(
        now: SimTime,
        history: &'a mut History,
        rng: &'a mut ChaCha8Rng,
        out: &'a mut ClientOut,
        cfg: &SimConfig,
    ) -> Self {
        Ctx {
            now,
            history,
            rng,
            out,
            brokers: cfg.brokers,
            controllers: cfg.controllers,
        }
    }

    /// Records a history event, now, of `client`'s work on partition `p`.
    pub fn event(&mut self, client: u64, p: u32, kind: EventType, f: Function, value: Value) {
        self.history
            .push(self.now, process_id(client, p), kind, f, value);
    }
}

/// What the group invariants need to know of one member step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupObs {
    /// The member's view after the step: its generation (when Stable in it) and the
    /// partitions it owns; `None` while it is crashed. The list is shared: every step
    /// reports one, and it seldom changes.
    Member {
        member: u32,
        state: Option<(Option<GenerationId>, Rc<[u32]>)>,
    },
    /// The application finished processing these offsets of partition `p`.
    Processed { p: u32, offsets: Vec<Offset> },
    /// A commit was acknowledged to the member: next offsets to consume, per partition.
    CommitAcked {
        member: u32,
        offsets: Vec<(u32, Offset)>,
    },
    /// The consumer moved its position below the offset it knew committed: an explicit
    /// reset (reset policy or seek), after which a lower commit is legitimate.
    Reset { p: u32, to: Offset },
    /// An OffsetFetch answer sent at `sent_at`: per requested partition, the committed
    /// offset the coordinator returned (`None`: none).
    Fetched {
        sent_at: SimTime,
        offsets: Vec<(u32, Option<Offset>)>,
    },
}
