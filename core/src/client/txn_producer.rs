//! `TransactionalProducer`: Kafka's transactional producer (KIP-98, KIP-447, KIP-890) as a
//! sans-I/O state machine, built on the idempotent [`ProduceClient`].
//!
//! The application calls [`TransactionalProducer::init`], [`begin`], [`send`],
//! [`send_offsets`], [`commit`] and [`abort`]; the host sends what
//! [`TransactionalProducer::poll_outputs`] returns ([`TxnProducerOutput::Send`] to a
//! [`Destination`], wire form by [`to_message`]), hands every answer back with
//! [`TransactionalProducer::step`] (turned from the wire by [`from_message`]), and calls
//! [`TransactionalProducer::handle_timeout`] at [`TransactionalProducer::poll_timeout`].
//!
//! ```text
//!  Uninitialized --init--> Initializing --InitProducerId ok--> Ready <-------------------+
//!                                                             | begin                    |
//!                                                             v                          |
//!            +----- write failed / TransactionAbortable -- InTransaction --commit--> Committing
//!            v                                                | abort                    | EndTxn ok
//!      AbortableError --abort--> Aborting --EndTxn ok---------+--------------------------+
//!  any state --ProducerFenced / InvalidProducerEpoch--> Fatal
//! ```
//!
//! Rules (Kafka's `TransactionManager`): one coordinator request at a time; a partition
//! joins the transaction (AddPartitionsToTxn) before its first batch is sent; commit and
//! abort wait for every batch in flight, then send EndTxn; the EndTxn answer's identity is
//! adopted (KIP-890 part 2 bumps the epoch at every EndTxn; a new epoch restarts every
//! sequence at 0). Retriable errors are retried after a backoff (the coordinator found
//! again on NotCoordinator / CoordinatorNotAvailable). A fenced producer stops for good.
//! A failed write, a sequence error, `TransactionAbortable` or `InvalidTxnState` from
//! AddPartitionsToTxn make the transaction abort-only: commit is refused, abort works.
//!
//! [`begin`]: TransactionalProducer::begin
//! [`send`]: TransactionalProducer::send
//! [`send_offsets`]: TransactionalProducer::send_offsets
//! [`commit`]: TransactionalProducer::commit
//! [`abort`]: TransactionalProducer::abort

use super::{Destination, LeaderCache, ProduceClient, ProduceStep, Resolved};
use crate::controller::ProducerIdAndEpoch;
use crate::group::{
    GenerationId, GroupError, GroupId, GroupRequest, GroupResponse, InstanceId, MemberId,
    OffsetAndMetadata, TxnOffsetCommitRequest,
};
use crate::log::{EncodeError, RecordBatch};
use crate::message::{Acks, Message, ProduceAck, ProduceError};
use crate::producer::{ProducerError, MAX_IN_FLIGHT};
use crate::txn::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest,
    TransactionalId, TxnError, TxnRequest, TxnResponse, TxnResult,
};
use crate::types::{Nanos, NodeId, Offset, TopicPartition};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

const MS: Nanos = 1_000_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnProducerConfig {
    pub transactional_id: TransactionalId,
    /// `transaction.timeout.ms`, sent with InitProducerId.
    pub transaction_timeout_ms: u32,
    pub retry_backoff: Nanos,
    /// A request unanswered this long is taken as lost (sent again, or retried).
    pub request_timeout: Nanos,
    /// How long a leader may wait for replication (the produce request's timeout).
    pub produce_timeout: Nanos,
    /// Ends transactions as a client before EndTxn v5 does (`EndTxnRequest::keep_epoch`):
    /// the coordinator keeps the epoch (no KIP-890 part 2 bump), so every transaction of
    /// this producer instance writes at one epoch. Off by default.
    pub keep_epoch: bool,
}

impl TxnProducerConfig {
    pub fn new(transactional_id: impl Into<TransactionalId>) -> Self {
        Self {
            transactional_id: transactional_id.into(),
            transaction_timeout_ms: 60_000,
            retry_backoff: 100 * MS,
            request_timeout: 30_000 * MS,
            produce_timeout: 30_000 * MS,
            keep_epoch: false,
        }
    }
}

/// Where the producer is (see the module docs' diagram).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnProducerState {
    Uninitialized,
    /// Finding the coordinator, then InitProducerId.
    Initializing,
    Ready,
    InTransaction,
    /// Waiting for the writes in flight, then EndTxn(commit).
    Committing,
    /// Waiting for the writes in flight, then EndTxn(abort).
    Aborting,
    /// The transaction cannot commit (why); only abort is allowed.
    AbortableError(String),
    /// Fenced or refused for good; nothing more is sent.
    Fatal(String),
}

/// An operation the application may not do now (never a panic).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxnClientError {
    #[error("init_transactions first")]
    NotInitialized,
    #[error("init_transactions is already done or under way")]
    AlreadyInitialized,
    #[error("no transaction: begin_transaction first")]
    NoTransaction,
    #[error("a transaction is already open")]
    TransactionInProgress,
    #[error("the transaction is committing or aborting")]
    TransactionCompleting,
    #[error("the transaction can only be aborted: {0}")]
    AbortOnly(String),
    #[error("the producer is fenced or failed: {0}")]
    Fatal(String),
    #[error("{0}: refusing an empty batch")]
    EmptyBatch(TopicPartition),
    #[error("cannot commit offsets of an empty group id")]
    InvalidGroupId,
}

/// What the producer asks of brokers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnProducerRequest {
    /// To any broker (FindCoordinator) or to the transaction coordinator.
    Txn(TxnRequest),
    /// To any broker (FindCoordinator) or to the group coordinator (TxnOffsetCommit).
    Group(GroupRequest),
    /// A stamped transactional batch, to the leader of `tp`.
    Produce {
        tp: TopicPartition,
        batch: RecordBatch,
    },
}

/// The answers the host hands back, matched to requests by correlation id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnProducerResponse {
    Txn(TxnResponse),
    Group(GroupResponse),
    Produce(Result<ProduceAck, ProduceError>),
}

/// What happened, for the application (and the simulator's history).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnProducerEvent {
    Initialized(ProducerIdAndEpoch),
    /// A batch of the open transaction is written (visible once the transaction commits).
    Written {
        tp: TopicPartition,
        base_offset: Offset,
        records: u32,
    },
    /// The group coordinator holds the offsets, pending the transaction's outcome.
    OffsetsSent {
        group: GroupId,
    },
    /// The transaction ended; `producer` is the identity used from now on.
    Completed {
        result: TxnResult,
        producer: ProducerIdAndEpoch,
    },
    /// The transaction cannot commit any more (why): abort it.
    Abortable(String),
    /// A commit that could not happen (the transaction became abort-only meanwhile).
    CommitFailed(String),
    Fatal(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnProducerOutput {
    Send {
        to: Destination,
        correlation: u64,
        request: TxnProducerRequest,
    },
    Event(TxnProducerEvent),
}

/// The coordinator request in flight (one at a time).
#[derive(Clone, Debug, PartialEq, Eq)]
enum CoordCall {
    FindTxnCoordinator,
    InitProducerId,
    AddPartitions(Vec<TopicPartition>),
    AddOffsets,
    FindGroupCoordinator,
    TxnOffsetCommit,
    EndTxn(TxnResult),
}

/// A send_offsets call on its way: AddOffsetsToTxn, then TxnOffsetCommit.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PendingOffsets {
    group: GroupId,
    generation: Option<GenerationId>,
    member: Option<MemberId>,
    instance: Option<InstanceId>,
    offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    /// AddOffsetsToTxn answered: the group's partition is in the transaction.
    added: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct InFlight {
    tp: TopicPartition,
    batch: RecordBatch,
    deadline: Nanos,
}

#[derive(Clone, Debug)]
pub struct TransactionalProducer {
    config: TxnProducerConfig,
    state: TxnProducerState,
    produce: ProduceClient,
    coordinator: Option<NodeId>,
    group_coordinator: Option<(GroupId, NodeId)>,
    next_correlation: u64,
    /// The coordinator (or group coordinator) request in flight: correlation, what, deadline.
    call: Option<(u64, CoordCall, Nanos)>,
    /// No coordinator request before this time (backoff after a retriable error).
    backoff_until: Nanos,
    /// Partitions in the transaction (AddPartitionsToTxn answered).
    added: BTreeSet<TopicPartition>,
    /// Partitions with batches waiting to join the transaction.
    to_add: BTreeSet<TopicPartition>,
    /// Batches not yet stamped or sent, per partition, in order.
    unsent: BTreeMap<TopicPartition, VecDeque<RecordBatch>>,
    in_flight: BTreeMap<u64, InFlight>,
    /// Batches to send again at a time (a retriable error's backoff).
    resend: Vec<(Nanos, TopicPartition, RecordBatch)>,
    offsets: VecDeque<PendingOffsets>,
    /// The transaction touched the coordinator (a partition or a group was added): it
    /// must be ended with EndTxn. An empty transaction ends locally.
    registered: bool,
    outputs: Vec<TxnProducerOutput>,
}

impl TransactionalProducer {
    pub fn new(config: TxnProducerConfig) -> Self {
        Self {
            config,
            state: TxnProducerState::Uninitialized,
            produce: ProduceClient::idempotent(),
            coordinator: None,
            group_coordinator: None,
            next_correlation: 0,
            call: None,
            backoff_until: 0,
            added: BTreeSet::new(),
            to_add: BTreeSet::new(),
            unsent: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            resend: Vec::new(),
            offsets: VecDeque::new(),
            registered: false,
            outputs: Vec::new(),
        }
    }

    /// The wire message for `request` under `correlation`. A produce request encodes its
    /// batch, acks=all (as transactions require), and names the transactional id so the
    /// partition leader can verify the partition is in the transaction (KIP-890 part 1).
    pub fn to_message(
        &self,
        correlation: u64,
        request: &TxnProducerRequest,
    ) -> Result<Message, EncodeError> {
        Ok(match request {
            TxnProducerRequest::Txn(r) => Message::txn(correlation, r.clone()),
            TxnProducerRequest::Group(r) => Message::group(correlation, r.clone()),
            TxnProducerRequest::Produce { tp, batch } => {
                let mut req = ProduceClient::request(
                    correlation,
                    tp.clone(),
                    Acks::All,
                    self.config.produce_timeout,
                    batch,
                )?;
                req.transactional_id = Some(self.config.transactional_id.clone());
                Message::from(req)
            }
        })
    }

    pub fn state(&self) -> &TxnProducerState {
        &self.state
    }

    pub fn config(&self) -> &TxnProducerConfig {
        &self.config
    }

    /// The identity batches are stamped with (None before InitProducerId).
    pub fn producer(&self) -> Option<ProducerIdAndEpoch> {
        self.produce.producer()
    }

    pub fn coordinator(&self) -> Option<NodeId> {
        self.coordinator
    }

    /// Partitions in the open transaction.
    pub fn partitions(&self) -> impl Iterator<Item = &TopicPartition> + '_ {
        self.added.iter()
    }

    /// Whether every batch the application sent has left (none waits for its partition to
    /// join the transaction, for stamping or for a backoff).
    pub fn all_sent(&self) -> bool {
        self.unsent.values().all(VecDeque::is_empty) && self.resend.is_empty()
    }

    /// Whether `correlation` is a request this producer still waits for.
    pub fn awaits(&self, correlation: u64) -> bool {
        self.in_flight.contains_key(&correlation)
            || self.call.as_ref().is_some_and(|(c, ..)| *c == correlation)
    }

    // ---- the application's operations ----------------------------------------------------

    /// `init_transactions`: find the coordinator, then InitProducerId (which fences every
    /// older instance of this transactional id and ends its open transaction).
    pub fn init(&mut self, now: Nanos) -> Result<(), TxnClientError> {
        self.usable()?;
        if self.state != TxnProducerState::Uninitialized {
            return Err(TxnClientError::AlreadyInitialized);
        }
        self.state = TxnProducerState::Initializing;
        self.pump(now);
        Ok(())
    }

    /// `begin_transaction`: local only (the coordinator learns of the transaction with its
    /// first AddPartitionsToTxn / AddOffsetsToTxn).
    pub fn begin(&mut self) -> Result<(), TxnClientError> {
        match &self.state {
            TxnProducerState::Ready => {
                self.state = TxnProducerState::InTransaction;
                Ok(())
            }
            _ => Err(self.refusal()),
        }
    }

    /// Adds `batch` (records; stamped here) for `tp` to the open transaction. The partition
    /// joins the transaction first if it is new to it.
    pub fn send(
        &mut self,
        now: Nanos,
        tp: TopicPartition,
        batch: RecordBatch,
    ) -> Result<(), TxnClientError> {
        if self.state != TxnProducerState::InTransaction {
            return Err(self.refusal());
        }
        if batch.records.is_empty() {
            return Err(TxnClientError::EmptyBatch(tp));
        }
        if !self.added.contains(&tp) {
            self.to_add.insert(tp.clone());
        }
        self.unsent.entry(tp).or_default().push_back(batch);
        self.pump(now);
        Ok(())
    }

    /// `send_offsets_to_transaction`: the group's offsets commit with the transaction
    /// (AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to the group
    /// coordinator). `generation`/`member`: the consumer's, checked by the group coordinator
    /// (None: not checked).
    pub fn send_offsets(
        &mut self,
        now: Nanos,
        group: impl Into<GroupId>,
        generation: Option<GenerationId>,
        member: Option<MemberId>,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    ) -> Result<(), TxnClientError> {
        if self.state != TxnProducerState::InTransaction {
            return Err(self.refusal());
        }
        let group = group.into();
        if group.is_empty() {
            return Err(TxnClientError::InvalidGroupId);
        }
        self.offsets.push_back(PendingOffsets {
            group,
            generation,
            member,
            instance: None,
            offsets,
            added: false,
        });
        self.pump(now);
        Ok(())
    }

    /// `commit_transaction`: once every write is acknowledged, EndTxn(commit). Refused
    /// (`AbortOnly`) when the transaction can no longer commit.
    pub fn commit(&mut self, now: Nanos) -> Result<(), TxnClientError> {
        if self.state != TxnProducerState::InTransaction {
            return Err(self.refusal());
        }
        self.state = TxnProducerState::Committing;
        self.pump(now);
        Ok(())
    }

    /// `abort_transaction`: allowed in a transaction and after an abortable error. Batches
    /// not yet sent and offsets not yet committed are dropped; batches in flight are
    /// waited for (not resent), then EndTxn(abort).
    pub fn abort(&mut self, now: Nanos) -> Result<(), TxnClientError> {
        match &self.state {
            TxnProducerState::InTransaction | TxnProducerState::AbortableError(_) => {}
            _ => return Err(self.refusal()),
        }
        self.state = TxnProducerState::Aborting;
        self.unsent.clear();
        self.to_add.clear();
        self.resend.clear();
        self.offsets.clear();
        // A partition or group request in flight may still add to the coordinator's
        // transaction; its answer is taken, then EndTxn.
        self.pump(now);
        Ok(())
    }

    fn usable(&self) -> Result<(), TxnClientError> {
        match &self.state {
            TxnProducerState::Fatal(why) => Err(TxnClientError::Fatal(why.clone())),
            _ => Ok(()),
        }
    }

    /// Why an operation is refused in the current state.
    fn refusal(&self) -> TxnClientError {
        match &self.state {
            TxnProducerState::Fatal(why) => TxnClientError::Fatal(why.clone()),
            TxnProducerState::Uninitialized | TxnProducerState::Initializing => {
                TxnClientError::NotInitialized
            }
            TxnProducerState::Ready => TxnClientError::NoTransaction,
            TxnProducerState::InTransaction => TxnClientError::TransactionInProgress,
            TxnProducerState::Committing | TxnProducerState::Aborting => {
                TxnClientError::TransactionCompleting
            }
            TxnProducerState::AbortableError(why) => TxnClientError::AbortOnly(why.clone()),
        }
    }

    // ---- the host's side ------------------------------------------------------------------

    /// An answer to request `correlation` (answers nobody waits for are dropped).
    pub fn step(&mut self, now: Nanos, correlation: u64, response: TxnProducerResponse) {
        if let Some(sent) = self.in_flight.remove(&correlation) {
            if let TxnProducerResponse::Produce(result) = response {
                self.on_produce(now, sent, &result);
            } else {
                // An answer of another kind: treat as lost (the deadline logic resends).
                self.in_flight.insert(correlation, sent);
            }
        } else if self.call.as_ref().is_some_and(|(c, ..)| *c == correlation) {
            let (_, call, _) = self.call.take().expect("checked");
            match (call, response) {
                (call, TxnProducerResponse::Txn(r)) => self.on_txn(now, call, r),
                (call, TxnProducerResponse::Group(r)) => self.on_group(now, call, r),
                (call, TxnProducerResponse::Produce(_)) => {
                    debug_assert!(false, "a produce answer to a coordinator call {call:?}");
                }
            }
        }
        self.pump(now);
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        if let Some((_, call, deadline)) = &self.call {
            if *deadline <= now {
                // Lost: ask again (after finding the coordinator again, which may have moved).
                if matches!(
                    call,
                    CoordCall::TxnOffsetCommit | CoordCall::FindGroupCoordinator
                ) {
                    self.group_coordinator = None;
                } else {
                    self.coordinator = None;
                }
                self.call = None;
            }
        }
        let expired: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(c, _)| *c)
            .collect();
        for c in expired {
            let f = self.in_flight.remove(&c).expect("listed");
            if self.state == TxnProducerState::Aborting {
                // The abort fences it (KIP-890 part 2's epoch bump); waiting longer gains
                // nothing. Its sequence goes with the epoch.
                continue;
            }
            // Same batch, same sequence: the leader deduplicates it if it was written.
            match self.produce.resend(&f.tp, &f.batch) {
                Ok(b) => self.send_batch(now, f.tp, b),
                Err(e) => self.fail_producer(e),
            }
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.resend)
            .into_iter()
            .partition(|(t, ..)| *t <= now);
        self.resend = later;
        for (_, tp, batch) in due {
            self.send_batch(now, tp, batch);
        }
        self.pump(now);
    }

    pub fn poll_timeout(&self) -> Option<Nanos> {
        let call = self.call.as_ref().map(|(_, _, d)| *d);
        let waiting = (self.call.is_none() && self.backoff_until > 0 && self.wants_call())
            .then_some(self.backoff_until);
        let produce = self.in_flight.values().map(|f| f.deadline).min();
        let resend = self.resend.iter().map(|(t, ..)| *t).min();
        [call, waiting, produce, resend].into_iter().flatten().min()
    }

    pub fn poll_outputs(&mut self) -> Vec<TxnProducerOutput> {
        std::mem::take(&mut self.outputs)
    }

    // ---- deciding what to send ------------------------------------------------------------

    fn correlation(&mut self) -> u64 {
        self.next_correlation += 1;
        self.next_correlation
    }

    fn emit(&mut self, e: TxnProducerEvent) {
        self.outputs.push(TxnProducerOutput::Event(e));
    }

    fn send_batch(&mut self, now: Nanos, tp: TopicPartition, batch: RecordBatch) {
        let correlation = self.correlation();
        self.in_flight.insert(
            correlation,
            InFlight {
                tp: tp.clone(),
                batch: batch.clone(),
                deadline: now + self.config.request_timeout,
            },
        );
        self.outputs.push(TxnProducerOutput::Send {
            to: Destination::LeaderOf(tp.clone()),
            correlation,
            request: TxnProducerRequest::Produce { tp, batch },
        });
    }

    /// The next coordinator request the state calls for, if any.
    fn next_call(&self) -> Option<CoordCall> {
        use TxnProducerState as S;
        let needs_txn_coordinator = match &self.state {
            S::Initializing => Some(CoordCall::InitProducerId),
            S::InTransaction | S::Committing if !self.to_add.is_empty() => Some(
                CoordCall::AddPartitions(self.to_add.iter().cloned().collect()),
            ),
            S::InTransaction | S::Committing => match self.offsets.front() {
                Some(o) if !o.added => Some(CoordCall::AddOffsets),
                Some(o) => {
                    return Some(match &self.group_coordinator {
                        Some((g, _)) if *g == o.group => CoordCall::TxnOffsetCommit,
                        _ => CoordCall::FindGroupCoordinator,
                    })
                }
                None if self.state == S::Committing && self.drained() => {
                    Some(CoordCall::EndTxn(TxnResult::Commit))
                }
                None => None,
            },
            S::Aborting if self.drained() => Some(CoordCall::EndTxn(TxnResult::Abort)),
            _ => None,
        }?;
        Some(match self.coordinator {
            Some(_) => needs_txn_coordinator,
            None => CoordCall::FindTxnCoordinator,
        })
    }

    fn wants_call(&self) -> bool {
        self.next_call().is_some()
    }

    /// Nothing in flight or waiting to be sent.
    fn drained(&self) -> bool {
        self.in_flight.is_empty()
            && self.resend.is_empty()
            && self.unsent.values().all(VecDeque::is_empty)
    }

    /// Sends what can go now: batches of partitions in the transaction, the next
    /// coordinator request, or ends a transaction that never reached the coordinator.
    fn pump(&mut self, now: Nanos) {
        if matches!(self.state, TxnProducerState::Fatal(_)) {
            return;
        }
        if matches!(
            self.state,
            TxnProducerState::InTransaction | TxnProducerState::Committing
        ) {
            self.send_unsent(now);
        }
        let local_end = match &self.state {
            TxnProducerState::Committing => Some(TxnResult::Commit),
            TxnProducerState::Aborting => Some(TxnResult::Abort),
            _ => None,
        };
        if let Some(result) = local_end {
            // Nothing was registered with the coordinator: nothing to end there (Kafka sends
            // no EndTxn for an empty transaction).
            if !self.registered
                && self.call.is_none()
                && self.drained()
                && self.to_add.is_empty()
                && self.offsets.is_empty()
            {
                self.finish(result, None);
                return;
            }
        }
        if self.call.is_some() || now < self.backoff_until {
            return;
        }
        let Some(call) = self.next_call() else {
            return;
        };
        let id = self.config.transactional_id.clone();
        let ident = self.producer();
        let (pid, epoch) = ident.map_or((0, 0), |p| (p.producer_id, p.producer_epoch));
        let (to, request) = match &call {
            CoordCall::FindTxnCoordinator => (
                Destination::AnyBroker,
                TxnProducerRequest::Txn(TxnRequest::FindCoordinator {
                    transactional_id: id,
                }),
            ),
            CoordCall::InitProducerId => (
                Destination::Node(self.coordinator.expect("next_call")),
                TxnProducerRequest::Txn(TxnRequest::InitProducerId(InitProducerIdRequest {
                    transactional_id: id,
                    transaction_timeout_ms: self.config.transaction_timeout_ms,
                    current: ident,
                })),
            ),
            CoordCall::AddPartitions(partitions) => (
                Destination::Node(self.coordinator.expect("next_call")),
                TxnProducerRequest::Txn(TxnRequest::AddPartitionsToTxn(
                    AddPartitionsToTxnRequest {
                        transactional_id: id,
                        producer_id: pid,
                        producer_epoch: epoch,
                        partitions: partitions.clone(),
                        verify_only: false,
                    },
                )),
            ),
            CoordCall::AddOffsets => (
                Destination::Node(self.coordinator.expect("next_call")),
                TxnProducerRequest::Txn(TxnRequest::AddOffsetsToTxn(AddOffsetsToTxnRequest {
                    transactional_id: id,
                    producer_id: pid,
                    producer_epoch: epoch,
                    group_id: self.offsets.front().expect("next_call").group.clone(),
                })),
            ),
            CoordCall::FindGroupCoordinator => (
                Destination::AnyBroker,
                TxnProducerRequest::Group(GroupRequest::FindCoordinator {
                    group_id: self.offsets.front().expect("next_call").group.clone(),
                }),
            ),
            CoordCall::TxnOffsetCommit => {
                let o = self.offsets.front().expect("next_call");
                let node = self.group_coordinator.as_ref().expect("next_call").1;
                (
                    Destination::Node(node),
                    TxnProducerRequest::Group(GroupRequest::TxnOffsetCommit(
                        TxnOffsetCommitRequest {
                            group_id: o.group.clone(),
                            transactional_id: id,
                            producer_id: pid,
                            producer_epoch: epoch,
                            generation: o.generation,
                            member_id: o.member.clone(),
                            group_instance_id: o.instance.clone(),
                            offsets: o.offsets.clone(),
                        },
                    )),
                )
            }
            CoordCall::EndTxn(result) => (
                Destination::Node(self.coordinator.expect("next_call")),
                TxnProducerRequest::Txn(TxnRequest::EndTxn(EndTxnRequest {
                    transactional_id: id,
                    producer_id: pid,
                    producer_epoch: epoch,
                    result: *result,
                    keep_epoch: self.config.keep_epoch,
                })),
            ),
        };
        let correlation = self.correlation();
        self.call = Some((correlation, call, now + self.config.request_timeout));
        self.outputs.push(TxnProducerOutput::Send {
            to,
            correlation,
            request,
        });
    }

    /// Stamps and sends the waiting batches of partitions already in the transaction,
    /// within the idempotent window.
    fn send_unsent(&mut self, now: Nanos) {
        let ready: Vec<TopicPartition> = self
            .unsent
            .iter()
            .filter(|(tp, q)| !q.is_empty() && self.added.contains(*tp))
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in ready {
            loop {
                let busy = self.in_flight.values().filter(|f| f.tp == tp).count()
                    + self.resend.iter().filter(|(_, t, _)| *t == tp).count();
                if busy >= MAX_IN_FLIGHT {
                    break;
                }
                let Some(batch) = self.unsent.get_mut(&tp).and_then(VecDeque::pop_front) else {
                    break;
                };
                match self.produce.prepare(&tp, batch.transactional()) {
                    Ok(b) => self.send_batch(now, tp.clone(), b),
                    // The window still holds batches abandoned under this epoch (a sequence
                    // error, an abort's timed-out write) that no epoch bump cleared (a
                    // coordinator without KIP-890 part 2): this transaction cannot write.
                    Err(e @ ProducerError::TooManyInFlight { .. }) => {
                        self.abortable(e.to_string());
                        return;
                    }
                    Err(e) => {
                        self.fail_producer(e);
                        return;
                    }
                }
            }
        }
    }

    // ---- answers --------------------------------------------------------------------------

    fn on_produce(
        &mut self,
        now: Nanos,
        sent: InFlight,
        result: &Result<ProduceAck, ProduceError>,
    ) {
        if let Err(e @ (ProduceError::OutOfOrderSequence(_) | ProduceError::UnknownProducerId(_))) =
            result
        {
            // Inside a transaction a sequence gap cannot be repaired in place (KIP-360's
            // bump would orphan the transaction's earlier writes): abort; the abort's new
            // epoch restarts every sequence.
            self.abortable(format!("{}: {e}", sent.tp));
            return;
        }
        match self.produce.on_answer(&sent.tp, &sent.batch, result) {
            Ok(ProduceStep::Acked { base_offset, .. }) => self.emit(TxnProducerEvent::Written {
                tp: sent.tp,
                base_offset,
                records: sent.batch.record_count(),
            }),
            Ok(ProduceStep::Resend { batch, .. }) => {
                if self.state != TxnProducerState::Aborting {
                    let at = now + self.config.retry_backoff;
                    self.resend.push((at, sent.tp, batch));
                }
            }
            Ok(ProduceStep::Failed(e)) => self.abortable(format!("{}: {e}", sent.tp)),
            Ok(ProduceStep::Fenced(e)) => self.fatal(format!("{}: {e}", sent.tp)),
            Ok(ProduceStep::CheckLeader | ProduceStep::EpochBumped { .. }) => {
                debug_assert!(false, "sequence errors are handled above");
            }
            // A late answer for a batch the window no longer holds (after an epoch change).
            Err(ProducerError::UnknownBatch { .. }) => {}
            Err(e) => self.fail_producer(e),
        }
    }

    fn on_txn(&mut self, now: Nanos, call: CoordCall, r: TxnResponse) {
        match (call, r) {
            (CoordCall::FindTxnCoordinator, TxnResponse::FindCoordinator(r)) => match r {
                Ok(info) => self.coordinator = Some(info.node),
                Err(e) => self.txn_error(now, e, false),
            },
            (CoordCall::InitProducerId, TxnResponse::InitProducerId(r)) => match r {
                Ok(id) if self.state == TxnProducerState::Initializing => {
                    self.produce.init(id);
                    self.state = TxnProducerState::Ready;
                    self.emit(TxnProducerEvent::Initialized(id));
                }
                Ok(_) => {}
                Err(e) => self.txn_error(now, e, false),
            },
            (CoordCall::AddPartitions(partitions), TxnResponse::AddPartitionsToTxn(r)) => match r {
                Ok(()) => {
                    self.registered = true;
                    for tp in partitions {
                        self.to_add.remove(&tp);
                        self.added.insert(tp);
                    }
                }
                Err(e) => self.txn_error(now, e, true),
            },
            (CoordCall::AddOffsets, TxnResponse::AddOffsetsToTxn(r)) => match r {
                Ok(()) => {
                    self.registered = true;
                    if let Some(o) = self.offsets.front_mut() {
                        o.added = true;
                    }
                }
                Err(e) => self.txn_error(now, e, true),
            },
            (CoordCall::EndTxn(result), TxnResponse::EndTxn(r)) => match r {
                Ok(id) => self.finish(result, Some(id)),
                Err(e) => self.txn_error(now, e, false),
            },
            (call, r) => {
                // An answer of another kind under this correlation: ask again.
                debug_assert!(false, "answer {r:?} to {call:?}");
                self.backoff_until = now + self.config.retry_backoff;
            }
        }
    }

    fn on_group(&mut self, now: Nanos, call: CoordCall, r: GroupResponse) {
        let group = self.offsets.front().map(|o| o.group.clone());
        let retry = |s: &mut Self, e: &GroupError| {
            if e.needs_coordinator_lookup() {
                s.group_coordinator = None;
            }
            s.backoff_until = now + s.config.retry_backoff;
        };
        match (call, r) {
            (CoordCall::FindGroupCoordinator, GroupResponse::FindCoordinator(r)) => match r {
                Ok(info) => self.group_coordinator = group.map(|g| (g, info.node)),
                Err(e) if e.is_retriable() => retry(self, &e),
                Err(e) => self.abortable(format!("find the group coordinator: {e}")),
            },
            (CoordCall::TxnOffsetCommit, GroupResponse::TxnOffsetCommit(r)) => match r {
                Ok(()) => {
                    // (None: an abort dropped them meanwhile; they go with the transaction.)
                    if let Some(o) = self.offsets.pop_front() {
                        self.emit(TxnProducerEvent::OffsetsSent { group: o.group });
                    }
                }
                Err(e @ GroupError::InvalidProducerEpoch(_)) => {
                    self.fatal(format!("TxnOffsetCommit: {e}"))
                }
                Err(e) if e.is_retriable() => retry(self, &e),
                // A member of an old generation (or a fenced instance): Kafka's
                // CommitFailedException; the transaction cannot commit those offsets.
                Err(e) => self.abortable(format!("TxnOffsetCommit: {e}")),
            },
            (call, r) => {
                debug_assert!(false, "answer {r:?} to {call:?}");
                self.backoff_until = now + self.config.retry_backoff;
            }
        }
    }

    /// A coordinator's error. `write`: from a request that adds to the transaction
    /// (InvalidTxnState there makes it abort-only, not fatal).
    fn txn_error(&mut self, now: Nanos, e: TxnError, write: bool) {
        if e.is_retriable() {
            if e.needs_rediscovery() {
                self.coordinator = None;
            }
            self.backoff_until = now + self.config.retry_backoff;
            return;
        }
        match e {
            TxnError::ProducerFenced(_) | TxnError::InvalidProducerIdMapping(_) => {
                self.fatal(e.to_string())
            }
            TxnError::TransactionAbortable(_) => self.abortable(e.to_string()),
            TxnError::InvalidTxnState(_) if write => self.abortable(e.to_string()),
            // During an abort a write's refusal changes nothing: the abort goes on.
            _ if write && self.state == TxnProducerState::Aborting => {}
            _ if write => self.abortable(e.to_string()),
            _ => self.fatal(e.to_string()),
        }
    }

    /// The transaction ended (`id`: the coordinator's identity for the next one; None for
    /// an empty transaction ended locally).
    fn finish(&mut self, result: TxnResult, id: Option<ProducerIdAndEpoch>) {
        debug_assert!(self.drained(), "EndTxn only once every write is answered");
        if let Some(id) = id {
            // KIP-890 part 2: a new epoch (or id) restarts every sequence at 0. The same
            // epoch (a coordinator without part 2) keeps the sequences going.
            if Some(id) != self.producer() {
                self.produce.init(id);
            }
        }
        self.added.clear();
        self.to_add.clear();
        self.registered = false;
        self.group_coordinator = None;
        self.state = TxnProducerState::Ready;
        let producer = self.producer().expect("initialised");
        self.emit(TxnProducerEvent::Completed { result, producer });
    }

    fn abortable(&mut self, why: String) {
        match self.state {
            TxnProducerState::InTransaction => {}
            TxnProducerState::Committing => {
                self.emit(TxnProducerEvent::CommitFailed(why.clone()));
            }
            // Already abort-only, aborting, fatal: nothing more to say.
            _ => return,
        }
        self.state = TxnProducerState::AbortableError(why.clone());
        self.emit(TxnProducerEvent::Abortable(why));
    }

    fn fail_producer(&mut self, e: ProducerError) {
        match e {
            ProducerError::Fenced { .. } => self.fatal(e.to_string()),
            _ => self.abortable(e.to_string()),
        }
    }

    fn fatal(&mut self, why: String) {
        if matches!(self.state, TxnProducerState::Fatal(_)) {
            return;
        }
        self.state = TxnProducerState::Fatal(why.clone());
        self.call = None;
        self.in_flight.clear();
        self.resend.clear();
        self.unsent.clear();
        self.offsets.clear();
        self.emit(TxnProducerEvent::Fatal(why));
    }
}

/// Resolves `to` for a producer request: a partition with no known leader is answered at
/// once as `NotLeader` (no hint), so the producer sends the batch again after its backoff,
/// by when the refresh this marks due may have found one (rather than after a whole
/// request timeout).
pub fn route(to: &Destination, leaders: &mut LeaderCache) -> Resolved<TxnProducerResponse> {
    to.resolve(leaders, || {
        TxnProducerResponse::Produce(Err(ProduceError::NotLeader {
            leader: None,
            leader_epoch: 0,
        }))
    })
}

/// The producer's view of an answer off the wire (None: not an answer it understands).
pub fn from_message(msg: Message) -> Option<(u64, TxnProducerResponse)> {
    Some(match msg {
        Message::TxnResponse {
            correlation,
            response,
        } => (correlation, TxnProducerResponse::Txn(*response)),
        Message::GroupResponse {
            correlation,
            response,
        } => (correlation, TxnProducerResponse::Group(*response)),
        Message::ProduceResponse(r) => (r.correlation, TxnProducerResponse::Produce(r.result)),
        _ => return None,
    })
}

#[cfg(test)]
#[path = "txn_producer_tests.rs"]
mod tests;
