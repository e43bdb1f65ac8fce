//! `TxnCoordinator`: every transactional id that hashes to one `__transaction_state`
//! partition, hosted by the broker that leads that partition (Kafka's
//! `TransactionCoordinator` + `TransactionStateManager` + marker channel, sans I/O).
//!
//! Lifecycle, driven by the host (as [`crate::group::GroupCoordinator`]'s):
//! ```text
//!  Unloaded --begin_load(epoch)--> Loading --load_batches(..)*, complete_load(now)--> Active
//!     ^                                                                                |
//!     +------------------------------------- unload() ---------------------------------+
//! ```
//! Unloaded answers NotCoordinator, Loading CoordinatorLoadInProgress, LoadFailed
//! CoordinatorNotAvailable. When Active:
//! * every state change ([`crate::txn::state`]) leaves as a [`TxnOutput::Append`] of the
//!   id's whole metadata and takes effect (answer sent, markers started) only when the host
//!   reports [`TxnCoordinator::append_completed`] `Ok`; while a write of an id is in flight,
//!   other requests for it get `ConcurrentTransactions`;
//! * a new producer id is asked of the host ([`TxnOutput::AllocateProducerId`], answered
//!   with [`TxnCoordinator::producer_id_allocated`]);
//! * a `Prepare*` transaction sends one [`TxnOutput::SendMarker`] per partition, retried
//!   after a backoff on a retriable error or a lost answer, and writes `Complete*` once every
//!   partition has its marker; a new leader resumes the markers of every `Prepare*` it loads.

use crate::group::{AppendError, AppendId};
use crate::log::{Record, RecordBatch};
use crate::message::Address;
use crate::txn::protocol::*;
use crate::txn::records::{self, TxnRecordError};
use crate::txn::state::{TxnMetadata, TxnState};
use crate::txn::TxnBugs;
use crate::types::{LeaderEpoch, Nanos, Offset, TopicPartition};
use std::collections::BTreeMap;

/// Coordinator tunables (Kafka's `transaction.*` broker configs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`: the largest `transaction.timeout.ms` accepted.
    pub max_timeout_ms: u32,
    /// Wait before a marker refused with a retriable error is sent again.
    pub marker_retry_backoff: Nanos,
    /// A marker with no answer for this long is sent again (the request or its answer was
    /// lost; a second marker for a closed transaction changes nothing at the partition).
    pub marker_request_timeout: Nanos,
    /// Wait before a failed `Complete*` or timeout-abort write is tried again.
    pub write_retry_backoff: Nanos,
    /// `__consumer_offsets`' partition count, to place AddOffsetsToTxn's partition.
    pub offsets_topic_partitions: u32,
    pub bugs: TxnBugs,
}

impl Default for TxnConfig {
    fn default() -> Self {
        Self {
            max_timeout_ms: 900_000,
            marker_retry_backoff: 100_000_000,
            marker_request_timeout: 5_000_000_000,
            write_retry_backoff: 100_000_000,
            offsets_topic_partitions: 8,
            bugs: TxnBugs::default(),
        }
    }
}

/// A record of `__transaction_state` that could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("__transaction_state-{partition} offset {offset}: {source}")]
pub struct TxnLoadError {
    pub partition: u32,
    pub offset: Offset,
    pub source: TxnRecordError,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnPhase {
    Unloaded,
    Loading {
        epoch: LeaderEpoch,
    },
    Active {
        epoch: LeaderEpoch,
    },
    /// An unreadable record: refuse to serve (CoordinatorNotAvailable) rather than serve a
    /// wrong state.
    LoadFailed {
        epoch: LeaderEpoch,
        error: TxnLoadError,
    },
}

/// What the coordinator asks of its host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOutput {
    Respond {
        to: Address,
        correlation: u64,
        response: TxnResponse,
    },
    /// Append `records` (one batch) to `__transaction_state`-`partition` as leader of
    /// `leader_epoch` with acks=all; report [`TxnCoordinator::append_completed`] in log
    /// order once it is below the HW (or cannot get there).
    Append {
        id: AppendId,
        partition: u32,
        leader_epoch: LeaderEpoch,
        records: Vec<Record>,
    },
    /// Ask the controller for a new producer id for `transactional_id`; report
    /// [`TxnCoordinator::producer_id_allocated`].
    AllocateProducerId {
        partition: u32,
        transactional_id: TransactionalId,
    },
    /// Send `request` to the leader of `request.tp`; report the answer (or, if no leader is
    /// known, a `NotLeader` refusal) with [`TxnCoordinator::marker_answered`].
    SendMarker {
        partition: u32,
        request: WriteTxnMarkerRequest,
    },
}

/// Which request a waiter made (its answer's variant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    InitProducerId,
    AddPartitions,
    AddOffsets,
    EndTxn,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Waiter {
    to: Address,
    correlation: u64,
    kind: Kind,
}

impl Waiter {
    /// The answer once the write is committed: the producer identity from then on.
    fn ok(self, pid: ProducerIdAndEpoch) -> TxnResponse {
        match self.kind {
            Kind::InitProducerId => TxnResponse::InitProducerId(Ok(pid)),
            Kind::AddPartitions | Kind::Other => TxnResponse::AddPartitionsToTxn(Ok(())),
            Kind::AddOffsets => TxnResponse::AddOffsetsToTxn(Ok(())),
            Kind::EndTxn => TxnResponse::EndTxn(Ok(pid)),
        }
    }

    fn err(self, e: TxnError) -> TxnResponse {
        match self.kind {
            Kind::InitProducerId => TxnResponse::InitProducerId(Err(e)),
            Kind::AddPartitions | Kind::Other => TxnResponse::AddPartitionsToTxn(Err(e)),
            Kind::AddOffsets => TxnResponse::AddOffsetsToTxn(Err(e)),
            Kind::EndTxn => TxnResponse::EndTxn(Err(e)),
        }
    }
}

/// What a committed write completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    /// Answer the request that asked for it.
    Reply(Waiter),
    /// A fence (InitProducerId over an open transaction) or a timeout abort.
    Abort,
    Complete,
}

struct Pending {
    append: AppendId,
    target: TxnMetadata,
    after: After,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MarkerState {
    InFlight {
        correlation: u64,
        sent_at: Nanos,
    },
    Backoff {
        until: Nanos,
    },
    /// A newer coordinator exists for the partition: stop (this one is being deposed).
    Fenced,
}

struct Entry {
    /// The durable metadata (as of the last committed write).
    meta: TxnMetadata,
    /// Of a `Prepare*` transaction: the partitions whose marker is not written yet.
    markers: BTreeMap<TopicPartition, MarkerState>,
    /// A failed `Complete*` or timeout-abort write is tried again from here.
    retry_at: Option<Nanos>,
    /// The producer epoch of the current transaction's data (its `Ongoing` metadata's):
    /// its markers are `bumped` when they carry a later one. `None` when not known (loaded
    /// from the log past `Ongoing`).
    data_epoch: Option<u16>,
}

pub struct TxnCoordinator {
    partition: u32,
    num_partitions: u32,
    config: TxnConfig,
    phase: TxnPhase,
    txns: BTreeMap<TransactionalId, Entry>,
    /// At most one write in flight per id (new ids included).
    pending: BTreeMap<TransactionalId, Pending>,
    appends: BTreeMap<AppendId, TransactionalId>,
    /// InitProducerIds waiting for a producer id from the controller.
    awaiting_pid: BTreeMap<TransactionalId, (Waiter, u32)>,
    /// Marker correlation -> transactional id.
    marker_owner: BTreeMap<u64, TransactionalId>,
    loading: BTreeMap<TransactionalId, Option<TxnMetadata>>,
    next_append: AppendId,
    next_marker: u32,
    outputs: Vec<TxnOutput>,
}

fn ms(ms: u32) -> Nanos {
    ms as Nanos * 1_000_000
}

fn append_failure(e: &AppendError) -> TxnError {
    match e {
        AppendError::NotLeader => TxnError::NotCoordinator,
        _ => TxnError::CoordinatorNotAvailable,
    }
}

impl TxnCoordinator {
    pub fn new(partition: u32, num_partitions: u32, config: TxnConfig) -> Self {
        assert!(partition < num_partitions, "partition out of range");
        Self {
            partition,
            num_partitions,
            config,
            phase: TxnPhase::Unloaded,
            txns: BTreeMap::new(),
            pending: BTreeMap::new(),
            appends: BTreeMap::new(),
            awaiting_pid: BTreeMap::new(),
            marker_owner: BTreeMap::new(),
            loading: BTreeMap::new(),
            next_append: 0,
            next_marker: 0,
            outputs: Vec::new(),
        }
    }

    pub fn partition(&self) -> u32 {
        self.partition
    }

    pub fn phase(&self) -> &TxnPhase {
        &self.phase
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// The durable metadata of `transactional_id`, if this coordinator holds it.
    pub fn txn(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id).map(|e| &e.meta)
    }

    /// Every transactional id held, in id order.
    pub fn transactional_ids(&self) -> Vec<TransactionalId> {
        self.txns.keys().cloned().collect()
    }

    /// The partitions still waiting for `transactional_id`'s marker.
    pub fn markers_pending(&self, transactional_id: &str) -> Vec<TopicPartition> {
        self.txns
            .get(transactional_id)
            .map(|e| e.markers.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The correlation of the marker in flight to `tp` for `transactional_id`, if one is
    /// (for observers and tests that play the partition side).
    pub fn marker_in_flight(&self, transactional_id: &str, tp: &TopicPartition) -> Option<u64> {
        match self.txns.get(transactional_id)?.markers.get(tp)? {
            MarkerState::InFlight { correlation, .. } => Some(*correlation),
            _ => None,
        }
    }

    fn epoch(&self) -> Option<LeaderEpoch> {
        match self.phase {
            TxnPhase::Active { epoch } => Some(epoch),
            _ => None,
        }
    }

    // ---- lifecycle ------------------------------------------------------------------------

    /// This broker leads the partition at `epoch`: start rebuilding the state.
    pub fn begin_load(&mut self, epoch: LeaderEpoch) {
        self.unload();
        self.phase = TxnPhase::Loading { epoch };
    }

    /// Feed the partition's batches in offset order from the log start to its end as of
    /// becoming leader (control batches left out); may be called many times.
    pub fn load_batches(&mut self, batches: &[RecordBatch]) -> Result<(), TxnLoadError> {
        let epoch = match &self.phase {
            TxnPhase::Loading { epoch } => *epoch,
            TxnPhase::LoadFailed { error, .. } => return Err(error.clone()),
            _ => {
                debug_assert!(false, "load_batches while not loading");
                return Ok(());
            }
        };
        for b in batches {
            for (offset, r) in b.iter_offsets() {
                match records::decode_record(r) {
                    Ok(Some(rec)) => {
                        // Ids of other partitions cannot be here unless the partition count
                        // changed; they are not this coordinator's to serve.
                        if txn_partition(&rec.transactional_id, self.num_partitions)
                            == self.partition
                        {
                            self.loading.insert(rec.transactional_id, rec.value);
                        }
                    }
                    Ok(None) => {}
                    Err(source) => {
                        let error = TxnLoadError {
                            partition: self.partition,
                            offset,
                            source,
                        };
                        self.loading.clear();
                        self.phase = TxnPhase::LoadFailed {
                            epoch,
                            error: error.clone(),
                        };
                        return Err(error);
                    }
                }
            }
        }
        Ok(())
    }

    /// The load is complete: serve. `Prepare*` transactions resume their markers; the
    /// timeout of an `Ongoing` one counts from now (the previous leader's clock is not
    /// this one's). Returns how many ids were loaded.
    pub fn complete_load(&mut self, now: Nanos) -> usize {
        let TxnPhase::Loading { epoch } = self.phase else {
            return 0;
        };
        self.phase = TxnPhase::Active { epoch };
        for (id, meta) in std::mem::take(&mut self.loading) {
            let Some(mut meta) = meta else { continue };
            debug_assert!(
                meta.state != TxnState::PrepareEpochFence,
                "PrepareEpochFence is never written"
            );
            if meta.state == TxnState::Ongoing {
                meta.start_time = now;
            }
            self.txns.insert(
                id.clone(),
                Entry {
                    data_epoch: (meta.state == TxnState::Ongoing).then_some(meta.producer_epoch),
                    meta,
                    markers: BTreeMap::new(),
                    retry_at: None,
                },
            );
            self.start_markers(now, &id);
        }
        self.txns.len()
    }

    /// No longer the leader: drop everything, answering every waiting request
    /// NotCoordinator (the client finds the new coordinator, which loads the log).
    pub fn unload(&mut self) {
        let mut waiters: Vec<Waiter> = self
            .pending
            .values()
            .filter_map(|p| match p.after {
                After::Reply(w) => Some(w),
                After::Abort | After::Complete => None,
            })
            .collect();
        waiters.extend(self.awaiting_pid.values().map(|(w, _)| *w));
        for w in waiters {
            self.respond(w, w.err(TxnError::NotCoordinator));
        }
        self.txns.clear();
        self.pending.clear();
        self.appends.clear();
        self.awaiting_pid.clear();
        self.marker_owner.clear();
        self.loading.clear();
        self.phase = TxnPhase::Unloaded;
    }

    // ---- requests -------------------------------------------------------------------------

    /// A request from `from` (a client, or a partition leader's `verify_only`).
    pub fn step(&mut self, now: Nanos, from: Address, correlation: u64, request: TxnRequest) {
        let kind = match &request {
            TxnRequest::InitProducerId(_) => Kind::InitProducerId,
            TxnRequest::AddPartitionsToTxn(_) => Kind::AddPartitions,
            TxnRequest::AddOffsetsToTxn(_) => Kind::AddOffsets,
            TxnRequest::EndTxn(_) => Kind::EndTxn,
            TxnRequest::FindCoordinator { .. } => Kind::Other,
        };
        let w = Waiter {
            to: from,
            correlation,
            kind,
        };
        let gate = match &self.phase {
            TxnPhase::Unloaded => Some(TxnError::NotCoordinator),
            TxnPhase::Loading { .. } => Some(TxnError::CoordinatorLoadInProgress),
            TxnPhase::LoadFailed { .. } => Some(TxnError::CoordinatorNotAvailable),
            TxnPhase::Active { .. } => None,
        };
        let id = request.transactional_id();
        let gate = gate.or_else(|| {
            if id.is_empty() {
                Some(TxnError::InvalidTransactionalId)
            } else if txn_partition(id, self.num_partitions) != self.partition {
                Some(TxnError::NotCoordinator)
            } else {
                None
            }
        });
        if let Some(e) = gate {
            self.respond(w, request.error_response(e));
            return;
        }
        let result = match &request {
            TxnRequest::FindCoordinator { .. } => Err(TxnError::InvalidRequest(
                "FindCoordinator is answered by the broker".into(),
            )),
            TxnRequest::InitProducerId(r) => self.init_producer_id(w, r),
            TxnRequest::AddPartitionsToTxn(r) if r.verify_only => self
                .verify(r)
                .map(|()| Some(TxnResponse::AddPartitionsToTxn(Ok(())))),
            TxnRequest::AddPartitionsToTxn(r) => self.add_partitions(
                now,
                w,
                &r.transactional_id,
                r.producer_id,
                r.producer_epoch,
                &r.partitions,
            ),
            TxnRequest::AddOffsetsToTxn(r) => {
                if r.group_id.is_empty() {
                    Err(TxnError::InvalidRequest("empty group id".into()))
                } else {
                    let p = crate::group::coordinator_partition(
                        &r.group_id,
                        self.config.offsets_topic_partitions.max(1),
                    );
                    let tp = TopicPartition::new(crate::group::CONSUMER_OFFSETS_TOPIC, p);
                    self.add_partitions(
                        now,
                        w,
                        &r.transactional_id,
                        r.producer_id,
                        r.producer_epoch,
                        &[tp],
                    )
                    .map(|r| r.map(|_| TxnResponse::AddOffsetsToTxn(Ok(()))))
                }
            }
            TxnRequest::EndTxn(r) => self.end_txn(w, r),
        };
        match result {
            Ok(Some(response)) => self.respond(w, response),
            Ok(None) => {} // answered when its write completes
            Err(e) => self.respond(w, request.error_response(e)),
        }
    }

    /// The id's durable entry, checked against the request's producer id and epoch.
    fn checked(&self, id: &str, producer_id: u64) -> Result<&Entry, TxnError> {
        let e = self.txns.get(id).ok_or_else(|| {
            TxnError::InvalidProducerIdMapping(format!("unknown transactional id {id:?}"))
        })?;
        if e.meta.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping(format!(
                "{id:?} has producer id {}, not {producer_id}",
                e.meta.producer_id
            )));
        }
        Ok(e)
    }

    fn fenced(id: &str, epoch: u16, current: u16) -> TxnError {
        TxnError::ProducerFenced(format!(
            "{id:?} is at epoch {current}, the request at {epoch}"
        ))
    }

    fn init_producer_id(
        &mut self,
        w: Waiter,
        r: &InitProducerIdRequest,
    ) -> Result<Option<TxnResponse>, TxnError> {
        let t = r.transaction_timeout_ms;
        if t == 0 || t > self.config.max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout(t));
        }
        let id = &r.transactional_id;
        if self.pending.contains_key(id) || self.awaiting_pid.contains_key(id) {
            return Err(TxnError::ConcurrentTransactions);
        }
        let bump = !self.config.bugs.no_txn_fencing;
        let Some(e) = self.txns.get(id) else {
            self.allocate(w, id, t);
            return Ok(None);
        };
        let m = &e.meta;
        if let Some(cur) = r.current {
            // KIP-360: only the holder of the current (or the previous) identity resumes.
            let known = cur.producer_id == m.producer_id
                && (cur.producer_epoch == m.producer_epoch
                    || Some(cur.producer_epoch) == m.last_producer_epoch);
            if !known {
                return Err(Self::fenced(id, cur.producer_epoch, m.producer_epoch));
            }
            if Some(cur.producer_epoch) == m.last_producer_epoch && m.state == TxnState::Empty {
                // A retry of the InitProducerId that made this epoch: the same answer.
                return Ok(Some(TxnResponse::InitProducerId(Ok(ProducerIdAndEpoch {
                    producer_id: m.producer_id,
                    producer_epoch: m.producer_epoch,
                }))));
            }
        }
        match m.state {
            TxnState::Ongoing => {
                // Fence the open transaction: abort it at a bumped epoch; the caller
                // retries until the abort completes.
                let target = m.fence_and_abort(bump);
                self.write(id, target, After::Abort);
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                if bump && m.epoch_exhausted() {
                    self.allocate(w, id, t);
                    return Ok(None);
                }
                let target = m.reinit(t, bump);
                self.write(id, target, After::Reply(w));
                Ok(None)
            }
            TxnState::PrepareCommit
            | TxnState::PrepareAbort
            | TxnState::PrepareEpochFence
            | TxnState::Dead => Err(TxnError::ConcurrentTransactions),
        }
    }

    fn allocate(&mut self, w: Waiter, id: &str, timeout_ms: u32) {
        self.awaiting_pid.insert(id.to_string(), (w, timeout_ms));
        self.outputs.push(TxnOutput::AllocateProducerId {
            partition: self.partition,
            transactional_id: id.to_string(),
        });
    }

    /// The controller's answer to [`TxnOutput::AllocateProducerId`].
    pub fn producer_id_allocated(
        &mut self,
        _now: Nanos,
        transactional_id: &str,
        result: Result<ProducerIdAndEpoch, TxnError>,
    ) {
        let Some((w, timeout_ms)) = self.awaiting_pid.remove(transactional_id) else {
            return; // unloaded meanwhile: the caller was answered NotCoordinator
        };
        let pid = match result {
            Ok(p) => p,
            Err(e) => {
                self.respond(w, w.err(e));
                return;
            }
        };
        let target = match self.txns.get(transactional_id) {
            None => TxnMetadata::new(pid.producer_id, pid.producer_epoch, timeout_ms),
            Some(e)
                if !self.pending.contains_key(transactional_id)
                    && matches!(
                        e.meta.state,
                        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                    ) =>
            {
                e.meta
                    .with_new_producer_id(pid.producer_id, pid.producer_epoch, timeout_ms)
            }
            Some(_) => {
                self.respond(
                    w,
                    TxnResponse::InitProducerId(Err(TxnError::ConcurrentTransactions)),
                );
                return;
            }
        };
        self.write(transactional_id, target, After::Reply(w));
    }

    /// KIP-890 part 1: is every partition in the ongoing transaction of this producer id
    /// and epoch? Reads the durable state, changes nothing.
    fn verify(&self, r: &AddPartitionsToTxnRequest) -> Result<(), TxnError> {
        let e = self.checked(&r.transactional_id, r.producer_id)?;
        if r.producer_epoch != e.meta.producer_epoch {
            return Err(Self::fenced(
                &r.transactional_id,
                r.producer_epoch,
                e.meta.producer_epoch,
            ));
        }
        let missing: Vec<&TopicPartition> = r
            .partitions
            .iter()
            .filter(|tp| e.meta.state != TxnState::Ongoing || !e.meta.partitions.contains(tp))
            .collect();
        match missing.first() {
            None if !r.partitions.is_empty() => Ok(()),
            None => Err(TxnError::InvalidRequest("no partitions to verify".into())),
            Some(tp) => Err(TxnError::InvalidTxnState(format!(
                "{tp} is not in the ongoing transaction of {:?} (state {:?})",
                r.transactional_id, e.meta.state
            ))),
        }
    }

    fn add_partitions(
        &mut self,
        now: Nanos,
        w: Waiter,
        id: &str,
        producer_id: u64,
        producer_epoch: u16,
        partitions: &[TopicPartition],
    ) -> Result<Option<TxnResponse>, TxnError> {
        if partitions.is_empty() {
            return Err(TxnError::InvalidRequest("no partitions to add".into()));
        }
        let e = self.checked(id, producer_id)?;
        if self.pending.contains_key(id) {
            return Err(TxnError::ConcurrentTransactions);
        }
        let m = &e.meta;
        if producer_epoch != m.producer_epoch {
            return Err(Self::fenced(id, producer_epoch, m.producer_epoch));
        }
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                return Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Dead => {
                return Err(TxnError::InvalidTxnState(format!(
                    "{id:?} is being removed"
                )))
            }
            TxnState::Ongoing if partitions.iter().all(|tp| m.partitions.contains(tp)) => {
                return Ok(Some(TxnResponse::AddPartitionsToTxn(Ok(()))));
            }
            _ => {}
        }
        let target = m.add_partitions(now, partitions);
        self.write(id, target, After::Reply(w));
        Ok(None)
    }

    fn end_txn(&mut self, w: Waiter, r: &EndTxnRequest) -> Result<Option<TxnResponse>, TxnError> {
        let id = &r.transactional_id;
        let e = self.checked(id, r.producer_id)?;
        if self.pending.contains_key(id) {
            return Err(TxnError::ConcurrentTransactions);
        }
        let m = &e.meta;
        // An old client's EndTxn (keep_epoch) cannot take a bumped epoch home.
        let bump = !self.config.bugs.late_txn_marker && !r.keep_epoch;
        let same = m.result() == Some(r.result);
        let done = Ok(Some(TxnResponse::EndTxn(Ok(ProducerIdAndEpoch {
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
        }))));
        let wrong = || {
            TxnError::InvalidTxnState(format!(
                "EndTxn({:?}) of {id:?} in state {:?}",
                r.result, m.state
            ))
        };
        if r.producer_epoch == m.producer_epoch {
            match m.state {
                TxnState::Ongoing => {
                    let target = m.prepare(r.result == TxnResult::Commit, bump);
                    self.write(id, target, After::Reply(w));
                    Ok(None)
                }
                s if s.is_preparing() && same => Err(TxnError::ConcurrentTransactions),
                // Without the part-2 bump a retry carries the current epoch (Kafka's
                // pre-KIP-890 idempotent EndTxn).
                s if s.is_complete() && same && !bump => done,
                _ => Err(wrong()),
            }
        } else if bump
            && Some(r.producer_epoch) == m.last_producer_epoch
            && (m.state.is_preparing() || m.state.is_complete())
        {
            // A retry of the EndTxn that bumped the epoch: answered as the original.
            match m.state {
                _ if !same => Err(wrong()),
                s if s.is_preparing() => Err(TxnError::ConcurrentTransactions),
                _ => done,
            }
        } else {
            Err(Self::fenced(id, r.producer_epoch, m.producer_epoch))
        }
    }

    // ---- writes ---------------------------------------------------------------------------

    fn write(&mut self, id: &str, target: TxnMetadata, after: After) {
        let Some(epoch) = self.epoch() else {
            debug_assert!(false, "write while not active");
            return;
        };
        debug_assert!(!self.pending.contains_key(id), "one write per id at a time");
        self.next_append += 1;
        let append = self.next_append;
        self.outputs.push(TxnOutput::Append {
            id: append,
            partition: self.partition,
            leader_epoch: epoch,
            records: vec![records::txn_record(id, Some(&target))],
        });
        self.appends.insert(append, id.to_string());
        self.pending.insert(
            id.to_string(),
            Pending {
                append,
                target,
                after,
            },
        );
    }

    /// The host's report on an [`TxnOutput::Append`], in issue order.
    pub fn append_completed(
        &mut self,
        now: Nanos,
        id: AppendId,
        result: Result<Offset, AppendError>,
    ) {
        let Some(txn_id) = self.appends.remove(&id) else {
            return;
        };
        let Some(p) = self.pending.remove(&txn_id) else {
            return;
        };
        debug_assert_eq!(p.append, id);
        if let Err(e) = result {
            tracing::debug!(%txn_id, error = %e, "__transaction_state write failed");
            let err = append_failure(&e);
            match p.after {
                After::Reply(w) => self.respond(w, w.err(err)),
                After::Abort | After::Complete => {
                    if let Some(e) = self.txns.get_mut(&txn_id) {
                        e.retry_at = Some(now + self.config.write_retry_backoff);
                    }
                }
            }
            return;
        }
        let target = p.target;
        let pid = ProducerIdAndEpoch {
            producer_id: target.producer_id,
            producer_epoch: target.producer_epoch,
        };
        let preparing = target.state.is_preparing();
        match self.txns.get_mut(&txn_id) {
            Some(e) => {
                debug_assert!(
                    e.meta.state == target.state
                        || crate::txn::state::is_legal(e.meta.state, target.state)
                        || (e.meta.state == TxnState::Ongoing
                            && target.state == TxnState::PrepareAbort),
                    "adopting {:?} over {:?}",
                    target.state,
                    e.meta.state
                );
                if target.state == TxnState::Ongoing {
                    e.data_epoch = Some(target.producer_epoch);
                }
                e.meta = target;
                e.retry_at = None;
                e.markers.clear();
            }
            None => {
                self.txns.insert(
                    txn_id.clone(),
                    Entry {
                        data_epoch: (target.state == TxnState::Ongoing)
                            .then_some(target.producer_epoch),
                        meta: target,
                        markers: BTreeMap::new(),
                        retry_at: None,
                    },
                );
            }
        }
        if let After::Reply(w) = p.after {
            self.respond(w, w.ok(pid));
        }
        if preparing {
            self.start_markers(now, &txn_id);
        }
    }

    // ---- markers --------------------------------------------------------------------------

    fn marker_correlation(&mut self) -> u64 {
        // Partition and coordinator epoch in the high bits: an answer to an earlier
        // incarnation's marker never matches a marker of this one.
        self.next_marker = self.next_marker.wrapping_add(1);
        let epoch = match self.phase {
            TxnPhase::Active { epoch } | TxnPhase::Loading { epoch } => epoch,
            _ => 0,
        };
        ((self.partition as u64 & 0xffff) << 48)
            | ((epoch as u64 & 0xffff) << 32)
            | self.next_marker as u64
    }

    /// The `__transaction_state` partition that sent the marker with this correlation.
    pub fn marker_partition(correlation: u64) -> u32 {
        (correlation >> 48) as u32
    }

    /// Start (or restart) the markers of a `Prepare*` transaction.
    fn start_markers(&mut self, now: Nanos, id: &str) {
        let Some(e) = self.txns.get(id) else { return };
        if !e.meta.state.is_preparing() {
            return;
        }
        let tps: Vec<TopicPartition> = e.meta.partitions.iter().cloned().collect();
        if tps.is_empty() {
            self.write_complete(id);
            return;
        }
        for tp in tps {
            self.send_marker(now, id, tp);
        }
    }

    fn send_marker(&mut self, now: Nanos, id: &str, tp: TopicPartition) {
        let Some(coordinator_epoch) = self.epoch() else {
            return;
        };
        let correlation = self.marker_correlation();
        let Some(e) = self.txns.get_mut(id) else {
            return;
        };
        let Some(result) = e.meta.result() else {
            return;
        };
        if let Some(MarkerState::InFlight { correlation: c, .. }) = e.markers.get(&tp) {
            self.marker_owner.remove(c);
        }
        e.markers.insert(
            tp.clone(),
            MarkerState::InFlight {
                correlation,
                sent_at: now,
            },
        );
        let request = WriteTxnMarkerRequest {
            correlation,
            tp,
            producer_id: e.meta.producer_id,
            producer_epoch: e.meta.producer_epoch,
            coordinator_epoch,
            result,
            bumped: e.data_epoch.is_some_and(|d| e.meta.producer_epoch > d),
        };
        self.marker_owner.insert(correlation, id.to_string());
        self.outputs.push(TxnOutput::SendMarker {
            partition: self.partition,
            request,
        });
    }

    /// A partition leader's answer to a marker (or the host's `NotLeader` when it knew no
    /// leader to send it to).
    pub fn marker_answered(&mut self, now: Nanos, response: WriteTxnMarkerResponse) {
        let Some(id) = self.marker_owner.remove(&response.correlation) else {
            return; // an answer to a marker since resent or finished
        };
        let backoff = self.config.marker_retry_backoff;
        let Some(e) = self.txns.get_mut(&id) else {
            return;
        };
        match e.markers.get(&response.tp) {
            Some(MarkerState::InFlight { correlation, .. })
                if *correlation == response.correlation => {}
            _ => return,
        }
        match &response.result {
            Ok(()) => {
                e.markers.remove(&response.tp);
            }
            // The partition has seen a newer epoch of this producer: a later transaction
            // wrote there, so this one is settled there (Kafka drops the marker too).
            Err(MarkerError::InvalidProducerEpoch { .. }) => {
                tracing::warn!(%id, tp = %response.tp, "marker refused: producer epoch is older");
                e.markers.remove(&response.tp);
            }
            Err(MarkerError::CoordinatorFenced { .. }) => {
                e.markers.insert(response.tp.clone(), MarkerState::Fenced);
            }
            Err(err) => {
                debug_assert!(err.is_retriable());
                e.markers.insert(
                    response.tp.clone(),
                    MarkerState::Backoff {
                        until: now + backoff,
                    },
                );
            }
        }
        if e.markers.is_empty() && e.meta.state.is_preparing() {
            self.write_complete(&id);
        }
    }

    fn write_complete(&mut self, id: &str) {
        if self.pending.contains_key(id) {
            return;
        }
        let Some(e) = self.txns.get(id) else { return };
        let target = e.meta.complete();
        self.write(id, target, After::Complete);
    }

    // ---- time -----------------------------------------------------------------------------

    /// Abort expired transactions, resend markers due, retry failed writes.
    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.epoch().is_none() {
            return;
        }
        let mut expired = Vec::new();
        let mut resend = Vec::new();
        let mut complete = Vec::new();
        for (id, e) in &self.txns {
            if self.pending.contains_key(id) || e.retry_at.is_some_and(|t| now < t) {
                continue;
            }
            match e.meta.state {
                TxnState::Ongoing
                    if now >= e.meta.start_time.saturating_add(ms(e.meta.timeout_ms)) =>
                {
                    expired.push(id.clone())
                }
                s if s.is_preparing() => {
                    if e.markers.is_empty() {
                        complete.push(id.clone());
                    }
                    for (tp, st) in &e.markers {
                        let due = match st {
                            MarkerState::InFlight { sent_at, .. } => {
                                now >= sent_at.saturating_add(self.config.marker_request_timeout)
                            }
                            MarkerState::Backoff { until } => now >= *until,
                            MarkerState::Fenced => false,
                        };
                        if due {
                            resend.push((id.clone(), tp.clone()));
                        }
                    }
                }
                _ => {}
            }
        }
        for id in expired {
            tracing::info!(%id, "transaction timed out: aborting");
            let target = self.txns[&id].meta.fence_and_abort(true);
            self.write(&id, target, After::Abort);
        }
        for (id, tp) in resend {
            self.send_marker(now, &id, tp);
        }
        for id in complete {
            self.write_complete(&id);
        }
    }

    /// When [`Self::handle_timeout`] has something to do next.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.epoch()?;
        let mut next: Option<Nanos> = None;
        let mut at = |t: Nanos| next = Some(next.map_or(t, |n| n.min(t)));
        for (id, e) in &self.txns {
            if self.pending.contains_key(id) {
                continue;
            }
            let retry = e.retry_at.unwrap_or(0);
            match e.meta.state {
                TxnState::Ongoing => at(e
                    .meta
                    .start_time
                    .saturating_add(ms(e.meta.timeout_ms))
                    .max(retry)),
                s if s.is_preparing() => {
                    if e.markers.is_empty() {
                        at(retry);
                    }
                    for st in e.markers.values() {
                        match st {
                            MarkerState::InFlight { sent_at, .. } => {
                                at(sent_at.saturating_add(self.config.marker_request_timeout))
                            }
                            MarkerState::Backoff { until } => at(*until),
                            MarkerState::Fenced => {}
                        }
                    }
                }
                _ => {}
            }
        }
        next
    }

    // ---- outputs --------------------------------------------------------------------------

    fn respond(&mut self, w: Waiter, response: TxnResponse) {
        self.outputs.push(TxnOutput::Respond {
            to: w.to,
            correlation: w.correlation,
            response,
        });
    }

    pub fn poll_outputs(&mut self) -> Vec<TxnOutput> {
        std::mem::take(&mut self.outputs)
    }

    pub fn has_outputs(&self) -> bool {
        !self.outputs.is_empty()
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
