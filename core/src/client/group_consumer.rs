//! `GroupConsumer`: the client side of a consumer group, as a sans-I/O state machine.
//!
//! The application calls [`GroupConsumer::subscribe`], [`GroupConsumer::poll`],
//! [`GroupConsumer::commit_sync`] / [`GroupConsumer::commit_async`], [`GroupConsumer::seek`]
//! and [`GroupConsumer::close`]; the host delivers responses with
//! [`GroupConsumer::step`], advances time with [`GroupConsumer::handle_timeout`], and sends
//! whatever [`GroupConsumer::poll_outputs`] returns ([`ConsumerOutput::Send`] to a
//! [`Destination`]) and reports the [`ConsumerEvent`]s (assignments, revocations, losses,
//! commit results) to the application or the history.
//!
//! Membership loop: find the coordinator, join (rejoining once with the member id the
//! coordinator hands out), the leader computes the assignment with the agreed assignor, sync,
//! then heartbeat. Safety rules: partitions are revoked (positions committed first when
//! auto-commit is on) *before* an eager rejoin; cooperative members revoke only what the new
//! assignment takes away, then rejoin; a member told its generation is gone
//! (IllegalGeneration, UnknownMemberId) — or that has not reached the coordinator for a
//! session timeout — drops its partitions at once (`PartitionsLost`, no commit) before
//! rejoining. Records are only returned below the high watermark the broker reported.

use super::{FetchCursor, LeaderCache, Truncation};
use crate::group::assignor::{AssignorKind, AssignorMember, RebalanceProtocol, TopicPartitions};
use crate::group::owned::PartitionMap;
use crate::group::protocol::*;
use crate::log::Header;
use crate::txn::IsolationLevel;
use crate::types::{LeaderEpoch, Nanos, NodeId, Offset, TimestampMs, TopicPartition};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

const MS: Nanos = 1_000_000;

/// A partition's fetch cursor at `offset`, reading at the consumer's isolation level.
fn new_cursor(offset: Offset, ignore_truncation: bool, isolation: IsolationLevel) -> FetchCursor {
    FetchCursor::new(offset)
        .ignoring_truncation(ignore_truncation)
        .with_isolation(isolation)
}
const SECOND: Nanos = 1_000 * MS;

/// Where to start when the group has no committed offset for a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// Report [`ConsumerEvent::NoOffset`] and leave the partition idle.
    None,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerConfig {
    pub group_id: GroupId,
    pub instance_id: Option<InstanceId>,
    pub session_timeout: Nanos,
    pub rebalance_timeout: Nanos,
    pub heartbeat_interval: Nanos,
    /// Assignors offered, in order of preference.
    pub assignors: Vec<AssignorKind>,
    /// `Some(interval)`: commit positions from within `poll` at this interval, and before
    /// revoking partitions or leaving.
    pub auto_commit_interval: Option<Nanos>,
    pub reset: OffsetReset,
    pub retry_backoff: Nanos,
    pub request_timeout: Nanos,
    /// Wait this long before fetching again after an empty fetch.
    pub fetch_idle_backoff: Nanos,
    pub max_poll_records: usize,
    pub fetch_max_bytes: usize,
    /// Stop fetching a partition while this many records wait in its buffer.
    pub max_buffered_records: usize,
    /// The leader re-reads partition counts this often and rebalances when they changed
    /// (`metadata.max.age.ms`).
    pub metadata_max_age: Nanos,
    /// `isolation.level`: read_committed fetches stop at the last stable offset and drop
    /// aborted transactions' records (a read-process-write application's input).
    pub isolation: IsolationLevel,
}

impl ConsumerConfig {
    pub fn new(group_id: impl Into<GroupId>) -> Self {
        Self {
            group_id: group_id.into(),
            instance_id: None,
            session_timeout: 10 * SECOND,
            rebalance_timeout: 30 * SECOND,
            heartbeat_interval: 3 * SECOND,
            assignors: vec![AssignorKind::Range],
            auto_commit_interval: Some(5 * SECOND),
            reset: OffsetReset::Latest,
            retry_backoff: 100 * MS,
            request_timeout: 30 * SECOND,
            fetch_idle_backoff: 100 * MS,
            max_poll_records: 500,
            fetch_max_bytes: 1 << 20,
            max_buffered_records: 1000,
            metadata_max_age: 300 * SECOND,
            isolation: IsolationLevel::ReadUncommitted,
        }
    }
}

/// Where the host should send a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Any reachable broker (FindCoordinator, Metadata).
    AnyBroker,
    /// The group coordinator the consumer found.
    Node(NodeId),
    /// The current leader of this partition, as the host's metadata knows it.
    LeaderOf(TopicPartition),
}

/// Where a [`Destination`] resolves to by what the host's [`LeaderCache`] knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved<A> {
    /// Any broker the host can reach (the host picks).
    AnyBroker,
    Node(NodeId),
    /// No leader known: the answer to hand the client at once, so it backs off and retries
    /// (the cache is marked stale, so the host's next refresh looks for one).
    NoLeader(A),
}

impl Destination {
    /// Resolves this destination with `leaders`; `no_leader` builds the client's answer
    /// when a partition has no known leader. Every client host routes through this, so the
    /// simulator and the node runtime make the same choice.
    pub fn resolve<A>(
        &self,
        leaders: &mut LeaderCache,
        no_leader: impl FnOnce() -> A,
    ) -> Resolved<A> {
        match self {
            Destination::AnyBroker => Resolved::AnyBroker,
            Destination::Node(n) => Resolved::Node(*n),
            Destination::LeaderOf(tp) => match leaders.leader(tp) {
                Some(l) => Resolved::Node(l),
                None => {
                    leaders.invalidate();
                    Resolved::NoLeader(no_leader())
                }
            },
        }
    }
}

/// Partition-read failures, as the broker reports them on the wire.
pub use crate::message::ConsumerFetchError as FetchError;
/// A fetch answer, as the broker sends it (control batches included: the consumer skips
/// them, see [`crate::client::take_records`]).
pub use crate::message::ConsumerRecords as FetchedData;
/// The wire's offset spec (the consumer asks for `Earliest` or `Latest`, the high
/// watermark: the first offset not yet readable).
pub use crate::message::OffsetSpec;

/// What the consumer asks of brokers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerRequest {
    Group(GroupRequest),
    /// Partition counts of these topics.
    Metadata {
        topics: Vec<String>,
    },
    ListOffsets {
        tp: TopicPartition,
        spec: OffsetSpec,
        /// `Latest` is the last stable offset under read_committed.
        isolation: IsolationLevel,
    },
    /// Read committed records (below the HW) of `tp` from `offset`. `last_fetched_epoch`
    /// (the partition's [`FetchCursor`]'s) lets the leader tell whether its log still holds
    /// what this consumer read (KIP-320).
    Fetch {
        tp: TopicPartition,
        offset: Offset,
        max_bytes: usize,
        last_fetched_epoch: Option<LeaderEpoch>,
        isolation: IsolationLevel,
    },
}

/// Responses the host hands back, matched to requests by correlation id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerResponse {
    Group(GroupResponse),
    /// Partition counts; unknown topics are absent.
    Metadata {
        topics: BTreeMap<String, u32>,
    },
    /// `Ok(None)`: the broker has no such offset (only for a timestamp spec).
    ListOffsets(Result<Option<Offset>, FetchError>),
    Fetch(Result<FetchedData, FetchError>),
}

pub type CommitId = u64;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    #[error("not a member of a stable generation")]
    RebalanceInProgress,
    #[error("{0} is not assigned to this consumer")]
    NotOwned(TopicPartition),
    #[error("coordinator refused the commit: {0}")]
    Group(GroupError),
    #[error("no answer within the request timeout")]
    Timeout,
}

/// A record handed to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumedRecord {
    pub tp: TopicPartition,
    pub offset: Offset,
    pub leader_epoch: LeaderEpoch,
    pub timestamp: TimestampMs,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
}

/// What happened, for the application (and the simulator's history).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerEvent {
    PartitionsAssigned {
        generation: GenerationId,
        partitions: Vec<TopicPartition>,
    },
    /// Given up cleanly (positions committed first with auto-commit); no more records.
    PartitionsRevoked { partitions: Vec<TopicPartition> },
    /// The generation is gone: processing stopped at once, nothing committed.
    PartitionsLost { partitions: Vec<TopicPartition> },
    CommitCompleted {
        id: CommitId,
        result: Result<BTreeMap<TopicPartition, Offset>, CommitError>,
    },
    /// The consumer began a commit of its own: an auto-commit from `poll`, or one before
    /// revoking partitions. It ends with `CommitCompleted` under the same id, as a user
    /// commit does, so observers (histories, the simulator's group checks) see both alike.
    CommitStarted {
        id: CommitId,
        offsets: BTreeMap<TopicPartition, Offset>,
    },
    /// No committed offset and reset policy `None`: the partition stays idle until `seek`.
    NoOffset { tp: TopicPartition },
    /// The partition's log was truncated below this consumer's fetch position (an unclean
    /// election; the leader answered `DivergingEpoch`): the fetch position, and the position
    /// if it was past it, moved back to `truncation.to`, and buffered records from there on
    /// were dropped. Records the application already had in `[to, from)` are gone from the
    /// log; what is written there now is read next (Kafka's reset-and-report on truncation).
    Truncated {
        tp: TopicPartition,
        truncation: Truncation,
    },
    /// An error the consumer cannot recover from (fenced static instance, incompatible
    /// assignors); it stops.
    Fatal(GroupError),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerOutput {
    Send {
        to: Destination,
        correlation: CorrelationId,
        request: ConsumerRequest,
    },
    Event(ConsumerEvent),
}

/// Where the consumer is in the membership protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberPhase {
    Unsubscribed,
    /// Must (re)join as soon as the coordinator is known and revocations are done.
    NeedsJoin,
    Joining,
    /// Leader waiting for partition counts to compute the assignment.
    AwaitingMetadata,
    Syncing,
    Stable,
    Closed,
    Failed(GroupError),
}

/// How far a commit of "the positions" goes: a user commit (after the application
/// processed what it polled) commits the positions; auto-commit only what earlier polls
/// returned ([`PartitionState::consumed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Upto {
    Position,
    Consumed,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum CommitPurpose {
    User {
        id: CommitId,
        retry: bool,
        deadline: Nanos,
    },
    Auto {
        id: CommitId,
    },
    /// Before revoking: when done (or given up at `deadline`), finish the revocation.
    Revoke {
        id: CommitId,
        deadline: Nanos,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Inflight {
    FindCoordinator,
    Join,
    Sync,
    Heartbeat {
        generation: GenerationId,
    },
    Leave,
    Commit(PendingCommit),
    /// `rewinds`: the consumer's [`GroupConsumer::rewind_to_committed`] count when sent
    /// (an answer from before a rewind is stale).
    OffsetFetch {
        partitions: Vec<TopicPartition>,
        rewinds: u64,
    },
    Metadata,
    ListOffsets {
        tp: TopicPartition,
    },
    Fetch {
        tp: TopicPartition,
        offset: Offset,
    },
}

#[derive(Clone, Debug, Default)]
struct PartitionState {
    /// Next offset `poll` returns.
    position: Option<Offset>,
    /// The position when `poll` was last called (or set by a seek, reset or committed-offset
    /// lookup): the records before it were returned by an earlier poll and, the application
    /// having come back to poll, are processed. What auto-commit commits, also when a
    /// rebalance revokes the partition between polls, as Kafka's consumer does: it commits
    /// only from inside `poll`, so records still being processed are never committed.
    consumed: Option<Offset>,
    /// Where the next fetch starts (position + buffered) and the epoch it carries: core's
    /// one fetch cursor, as every reader has (KIP-320 truncation detection).
    cursor: Option<FetchCursor>,
    /// Last offset this consumer saw committed for the partition.
    committed: Option<Offset>,
    /// Sequence of the commit that set `committed` (answers may arrive out of order).
    committed_sequence: u64,
    /// The next commit may go below `committed`: the application seeked.
    reset: bool,
    high_watermark: Option<Offset>,
    buffer: VecDeque<ConsumedRecord>,
    fetching: bool,
    resolving: bool,
    no_offset: bool,
    retry_at: Nanos,
}

impl PartitionState {
    /// A position not reached by `poll` (seek, reset, committed offset): nothing between the
    /// old and the new position is in the application's hands.
    fn set_position(&mut self, to: Option<Offset>) {
        self.position = to;
        self.consumed = to;
    }

    /// The position moved back (seek, reset policy, a truncation): the next commit may go
    /// below `committed`. Answers to commits sent before now (whose sequences are below
    /// `next_sequence`) are overtaken: one of them must not use up the allowance meant for
    /// the commit after the reset, nor raise `committed` above where the position now is.
    fn mark_reset(&mut self, next_sequence: u64) {
        self.reset = true;
        self.committed_sequence = self.committed_sequence.max(next_sequence);
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct PendingCommit {
    offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    purpose: CommitPurpose,
    generation: GenerationId,
    /// This consumer's commit sequence number; retries keep it.
    sequence: u64,
}

/// A revocation waiting for its commit, then for what comes after.
#[derive(Clone, Debug, PartialEq, Eq)]
enum AfterRevoke {
    Join,
    Leave,
}

pub struct GroupConsumer {
    config: ConsumerConfig,
    topics: BTreeSet<String>,
    phase: MemberPhase,
    coordinator: Option<NodeId>,
    member_id: Option<MemberId>,
    generation: Option<GenerationId>,
    /// Generation of the last assignment received: what `owned` is claimed with on rejoin.
    owned_generation: Option<GenerationId>,
    protocol: Option<AssignorKind>,
    pending_join: Option<JoinGroupResponse>,
    /// As leader: the partition counts the current assignment was computed from (0 = topic
    /// unknown then), and when to check them again.
    assigned_with: Option<TopicPartitions>,
    next_metadata_check: Nanos,
    owned: PartitionMap<PartitionState>,
    metadata: TopicPartitions,
    revoking: Option<(Vec<TopicPartition>, AfterRevoke)>,
    /// Correlation, request, when it was sent, when it times out; in correlation order
    /// (sent in that order). A handful at most: a sorted `Vec` answers, times out and
    /// scans them for a fraction of a map's cost, once per response and step.
    inflight: Vec<(CorrelationId, Inflight, Nanos, Nanos)>,
    /// The bug zoo's `consumer-ignores-truncation` for the partition cursors.
    ignore_truncation: bool,
    /// Send time of the request whose response is being handled.
    answered_sent_at: Nanos,
    next_correlation: CorrelationId,
    next_commit: CommitId,
    /// Sequence of the last commit request sent (see `Committer::Member::sequence`).
    commit_sequence: u64,
    /// Commits waiting for a coordinator to retry against, with the generation they were
    /// made in (a retry never borrows a later generation's authority).
    retry_commits: Vec<PendingCommit>,
    backoff_until: Nanos,
    next_heartbeat: Nanos,
    last_contact: Nanos,
    next_auto_commit: Nanos,
    outputs: Vec<ConsumerOutput>,
    /// Latest time seen: deadlines at or before it were already acted on (or wait on
    /// something with its own deadline), so `poll_timeout` never reports them.
    last_now: Nanos,
    /// Where the records a fetch answer gave lie in it (kept between answers for its
    /// allocation): they are moved out of the answer into the buffer, not copied.
    taken: Vec<(Offset, (usize, usize))>,
    /// How many times the application rewound to the committed offsets.
    rewinds: u64,
}

/// A consumer configuration that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConsumerConfigError {
    #[error("group id is empty")]
    EmptyGroupId,
    #[error("no assignor configured")]
    NoAssignors,
    #[error("heartbeat interval must be shorter than the session timeout")]
    HeartbeatNotBelowSession,
    #[error("max_poll_records must be at least 1")]
    ZeroPollRecords,
}

impl ConsumerConfig {
    pub fn validate(&self) -> Result<(), ConsumerConfigError> {
        if self.group_id.is_empty() {
            return Err(ConsumerConfigError::EmptyGroupId);
        }
        if self.assignors.is_empty() {
            return Err(ConsumerConfigError::NoAssignors);
        }
        if self.heartbeat_interval >= self.session_timeout {
            return Err(ConsumerConfigError::HeartbeatNotBelowSession);
        }
        if self.max_poll_records == 0 {
            return Err(ConsumerConfigError::ZeroPollRecords);
        }
        Ok(())
    }
}

impl GroupConsumer {
    pub fn new(config: ConsumerConfig) -> Result<Self, ConsumerConfigError> {
        config.validate()?;
        Ok(Self {
            config,
            topics: BTreeSet::new(),
            phase: MemberPhase::Unsubscribed,
            coordinator: None,
            member_id: None,
            generation: None,
            owned_generation: None,
            protocol: None,
            pending_join: None,
            assigned_with: None,
            next_metadata_check: 0,
            owned: PartitionMap::default(),
            metadata: BTreeMap::new(),
            revoking: None,
            inflight: Vec::new(),
            answered_sent_at: 0,
            next_correlation: 1,
            next_commit: 1,
            commit_sequence: 0,
            retry_commits: Vec::new(),
            backoff_until: 0,
            next_heartbeat: 0,
            last_contact: 0,
            next_auto_commit: 0,
            outputs: Vec::new(),
            last_now: 0,
            ignore_truncation: false,
            taken: Vec::new(),
            rewinds: 0,
        })
    }

    // ---- views --------------------------------------------------------------------------

    /// The bug zoo's `consumer-ignores-truncation`: every partition cursor drops diverging
    /// answers (see [`FetchCursor::ignoring_truncation`]).
    pub fn ignoring_truncation(mut self, ignore: bool) -> Self {
        self.ignore_truncation = ignore;
        self
    }

    pub fn phase(&self) -> &MemberPhase {
        &self.phase
    }
    pub fn member_id(&self) -> Option<&MemberId> {
        self.member_id.as_ref()
    }
    pub fn generation(&self) -> Option<GenerationId> {
        self.generation
    }
    pub fn coordinator(&self) -> Option<NodeId> {
        self.coordinator
    }
    /// Partitions this consumer may process right now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.owned.keys().cloned().collect()
    }
    /// The assigned partitions in order ([`GroupConsumer::assignment`] without the copy).
    pub fn assigned(&self) -> impl Iterator<Item = &TopicPartition> + '_ {
        self.owned.keys()
    }
    /// Whether any partition is assigned ([`GroupConsumer::assignment`] without the copy).
    pub fn has_assignment(&self) -> bool {
        !self.owned.is_empty()
    }
    pub fn position(&self, tp: &TopicPartition) -> Option<Offset> {
        self.owned.get(tp).and_then(|p| p.position)
    }
    /// Where the partition's next fetch starts (its [`FetchCursor`]'s position: the
    /// position plus what is buffered), if known.
    pub fn fetch_position(&self, tp: &TopicPartition) -> Option<Offset> {
        self.owned
            .get(tp)
            .and_then(|p| p.cursor.as_ref())
            .map(FetchCursor::position)
    }

    /// Partition `tp`'s [`Self::fetch_position`] and its records fetched at or above
    /// `from` and not yet returned by `poll`, in offset order, in one lookup: for a host
    /// that watches what each fetch gave, as the simulator's checks do, reading them here
    /// rather than taking the answer's records a second time.
    pub fn buffered_from(
        &self,
        tp: &TopicPartition,
        from: Offset,
    ) -> (Option<Offset>, impl Iterator<Item = &ConsumedRecord> + '_) {
        let p = self.owned.get(tp);
        let position = p.and_then(|p| p.cursor.as_ref()).map(FetchCursor::position);
        let records = p.into_iter().flat_map(move |p| {
            let i = p.buffer.partition_point(|r| r.offset < from);
            p.buffer.range(i..)
        });
        (position, records)
    }

    /// Whether the request under `correlation` still awaits its answer (not timed out or
    /// answered): an answer to it now is handled, not dropped.
    pub fn awaits(&self, correlation: CorrelationId) -> bool {
        (self.inflight)
            .binary_search_by_key(&correlation, |r| r.0)
            .is_ok()
    }

    pub fn committed(&self, tp: &TopicPartition) -> Option<Offset> {
        self.owned.get(tp).and_then(|p| p.committed)
    }
    /// Each assigned partition, in order, with its [`GroupConsumer::position`] and
    /// [`GroupConsumer::committed`]: for a host that looks at all of them after every step,
    /// without a lookup per partition.
    pub fn assigned_offsets(
        &self,
    ) -> impl Iterator<Item = (&TopicPartition, Option<Offset>, Option<Offset>)> + '_ {
        self.owned
            .iter()
            .map(|(tp, p)| (tp, p.position, p.committed))
    }

    // ---- application calls --------------------------------------------------------------

    /// Subscribe to `topics` (replacing any previous subscription) and join the group.
    pub fn subscribe(&mut self, now: Nanos, topics: &[&str]) {
        if matches!(self.phase, MemberPhase::Closed | MemberPhase::Failed(_)) {
            return;
        }
        self.topics = topics.iter().map(|t| t.to_string()).collect();
        self.request_rejoin(now);
        self.advance(now);
    }

    /// Records ready for processing, below the high watermark, from owned partitions only.
    /// With auto-commit, first commits the positions reached by previous polls (records
    /// returned earlier are taken as processed).
    pub fn poll(&mut self, now: Nanos) -> Vec<ConsumedRecord> {
        for p in self.owned.values_mut() {
            p.consumed = p.position;
        }
        if let Some(interval) = self.config.auto_commit_interval {
            if self.phase == MemberPhase::Stable && now >= self.next_auto_commit {
                self.next_auto_commit = now + interval;
                let offsets = self.positions_to_commit(None, Upto::Consumed);
                if !offsets.is_empty() {
                    let id = self.start_own_commit(&offsets);
                    let purpose = CommitPurpose::Auto { id };
                    self.send_commit(now, offsets, purpose, self.generation, None);
                }
            }
        }
        // Sized up front: grown push by push it reallocated on most polls.
        let buffered: usize = self.owned.values().map(|p| p.buffer.len()).sum();
        let mut out = Vec::with_capacity(buffered.min(self.config.max_poll_records));
        'outer: loop {
            let mut progressed = false;
            for (_, p) in self.owned.iter_mut() {
                if out.len() >= self.config.max_poll_records {
                    break 'outer;
                }
                if let Some(r) = p.buffer.pop_front() {
                    p.position = Some(r.offset + 1);
                    out.push(r);
                    progressed = true;
                }
            }
            if !progressed {
                break;
            }
        }
        self.advance(now);
        out
    }

    /// Commit every owned partition's position; retried on retriable errors until the
    /// request timeout. The outcome arrives as [`ConsumerEvent::CommitCompleted`].
    pub fn commit_sync(&mut self, now: Nanos) -> CommitId {
        let offsets = self.positions_to_commit(None, Upto::Position);
        self.commit(now, offsets, true)
    }

    /// Commit every owned partition's position once, without retries.
    pub fn commit_async(&mut self, now: Nanos) -> CommitId {
        let offsets = self.positions_to_commit(None, Upto::Position);
        self.commit(now, offsets, false)
    }

    /// Commit explicit offsets (each the next offset to consume) of owned partitions.
    pub fn commit_offsets(
        &mut self,
        now: Nanos,
        offsets: BTreeMap<TopicPartition, Offset>,
        sync: bool,
    ) -> CommitId {
        let offsets = offsets
            .into_iter()
            .map(|(tp, o)| (tp, OffsetAndMetadata::new(o)))
            .collect();
        self.commit(now, offsets, sync)
    }

    /// Move the position of an owned partition. Commits may then go below what was
    /// committed before: this is the explicit reset.
    pub fn seek(&mut self, now: Nanos, tp: &TopicPartition, offset: Offset) -> bool {
        let (ignore, isolation) = (self.ignore_truncation, self.config.isolation);
        let next_sequence = self.commit_sequence + 1;
        let Some(p) = self.owned.get_mut(tp) else {
            return false;
        };
        p.set_position(Some(offset));
        p.cursor = Some(new_cursor(offset, ignore, isolation));
        p.buffer.clear();
        p.fetching = false; // an in-flight fetch is now stale (checked by offset)
        p.resolving = false;
        p.no_offset = false;
        p.mark_reset(next_sequence);
        self.advance(now);
        true
    }

    /// Seek to the log start or the high watermark.
    pub fn seek_to(&mut self, now: Nanos, tp: &TopicPartition, spec: OffsetSpec) -> bool {
        let next_sequence = self.commit_sequence + 1;
        let Some(p) = self.owned.get_mut(tp) else {
            return false;
        };
        p.buffer.clear();
        p.set_position(None);
        p.cursor = None;
        p.fetching = false;
        p.resolving = true;
        p.no_offset = false;
        p.mark_reset(next_sequence);
        let tp = tp.clone();
        self.send(
            now,
            Destination::LeaderOf(tp.clone()),
            ConsumerRequest::ListOffsets {
                tp: tp.clone(),
                spec,
                isolation: self.config.isolation,
            },
            Inflight::ListOffsets { tp },
        );
        true
    }

    /// Forget every owned partition's position and buffered records and look the group's
    /// committed offsets up again (an OffsetFetch with `require_stable`, so a transaction
    /// still completing is waited for): what a read-process-write application does after
    /// its transaction aborted or ended unknown (Kafka's `resetToLastCommittedPositions`).
    /// Answers to lookups sent before are ignored: they may predate the outcome.
    pub fn rewind_to_committed(&mut self, now: Nanos) {
        self.rewinds += 1;
        let next_sequence = self.commit_sequence + 1;
        for p in self.owned.values_mut() {
            p.buffer.clear();
            p.set_position(None);
            p.cursor = None;
            p.fetching = false;
            p.resolving = false;
            p.no_offset = false;
            p.retry_at = 0;
            p.mark_reset(next_sequence);
        }
        self.advance(now);
    }

    /// Leave the group: revoke (committing first with auto-commit), then LeaveGroup (static
    /// members do not leave: their session expires, so a quick restart keeps the assignment).
    pub fn close(&mut self, now: Nanos) {
        if matches!(self.phase, MemberPhase::Closed | MemberPhase::Failed(_)) {
            return;
        }
        // Closing, the application is done with everything it polled (Kafka's close commits
        // the positions).
        for p in self.owned.values_mut() {
            p.consumed = p.position;
        }
        let all: Vec<TopicPartition> = self.owned.keys().cloned().collect();
        self.start_revoke(now, all, AfterRevoke::Leave);
        self.advance(now);
    }

    // ---- host calls ---------------------------------------------------------------------

    /// The response to the request sent with `correlation`.
    pub fn step(&mut self, now: Nanos, correlation: CorrelationId, response: ConsumerResponse) {
        let Some((what, sent)) = self.take_inflight(correlation) else {
            return; // timed out earlier, or a duplicate
        };
        // Session liveness is measured from when the coordinator could at the earliest have
        // seen the request, so the client gives up no later than the coordinator evicts it.
        self.answered_sent_at = sent;
        match (what, response) {
            (
                Inflight::FindCoordinator,
                ConsumerResponse::Group(GroupResponse::FindCoordinator(r)),
            ) => match r {
                Ok(info) => self.coordinator = Some(info.node),
                Err(_) => self.backoff_until = now + self.config.retry_backoff,
            },
            (Inflight::Join, ConsumerResponse::Group(GroupResponse::JoinGroup(r))) => {
                self.on_join(now, r)
            }
            (Inflight::Sync, ConsumerResponse::Group(GroupResponse::SyncGroup(r))) => {
                self.on_sync(now, r)
            }
            (
                Inflight::Heartbeat { generation },
                ConsumerResponse::Group(GroupResponse::Heartbeat(r)),
            ) => self.on_heartbeat(now, generation, r),
            (Inflight::Leave, ConsumerResponse::Group(GroupResponse::LeaveGroup(_))) => {}
            (Inflight::Commit(c), ConsumerResponse::Group(GroupResponse::OffsetCommit(r))) => {
                self.on_commit(now, c, r)
            }
            (
                Inflight::OffsetFetch {
                    partitions,
                    rewinds,
                },
                ConsumerResponse::Group(GroupResponse::OffsetFetch(r)),
            ) => {
                if rewinds == self.rewinds {
                    self.on_offset_fetch(now, partitions, r)
                }
            }
            (Inflight::Metadata, ConsumerResponse::Metadata { topics }) => {
                self.metadata.extend(topics);
                if self.phase == MemberPhase::AwaitingMetadata {
                    self.assign_and_sync(now);
                } else if self.phase == MemberPhase::Stable {
                    let changed = self.assigned_with.as_ref().is_some_and(|used| {
                        used.iter()
                            .any(|(t, n)| self.metadata.get(t).copied().unwrap_or(0) != *n)
                    });
                    if changed {
                        tracing::debug!("partition counts changed: leader rebalances");
                        self.request_rejoin(now);
                    }
                }
            }
            (Inflight::ListOffsets { tp }, ConsumerResponse::ListOffsets(r)) => {
                let (ignore, isolation) = (self.ignore_truncation, self.config.isolation);
                if let Some(p) = self.owned.get_mut(&tp) {
                    if p.resolving {
                        p.resolving = false;
                        match r {
                            Ok(Some(o)) => {
                                p.set_position(Some(o));
                                p.cursor = Some(new_cursor(o, ignore, isolation));
                            }
                            Ok(None) | Err(_) => p.retry_at = now + self.config.retry_backoff,
                        }
                    }
                }
            }
            (Inflight::Fetch { tp, offset }, ConsumerResponse::Fetch(r)) => {
                self.on_fetch(now, tp, offset, r)
            }
            (what, resp) => {
                tracing::warn!(?what, ?resp, "response does not match its request; dropped");
                self.after_timeout(now, what);
            }
        }
        self.advance(now);
    }

    /// Advance time: request timeouts, commit retry deadlines, client-side liveness (every
    /// other entry point does this too).
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.advance(now);
    }

    /// The earliest deadline after the last step's time (chained iterators, no `Vec`:
    /// the simulator asks after every step of a group member).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        // The earliest deadline after `last_now`, folded by hand: a host asks after every
        // step, and a chain of seven iterators cost twice this.
        let last_now = self.last_now;
        let mut next: Option<Nanos> = None;
        let mut at = |t: Nanos| {
            if t > last_now && next.is_none_or(|n| t < n) {
                next = Some(t);
            }
        };
        for (_, _, _, deadline) in &self.inflight {
            at(*deadline);
        }
        if self.phase == MemberPhase::Stable {
            at(self.next_heartbeat);
            if self.assigned_with.is_some() {
                at(self.next_metadata_check);
            }
        }
        if !self.owned.is_empty() {
            at(self.liveness_deadline());
        }
        if self.backoff_until > 0 {
            at(self.backoff_until);
        }
        for p in self.owned.values() {
            if !p.fetching && p.retry_at > 0 {
                at(p.retry_at);
            }
        }
        for c in &self.retry_commits {
            match &c.purpose {
                CommitPurpose::User { deadline, .. } | CommitPurpose::Revoke { deadline, .. } => {
                    at(*deadline)
                }
                CommitPurpose::Auto { .. } => {}
            }
        }
        next
    }

    pub fn poll_outputs(&mut self) -> Vec<ConsumerOutput> {
        std::mem::take(&mut self.outputs)
    }

    /// [`Self::poll_outputs`], appended to `out`: both keep their allocations, for a host
    /// that drains after every step.
    pub fn poll_outputs_into(&mut self, out: &mut Vec<ConsumerOutput>) {
        out.append(&mut self.outputs);
    }

    // ---- internals ----------------------------------------------------------------------

    fn liveness_deadline(&self) -> Nanos {
        self.last_contact
            + self
                .config
                .session_timeout
                .min(self.config.rebalance_timeout)
    }

    /// The coordinator answered a request that refreshed our session.
    fn contact(&mut self) {
        self.last_contact = self.last_contact.max(self.answered_sent_at);
    }

    fn event(&mut self, e: ConsumerEvent) {
        self.outputs.push(ConsumerOutput::Event(e));
    }

    fn send(&mut self, now: Nanos, to: Destination, request: ConsumerRequest, what: Inflight) {
        let correlation = self.next_correlation;
        self.next_correlation += 1;
        let timeout = match what {
            // A join is parked by the coordinator for up to the rebalance timeout.
            Inflight::Join => self.config.rebalance_timeout + self.config.request_timeout,
            _ => self.config.request_timeout,
        };
        debug_assert!(self.inflight.last().is_none_or(|l| l.0 < correlation));
        self.inflight.push((correlation, what, now, now + timeout));
        self.outputs.push(ConsumerOutput::Send {
            to,
            correlation,
            request,
        });
    }

    fn in_flight(&self, f: impl Fn(&Inflight) -> bool) -> bool {
        self.inflight.iter().any(|(_, w, _, _)| f(w))
    }

    /// Removes the request `correlation` from those in flight: what it was and when it was
    /// sent.
    fn take_inflight(&mut self, correlation: CorrelationId) -> Option<(Inflight, Nanos)> {
        let i = (self.inflight)
            .binary_search_by_key(&correlation, |r| r.0)
            .ok()?;
        let (_, what, sent, _) = self.inflight.remove(i);
        Some((what, sent))
    }

    fn send_group(&mut self, now: Nanos, req: GroupRequest, what: Inflight) -> bool {
        match self.coordinator {
            Some(node) => {
                self.send(
                    now,
                    Destination::Node(node),
                    ConsumerRequest::Group(req),
                    what,
                );
                true
            }
            None => false,
        }
    }

    fn coordinator_lost(&mut self, now: Nanos) {
        self.coordinator = None;
        self.backoff_until = now + self.config.retry_backoff;
    }

    /// The driver: issue whatever the current state needs.
    fn timers(&mut self, now: Nanos) {
        let expired: Vec<CorrelationId> = self
            .inflight
            .iter()
            .filter(|(_, _, _, d)| now >= *d)
            .map(|(c, ..)| *c)
            .collect();
        for c in expired {
            let (what, _) = self.take_inflight(c).expect("listed");
            self.after_timeout(now, what);
        }
        // Fail user commits whose retry deadline passed while waiting for a coordinator
        // (none waiting on almost every step: then nothing to split).
        if !self.retry_commits.is_empty() {
            let (dead, live): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retry_commits)
                .into_iter()
                .partition(|c| match c.purpose {
                    CommitPurpose::User { deadline, .. }
                    | CommitPurpose::Revoke { deadline, .. } => now >= deadline,
                    CommitPurpose::Auto { .. } => false,
                });
            self.retry_commits = live;
            for c in dead {
                self.commit_done(now, &c.purpose, Err(CommitError::Timeout));
            }
        }
        // Client-side liveness: the coordinator evicts a member a session timeout after the
        // last request it saw, or at the end of a rebalance it did not rejoin, or a rebalance
        // timeout after a join it did not sync; `last_contact` is the send time of the last
        // request answered in a way that rules those out, so giving up at the earlier bound
        // stops processing no later than anyone else can be handed our partitions.
        if !self.owned.is_empty() && now >= self.liveness_deadline() {
            self.lose_partitions(now);
        }
    }

    fn advance(&mut self, now: Nanos) {
        self.last_now = self.last_now.max(now);
        self.timers(now);
        if matches!(
            self.phase,
            MemberPhase::Unsubscribed | MemberPhase::Closed | MemberPhase::Failed(_)
        ) {
            return;
        }
        if now >= self.backoff_until {
            self.backoff_until = 0;
        }
        if self.coordinator.is_none() {
            if self.backoff_until == 0 && !self.in_flight(|w| *w == Inflight::FindCoordinator) {
                let req = GroupRequest::FindCoordinator {
                    group_id: self.config.group_id.clone(),
                };
                self.send(
                    now,
                    Destination::AnyBroker,
                    ConsumerRequest::Group(req),
                    Inflight::FindCoordinator,
                );
            }
        } else if self.backoff_until == 0 {
            self.step_with_coordinator(now);
        }
        self.step_partitions(now);
    }

    fn step_with_coordinator(&mut self, now: Nanos) {
        for c in std::mem::take(&mut self.retry_commits) {
            self.send_commit(
                now,
                c.offsets,
                c.purpose,
                Some(c.generation),
                Some(c.sequence),
            );
        }
        if self.revoking.is_some() {
            return; // finish the revocation commit first
        }
        if self.phase == MemberPhase::NeedsJoin && !self.in_flight(|w| *w == Inflight::Join) {
            self.send_join(now);
        }
        if self.phase == MemberPhase::Stable
            && now >= self.next_heartbeat
            && !self.in_flight(|w| matches!(w, Inflight::Heartbeat { .. }))
        {
            let req = GroupRequest::Heartbeat(HeartbeatRequest {
                group_id: self.config.group_id.clone(),
                generation: self.generation.unwrap_or_default(),
                member_id: self.member_id.clone().unwrap_or_default(),
                group_instance_id: self.config.instance_id.clone(),
            });
            let generation = self.generation.unwrap_or_default();
            self.send_group(now, req, Inflight::Heartbeat { generation });
            self.next_heartbeat = now + self.config.heartbeat_interval;
        }
        // As leader, watch the partition counts the assignment was computed from.
        if self.phase == MemberPhase::Stable
            && now >= self.next_metadata_check
            && !self.in_flight(|w| *w == Inflight::Metadata)
        {
            if let Some(used) = &self.assigned_with {
                let topics = used.keys().cloned().collect();
                self.next_metadata_check = now + self.config.metadata_max_age;
                self.send(
                    now,
                    Destination::AnyBroker,
                    ConsumerRequest::Metadata { topics },
                    Inflight::Metadata,
                );
            }
        }
        // Positions of newly owned partitions: one OffsetFetch for all of them.
        let need: Vec<TopicPartition> = self
            .owned
            .iter()
            .filter(|(_, p)| {
                p.position.is_none() && !p.resolving && !p.no_offset && now >= p.retry_at
            })
            .map(|(tp, _)| tp.clone())
            .collect();
        if !need.is_empty() && self.phase == MemberPhase::Stable {
            for tp in &need {
                self.owned.get_mut(tp).expect("owned").resolving = true;
            }
            let req = GroupRequest::OffsetFetch(OffsetFetchRequest {
                group_id: self.config.group_id.clone(),
                partitions: Some(need.clone()),
                require_stable: true,
            });
            let rewinds = self.rewinds;
            self.send_group(
                now,
                req,
                Inflight::OffsetFetch {
                    partitions: need,
                    rewinds,
                },
            );
        }
    }

    fn step_partitions(&mut self, now: Nanos) {
        // The map is taken out while its partitions send (`send` does not look at it): no
        // list of the fetches, with a copy of each name, built first.
        let mut owned = std::mem::take(&mut self.owned);
        for (tp, p) in owned.iter_mut() {
            if let (Some(c), false) = (&p.cursor, p.fetching) {
                if p.buffer.len() < self.config.max_buffered_records && now >= p.retry_at {
                    p.fetching = true;
                    let offset = c.position();
                    let req = ConsumerRequest::Fetch {
                        tp: tp.clone(),
                        offset,
                        max_bytes: self.config.fetch_max_bytes,
                        last_fetched_epoch: c.last_fetched_epoch(),
                        isolation: c.isolation(),
                    };
                    self.send(
                        now,
                        Destination::LeaderOf(tp.clone()),
                        req,
                        Inflight::Fetch {
                            tp: tp.clone(),
                            offset,
                        },
                    );
                }
            }
        }
        debug_assert!(self.owned.is_empty(), "a send changed the owned partitions");
        self.owned = owned;
    }

    fn send_join(&mut self, now: Nanos) {
        let owned: Vec<TopicPartition> = self.owned.keys().cloned().collect();
        let subscription = Subscription {
            topics: self.topics.iter().cloned().collect(),
            owned,
            generation: self.owned_generation,
        };
        let req = GroupRequest::JoinGroup(JoinGroupRequest {
            group_id: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            group_instance_id: self.config.instance_id.clone(),
            session_timeout: self.config.session_timeout,
            rebalance_timeout: self.config.rebalance_timeout,
            protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
            protocols: self
                .config
                .assignors
                .iter()
                .map(|a| ProtocolMetadata {
                    name: a.name().to_string(),
                    subscription: subscription.clone(),
                })
                .collect(),
        });
        if self.send_group(now, req, Inflight::Join) {
            self.phase = MemberPhase::Joining;
        }
    }

    fn rebalance_protocol(&self) -> RebalanceProtocol {
        self.protocol.unwrap_or(self.config.assignors[0]).protocol()
    }

    /// Start a rebalance from our side: eager members revoke everything first.
    fn request_rejoin(&mut self, now: Nanos) {
        if matches!(self.phase, MemberPhase::Closed | MemberPhase::Failed(_)) {
            return;
        }
        self.phase = MemberPhase::NeedsJoin;
        self.pending_join = None;
        if self.rebalance_protocol() == RebalanceProtocol::Eager && !self.owned.is_empty() {
            let all = self.owned.keys().cloned().collect();
            self.start_revoke(now, all, AfterRevoke::Join);
        }
    }

    fn start_revoke(&mut self, now: Nanos, partitions: Vec<TopicPartition>, then: AfterRevoke) {
        if let Some((parts, after)) = &mut self.revoking {
            // Already revoking: widen it; keep the stronger follow-up.
            for tp in partitions {
                if !parts.contains(&tp) {
                    parts.push(tp);
                }
            }
            if then == AfterRevoke::Leave {
                *after = AfterRevoke::Leave;
            }
            return;
        }
        self.revoking = Some((partitions.clone(), then));
        let set: BTreeSet<TopicPartition> = partitions.into_iter().collect();
        let offsets = if self.config.auto_commit_interval.is_some() && self.generation.is_some() {
            self.positions_to_commit(Some(&set), Upto::Consumed)
        } else {
            BTreeMap::new()
        };
        if offsets.is_empty() {
            self.finish_revoke(now);
            return;
        }
        let id = self.start_own_commit(&offsets);
        let purpose = CommitPurpose::Revoke {
            id,
            deadline: now + self.config.request_timeout,
        };
        if !self.send_commit(now, offsets, purpose, self.generation, None) {
            self.finish_revoke(now);
        }
    }

    fn finish_revoke(&mut self, now: Nanos) {
        let Some((parts, then)) = self.revoking.take() else {
            return;
        };
        for tp in &parts {
            self.owned.remove(tp);
        }
        if !parts.is_empty() {
            self.event(ConsumerEvent::PartitionsRevoked { partitions: parts });
        }
        match then {
            AfterRevoke::Join => {}
            AfterRevoke::Leave => {
                if self.config.instance_id.is_none() {
                    if let Some(member_id) = self.member_id.clone() {
                        let req = GroupRequest::LeaveGroup(LeaveGroupRequest {
                            group_id: self.config.group_id.clone(),
                            member_id,
                            group_instance_id: None,
                        });
                        self.send_group(now, req, Inflight::Leave);
                    }
                }
                self.phase = MemberPhase::Closed;
                self.generation = None;
            }
        }
    }

    /// The generation is gone: drop everything now, commit nothing, rejoin.
    fn lose_partitions(&mut self, now: Nanos) {
        let parts: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_keys().collect();
        if !parts.is_empty() {
            self.event(ConsumerEvent::PartitionsLost { partitions: parts });
        }
        self.revoking = None;
        self.generation = None;
        self.owned_generation = None;
        self.request_rejoin(now);
    }

    fn fail(&mut self, e: GroupError) {
        let parts: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_keys().collect();
        if !parts.is_empty() {
            self.event(ConsumerEvent::PartitionsLost { partitions: parts });
        }
        self.phase = MemberPhase::Failed(e.clone());
        self.event(ConsumerEvent::Fatal(e));
    }

    /// Common handling of a group error; returns true if it was consumed.
    fn group_error(&mut self, now: Nanos, e: &GroupError) {
        match e {
            GroupError::NotCoordinator | GroupError::CoordinatorNotAvailable => {
                self.coordinator_lost(now);
                self.request_rejoin_if_joining(now);
            }
            GroupError::CoordinatorLoadInProgress | GroupError::UnstableOffsetCommit => {
                self.backoff_until = now + self.config.retry_backoff;
                self.request_rejoin_if_joining(now);
            }
            GroupError::UnknownMemberId => {
                self.member_id = None;
                self.lose_partitions(now);
                self.backoff_until = now + self.config.retry_backoff;
            }
            GroupError::IllegalGeneration => {
                self.lose_partitions(now);
            }
            GroupError::RebalanceInProgress => self.request_rejoin(now),
            GroupError::MemberIdRequired(id) => {
                self.member_id = Some(id.clone());
                self.phase = MemberPhase::NeedsJoin;
            }
            GroupError::FencedInstanceId
            | GroupError::InconsistentGroupProtocol
            | GroupError::InvalidSessionTimeout
            | GroupError::InvalidGroupId
            | GroupError::GroupMaxSizeReached => self.fail(e.clone()),
            // A superseded commit says nothing about membership.
            GroupError::StaleCommit => {}
            // (GroupIdNotFound answers only the tooling's requests, never a member's;
            // InvalidProducerEpoch only a transactional producer's.)
            GroupError::InvalidAssignment(_)
            | GroupError::OffsetMetadataTooLarge
            | GroupError::NonEmptyGroup
            | GroupError::GroupIdNotFound
            | GroupError::InvalidProducerEpoch(_) => {
                self.backoff_until = now + self.config.retry_backoff;
                self.request_rejoin_if_joining(now);
            }
        }
    }

    fn request_rejoin_if_joining(&mut self, _now: Nanos) {
        if matches!(
            self.phase,
            MemberPhase::Joining | MemberPhase::Syncing | MemberPhase::AwaitingMetadata
        ) {
            self.phase = MemberPhase::NeedsJoin;
            self.pending_join = None;
        }
    }

    fn on_join(&mut self, now: Nanos, r: Result<JoinGroupResponse, GroupError>) {
        if self.phase != MemberPhase::Joining {
            return;
        }
        match r {
            Err(e) => {
                self.phase = MemberPhase::NeedsJoin;
                self.group_error(now, &e);
            }
            Ok(resp) => {
                let Some(kind) = AssignorKind::from_name(&resp.protocol) else {
                    self.fail(GroupError::InconsistentGroupProtocol);
                    return;
                };
                self.contact();
                self.member_id = Some(resp.member_id.clone());
                self.generation = Some(resp.generation);
                self.protocol = Some(kind);
                let leader = resp.is_leader() && !resp.skip_assignment;
                self.pending_join = Some(resp);
                self.assigned_with = None;
                if leader {
                    self.assign_and_sync(now);
                } else {
                    self.send_sync(now, BTreeMap::new());
                }
            }
        }
    }

    /// As leader: compute the assignment with the agreed assignor (fetching partition counts
    /// first if some subscribed topic is unknown) and sync it.
    fn assign_and_sync(&mut self, now: Nanos) {
        let Some(join) = self.pending_join.clone() else {
            return;
        };
        let wanted: BTreeSet<String> = join
            .members
            .iter()
            .flat_map(|m| m.subscription.topics.iter().cloned())
            .collect();
        // Always assign from fresh partition counts, asked of the coordinator: it has just
        // answered the join, so it is up and reachable, while a broker picked at random may
        // be stalled (alive but not answering, e.g. working off a slow disk's backlog), and
        // each such pick cost a request timeout and a new generation (seed 7177 lost three
        // in a row, 2.4 s, to one stalled broker after the final heal).
        if self.phase != MemberPhase::AwaitingMetadata {
            self.phase = MemberPhase::AwaitingMetadata;
            let to = self
                .coordinator
                .map_or(Destination::AnyBroker, Destination::Node);
            self.send(
                now,
                to,
                ConsumerRequest::Metadata {
                    topics: wanted.iter().cloned().collect(),
                },
                Inflight::Metadata,
            );
            return;
        }
        // Topics still unknown after a metadata answer do not exist: nothing to assign there.
        let kind = self.protocol.expect("set on join");
        let members: BTreeMap<MemberId, AssignorMember> = join
            .members
            .iter()
            .map(|m| (m.member_id.clone(), AssignorMember::from(&m.subscription)))
            .collect();
        let topics: TopicPartitions = self
            .metadata
            .iter()
            .filter(|(t, _)| wanted.contains(*t))
            .map(|(t, n)| (t.clone(), *n))
            .collect();
        self.assigned_with = Some(
            wanted
                .iter()
                .map(|t| (t.clone(), self.metadata.get(t).copied().unwrap_or(0)))
                .collect(),
        );
        self.next_metadata_check = now + self.config.metadata_max_age;
        let assignments = kind
            .assign(&members, &topics)
            .into_iter()
            .map(|(m, set)| {
                (
                    m,
                    MemberAssignment {
                        partitions: set.into_iter().collect(),
                    },
                )
            })
            .collect();
        self.send_sync(now, assignments);
    }

    fn send_sync(&mut self, now: Nanos, assignments: BTreeMap<MemberId, MemberAssignment>) {
        let req = GroupRequest::SyncGroup(SyncGroupRequest {
            group_id: self.config.group_id.clone(),
            generation: self.generation.unwrap_or_default(),
            member_id: self.member_id.clone().unwrap_or_default(),
            group_instance_id: self.config.instance_id.clone(),
            assignments,
        });
        self.phase = if self.send_group(now, req, Inflight::Sync) {
            MemberPhase::Syncing
        } else {
            MemberPhase::NeedsJoin
        };
    }

    fn on_sync(&mut self, now: Nanos, r: Result<MemberAssignment, GroupError>) {
        if self.phase != MemberPhase::Syncing {
            return;
        }
        self.pending_join = None;
        match r {
            Err(e) => {
                self.phase = MemberPhase::NeedsJoin;
                self.group_error(now, &e);
            }
            Ok(a) => {
                self.contact();
                self.phase = MemberPhase::Stable;
                self.next_heartbeat = now + self.config.heartbeat_interval;
                if let Some(i) = self.config.auto_commit_interval {
                    self.next_auto_commit = now + i;
                }
                self.owned_generation = self.generation;
                let new: BTreeSet<TopicPartition> = a.partitions.into_iter().collect();
                let revoked: Vec<TopicPartition> = self
                    .owned
                    .keys()
                    .filter(|tp| !new.contains(*tp))
                    .cloned()
                    .collect();
                let added: Vec<TopicPartition> = new
                    .iter()
                    .filter(|tp| !self.owned.contains_key(tp))
                    .cloned()
                    .collect();
                for tp in &added {
                    self.owned.insert(tp.clone(), PartitionState::default());
                }
                if !added.is_empty() {
                    let generation = self.generation.unwrap_or_default();
                    self.event(ConsumerEvent::PartitionsAssigned {
                        generation,
                        partitions: added,
                    });
                }
                if !revoked.is_empty() {
                    // Cooperative: give up what moved, then rejoin so it can be handed over.
                    self.phase = MemberPhase::NeedsJoin;
                    self.start_revoke(now, revoked, AfterRevoke::Join);
                }
            }
        }
    }

    fn on_heartbeat(&mut self, now: Nanos, generation: GenerationId, r: Result<(), GroupError>) {
        if r.is_err() && self.generation != Some(generation) {
            // A late answer about a generation we have already left behind.
            return;
        }
        match r {
            Ok(()) => self.contact(),
            // No contact: the coordinator's join deadline started before this answer.
            Err(GroupError::RebalanceInProgress) => {
                if self.phase == MemberPhase::Stable {
                    self.request_rejoin(now);
                }
            }
            // Only a Stable member acts on heartbeat errors; otherwise a join or sync is
            // under way and its own answer decides.
            Err(e) if self.phase == MemberPhase::Stable || e == GroupError::FencedInstanceId => {
                self.group_error(now, &e)
            }
            Err(_) => {}
        }
    }

    fn positions_to_commit(
        &self,
        only: Option<&BTreeSet<TopicPartition>>,
        upto: Upto,
    ) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        self.owned
            .iter()
            .filter(|(tp, _)| only.is_none_or(|s| s.contains(*tp)))
            .filter_map(|(tp, p)| {
                let pos = match upto {
                    Upto::Position => p.position?,
                    Upto::Consumed => p.consumed?,
                };
                (p.committed != Some(pos)).then(|| (tp.clone(), OffsetAndMetadata::new(pos)))
            })
            .collect()
    }

    fn commit(
        &mut self,
        now: Nanos,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
        sync: bool,
    ) -> CommitId {
        let id = self.next_commit;
        self.next_commit += 1;
        let refused = if self.phase != MemberPhase::Stable || self.revoking.is_some() {
            Some(CommitError::RebalanceInProgress)
        } else {
            offsets
                .keys()
                .find(|tp| !self.owned.contains_key(tp))
                .map(|tp| CommitError::NotOwned(tp.clone()))
        };
        if let Some(e) = refused {
            self.event(ConsumerEvent::CommitCompleted { id, result: Err(e) });
            return id;
        }
        if offsets.is_empty() {
            self.event(ConsumerEvent::CommitCompleted {
                id,
                result: Ok(BTreeMap::new()),
            });
            return id;
        }
        let purpose = CommitPurpose::User {
            id,
            retry: sync,
            deadline: now + self.config.request_timeout,
        };
        self.send_commit(now, offsets, purpose, self.generation, None);
        id
    }

    /// Send (or, without a coordinator, park for retry) a commit made in `generation`. False
    /// if it could not be sent and will not be retried; a user commit then has its result.
    fn send_commit(
        &mut self,
        now: Nanos,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
        purpose: CommitPurpose,
        generation: Option<GenerationId>,
        sequence: Option<u64>,
    ) -> bool {
        let Some(generation) = generation else {
            self.commit_done(now, &purpose, Err(CommitError::RebalanceInProgress));
            return false;
        };
        let sequence = sequence.unwrap_or_else(|| {
            self.commit_sequence += 1;
            self.commit_sequence
        });
        let req = GroupRequest::OffsetCommit(OffsetCommitRequest {
            group_id: self.config.group_id.clone(),
            committer: Committer::Member {
                sequence,
                member_id: self.member_id.clone().unwrap_or_default(),
                generation,
                group_instance_id: self.config.instance_id.clone(),
            },
            offsets: offsets.clone(),
        });
        if self.coordinator.is_some() && self.backoff_until == 0 {
            self.send_group(
                now,
                req,
                Inflight::Commit(PendingCommit {
                    offsets,
                    purpose,
                    generation,
                    sequence,
                }),
            );
            true
        } else if matches!(
            purpose,
            CommitPurpose::User { retry: true, .. } | CommitPurpose::Revoke { .. }
        ) {
            self.retry_commits.push(PendingCommit {
                offsets,
                purpose,
                generation,
                sequence,
            });
            true
        } else {
            let e = CommitError::Group(GroupError::CoordinatorNotAvailable);
            self.commit_done(now, &purpose, Err(e));
            false
        }
    }

    /// A commit of the consumer's own (auto, or before a revocation) begins: observers are
    /// told its id and offsets.
    fn start_own_commit(
        &mut self,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
    ) -> CommitId {
        let id = self.next_commit;
        self.next_commit += 1;
        let offsets = offsets
            .iter()
            .map(|(tp, o)| (tp.clone(), o.offset))
            .collect();
        self.event(ConsumerEvent::CommitStarted { id, offsets });
        id
    }

    /// The one way a commit ends: its result reported under its id, and a revocation that
    /// waited for it finished.
    fn commit_done(
        &mut self,
        now: Nanos,
        purpose: &CommitPurpose,
        result: Result<BTreeMap<TopicPartition, Offset>, CommitError>,
    ) {
        let (CommitPurpose::User { id, .. }
        | CommitPurpose::Auto { id }
        | CommitPurpose::Revoke { id, .. }) = *purpose;
        self.event(ConsumerEvent::CommitCompleted { id, result });
        if matches!(purpose, CommitPurpose::Revoke { .. }) {
            self.finish_revoke(now);
        }
    }

    fn on_commit(&mut self, now: Nanos, c: PendingCommit, r: Result<(), GroupError>) {
        let PendingCommit {
            offsets,
            purpose,
            generation,
            sequence,
        } = c;
        match r {
            Ok(()) => {
                for (tp, o) in &offsets {
                    if let Some(p) = self.owned.get_mut(tp) {
                        if sequence < p.committed_sequence {
                            continue; // an older commit's answer, overtaken by a newer one
                        }
                        debug_assert!(
                            p.reset || p.committed.is_none_or(|c| c <= o.offset),
                            "commits move forward"
                        );
                        p.committed = Some(o.offset);
                        p.committed_sequence = sequence;
                        p.reset = false;
                    }
                }
                let done = offsets.into_iter().map(|(tp, o)| (tp, o.offset)).collect();
                self.commit_done(now, &purpose, Ok(done));
            }
            Err(e) => {
                let retry = e.is_retriable()
                    && match &purpose {
                        CommitPurpose::User {
                            retry, deadline, ..
                        } => *retry && now < *deadline,
                        CommitPurpose::Revoke { deadline, .. } => now < *deadline,
                        CommitPurpose::Auto { .. } => false,
                    };
                if e.needs_coordinator_lookup() {
                    self.coordinator_lost(now);
                } else if e.is_retriable() {
                    self.backoff_until = now + self.config.retry_backoff;
                }
                if retry {
                    self.retry_commits.push(PendingCommit {
                        offsets,
                        purpose,
                        generation,
                        sequence,
                    });
                    return;
                }
                self.commit_done(now, &purpose, Err(CommitError::Group(e.clone())));
                if !e.is_retriable() && self.generation == Some(generation) {
                    // Fenced (IllegalGeneration, UnknownMemberId...): our generation is gone.
                    // A refusal of an older generation's commit says nothing about this one.
                    self.group_error(now, &e);
                }
            }
        }
    }

    fn on_offset_fetch(
        &mut self,
        now: Nanos,
        partitions: Vec<TopicPartition>,
        r: Result<BTreeMap<TopicPartition, OffsetAndMetadata>, GroupError>,
    ) {
        match r {
            Ok(committed) => {
                let mut resets = Vec::new();
                let (ignore, isolation) = (self.ignore_truncation, self.config.isolation);
                for tp in partitions {
                    let Some(p) = self.owned.get_mut(&tp) else {
                        continue;
                    };
                    if !p.resolving {
                        continue; // seeked meanwhile
                    }
                    match committed.get(&tp) {
                        Some(o) => {
                            p.resolving = false;
                            p.set_position(Some(o.offset));
                            p.cursor = Some(new_cursor(o.offset, ignore, isolation));
                            p.committed = Some(o.offset);
                            // Answers to commits sent before now are older than this
                            // (the next commit will carry `commit_sequence + 1`).
                            p.committed_sequence = self.commit_sequence + 1;
                        }
                        None => resets.push(tp),
                    }
                }
                for tp in resets {
                    self.apply_reset_policy(now, tp);
                }
            }
            Err(e) => {
                for tp in &partitions {
                    if let Some(p) = self.owned.get_mut(tp) {
                        p.resolving = false;
                        p.retry_at = now + self.config.retry_backoff;
                    }
                }
                self.group_error(now, &e);
            }
        }
    }

    fn apply_reset_policy(&mut self, now: Nanos, tp: TopicPartition) {
        let spec = match self.config.reset {
            OffsetReset::Earliest => OffsetSpec::Earliest,
            OffsetReset::Latest => OffsetSpec::Latest,
            OffsetReset::None => {
                if let Some(p) = self.owned.get_mut(&tp) {
                    p.resolving = false;
                    p.no_offset = true;
                }
                self.event(ConsumerEvent::NoOffset { tp });
                return;
            }
        };
        let next_sequence = self.commit_sequence + 1;
        if let Some(p) = self.owned.get_mut(&tp) {
            p.resolving = true;
            p.mark_reset(next_sequence);
        }
        self.send(
            now,
            Destination::LeaderOf(tp.clone()),
            ConsumerRequest::ListOffsets {
                tp: tp.clone(),
                spec,
                isolation: self.config.isolation,
            },
            Inflight::ListOffsets { tp },
        );
    }

    fn on_fetch(
        &mut self,
        now: Nanos,
        tp: TopicPartition,
        offset: Offset,
        r: Result<FetchedData, FetchError>,
    ) {
        let next_sequence = self.commit_sequence + 1;
        let Some(p) = self.owned.get_mut(&tp) else {
            return;
        };
        let Some(cursor) = p.cursor.as_mut().filter(|c| c.position() == offset) else {
            return; // stale: seeked or reset since (a newer fetch may be in flight)
        };
        p.fetching = false;
        match r {
            Ok(mut data) => {
                p.high_watermark = Some(data.high_watermark);
                let next_offset = cursor.take_indexes(&data, &mut self.taken);
                // Each record is taken once, so its parts move out of the answer (dropped
                // after) into the buffer.
                for &(o, (bi, ri)) in &self.taken {
                    let b = &mut data.batches[bi];
                    let r = &mut b.records[ri];
                    p.buffer.push_back(ConsumedRecord {
                        tp: tp.clone(),
                        offset: o,
                        leader_epoch: b.partition_leader_epoch,
                        timestamp: b.first_timestamp + r.timestamp_delta,
                        key: r.key.take(),
                        value: r.value.take(),
                        headers: std::mem::take(&mut r.headers),
                    });
                }
                if next_offset == offset {
                    p.retry_at = now + self.config.fetch_idle_backoff;
                }
            }
            // Below the log start: retention deleted the records; reset by policy. Past the
            // end of the broker asked is a stale leader (the host refreshes its leaders):
            // retried, like every other error, rather than reset.
            Err(FetchError::OffsetOutOfRange {
                offset,
                log_start_offset,
                ..
            }) if offset < log_start_offset => {
                p.buffer.clear();
                p.set_position(None);
                p.cursor = None;
                self.apply_reset_policy(now, tp);
            }
            Err(e) => match cursor.on_error(&e) {
                Some(truncation) => {
                    // What lay at or past the divergence point is gone: drop it from the
                    // buffer, and move the position back if the application was past it
                    // (a commit may then go below the committed offset, as after a seek).
                    let to = truncation.to;
                    p.buffer.retain(|r| r.offset < to);
                    if p.position.is_some_and(|pos| pos > to) {
                        p.set_position(Some(to));
                        p.mark_reset(next_sequence);
                    }
                    self.event(ConsumerEvent::Truncated { tp, truncation });
                }
                None => p.retry_at = now + self.config.retry_backoff,
            },
        }
    }

    fn after_timeout(&mut self, now: Nanos, what: Inflight) {
        match what {
            Inflight::FindCoordinator => self.backoff_until = now + self.config.retry_backoff,
            Inflight::Join | Inflight::Sync => {
                self.coordinator_lost(now);
                self.request_rejoin_if_joining(now);
            }
            Inflight::Heartbeat { .. } | Inflight::Leave => {}
            Inflight::Commit(c) => self.on_commit(now, c, Err(GroupError::CoordinatorNotAvailable)),
            // One sent before a rewind: the rewind's own lookup is in charge now.
            Inflight::OffsetFetch { rewinds, .. } if rewinds != self.rewinds => {}
            Inflight::OffsetFetch { partitions, .. } => {
                for tp in partitions {
                    if let Some(p) = self.owned.get_mut(&tp) {
                        p.resolving = false;
                    }
                }
                self.coordinator_lost(now);
            }
            Inflight::Metadata => {
                if self.phase == MemberPhase::AwaitingMetadata {
                    self.phase = MemberPhase::NeedsJoin;
                }
            }
            Inflight::ListOffsets { tp } => {
                if let Some(p) = self.owned.get_mut(&tp) {
                    p.resolving = false;
                    p.retry_at = now + self.config.retry_backoff;
                }
            }
            Inflight::Fetch { tp, offset } => {
                if let Some(p) = self.owned.get_mut(&tp) {
                    if p.cursor.as_ref().map(FetchCursor::position) == Some(offset) {
                        p.fetching = false;
                        p.retry_at = now + self.config.retry_backoff;
                    }
                }
            }
        }
    }
}
