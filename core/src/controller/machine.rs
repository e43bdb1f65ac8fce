//! The controller state machine.
//!
//! Inputs: requests (`step`) and the passage of time (`handle_timeout`). Every state change is a
//! list of [`MetadataRecord`]s computed against a scratch copy of the image, written as one
//! batch to a [`Journal`] (the single controller's durable metadata log, or the quorum's
//! Raft log), and only then applied to the live image; it is answered once committed.
//! Brokers pull the same (committed) records with their heartbeats. Session deadlines are
//! the only state not in the log: they are soft, and restart with a grace period on open
//! (or when a quorum node becomes the active controller).

use super::election::{assign_replicas, elect_leader, Election};
use super::image::{ImageError, MetadataDelta, MetadataImage, PartitionState};
use super::metadata_log::{metadata_log_config, ControllerOpenError, MetadataLog};
use super::record::MetadataRecord;
use super::request::*;
use super::topic_config::{TopicConfig, UncleanRecoveryStrategy};
use super::unclean_recovery::{self, Choice, Rounds};
use crate::bugs::Bugs;
use crate::log::Storage;
use crate::types::{LeaderEpoch, Nanos, NodeId, Offset, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};

/// Controller tunables.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ControllerConfig {
    /// A broker that has not heartbeated for this long is fenced.
    pub session_timeout: Nanos,
    /// After (re)opening, every unfenced broker gets this long to heartbeat before it can be
    /// fenced: while the controller was down nobody could heartbeat.
    pub restart_grace: Nanos,
    /// Most metadata records returned by one heartbeat or metadata fetch.
    pub max_records_per_pull: usize,
    /// Producer ids are reserved durably in blocks of this size.
    pub producer_id_block: u64,
    /// Directory of the metadata log under the storage root.
    pub dir: String,
    /// Segment size of the metadata log.
    pub segment_bytes: u64,
    /// Bug zoo: `no_elr` switches eligible leader replicas (KIP-966) off.
    pub bugs: Bugs,
    /// How long a Balanced unclean recovery waits for every ISR, ELR and last known ELR
    /// member to answer before it decides with the answers it has (KIP-966's
    /// `unclean.recovery.timeout.ms`, 5 min there; shorter here, like the other timeouts).
    pub unclean_recovery_timeout: Nanos,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            session_timeout: 6_000_000_000,
            restart_grace: 6_000_000_000,
            max_records_per_pull: 512,
            producer_id_block: 1000,
            dir: "__cluster_metadata-0".to_string(),
            segment_bytes: 64 << 20,
            bugs: Bugs::default(),
            unclean_recovery_timeout: 10_000_000_000,
        }
    }
}

/// Records computed against a scratch image, not yet durable.
struct Txn {
    image: MetadataImage,
    records: Vec<MetadataRecord>,
    events: Vec<ControllerEvent>,
    /// Replicas whose broker reported the partition offline, or that are shutting down:
    /// never elected.
    offline: BTreeMap<TopicPartition, BTreeSet<NodeId>>,
    /// The bug zoo's elect-out-of-isr (from the config).
    bug_elect_out_of_isr: bool,
    /// Replicas whose log is damaged (reported corrupt): their copy cannot be vouched for,
    /// so once the partition is led they leave the ELR (into the last known ELR).
    failed_logs: BTreeMap<TopicPartition, BTreeSet<NodeId>>,
    /// Track eligible leader replicas (KIP-966); off only with the `no-elr` bug.
    elr_enabled: bool,
}

impl Txn {
    fn push(&mut self, record: MetadataRecord) -> Result<(), ControllerError> {
        self.image.apply(&record).map_err(internal)?;
        self.records.push(record);
        Ok(())
    }

    /// Sets a partition's ISR and leader, bumping the epochs as needed, and maintains its
    /// ELR (see [`Txn::next_elr`]). No-op if nothing changed.
    fn set_partition(
        &mut self,
        tp: &TopicPartition,
        isr: Vec<NodeId>,
        leader: Option<NodeId>,
        unclean: bool,
    ) -> Result<(), ControllerError> {
        let old = self
            .image
            .partition(tp)
            .ok_or_else(|| ControllerError::UnknownPartition { tp: tp.clone() })?
            .clone();
        let isr = in_assignment_order(&old.replicas, &isr);
        let (elr, last_known_elr) = if unclean {
            // Nothing is known about who holds what after an unclean election.
            (Vec::new(), Vec::new())
        } else {
            self.next_elr(tp, &old, &isr, leader.is_some())
        };
        if isr == old.isr
            && leader == old.leader
            && elr == old.elr
            && last_known_elr == old.last_known_elr
        {
            return Ok(());
        }
        crate::sometimes!(IsrBelowMinInsync, {
            let min = self
                .image
                .topic(&tp.topic)
                .map_or(1, |t| usize::from(t.config.min_insync_replicas));
            old.isr.len() >= min && isr.len() < min
        });
        let leader_changed = leader != old.leader;
        let leader_epoch = old.leader_epoch + u32::from(leader_changed);
        if elr != old.elr {
            self.events.push(ControllerEvent::ElrChanged {
                tp: tp.clone(),
                elr: elr.clone(),
            });
        }
        self.push(MetadataRecord::PartitionChanged {
            tp: tp.clone(),
            replicas: old.replicas.clone(),
            isr,
            elr,
            last_known_elr,
            leader,
            leader_epoch,
            partition_epoch: old.partition_epoch + 1,
        })?;
        if leader_changed {
            self.events.push(ControllerEvent::LeaderChanged {
                tp: tp.clone(),
                leader,
                leader_epoch,
            });
        }
        if unclean {
            self.events.push(ControllerEvent::UncleanLeaderElection {
                tp: tp.clone(),
                leader: leader.expect("unclean election elects"),
                leader_epoch,
                previous_isr: old.isr,
            });
        }
        Ok(())
    }

    /// The ELR (and last known ELR) of `tp` once its ISR becomes `isr` (KIP-966): members
    /// leaving the ISR join the ELR while the ISR is below `min.insync.replicas` (the HW
    /// is frozen then, so they keep every committed record); members joining the ISR leave
    /// it; and once the ISR is back at `min.insync.replicas` the HW moves again and both
    /// are cleared. A replica whose log failed is never elected while it is offline; it
    /// leaves the ELR (recorded as last known ELR) once the partition has a leader again,
    /// so its broker may repair it. While leaderless it stays: the failure may be
    /// transient, and it may hold the only readable copy of the committed records.
    fn next_elr(
        &self,
        tp: &TopicPartition,
        old: &PartitionState,
        isr: &[NodeId],
        led: bool,
    ) -> (Vec<NodeId>, Vec<NodeId>) {
        let min_insync = self
            .image
            .topic(&tp.topic)
            .map_or(1, |t| t.config.min_insync_replicas as usize);
        if !self.elr_enabled || isr.len() >= min_insync {
            return (Vec::new(), Vec::new());
        }
        let failed = self.failed_logs.get(tp);
        let is_failed = |b: &NodeId| led && failed.is_some_and(|f| f.contains(b));
        let candidates: Vec<NodeId> = old
            .replicas
            .iter()
            .copied()
            .filter(|b| !isr.contains(b) && (old.elr.contains(b) || old.isr.contains(b)))
            .collect();
        let elr: Vec<NodeId> = candidates
            .iter()
            .copied()
            .filter(|b| !is_failed(b))
            .collect();
        let last_known: Vec<NodeId> = old
            .replicas
            .iter()
            .copied()
            .filter(|b| {
                !isr.contains(b)
                    && !elr.contains(b)
                    && (old.last_known_elr.contains(b) || candidates.contains(b))
            })
            .collect();
        (elr, last_known)
    }

    /// Elects a leader for `tp` given its new ISR and applies the result.
    fn elect(&mut self, tp: &TopicPartition, isr: Vec<NodeId>) -> Result<(), ControllerError> {
        let state = self
            .image
            .partition(tp)
            .ok_or_else(|| ControllerError::UnknownPartition { tp: tp.clone() })?;
        let unclean_ok = self
            .image
            .topic(&tp.topic)
            .is_some_and(|t| t.config.unclean_leader_election);
        // The bug zoo's elect-out-of-isr: unclean election although the topic forbids it,
        // and not reported as one.
        let bug = !unclean_ok && self.bug_elect_out_of_isr;
        let offline = self.offline.get(tp).cloned().unwrap_or_default();
        let elr = state.elr.clone();
        match elect_leader(&self.image, state, &isr, &elr, &offline, unclean_ok || bug) {
            Election::Clean(leader) => {
                crate::probe!(ElectionClean);
                self.set_partition(tp, isr, Some(leader), false)
            }
            // The old ISR members that could not lead join the ELR (next_elr).
            Election::Eligible(leader) => {
                crate::probe!(ElectionEligible);
                self.set_partition(tp, vec![leader], Some(leader), false)
            }
            Election::Unclean(leader) => {
                crate::probe!(ElectionUnclean);
                self.set_partition(tp, vec![leader], Some(leader), !bug)
            }
            Election::Leaderless => {
                crate::probe!(ElectionNoneEligible);
                self.set_partition(tp, isr, None, false)
            }
        }
    }

    /// Fences `broker`: it leaves every ISR (except where it is the last member) and every
    /// leadership it held moves to the next eligible replica.
    fn fence(&mut self, broker: NodeId, reason: FenceReason) -> Result<(), ControllerError> {
        let broker_epoch = match self.image.broker(broker) {
            Some(b) if !b.is_fenced() => b.broker_epoch,
            _ => return Ok(()),
        };
        crate::probe!(BrokerFenced);
        self.push(MetadataRecord::BrokerFenced {
            broker,
            broker_epoch,
        })?;
        self.events
            .push(ControllerEvent::BrokerFenced { broker, reason });
        let affected: Vec<(TopicPartition, PartitionState)> = self
            .image
            .partitions_of_broker(broker)
            .filter(|(_, s)| s.isr.contains(&broker) || s.leader == Some(broker))
            .map(|(tp, s)| (tp, s.clone()))
            .collect();
        for (tp, state) in affected {
            // Kafka keeps the last ISR member even when fenced: removing it would leave no
            // replica known to hold every committed record (see the design doc).
            let isr: Vec<NodeId> = if state.isr.len() > 1 {
                state.isr.iter().copied().filter(|&b| b != broker).collect()
            } else {
                state.isr.clone()
            };
            if state.leader == Some(broker) {
                self.elect(&tp, isr)?;
            } else {
                self.set_partition(&tp, isr, state.leader, false)?;
            }
        }
        Ok(())
    }

    /// `broker` reported `tp` offline (its log failed to open or to read): like fencing,
    /// for that one partition. It leaves the ISR (unless it is the last member: it may be
    /// the only copy of committed records, so the partition stays leaderless instead, until
    /// it reads again or an ELR member is elected) and the ELR, and loses the leadership to
    /// the next eligible replica.
    fn take_offline(&mut self, broker: NodeId, tp: &TopicPartition) -> Result<(), ControllerError> {
        let Some(state) = self.image.partition(tp).cloned() else {
            return Ok(());
        };
        let damaged = self
            .failed_logs
            .get(tp)
            .is_some_and(|f| f.contains(&broker));
        if state.leader == Some(broker)
            && state.recovered_at_epoch == Some(state.leader_epoch)
            && damaged
        {
            // Elected by an unclean recovery for its damaged log: it cuts the damage before
            // it leads, and reports it until it has seen the election.
            return Ok(());
        }
        if state.elr.contains(&broker) {
            // next_elr drops a replica whose log failed (once the partition is led).
            self.set_partition(tp, state.isr.clone(), state.leader, false)?;
        }
        if !state.isr.contains(&broker) && state.leader != Some(broker) {
            return Ok(());
        }
        let isr: Vec<NodeId> = if state.isr.len() > 1 {
            state.isr.iter().copied().filter(|&b| b != broker).collect()
        } else {
            state.isr.clone()
        };
        if state.leader == Some(broker) {
            self.elect(tp, isr)
        } else {
            self.set_partition(tp, isr, state.leader, false)
        }
    }

    /// Elects leaders for every leaderless partition that now has an eligible replica.
    fn elect_leaderless(&mut self) -> Result<(), ControllerError> {
        let leaderless: Vec<(TopicPartition, Vec<NodeId>)> = self
            .image
            .partitions()
            .filter(|(_, s)| s.leader.is_none())
            .map(|(tp, s)| (tp, s.isr.clone()))
            .collect();
        for (tp, isr) in leaderless {
            self.elect(&tp, isr)?;
        }
        Ok(())
    }

    /// Writes the unclean recovery manager's election of `leader` (KIP-966): the ISR
    /// becomes just it, the ELR is cleared, and an `UncleanRecovery` record follows the
    /// partition change so that the leader cuts a damaged log before it leads and the
    /// replicas know records below their HW may be gone.
    fn recover(
        &mut self,
        tp: &TopicPartition,
        leader: NodeId,
        log_end: Offset,
        committed: Offset,
        answers: usize,
    ) -> Result<(), ControllerError> {
        crate::probe!(UncleanRecovery);
        self.set_partition(tp, vec![leader], Some(leader), true)?;
        let leader_epoch = self.image.partition(tp).map_or(0, |s| s.leader_epoch);
        self.push(MetadataRecord::UncleanRecovery {
            tp: tp.clone(),
            leader,
            leader_epoch,
            log_end,
        })?;
        tracing::warn!(%tp, leader, leader_epoch, log_end, committed, answers, "unclean recovery");
        self.events.push(ControllerEvent::UncleanRecovery {
            tp: tp.clone(),
            leader,
            leader_epoch,
            log_end,
            committed,
            answers,
        });
        Ok(())
    }
}

fn internal(e: ImageError) -> ControllerError {
    debug_assert!(false, "controller produced an inapplicable record: {e}");
    ControllerError::Internal {
        reason: e.to_string(),
    }
}

/// `members` sorted by their position in `replicas` (non-replicas dropped).
fn in_assignment_order(replicas: &[NodeId], members: &[NodeId]) -> Vec<NodeId> {
    replicas
        .iter()
        .copied()
        .filter(|r| members.contains(r))
        .collect()
}

fn validate_topic_name(name: &str) -> Result<(), ControllerError> {
    let invalid = |reason: &str| {
        Err(ControllerError::InvalidTopicName {
            name: name.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        return invalid("empty");
    }
    if name.len() > 249 {
        return invalid("longer than 249 characters");
    }
    if name == "." || name == ".." {
        return invalid("'.' and '..' are reserved");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
    {
        return invalid("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// What happened to a decision handed to a [`Journal`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// Durable and final: the single controller's fsynced metadata log.
    Committed,
    /// Proposed, not yet committed: the quorum's Raft log. The records count as decided for
    /// later decisions (they are in the pending image), but nothing depending on them may
    /// be answered before they commit.
    Pending,
}

/// Why a [`Journal`] refused a decision (nothing of it was written).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    /// The storage failed: the controller stops serving until reopened.
    #[error("{0}")]
    Storage(String),
    /// This node is no longer the quorum's leader.
    #[error("not the active controller (leader {leader:?})")]
    NotController { leader: Option<NodeId> },
}

/// Where a controller's decisions go: the one mechanism both the single controller (its
/// metadata log) and the quorum controller (Raft proposals) share. Each call is one
/// decision, one batch, all or nothing.
pub trait Journal {
    /// Writes `records`, which start at metadata offset `first_offset`.
    fn write(
        &mut self,
        first_offset: Offset,
        records: &[MetadataRecord],
        now: Nanos,
    ) -> Result<Written, JournalError>;
}

impl<S: Storage> Journal for MetadataLog<S> {
    fn write(
        &mut self,
        first_offset: Offset,
        records: &[MetadataRecord],
        now: Nanos,
    ) -> Result<Written, JournalError> {
        debug_assert_eq!(self.end_offset(), first_offset);
        self.append(records, now).map_err(JournalError::Storage)?;
        Ok(Written::Committed)
    }
}

/// The single metadata controller. `S` is the storage its metadata log lives on.
pub type Controller<S> = ControllerState<MetadataLog<S>>;

/// The controller logic over a [`Journal`]: [`Controller`] (the single controller, its
/// metadata log) and the quorum controller (`QuorumController`, Raft) are this with
/// different journals. Every state change is a [`Txn`] computed against `image`, written to
/// the journal, then applied to `image` and `records`.
pub struct ControllerState<J> {
    config: ControllerConfig,
    journal: J,
    /// Every record decided, in order: committed ones first (served to pulling brokers),
    /// then, on a quorum leader only, the proposed but uncommitted ones.
    records: Vec<MetadataRecord>,
    /// How many of `records` are committed (all of them for the single controller).
    committed_end: usize,
    /// The image after every record in `records`, so including uncommitted ones on a
    /// quorum leader (KRaft's pending image): decisions build on decisions in flight.
    image: MetadataImage,
    /// Session deadline of each registered broker (the active controller's only).
    sessions: BTreeMap<NodeId, Nanos>,
    /// Unused part of the producer-id block reserved in the log.
    producer_ids: std::ops::Range<u64>,
    outputs: Vec<ControllerOutput>,
    /// Set when the metadata log could not be written; the controller then refuses all
    /// requests, because its image may be ahead of the disk.
    failed: Option<String>,
    /// Partitions each broker reported offline in its latest heartbeat (KIP-112). Not
    /// durable: after a controller restart every broker reports them again within a
    /// heartbeat; the ISR removals they caused are in the metadata log.
    offline: BTreeMap<NodeId, BTreeSet<TopicPartition>>,
    /// The subset of each broker's offline partitions it reported corrupt (not durable,
    /// like `offline`).
    corrupt: BTreeMap<NodeId, BTreeSet<TopicPartition>>,
    /// Brokers in controlled shutdown, with the broker epoch that asked: never elected,
    /// never added to an ISR, until they register with a new incarnation. Not durable:
    /// a broker whose shutdown outlives a controller restart is fenced by its session.
    shutting_down: BTreeMap<NodeId, Offset>,
    /// Unclean recoveries in progress (KIP-966; not durable, like `offline`: a new
    /// active controller asks again).
    recovery: Rounds,
}

impl<S: Storage> Controller<S> {
    /// Opens (or creates) the controller's metadata log and replays it. Every unfenced
    /// broker gets `restart_grace` from `now` before it can be fenced.
    pub fn open(
        storage: S,
        config: ControllerConfig,
        now: Nanos,
    ) -> Result<Self, ControllerOpenError> {
        let log_config = metadata_log_config(config.segment_bytes);
        let (log, records) = MetadataLog::open(storage, &config.dir, log_config)?;
        let image = MetadataImage::from_records(&records)?;
        debug_assert_eq!(log.end_offset(), records.len() as Offset);
        let mut c = ControllerState::new(log, config, records, image);
        c.start_sessions(now);
        Ok(c)
    }

    /// The storage the metadata log lives on.
    pub fn storage(&self) -> &S {
        self.journal.storage()
    }

    /// Stops the controller, returning its storage (every decision is already fsynced).
    pub fn into_storage(self) -> S {
        self.journal.into_storage()
    }
}

impl<J: Journal> ControllerState<J> {
    /// A controller over `journal` whose committed records are `records` (and `image`
    /// their image). No broker sessions yet: see [`ControllerState::start_sessions`].
    pub(crate) fn new(
        journal: J,
        config: ControllerConfig,
        records: Vec<MetadataRecord>,
        image: MetadataImage,
    ) -> Self {
        debug_assert_eq!(image.next_offset, records.len() as Offset);
        Self {
            config,
            journal,
            committed_end: records.len(),
            records,
            image,
            sessions: BTreeMap::new(),
            producer_ids: 0..0,
            outputs: Vec::new(),
            failed: None,
            offline: BTreeMap::new(),
            corrupt: BTreeMap::new(),
            shutting_down: BTreeMap::new(),
            recovery: Rounds::default(),
        }
    }

    /// Becoming the active controller (opening, or winning a quorum election): nobody
    /// could heartbeat to this node before, so every registered broker gets `restart_grace`
    /// from `now` before it can be fenced.
    pub(crate) fn start_sessions(&mut self, now: Nanos) {
        let grace = now.saturating_add(self.config.restart_grace);
        self.sessions = self.image.brokers.keys().map(|&b| (b, grace)).collect();
    }

    /// No longer the active controller: everything not committed is dropped (the image
    /// goes back to `committed` — the image of the committed records — and the pending
    /// records are cut), and so is the soft state only an active controller keeps
    /// (sessions, offline reports, shutdowns, the producer-id block), since the next
    /// active controller rebuilds it from heartbeats.
    pub(crate) fn deactivate(&mut self, committed: MetadataImage) {
        debug_assert_eq!(committed.next_offset, self.committed_end as Offset);
        self.records.truncate(self.committed_end);
        self.image = committed;
        self.sessions.clear();
        self.offline.clear();
        self.corrupt.clear();
        self.shutting_down.clear();
        self.recovery.clear();
        self.producer_ids = 0..0;
    }

    /// Records `batch` as committed. If it is the oldest pending batch (this node proposed
    /// it) it is already in `records` and `image`; otherwise (a follower, or a leader before
    /// it activates) nothing is pending and it is appended and applied here.
    pub(crate) fn apply_committed(&mut self, batch: Vec<MetadataRecord>) -> Result<(), ImageError> {
        let end = self.committed_end + batch.len();
        if self.records.len() > self.committed_end {
            debug_assert!(
                self.records.len() >= end && self.records[self.committed_end..end] == batch[..],
                "a committed batch differs from the batch this node proposed there"
            );
        } else {
            for r in &batch {
                self.image.apply(r)?;
            }
            self.records.extend(batch);
        }
        self.committed_end = end;
        Ok(())
    }

    /// Replaces every record (a Raft snapshot was restored). Only while nothing is pending.
    pub(crate) fn restore(&mut self, records: Vec<MetadataRecord>, image: MetadataImage) {
        debug_assert_eq!(
            self.records.len(),
            self.committed_end,
            "restore while pending"
        );
        debug_assert_eq!(image.next_offset, records.len() as Offset);
        self.committed_end = records.len();
        self.records = records;
        self.image = image;
    }

    /// Stops serving (like a storage failure) for `reason`.
    pub(crate) fn fail(&mut self, reason: String) {
        self.failed = Some(reason);
    }

    pub(crate) fn journal(&self) -> &J {
        &self.journal
    }

    pub(crate) fn journal_mut(&mut self) -> &mut J {
        &mut self.journal
    }

    pub(crate) fn into_journal(self) -> J {
        self.journal
    }

    /// Offset the next committed metadata record will get.
    pub fn committed_end_offset(&self) -> Offset {
        self.committed_end as Offset
    }

    /// The current metadata image: everything decided (for the single controller,
    /// everything durable; on a quorum's active controller, proposed batches included).
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    /// Every committed record, in order.
    pub fn records(&self) -> &[MetadataRecord] {
        &self.records[..self.committed_end]
    }

    /// Offset the next decided metadata record will get.
    pub fn metadata_end_offset(&self) -> Offset {
        self.records.len() as Offset
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// Whether a metadata log write failed (the controller must be reopened).
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Effects produced since the last call, in order.
    pub fn poll_outputs(&mut self) -> Vec<ControllerOutput> {
        std::mem::take(&mut self.outputs)
    }

    /// When `handle_timeout` next has something to do (the earliest session deadline of an unfenced
    /// broker).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if self.failed.is_some() {
            return None;
        }
        let sessions = self
            .sessions
            .iter()
            .filter(|(b, _)| self.image.is_unfenced(**b))
            .map(|(_, &d)| d)
            .min();
        if self.recovery.is_empty() {
            return sessions;
        }
        let recovery = self
            .recovery
            .next_deadline(self.config.unclean_recovery_timeout);
        sessions.into_iter().chain(recovery).min()
    }

    /// Fences every unfenced broker whose session deadline has passed, and decides the
    /// unclean recoveries whose wait is over.
    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.failed.is_some() {
            return;
        }
        if !self.recovery.is_empty() {
            self.run_recovery(now);
        }
        let expired: Vec<NodeId> = self
            .sessions
            .iter()
            .filter(|(b, &d)| d <= now && self.image.is_unfenced(**b))
            .map(|(&b, _)| b)
            .collect();
        if expired.is_empty() {
            return;
        }
        let mut txn = self.begin();
        let result = expired
            .iter()
            .try_for_each(|&b| txn.fence(b, FenceReason::SessionTimeout));
        if let Err(e) = result.and_then(|_| self.commit(txn, now)) {
            tracing::warn!(error = %e, "controller tick failed");
        }
    }

    /// Handles one request from `from`; the reply (and any events) go to the outputs.
    pub fn step(&mut self, now: Nanos, from: Requester, request: ControllerRequest) {
        let response = match (&self.failed, &request) {
            // Metadata reads stay served: the in-memory records are all durable.
            (None, _) | (Some(_), ControllerRequest::FetchMetadata { .. }) => {
                self.dispatch(now, from, request)
            }
            (Some(reason), _) => {
                let e = ControllerError::StorageFailed {
                    reason: reason.clone(),
                };
                failed_response(&request, e)
            }
        };
        self.outputs
            .push(ControllerOutput::Send { to: from, response });
    }

    fn dispatch(
        &mut self,
        now: Nanos,
        from: Requester,
        request: ControllerRequest,
    ) -> ControllerResponse {
        match request {
            ControllerRequest::RegisterBroker {
                broker,
                incarnation,
                offline_partitions,
                corrupt_partitions,
            } => ControllerResponse::RegisterBroker(check_sender(from, broker).and_then(|_| {
                self.note_corrupt(broker, corrupt_partitions);
                self.register(now, broker, incarnation, offline_partitions)
            })),
            ControllerRequest::BrokerHeartbeat {
                broker,
                broker_epoch,
                metadata_offset,
                offline_partitions,
                corrupt_partitions,
                log_info,
            } => ControllerResponse::BrokerHeartbeat(check_sender(from, broker).and_then(|_| {
                self.note_corrupt(broker, corrupt_partitions);
                let reply = self.heartbeat(
                    now,
                    broker,
                    broker_epoch,
                    metadata_offset,
                    offline_partitions,
                )?;
                Ok(self.recovery_step(now, broker, log_info, reply))
            })),
            ControllerRequest::AlterPartition {
                tp,
                leader,
                leader_epoch,
                partition_epoch,
                new_isr,
            } => {
                let result = check_sender(from, leader).and_then(|_| {
                    self.alter_partition(now, &tp, leader, leader_epoch, partition_epoch, new_isr)
                });
                ControllerResponse::AlterPartition { tp, result }
            }
            ControllerRequest::CreateTopic {
                name,
                config,
                assignment,
            } => {
                let result = self.create_topic(now, &name, config, assignment);
                ControllerResponse::CreateTopic { name, result }
            }
            ControllerRequest::DeleteTopic { name } => {
                let result = self.delete_topic(now, &name);
                ControllerResponse::DeleteTopic { name, result }
            }
            ControllerRequest::UpdateTopicConfig { name, config } => {
                let result = self.update_topic_config(now, &name, config);
                ControllerResponse::UpdateTopicConfig { name, result }
            }
            ControllerRequest::ElectPreferredLeaders { partitions } => {
                ControllerResponse::ElectPreferredLeaders {
                    results: self.elect_preferred(now, partitions),
                }
            }
            ControllerRequest::InitProducerId => {
                ControllerResponse::InitProducerId(self.init_producer_id(now))
            }
            ControllerRequest::FetchMetadata { from_offset } => {
                ControllerResponse::Metadata(self.delta_from(from_offset))
            }
            ControllerRequest::ControlledShutdown {
                broker,
                broker_epoch,
            } => ControllerResponse::ControlledShutdown(
                check_sender(from, broker)
                    .and_then(|_| self.controlled_shutdown(now, broker, broker_epoch)),
            ),
        }
    }

    /// A heartbeat's part in unclean recovery: its answers are recorded, the manager
    /// decides, and the reply carries the standing queries for this broker (and any
    /// election just written).
    fn recovery_step(
        &mut self,
        now: Nanos,
        broker: NodeId,
        log_info: Vec<ReplicaLogInfo>,
        mut reply: HeartbeatReply,
    ) -> HeartbeatReply {
        if !log_info.is_empty() {
            self.recovery.answer(broker, log_info);
        }
        let end = self.committed_end_offset();
        self.run_recovery(now);
        if !self.recovery.is_empty() {
            reply.log_info_queries = self.recovery.queries_for(&self.image, broker);
        }
        if self.committed_end_offset() != end {
            reply.metadata = self.delta_from(reply.metadata.from);
        }
        reply
    }

    /// The unclean recovery manager's step (KIP-966): keeps one round per partition that
    /// needs one (`unclean_recovery::needs_recovery`), and writes the elections the
    /// answers decide (`unclean_recovery::choose`). Cheap when every partition is led.
    fn run_recovery(&mut self, now: Nanos) {
        let needed = self.partitions_needing_recovery();
        if needed.is_empty() && self.recovery.is_empty() {
            return;
        }
        self.recovery.sync(needed, now);
        let timeout = self.config.unclean_recovery_timeout;
        let image = &self.image;
        let eligible = |b: NodeId| image.is_unfenced(b) && !self.shutting_down.contains_key(&b);
        let decided: Vec<(TopicPartition, NodeId, Offset, Offset, usize)> = self
            .recovery
            .iter()
            .filter_map(|(tp, round)| {
                let state = image.partition(tp)?;
                let strategy = self.recovery_strategy(tp);
                let bug = self.config.bugs.unclean_shorter_log;
                match unclean_recovery::choose(strategy, state, round, now, timeout, eligible, bug)
                {
                    Choice::Wait => None,
                    Choice::Elect {
                        leader,
                        log_end,
                        committed,
                    } => Some((tp.clone(), leader, log_end, committed, round.answers.len())),
                }
            })
            .collect();
        if decided.is_empty() {
            return;
        }
        let mut txn = self.begin();
        let result = decided
            .iter()
            .try_for_each(|(tp, leader, end, committed, n)| {
                txn.recover(tp, *leader, *end, *committed, *n)
            });
        if let Err(e) = result.and_then(|_| self.commit(txn, now)) {
            tracing::warn!(error = %e, "unclean recovery failed");
            return;
        }
        let led: Vec<(TopicPartition, LeaderEpoch)> = self
            .recovery
            .iter()
            .filter(|(tp, _)| !decided.iter().any(|d| &d.0 == *tp))
            .map(|(tp, r)| (tp.clone(), r.leader_epoch))
            .collect();
        self.recovery.sync(led, now);
    }

    /// Leaderless partitions, at their leader epoch, that need an unclean recovery.
    fn partitions_needing_recovery(&self) -> Vec<(TopicPartition, LeaderEpoch)> {
        let mut needed = Vec::new();
        // Every heartbeat asks: nearly always every partition is led (no allocation then).
        let any_leaderless = self
            .image
            .topics
            .values()
            .any(|t| t.partitions.values().any(|s| s.leader.is_none()));
        if !any_leaderless {
            return needed;
        }
        for (tp, state) in self.image.partitions() {
            if state.leader.is_some() {
                continue;
            }
            let offline = |b: NodeId| {
                self.shutting_down.contains_key(&b)
                    || self.offline.get(&b).is_some_and(|s| s.contains(&tp))
            };
            let can_lead = |b: NodeId| self.image.is_unfenced(b) && !offline(b);
            let corrupt: BTreeSet<NodeId> = self
                .corrupt
                .iter()
                .filter(|(_, tps)| tps.contains(&tp))
                .map(|(&b, _)| b)
                .collect();
            let strategy = self.recovery_strategy(&tp);
            if unclean_recovery::needs_recovery(strategy, state, can_lead, Some(&corrupt)) {
                needed.push((tp, state.leader_epoch));
            }
        }
        needed
    }

    /// The topic's unclean recovery strategy; None where unclean election is enabled (it
    /// elects at once, without the manager) or the `no-elr` bug is on (no ELR to go by).
    fn recovery_strategy(&self, tp: &TopicPartition) -> UncleanRecoveryStrategy {
        match self.image.topic(&tp.topic) {
            Some(t) if !t.config.unclean_leader_election && !self.config.bugs.no_elr => {
                t.config.unclean_recovery_strategy
            }
            _ => UncleanRecoveryStrategy::None,
        }
    }

    fn begin(&self) -> Txn {
        let mut offline: BTreeMap<TopicPartition, BTreeSet<NodeId>> = BTreeMap::new();
        for (&broker, tps) in &self.offline {
            for tp in tps {
                offline.entry(tp.clone()).or_default().insert(broker);
            }
        }
        let mut failed_logs: BTreeMap<TopicPartition, BTreeSet<NodeId>> = BTreeMap::new();
        for (&broker, tps) in &self.corrupt {
            for tp in tps {
                failed_logs.entry(tp.clone()).or_default().insert(broker);
            }
        }
        // A broker in controlled shutdown is as good as offline everywhere: elections
        // (after a fencing, an offline report, ...) must not pick it.
        for &broker in self.shutting_down.keys() {
            for (tp, _) in self.image.partitions_of_broker(broker) {
                offline.entry(tp).or_default().insert(broker);
            }
        }
        Txn {
            image: self.image.clone(),
            records: Vec::new(),
            events: Vec::new(),
            offline,
            bug_elect_out_of_isr: self.config.bugs.elect_out_of_isr,
            failed_logs,
            elr_enabled: !self.config.bugs.no_elr,
        }
    }

    /// Records which of `broker`'s offline partitions are corrupt (see `begin`).
    fn note_corrupt(&mut self, broker: NodeId, corrupt: Vec<TopicPartition>) {
        if corrupt.is_empty() {
            self.corrupt.remove(&broker);
        } else {
            self.corrupt.insert(broker, corrupt.into_iter().collect());
        }
    }

    /// Partitions `broker` reported offline in its latest heartbeat.
    pub fn offline_partitions(&self, broker: NodeId) -> BTreeSet<TopicPartition> {
        self.offline.get(&broker).cloned().unwrap_or_default()
    }

    /// Writes `txn` to the journal, then applies it. If the journal refuses, nothing is
    /// applied; a storage failure stops the controller.
    fn commit(&mut self, txn: Txn, now: Nanos) -> Result<(), ControllerError> {
        if txn.records.is_empty() {
            self.outputs
                .extend(txn.events.into_iter().map(ControllerOutput::Event));
            return Ok(());
        }
        #[cfg(debug_assertions)]
        self.debug_check_decision(&txn.image, &txn.records, &txn.events);
        let first = self.metadata_end_offset();
        match self.journal.write(first, &txn.records, now) {
            Ok(written) => {
                self.records.extend(txn.records);
                if written == Written::Committed {
                    debug_assert_eq!(self.committed_end as Offset, first, "commit behind pending");
                    self.committed_end = self.records.len();
                }
            }
            Err(JournalError::Storage(reason)) => {
                tracing::error!(%reason, "controller metadata log append failed");
                self.failed = Some(reason.clone());
                self.outputs
                    .push(ControllerOutput::Event(ControllerEvent::StorageFailed {
                        reason: reason.clone(),
                    }));
                return Err(ControllerError::StorageFailed { reason });
            }
            Err(JournalError::NotController { leader }) => {
                return Err(ControllerError::NotController { leader })
            }
        }
        self.image = txn.image;
        debug_assert_eq!(self.image.next_offset, self.metadata_end_offset());
        self.outputs
            .extend(txn.events.into_iter().map(ControllerOutput::Event));
        Ok(())
    }

    /// Committed records from `from` on (bounded by `max_records_per_pull`).
    pub(crate) fn delta_from(&self, from: Offset) -> MetadataDelta {
        let end = self.committed_end_offset();
        let records = if from >= end {
            Vec::new()
        } else {
            let start = from as usize;
            let stop = (start + self.config.max_records_per_pull.max(1)).min(end as usize);
            self.records[start..stop].to_vec()
        };
        MetadataDelta {
            from,
            records,
            end_offset: end,
        }
    }

    fn register(
        &mut self,
        now: Nanos,
        broker: NodeId,
        incarnation: u64,
        offline_partitions: Vec<TopicPartition>,
    ) -> Result<BrokerRegistration, ControllerError> {
        let offline: BTreeSet<TopicPartition> = offline_partitions.into_iter().collect();
        if offline.is_empty() {
            self.offline.remove(&broker);
        } else {
            self.offline.insert(broker, offline.clone());
        }
        let mut txn = self.begin();
        for tp in &offline {
            txn.take_offline(broker, tp)?;
        }
        match self.image.broker(broker) {
            // A retry of the current registration: just make sure it is unfenced.
            Some(info) if info.incarnation == incarnation => {
                if info.is_fenced() {
                    txn.push(MetadataRecord::BrokerUnfenced {
                        broker,
                        broker_epoch: info.broker_epoch,
                    })?;
                    txn.events.push(ControllerEvent::BrokerUnfenced { broker });
                }
            }
            existing => {
                // A new process: whatever the old one claimed (ISR membership, leadership)
                // may not have survived the restart, so it is fenced first.
                self.shutting_down.remove(&broker);
                txn.offline.values_mut().for_each(|b| {
                    b.remove(&broker);
                });
                for tp in &offline {
                    txn.offline.entry(tp.clone()).or_default().insert(broker);
                }
                if existing.is_some() {
                    txn.fence(broker, FenceReason::Restarted)?;
                }
                txn.push(MetadataRecord::BrokerRegistered {
                    broker,
                    incarnation,
                })?;
                txn.events.push(ControllerEvent::BrokerRegistered {
                    broker,
                    broker_epoch: txn.image.next_offset - 1,
                });
            }
        }
        txn.elect_leaderless()?;
        let broker_epoch = txn.image.broker(broker).expect("registered").broker_epoch;
        self.commit(txn, now)?;
        self.sessions
            .insert(broker, now.saturating_add(self.config.session_timeout));
        Ok(BrokerRegistration {
            broker,
            broker_epoch,
        })
    }

    fn heartbeat(
        &mut self,
        now: Nanos,
        broker: NodeId,
        broker_epoch: Offset,
        metadata_offset: Offset,
        offline_partitions: Vec<TopicPartition>,
    ) -> Result<HeartbeatReply, ControllerError> {
        let info = self
            .image
            .broker(broker)
            .ok_or(ControllerError::UnknownBroker { broker })?
            .clone();
        if info.broker_epoch != broker_epoch {
            return Err(ControllerError::StaleBrokerEpoch {
                broker,
                current: info.broker_epoch,
                got: broker_epoch,
            });
        }
        self.sessions
            .insert(broker, now.saturating_add(self.config.session_timeout));
        // Offline partitions first, so that unfencing below never elects this broker for
        // one of them. The set replaces the last one: a repaired partition is eligible again.
        let offline: BTreeSet<TopicPartition> = offline_partitions.into_iter().collect();
        let previous = if offline.is_empty() {
            self.offline.remove(&broker)
        } else {
            self.offline.insert(broker, offline.clone())
        };
        let back_online = previous.is_some_and(|p| p.iter().any(|tp| !offline.contains(tp)));
        let mut txn = self.begin();
        for tp in &offline {
            txn.take_offline(broker, tp)?;
        }
        if back_online {
            // A partition left leaderless because its last ISR member was offline here
            // can be led again.
            txn.elect_leaderless()?;
        }
        // A fenced broker is unfenced once it has seen its own fencing record, so it has
        // learned of every leadership and ISR membership it lost.
        if let super::image::BrokerState::Fenced { since } = info.state {
            if metadata_offset > since {
                txn.push(MetadataRecord::BrokerUnfenced {
                    broker,
                    broker_epoch,
                })?;
                txn.events.push(ControllerEvent::BrokerUnfenced { broker });
                txn.elect_leaderless()?;
            }
        }
        if !txn.records.is_empty() || !txn.events.is_empty() {
            self.commit(txn, now)?;
        }
        Ok(HeartbeatReply {
            broker,
            broker_epoch,
            fenced: !self.image.is_unfenced(broker),
            metadata: self.delta_from(metadata_offset),
            log_info_queries: Vec::new(),
        })
    }

    fn alter_partition(
        &mut self,
        now: Nanos,
        tp: &TopicPartition,
        leader: NodeId,
        leader_epoch: u32,
        partition_epoch: u32,
        new_isr: Vec<NodeId>,
    ) -> Result<PartitionState, ControllerError> {
        let state = self
            .image
            .partition(tp)
            .ok_or_else(|| self.unknown(tp))?
            .clone();
        if state.leader != Some(leader) || state.leader_epoch != leader_epoch {
            return Err(ControllerError::FencedLeaderEpoch {
                tp: tp.clone(),
                broker: leader,
                leader_epoch,
                current_leader: state.leader,
                current_epoch: state.leader_epoch,
            });
        }
        let isr = in_assignment_order(&state.replicas, &new_isr);
        if state.partition_epoch != partition_epoch {
            // A retry whose first attempt was applied (reply lost): same leader epoch and
            // the ISR it asked for is the current one, so it can be told the outcome.
            if isr == state.isr && isr.len() == new_isr.len() {
                return Ok(state);
            }
            return Err(ControllerError::InvalidUpdateVersion {
                tp: tp.clone(),
                current: state.partition_epoch,
                got: partition_epoch,
            });
        }
        let invalid = |reason: String| ControllerError::InvalidIsr {
            tp: tp.clone(),
            isr: new_isr.clone(),
            reason,
        };
        let distinct: BTreeSet<NodeId> = new_isr.iter().copied().collect();
        if distinct.len() != new_isr.len() {
            return Err(invalid("duplicate members".into()));
        }
        if let Some(b) = new_isr.iter().find(|b| !state.replicas.contains(b)) {
            return Err(invalid(format!("broker {b} is not a replica")));
        }
        if !new_isr.contains(&leader) {
            return Err(invalid("the leader must stay in the ISR".into()));
        }
        let offline = |b: NodeId| {
            self.offline.get(&b).is_some_and(|tps| tps.contains(tp))
                || self.shutting_down.contains_key(&b)
        };
        if let Some(&b) = new_isr
            .iter()
            .find(|&&b| !state.isr.contains(&b) && (!self.image.is_unfenced(b) || offline(b)))
        {
            return Err(ControllerError::IneligibleReplica {
                tp: tp.clone(),
                broker: b,
            });
        }
        let mut txn = self.begin();
        txn.set_partition(tp, isr, Some(leader), false)?;
        self.commit(txn, now)?;
        Ok(self.image.partition(tp).expect("still exists").clone())
    }

    /// Moves `broker`'s leaderships to other live ISR members (clean elections only) and
    /// takes it out of every ISR it shares with a leader elsewhere.
    fn controlled_shutdown(
        &mut self,
        now: Nanos,
        broker: NodeId,
        broker_epoch: Offset,
    ) -> Result<ControlledShutdownReply, ControllerError> {
        let info = self
            .image
            .broker(broker)
            .ok_or(ControllerError::UnknownBroker { broker })?;
        if info.broker_epoch != broker_epoch {
            return Err(ControllerError::StaleBrokerEpoch {
                broker,
                current: info.broker_epoch,
                got: broker_epoch,
            });
        }
        self.shutting_down.insert(broker, broker_epoch);
        let mut txn = self.begin();
        let affected: Vec<(TopicPartition, PartitionState)> = txn
            .image
            .partitions_of_broker(broker)
            .filter(|(_, s)| s.isr.contains(&broker) || s.leader == Some(broker))
            .map(|(tp, s)| (tp, s.clone()))
            .collect();
        let mut moved = Vec::new();
        let mut remaining = Vec::new();
        for (tp, state) in affected {
            let isr: Vec<NodeId> = state.isr.iter().copied().filter(|&b| b != broker).collect();
            if state.leader != Some(broker) {
                // A follower in the ISR: the leader is another member, so the ISR keeps it.
                if !isr.is_empty() {
                    txn.set_partition(&tp, isr, state.leader, false)?;
                }
                continue;
            }
            let offline = txn.offline.get(&tp).cloned().unwrap_or_default();
            match elect_leader(&txn.image, &state, &isr, &[], &offline, false) {
                Election::Clean(leader) => {
                    txn.set_partition(&tp, isr, Some(leader), false)?;
                    moved.push(tp);
                }
                // Only this broker holds every committed record: it leads until it stops.
                _ => remaining.push(tp),
            }
        }
        txn.events.push(ControllerEvent::ControlledShutdown {
            broker,
            moved,
            remaining: remaining.clone(),
        });
        self.commit(txn, now)?;
        Ok(ControlledShutdownReply {
            broker,
            remaining,
            metadata_offset: self.metadata_end_offset(),
        })
    }

    fn unknown(&self, tp: &TopicPartition) -> ControllerError {
        if self.image.topic(&tp.topic).is_none() {
            ControllerError::UnknownTopic {
                topic: tp.topic.clone(),
            }
        } else {
            ControllerError::UnknownPartition { tp: tp.clone() }
        }
    }

    fn create_topic(
        &mut self,
        now: Nanos,
        name: &str,
        config: TopicConfig,
        assignment: Option<Vec<Vec<NodeId>>>,
    ) -> Result<u64, ControllerError> {
        validate_topic_name(name)?;
        if self.image.topic(name).is_some() {
            return Err(ControllerError::TopicAlreadyExists {
                topic: name.to_string(),
            });
        }
        config
            .validate()
            .map_err(|reason| ControllerError::InvalidConfig { reason })?;
        let topic_id = self.image.next_topic_id;
        let rf = config.replication_factor as usize;
        let assignment = match assignment {
            Some(a) => {
                self.validate_assignment(&config, &a)?;
                a
            }
            None => {
                let live = self.image.unfenced_brokers();
                if live.len() < rf {
                    return Err(ControllerError::InsufficientBrokers {
                        needed: rf,
                        available: live.len(),
                    });
                }
                let start = (topic_id % live.len() as u64) as usize;
                assign_replicas(&live, config.partitions, rf, start)
            }
        };
        let mut txn = self.begin();
        txn.push(MetadataRecord::TopicCreated {
            name: name.to_string(),
            topic_id,
            config,
        })?;
        for (p, replicas) in assignment.into_iter().enumerate() {
            // The live replicas start in sync (validate_assignment made sure there is one).
            let isr: Vec<NodeId> = replicas
                .iter()
                .copied()
                .filter(|&b| txn.image.is_unfenced(b))
                .collect();
            let leader = isr.first().copied();
            txn.push(MetadataRecord::PartitionChanged {
                tp: TopicPartition::new(name, p as u32),
                replicas,
                isr,
                elr: Vec::new(),
                last_known_elr: Vec::new(),
                leader,
                leader_epoch: 0,
                partition_epoch: 0,
            })?;
        }
        self.commit(txn, now)?;
        Ok(topic_id)
    }

    fn validate_assignment(
        &self,
        config: &TopicConfig,
        assignment: &[Vec<NodeId>],
    ) -> Result<(), ControllerError> {
        let invalid = |reason: String| Err(ControllerError::InvalidAssignment { reason });
        if assignment.len() != config.partitions as usize {
            return invalid(format!(
                "{} replica lists for {} partitions",
                assignment.len(),
                config.partitions
            ));
        }
        for (p, replicas) in assignment.iter().enumerate() {
            if replicas.len() != config.replication_factor as usize {
                return invalid(format!(
                    "partition {p} has {} replicas, replication factor is {}",
                    replicas.len(),
                    config.replication_factor
                ));
            }
            let distinct: BTreeSet<_> = replicas.iter().collect();
            if distinct.len() != replicas.len() {
                return invalid(format!("partition {p} repeats a replica"));
            }
            if let Some(b) = replicas.iter().find(|b| self.image.broker(**b).is_none()) {
                return invalid(format!("partition {p}: broker {b} is not registered"));
            }
            // As in Kafka: a partition must start with a live replica to lead it.
            if !replicas.iter().any(|&b| self.image.is_unfenced(b)) {
                return invalid(format!("partition {p}: every assigned broker is fenced"));
            }
        }
        Ok(())
    }

    fn delete_topic(&mut self, now: Nanos, name: &str) -> Result<(), ControllerError> {
        let topic_id = self
            .image
            .topic(name)
            .ok_or_else(|| ControllerError::UnknownTopic {
                topic: name.to_string(),
            })?
            .topic_id;
        let mut txn = self.begin();
        txn.push(MetadataRecord::TopicDeleted {
            name: name.to_string(),
            topic_id,
        })?;
        self.commit(txn, now)
    }

    fn update_topic_config(
        &mut self,
        now: Nanos,
        name: &str,
        config: TopicConfig,
    ) -> Result<(), ControllerError> {
        let topic = self
            .image
            .topic(name)
            .ok_or_else(|| ControllerError::UnknownTopic {
                topic: name.to_string(),
            })?;
        config
            .validate()
            .map_err(|reason| ControllerError::InvalidConfig { reason })?;
        if config.partitions != topic.config.partitions
            || config.replication_factor != topic.config.replication_factor
        {
            return Err(ControllerError::InvalidConfig {
                reason: "partition count and replication factor cannot change".into(),
            });
        }
        if config == topic.config {
            return Ok(());
        }
        let topic_id = topic.topic_id;
        let mut txn = self.begin();
        txn.push(MetadataRecord::TopicConfigChanged {
            name: name.to_string(),
            topic_id,
            config,
        })?;
        // Enabling unclean election may unblock leaderless partitions right away.
        txn.elect_leaderless()?;
        self.commit(txn, now)
    }

    fn elect_preferred(
        &mut self,
        now: Nanos,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Vec<(TopicPartition, Result<NodeId, ControllerError>)> {
        let tps: Vec<TopicPartition> =
            partitions.unwrap_or_else(|| self.image.partitions().map(|(tp, _)| tp).collect());
        let mut txn = self.begin();
        let mut results = Vec::new();
        for tp in tps {
            let result = match txn.image.partition(&tp).cloned() {
                None => Err(self.unknown(&tp)),
                Some(state) => {
                    let preferred = state.replicas[0];
                    if state.leader == Some(preferred) {
                        Err(ControllerError::ElectionNotNeeded {
                            tp: tp.clone(),
                            leader: preferred,
                        })
                    } else if state.isr.contains(&preferred) && txn.image.is_unfenced(preferred) {
                        txn.set_partition(&tp, state.isr.clone(), Some(preferred), false)
                            .map(|_| preferred)
                    } else {
                        Err(ControllerError::PreferredLeaderNotAvailable {
                            tp: tp.clone(),
                            preferred,
                        })
                    }
                }
            };
            results.push((tp, result));
        }
        if let Err(e) = self.commit(txn, now) {
            for (_, r) in results.iter_mut() {
                if r.is_ok() {
                    *r = Err(e.clone());
                }
            }
        }
        results
    }

    fn init_producer_id(&mut self, now: Nanos) -> Result<ProducerIdAndEpoch, ControllerError> {
        if self.producer_ids.is_empty() {
            let first = self.image.next_producer_id;
            let count = self.config.producer_id_block.max(1);
            if first.checked_add(count).is_none() {
                return Err(ControllerError::ProducerIdsExhausted);
            }
            let mut txn = self.begin();
            txn.push(MetadataRecord::ProducerIdsAllocated { first, count })?;
            self.commit(txn, now)?;
            self.producer_ids = first..first + count;
        }
        let producer_id = self.producer_ids.next().expect("block is not empty");
        Ok(ProducerIdAndEpoch {
            producer_id,
            producer_epoch: 0,
        })
    }
}

fn check_sender(from: Requester, broker: NodeId) -> Result<(), ControllerError> {
    match from {
        Requester::Broker(b) if b == broker => Ok(()),
        other => Err(ControllerError::InvalidRequest {
            reason: format!("request for broker {broker} sent by {other:?}"),
        }),
    }
}

/// The error reply to `request` when the controller cannot serve at all (never used for
/// `FetchMetadata`, which is always served).
pub(crate) fn failed_response(
    request: &ControllerRequest,
    e: ControllerError,
) -> ControllerResponse {
    match request {
        ControllerRequest::RegisterBroker { .. } => ControllerResponse::RegisterBroker(Err(e)),
        ControllerRequest::BrokerHeartbeat { .. } => ControllerResponse::BrokerHeartbeat(Err(e)),
        ControllerRequest::AlterPartition { tp, .. } => ControllerResponse::AlterPartition {
            tp: tp.clone(),
            result: Err(e),
        },
        ControllerRequest::CreateTopic { name, .. } => ControllerResponse::CreateTopic {
            name: name.clone(),
            result: Err(e),
        },
        ControllerRequest::DeleteTopic { name } => ControllerResponse::DeleteTopic {
            name: name.clone(),
            result: Err(e),
        },
        ControllerRequest::UpdateTopicConfig { name, .. } => {
            ControllerResponse::UpdateTopicConfig {
                name: name.clone(),
                result: Err(e),
            }
        }
        ControllerRequest::ElectPreferredLeaders { partitions } => {
            ControllerResponse::ElectPreferredLeaders {
                results: partitions
                    .iter()
                    .flatten()
                    .map(|tp| (tp.clone(), Err(e.clone())))
                    .collect(),
            }
        }
        ControllerRequest::InitProducerId | ControllerRequest::FetchMetadata { .. } => {
            ControllerResponse::InitProducerId(Err(e))
        }
        ControllerRequest::ControlledShutdown { .. } => {
            ControllerResponse::ControlledShutdown(Err(e))
        }
    }
}
