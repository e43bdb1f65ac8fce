//! `GroupCoordinator`: every group whose id hashes to one `__consumer_offsets` partition,
//! hosted by the broker that leads that partition.
//!
//! Lifecycle, driven by the host broker:
//! ```text
//!  Unloaded --begin_load(epoch)--> Loading --load_batches(..)*, complete_load(now)--> Active
//!     ^                                                                                |
//!     +------------------------------------- unload() ---------------------------------+
//! ```
//! While Unloaded every request gets NotCoordinator, while Loading CoordinatorLoadInProgress.
//! When Active, requests go to their group's state machine ([`crate::group::state`]); the
//! decisions that must survive a failover (group metadata of each generation, committed
//! offsets) leave as [`CoordinatorOutput::Append`] effects and take effect — an OffsetCommit
//! is acknowledged, a SyncGroup answered — only when the host reports
//! [`GroupCoordinator::append_completed`] with `Ok`.

use crate::group::protocol::*;
use crate::group::records::{self, GroupRecord, RecordError};
use crate::group::state::{AfterDelete, Effects, Group, PendingAppend, Waiter};
pub use crate::group::state::{
    AppendError, AppendId, Committed, CoordinatorOutput, GroupConfig, GroupState,
    PendingTxnOffsets, TXN_OFFSETS_SEQUENCE,
};
use crate::log::RecordBatch;
use crate::txn::TxnResult;
use crate::types::{LeaderEpoch, Nanos, NodeId, Offset, TopicPartition};
use std::collections::BTreeMap;

/// A record of `__consumer_offsets` that could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("__consumer_offsets-{partition} offset {offset}: {source}")]
pub struct LoadError {
    pub partition: u32,
    pub offset: Offset,
    pub source: RecordError,
}

/// What a load found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadSummary {
    pub records: u64,
    pub groups: usize,
    pub offsets: usize,
    /// Records with a key version this coordinator does not know.
    pub skipped_unknown: u64,
    /// Records of groups that do not hash to this partition (ignored).
    pub foreign: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoordinatorPhase {
    Unloaded,
    Loading {
        epoch: LeaderEpoch,
    },
    Active {
        epoch: LeaderEpoch,
    },
    /// The partition holds a record this coordinator cannot read: it refuses to serve
    /// (CoordinatorNotAvailable) rather than serve a wrong state, until `unload`/`begin_load`.
    LoadFailed {
        epoch: LeaderEpoch,
        error: LoadError,
    },
}

#[derive(Default)]
struct Loaded {
    metadata: Option<records::GroupMetadataValue>,
    offsets: BTreeMap<TopicPartition, Committed>,
    stamps: BTreeMap<TopicPartition, records::CommitStamp>,
    /// Transactional offsets per producer id (epoch, offsets) whose marker has not been
    /// read yet.
    txn: BTreeMap<u64, (u16, BTreeMap<TopicPartition, Committed>)>,
}

impl Loaded {
    /// A marker of `producer_id` read: its transactional offsets apply (commit; a later
    /// record of the partition wins, as in memory) or go (abort).
    fn settle(&mut self, producer_id: u64, result: TxnResult) {
        let Some((_, offsets)) = self.txn.remove(&producer_id) else {
            return;
        };
        if result == TxnResult::Abort {
            return;
        }
        for (tp, c) in offsets {
            if self
                .offsets
                .get(&tp)
                .is_none_or(|o| o.log_offset < c.log_offset)
            {
                self.offsets.insert(tp, c);
            }
        }
    }
}

/// Read-only view of one group, for tests and the simulator's invariant checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupView {
    pub state: GroupState,
    pub generation: GenerationId,
    pub protocol: Option<String>,
    pub leader: Option<MemberId>,
    /// Member id -> (instance id, assigned partitions).
    pub members: BTreeMap<MemberId, (Option<InstanceId>, Vec<TopicPartition>)>,
    pub offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
}

pub struct GroupCoordinator {
    node: NodeId,
    partition: u32,
    num_partitions: u32,
    config: GroupConfig,
    phase: CoordinatorPhase,
    groups: BTreeMap<GroupId, Group>,
    loading: BTreeMap<GroupId, Loaded>,
    summary: LoadSummary,
    fx: Effects,
    /// [`Self::changes`].
    changes: u64,
    /// Debug builds: each group's state at the previous call that touched it, for the
    /// monotonic checks of `check.rs` (cleared with every unload).
    #[cfg(debug_assertions)]
    pub(crate) debug_checkpoints: BTreeMap<GroupId, super::check::GroupCheckpoint>,
}

impl GroupCoordinator {
    /// The coordinator for `__consumer_offsets` partition `partition` (of `num_partitions`)
    /// on broker `node`. Starts Unloaded.
    pub fn new(node: NodeId, partition: u32, num_partitions: u32, config: GroupConfig) -> Self {
        assert!(partition < num_partitions, "partition out of range");
        Self {
            node,
            partition,
            num_partitions,
            config,
            phase: CoordinatorPhase::Unloaded,
            groups: BTreeMap::new(),
            loading: BTreeMap::new(),
            summary: LoadSummary::default(),
            fx: Effects {
                partition,
                ..Effects::default()
            },
            changes: 0,
            #[cfg(debug_assertions)]
            debug_checkpoints: BTreeMap::new(),
        }
    }

    pub fn partition(&self) -> u32 {
        self.partition
    }

    pub fn phase(&self) -> &CoordinatorPhase {
        &self.phase
    }

    /// A counter that moves whenever the phase or any group's committed offsets change
    /// (and not for requests that change neither): while it stands still, [`Self::phase`]
    /// and the offsets [`Self::committed_offsets`] lists are unchanged (a group it does
    /// not hold has none), so an observer (the simulator's checks, after every broker
    /// step) can skip re-reading them. A coordinator made by [`super::GroupCoordinators`]
    /// starts past every count the host's dropped ones reached, so one partition's
    /// coordinators never repeat a count on one host.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Starts [`Self::changes`] at `from` (a host's new coordinator).
    pub(super) fn start_changes_at(&mut self, from: u64) {
        self.changes = from;
    }

    fn changed(&mut self) {
        self.changes += 1;
    }

    /// This broker became leader of the partition at `epoch`: start rebuilding state.
    pub fn begin_load(&mut self, epoch: LeaderEpoch) {
        self.unload();
        self.phase = CoordinatorPhase::Loading { epoch };
        self.changed();
        self.fx.epoch = epoch;
    }

    /// Feed batches of the partition, in offset order, from the log start up to its end
    /// offset as of becoming leader. May be called many times. On a malformed record the
    /// coordinator moves to `LoadFailed` and the error names the offset.
    pub fn load_batches(&mut self, batches: &[RecordBatch]) -> Result<(), LoadError> {
        let epoch = match &self.phase {
            CoordinatorPhase::Loading { epoch } => *epoch,
            CoordinatorPhase::LoadFailed { error, .. } => return Err(error.clone()),
            _ => {
                debug_assert!(false, "load_batches while not loading");
                return Ok(());
            }
        };
        if let Err(e) = self.apply_batches(batches) {
            tracing::error!(error = %e, "cannot load __consumer_offsets");
            self.loading.clear();
            self.phase = CoordinatorPhase::LoadFailed {
                epoch,
                error: e.clone(),
            };
            self.changed();
            return Err(e);
        }
        Ok(())
    }

    fn apply_batches(&mut self, batches: &[RecordBatch]) -> Result<(), LoadError> {
        for b in batches {
            if let Some(m) = b.as_txn_marker() {
                // KIP-447: the marker settles the producer's transactional offsets in every
                // group of this partition.
                for l in self.loading.values_mut() {
                    l.settle(m.producer_id, m.result);
                }
                continue;
            }
            if b.is_control() {
                continue; // a leader-epoch marker: no group records
            }
            // A TxnOffsetCommit's batch: pending until its producer's marker follows.
            let txn = b
                .producer
                .filter(|_| b.is_transactional() && !self.config.txn_offsets_visible_early);
            for (offset, r) in b.iter_offsets() {
                self.summary.records += 1;
                let rec = records::decode_record(r).map_err(|source| LoadError {
                    partition: self.partition,
                    offset,
                    source,
                })?;
                let Some(rec) = rec else {
                    self.summary.skipped_unknown += 1;
                    continue;
                };
                let group = match &rec {
                    GroupRecord::Offset { group, .. } | GroupRecord::Group { group, .. } => group,
                    GroupRecord::Barrier => continue,
                };
                if coordinator_partition(group, self.num_partitions) != self.partition {
                    self.summary.foreign += 1;
                    continue;
                }
                match rec {
                    GroupRecord::Offset {
                        group,
                        tp,
                        value,
                        stamp,
                    } => {
                        let l = self.loading.entry(group).or_default();
                        if let (Some(p), Some(value)) = (txn, &value) {
                            let (epoch, pending) = l.txn.entry(p.producer_id).or_default();
                            *epoch = (*epoch).max(p.producer_epoch);
                            pending.insert(
                                tp,
                                Committed {
                                    value: value.clone(),
                                    log_offset: offset,
                                },
                            );
                            continue;
                        }
                        match stamp {
                            Some(s) => l.stamps.insert(tp.clone(), s),
                            None => l.stamps.remove(&tp),
                        };
                        match value {
                            Some(value) => {
                                l.offsets.insert(
                                    tp,
                                    Committed {
                                        value,
                                        log_offset: offset,
                                    },
                                );
                            }
                            None => {
                                l.offsets.remove(&tp);
                            }
                        }
                    }
                    GroupRecord::Group { group, value } => {
                        self.loading.entry(group).or_default().metadata = value;
                    }
                    GroupRecord::Barrier => {}
                }
            }
        }
        Ok(())
    }

    /// Every record is loaded: serve requests. Members restored from the latest metadata get
    /// a fresh session from `now`.
    pub fn complete_load(&mut self, now: Nanos) -> LoadSummary {
        let CoordinatorPhase::Loading { epoch } = self.phase else {
            // After a failed load the coordinator stays failed; anything else is a host bug.
            debug_assert!(
                matches!(self.phase, CoordinatorPhase::LoadFailed { .. }),
                "complete_load while not loading"
            );
            return self.summary.clone();
        };
        for (id, l) in std::mem::take(&mut self.loading) {
            if l.metadata.is_none() && l.offsets.is_empty() && l.txn.is_empty() {
                continue;
            }
            let mut g = match l.metadata {
                Some(v) => Group::from_persisted(id.clone(), v, now),
                None => Group::new(id.clone()),
            };
            self.summary.offsets += l.offsets.len();
            g.offsets = l.offsets;
            g.stamps = l.stamps;
            // No marker yet: still pending, settled by `complete_txn` when it lands.
            g.txn_offsets = l
                .txn
                .into_iter()
                .map(|(pid, (producer_epoch, offsets))| {
                    let offsets = offsets
                        .into_iter()
                        .map(|(tp, c)| (tp, (c.value, Some(c.log_offset))))
                        .collect();
                    let p = PendingTxnOffsets {
                        producer_epoch,
                        offsets,
                        settled: None,
                    };
                    (pid, p)
                })
                .collect();
            self.groups.insert(id, g);
        }
        self.summary.groups = self.groups.len();
        crate::probe!(CoordinatorLoaded);
        self.phase = CoordinatorPhase::Active { epoch };
        self.changed();
        std::mem::take(&mut self.summary)
    }

    /// `begin_load`, `load_batches`, `complete_load` in one go.
    pub fn load(
        &mut self,
        now: Nanos,
        epoch: LeaderEpoch,
        batches: &[RecordBatch],
    ) -> Result<LoadSummary, LoadError> {
        self.begin_load(epoch);
        self.load_batches(batches)?;
        Ok(self.complete_load(now))
    }

    /// This broker lost leadership of the partition: answer parked requests with
    /// NotCoordinator and forget every group. Completions of earlier appends are ignored.
    pub fn unload(&mut self) {
        let mut fx = std::mem::take(&mut self.fx);
        for g in self.groups.values_mut() {
            g.fail_waiters(GroupError::NotCoordinator, &mut fx);
        }
        for (_, p) in std::mem::take(&mut fx.pending) {
            if let PendingAppend::Read { waiter, .. } = p {
                fx.respond(
                    waiter,
                    GroupResponse::OffsetFetch(Err(GroupError::NotCoordinator)),
                );
                continue;
            }
            if let PendingAppend::Commit { waiter, .. } = p {
                fx.respond(
                    waiter,
                    GroupResponse::OffsetCommit(Err(GroupError::NotCoordinator)),
                );
                continue;
            }
            if let PendingAppend::TxnCommit { waiter, .. } = p {
                fx.respond(
                    waiter,
                    GroupResponse::TxnOffsetCommit(Err(GroupError::NotCoordinator)),
                );
                continue;
            }
            if let PendingAppend::Delete { waiter, then, .. } = p {
                fx.respond(waiter, then.response(Err(GroupError::NotCoordinator)));
                continue;
            }
            if let PendingAppend::Metadata {
                then: crate::group::state::AfterMetadata::StaticJoin { waiter, .. },
                ..
            } = p
            {
                fx.respond(
                    waiter,
                    GroupResponse::JoinGroup(Err(GroupError::NotCoordinator)),
                );
            }
        }
        self.fx = fx;
        self.groups.clear();
        self.loading.clear();
        self.summary = LoadSummary::default();
        self.phase = CoordinatorPhase::Unloaded;
        self.changed();
        #[cfg(debug_assertions)]
        self.debug_checkpoints.clear();
    }

    /// A request from client `from`; the response (now or later) carries `correlation`.
    pub fn step(
        &mut self,
        now: Nanos,
        from: ClientId,
        correlation: CorrelationId,
        request: GroupRequest,
    ) {
        let w = Waiter {
            to: from,
            correlation,
        };
        if let Err(e) = self.gate(&request) {
            self.fx.respond(w, GroupResponse::error_for(&request, e));
            return;
        }
        let gid = request.group_id().to_string();
        let cfg = &self.config;
        let fx = &mut self.fx;
        match request {
            GroupRequest::FindCoordinator { .. } => fx.respond(
                w,
                GroupResponse::FindCoordinator(Ok(CoordinatorInfo {
                    node: self.node,
                    partition: self.partition,
                })),
            ),
            GroupRequest::JoinGroup(req) => self.join(now, w, req),
            GroupRequest::SyncGroup(req) => match self.groups.get_mut(&req.group_id) {
                Some(g) => g.sync(now, w, req, cfg, fx),
                None => fx.respond(
                    w,
                    GroupResponse::SyncGroup(Err(GroupError::UnknownMemberId)),
                ),
            },
            GroupRequest::Heartbeat(req) => {
                let r = match self.groups.get_mut(&req.group_id) {
                    Some(g) => g.heartbeat(now, &req, cfg),
                    None => Err(GroupError::UnknownMemberId),
                };
                fx.respond(w, GroupResponse::Heartbeat(r));
            }
            GroupRequest::LeaveGroup(req) => {
                let r = match self.groups.get_mut(&req.group_id) {
                    Some(g) => g.leave(now, &req, cfg, fx),
                    None => Err(GroupError::UnknownMemberId),
                };
                fx.respond(w, GroupResponse::LeaveGroup(r));
            }
            GroupRequest::OffsetCommit(req) => {
                if !self.offset_commit(now, w, req) {
                    return;
                }
            }
            GroupRequest::OffsetFetch(req) => self.offset_fetch(w, req),
            GroupRequest::DescribeGroup { group_id } => {
                let d = self.describe(group_id);
                self.fx.respond(w, GroupResponse::DescribeGroup(Ok(d)));
            }
            // The broker answers it from every coordinator it hosts; the gate refuses it.
            GroupRequest::ListGroups => {
                let l = self.list_groups();
                self.fx.respond(w, GroupResponse::ListGroups(Ok(l)));
            }
            GroupRequest::DeleteGroup { group_id } => self.delete_group(w, &group_id),
            GroupRequest::OffsetDelete(req) => self.offset_delete(now, w, req),
            GroupRequest::TxnOffsetCommit(req) => self.txn_offset_commit(now, w, req),
        }
        self.check_invariants(&gid);
    }

    /// Whether this coordinator takes requests for the request's group now.
    fn gate(&self, request: &GroupRequest) -> Result<(), GroupError> {
        match self.phase {
            CoordinatorPhase::Unloaded => Err(GroupError::NotCoordinator),
            CoordinatorPhase::Loading { .. } => Err(GroupError::CoordinatorLoadInProgress),
            CoordinatorPhase::LoadFailed { .. } => Err(GroupError::CoordinatorNotAvailable),
            CoordinatorPhase::Active { .. } => {
                let g = request.group_id();
                if g.is_empty() {
                    Err(GroupError::InvalidGroupId)
                } else if coordinator_partition(g, self.num_partitions) != self.partition {
                    Err(GroupError::NotCoordinator)
                } else {
                    Ok(())
                }
            }
        }
    }

    fn join(&mut self, now: Nanos, w: Waiter, req: JoinGroupRequest) {
        let id = req.group_id.clone();
        let g = self
            .groups
            .entry(id.clone())
            .or_insert_with(|| Group::new(id.clone()));
        g.join(now, w, req, &self.config, &mut self.fx);
        // A refused first join leaves nothing behind.
        if g.is_pristine() {
            self.groups.remove(&id);
        }
    }

    /// An offset commit; false when it is refused before it reaches a group (too much
    /// metadata, or a member of a group that does not exist).
    fn offset_commit(&mut self, now: Nanos, w: Waiter, req: OffsetCommitRequest) -> bool {
        let cfg = &self.config;
        let fx = &mut self.fx;
        if req
            .offsets
            .values()
            .any(|o| o.metadata.len() > cfg.max_metadata_bytes)
        {
            fx.respond(
                w,
                GroupResponse::OffsetCommit(Err(GroupError::OffsetMetadataTooLarge)),
            );
            return false;
        }
        let g = match (self.groups.get_mut(&req.group_id), &req.committer) {
            (Some(g), _) => g,
            // Offsets of a group nobody ever joined: a simple consumer or an operator.
            (None, Committer::Admin) => self
                .groups
                .entry(req.group_id.clone())
                .or_insert_with(|| Group::new(req.group_id.clone())),
            (None, Committer::Member { .. }) => {
                fx.respond(
                    w,
                    GroupResponse::OffsetCommit(Err(GroupError::UnknownMemberId)),
                );
                return false;
            }
        };
        match g.check_commit(now, &req.committer, cfg) {
            Ok(()) => g.commit(w, &req.committer, req.offsets, fx),
            Err(e) => fx.respond(w, GroupResponse::OffsetCommit(Err(e))),
        }
        true
    }

    /// A TxnOffsetCommit (KIP-447): checked like an OffsetCommit when it names a member,
    /// written as a transactional batch of the producer, pending until its marker.
    fn txn_offset_commit(&mut self, now: Nanos, w: Waiter, req: TxnOffsetCommitRequest) {
        let cfg = &self.config;
        let fx = &mut self.fx;
        let refuse = |fx: &mut Effects, e| fx.respond(w, GroupResponse::TxnOffsetCommit(Err(e)));
        if req
            .offsets
            .values()
            .any(|o| o.metadata.len() > cfg.max_metadata_bytes)
        {
            return refuse(fx, GroupError::OffsetMetadataTooLarge);
        }
        let g = match self.groups.get_mut(&req.group_id) {
            Some(g) => g,
            // A member of a group that does not exist is of no generation.
            None if req.generation.is_some() && !cfg.no_generation_fencing => {
                return refuse(fx, GroupError::IllegalGeneration)
            }
            None if req.member_id.is_some() && !cfg.no_generation_fencing => {
                return refuse(fx, GroupError::UnknownMemberId)
            }
            None => self
                .groups
                .entry(req.group_id.clone())
                .or_insert_with(|| Group::new(req.group_id.clone())),
        };
        match g.check_txn_commit(now, &req, cfg) {
            Ok(()) => g.txn_commit(w, req, cfg, fx),
            Err(e) => refuse(fx, e),
        }
    }

    /// `producer_id`'s commit or abort marker is committed on this partition: settle its
    /// pending transactional offsets in every group here. A coordinator not (yet) active
    /// ignores it: its load reads the marker from the log.
    pub fn complete_txn(&mut self, producer_id: u64, result: TxnResult) {
        if !matches!(self.phase, CoordinatorPhase::Active { .. }) {
            return;
        }
        let touched: Vec<GroupId> = self
            .groups
            .iter()
            .filter(|(_, g)| g.has_pending_txn(producer_id))
            .map(|(id, _)| id.clone())
            .collect();
        for id in touched {
            let g = self.groups.get_mut(&id).expect("listed");
            let applied = g.complete_txn(producer_id, result);
            self.committed(id.clone(), applied);
            self.check_invariants(&id);
        }
    }

    /// Offsets of `group` became committed outside an OffsetCommit answer (a transaction's
    /// marker): count the change and tell observers, as a commit does.
    fn committed(&mut self, group: GroupId, offsets: Vec<(TopicPartition, Offset)>) {
        if offsets.is_empty() {
            return;
        }
        self.changes += 1;
        self.fx.outputs.push(CoordinatorOutput::Committed {
            group,
            epoch: self.fx.epoch,
            offsets,
        });
    }

    /// An offset fetch: answered only after a barrier append commits. A deposed leader
    /// that has not heard of its successor (cut off from the controller) must not serve
    /// its stale offsets (seeds 382, 488: `group-acked-commit-lost`). Refusals need no
    /// barrier.
    fn offset_fetch(&mut self, w: Waiter, req: OffsetFetchRequest) {
        let r = match self.groups.get(&req.group_id) {
            Some(g) => g.fetch(&req),
            None => Ok(BTreeMap::new()),
        };
        match r {
            Ok(_) => {
                self.fx.append(
                    vec![records::barrier_record()],
                    PendingAppend::Read {
                        request: req,
                        waiter: w,
                    },
                );
            }
            Err(e) => self.fx.respond(w, GroupResponse::OffsetFetch(Err(e))),
        }
    }

    /// DeleteGroup: a group nobody is in loses its offsets and metadata.
    fn delete_group(&mut self, w: Waiter, group_id: &str) {
        let fx = &mut self.fx;
        let Some(g) = self.groups.get_mut(group_id) else {
            let e = GroupError::GroupIdNotFound;
            return fx.respond(w, GroupResponse::DeleteGroup(Err(e)));
        };
        if !g.has_no_members() {
            let e = GroupError::NonEmptyGroup;
            return fx.respond(w, GroupResponse::DeleteGroup(Err(e)));
        }
        let partitions = g.committed_partitions();
        g.delete(w, partitions, AfterDelete::Group, fx);
    }

    /// OffsetDelete (an operator's: partitions of subscribed topics refused), or a
    /// committer's "no position" (fenced as its commits are).
    fn offset_delete(&mut self, now: Nanos, w: Waiter, req: OffsetDeleteRequest) {
        let cfg = &self.config;
        let fx = &mut self.fx;
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            let response = match req.committer {
                // Nothing is committed already; a member of no group is unknown.
                Some(Committer::Admin) => GroupResponse::OffsetCommit(Ok(())),
                Some(Committer::Member { .. }) => {
                    GroupResponse::OffsetCommit(Err(GroupError::UnknownMemberId))
                }
                None => GroupResponse::OffsetDelete(Err(GroupError::GroupIdNotFound)),
            };
            return fx.respond(w, response);
        };
        match req.committer {
            Some(c) => match g.check_commit(now, &c, cfg) {
                Ok(()) => g.delete(w, req.partitions, AfterDelete::Commit, fx),
                Err(e) => fx.respond(w, GroupResponse::OffsetCommit(Err(e))),
            },
            None => {
                let subscribed = g.subscribed_topics();
                let (refused, partitions): (Vec<_>, Vec<_>) = req
                    .partitions
                    .into_iter()
                    .partition(|tp| subscribed.contains(tp.topic.as_str()));
                g.delete(w, partitions, AfterDelete::Offsets(refused), fx);
            }
        }
    }

    /// Every group this coordinator holds, for ListGroups (none unless active).
    pub fn list_groups(&self) -> Vec<GroupListing> {
        if !matches!(self.phase, CoordinatorPhase::Active { .. }) {
            return Vec::new();
        }
        self.groups
            .values()
            .map(|g| GroupListing {
                group_id: g.id.clone(),
                state: format!("{:?}", g.state),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
            })
            .collect()
    }

    /// What DescribeGroup says of `group_id` ("Dead" for a group it does not know).
    fn describe(&self, group_id: String) -> GroupDescription {
        let held = self.groups.get(&group_id);
        match self.group(&group_id) {
            Some(v) => GroupDescription {
                group_id,
                state: format!("{:?}", v.state),
                generation: v.generation,
                protocol: v.protocol,
                leader: v.leader,
                members: v
                    .members
                    .into_iter()
                    .map(
                        |(member_id, (group_instance_id, assignment))| MemberDescription {
                            subscription: held
                                .map(|g| g.member_topics(&member_id))
                                .unwrap_or_default(),
                            member_id,
                            group_instance_id,
                            assignment,
                        },
                    )
                    .collect(),
                offsets: v.offsets,
            },
            None => GroupDescription {
                group_id,
                state: "Dead".into(),
                generation: 0,
                protocol: None,
                leader: None,
                members: Vec::new(),
                offsets: BTreeMap::new(),
            },
        }
    }

    /// The host's report on an `Append` effect.
    pub fn append_completed(
        &mut self,
        now: Nanos,
        id: AppendId,
        result: Result<Offset, AppendError>,
    ) {
        let Some(p) = self.fx.pending.remove(&id) else {
            return; // Issued before an unload: nobody is waiting any more.
        };
        let gid = match &p {
            PendingAppend::Commit { group, .. }
            | PendingAppend::Metadata { group, .. }
            | PendingAppend::TxnCommit { group, .. } => group.clone(),
            PendingAppend::Read { request, .. } => request.group_id.clone(),
            PendingAppend::Delete { group, .. } => group.clone(),
        };
        let cfg = &self.config;
        let fx = &mut self.fx;
        match p {
            PendingAppend::Commit {
                group,
                offsets,
                waiter,
            } => {
                if let Some(g) = self.groups.get_mut(&group) {
                    g.commit_done(&offsets, result.as_ref().ok().copied());
                    if result.is_ok() {
                        // Only a completed append materialises offsets.
                        self.changes += 1;
                        fx.outputs.push(CoordinatorOutput::Committed {
                            group: group.clone(),
                            epoch: fx.epoch,
                            offsets: offsets
                                .iter()
                                .map(|(tp, v)| (tp.clone(), v.offset))
                                .collect(),
                        });
                    }
                }
                let r = result.map(|_| ()).map_err(|e| e.to_group_error());
                fx.respond(waiter, GroupResponse::OffsetCommit(r));
            }
            PendingAppend::Metadata {
                group,
                generation,
                then,
            } => {
                if let Some(g) = self.groups.get_mut(&group) {
                    g.metadata_done(now, (id, generation), then, result, cfg, fx);
                }
            }
            PendingAppend::TxnCommit {
                group,
                producer_id,
                offsets,
                waiter,
            } => {
                let base = result.as_ref().ok().copied();
                let applied = match self.groups.get_mut(&group) {
                    Some(g) => g.txn_commit_done(producer_id, &offsets, base, cfg),
                    None => Vec::new(),
                };
                let r = result.map(|_| ()).map_err(|e| e.to_group_error());
                self.committed(group, applied);
                self.fx.respond(waiter, GroupResponse::TxnOffsetCommit(r));
            }
            PendingAppend::Read { request, waiter } => {
                // Appends complete in log order, so every commit appended before the barrier
                // has completed: the state read now is at least as new as the request.
                let r = match result {
                    Ok(_) => match self.groups.get(&request.group_id) {
                        Some(g) => g.fetch(&request),
                        None => Ok(BTreeMap::new()),
                    },
                    Err(e) => Err(e.to_group_error()),
                };
                fx.respond(waiter, GroupResponse::OffsetFetch(r));
            }
            PendingAppend::Delete {
                group,
                partitions,
                then,
                waiter,
            } => {
                if result.is_ok() {
                    if let Some(g) = self.groups.get_mut(&group) {
                        g.delete_done(&partitions, then == AfterDelete::Group);
                        if g.is_pristine() {
                            self.groups.remove(&group);
                        }
                    }
                    self.changes += 1;
                    // Commits vanish on purpose here: the checks start afresh.
                    #[cfg(debug_assertions)]
                    self.debug_checkpoints.remove(&group);
                }
                let r = result.map(|_| ()).map_err(|e| e.to_group_error());
                fx.respond(waiter, then.response(r));
            }
        }
        self.check_invariants(&gid);
    }

    /// Advance time: session expiry, join and sync deadlines.
    pub fn handle_timeout(&mut self, now: Nanos) {
        if !matches!(self.phase, CoordinatorPhase::Active { .. }) {
            return;
        }
        let mut ticked = Vec::new();
        for (id, g) in self.groups.iter_mut() {
            if g.next_timeout().is_some_and(|t| t <= now) {
                g.tick(now, &self.config, &mut self.fx);
                if cfg!(debug_assertions) {
                    ticked.push(id.clone());
                }
            }
        }
        // Pending ids that expired may leave groups nobody ever joined.
        self.groups.retain(|_, g| !g.is_pristine());
        for id in ticked {
            self.check_invariants(&id);
        }
    }

    /// Earliest time at which `handle_timeout` has something to do.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if !matches!(self.phase, CoordinatorPhase::Active { .. }) {
            return None;
        }
        self.groups.values().filter_map(|g| g.next_timeout()).min()
    }

    pub fn poll_outputs(&mut self) -> Vec<CoordinatorOutput> {
        std::mem::take(&mut self.fx.outputs)
    }

    /// Groups this coordinator holds, sorted.
    pub fn group_ids(&self) -> Vec<GroupId> {
        self.groups.keys().cloned().collect()
    }

    pub fn group(&self, group_id: &str) -> Option<GroupView> {
        let g = self.groups.get(group_id)?;
        Some(GroupView {
            state: g.state,
            generation: g.generation,
            protocol: g.protocol.clone(),
            leader: g.leader.clone(),
            members: g
                .members
                .values()
                .map(|m| (m.id.clone(), (m.instance_id.clone(), m.assignment.clone())))
                .collect(),
            offsets: g
                .offsets
                .iter()
                .map(|(tp, c)| (tp.clone(), c.value.clone()))
                .collect(),
        })
    }

    /// The committed offsets of one group, borrowed: what [`Self::group`] returns in
    /// `offsets`, without cloning the whole view (the simulator looks after every step).
    pub fn committed_offsets(
        &self,
        group_id: &str,
    ) -> Option<impl Iterator<Item = (&TopicPartition, Offset)> + '_> {
        let g = self.groups.get(group_id)?;
        Some(g.offsets.iter().map(|(tp, c)| (tp, c.value.offset)))
    }

    /// Debug builds: check the invariants of the group a call touched (`check.rs`).
    fn check_invariants(&mut self, _group: &str) {
        #[cfg(debug_assertions)]
        self.debug_check_group(_group);
    }

    pub(crate) fn group_state(&self, group: &str) -> Option<&Group> {
        self.groups.get(group)
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }
}
