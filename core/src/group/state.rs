//! One consumer group's state machine (Kafka's classic protocol):
//!
//! ```text
//!            join                 all joined / rebalance timeout        leader's sync persisted
//!   Empty ---------> PreparingRebalance ---------------------> CompletingRebalance ------> Stable
//!     ^                 ^   |  no member left                      |  member leaves/dies      |
//!     |                 |   v                                      |  or sync timeout         |
//!     +------------- (generation+1, Empty)   <---------------------+--------------------------+
//!                       join / leave / session expiry from CompletingRebalance or Stable
//! ```
//! Every completed join bumps the generation. A member is fenced by (member id, generation,
//! instance id): anything else gets UnknownMemberId / IllegalGeneration / FencedInstanceId.
//! The group only *decides*; persistence and replies go through [`Effects`].

use crate::controller::ProducerIdAndEpoch;
use crate::group::protocol::*;
use crate::group::records::{self, CommitStamp, GroupMetadataValue, PersistedMember};
use crate::log::Record;
use crate::txn::TxnResult;
use crate::types::{LeaderEpoch, Nanos, Offset, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};

/// Coordinator tunables (Kafka's broker-side group settings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    pub min_session_timeout: Nanos,
    pub max_session_timeout: Nanos,
    /// `group.initial.rebalance.delay.ms`: an empty group waits this long (extended by each
    /// new joiner, bounded by the rebalance timeout) so a starting fleet forms one generation.
    pub initial_rebalance_delay: Nanos,
    pub max_group_size: usize,
    pub max_metadata_bytes: usize,
    /// Bug zoo (`Bugs::no_generation_fencing`, set by the hosting broker): accept commits and
    /// heartbeats without checking member id or generation. Off in every normal path.
    pub no_generation_fencing: bool,
    /// Bug zoo (`TxnBugs::txn_offsets_visible_early`, set by the hosting broker): a
    /// TxnOffsetCommit becomes the group's committed offsets as soon as it is written, not
    /// when its transaction's commit marker lands. Off in every normal path.
    pub txn_offsets_visible_early: bool,
}

const SECOND: Nanos = 1_000_000_000;

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            min_session_timeout: 6 * SECOND,
            max_session_timeout: 1800 * SECOND,
            initial_rebalance_delay: 3 * SECOND,
            max_group_size: 1000,
            max_metadata_bytes: 4096,
            no_generation_fencing: false,
            txn_offsets_visible_early: false,
        }
    }
}

/// Where a deferred response goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiter {
    pub to: ClientId,
    pub correlation: CorrelationId,
}

pub type AppendId = u64;

/// What the coordinator tells its host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoordinatorOutput {
    Respond {
        to: ClientId,
        correlation: CorrelationId,
        response: GroupResponse,
    },
    /// Append `records` (one batch) to `__consumer_offsets` partition `partition` as leader of
    /// `leader_epoch` with acks=all, then call `append_completed(id, ..)`: `Ok(base offset)`
    /// once the batch is below the high watermark, `Err` if it cannot get there. Completions
    /// must be reported in log order (the HW only moves forward).
    Append {
        id: AppendId,
        partition: u32,
        leader_epoch: LeaderEpoch,
        records: Vec<Record>,
        /// `Some`: a TxnOffsetCommit's batch, written as a transactional batch of this
        /// producer (its id and epoch in the header, no sequence: `TXN_OFFSETS_SEQUENCE`),
        /// so that the producer's marker on this partition settles it. `None` for every
        /// other append.
        producer: Option<ProducerIdAndEpoch>,
    },
    /// Observation only (hosts trace it or ignore it): a commit append of `group` became
    /// durable at coordinator epoch `epoch`, so these are now the group's committed offsets
    /// in log order. Emitted before the commit's answer.
    Committed {
        group: String,
        epoch: LeaderEpoch,
        offsets: Vec<(TopicPartition, Offset)>,
    },
}

/// Why an append to `__consumer_offsets` did not become durable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    #[error("no longer the leader of the partition")]
    NotLeader,
    #[error("the batch did not reach the in-sync replicas in time")]
    Timeout,
    #[error("not enough in-sync replicas")]
    NotEnoughReplicas,
    #[error("storage error: {0}")]
    Storage(String),
    /// The partition refused a TxnOffsetCommit's batch: its producer epoch is fenced.
    #[error("invalid (fenced) producer epoch: {0}")]
    InvalidProducerEpoch(String),
}

impl AppendError {
    pub fn to_group_error(&self) -> GroupError {
        match self {
            AppendError::NotLeader => GroupError::NotCoordinator,
            AppendError::InvalidProducerEpoch(m) => GroupError::InvalidProducerEpoch(m.clone()),
            _ => GroupError::CoordinatorNotAvailable,
        }
    }
}

/// The base sequence of a group coordinator's transactional offset batch: none (Kafka's
/// `NO_SEQUENCE`, as a marker's). The coordinator writes for the producer without knowing its
/// sequences; the partition leader must not sequence-check such a local append.
pub const TXN_OFFSETS_SEQUENCE: u32 = crate::log::NO_SEQUENCE;

/// What to do once an append is durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PendingAppend {
    Commit {
        group: GroupId,
        offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
        waiter: Waiter,
    },
    /// A TxnOffsetCommit's batch: once durable, its offsets wait for the marker.
    TxnCommit {
        group: GroupId,
        producer_id: u64,
        offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
        waiter: Waiter,
    },
    Metadata {
        group: GroupId,
        generation: GenerationId,
        then: AfterMetadata,
    },
    /// A read barrier for an OffsetFetch: answer it once the barrier is committed.
    Read {
        request: OffsetFetchRequest,
        waiter: Waiter,
    },
    /// Tombstones for committed offsets (and, deleting the group, for its metadata).
    Delete {
        group: GroupId,
        partitions: Vec<TopicPartition>,
        then: AfterDelete,
        waiter: Waiter,
    },
}

/// What a deletion answers once its tombstones are committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AfterDelete {
    /// A member's (or a tool's) commit of "no position": an OffsetCommit answer.
    Commit,
    /// OffsetDelete, with the partitions it refused (the group subscribes to their topic).
    Offsets(Vec<TopicPartition>),
    /// DeleteGroup: the group goes too.
    Group,
}

impl AfterDelete {
    pub fn response(self, result: Result<(), GroupError>) -> GroupResponse {
        match self {
            AfterDelete::Commit => GroupResponse::OffsetCommit(result),
            AfterDelete::Offsets(refused) => GroupResponse::OffsetDelete(result.map(|()| refused)),
            AfterDelete::Group => GroupResponse::DeleteGroup(result),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AfterMetadata {
    /// The leader's assignment: move to Stable and answer the parked syncs.
    Sync,
    /// A static member replaced its old id: answer its join.
    StaticJoin {
        member_id: MemberId,
        waiter: Waiter,
    },
    Nothing,
}

/// Output sink and append bookkeeping shared by the groups of one coordinator.
#[derive(Debug, Default)]
pub(crate) struct Effects {
    pub partition: u32,
    pub epoch: LeaderEpoch,
    pub outputs: Vec<CoordinatorOutput>,
    pub pending: BTreeMap<AppendId, PendingAppend>,
    pub next_append: AppendId,
    pub next_member: u64,
}

impl Effects {
    pub fn respond(&mut self, w: Waiter, response: GroupResponse) {
        self.outputs.push(CoordinatorOutput::Respond {
            to: w.to,
            correlation: w.correlation,
            response,
        });
    }

    pub fn append(&mut self, records: Vec<Record>, then: PendingAppend) -> AppendId {
        self.append_as(records, then, None)
    }

    /// [`Self::append`], as a transactional batch of `producer` when given.
    pub fn append_as(
        &mut self,
        mut records: Vec<Record>,
        then: PendingAppend,
        producer: Option<ProducerIdAndEpoch>,
    ) -> AppendId {
        // Ids carry the leader epoch: a completion meant for an earlier incarnation of this
        // coordinator can never be mistaken for one of ours.
        let id = (u64::from(self.epoch) << 32) | (self.next_append & 0xffff_ffff);
        self.next_append += 1;
        records::number_records(&mut records);
        self.outputs.push(CoordinatorOutput::Append {
            id,
            partition: self.partition,
            leader_epoch: self.epoch,
            records,
            producer,
        });
        self.pending.insert(id, then);
        id
    }

    /// Member ids embed the leader epoch, so ids minted by a later coordinator of the
    /// partition can never collide with persisted ones.
    pub fn new_member_id(&mut self, instance: Option<&str>) -> MemberId {
        self.next_member += 1;
        format!(
            "{}-e{}-{}",
            instance.unwrap_or("member"),
            self.epoch,
            self.next_member
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub id: MemberId,
    pub instance_id: Option<InstanceId>,
    pub session_timeout: Nanos,
    pub rebalance_timeout: Nanos,
    pub protocols: Vec<ProtocolMetadata>,
    pub assignment: Vec<TopicPartition>,
    pub session_deadline: Nanos,
    pub join_waiter: Option<Waiter>,
    pub sync_waiter: Option<Waiter>,
}

impl Member {
    fn supports(&self, name: &str) -> bool {
        self.protocols.iter().any(|p| p.name == name)
    }
    fn subscription(&self, name: &str) -> Subscription {
        self.protocols
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.subscription.clone())
            .unwrap_or_default()
    }
}

/// One producer's transactional offsets in a group (KIP-447), pending until the marker of
/// its transaction: the commit marker makes them committed offsets, the abort marker drops
/// them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PendingTxnOffsets {
    /// The newest epoch of the producer seen here: an older one is fenced.
    pub producer_epoch: u16,
    /// Per partition, the latest offset the transaction wrote and the log offset of its
    /// record (None while its append is in flight).
    pub offsets: BTreeMap<TopicPartition, (OffsetAndMetadata, Option<Offset>)>,
    /// The marker came while an append was still in flight: that append settles as this
    /// says when it completes (the marker follows it in the log, so it will).
    pub settled: Option<TxnResult>,
}

/// A committed offset and the log offset of the record that committed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub value: OffsetAndMetadata,
    pub log_offset: Offset,
}

#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub id: GroupId,
    pub state: GroupState,
    pub generation: GenerationId,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<MemberId>,
    pub members: BTreeMap<MemberId, Member>,
    pub static_members: BTreeMap<InstanceId, MemberId>,
    /// KIP-394: ids handed out with MemberIdRequired, not yet joined, with their expiry.
    pub pending_members: BTreeMap<MemberId, Nanos>,
    pub join_deadline: Option<Nanos>,
    pub join_delay_until: Option<Nanos>,
    pub sync_deadline: Option<Nanos>,
    pub metadata_append: Option<AppendId>,
    pub offsets: BTreeMap<TopicPartition, Committed>,
    pub pending_commits: BTreeMap<TopicPartition, u32>,
    /// Per partition, the member commit that last wrote (or is writing) it.
    pub stamps: BTreeMap<TopicPartition, CommitStamp>,
    /// KIP-447: transactional offsets per producer id, pending until their marker.
    pub txn_offsets: BTreeMap<u64, PendingTxnOffsets>,
}

fn same_protocols(a: &[ProtocolMetadata], b: &[ProtocolMetadata]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.name == y.name && x.subscription.topics == y.subscription.topics)
}

impl Group {
    pub fn new(id: GroupId) -> Self {
        Self {
            id,
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            join_deadline: None,
            join_delay_until: None,
            sync_deadline: None,
            metadata_append: None,
            offsets: BTreeMap::new(),
            pending_commits: BTreeMap::new(),
            stamps: BTreeMap::new(),
            txn_offsets: BTreeMap::new(),
        }
    }

    /// Never used: nothing to keep or persist.
    pub fn is_pristine(&self) -> bool {
        self.state == GroupState::Empty
            && self.generation == 0
            && self.members.is_empty()
            && self.pending_members.is_empty()
            && self.offsets.is_empty()
            && self.pending_commits.is_empty()
            && self.txn_offsets.is_empty()
    }

    /// Rebuild from a persisted group record: members are restored with fresh sessions, so
    /// live ones keep their generation (and a failover alone causes no rebalance) while dead
    /// ones expire.
    pub fn from_persisted(id: GroupId, v: GroupMetadataValue, now: Nanos) -> Self {
        let mut g = Group::new(id);
        g.generation = v.generation;
        g.protocol_type = Some(v.protocol_type);
        g.protocol = v.protocol.clone();
        g.leader = v.leader;
        for m in v.members {
            let name = v.protocol.clone().unwrap_or_default();
            if let Some(i) = &m.instance_id {
                g.static_members.insert(i.clone(), m.member_id.clone());
            }
            g.members.insert(
                m.member_id.clone(),
                Member {
                    id: m.member_id,
                    instance_id: m.instance_id,
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    protocols: vec![ProtocolMetadata {
                        name,
                        subscription: Subscription {
                            topics: m.topics,
                            owned: m.assignment.clone(),
                            generation: Some(v.generation),
                        },
                    }],
                    assignment: m.assignment,
                    session_deadline: now + m.session_timeout,
                    join_waiter: None,
                    sync_waiter: None,
                },
            );
        }
        g.state = if g.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        g
    }

    pub fn persisted(&self) -> GroupMetadataValue {
        let name = self.protocol.clone().unwrap_or_default();
        GroupMetadataValue {
            protocol_type: self
                .protocol_type
                .clone()
                .unwrap_or_else(|| CONSUMER_PROTOCOL_TYPE.to_string()),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            members: self
                .members
                .values()
                .map(|m| PersistedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    topics: m.subscription(&name).topics,
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    fn persist(&mut self, fx: &mut Effects, then: AfterMetadata) -> AppendId {
        let rec = records::group_record(&self.id, Some(&self.persisted()));
        fx.append(
            vec![rec],
            PendingAppend::Metadata {
                group: self.id.clone(),
                generation: self.generation,
                then,
            },
        )
    }

    /// Protocols every current member (except `except`) supports.
    fn candidate_protocols(&self, except: Option<&str>) -> Option<BTreeSet<String>> {
        let mut it = self
            .members
            .values()
            .filter(|m| Some(m.id.as_str()) != except);
        let first = it.next()?;
        let mut set: BTreeSet<String> = first.protocols.iter().map(|p| p.name.clone()).collect();
        for m in it {
            set.retain(|n| m.supports(n));
        }
        Some(set)
    }

    fn check_fencing(
        &self,
        member_id: &str,
        instance: Option<&InstanceId>,
        generation: Option<GenerationId>,
    ) -> Result<(), GroupError> {
        if let Some(i) = instance {
            if let Some(owner) = self.static_members.get(i) {
                if owner != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
            }
        }
        let Some(m) = self.members.get(member_id) else {
            crate::probe!(GroupUnknownMember);
            return Err(GroupError::UnknownMemberId);
        };
        if m.instance_id.as_ref() != instance && instance.is_some() {
            return Err(GroupError::FencedInstanceId);
        }
        if let Some(g) = generation {
            if g != self.generation {
                crate::probe!(GroupIllegalGeneration);
                return Err(GroupError::IllegalGeneration);
            }
        }
        Ok(())
    }

    // ---- JoinGroup ----------------------------------------------------------------------

    pub fn join(
        &mut self,
        now: Nanos,
        w: Waiter,
        req: JoinGroupRequest,
        cfg: &GroupConfig,
        fx: &mut Effects,
    ) {
        if let Err(e) = self.validate_join(&req, cfg) {
            fx.respond(w, GroupResponse::JoinGroup(Err(e)));
            return;
        }
        match (req.member_id.clone(), req.group_instance_id.clone()) {
            (None, Some(inst)) => {
                if let Some(old) = self.static_members.get(&inst).cloned() {
                    self.replace_static(now, w, old, req, cfg, fx);
                } else {
                    let id = fx.new_member_id(Some(&inst));
                    self.static_members.insert(inst, id.clone());
                    self.add_member(now, w, id, req, cfg, fx);
                }
            }
            (None, None) => {
                if self.members.len() + self.pending_members.len() >= cfg.max_group_size {
                    fx.respond(
                        w,
                        GroupResponse::JoinGroup(Err(GroupError::GroupMaxSizeReached)),
                    );
                    return;
                }
                let id = fx.new_member_id(None);
                self.pending_members
                    .insert(id.clone(), now + req.session_timeout);
                fx.respond(
                    w,
                    GroupResponse::JoinGroup(Err(GroupError::MemberIdRequired(id))),
                );
            }
            (Some(id), inst) => {
                if let Some(i) = &inst {
                    if self.static_members.get(i).is_some_and(|o| o != &id) {
                        fx.respond(
                            w,
                            GroupResponse::JoinGroup(Err(GroupError::FencedInstanceId)),
                        );
                        return;
                    }
                }
                if let Some(m) = self.members.get(&id) {
                    if m.instance_id != inst {
                        fx.respond(
                            w,
                            GroupResponse::JoinGroup(Err(GroupError::FencedInstanceId)),
                        );
                        return;
                    }
                    self.rejoin_known(now, w, id, req, cfg, fx);
                } else if self.pending_members.remove(&id).is_some() {
                    if let Some(i) = inst {
                        self.static_members.insert(i, id.clone());
                    }
                    self.add_member(now, w, id, req, cfg, fx);
                } else {
                    fx.respond(
                        w,
                        GroupResponse::JoinGroup(Err(GroupError::UnknownMemberId)),
                    );
                }
            }
        }
    }

    fn validate_join(&self, req: &JoinGroupRequest, cfg: &GroupConfig) -> Result<(), GroupError> {
        if req.session_timeout < cfg.min_session_timeout
            || req.session_timeout > cfg.max_session_timeout
        {
            return Err(GroupError::InvalidSessionTimeout);
        }
        if req.protocols.is_empty() || req.protocol_type.is_empty() {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        if self.members.is_empty() {
            return Ok(());
        }
        if self.protocol_type.as_deref() != Some(req.protocol_type.as_str()) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        let except = req.member_id.as_deref().or_else(|| {
            req.group_instance_id
                .as_ref()
                .and_then(|i| self.static_members.get(i))
                .map(|s| s.as_str())
        });
        match self.candidate_protocols(except) {
            Some(c) if !req.protocols.iter().any(|p| c.contains(&p.name)) => {
                Err(GroupError::InconsistentGroupProtocol)
            }
            _ => Ok(()),
        }
    }

    fn add_member(
        &mut self,
        now: Nanos,
        w: Waiter,
        id: MemberId,
        req: JoinGroupRequest,
        cfg: &GroupConfig,
        fx: &mut Effects,
    ) {
        let was_empty = self.members.is_empty();
        if was_empty {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        self.members.insert(
            id.clone(),
            Member {
                id,
                instance_id: req.group_instance_id,
                session_timeout: req.session_timeout,
                rebalance_timeout: req.rebalance_timeout,
                protocols: req.protocols,
                assignment: Vec::new(),
                session_deadline: now + req.session_timeout,
                join_waiter: Some(w),
                sync_waiter: None,
            },
        );
        match self.state {
            GroupState::PreparingRebalance => {
                // A new joiner extends the initial delay, within the rebalance timeout.
                if let (Some(_), Some(deadline)) = (self.join_delay_until, self.join_deadline) {
                    self.join_delay_until = Some((now + cfg.initial_rebalance_delay).min(deadline));
                }
                self.maybe_complete_join(now, fx);
            }
            _ => self.prepare_rebalance(now, was_empty, cfg, fx),
        }
    }

    fn rejoin_known(
        &mut self,
        now: Nanos,
        w: Waiter,
        id: MemberId,
        req: JoinGroupRequest,
        cfg: &GroupConfig,
        fx: &mut Effects,
    ) {
        let is_leader = self.leader.as_deref() == Some(id.as_str());
        let m = self.members.get_mut(&id).expect("known member");
        let unchanged = m.protocols == req.protocols;
        m.protocols = req.protocols;
        m.session_timeout = req.session_timeout;
        m.rebalance_timeout = req.rebalance_timeout;
        m.session_deadline = now + req.session_timeout;
        match self.state {
            GroupState::PreparingRebalance => {
                m.join_waiter = Some(w);
                self.maybe_complete_join(now, fx);
            }
            GroupState::CompletingRebalance | GroupState::Stable if unchanged && !is_leader => {
                // The member lost our join response: repeat it, no rebalance.
                let resp = self.join_response(&id, false);
                fx.respond(w, GroupResponse::JoinGroup(Ok(resp)));
            }
            _ => {
                m.join_waiter = Some(w);
                self.prepare_rebalance(now, false, cfg, fx);
            }
        }
    }

    /// KIP-345: a static member restarted; it takes over its old member id's place (the old id
    /// is now fenced). In a Stable group with unchanged subscription there is no rebalance.
    fn replace_static(
        &mut self,
        now: Nanos,
        w: Waiter,
        old: MemberId,
        req: JoinGroupRequest,
        cfg: &GroupConfig,
        fx: &mut Effects,
    ) {
        let inst = req.group_instance_id.clone().expect("static");
        let new_id = fx.new_member_id(Some(&inst));
        let mut m = self.members.remove(&old).expect("static member present");
        if let Some(stale) = m.join_waiter.take() {
            fx.respond(
                stale,
                GroupResponse::JoinGroup(Err(GroupError::FencedInstanceId)),
            );
        }
        if let Some(stale) = m.sync_waiter.take() {
            fx.respond(
                stale,
                GroupResponse::SyncGroup(Err(GroupError::FencedInstanceId)),
            );
        }
        let name = self.protocol.clone().unwrap_or_default();
        let unchanged = req
            .protocols
            .iter()
            .find(|p| p.name == name)
            .is_some_and(|p| p.subscription.topics == m.subscription(&name).topics)
            && same_protocols(&m.protocols, &req.protocols);
        m.id = new_id.clone();
        m.protocols = req.protocols;
        m.session_timeout = req.session_timeout;
        m.rebalance_timeout = req.rebalance_timeout;
        m.session_deadline = now + req.session_timeout;
        if self.leader.as_deref() == Some(old.as_str()) {
            self.leader = Some(new_id.clone());
        }
        self.static_members.insert(inst, new_id.clone());
        match self.state {
            GroupState::Stable if unchanged => {
                self.members.insert(new_id.clone(), m);
                self.persist(
                    fx,
                    AfterMetadata::StaticJoin {
                        member_id: new_id,
                        waiter: w,
                    },
                );
            }
            GroupState::PreparingRebalance => {
                m.join_waiter = Some(w);
                self.members.insert(new_id, m);
                self.maybe_complete_join(now, fx);
            }
            _ => {
                m.join_waiter = Some(w);
                self.members.insert(new_id, m);
                self.prepare_rebalance(now, false, cfg, fx);
            }
        }
    }

    fn join_response(&self, member_id: &str, skip_assignment: bool) -> JoinGroupResponse {
        let leader = self.leader.clone().unwrap_or_default();
        let protocol = self.protocol.clone().unwrap_or_default();
        let members = if leader == member_id {
            self.members
                .values()
                .map(|m| JoinedMember {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    subscription: m.subscription(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinGroupResponse {
            generation: self.generation,
            protocol,
            leader,
            member_id: member_id.to_string(),
            members,
            skip_assignment,
        }
    }

    fn prepare_rebalance(
        &mut self,
        now: Nanos,
        from_empty: bool,
        cfg: &GroupConfig,
        fx: &mut Effects,
    ) {
        // Syncs parked in CompletingRebalance belong to a generation that will not complete.
        // A member answered after waiting on us gets a fresh session to act on the answer.
        for m in self.members.values_mut() {
            if let Some(s) = m.sync_waiter.take() {
                fx.respond(
                    s,
                    GroupResponse::SyncGroup(Err(GroupError::RebalanceInProgress)),
                );
                m.session_deadline = now + m.session_timeout;
            }
        }
        self.metadata_append = None;
        self.sync_deadline = None;
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(0);
        self.state = GroupState::PreparingRebalance;
        self.join_deadline = Some(now + timeout);
        self.join_delay_until = if from_empty && cfg.initial_rebalance_delay > 0 {
            Some((now + cfg.initial_rebalance_delay).min(now + timeout))
        } else {
            None
        };
        self.maybe_complete_join(now, fx);
    }

    fn maybe_complete_join(&mut self, now: Nanos, fx: &mut Effects) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        if self.join_delay_until.is_some_and(|d| now < d) {
            return;
        }
        self.join_delay_until = None;
        let all_joined = self.members.values().all(|m| m.join_waiter.is_some())
            && self.pending_members.is_empty();
        if all_joined || self.join_deadline.is_some_and(|d| now >= d) {
            self.complete_join(now, fx);
        }
    }

    fn complete_join(&mut self, now: Nanos, fx: &mut Effects) {
        // Members that did not rejoin in time are out.
        let gone: Vec<MemberId> = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            self.remove_member(&id);
        }
        self.join_deadline = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader = None;
            self.persist(fx, AfterMetadata::Nothing);
            return;
        }
        self.protocol = Some(self.select_protocol());
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.state = GroupState::CompletingRebalance;
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(0);
        self.sync_deadline = Some(now + timeout);
        let ids: Vec<MemberId> = self.members.keys().cloned().collect();
        for id in ids {
            let resp = self.join_response(&id, false);
            let m = self.members.get_mut(&id).expect("member");
            m.assignment.clear();
            m.session_deadline = now + m.session_timeout;
            if let Some(w) = m.join_waiter.take() {
                fx.respond(w, GroupResponse::JoinGroup(Ok(resp)));
            }
        }
    }

    /// Each member votes for its most preferred protocol among those all members support.
    fn select_protocol(&self) -> String {
        let candidates = self.candidate_protocols(None).unwrap_or_default();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(p) = m.protocols.iter().find(|p| candidates.contains(&p.name)) {
                *votes.entry(p.name.as_str()).or_default() += 1;
            }
        }
        debug_assert!(!votes.is_empty(), "join validation keeps a common protocol");
        votes
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(n, _)| n.to_string())
            .unwrap_or_else(|| {
                let first = self.members.values().next().expect("non-empty");
                first.protocols[0].name.clone()
            })
    }

    fn remove_member(&mut self, id: &str) -> Option<Member> {
        let m = self.members.remove(id)?;
        if let Some(i) = &m.instance_id {
            if self.static_members.get(i).is_some_and(|o| o == id) {
                self.static_members.remove(i);
            }
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
        Some(m)
    }

    /// A member is gone (left, or its session expired): rebalance the rest.
    fn member_gone(&mut self, now: Nanos, id: &str, cfg: &GroupConfig, fx: &mut Effects) {
        if let Some(m) = self.remove_member(id) {
            if let Some(w) = m.join_waiter {
                fx.respond(
                    w,
                    GroupResponse::JoinGroup(Err(GroupError::UnknownMemberId)),
                );
            }
            if let Some(w) = m.sync_waiter {
                fx.respond(
                    w,
                    GroupResponse::SyncGroup(Err(GroupError::UnknownMemberId)),
                );
            }
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now, false, cfg, fx)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now, fx),
            GroupState::Empty => {}
        }
    }

    // ---- SyncGroup / Heartbeat / LeaveGroup ---------------------------------------------

    pub fn sync(
        &mut self,
        now: Nanos,
        w: Waiter,
        req: SyncGroupRequest,
        cfg: &GroupConfig,
        fx: &mut Effects,
    ) {
        let fenced = self.check_fencing(
            &req.member_id,
            req.group_instance_id.as_ref(),
            Some(req.generation),
        );
        if let Err(e) = fenced {
            fx.respond(w, GroupResponse::SyncGroup(Err(e)));
            return;
        }
        let is_leader = self.leader.as_deref() == Some(req.member_id.as_str());
        let m = self.members.get_mut(&req.member_id).expect("fenced above");
        m.session_deadline = now + m.session_timeout;
        match self.state {
            GroupState::Empty | GroupState::PreparingRebalance => {
                fx.respond(
                    w,
                    GroupResponse::SyncGroup(Err(GroupError::RebalanceInProgress)),
                );
            }
            GroupState::Stable => {
                let a = MemberAssignment {
                    partitions: m.assignment.clone(),
                };
                fx.respond(w, GroupResponse::SyncGroup(Ok(a)));
            }
            GroupState::CompletingRebalance => {
                if let Some(old) = m.sync_waiter.replace(w) {
                    fx.respond(
                        old,
                        GroupResponse::SyncGroup(Err(GroupError::RebalanceInProgress)),
                    );
                }
                if is_leader && self.metadata_append.is_none() {
                    if let Err(e) = self.install_assignment(req.assignments) {
                        let lw = self
                            .members
                            .get_mut(&req.member_id)
                            .and_then(|m| m.sync_waiter.take());
                        if let Some(lw) = lw {
                            fx.respond(lw, GroupResponse::SyncGroup(Err(e)));
                        }
                        self.prepare_rebalance(now, false, cfg, fx);
                        return;
                    }
                    self.metadata_append = Some(self.persist(fx, AfterMetadata::Sync));
                }
            }
        }
    }

    fn install_assignment(
        &mut self,
        mut a: BTreeMap<MemberId, MemberAssignment>,
    ) -> Result<(), GroupError> {
        let mut seen = BTreeSet::new();
        for (id, ma) in &a {
            if !self.members.contains_key(id) {
                return Err(GroupError::InvalidAssignment(format!(
                    "unknown member {id}"
                )));
            }
            for tp in &ma.partitions {
                if !seen.insert(tp.clone()) {
                    return Err(GroupError::InvalidAssignment(format!(
                        "{tp} assigned twice"
                    )));
                }
            }
        }
        for m in self.members.values_mut() {
            m.assignment = a.remove(&m.id).map(|x| x.partitions).unwrap_or_default();
        }
        Ok(())
    }

    pub fn heartbeat(
        &mut self,
        now: Nanos,
        req: &HeartbeatRequest,
        cfg: &GroupConfig,
    ) -> Result<(), GroupError> {
        if cfg.no_generation_fencing {
            // Bug zoo: whoever it is, from whichever generation, its heartbeat is fine.
            if let Some(m) = self.members.get_mut(&req.member_id) {
                m.session_deadline = now + m.session_timeout;
            }
            return match self.state {
                GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
                _ => Ok(()),
            };
        }
        self.check_fencing(
            &req.member_id,
            req.group_instance_id.as_ref(),
            Some(req.generation),
        )?;
        let m = self.members.get_mut(&req.member_id).expect("fenced above");
        m.session_deadline = now + m.session_timeout;
        match self.state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::Empty => Err(GroupError::UnknownMemberId),
            _ => Ok(()),
        }
    }

    pub fn leave(
        &mut self,
        now: Nanos,
        req: &LeaveGroupRequest,
        cfg: &GroupConfig,
        fx: &mut Effects,
    ) -> Result<(), GroupError> {
        if self.pending_members.remove(&req.member_id).is_some() {
            self.maybe_complete_join(now, fx);
            return Ok(());
        }
        self.check_fencing(&req.member_id, req.group_instance_id.as_ref(), None)?;
        self.member_gone(now, &req.member_id.clone(), cfg, fx);
        Ok(())
    }

    // ---- OffsetCommit / OffsetFetch -----------------------------------------------------

    pub fn check_commit(
        &mut self,
        now: Nanos,
        c: &Committer,
        cfg: &GroupConfig,
    ) -> Result<(), GroupError> {
        match c {
            Committer::Member { member_id, .. } if cfg.no_generation_fencing => {
                // Bug zoo: no member or generation check, so a zombie's commit is written.
                if let Some(m) = self.members.get_mut(member_id) {
                    m.session_deadline = now + m.session_timeout;
                }
                Ok(())
            }
            Committer::Admin => {
                if self.members.is_empty() {
                    Ok(())
                } else {
                    Err(GroupError::NonEmptyGroup)
                }
            }
            Committer::Member {
                member_id,
                generation,
                group_instance_id,
                ..
            } => {
                self.check_fencing(member_id, group_instance_id.as_ref(), Some(*generation))?;
                match self.state {
                    GroupState::CompletingRebalance => Err(GroupError::RebalanceInProgress),
                    GroupState::Empty => Err(GroupError::UnknownMemberId),
                    // Stable, or PreparingRebalance: the member still owns its partitions
                    // until it rejoins, and commits them before revoking.
                    _ => {
                        let m = self.members.get_mut(member_id).expect("fenced above");
                        m.session_deadline = now + m.session_timeout;
                        Ok(())
                    }
                }
            }
        }
    }

    /// Accept a (fenced-checked) commit: refuse it if a newer commit of the same member
    /// already wrote one of its partitions (the network reordered them), else append it.
    pub fn commit(
        &mut self,
        w: Waiter,
        c: &Committer,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
        fx: &mut Effects,
    ) {
        let stamp = match c {
            Committer::Member {
                member_id,
                generation,
                sequence,
                ..
            } => Some(CommitStamp {
                member_id: member_id.clone(),
                generation: *generation,
                sequence: *sequence,
            }),
            Committer::Admin => None,
        };
        if let Some(s) = &stamp {
            let stale = offsets.keys().any(|tp| {
                self.stamps
                    .get(tp)
                    .is_some_and(|old| old.member_id == s.member_id && old.sequence > s.sequence)
            });
            if stale {
                fx.respond(w, GroupResponse::OffsetCommit(Err(GroupError::StaleCommit)));
                return;
            }
        }
        if offsets.is_empty() {
            fx.respond(w, GroupResponse::OffsetCommit(Ok(())));
            return;
        }
        let offsets: Vec<(TopicPartition, OffsetAndMetadata)> = offsets.into_iter().collect();
        let recs = offsets
            .iter()
            .map(|(tp, v)| records::offset_record(&self.id, tp, Some(v), stamp.as_ref()))
            .collect();
        for (tp, _) in &offsets {
            *self.pending_commits.entry(tp.clone()).or_default() += 1;
            match &stamp {
                Some(s) => self.stamps.insert(tp.clone(), s.clone()),
                None => self.stamps.remove(tp),
            };
        }
        fx.append(
            recs,
            PendingAppend::Commit {
                group: self.id.clone(),
                offsets,
                waiter: w,
            },
        );
    }

    /// A commit append finished: materialise it (latest log offset wins, as on load).
    pub fn commit_done(
        &mut self,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
        base: Option<Offset>,
    ) {
        for (i, (tp, v)) in offsets.iter().enumerate() {
            if let Some(n) = self.pending_commits.get_mut(tp) {
                *n -= 1;
                if *n == 0 {
                    self.pending_commits.remove(tp);
                }
            }
            if let Some(base) = base {
                let log_offset = base + i as u64;
                let newer = self
                    .offsets
                    .get(tp)
                    .is_none_or(|c| c.log_offset < log_offset);
                debug_assert!(newer, "appends complete in log order");
                if newer {
                    self.offsets.insert(
                        tp.clone(),
                        Committed {
                            value: v.clone(),
                            log_offset,
                        },
                    );
                }
            }
        }
    }

    // ---- TxnOffsetCommit (KIP-447) -------------------------------------------------------

    /// Kafka's check of a TxnOffsetCommit: when the request names a member, a generation or
    /// an instance, it must be the current member of the current generation (as an
    /// OffsetCommit); a request naming none (a producer outside the group) is not checked.
    /// Unlike an OffsetCommit, a rebalance in progress does not refuse it.
    pub fn check_txn_commit(
        &mut self,
        now: Nanos,
        req: &TxnOffsetCommitRequest,
        cfg: &GroupConfig,
    ) -> Result<(), GroupError> {
        if let Some(p) = self.txn_offsets.get(&req.producer_id) {
            if req.producer_epoch < p.producer_epoch {
                return Err(GroupError::InvalidProducerEpoch(format!(
                    "producer {}: epoch {} is older than {}",
                    req.producer_id, req.producer_epoch, p.producer_epoch
                )));
            }
            if p.settled.is_some() {
                // The previous transaction's marker is still settling an append: retry.
                return Err(GroupError::CoordinatorLoadInProgress);
            }
        }
        let named =
            req.generation.is_some() || req.member_id.is_some() || req.group_instance_id.is_some();
        if !named || cfg.no_generation_fencing {
            return Ok(());
        }
        let member = req.member_id.as_deref().unwrap_or("");
        self.check_fencing(member, req.group_instance_id.as_ref(), req.generation)?;
        // A member without a generation is not of the current one (Kafka's -1).
        if req.generation.is_none() {
            crate::probe!(GroupIllegalGeneration);
            return Err(GroupError::IllegalGeneration);
        }
        if let Some(m) = self.members.get_mut(member) {
            m.session_deadline = now + m.session_timeout;
        }
        Ok(())
    }

    /// Writes a (checked) TxnOffsetCommit as a transactional batch of its producer; its
    /// offsets are pending until the marker (or, with the zoo's
    /// `txn_offsets_visible_early`, committed as soon as the batch is durable).
    pub fn txn_commit(
        &mut self,
        w: Waiter,
        req: TxnOffsetCommitRequest,
        cfg: &GroupConfig,
        fx: &mut Effects,
    ) {
        if req.offsets.is_empty() {
            fx.respond(w, GroupResponse::TxnOffsetCommit(Ok(())));
            return;
        }
        let offsets: Vec<(TopicPartition, OffsetAndMetadata)> = req.offsets.into_iter().collect();
        let recs = offsets
            .iter()
            .map(|(tp, v)| records::offset_record(&self.id, tp, Some(v), None))
            .collect();
        for (tp, _) in &offsets {
            *self.pending_commits.entry(tp.clone()).or_default() += 1;
        }
        if !cfg.txn_offsets_visible_early {
            let p = self.txn_offsets.entry(req.producer_id).or_default();
            p.producer_epoch = p.producer_epoch.max(req.producer_epoch);
            for (tp, v) in &offsets {
                p.offsets.insert(tp.clone(), (v.clone(), None));
            }
        }
        let producer = ProducerIdAndEpoch {
            producer_id: req.producer_id,
            producer_epoch: req.producer_epoch,
        };
        fx.append_as(
            recs,
            PendingAppend::TxnCommit {
                group: self.id.clone(),
                producer_id: req.producer_id,
                offsets,
                waiter: w,
            },
            Some(producer),
        );
    }

    /// A TxnOffsetCommit's append finished (`base`: its offset, None if it failed). Returns
    /// the offsets that became committed now (a marker that came first, or the zoo's
    /// visible-early).
    pub fn txn_commit_done(
        &mut self,
        producer_id: u64,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
        base: Option<Offset>,
        cfg: &GroupConfig,
    ) -> Vec<(TopicPartition, Offset)> {
        if cfg.txn_offsets_visible_early {
            self.commit_done(offsets, base);
            return match base {
                Some(_) => offsets
                    .iter()
                    .map(|(tp, v)| (tp.clone(), v.offset))
                    .collect(),
                None => Vec::new(),
            };
        }
        for (tp, _) in offsets {
            if let Some(n) = self.pending_commits.get_mut(tp) {
                *n -= 1;
                if *n == 0 {
                    self.pending_commits.remove(tp);
                }
            }
        }
        let Some(p) = self.txn_offsets.get_mut(&producer_id) else {
            return Vec::new();
        };
        for (i, (tp, v)) in offsets.iter().enumerate() {
            // Only the transaction's latest offset for the partition, if this append wrote it.
            let Some(entry) = p.offsets.get_mut(tp) else {
                continue;
            };
            if entry.0 != *v || entry.1.is_some() {
                continue;
            }
            match base {
                Some(b) => entry.1 = Some(b + i as u64),
                None => {
                    p.offsets.remove(tp);
                }
            }
        }
        let in_flight = p.offsets.values().any(|(_, at)| at.is_none());
        match p.settled {
            Some(result) if !in_flight => self.complete_txn(producer_id, result),
            _ => {
                if p.offsets.is_empty() && p.settled.is_none() {
                    self.txn_offsets.remove(&producer_id);
                }
                Vec::new()
            }
        }
    }

    /// `producer_id`'s transaction ended (its marker is committed on this partition):
    /// `Commit` makes its durable offsets committed (a partition's latest record in the log
    /// wins, so a plain OffsetCommit written after the transaction's offsets stands, as on
    /// load), `Abort` drops them. Offsets whose append is still in flight settle when it
    /// completes. Returns the offsets that became committed.
    pub fn complete_txn(
        &mut self,
        producer_id: u64,
        result: TxnResult,
    ) -> Vec<(TopicPartition, Offset)> {
        let Some(mut p) = self.txn_offsets.remove(&producer_id) else {
            return Vec::new();
        };
        let mut applied = Vec::new();
        let mut in_flight = BTreeMap::new();
        for (tp, (v, at)) in std::mem::take(&mut p.offsets) {
            let Some(log_offset) = at else {
                in_flight.insert(tp, (v, at));
                continue;
            };
            let newer = self
                .offsets
                .get(&tp)
                .is_none_or(|c| c.log_offset < log_offset);
            if result == TxnResult::Commit && newer {
                applied.push((tp.clone(), v.offset));
                self.offsets.insert(
                    tp,
                    Committed {
                        value: v,
                        log_offset,
                    },
                );
            }
        }
        if !in_flight.is_empty() {
            p.offsets = in_flight;
            p.settled = Some(result);
            self.txn_offsets.insert(producer_id, p);
        }
        applied
    }

    /// Whether any transactional offsets of `producer_id` wait for a marker here.
    pub fn has_pending_txn(&self, producer_id: u64) -> bool {
        self.txn_offsets.contains_key(&producer_id)
    }

    /// The topics `member` subscribes to under the group's protocol (else its first).
    pub fn member_topics(&self, member: &str) -> Vec<String> {
        let Some(m) = self.members.get(member) else {
            return Vec::new();
        };
        let p = self.protocol.as_deref();
        m.protocols
            .iter()
            .find(|x| Some(x.name.as_str()) == p)
            .or(m.protocols.first())
            .map(|x| x.subscription.topics.clone())
            .unwrap_or_default()
    }

    /// Whether nobody is in the group: DeleteGroup's precondition.
    pub fn has_no_members(&self) -> bool {
        self.state == GroupState::Empty
            && self.members.is_empty()
            && self.pending_members.is_empty()
    }

    /// Every partition with a commit, materialised or in flight.
    pub fn committed_partitions(&self) -> Vec<TopicPartition> {
        let all: BTreeSet<&TopicPartition> = self
            .offsets
            .keys()
            .chain(self.pending_commits.keys())
            .collect();
        all.into_iter().cloned().collect()
    }

    /// The topics the members subscribe to (none while the group is Empty).
    pub fn subscribed_topics(&self) -> BTreeSet<&str> {
        self.members
            .values()
            .flat_map(|m| m.protocols.iter())
            .flat_map(|p| p.subscription.topics.iter().map(String::as_str))
            .collect()
    }

    /// Append tombstones for `partitions` (and the group's metadata with `whole_group`);
    /// answered when they commit. Nothing to write is answered at once.
    pub fn delete(
        &mut self,
        w: Waiter,
        partitions: Vec<TopicPartition>,
        then: AfterDelete,
        fx: &mut Effects,
    ) {
        let mut recs: Vec<Record> = partitions
            .iter()
            .map(|tp| records::offset_record(&self.id, tp, None, None))
            .collect();
        if then == AfterDelete::Group {
            recs.push(records::group_record(&self.id, None));
        }
        if recs.is_empty() {
            fx.respond(w, then.response(Ok(())));
            return;
        }
        // A tombstone carries no stamp; on load it clears the partition's stamp too.
        for tp in &partitions {
            self.stamps.remove(tp);
        }
        fx.append(
            recs,
            PendingAppend::Delete {
                group: self.id.clone(),
                partitions,
                then,
                waiter: w,
            },
        );
    }

    /// Tombstones committed: the partitions read as never committed. Deleting the group
    /// while still nobody is in it forgets its generation too (as a reload would, the
    /// metadata tombstone being the latest record); the caller drops it once pristine.
    pub fn delete_done(&mut self, partitions: &[TopicPartition], whole_group: bool) {
        for tp in partitions {
            self.offsets.remove(tp);
        }
        if whole_group && self.has_no_members() {
            let pending = std::mem::take(&mut self.pending_commits);
            let stamps = std::mem::take(&mut self.stamps);
            let offsets = std::mem::take(&mut self.offsets);
            // Pending transactional offsets stay: their records precede the tombstones in
            // the log, so a reload would still apply them at a commit marker, and so does
            // memory (KIP-447).
            let txn = std::mem::take(&mut self.txn_offsets);
            *self = Group::new(self.id.clone());
            (self.pending_commits, self.stamps, self.offsets) = (pending, stamps, offsets);
            self.txn_offsets = txn;
        }
    }

    pub fn fetch(
        &self,
        req: &OffsetFetchRequest,
    ) -> Result<BTreeMap<TopicPartition, OffsetAndMetadata>, GroupError> {
        let wanted: Vec<TopicPartition> = match &req.partitions {
            Some(p) => p.clone(),
            None => self
                .offsets
                .keys()
                .chain(self.pending_commits.keys())
                .chain(self.txn_offsets.values().flat_map(|t| t.offsets.keys()))
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
        };
        // KIP-447: a partition with transactional offsets awaiting their marker is unstable
        // too (the offset a new owner would start from may be about to change).
        if req.require_stable
            && wanted.iter().any(|tp| {
                self.pending_commits.contains_key(tp)
                    || self
                        .txn_offsets
                        .values()
                        .any(|t| t.offsets.contains_key(tp))
            })
        {
            return Err(GroupError::UnstableOffsetCommit);
        }
        Ok(wanted
            .into_iter()
            .filter_map(|tp| self.offsets.get(&tp).map(|c| (tp, c.value.clone())))
            .collect())
    }

    // ---- persistence completions and time -----------------------------------------------

    pub fn metadata_done(
        &mut self,
        now: Nanos,
        (id, generation): (AppendId, GenerationId),
        then: AfterMetadata,
        result: Result<Offset, AppendError>,
        cfg: &GroupConfig,
        fx: &mut Effects,
    ) {
        let current = generation == self.generation;
        match then {
            AfterMetadata::Sync => {
                if !current || self.metadata_append != Some(id) {
                    return;
                }
                self.metadata_append = None;
                match result {
                    Ok(_) => {
                        self.state = GroupState::Stable;
                        self.sync_deadline = None;
                        for m in self.members.values_mut() {
                            if let Some(w) = m.sync_waiter.take() {
                                let a = MemberAssignment {
                                    partitions: m.assignment.clone(),
                                };
                                fx.respond(w, GroupResponse::SyncGroup(Ok(a)));
                                m.session_deadline = now + m.session_timeout;
                            }
                        }
                    }
                    Err(e) => {
                        let err = e.to_group_error();
                        for m in self.members.values_mut() {
                            m.assignment.clear();
                            if let Some(w) = m.sync_waiter.take() {
                                fx.respond(w, GroupResponse::SyncGroup(Err(err.clone())));
                                m.session_deadline = now + m.session_timeout;
                            }
                        }
                        self.prepare_rebalance(now, false, cfg, fx);
                    }
                }
            }
            AfterMetadata::StaticJoin { member_id, waiter } => {
                let ok = current && self.members.contains_key(&member_id);
                let resp = match result {
                    Ok(_) if ok => Ok(self.join_response(&member_id, true)),
                    Ok(_) => Err(GroupError::RebalanceInProgress),
                    Err(e) => Err(e.to_group_error()),
                };
                fx.respond(waiter, GroupResponse::JoinGroup(resp));
            }
            AfterMetadata::Nothing => {}
        }
    }

    pub fn tick(&mut self, now: Nanos, cfg: &GroupConfig, fx: &mut Effects) {
        let expired_pending: Vec<MemberId> = self
            .pending_members
            .iter()
            .filter(|(_, d)| now >= **d)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired_pending {
            self.pending_members.remove(&id);
        }
        let expired: Vec<MemberId> = self
            .members
            .values()
            .filter(|m| {
                m.join_waiter.is_none() && m.sync_waiter.is_none() && now >= m.session_deadline
            })
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            tracing::debug!(group = %self.id, member = %id, "session expired");
            crate::probe!(GroupMemberExpired);
            self.member_gone(now, &id, cfg, fx);
        }
        match self.state {
            GroupState::PreparingRebalance => self.maybe_complete_join(now, fx),
            GroupState::CompletingRebalance
                if self.metadata_append.is_none()
                    && self.sync_deadline.is_some_and(|d| now >= d) =>
            {
                // The leader never sent its assignment: drop members that did not sync.
                let lazy: Vec<MemberId> = self
                    .members
                    .values()
                    .filter(|m| m.sync_waiter.is_none())
                    .map(|m| m.id.clone())
                    .collect();
                for id in lazy {
                    self.remove_member(&id);
                }
                self.prepare_rebalance(now, false, cfg, fx);
            }
            _ => {}
        }
    }

    pub fn next_timeout(&self) -> Option<Nanos> {
        let mut t: Option<Nanos> = None;
        let mut add = |x: Option<Nanos>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        add(self.pending_members.values().min().copied());
        add(self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none() && m.sync_waiter.is_none())
            .map(|m| m.session_deadline)
            .min());
        match self.state {
            GroupState::PreparingRebalance => {
                add(self.join_delay_until);
                add(self.join_deadline);
            }
            GroupState::CompletingRebalance if self.metadata_append.is_none() => {
                add(self.sync_deadline)
            }
            _ => {}
        }
        t
    }

    /// Drop every parked response, answering it with `err` (the coordinator is unloading).
    pub fn fail_waiters(&mut self, err: GroupError, fx: &mut Effects) {
        for m in self.members.values_mut() {
            if let Some(w) = m.join_waiter.take() {
                fx.respond(w, GroupResponse::JoinGroup(Err(err.clone())));
            }
            if let Some(w) = m.sync_waiter.take() {
                fx.respond(w, GroupResponse::SyncGroup(Err(err.clone())));
            }
        }
    }
}
