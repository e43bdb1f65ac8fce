//! One partition replica: the leader or a follower of one topic partition on one broker.
//!
//! A [`Replica`] is a sans-I/O state machine over a [`ReplicaLog`]. The broker feeds it
//! metadata decisions ([`Replica::become_leader`] / [`Replica::become_follower`]), fetch
//! requests and responses, produce requests and the time ([`Replica::tick`]); it pushes
//! [`ReplicaEffect`]s (messages, ISR proposals for the controller, trace events) that the
//! broker drains. Every answer to a request leaves that one way, as an effect (no handler
//! returns one): a `Send` to whoever asked, ahead of what handling the request set off, or
//! a `LocalProduceAnswer` for the broker's own appends ([`ProduceOrigin::Local`]). Leader logic lives in `leader.rs`, follower logic in `follower.rs`; the
//! protocol and its invariants are written up in `docs/replication.md`.

mod check;
mod follower;
mod idempotence;
mod isr;
mod leader;
mod log;
mod marker_journal;
mod node_map;
mod repair;
mod txn;

#[cfg(test)]
mod tests;

pub use check::{CheckError, Checkpoint};
pub use idempotence::{ProducerCheck, ProducerStateTable};
pub use leader::AlterOutcome;
pub use log::{Appended, EncodedAppendError, LogFailure, ReplicaLog};
pub use marker_journal::{AppendedMarker, MarkerJournal, MARKER_JOURNAL_LEN};

use crate::bugs::Bugs;
use crate::log::RecordBatch;
use crate::message::{Address, Message, ProduceError, ProduceResponse};
use crate::types::{
    earliest, LeaderEpoch, Nanos, NodeId, Offset, PartitionEpoch, TimestampMs, TopicPartition,
};
use follower::FollowerState;
use leader::LeaderState;
use std::collections::BTreeSet;

/// Re-exported from the batch module, where it now lives (kept for existing paths).
pub use crate::log::CONTROL_BATCH_BIT;

/// How soon a leader tries a failed flush again ([`Replica::flush_or_retry`]).
const FLUSH_RETRY: Nanos = 100_000_000;

/// Per-replica tunables (the broker fills them from `BrokerConfig` and topic config).
#[derive(Clone, Debug, PartialEq, Eq)]

pub struct ReplicaConfig {
    /// A follower that has not caught up to the leader's log end for this long leaves
    /// the ISR (`replica.lag.time.max.ms`).
    pub replica_lag_time_max: Nanos,
    /// acks=all writes are refused when the ISR is smaller than this.
    pub min_insync_replicas: usize,
    pub fetch_max_bytes: usize,
    /// A follower whose fetch got no records waits this long before fetching again.
    pub fetch_backoff: Nanos,
    /// Long poll: the leader may hold a fetch that has nothing new for this long.
    pub fetch_max_wait: Nanos,
    /// A fetch without an answer for this long (on top of `fetch_max_wait`) is given up
    /// and resent.
    pub fetch_timeout: Nanos,
    /// An AlterPartition proposal without an answer for this long is resent.
    pub alter_partition_retry: Nanos,
    /// The leader fsyncs its log at most this long after an append. 0: right after
    /// each append. The high watermark only counts fsynced data, so this bounds the
    /// extra latency of acks=all.
    pub flush_interval: Nanos,
    /// An offline replica (its log failed a read) reads its whole log again this often;
    /// once that succeeds (the failure was transient) it is back online.
    pub log_recheck_interval: Nanos,
    /// The topic allows unclean leader election: a leader elected from outside the ISR may
    /// hold less than this follower's high watermark, so truncating below it is expected
    /// (and reported as [`Event::TruncatedBelowHighWatermark`]) rather than a bug.
    pub unclean_leader_election: bool,
    pub bugs: Bugs,
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        Self {
            replica_lag_time_max: 10_000_000_000,
            min_insync_replicas: 1,
            fetch_max_bytes: 1 << 20,
            fetch_backoff: 5_000_000,
            fetch_max_wait: 100_000_000,
            fetch_timeout: 500_000_000,
            alter_partition_retry: 500_000_000,
            flush_interval: 0,
            log_recheck_interval: 1_000_000_000,
            unclean_leader_election: false,
            bugs: Bugs::default(),
        }
    }
}

/// What [`Replica::repair_log`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    /// The log was cut before its first damaged batch (or read through): usable again.
    Cut,
    /// Not damaged, only unreadable for now: left offline, rechecked later.
    NotCorrupt,
    /// Even the cut failed: the caller should drop the whole log.
    Failed,
}

/// The role of a replica, for views.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReplicaRole {
    Leader,
    Follower {
        leader: NodeId,
    },
    /// Hosted, but the partition has no leader (or metadata says nothing yet).
    Offline,
}

/// Who asked for a produce, so its answer goes back the right way: a client (or any node)
/// over the network, or the broker hosting the replica itself (the group coordinator's
/// appends to `__consumer_offsets`), whose answers never touch the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProduceOrigin {
    Remote(Address),
    Local,
    /// A transaction marker the broker appends for a coordinator
    /// ([`Replica::append_txn_marker`]): answered as a [`ReplicaEffect::LocalMarkerAnswer`].
    Marker,
}

impl From<Address> for ProduceOrigin {
    fn from(a: Address) -> Self {
        ProduceOrigin::Remote(a)
    }
}

/// Effects a replica asks its broker to carry out.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplicaEffect {
    Send {
        to: Address,
        msg: Message,
    },
    /// The answer to a [`ProduceOrigin::Local`] produce, for the hosting broker itself.
    LocalProduceAnswer(ProduceResponse),
    /// The answer to a [`ProduceOrigin::Marker`] append (a transaction marker), for the
    /// hosting broker, which answers the coordinator.
    LocalMarkerAnswer(ProduceResponse),
    /// Propose a new ISR to the controller (AlterPartition).
    AlterPartition(IsrProposal),
    Event(Event),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsrProposal {
    pub tp: TopicPartition,
    pub leader: NodeId,
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch the proposal is based on; the controller rejects it if stale.
    pub partition_epoch: PartitionEpoch,
    pub new_isr: Vec<NodeId>,
}

/// Things worth tracing (and asserting on in the simulator).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    BecameLeader {
        tp: TopicPartition,
        epoch: LeaderEpoch,
        log_end_offset: Offset,
    },
    BecameFollower {
        tp: TopicPartition,
        leader: Option<NodeId>,
        epoch: LeaderEpoch,
    },
    /// A follower removed a divergent suffix.
    Truncated {
        tp: TopicPartition,
        from: Offset,
        to: Offset,
    },
    /// A leader announced a new high watermark (in fetch responses and to consumers).
    HighWatermark {
        tp: TopicPartition,
        leader_epoch: LeaderEpoch,
        high_watermark: Offset,
    },
    IsrProposed {
        tp: TopicPartition,
        isr: Vec<NodeId>,
    },
    IsrConfirmed {
        tp: TopicPartition,
        isr: Vec<NodeId>,
        partition_epoch: PartitionEpoch,
    },
    LogError {
        tp: TopicPartition,
        op: &'static str,
        error: String,
    },
    /// The log could not be read (corruption or a storage failure): the replica stopped
    /// leading and following this partition until the log reads again, or its broker
    /// repairs or reopens it.
    LogFailed { tp: TopicPartition, reason: String },
    /// An offline replica read its whole log again without error: back online.
    LogRecovered { tp: TopicPartition },
    /// The damaged batch at `offset` was refilled with the copy replica `from` sent
    /// (peer repair); the log is read through again next.
    BatchRepaired {
        tp: TopicPartition,
        offset: Offset,
        from: NodeId,
    },
    /// A follower's log end was below the leader's log start (retention overtook it): it
    /// emptied its log (ending at `from`) and continues at the leader's log start `to`.
    LogReset {
        tp: TopicPartition,
        from: Offset,
        to: Offset,
    },
    /// A follower truncated below its high watermark because its leader (elected uncleanly)
    /// does not hold records this follower saw committed: those records are lost.
    TruncatedBelowHighWatermark {
        tp: TopicPartition,
        high_watermark: Offset,
        to: Offset,
    },
}

/// Read-only snapshot of a replica for the simulator's invariant checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaView {
    pub tp: TopicPartition,
    pub role: ReplicaRole,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    pub high_watermark: Offset,
    /// Where read_committed readers stop ([`Replica::last_stable_offset`]; the HW when no
    /// transaction is open or undecided).
    pub last_stable_offset: Offset,
    pub log_start_offset: Offset,
    pub log_end_offset: Offset,
    pub flushed_offset: Offset,
    /// Latest epoch in the log's epoch cache.
    pub latest_log_epoch: Option<LeaderEpoch>,
    /// ISR as confirmed by the controller (leaders; empty on followers).
    pub isr: Vec<NodeId>,
    /// Confirmed ISR united with a pending proposal: what HW and min.insync use.
    pub maximal_isr: Vec<NodeId>,
    pub replicas: Vec<NodeId>,
    /// The log is offline with a corrupt batch ([`Replica::log_corrupt`]): until the broker
    /// has seen the controller take this copy out of the ISR and the ELR and repaired it,
    /// it takes no role (`apply_partition_state`), serves nothing and fetches nothing.
    pub log_corrupt: bool,
}

// Not boxed: one per hosted partition, and a leader's state is read on nearly every step.
#[allow(clippy::large_enum_variant)]
pub(crate) enum RoleState {
    Leader(LeaderState),
    Follower(FollowerState),
    Offline,
}

/// One partition replica.
pub struct Replica<L: ReplicaLog> {
    tp: TopicPartition,
    me: NodeId,
    log: L,
    config: ReplicaConfig,
    role: RoleState,
    /// Latest leader epoch this replica has learned from metadata.
    leader_epoch: LeaderEpoch,
    partition_epoch: PartitionEpoch,
    replicas: Vec<NodeId>,
    high_watermark: Offset,
    producers: ProducerStateTable,
    /// The markers appended as leader, for observers only ([`MarkerJournal`]).
    markers: MarkerJournal,
    effects: Vec<ReplicaEffect>,
    /// Set when the log has unflushed appends (leader side, flush_interval > 0).
    flush_due: Option<Nanos>,
    next_correlation: u64,
    /// Brokers the controller has fenced: never proposed for the ISR.
    pub(crate) fenced_brokers: BTreeSet<NodeId>,
    /// Set when the log failed a read (KIP-112 offline log): the replica neither leads
    /// nor follows any more, whatever the metadata says; its broker reports it offline.
    failure: Option<String>,
    /// When the offline log is next read through (None: armed at the next tick).
    recheck_at: Option<Nanos>,
    /// Offline because of damage (a CRC mismatch at this offset), not an I/O error that
    /// may go away: only such a log is cut by [`Replica::repair_log`].
    corrupt_at: Option<Offset>,
    /// The epoch this replica was leading when its log failed. Once the log reads again it
    /// may not lead that epoch again (its log holds batches of it, see `become_leader`),
    /// so it stays reported offline until metadata shows a newer epoch: otherwise a
    /// failure the controller never heard of (it was down) would leave the partition
    /// with a leader that refuses to lead.
    failed_as_leader: Option<LeaderEpoch>,
    /// Peer-repair requests sent: picks the next other replica to ask (round robin).
    repair_asks: usize,
    /// Peers that answered they hold no copy of the batch at `corrupt_at`.
    not_held_by: BTreeSet<NodeId>,
    /// Debug builds: the state at the previous `poll_outputs`, for the monotonic checks
    /// (see `check.rs`).
    #[cfg(debug_assertions)]
    debug_checkpoint: Option<Checkpoint>,
}

pub(crate) fn now_ms(now: Nanos) -> TimestampMs {
    (now / 1_000_000) as TimestampMs
}

pub(crate) fn is_control(batch: &RecordBatch) -> bool {
    batch.is_control()
}

impl<L: ReplicaLog> Replica<L> {
    /// A replica over an opened (recovered) log. It starts Offline: the broker tells it
    /// its role from metadata. Its high watermark starts at the log start offset: a lower
    /// HW is always safe (readers see less), and the log is never truncated to it.
    pub fn new(tp: TopicPartition, me: NodeId, log: L, config: ReplicaConfig) -> Self {
        let hw = log.log_start_offset();
        Self {
            tp,
            me,
            log,
            config,
            role: RoleState::Offline,
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: Vec::new(),
            high_watermark: hw,
            producers: ProducerStateTable::default(),
            markers: MarkerJournal::default(),
            effects: Vec::new(),
            flush_due: None,
            next_correlation: 1,
            fenced_brokers: BTreeSet::new(),
            failure: None,
            recheck_at: None,
            corrupt_at: None,
            failed_as_leader: None,
            repair_asks: 0,
            not_held_by: BTreeSet::new(),
            #[cfg(debug_assertions)]
            debug_checkpoint: None,
        }
    }

    pub fn tp(&self) -> &TopicPartition {
        &self.tp
    }

    pub fn role(&self) -> ReplicaRole {
        match &self.role {
            RoleState::Leader(_) => ReplicaRole::Leader,
            RoleState::Follower(f) => ReplicaRole::Follower { leader: f.leader },
            RoleState::Offline => ReplicaRole::Offline,
        }
    }

    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leader_epoch
    }

    pub fn partition_epoch(&self) -> PartitionEpoch {
        self.partition_epoch
    }

    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    /// Start from a checkpointed HW (clamped to the log end; never lowers it).
    pub fn restore_high_watermark(&mut self, hw: Offset) {
        let hw = hw.min(self.log.log_end_offset());
        self.high_watermark = self.high_watermark.max(hw);
    }

    /// Whether this replica must not be elected yet although its log reads: it failed
    /// while leading, and no newer leader epoch has been seen since (see
    /// `failed_as_leader`). Its broker keeps reporting it offline.
    pub fn awaiting_new_epoch(&self) -> bool {
        self.failed_as_leader
            .is_some_and(|e| self.leader_epoch <= e)
    }

    /// Whether the offline log is damaged (a read met a corrupt batch) rather than briefly
    /// unreadable.
    pub fn log_corrupt(&self) -> bool {
        self.failure.is_some() && self.corrupt_at.is_some()
    }

    /// The first damaged offset a read found, while the log is offline for it.
    pub fn damaged_at(&self) -> Option<Offset> {
        self.corrupt_at.filter(|_| self.failure.is_some())
    }

    /// Why this replica's log is offline, if it is (see [`Event::LogFailed`]).
    pub fn log_failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    pub fn log(&self) -> &L {
        &self.log
    }

    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }

    pub fn config(&self) -> &ReplicaConfig {
        &self.config
    }

    pub fn set_config(&mut self, config: ReplicaConfig) {
        self.config = config;
    }

    /// Brokers currently fenced by the controller (from the metadata image); the leader
    /// does not propose them for the ISR.
    pub fn set_fenced_brokers(&mut self, fenced: BTreeSet<NodeId>) {
        self.fenced_brokers = fenced;
    }

    pub fn view(&self) -> ReplicaView {
        let (isr, maximal) = match &self.role {
            RoleState::Leader(l) => (
                l.isr.confirmed().iter().copied().collect(),
                l.isr.maximal().to_vec(),
            ),
            _ => (Vec::new(), Vec::new()),
        };
        ReplicaView {
            tp: self.tp.clone(),
            role: self.role(),
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            high_watermark: self.high_watermark,
            last_stable_offset: self.last_stable_offset(),
            log_start_offset: self.log.log_start_offset(),
            log_end_offset: self.log.log_end_offset(),
            flushed_offset: self.log.flushed_offset(),
            latest_log_epoch: self.log.latest_epoch(),
            isr,
            maximal_isr: maximal,
            replicas: self.replicas.clone(),
            log_corrupt: self.log_corrupt(),
        }
    }

    /// Take the effects produced so far. Drivers call it after every call into the
    /// replica, so debug builds check the replica's invariants here (`check.rs`).
    pub fn poll_outputs(&mut self) -> Vec<ReplicaEffect> {
        self.poll_outputs_iter().collect()
    }

    /// [`Replica::poll_outputs`] keeping the buffer's capacity for the next step.
    pub fn poll_outputs_iter(&mut self) -> std::vec::Drain<'_, ReplicaEffect> {
        #[cfg(debug_assertions)]
        self.debug_check();
        self.effects.drain(..)
    }

    /// Whether `poll_outputs` would return anything.
    pub fn has_outputs(&self) -> bool {
        !self.effects.is_empty()
    }

    /// Earliest time at which `handle_timeout` has something to do.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if self.failure.is_some() {
            return Some(self.recheck_at.unwrap_or(0));
        }
        let role = match &self.role {
            RoleState::Leader(l) => l.next_timeout(&self.config),
            RoleState::Follower(f) => f.next_timeout(&self.config),
            RoleState::Offline => None,
        };
        earliest(role, self.flush_due)
    }

    /// Timers: fetch retries (follower), ISR lag checks, AlterPartition retries, produce
    /// timeouts and delayed flushes (leader).
    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.failure.is_some() {
            return self.recheck_log(now);
        }
        if let Some(due) = self.flush_due {
            if now >= due {
                self.flush_due = None;
                self.flush_or_retry(now);
                self.leader_maybe_advance_hw(now);
            }
        }
        match &self.role {
            RoleState::Leader(_) => self.leader_tick(now),
            RoleState::Follower(_) => self.follower_tick(now),
            RoleState::Offline => {}
        }
    }

    /// Apply the controller's view of this partition. Dispatches to the leader or
    /// follower transition; the same (or an older) epoch is a no-op except for ISR
    /// updates from the controller.
    #[allow(clippy::too_many_arguments)]
    pub fn apply_partition_state(
        &mut self,
        now: Nanos,
        leader: Option<NodeId>,
        leader_epoch: LeaderEpoch,
        partition_epoch: PartitionEpoch,
        isr: &[NodeId],
        replicas: &[NodeId],
    ) {
        if leader_epoch < self.leader_epoch
            || (leader_epoch == self.leader_epoch && partition_epoch < self.partition_epoch)
        {
            return; // stale metadata (reordered heartbeat responses)
        }
        self.replicas = replicas.to_vec();
        if self.failure.is_some() {
            // Offline: remember the epochs, take no role (the controller moves the
            // leadership away once the broker reports the partition offline).
            self.leader_epoch = leader_epoch;
            self.partition_epoch = partition_epoch;
            return;
        }
        if leader == Some(self.me) {
            self.become_leader(now, leader_epoch, partition_epoch, isr);
        } else {
            self.become_follower(now, leader, leader_epoch, partition_epoch);
        }
    }

    pub(crate) fn emit(&mut self, effect: ReplicaEffect) {
        self.effects.push(effect);
    }

    /// Where the effects of the request being handled start (see [`Self::reply_at`]).
    pub(crate) fn effects_mark(&self) -> usize {
        self.effects.len()
    }

    /// Every request's answer leaves as an effect, ahead of what handling it set off (the
    /// produces a fetch committed, an ISR change), in the order a broker answering at once
    /// would send them.
    pub(crate) fn reply_at(&mut self, mark: usize, to: Address, msg: Message) {
        self.effects.insert(mark, ReplicaEffect::Send { to, msg });
    }

    pub(crate) fn event(&mut self, event: Event) {
        tracing::debug!(?event, "replica event");
        self.effects.push(ReplicaEffect::Event(event));
    }

    pub(crate) fn log_error(&mut self, op: &'static str, error: LogFailure) {
        tracing::warn!(tp = %self.tp, op, %error, "log error");
        let tp = self.tp.clone();
        self.event(Event::LogError {
            tp,
            op,
            error: error.0,
        });
    }

    /// A read failed (a CRC mismatch, an unreadable segment): the log can no longer be
    /// trusted to serve, so the replica goes offline for this partition, as Kafka takes a
    /// failed log dir offline (KIP-112). A leader stops leading (waiting writes fail with
    /// NotLeader, held fetches are answered), a follower stops fetching. Nothing is
    /// truncated here: whether the log may be repaired is the broker's call, once the
    /// controller has taken this replica out of the ISR.
    pub(crate) fn fail_log(&mut self, op: &'static str, error: LogFailure) {
        let reason = format!("{op}: {error}");
        if let Some(at) = error.corrupt_at() {
            self.set_corrupt_at(Some(at));
        }
        self.log_error(op, error);
        if self.failure.is_some() {
            return;
        }
        self.release_parked();
        self.fail_waiting(ProduceError::NotLeader {
            leader: None,
            leader_epoch: self.leader_epoch,
        });
        if matches!(self.role, RoleState::Leader(_)) {
            self.failed_as_leader = Some(self.leader_epoch);
        }
        self.role = RoleState::Offline;
        self.flush_due = None;
        self.failure = Some(reason.clone());
        self.recheck_at = None;
        let tp = self.tp.clone();
        crate::probe!(ReplicaWentOffline);
        self.event(Event::LogFailed { tp, reason });
    }

    /// Offline: read the whole log again when due. A transient failure (an I/O error that
    /// went away) brings the replica back online — Offline, until the broker applies the
    /// partition state again; a corrupt batch keeps it offline.
    fn recheck_log(&mut self, now: Nanos) {
        let Some(due) = self.recheck_at else {
            self.recheck_at = Some(now + self.config.log_recheck_interval);
            return;
        };
        if now < due {
            return;
        }
        match self.scan_log(|_| {}) {
            Ok(()) => {
                self.failure = None;
                self.set_corrupt_at(None);
                self.recheck_at = None;
                let tp = self.tp.clone();
                self.event(Event::LogRecovered { tp });
            }
            Err(e) => {
                if let Some(at) = e.corrupt_at() {
                    self.set_corrupt_at(Some(at));
                }
                self.recheck_at = Some(now + self.config.log_recheck_interval);
                self.ask_peer_for_copy();
            }
        }
    }

    /// Offline, and no longer counted on (the broker checked that the controller took this
    /// copy out of the ISR and the ELR and another replica leads): cut the log at its first
    /// unreadable batch, dropping everything from there, so it can follow again and fetch
    /// the rest from the leader. A corrupt batch is never served or counted: the cut copy is
    /// only re-added to the ISR once it has fetched up to the HW again. Returns whether the
    /// log is usable again (false: even the cut failed; the caller drops the whole log).
    pub fn repair_log(&mut self) -> Repair {
        if self.failure.is_none() {
            return Repair::Cut;
        }
        if self.corrupt_at.is_none() {
            return Repair::NotCorrupt;
        }
        let end = self.log.log_end_offset();
        let mut from = self.log.log_start_offset();
        let cut = loop {
            if from >= end {
                break None;
            }
            match self.log.read(from, 1) {
                Ok(batches) => match batches.last() {
                    Some(last) => from = last.next_offset().max(from + 1),
                    None => break None,
                },
                // A read may take in several batches: cut at the damaged one it names, not
                // at the first one asked for (seed 200584 cut at 1 for damage at 8).
                Err(e) if e.corrupt_at().is_some() => {
                    break Some(
                        e.corrupt_at()
                            .filter(|&at| at > from && at < end)
                            .unwrap_or(from),
                    )
                }
                // Unreadable for now (an I/O error): try again later.
                Err(_) => return Repair::NotCorrupt,
            }
        };
        if let Some(at) = cut {
            if let Err(e) = self.log.truncate_to(at) {
                self.log_error("cut at the damaged batch", e);
                return Repair::Failed;
            }
            self.high_watermark = self.high_watermark.min(self.log.log_end_offset());
            let tp = self.tp.clone();
            self.event(Event::Truncated {
                tp,
                from: end,
                to: at,
            });
        }
        self.failure = None;
        self.set_corrupt_at(None);
        self.recheck_at = None;
        let tp = self.tp.clone();
        self.event(Event::LogRecovered { tp });
        Repair::Cut
    }

    /// Offline: read the log through now (not waiting for the recheck timer).
    pub fn recheck_log_now(&mut self) {
        if self.failure.is_some() {
            self.recheck_at = Some(0);
            self.recheck_log(0);
        }
    }

    /// Read every batch of the log, in order.
    fn scan_log(&mut self, mut each: impl FnMut(&RecordBatch)) -> Result<(), LogFailure> {
        let mut from = self.log.log_start_offset();
        let end = self.log.log_end_offset();
        while from < end {
            let batches = self.log.read(from, self.config.fetch_max_bytes)?;
            let Some(last) = batches.last() else { break };
            let next = last.next_offset().max(from + 1);
            for b in batches.iter().filter(|b| b.next_offset() > from) {
                each(b);
            }
            from = next;
        }
        Ok(())
    }

    /// fsync; on failure the flushed offset simply does not move (so the HW does not
    /// advance past unsynced data) and the error is reported.
    pub(crate) fn flush_log(&mut self) -> bool {
        match self.log.flush() {
            Ok(()) => true,
            Err(e) => {
                self.log_error("flush", e);
                false
            }
        }
    }

    /// A leader's flush: when it fails (a full disk) and data stays unflushed, it is tried
    /// again after [`FLUSH_RETRY`]. The leader's own flushed offset bounds the HW, and
    /// only the next append would otherwise flush again: a partition nobody writes to
    /// until its HW moves (`__consumer_offsets` while its coordinator waits to load) kept
    /// its HW below its log end for good (seed 5503, docs/simulation.md).
    pub(crate) fn flush_or_retry(&mut self, now: Nanos) {
        if !self.flush_log() && self.log.flushed_offset() < self.log.log_end_offset() {
            crate::probe!(LeaderFlushRetry);
            self.flush_due = Some(now + FLUSH_RETRY);
        }
    }

    pub(crate) fn correlation(&mut self) -> u64 {
        let c = self.next_correlation;
        self.next_correlation += 1;
        c
    }

    /// Rebuild producer idempotence state from the log (on becoming leader and after a
    /// truncation): the log is the only source of truth for written sequences. A batch
    /// that cannot be read leaves the table incomplete, and a leader with an incomplete
    /// table would take retries for new writes (duplicates), so a read failure takes the
    /// replica offline instead. Returns whether the table is complete.
    pub(crate) fn rebuild_producer_state(&mut self) -> bool {
        let mut table = ProducerStateTable::default();
        match self.scan_log(|b| table.load_batch(b)) {
            Ok(()) => {
                self.producers = table;
                // Markers the HW already passed decide their transactions.
                self.producers.on_high_watermark(self.high_watermark);
                true
            }
            Err(e) => {
                self.producers = ProducerStateTable::default();
                self.fail_log("rebuild producer state", e);
                false
            }
        }
    }
}
