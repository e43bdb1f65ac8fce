//! Leader side of a replica: answering follower fetches (with KIP-320 divergence checks),
//! tracking follower progress, the ISR and its proposals to the controller, the high
//! watermark, produce requests and their acknowledgement, and consumer reads.

use super::idempotence::ProducerCheck;
use super::isr::{Isr, Progress};
use super::node_map::NodeMap;
use super::{
    is_control, now_ms, EncodedAppendError, Event, IsrProposal, ProduceOrigin, Replica,
    ReplicaConfig, ReplicaEffect, ReplicaLog, RoleState,
};
use crate::log::{
    BatchHeader, CheckedBatch, EncodedBatch, EncodedBatches, RecordBatch, CONTROL_BATCH_BIT,
    TRANSACTIONAL_BATCH_BIT,
};
use crate::message::*;
use crate::txn::IsolationLevel;
use crate::types::{LeaderEpoch, Nanos, NodeId, Offset, PartitionEpoch};
use std::collections::BTreeSet;

use crate::types::earliest;

#[derive(Clone, Debug)]
pub(crate) struct PendingIsr {
    pub isr: BTreeSet<NodeId>,
    pub sent_at: Nanos,
}

/// An acks=all write waiting for the high watermark.
#[derive(Clone, Debug)]
pub(crate) struct WaitingProduce {
    pub client: ProduceOrigin,
    pub correlation: u64,
    pub base_offset: Offset,
    /// The HW that commits the whole batch.
    pub required: Offset,
    pub deadline: Nanos,
    pub duplicate: bool,
}

/// A long-polling fetch the leader holds until it has something new to say.
#[derive(Clone, Debug)]
pub(crate) struct Parked {
    pub correlation: u64,
    pub fetch_offset: Offset,
    pub follower_hw: Offset,
    pub max_bytes: usize,
    pub deadline: Nanos,
}

/// How soon a leader tries its epoch marker again after the log refused it.
const MARKER_RETRY: Nanos = 100_000_000;

pub(crate) struct LeaderState {
    /// Log end when this epoch began: the HW only advances past it (a record of the
    /// current epoch — at least the epoch marker — must be committed first).
    pub epoch_start_offset: Offset,
    /// The ISR, confirmed and proposed, and each follower's progress.
    pub isr: Isr,
    /// The latest proposal still waiting for an answer (resent on timeout).
    pub pending: Option<PendingIsr>,
    /// After a rejected proposal, do not propose again before this time.
    pub propose_not_before: Nanos,
    pub waiting: Vec<WaitingProduce>,
    /// Held fetches, one per follower (a newer fetch replaces an older one).
    pub parked: NodeMap<Parked>,
    /// The epoch marker could not be written (a full disk): when to try again. Until a
    /// batch of this epoch is in the log the HW cannot pass the epoch start, and a partition
    /// nobody produces to (`__consumer_offsets` before its coordinator has loaded) would
    /// never get one (seed 3836 of the 10,000-seed sweep: the coordinator stayed Loading).
    pub marker_retry_at: Option<Nanos>,
}

impl LeaderState {
    /// When the first ISR follower would count as lagging.
    fn lag_due(&self, cfg: &ReplicaConfig) -> Option<Nanos> {
        self.isr
            .earliest_caught_up()
            .map(|t| t + cfg.replica_lag_time_max + 1)
    }

    /// The earliest of the leader's deadlines: the pending proposal's resend (or else the
    /// first lag check), the epoch marker's retry, waiting writes and held fetches.
    pub fn next_timeout(&self, cfg: &ReplicaConfig) -> Option<Nanos> {
        let isr = match &self.pending {
            Some(p) => Some(p.sent_at + cfg.alter_partition_retry),
            None => self.lag_due(cfg).map(|d| d.max(self.propose_not_before)),
        };
        let mut t = earliest(isr, self.marker_retry_at);
        for w in &self.waiting {
            t = earliest(t, Some(w.deadline));
        }
        for p in self.parked.values() {
            t = earliest(t, Some(p.deadline));
        }
        t
    }
}

impl<L: ReplicaLog> Replica<L> {
    /// This broker leads the partition at `epoch` (or learns a new ISR within it).
    pub fn become_leader(
        &mut self,
        now: Nanos,
        epoch: LeaderEpoch,
        partition_epoch: PartitionEpoch,
        isr: &[NodeId],
    ) {
        if let RoleState::Leader(l) = &mut self.role {
            if epoch == self.leader_epoch {
                if partition_epoch > self.partition_epoch {
                    // The controller changed the ISR (our proposal, or its own change).
                    l.isr.confirm(isr);
                    l.pending = None;
                    self.partition_epoch = partition_epoch;
                    let ev = Event::IsrConfirmed {
                        tp: self.tp.clone(),
                        isr: isr.to_vec(),
                        partition_epoch,
                    };
                    self.event(ev);
                    self.leader_maybe_advance_hw(now);
                }
                return;
            }
            // Re-elected at a newer epoch: writes of the old epoch are not ours to
            // acknowledge any more (the client retries; idempotence dedups).
            self.release_parked();
            let leader = Some(self.me);
            self.fail_waiting(ProduceError::NotLeader {
                leader,
                leader_epoch: epoch,
            });
        }
        if self.log.latest_epoch().is_some_and(|e| e >= epoch) {
            // Our log already holds batches of this epoch but this process is not its
            // leader (a restart replaying old metadata): writing in it again could put
            // different records at the same (epoch, offset). Wait for a newer epoch.
            tracing::warn!(tp = %self.tp, epoch, "refusing leadership of an epoch already in the log");
            self.leader_epoch = epoch;
            self.partition_epoch = partition_epoch;
            self.role = RoleState::Offline;
            return;
        }
        self.leader_epoch = epoch;
        self.partition_epoch = partition_epoch;
        // Idempotence needs the producer state of the whole log; a log that cannot be
        // read in full takes the replica offline rather than lead with a partial table.
        if !self.rebuild_producer_state() {
            return;
        }
        let epoch_start_offset = self.log.log_end_offset();
        // Epoch marker: gives the epoch cache its entry right away (KIP-279 answers for
        // this epoch) and a record of the current epoch to commit, so the HW can move.
        let marker_retry_at = (!self.append_epoch_marker(now)).then(|| now + MARKER_RETRY);
        let followers = self
            .replicas
            .iter()
            .filter(|r| **r != self.me)
            .map(|r| (*r, Progress::starting(now, epoch_start_offset)))
            .collect();
        let state = LeaderState {
            epoch_start_offset,
            isr: Isr::new(self.me, isr, followers),
            pending: None,
            propose_not_before: 0,
            waiting: Vec::new(),
            parked: NodeMap::default(),
            marker_retry_at,
        };
        self.role = RoleState::Leader(state);
        let ev = Event::BecameLeader {
            tp: self.tp.clone(),
            epoch,
            log_end_offset: self.log.log_end_offset(),
        };
        self.event(ev);
        self.leader_maybe_advance_hw(now);
        // Leading (or offline, had a read failed since), in the epoch it was given.
        debug_assert!(!matches!(self.role, RoleState::Follower(_)) && self.leader_epoch == epoch);
        debug_assert!(
            self.log.log_end_offset() >= epoch_start_offset,
            "leading shrank the log"
        );
    }

    /// Appends this epoch's marker at the log end: it gives the epoch cache its entry at
    /// once (KIP-279 answers for this epoch) and a record of the current epoch to commit, so
    /// the HW can move. False if the log refused it (logged; the caller retries).
    fn append_epoch_marker(&mut self, now: Nanos) -> bool {
        let epoch = self.leader_epoch;
        let marker = RecordBatch::epoch_marker(self.log.log_end_offset(), epoch, now_ms(now));
        match self.log.append_as_leader(marker, epoch, now_ms(now)) {
            Ok(_) => {
                self.after_leader_append(now);
                true
            }
            Err(e) => {
                self.log_error("append epoch marker", e);
                false
            }
        }
    }

    /// A leader whose epoch marker failed: try again, unless a produce has since put a
    /// batch of this epoch in the log (which does the marker's job).
    fn retry_epoch_marker(&mut self, now: Nanos) {
        let RoleState::Leader(l) = &mut self.role else {
            return;
        };
        let Some(at) = l.marker_retry_at else { return };
        if now < at {
            return;
        }
        let has_epoch = self.log.latest_epoch() == Some(self.leader_epoch);
        let done = has_epoch || self.append_epoch_marker(now);
        if let RoleState::Leader(l) = &mut self.role {
            l.marker_retry_at = (!done).then(|| now + MARKER_RETRY);
        }
        if done {
            self.leader_maybe_advance_hw(now);
        }
    }

    pub(super) fn after_leader_append(&mut self, now: Nanos) {
        if self.config.flush_interval == 0 {
            self.flush_or_retry(now);
        } else if self.flush_due.is_none() {
            self.flush_due = Some(now + self.config.flush_interval);
        }
    }

    /// Fail every waiting acks=all produce (leadership lost or re-elected).
    pub(crate) fn fail_waiting(&mut self, error: ProduceError) {
        let waiting = match &mut self.role {
            RoleState::Leader(l) => std::mem::take(&mut l.waiting),
            _ => return,
        };
        for w in waiting {
            self.respond_produce(w.client, w.correlation, Err(error.clone()));
        }
    }

    fn respond_produce(
        &mut self,
        to: ProduceOrigin,
        correlation: u64,
        result: Result<ProduceAck, ProduceError>,
    ) {
        let resp = ProduceResponse {
            correlation,
            tp: self.tp.clone(),
            result,
        };
        self.emit(match to {
            ProduceOrigin::Remote(to) => ReplicaEffect::Send {
                to,
                msg: Message::ProduceResponse(resp),
            },
            ProduceOrigin::Local => ReplicaEffect::LocalProduceAnswer(resp),
            ProduceOrigin::Marker => ReplicaEffect::LocalMarkerAnswer(resp),
        });
    }

    fn known_leader(&self) -> Option<NodeId> {
        match &self.role {
            RoleState::Leader(_) => Some(self.me),
            RoleState::Follower(f) => Some(f.leader),
            RoleState::Offline => None,
        }
    }

    /// A follower's fetch (`req.replica_id` asks). Answered as an effect: now, or, when the
    /// fetch is held (long poll), once the leader has something to say.
    pub fn handle_fetch(&mut self, now: Nanos, req: FetchRequest) {
        let mark = self.effects_mark();
        let Some(result) = self.fetch_result(now, &req) else {
            return;
        };
        let resp = FetchResponse {
            correlation: req.correlation,
            tp: self.tp.clone(),
            leader_epoch: self.leader_epoch,
            result,
        };
        let to = Address::Node(req.replica_id);
        self.reply_at(mark, to, Message::FetchResponse(resp));
    }

    /// Answer held fetches that now have something to say (or whose wait is over, or
    /// all of them with `force`).
    pub(crate) fn answer_parked(&mut self, now: Nanos, force: bool) {
        let leo = self.log.log_end_offset();
        let hw = self.high_watermark;
        let RoleState::Leader(l) = &mut self.role else {
            return;
        };
        let mut ready = Vec::new();
        l.parked.take_into(&mut ready, |_, p| {
            force || leo > p.fetch_offset || hw > p.follower_hw || now >= p.deadline
        });
        for (id, p) in ready {
            let result = self
                .records_from(p.fetch_offset, p.max_bytes)
                .unwrap_or_else(FetchResult::Error);
            let resp = FetchResponse {
                correlation: p.correlation,
                tp: self.tp.clone(),
                leader_epoch: self.leader_epoch,
                result,
            };
            self.emit(ReplicaEffect::Send {
                to: Address::Node(id),
                msg: Message::FetchResponse(resp),
            });
        }
    }

    /// Deposed or re-elected: held fetches get an answer now.
    pub(crate) fn release_parked(&mut self) {
        let RoleState::Leader(l) = &mut self.role else {
            return;
        };
        let parked = std::mem::take(&mut l.parked);
        for (id, p) in parked {
            let resp = FetchResponse {
                correlation: p.correlation,
                tp: self.tp.clone(),
                leader_epoch: self.leader_epoch,
                result: FetchResult::Error(FetchError::NotLeader),
            };
            self.emit(ReplicaEffect::Send {
                to: Address::Node(id),
                msg: Message::FetchResponse(resp),
            });
        }
    }

    fn records_from(&mut self, from: Offset, max_bytes: usize) -> Result<FetchResult, FetchError> {
        let leo = self.log.log_end_offset();
        let records = if from < leo {
            match self.log.read_encoded(from, max_bytes) {
                Ok(b) => b,
                Err(e) => {
                    let msg = e.0.clone();
                    self.fail_log("read", e);
                    return Err(FetchError::Storage(msg));
                }
            }
        } else {
            EncodedBatches::default()
        };
        Ok(FetchResult::Records {
            records,
            high_watermark: self.high_watermark,
            log_start_offset: self.log.log_start_offset(),
            log_end_offset: leo,
        })
    }

    fn fetch_result(&mut self, now: Nanos, req: &FetchRequest) -> Option<FetchResult> {
        let err = |e| Some(FetchResult::Error(e));
        if !self.config.bugs.unfenced_fetch {
            if req.current_leader_epoch < self.leader_epoch {
                crate::probe!(FetchFencedLeaderEpoch);
                return err(FetchError::FencedLeaderEpoch {
                    request: req.current_leader_epoch,
                    current: self.leader_epoch,
                });
            }
            if req.current_leader_epoch > self.leader_epoch {
                crate::probe!(FetchUnknownLeaderEpoch);
                return err(FetchError::UnknownLeaderEpoch {
                    request: req.current_leader_epoch,
                    current: self.leader_epoch,
                });
            }
        }
        if !matches!(self.role, RoleState::Leader(_)) {
            return err(FetchError::NotLeader);
        }
        if req.replica_id == self.me || !self.replicas.contains(&req.replica_id) {
            return err(FetchError::NotAssignedReplica(req.replica_id));
        }
        let leo = self.log.log_end_offset();
        let log_start = self.log.log_start_offset();
        if req.fetch_offset < log_start {
            return err(FetchError::OffsetOutOfRange {
                fetch_offset: req.fetch_offset,
                log_start_offset: log_start,
            });
        }
        // KIP-320: is the follower's log a prefix of ours up to fetch_offset?
        let last_fetched_epoch = if self.config.bugs.unfenced_fetch {
            None // bug: trust the follower's offset (pre-KIP-320)
        } else {
            req.last_fetched_epoch
        };
        let diverging = match last_fetched_epoch {
            Some(last) => self.diverging(last, req.fetch_offset),
            None if req.fetch_offset > leo => Some((None, leo)),
            None => None,
        };
        if let Some((epoch, end_offset)) = diverging {
            return Some(FetchResult::Diverging {
                epoch,
                end_offset,
                high_watermark: self.high_watermark,
            });
        }
        self.record_follower_fetch(now, req.replica_id, req.fetch_offset, leo);
        self.leader_maybe_advance_hw(now);
        let nothing_new = req.fetch_offset >= leo && req.high_watermark >= self.high_watermark;
        if let (true, true, RoleState::Leader(l)) = (
            nothing_new,
            req.max_wait > 0 && self.config.fetch_max_wait > 0,
            &mut self.role,
        ) {
            l.parked.insert(
                req.replica_id,
                Parked {
                    correlation: req.correlation,
                    fetch_offset: req.fetch_offset,
                    follower_hw: req.high_watermark,
                    max_bytes: req.max_bytes,
                    // Never hold a caught-up follower long enough to look lagging.
                    deadline: now
                        + req
                            .max_wait
                            .min(self.config.fetch_max_wait)
                            .min(self.config.replica_lag_time_max / 2),
                },
            );
            return None;
        }
        Some(
            self.records_from(req.fetch_offset, req.max_bytes)
                .unwrap_or_else(FetchResult::Error),
        )
    }

    /// KIP-320's divergence check, for a follower's fetch and a consumer's alike: does a
    /// reader whose last batch had epoch `last` and who stands at `offset` hold a prefix of
    /// this log? If not, the leader's largest epoch not above `last` and where it ends
    /// (`None` epoch: no such epoch here, the end is the log start): the reader's log
    /// diverges from there.
    fn diverging(
        &self,
        last: LeaderEpoch,
        offset: Offset,
    ) -> Option<(Option<LeaderEpoch>, Offset)> {
        match self.log.end_offset_for_epoch(last) {
            None => Some((None, self.log.log_start_offset())),
            Some((epoch, end)) if epoch < last || end < offset => {
                if self.config.bugs.next_epoch_start && epoch < last {
                    // Bug: claim the reader's epoch ends where our next one starts.
                    Some((Some(last), end))
                } else {
                    Some((Some(epoch), end))
                }
            }
            Some(_) => None,
        }
    }

    fn record_follower_fetch(&mut self, now: Nanos, replica: NodeId, offset: Offset, leo: Offset) {
        let RoleState::Leader(l) = &mut self.role else {
            return;
        };
        l.isr.record_fetch(now, replica, offset, leo);
        // Rejoin: caught up to the HW, and into this epoch, and not fenced (the
        // controller would refuse it).
        let hw = self.high_watermark;
        if l.pending.is_none()
            && now >= l.propose_not_before
            && !self.fenced_brokers.contains(&replica)
            && !l.isr.contains(replica)
            && offset >= hw
            && offset >= l.epoch_start_offset
        {
            let mut new_isr = l.isr.confirmed().clone();
            new_isr.insert(replica);
            self.propose_isr(now, new_isr);
        }
    }

    fn propose_isr(&mut self, now: Nanos, new_isr: BTreeSet<NodeId>) {
        let RoleState::Leader(l) = &mut self.role else {
            return;
        };
        if new_isr.len() < l.isr.confirmed().len() {
            crate::probe!(IsrShrinkProposed);
        } else {
            crate::probe!(IsrExpandProposed);
        }
        l.isr.propose(&new_isr);
        l.pending = Some(PendingIsr {
            isr: new_isr.clone(),
            sent_at: now,
        });
        let isr: Vec<NodeId> = new_isr.into_iter().collect();
        let proposal = IsrProposal {
            tp: self.tp.clone(),
            leader: self.me,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            new_isr: isr.clone(),
        };
        self.emit(ReplicaEffect::AlterPartition(proposal));
        let tp = self.tp.clone();
        self.event(Event::IsrProposed { tp, isr });
    }

    /// The controller answered an AlterPartition proposal.
    pub fn on_alter_partition_result(&mut self, now: Nanos, outcome: AlterOutcome) {
        let retry = self.config.alter_partition_retry;
        let RoleState::Leader(l) = &mut self.role else {
            return;
        };
        match outcome {
            AlterOutcome::Accepted {
                leader_epoch,
                partition_epoch,
                isr,
            } => {
                if leader_epoch == self.leader_epoch && partition_epoch > self.partition_epoch {
                    l.isr.confirm(&isr);
                    l.pending = None;
                    self.partition_epoch = partition_epoch;
                    let tp = self.tp.clone();
                    self.event(Event::IsrConfirmed {
                        tp,
                        isr,
                        partition_epoch,
                    });
                    self.leader_maybe_advance_hw(now);
                }
            }
            AlterOutcome::Rejected { reason } => {
                // Stale partition epoch or fenced leader: wait for fresher metadata. The
                // proposal stays in `proposed`: an earlier copy may have been accepted.
                tracing::info!(tp = %self.tp, %reason, "AlterPartition rejected");
                crate::probe!(IsrProposalRejected);
                l.pending = None;
                l.propose_not_before = now + retry;
            }
        }
    }

    /// Recompute the high watermark and complete acks=all writes it now covers.
    pub(crate) fn leader_maybe_advance_hw(&mut self, now: Nanos) {
        let RoleState::Leader(l) = &self.role else {
            return;
        };
        let bugs = self.config.bugs;
        let leo = self.log.log_end_offset();
        // Only durable data counts (see docs/replication.md, "durable HW").
        let mut candidate = if bugs.fsync_after_ack {
            leo
        } else {
            self.log.flushed_offset().min(leo)
        };
        if !bugs.ack_before_isr {
            candidate = l.isr.high_watermark(candidate);
        }
        debug_assert!(candidate <= leo);
        let maximal_len = l.isr.maximal().len();
        // KIP-966's strict min ISR: the HW moves only while the ISR is at least
        // min.insync.replicas, so a replica that leaves an ISR already that small (it
        // joins the ELR) keeps every committed record and may be elected. The size is the
        // *confirmed* ISR's: a pending expansion may never reach the controller, and the
        // ELR it still holds must not miss records committed on the strength of it (the
        // controller clears the ELR in the same record that confirms the expansion).
        let strict_min_isr =
            !bugs.no_elr && l.isr.confirmed().len() < self.config.min_insync_replicas;
        if candidate > self.high_watermark && candidate > l.epoch_start_offset && !strict_min_isr {
            // It only moves forward, over records of this epoch the log holds.
            debug_assert!(candidate <= leo && candidate > self.high_watermark);
            self.high_watermark = candidate;
            self.producers.on_high_watermark(candidate);
            let ev = Event::HighWatermark {
                tp: self.tp.clone(),
                leader_epoch: self.leader_epoch,
                high_watermark: candidate,
            };
            self.event(ev);
            self.complete_waiting(maximal_len);
            self.answer_parked(now, false);
            return;
        }
        self.complete_waiting(maximal_len);
    }

    fn complete_waiting(&mut self, isr_size: usize) {
        let hw = self.high_watermark;
        let min_insync = self.config.min_insync_replicas;
        let epoch = self.leader_epoch;
        let RoleState::Leader(l) = &mut self.role else {
            return;
        };
        if !l.waiting.iter().any(|w| w.required <= hw) {
            return;
        }
        // Taken out in place: `waiting` keeps its capacity for the next produce.
        let done: Vec<_> = l.waiting.extract_if(.., |w| w.required <= hw).collect();
        for w in done {
            let result = if isr_size < min_insync {
                Err(ProduceError::NotEnoughReplicasAfterAppend {
                    isr: isr_size,
                    min_insync,
                })
            } else {
                Ok(ProduceAck {
                    base_offset: w.base_offset,
                    leader_epoch: epoch,
                    duplicate: w.duplicate,
                })
            };
            self.respond_produce(w.client, w.correlation, result);
        }
    }

    /// A produce request from `from` (a client's, or the hosting broker's own). Responses
    /// (if any) leave as effects: a `Send` to a remote asker, a `LocalProduceAnswer` to the
    /// broker itself. The batch stays encoded: what the leader needs (record count,
    /// producer identity, control bit) comes from its header, and the log checks and
    /// places the bytes ([`ReplicaLog::append_encoded_as_leader`]).
    pub fn handle_produce(
        &mut self,
        now: Nanos,
        from: impl Into<ProduceOrigin>,
        mut req: ProduceRequest,
    ) {
        let from = from.into();
        let (acks, correlation) = (req.acks, req.correlation);
        let reply = |r: &mut Self, result| {
            if acks != Acks::None {
                r.respond_produce(from, correlation, result);
            }
        };
        let RoleState::Leader(l) = &self.role else {
            let e = ProduceError::NotLeader {
                leader: self.known_leader(),
                leader_epoch: self.leader_epoch,
            };
            return reply(self, Err(e));
        };
        let header = match req.batch.header() {
            Ok(h) => h,
            Err(e) => return reply(self, Err(ProduceError::CorruptBatch(e.to_string()))),
        };
        // The header is the sender's word until its CRC is checked, once, on every path:
        // before an append (which takes the checked batch to the disk) and before any
        // other answer, so damaged bytes are always answered as such.
        let refuse = |r: &mut Self, batch: &EncodedBatch, e: ProduceError| {
            let e = match CheckedBatch::check_parsed(batch.as_bytes(), header) {
                Ok(_) => e,
                Err(d) => ProduceError::CorruptBatch(d.to_string()),
            };
            reply(r, Err(e))
        };
        if header.record_count == 0 {
            let e = ProduceError::InvalidRecord("empty batch".into());
            return refuse(self, &req.batch, e);
        }
        if header.attributes & CONTROL_BATCH_BIT != 0 {
            let e = ProduceError::InvalidRecord("clients may not write control batches".into());
            return refuse(self, &req.batch, e);
        }
        if header.attributes & TRANSACTIONAL_BATCH_BIT != 0 {
            // A transaction is its producer's: without an identity (and, from a client, a
            // transactional id to verify it by) the batch cannot belong to one.
            let why = if header.producer.is_none() {
                Some("a transactional batch needs a producer id")
            } else if matches!(from, ProduceOrigin::Remote(_)) && req.transactional_id.is_none() {
                Some("a transactional batch needs a transactional id")
            } else {
                None
            };
            if let Some(why) = why {
                return refuse(self, &req.batch, ProduceError::InvalidRecord(why.into()));
            }
        }
        if matches!(from, ProduceOrigin::Remote(_))
            && header
                .producer
                .is_some_and(|p| p.base_sequence == crate::log::NO_SEQUENCE)
        {
            // Only coordinators write for a producer without a sequence.
            let e = ProduceError::InvalidRecord("a producer batch needs a base sequence".into());
            return refuse(self, &req.batch, e);
        }
        let isr_size = l.isr.maximal().len();
        let min_insync = self.config.min_insync_replicas;
        if req.acks == Acks::All && isr_size < min_insync {
            crate::probe!(ProduceNotEnoughReplicas);
            let e = ProduceError::NotEnoughReplicas {
                isr: isr_size,
                min_insync,
            };
            return reply(self, Err(e));
        }
        let count = u64::from(header.record_count);
        let check = match super::idempotence::check(&self.producers, &header) {
            // The bug zoo's stale-producer-epoch: a fenced epoch's batch is written as new.
            ProducerCheck::InvalidProducerEpoch(_) if self.config.bugs.stale_producer_epoch => {
                ProducerCheck::Append
            }
            c => c,
        };
        let (base_offset, next_offset, duplicate) = match check {
            ProducerCheck::Duplicate { base_offset } => {
                if let Err(d) = CheckedBatch::check_parsed(req.batch.as_bytes(), header) {
                    return reply(self, Err(ProduceError::CorruptBatch(d.to_string())));
                }
                crate::probe!(IdempotentDuplicate);
                (base_offset, base_offset + count, true)
            }
            ProducerCheck::OutOfOrderSequence(m) => {
                crate::probe!(IdempotentOutOfOrder);
                return refuse(self, &req.batch, ProduceError::OutOfOrderSequence(m));
            }
            ProducerCheck::InvalidProducerEpoch(m) => {
                crate::probe!(IdempotentStaleEpoch);
                return refuse(self, &req.batch, ProduceError::InvalidProducerEpoch(m));
            }
            ProducerCheck::UnknownProducerId(m) => {
                return refuse(self, &req.batch, ProduceError::UnknownProducerId(m))
            }
            ProducerCheck::Append => match self.append_produced(now, &header, &mut req.batch) {
                Ok((base_offset, next_offset)) => (base_offset, next_offset, false),
                Err(e) => return reply(self, Err(e)),
            },
        };
        match req.acks {
            Acks::None => {}
            Acks::Leader => {
                let ack = ProduceAck {
                    base_offset,
                    leader_epoch: self.leader_epoch,
                    duplicate,
                };
                self.respond_produce(from, req.correlation, Ok(ack));
            }
            Acks::All => {
                if let RoleState::Leader(l) = &mut self.role {
                    l.waiting.push(WaitingProduce {
                        client: from,
                        correlation: req.correlation,
                        base_offset,
                        required: next_offset,
                        deadline: now + req.timeout,
                        duplicate,
                    });
                }
            }
        }
        self.leader_maybe_advance_hw(now);
    }

    /// Appends a produced batch (whose header is `header`) that the producer state table
    /// let through: checks its bytes, the one check they get, and has the log place them
    /// at the log end. The offsets it got, or the answer to give.
    fn append_produced(
        &mut self,
        now: Nanos,
        header: &BatchHeader,
        batch: &mut EncodedBatch,
    ) -> Result<(Offset, Offset), ProduceError> {
        // Too large is answered before the bytes are hashed (as Kafka does).
        let (size, max) = (batch.len(), self.log.max_batch_bytes());
        if size > max {
            return Err(ProduceError::BatchTooLarge { size, max });
        }
        // The header read above is not read again: this checks the CRC and the records.
        let checked = CheckedBatch::check_parsed(batch.as_mut_bytes(), *header)
            .map_err(|d| ProduceError::CorruptBatch(d.to_string()))?;
        let epoch = self.leader_epoch;
        match (self.log).append_encoded_as_leader(checked, epoch, now_ms(now)) {
            Ok(a) => {
                super::idempotence::record(&mut self.producers, header, a.base_offset);
                self.after_leader_append(now);
                self.answer_parked(now, false);
                Ok((a.base_offset, a.next_offset))
            }
            Err(EncodedAppendError::Corrupt(m)) => Err(ProduceError::CorruptBatch(m)),
            Err(EncodedAppendError::Empty) => {
                Err(ProduceError::InvalidRecord("empty batch".into()))
            }
            Err(EncodedAppendError::TooLarge { size, max }) => {
                Err(ProduceError::BatchTooLarge { size, max })
            }
            Err(EncodedAppendError::Log(e)) => {
                let m = e.0.clone();
                self.log_error("append", e);
                Err(ProduceError::Storage(m))
            }
        }
    }

    pub(crate) fn leader_tick(&mut self, now: Nanos) {
        self.retry_epoch_marker(now);
        let lag_max = self.config.replica_lag_time_max;
        let retry = self.config.alter_partition_retry;
        let RoleState::Leader(l) = &mut self.role else {
            return;
        };
        // Produce timeouts.
        let expired: Vec<_> = l.waiting.extract_if(.., |w| w.deadline <= now).collect();
        // ISR maintenance.
        let mut action = None;
        match &l.pending {
            Some(p) if now >= p.sent_at + retry => action = Some(p.isr.clone()),
            Some(_) => {}
            None if now >= l.propose_not_before => {
                let lagging = l.isr.lagging(now, lag_max);
                if !lagging.is_empty() {
                    action = Some(l.isr.confirmed().difference(&lagging).copied().collect());
                }
            }
            None => {}
        }
        for w in expired {
            self.respond_produce(w.client, w.correlation, Err(ProduceError::RequestTimedOut));
        }
        self.answer_parked(now, false);
        if let Some(isr) = action {
            self.propose_isr(now, isr);
            self.leader_maybe_advance_hw(now);
        }
    }

    /// A consumer read: committed records only (below the HW), control batches left out.
    /// Answered to `from` as an effect.
    pub fn handle_consumer_fetch(&mut self, from: Address, req: &ConsumerFetchRequest) {
        let mark = self.effects_mark();
        let result = self.consumer_records(req);
        let resp = ConsumerFetchResponse {
            correlation: req.correlation,
            tp: self.tp.clone(),
            result,
        };
        self.reply_at(mark, from, resp.into());
    }

    fn check_client_epoch(&self, requested: Option<LeaderEpoch>) -> Result<(), ConsumerFetchError> {
        if !matches!(self.role, RoleState::Leader(_)) {
            return Err(ConsumerFetchError::NotLeader {
                leader: self.known_leader(),
                leader_epoch: self.leader_epoch,
            });
        }
        match requested {
            Some(e) if e < self.leader_epoch => Err(ConsumerFetchError::FencedLeaderEpoch {
                request: e,
                current: self.leader_epoch,
            }),
            Some(e) if e > self.leader_epoch => Err(ConsumerFetchError::UnknownLeaderEpoch {
                request: e,
                current: self.leader_epoch,
            }),
            _ => Ok(()),
        }
    }

    fn consumer_records(
        &mut self,
        req: &ConsumerFetchRequest,
    ) -> Result<ConsumerRecords, ConsumerFetchError> {
        self.check_client_epoch(req.current_leader_epoch)?;
        let hw = self.high_watermark;
        let log_start = self.log.log_start_offset();
        let leo = self.log.log_end_offset();
        if let Some(last) = req.last_fetched_epoch.filter(|_| req.offset >= log_start) {
            // Read from a newer epoch than this leader's: a deposed leader (its cache would
            // call the reader's log divergent); the reader must find the current one.
            if last > self.leader_epoch {
                return Err(ConsumerFetchError::UnknownLeaderEpoch {
                    request: last,
                    current: self.leader_epoch,
                });
            }
            if let Some((epoch, end_offset)) = self.diverging(last, req.offset) {
                crate::probe!(ConsumerFetchDiverging);
                return Err(ConsumerFetchError::DivergingEpoch { epoch, end_offset });
            }
        }
        if req.offset < log_start || req.offset > leo {
            return Err(ConsumerFetchError::OffsetOutOfRange {
                offset: req.offset,
                log_start_offset: log_start,
                high_watermark: hw,
            });
        }
        // read_committed stops at the LSO: nothing of an undecided transaction is returned.
        let bound = self.fetch_bound(req.isolation);
        let batches = match self.read_below(req.offset, bound, req.max_bytes) {
            Ok(b) => b,
            Err(e) => {
                let msg = e.0.clone();
                self.fail_log("read", e);
                return Err(ConsumerFetchError::Storage(msg));
            }
        };
        let next_offset = batches
            .last()
            .map_or(req.offset, |b| b.next_offset().min(bound).max(req.offset));
        let last_epoch = batches.last().map(|b| b.partition_leader_epoch);
        let batches = batches.into_iter().filter(|b| !is_control(b)).collect();
        let aborted = match req.isolation {
            IsolationLevel::ReadCommitted => self.aborted_overlapping(req.offset, next_offset),
            IsolationLevel::ReadUncommitted => Vec::new(),
        };
        Ok(ConsumerRecords {
            batches,
            high_watermark: hw,
            log_start_offset: log_start,
            leader_epoch: self.leader_epoch,
            next_offset,
            last_epoch,
            last_stable_offset: self.last_stable_offset(),
            aborted,
        })
    }

    /// Batches covering `[from, below)`, records at or past `below` cut off. Reads
    /// repeatedly until `max_bytes` worth of batches or `below` is reached.
    pub fn read_below(
        &mut self,
        from: Offset,
        below: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, super::LogFailure> {
        if from >= below {
            return Ok(Vec::new());
        }
        self.log.read_below(from, below, max_bytes)
    }

    /// A consumer's offset lookup (earliest, latest committed, or by timestamp). Answered to
    /// `from` as an effect.
    pub fn handle_list_offsets(&mut self, from: Address, req: &ListOffsetsRequest) {
        let mark = self.effects_mark();
        let result = self.check_client_epoch(None).and_then(|()| {
            let epoch = self.leader_epoch;
            // read_committed: the end of what such a reader may read is the LSO.
            let bound = self.fetch_bound(req.isolation);
            let listed = |offset| {
                Some(ListedOffset {
                    offset,
                    leader_epoch: epoch,
                })
            };
            Ok(match req.spec {
                OffsetSpec::Earliest => listed(self.log.log_start_offset()),
                OffsetSpec::Latest => listed(bound),
                OffsetSpec::Timestamp(ts) => {
                    let found = self
                        .log
                        .offset_for_timestamp(ts)
                        .map_err(|e| ConsumerFetchError::Storage(e.0))?;
                    found.filter(|o| *o < bound).and_then(listed)
                }
            })
        });
        let resp = ListOffsetsResponse {
            correlation: req.correlation,
            tp: self.tp.clone(),
            result,
        };
        self.reply_at(mark, from, Message::ListOffsetsResponse(resp));
    }
}

/// The controller's answer to an AlterPartition proposal, as the replica needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterOutcome {
    Accepted {
        leader_epoch: LeaderEpoch,
        partition_epoch: PartitionEpoch,
        isr: Vec<NodeId>,
    },
    Rejected {
        reason: String,
    },
}
