//! A Skein broker: hosts the partition replicas its metadata image assigns to it, as one
//! sans-I/O state machine.
//!
//! Data flow: the driver delivers messages ([`Broker::step`]) and time
//! ([`Broker::handle_timeout`]); the broker routes fetches, produce and consumer requests to its
//! [`Replica`]s, pulls metadata from the controller with heartbeats (each reply carries the
//! metadata records it has not seen), applies them to its [`MetadataImage`] and turns each
//! partition's state into leader/follower transitions. Everything the broker wants done —
//! messages to send, events worth tracing — is collected with [`Broker::poll_outputs`].
//! Logs live on the given [`Storage`]; crash recovery happens in `PartitionLog::open`.
//! The broker also hosts the consumer-group coordinators of the `__consumer_offsets`
//! partitions it leads (`groups.rs`): their group records travel the same acks=all
//! produce path as client writes, and they load from the log once caught up.

use crate::controller::{
    ControllerError, ControllerRequest, ControllerResponse, HeartbeatReply, MetadataImage,
    PartitionState, ReplicaLogInfo,
};
use crate::group::{GroupConfig, CONSUMER_OFFSETS_TOPIC};
use crate::log::{LogConfig, LogError, PartitionLog, RecordBatch, RecoverySummary, Storage};
use crate::message::*;
use crate::node::NodeOutput;
use crate::replica::{
    AlterOutcome, Event, IsrProposal, MarkerJournal, Repair, Replica, ReplicaConfig, ReplicaEffect,
    ReplicaLog, ReplicaView,
};
use crate::types::{LeaderEpoch, Nanos, NodeId, Offset, TopicPartition};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use crate::bugs::Bugs;
pub use crate::replica::ReplicaRole;

/// Broker tunables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerConfig {
    pub log: LogConfig,
    /// A follower that has not caught up for this long leaves the ISR.
    pub replica_lag_time_max: Nanos,
    pub fetch_max_bytes: usize,
    /// Follower wait after an empty fetch or an error.
    pub fetch_backoff: Nanos,
    /// Long poll: how long a leader may hold a fetch that has nothing new.
    pub fetch_max_wait: Nanos,
    /// A fetch without answer for this long is resent.
    pub fetch_timeout: Nanos,
    pub alter_partition_retry: Nanos,
    /// Leader fsync delay after an append (0: fsync right away).
    pub flush_interval: Nanos,
    /// Heartbeat (and metadata pull) period.
    pub heartbeat_interval: Nanos,
    /// Registration / heartbeat without an answer for this long is resent (to the next
    /// controller of the quorum).
    pub controller_timeout: Nanos,
    /// The controller quorum's voters (controller ids). Requests go to the one this broker
    /// believes active; `NotController` with a leader hint, or a timeout, moves it to the
    /// hinted or the next one (KIP-631). A single controller is the quorum `[1]`.
    pub controllers: Vec<NodeId>,
    /// Session lease: a broker whose heartbeats have not been answered (unfenced) for this
    /// long, counted from the sending of the oldest one since the last answer, is cut off
    /// from the active controller, which fences it once its own session timeout (at least
    /// this long) lapses. It then stops acknowledging produce requests and stops taking
    /// writes as leader until a heartbeat gets through again. `None`: off (a broker goes on
    /// leading while cut off; acks=all writes stay safe through the ISR, acks=1 do not).
    pub session_timeout: Option<Nanos>,
    /// How often retention runs on every hosted log.
    pub retention_check_interval: Nanos,
    /// How often the log cleaner runs on every hosted compacted log (no timer at all while
    /// none is hosted), and how many bounded steps ([`crate::log::Cleaner::step`]: one
    /// batch read or written, or one segment swapped) it takes per log each time.
    pub cleaner_interval: Nanos,
    pub cleaner_steps_per_tick: usize,
    /// The wall clock (ms since the Unix epoch) at `now` = 0, added to `now` where it is
    /// compared with record timestamps (time-based retention, the cleaner's
    /// `min.compaction.lag.ms` and tombstone horizons): a real node's `now` counts from its start while producers
    /// stamp records with the wall clock. 0 in the simulator, whose clock is its epoch.
    pub wall_clock_at_zero_ms: i64,
    /// How often the hosted partitions' high watermarks are written to `hw.checkpoint`
    /// (when they changed). A restarted replica starts from its checkpointed HW.
    pub hw_checkpoint_interval: Nanos,
    /// `__consumer_offsets` as this broker asks the controller to create it (on the first
    /// FindCoordinator when it does not exist).
    pub offsets_topic_partitions: u32,
    pub offsets_topic_replication_factor: u16,
    pub offsets_topic_min_insync_replicas: u16,
    /// How long a coordinator's acks=all append may wait for replication.
    pub group_append_timeout: Nanos,
    /// Tunables of the hosted group coordinators.
    pub group: GroupConfig,
    /// `__transaction_state` as this broker asks the controller to create it (on the first
    /// FindCoordinator for a transactional id when it does not exist).
    pub transaction_state_topic_partitions: u32,
    pub transaction_state_topic_replication_factor: u16,
    pub transaction_state_topic_min_insync_replicas: u16,
    /// Tunables of the hosted transaction coordinators (`transaction.max.timeout.ms`,
    /// marker retries); their bug switches come from `bugs.txn`.
    pub txn: crate::txn::TxnConfig,
    /// How often an offline partition's log is read (or opened) again, in case the
    /// failure was transient.
    pub log_recheck_interval: Nanos,
    pub bugs: Bugs,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        let r = ReplicaConfig::default();
        Self {
            log: LogConfig::default(),
            replica_lag_time_max: r.replica_lag_time_max,
            fetch_max_bytes: r.fetch_max_bytes,
            fetch_backoff: r.fetch_backoff,
            fetch_max_wait: r.fetch_max_wait,
            fetch_timeout: r.fetch_timeout,
            alter_partition_retry: r.alter_partition_retry,
            flush_interval: r.flush_interval,
            heartbeat_interval: 500_000_000,
            controller_timeout: 1_000_000_000,
            controllers: vec![1],
            session_timeout: None,
            retention_check_interval: 60_000_000_000,
            cleaner_interval: 1_000_000_000,
            cleaner_steps_per_tick: 256,
            wall_clock_at_zero_ms: 0,
            hw_checkpoint_interval: 1_000_000_000,
            offsets_topic_partitions: 8,
            offsets_topic_replication_factor: 3,
            offsets_topic_min_insync_replicas: 2,
            group_append_timeout: 5_000_000_000,
            group: GroupConfig::default(),
            transaction_state_topic_partitions: 8,
            transaction_state_topic_replication_factor: 3,
            transaction_state_topic_min_insync_replicas: 2,
            txn: crate::txn::TxnConfig::default(),
            log_recheck_interval: r.log_recheck_interval,
            bugs: Bugs::default(),
        }
    }
}

impl BrokerConfig {
    fn replica_config(&self, min_insync_replicas: usize) -> ReplicaConfig {
        ReplicaConfig {
            replica_lag_time_max: self.replica_lag_time_max,
            min_insync_replicas,
            fetch_max_bytes: self.fetch_max_bytes,
            fetch_backoff: self.fetch_backoff,
            fetch_max_wait: self.fetch_max_wait,
            fetch_timeout: self.fetch_timeout,
            alter_partition_retry: self.alter_partition_retry,
            flush_interval: self.flush_interval,
            log_recheck_interval: self.log_recheck_interval,
            unclean_leader_election: false,
            bugs: self.bugs,
        }
    }
}

/// Broker-level events worth tracing.
#[derive(Clone, Debug, PartialEq)]
pub enum BrokerEvent {
    Replica(Event),
    Registered {
        broker_epoch: Offset,
    },
    /// The metadata image now includes records below `offset`.
    MetadataApplied {
        offset: Offset,
    },
    /// A metadata delta could not be applied (the image is unchanged).
    MetadataError {
        error: String,
    },
    /// A partition log was opened (and recovered). The summary is boxed: inline it made
    /// every broker output (each message it sends is one) a 216-byte value.
    LogOpened {
        tp: TopicPartition,
        summary: Box<RecoverySummary>,
    },
    /// A partition log could not be opened; the partition stays unavailable here.
    LogOpenFailed {
        tp: TopicPartition,
        error: String,
    },
    /// A partition was removed from this broker (topic deleted or reassigned).
    PartitionRemoved {
        tp: TopicPartition,
    },
    /// An offline partition's log was cut at its first unreadable batch (or, if that
    /// failed, dropped), to be fetched again from the leader (it was out of the ISR and
    /// the ELR, so it held nothing the partition needs).
    PartitionRepaired {
        tp: TopicPartition,
    },
    /// A group's commit became durable at the coordinator hosted here (at the
    /// `__consumer_offsets` leader epoch `coordinator_epoch`): these are now its committed
    /// offsets, in log order. For observers (the simulator's group checks, traces).
    OffsetsCommitted {
        group: String,
        coordinator_epoch: LeaderEpoch,
        offsets: Vec<(TopicPartition, Offset)>,
    },
    /// Controlled shutdown: the leaderships that could move have moved (the image shows
    /// it); `remaining` are led here still (this broker is their only ISR member).
    ReadyToStop {
        remaining: Vec<TopicPartition>,
    },
}

/// Why a broker could not start or serve a view request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
    #[error("broker state file {path}: {reason}")]
    Meta { path: String, reason: String },
    #[error("{tp}: not hosted on this broker")]
    UnknownPartition { tp: TopicPartition },
    #[error("{tp}: log error: {reason}")]
    Log { tp: TopicPartition, reason: String },
}

/// Durable broker state: its incarnation counter and the partitions it hosts (so a
/// restarted broker reopens and recovers its logs before metadata arrives).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct BrokerMeta {
    incarnation: u64,
    /// Hosted partitions with their topic id.
    partitions: Vec<(TopicPartition, u64)>,
}

const META_PATH: &str = "broker.meta";
const HW_PATH: &str = "hw.checkpoint";

/// `hw.checkpoint`: (partition, topic id, high watermark) of every hosted partition.
type HwCheckpoint = Vec<(TopicPartition, u64, Offset)>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Registration {
    Unregistered { sent_at: Option<Nanos> },
    Registered { broker_epoch: Offset },
}

/// A broker hosting partition replicas.
pub struct Broker<S: Storage + Clone> {
    id: NodeId,
    config: BrokerConfig,
    storage: S,
    incarnation: u64,
    registration: Registration,
    fenced: bool,
    image: MetadataImage,
    heartbeat_sent_at: Option<Nanos>,
    heartbeat_in_flight: bool,
    /// The unclean recovery manager's standing query (the last heartbeat reply's): each
    /// heartbeat answers it from the replicas (`log_info`).
    log_info_queries: Vec<(TopicPartition, LeaderEpoch)>,
    /// The controller this broker believes active (one of `config.controllers`).
    controller: NodeId,
    /// When the oldest heartbeat sent since the last answered one left: an answer starts
    /// the session lease from there (the controller saw it no earlier).
    lease_from: Option<Nanos>,
    /// With `config.session_timeout`: acknowledgements are allowed until then.
    lease_until: Option<Nanos>,
    /// The session lease lapsed (as of the last `handle` / `tick`): no produce is taken or
    /// acknowledged.
    lapsed: bool,
    next_retention: Nanos,
    /// The log cleaners of the hosted compacted partitions (docs/compaction.md).
    cleaners: BTreeMap<TopicPartition, crate::log::Cleaner>,
    next_clean: Nanos,
    next_hw_checkpoint: Nanos,
    last_hw_checkpoint: HwCheckpoint,
    replicas: ReplicaSet<Replica<PartitionLog<S>>>,
    /// Topic id of each hosted partition: part of its directory name, so data of a
    /// deleted topic is never mistaken for a re-created one of the same name.
    topic_ids: BTreeMap<TopicPartition, u64>,
    /// Partitions whose log failed to open, with the error.
    failed: BTreeMap<TopicPartition, String>,
    /// The subset of `failed` whose log is damaged (opening it met a corrupt batch), as
    /// opposed to one closed or refused by a storage failure (a full disk, an I/O error),
    /// which comes back whole when reopened and so must never be dropped (seed 3867: a
    /// leader's log closed on a full disk was treated as damaged and deleted, though it
    /// held the only intact copy of a batch a bit flip had damaged on the new leader).
    damaged: BTreeSet<TopicPartition>,
    /// For each log of `damaged` that refused to open: the offset of the corrupt batch its
    /// recovery met, the HW last checkpointed for it (kept in later checkpoints) and its
    /// topic id. What it answers the unclean recovery manager, since it cannot be read.
    damaged_ends: BTreeMap<TopicPartition, (Offset, Offset, u64)>,
    /// For each partition an unclean recovery (KIP-966) elected this broker to lead: the
    /// leader epoch and the log end the manager chose it for (from the `UncleanRecovery`
    /// records seen). Cutting the log below that end for damage found later would drop
    /// records the choice counted on (see `cut_for_recovery`).
    recovery_ends: BTreeMap<TopicPartition, (LeaderEpoch, Offset)>,
    /// Group coordinators of the `__consumer_offsets` partitions led here.
    groups: groups::GroupHost,
    /// Transactional produces held for verification, markers waiting for the HW.
    txn_partition: txn_partition::TxnPartitionHost,
    /// Transaction coordinators of the `__transaction_state` partitions led here.
    txns: txns::TxnHost,
    /// Offline partitions as last sent in a heartbeat: a change triggers one at once.
    reported_offline: BTreeSet<TopicPartition>,
    /// Next retry of the logs that failed to open.
    next_open_retry: Nanos,
    /// The controller's metadata end offset as last heard: the image is caught up when
    /// it reaches it (only a caught-up image is acted on).
    metadata_end: Offset,
    /// Set by `begin_controlled_shutdown`.
    shutdown: Option<shutdown::ShutdownPhase>,
    outputs: Vec<NodeOutput>,
}

/// `<topic>-<partition>.<topic id>`.
pub fn partition_dir(tp: &TopicPartition, topic_id: u64) -> String {
    format!("{}-{}.{}", tp.topic, tp.partition, topic_id)
}

impl<S: Storage + Clone> Broker<S> {
    /// Start a broker process: bump the durable incarnation, reopen (and recover) every
    /// log it hosted, and ask the controller to register it.
    pub fn open(
        id: NodeId,
        config: BrokerConfig,
        mut storage: S,
        now: Nanos,
    ) -> Result<(Self, Vec<(TopicPartition, RecoverySummary)>), BrokerError> {
        let meta_err = |reason: String| BrokerError::Meta {
            path: META_PATH.into(),
            reason,
        };
        let mut meta: BrokerMeta = if storage.exists(META_PATH) {
            let bytes = storage
                .read_all(META_PATH)
                .map_err(|e| meta_err(e.to_string()))?;
            bincode::deserialize(&bytes).map_err(|e| meta_err(format!("corrupt: {e}")))?
        } else {
            BrokerMeta::default()
        };
        meta.incarnation += 1;
        let bytes = bincode::serialize(&meta).map_err(|e| meta_err(e.to_string()))?;
        storage
            .write_atomic(META_PATH, &bytes)
            .map_err(|e| meta_err(e.to_string()))?;
        let controller = config.controllers.first().copied().unwrap_or(1);
        let lapsed = config.session_timeout.is_some();
        let mut broker = Self {
            id,
            config,
            storage,
            incarnation: meta.incarnation,
            registration: Registration::Unregistered { sent_at: None },
            fenced: true,
            image: MetadataImage::new(),
            heartbeat_sent_at: None,
            heartbeat_in_flight: false,
            log_info_queries: Vec::new(),
            controller,
            lease_from: None,
            lease_until: None,
            lapsed,
            next_retention: now,
            cleaners: BTreeMap::new(),
            next_clean: now,
            next_hw_checkpoint: now,
            last_hw_checkpoint: Vec::new(),
            replicas: ReplicaSet::new(),
            topic_ids: BTreeMap::new(),
            failed: BTreeMap::new(),
            damaged: BTreeSet::new(),
            damaged_ends: BTreeMap::new(),
            recovery_ends: BTreeMap::new(),
            groups: groups::GroupHost::default(),
            txn_partition: Default::default(),
            txns: txns::TxnHost::default(),
            reported_offline: BTreeSet::new(),
            next_open_retry: now,
            metadata_end: 0,
            shutdown: None,
            outputs: Vec::new(),
        };
        let mut reports = Vec::new();
        for (tp, topic_id) in meta.partitions {
            if let Some(summary) = broker.open_replica(&tp, topic_id, 1) {
                reports.push((tp, summary));
            }
        }
        broker.restore_high_watermarks();
        broker.next_retention = now + broker.config.retention_check_interval;
        broker.next_hw_checkpoint = now + broker.config.hw_checkpoint_interval;
        broker.handle_timeout(now);
        Ok((broker, reports))
    }

    fn open_replica(
        &mut self,
        tp: &TopicPartition,
        topic_id: u64,
        min_insync: usize,
    ) -> Option<RecoverySummary> {
        self.open_replica_with(tp, topic_id, min_insync, self.config.log.clone())
    }

    fn open_replica_with(
        &mut self,
        tp: &TopicPartition,
        topic_id: u64,
        min_insync: usize,
        log_config: LogConfig,
    ) -> Option<RecoverySummary> {
        let dir = partition_dir(tp, topic_id);
        let mut config = log_config;
        if tp.topic == CONSUMER_OFFSETS_TOPIC {
            // A size limit would delete a group's last commit of a partition nobody has
            // committed lately; Kafka compacts this topic rather than trimming it.
            config.retention_bytes = None;
        }
        if let Some(topic) = self.image.topic(&tp.topic) {
            config.compaction = topic.config.compaction();
        }
        // A cleaning in progress belonged to the log object that is being replaced.
        self.cleaners.remove(tp);
        match PartitionLog::open(self.storage.clone(), &dir, config) {
            Ok((log, summary)) => {
                let cfg = self.config.replica_config(min_insync);
                self.replicas
                    .insert(tp.clone(), Replica::new(tp.clone(), self.id, log, cfg));
                self.topic_ids.insert(tp.clone(), topic_id);
                self.failed.remove(tp);
                self.damaged.remove(tp);
                self.damaged_ends.remove(tp);
                self.outputs
                    .push(NodeOutput::Broker(BrokerEvent::LogOpened {
                        tp: tp.clone(),
                        summary: Box::new(summary.clone()),
                    }));
                Some(summary)
            }
            Err(e) => {
                tracing::error!(%tp, error = %e, "cannot open partition log");
                self.failed.insert(tp.clone(), e.to_string());
                if let LogError::Corrupt { offset, .. } = &e {
                    self.damaged.insert(tp.clone());
                    let hw = self.checkpointed_hw(tp, topic_id);
                    self.damaged_ends
                        .insert(tp.clone(), (*offset, hw, topic_id));
                } else {
                    self.damaged.remove(tp);
                    self.damaged_ends.remove(tp);
                }
                self.outputs
                    .push(NodeOutput::Broker(BrokerEvent::LogOpenFailed {
                        tp: tp.clone(),
                        error: e.to_string(),
                    }));
                None
            }
        }
    }

    /// Every offset below a replica's HW is fsynced on that replica (the leader counts
    /// only flushed data, followers report only flushed offsets), so a checkpointed HW is
    /// still covered by the recovered log; it is clamped to the log end anyway.
    fn restore_high_watermarks(&mut self) {
        if !self.storage.exists(HW_PATH) {
            return;
        }
        let parsed = self
            .storage
            .read_all(HW_PATH)
            .map_err(|e| e.to_string())
            .and_then(|b| bincode::deserialize::<HwCheckpoint>(&b).map_err(|e| e.to_string()));
        match parsed {
            Ok(entries) => {
                for (tp, topic_id, hw) in entries {
                    if self.topic_ids.get(&tp) == Some(&topic_id) {
                        if let Some(r) = self.replicas.get_mut(&tp) {
                            r.restore_high_watermark(hw);
                        }
                    }
                }
            }
            // Only an optimisation: a low HW is always safe.
            Err(error) => tracing::warn!(%error, "ignoring unreadable hw.checkpoint"),
        }
    }

    /// The HW the checkpoint file holds for `tp` (0 if none), for a log that did not open.
    fn checkpointed_hw(&self, tp: &TopicPartition, topic_id: u64) -> Offset {
        if let Some(&(_, hw, _)) = self.damaged_ends.get(tp) {
            return hw;
        }
        let Ok(bytes) = self.storage.clone().read_all(HW_PATH) else {
            return 0;
        };
        let entries: HwCheckpoint = bincode::deserialize(&bytes).unwrap_or_default();
        entries
            .into_iter()
            .find(|(t, id, _)| t == tp && *id == topic_id)
            .map_or(0, |(_, _, hw)| hw)
    }

    fn checkpoint_high_watermarks(&mut self) {
        // A log that did not open keeps its last known HW (the unclean recovery manager
        // asks for it).
        let unopened = self
            .damaged_ends
            .iter()
            .map(|(tp, &(_, hw, id))| (tp.clone(), id, hw));
        let cp: HwCheckpoint = self
            .replicas
            .iter()
            .filter_map(|(tp, r)| {
                let id = *self.topic_ids.get(tp)?;
                Some((tp.clone(), id, r.high_watermark()))
            })
            .chain(unopened)
            .collect();
        if cp == self.last_hw_checkpoint {
            return;
        }
        let res = bincode::serialize(&cp)
            .map_err(|e| e.to_string())
            .and_then(|b| {
                self.storage
                    .write_atomic(HW_PATH, &b)
                    .map_err(|e| e.to_string())
            });
        match res {
            Ok(()) => self.last_hw_checkpoint = cp,
            Err(error) => tracing::warn!(%error, "cannot write hw.checkpoint"),
        }
    }

    fn save_meta(&mut self) {
        let meta = BrokerMeta {
            incarnation: self.incarnation,
            partitions: self
                .topic_ids
                .iter()
                .map(|(tp, id)| (tp.clone(), *id))
                .collect(),
        };
        let res = bincode::serialize(&meta)
            .map_err(|e| e.to_string())
            .and_then(|b| {
                self.storage
                    .write_atomic(META_PATH, &b)
                    .map_err(|e| e.to_string())
            });
        if let Err(error) = res {
            tracing::error!(%error, "cannot write broker.meta");
        }
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// The incarnation sent with registration (bumped on every `open`).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// Broker epoch assigned by the controller, once registered.
    pub fn broker_epoch(&self) -> Option<Offset> {
        match self.registration {
            Registration::Registered { broker_epoch } => Some(broker_epoch),
            Registration::Unregistered { .. } => None,
        }
    }

    /// Whether the controller last said this broker is fenced.
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// The controller this broker sends its requests to (the one it believes active).
    pub fn active_controller(&self) -> NodeId {
        self.controller
    }

    /// Whether the session lease (`BrokerConfig::session_timeout`) has lapsed as of the
    /// last step: the broker then neither takes nor acknowledges produce requests.
    pub fn session_lapsed(&self) -> bool {
        self.lapsed
    }

    /// Re-evaluates the session lease at `now` (start of every step).
    fn check_lease(&mut self, now: Nanos) {
        if self.config.session_timeout.is_some() {
            self.lapsed = self.lease_until.is_none_or(|u| now >= u);
        }
    }

    /// The next controller of the quorum after the current one (a timeout: it may be down
    /// or cut off). With a single controller, the same one.
    fn next_controller(&mut self) {
        let voters = &self.config.controllers;
        if let Some(i) = voters.iter().position(|&c| c == self.controller) {
            self.controller = voters[(i + 1) % voters.len()];
        } else if let Some(&first) = voters.first() {
            self.controller = first;
        }
    }

    /// A controller answered `NotController { leader }`: follow its hint when it names a
    /// voter. Returns whether the hint named another controller (then the broker asks it at
    /// once). Without a hint the quorum is electing: the request's own retry moves to the
    /// next voter after a wait, as Kafka's `retry.backoff.ms`, instead of asking every voter
    /// in turn as fast as they refuse (thousands of refused requests per election).
    fn follow_hint(&mut self, answered: NodeId, leader: Option<NodeId>) -> bool {
        match leader.filter(|l| self.config.controllers.contains(l)) {
            Some(l) => {
                self.controller = l;
                l != answered
            }
            None => false,
        }
    }

    pub fn metadata_image(&self) -> &MetadataImage {
        &self.image
    }

    /// Hosted partitions, in order.
    pub fn partitions(&self) -> Vec<TopicPartition> {
        self.replicas.keys().cloned().collect()
    }

    pub fn replica_view(&self, tp: &TopicPartition) -> Option<ReplicaView> {
        self.replicas.get(tp).map(|r| r.view())
    }

    /// The high watermark of `tp` here, if this broker holds it: a [`Broker::replica_view`]'s,
    /// without building the whole view (the simulator asks on every consumer fetch answer).
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<Offset> {
        self.replicas.get(tp).map(|r| r.high_watermark())
    }

    pub fn views(&self) -> Vec<ReplicaView> {
        self.replicas.values().map(|r| r.view()).collect()
    }

    /// Every hosted replica that has appended a transaction marker as leader, with its
    /// journal of them (for observers: the run viewer).
    pub fn marker_journals(&self) -> impl Iterator<Item = (&TopicPartition, &MarkerJournal)> {
        self.replicas
            .iter()
            .map(|(tp, r)| (tp, r.marker_journal()))
            .filter(|(_, j)| j.appended() > 0)
    }

    /// Partitions whose log failed to open here, with the error.
    pub fn failed_partitions(&self) -> &BTreeMap<TopicPartition, String> {
        &self.failed
    }

    /// Partitions this broker cannot serve (KIP-112 offline logs): its log failed to open,
    /// or its replica's log failed a read. Sent in every heartbeat, so the controller takes
    /// this broker out of their ISRs and leaderships, and never elects it for them.
    pub fn offline_partitions(&self) -> BTreeSet<TopicPartition> {
        let failed_reads = self
            .replicas
            .iter()
            .filter(|(_, r)| replica_set::offline(r))
            .map(|(tp, _)| tp.clone());
        self.failed.keys().cloned().chain(failed_reads).collect()
    }

    /// Whether [`Self::offline_partitions`] is not empty, without building it.
    fn any_offline(&self) -> bool {
        !self.failed.is_empty() || self.replicas.summary().offline
    }

    /// Whether [`Self::offline_partitions`] differs from what the last heartbeat reported,
    /// without building the set: `next_timeout` asks after every step. `replicas_offline`:
    /// whether any hosted replica is offline (the replica set's [`replica_set::Summary`]).
    /// Inlined for the common case, the walk kept apart.
    #[inline]
    fn offline_changed(&self, replicas_offline: bool) -> bool {
        if !replicas_offline && self.failed.is_empty() {
            // Nothing is offline (nearly every step): a change iff the last report named some.
            return !self.reported_offline.is_empty();
        }
        self.offline_changed_walk()
    }

    #[inline(never)]
    fn offline_changed_walk(&self) -> bool {
        // A partition in both sources is counted once, as in the set.
        let failed_reads = self
            .replicas
            .iter()
            .filter(|(tp, r)| replica_set::offline(r) && !self.failed.contains_key(*tp))
            .map(|(tp, _)| tp);
        let mut n = 0;
        for tp in self.failed.keys().chain(failed_reads) {
            if !self.reported_offline.contains(tp) {
                return true;
            }
            n += 1;
        }
        n != self.reported_offline.len()
    }

    /// The offline partitions whose log is damaged (opening it met a corrupt batch, or a read met a
    /// corrupt batch), not just briefly unreadable: reported so the controller stops
    /// counting on them as eligible leaders (KIP-966), and only these are repaired.
    pub fn corrupt_partitions(&self) -> BTreeSet<TopicPartition> {
        let corrupt = self
            .replicas
            .iter()
            .filter(|(_, r)| r.log_corrupt())
            .map(|(tp, _)| tp.clone());
        self.damaged.iter().cloned().chain(corrupt).collect()
    }

    /// Every batch of the local log covering `[from, below)` (records at or past `below`
    /// cut off), control batches included. For invariant checks: it reads the log as it
    /// is, whatever the HW, and changes nothing (a failed read is only reported).
    pub fn read_records(
        &mut self,
        tp: &TopicPartition,
        from: Offset,
        below: Offset,
    ) -> Result<Vec<RecordBatch>, BrokerError> {
        match self.read_log(tp, from, below) {
            None => Err(BrokerError::UnknownPartition { tp: tp.clone() }),
            Some(Err(e)) => Err(BrokerError::Log {
                tp: tp.clone(),
                reason: e.0,
            }),
            Some(Ok(batches)) => Ok(batches),
        }
    }

    /// [`Self::read_records`] with the log's own failure (which tells corruption from an
    /// I/O error); `None` if the partition is not hosted here.
    pub(crate) fn read_log(
        &mut self,
        tp: &TopicPartition,
        from: Offset,
        below: Offset,
    ) -> Option<Result<Vec<RecordBatch>, crate::replica::LogFailure>> {
        let replica = self.replicas.get_mut(tp)?;
        let mut out: Vec<RecordBatch> = Vec::new();
        let mut at = from;
        while at < below {
            let batches = match replica.read_below(at, below, 1 << 20) {
                Ok(b) => b,
                Err(e) => return Some(Err(e)),
            };
            let Some(last) = batches.last() else { break };
            let next = last.next_offset();
            if next <= at {
                break;
            }
            at = next;
            if out.is_empty() {
                out = batches; // most reads take one round: no copy
            } else {
                out.extend(batches);
            }
        }
        Some(Ok(out))
    }

    /// Moves what it produced since the last call, in order, to the end of `out`. An
    /// empty `out` (the common case) swaps buffers instead: no output is copied, and both
    /// keep their capacity (the simulator takes a broker's outputs after every step).
    pub fn poll_outputs_into(&mut self, out: &mut Vec<NodeOutput>) {
        self.collect_replica_effects();
        if out.is_empty() {
            std::mem::swap(&mut self.outputs, out);
        } else {
            out.append(&mut self.outputs);
        }
    }

    /// Takes what it produced since the last call, in order.
    pub fn poll_outputs(&mut self) -> Vec<NodeOutput> {
        let mut out = Vec::new();
        self.poll_outputs_into(&mut out);
        out
    }

    /// When [`Self::handle_timeout`] next has something to do.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let replicas = self.replicas.summary();
        let controller = match self.registration {
            Registration::Unregistered { sent_at: None } => None,
            Registration::Unregistered { sent_at: Some(t) } => {
                Some(t + self.config.controller_timeout)
            }
            Registration::Registered { .. } => Some(match self.heartbeat_sent_at {
                None => 0,
                Some(_) if !self.heartbeat_in_flight && self.offline_changed(replicas.offline) => 0,
                Some(t) if self.heartbeat_in_flight => t + self.config.controller_timeout,
                Some(t) => t + self.config.heartbeat_interval,
            }),
        };
        // The earliest of the timers, folded as they come (asked after every step).
        let mut t = self.next_retention.min(self.next_hw_checkpoint);
        let mut fold = |o: Option<Nanos>| {
            if let Some(x) = o {
                t = t.min(x);
            }
        };
        fold(controller);
        fold(replicas.timeout);
        fold(self.groups.poll_timeout());
        fold(self.txn_partition.poll_timeout());
        fold(self.txn_poll_timeout());
        fold(self.shutdown_deadline());
        if self.hosts_compacted() {
            fold(Some(self.next_clean));
        }
        if !self.failed.is_empty() {
            fold(Some(self.next_open_retry));
        }
        Some(t)
    }

    /// Timers: registration / heartbeats, replica fetches, ISR checks, produce
    /// timeouts, retention, group coordinators.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.check_lease(now);
        self.tick_inner(now);
        if let Some(c) = self.groups_mut() {
            c.handle_timeout(now);
        }
        self.txn_timeout(now);
        self.pump_coordinators(now);
    }

    fn groups_mut(&mut self) -> Option<&mut crate::group::GroupCoordinators> {
        self.groups.coordinators_mut()
    }

    fn tick_inner(&mut self, now: Nanos) {
        match self.registration {
            Registration::Unregistered { sent_at } => {
                if sent_at.is_none_or(|t| now >= t + self.config.controller_timeout) {
                    if sent_at.is_some() {
                        self.next_controller(); // no answer: maybe down or cut off
                    }
                    self.send_registration(now);
                }
            }
            Registration::Registered { .. } => {
                let due = match self.heartbeat_sent_at {
                    None => true,
                    Some(t) if self.heartbeat_in_flight => {
                        let timed_out = now >= t + self.config.controller_timeout;
                        if timed_out {
                            self.next_controller(); // no answer: maybe down or cut off
                        }
                        timed_out
                    }
                    Some(t) => now >= t + self.config.heartbeat_interval,
                };
                // A newly offline partition is reported at once (unless a heartbeat is
                // already on its way: its reply prompts no wait for the next one).
                let news = !self.heartbeat_in_flight
                    && self.offline_changed(self.replicas.summary().offline);
                if due || news {
                    self.send_heartbeat(now);
                }
            }
        }
        // Nearly always nothing is offline before or after: then no set is built.
        let offline_before = self.any_offline().then(|| self.offline_partitions());
        self.replicas.tick_due(now);
        self.close_unusable_logs();
        // An offline log read through again, or one that failed to open is due another
        // try: apply the partition states again (on a caught-up image only).
        let retry_open = !self.failed.is_empty() && now >= self.next_open_retry;
        if retry_open {
            self.next_open_retry = now + self.config.log_recheck_interval;
        }
        let recovered = match offline_before {
            Some(before) => self.offline_partitions() != before,
            None => self.any_offline(),
        };
        let caught_up = self.metadata_end > 0 && self.image.next_offset >= self.metadata_end;
        if (retry_open || recovered) && caught_up {
            self.reconcile(now);
        }
        self.tick_shutdown(now);
        self.expire_verifications(now);
        if now >= self.next_hw_checkpoint {
            self.next_hw_checkpoint = now + self.config.hw_checkpoint_interval;
            self.checkpoint_high_watermarks();
        }
        if now >= self.next_retention {
            self.next_retention = now + self.config.retention_check_interval;
            // Compared with record timestamps: the wall clock on a real node.
            let now_ms = (now / 1_000_000) as i64 + self.config.wall_clock_at_zero_ms;
            for (tp, r) in self.replicas.iter_mut() {
                if let Err(e) = r.log_mut().apply_retention(now_ms) {
                    tracing::warn!(%tp, error = %e, "retention failed");
                }
            }
        }
        if now >= self.next_clean && self.hosts_compacted() {
            self.next_clean = now + self.config.cleaner_interval;
            self.run_cleaners(now);
        }
        self.collect_replica_effects();
    }

    /// A log that a storage failure left unusable (a torn index write on a full disk, a
    /// truncation that failed midway: `PartitionLog::is_failed`) refuses every call until
    /// reopened. Close it and treat it as a log that failed to open: reported offline in
    /// heartbeats (the controller moves leadership and the ISR away) and reopened from disk
    /// every `log_recheck_interval`, whose recovery cuts what was never synced. Before,
    /// nothing reopened it: the follower retried its flush forever (seed 229).
    fn close_unusable_logs(&mut self) {
        let unusable: Vec<TopicPartition> = self
            .replicas
            .iter()
            .filter(|(_, r)| r.log().is_failed())
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in unusable {
            self.replicas.remove(&tp);
            let error = "log unusable after a storage failure: closed, to be reopened".to_string();
            tracing::warn!(%tp, "{error}");
            self.failed.insert(tp.clone(), error.clone());
            self.outputs
                .push(NodeOutput::Broker(BrokerEvent::LogOpenFailed { tp, error }));
        }
    }

    fn send_controller(&mut self, req: ControllerRequest) {
        self.outputs.push(NodeOutput::Send {
            to: Address::Controller(self.controller),
            msg: Message::ControllerRequest(req),
        });
    }

    fn send_registration(&mut self, now: Nanos) {
        self.registration = Registration::Unregistered { sent_at: Some(now) };
        let req = ControllerRequest::RegisterBroker {
            broker: self.id,
            incarnation: self.incarnation,
            offline_partitions: self.offline_partitions().into_iter().collect(),
            corrupt_partitions: self.corrupt_partitions().into_iter().collect(),
        };
        self.send_controller(req);
    }

    fn send_heartbeat(&mut self, now: Nanos) {
        let Registration::Registered { broker_epoch } = self.registration else {
            return;
        };
        self.heartbeat_sent_at = Some(now);
        self.heartbeat_in_flight = true;
        self.lease_from.get_or_insert(now);
        self.reported_offline = self.offline_partitions();
        let req = ControllerRequest::BrokerHeartbeat {
            broker: self.id,
            broker_epoch,
            metadata_offset: self.image.next_offset,
            offline_partitions: self.reported_offline.iter().cloned().collect(),
            corrupt_partitions: self.corrupt_partitions().into_iter().collect(),
            log_info: self.log_info(),
        };
        self.send_controller(req);
    }

    /// Answers to the unclean recovery manager's query: each queried replica's last epoch,
    /// usable log end and HW. A log that reads answers with its log end; one a read found
    /// damaged with where the damage starts (it cuts there if elected). Nothing for a log
    /// that is briefly unreadable or did not open: what it holds is not known.
    fn log_info(&self) -> Vec<ReplicaLogInfo> {
        self.log_info_queries
            .iter()
            .filter_map(|(tp, leader_epoch)| {
                let Some(r) = self.replicas.get(tp) else {
                    // A log that refused to open at a corrupt batch: what precedes it is
                    // usable (its epoch unknown), and the HW it last knew.
                    let &(at, hw, _) = self.damaged_ends.get(tp)?;
                    return Some(ReplicaLogInfo {
                        tp: tp.clone(),
                        leader_epoch: *leader_epoch,
                        last_epoch: None,
                        log_end: at,
                        high_watermark: hw,
                        damaged_at: Some(at),
                    });
                };
                let log = r.log();
                let (log_end, damaged_at) = match (r.log_failure(), r.damaged_at()) {
                    (None, _) => (log.log_end_offset(), None),
                    (Some(_), Some(at)) => (at, Some(at)),
                    (Some(_), None) => return None,
                };
                let last_epoch = match log_end.checked_sub(1) {
                    Some(last) if last >= log.log_start_offset() => log.epoch_at(last),
                    _ => None,
                };
                Some(ReplicaLogInfo {
                    tp: tp.clone(),
                    leader_epoch: *leader_epoch,
                    last_epoch,
                    log_end,
                    high_watermark: r.high_watermark(),
                    damaged_at,
                })
            })
            .collect()
    }

    /// Called after every step and every group pump round, mostly with no replica reached
    /// since the last drain: that case is a flag test here, the walk stays out of line.
    #[inline]
    fn collect_replica_effects(&mut self) {
        if self.replicas.maybe_effects() {
            self.drain_replica_effects();
        }
    }

    #[inline(never)]
    fn drain_replica_effects(&mut self) {
        let lapsed = self.lapsed;
        let controller = Address::Controller(self.controller);
        // Most replicas have nothing: only those with effects are visited.
        for r in self.replicas.with_effects_mut() {
            for effect in r.poll_outputs_iter() {
                match effect {
                    // Nearly every effect: kept to a push, the others out of line.
                    ReplicaEffect::Send { to, mut msg } => {
                        if lapsed {
                            lapse_answer(&mut msg);
                        }
                        self.outputs.push(NodeOutput::Send { to, msg });
                    }
                    other => route_rare_effect(
                        &mut self.outputs,
                        &mut self.groups.host.acks,
                        &mut self.txns.host.acks,
                        &mut self.txn_partition.marker_acks,
                        controller,
                        other,
                    ),
                }
            }
        }
    }

    /// Peer repair: any hosted replica answers, whatever its role.
    fn answer_repair_fetch(&mut self, from: Address, req: RepairFetchRequest) {
        match self.replicas.get_mut(&req.tp) {
            Some(r) => r.handle_repair_fetch(from, &req),
            None => {
                // A log that refused to open may still hold the batch intact.
                let unopened = self
                    .damaged_ends
                    .get(&req.tp)
                    .map(|&(_, _, id)| partition_dir(&req.tp, id));
                let copy = match unopened {
                    Some(dir) => {
                        unopened::copy_from_unopened(&mut self.storage, &dir, req.offset, req.epoch)
                    }
                    None => RepairCopy::NotHeld,
                };
                let resp = RepairFetchResponse {
                    correlation: req.correlation,
                    tp: req.tp,
                    offset: req.offset,
                    copy,
                };
                self.reply(from, resp.into());
            }
        }
    }

    fn reply(&mut self, to: Address, msg: Message) {
        self.outputs.push(NodeOutput::Send { to, msg });
    }

    /// One message from `from`.
    pub fn step(&mut self, now: Nanos, from: Address, msg: Message) {
        self.check_lease(now);
        self.handle_inner(now, from, msg);
        self.pump_coordinators(now);
    }

    /// The coordinators' pumps, until nothing moves: the groups, the transaction
    /// coordinators (a no-op without transactions), the answers to markers (a committed
    /// marker on `__consumer_offsets` feeds the group coordinators, whose appends may
    /// commit more), and transaction messages this broker sent itself.
    #[inline]
    fn pump_coordinators(&mut self, now: Nanos) {
        self.pump_groups(now);
        for _ in 0..100 {
            if self.pump_txns(now) {
                self.pump_groups(now);
            }
            let markers = self.pump_markers(now);
            let looped = self.deliver_txn_loopback(now);
            if !markers && !looped {
                return;
            }
            self.pump_groups(now);
        }
        debug_assert!(false, "coordinator pumps did not settle");
    }

    fn handle_inner(&mut self, now: Nanos, from: Address, msg: Message) {
        match msg {
            Message::Fetch(req) => {
                let resp = match (self.replicas.get_mut(&req.tp), from) {
                    (Some(r), Address::Node(n)) if n == req.replica_id => {
                        // Answered as a replica effect: now, or later if held (long poll).
                        r.handle_fetch(now, req);
                        self.collect_replica_effects();
                        return;
                    }
                    (Some(_), _) => FetchResponse {
                        correlation: req.correlation,
                        tp: req.tp,
                        leader_epoch: 0,
                        result: FetchResult::Error(FetchError::NotAssignedReplica(req.replica_id)),
                    },
                    (None, _) => FetchResponse {
                        correlation: req.correlation,
                        tp: req.tp,
                        leader_epoch: 0,
                        result: FetchResult::Error(FetchError::UnknownTopicOrPartition),
                    },
                };
                self.reply(from, Message::FetchResponse(resp));
            }
            Message::FetchResponse(resp) => {
                if let (Some(r), Address::Node(n)) = (self.replicas.get_mut(&resp.tp), from) {
                    r.handle_fetch_response(now, n, resp);
                }
            }
            Message::RepairFetch(req) => self.answer_repair_fetch(from, req),
            Message::RepairFetchResponse(resp) => {
                if let (Some(r), Address::Node(n)) = (self.replicas.get_mut(&resp.tp), from) {
                    r.handle_repair_fetch_response(now, n, *resp);
                }
            }
            Message::Produce(req) if req.tp.topic == CONSUMER_OFFSETS_TOPIC => {
                // Only the coordinators write there: a foreign record would make the
                // partition unloadable.
                if req.acks != Acks::None {
                    let resp = ProduceResponse {
                        correlation: req.correlation,
                        tp: req.tp,
                        result: Err(ProduceError::InvalidRecord(format!(
                            "{CONSUMER_OFFSETS_TOPIC} is internal: only group coordinators write it"
                        ))),
                    };
                    self.reply(from, Message::ProduceResponse(resp));
                }
            }
            Message::Produce(req) if self.lapsed => {
                // Cut off from the active controller: not a leader any more as far as
                // producers go (they look for the leader again).
                if req.acks != Acks::None {
                    let leader_epoch = self.replicas.get(&req.tp).map_or(0, |r| r.leader_epoch());
                    let resp = ProduceResponse {
                        correlation: req.correlation,
                        tp: req.tp,
                        result: Err(ProduceError::NotLeader {
                            leader: None,
                            leader_epoch,
                        }),
                    };
                    self.reply(from, Message::ProduceResponse(resp));
                }
            }
            Message::Produce(req) => match self.replicas.get_mut(&req.tp) {
                Some(_) => self.produce_to_replica(now, from, *req),
                None if req.acks != Acks::None => {
                    let resp = ProduceResponse {
                        correlation: req.correlation,
                        tp: req.tp,
                        result: Err(ProduceError::UnknownTopicOrPartition),
                    };
                    self.reply(from, Message::ProduceResponse(resp));
                }
                None => {}
            },
            Message::ConsumerFetch(req) => match self.replicas.get_mut(&req.tp) {
                Some(r) => r.handle_consumer_fetch(from, &req),
                None => {
                    let resp = ConsumerFetchResponse {
                        correlation: req.correlation,
                        tp: req.tp,
                        result: Err(ConsumerFetchError::UnknownTopicOrPartition),
                    };
                    self.reply(from, resp.into());
                }
            },
            Message::ListOffsets(req) => match self.replicas.get_mut(&req.tp) {
                Some(r) => r.handle_list_offsets(from, &req),
                None => {
                    let resp = ListOffsetsResponse {
                        correlation: req.correlation,
                        tp: req.tp,
                        result: Err(ConsumerFetchError::UnknownTopicOrPartition),
                    };
                    self.reply(from, Message::ListOffsetsResponse(resp));
                }
            },
            Message::Metadata(req) => {
                let resp = self.metadata_response(&req);
                self.reply(from, Message::MetadataResponse(resp));
            }
            Message::Group {
                correlation,
                request,
            } => match from {
                Address::Client(c) => self.handle_group(now, c, correlation, *request),
                other => tracing::debug!(from = %other, "group request from a non-client ignored"),
            },
            m @ (Message::Txn { .. }
            | Message::TxnResponse { .. }
            | Message::WriteTxnMarker(_)
            | Message::WriteTxnMarkerResponse(_)) => self.handle_txn_traffic(now, from, m),
            Message::ControllerResponse(resp) => match from {
                Address::Controller(c) => self.handle_controller(now, c, *resp),
                other => {
                    tracing::debug!(from = %other, "controller response from a non-controller")
                }
            },
            other => {
                tracing::debug!(%from, msg = ?std::mem::discriminant(&other), "ignored message");
            }
        }
        self.collect_replica_effects();
    }

    /// Transaction traffic: requests to and answers from coordinators hosted here
    /// (`txns`), markers to and verification answers for partitions led here
    /// (`txn_partition`).
    fn handle_txn_traffic(&mut self, now: Nanos, from: Address, m: Message) {
        match m {
            Message::WriteTxnMarker(_) | Message::TxnResponse { .. } => {
                self.handle_txn_partition(now, from, m)
            }
            _ => self.handle_txn_message(now, from, m),
        }
    }

    fn handle_controller(&mut self, now: Nanos, from: NodeId, resp: ControllerResponse) {
        let moved = not_controller(&resp).map(|leader| self.follow_hint(from, leader));
        match resp {
            ControllerResponse::RegisterBroker(Ok(reg)) if reg.broker == self.id => {
                if let Registration::Unregistered { .. } = self.registration {
                    self.registration = Registration::Registered {
                        broker_epoch: reg.broker_epoch,
                    };
                    self.outputs
                        .push(NodeOutput::Broker(BrokerEvent::Registered {
                            broker_epoch: reg.broker_epoch,
                        }));
                    self.heartbeat_sent_at = None;
                    self.heartbeat_in_flight = false;
                    self.send_heartbeat(now);
                }
            }
            ControllerResponse::RegisterBroker(Err(e)) => {
                tracing::warn!(error = %e, "registration refused");
                // The hinted controller at once; with no hint, the retry timer moves on.
                if moved == Some(true)
                    && matches!(self.registration, Registration::Unregistered { .. })
                {
                    self.send_registration(now);
                }
            }
            ControllerResponse::BrokerHeartbeat(Ok(reply)) => self.on_heartbeat(now, reply),
            ControllerResponse::BrokerHeartbeat(Err(e)) => match e {
                ControllerError::StaleBrokerEpoch { .. }
                | ControllerError::UnknownBroker { .. } => {
                    // The controller forgot us or we are a stale incarnation: start over.
                    self.registration = Registration::Unregistered { sent_at: None };
                    self.heartbeat_in_flight = false;
                    self.handle_timeout(now);
                }
                other => {
                    tracing::warn!(error = %other, "heartbeat refused");
                    self.heartbeat_in_flight = false;
                    match moved {
                        Some(true) => self.heartbeat_sent_at = None, // the hinted one, at once
                        // No hint: the next voter, at the next heartbeat.
                        Some(false) if self.controller == from => self.next_controller(),
                        _ => {}
                    }
                }
            },
            ControllerResponse::AlterPartition { tp, result } => {
                if let Some(r) = self.replicas.get_mut(&tp) {
                    let outcome = match result {
                        Ok(state) => AlterOutcome::Accepted {
                            leader_epoch: state.leader_epoch,
                            partition_epoch: state.partition_epoch,
                            isr: state.isr,
                        },
                        Err(e) => AlterOutcome::Rejected {
                            reason: e.to_string(),
                        },
                    };
                    r.on_alter_partition_result(now, outcome);
                }
            }
            ControllerResponse::Metadata(delta) => {
                self.apply_delta(now, &delta);
            }
            ControllerResponse::ControlledShutdown(reply) => self.on_shutdown_reply(now, reply),
            ControllerResponse::InitProducerId(result) => self.on_producer_id(now, result),
            ControllerResponse::CreateTopic {
                name,
                result: Err(e),
            } if name == CONSUMER_OFFSETS_TOPIC
                && !matches!(e, ControllerError::TopicAlreadyExists { .. }) =>
            {
                // Retried on a later FindCoordinator (e.g. once enough brokers registered).
                tracing::warn!(error = %e, "cannot create {CONSUMER_OFFSETS_TOPIC}");
            }
            _ => {}
        }
    }

    fn on_heartbeat(&mut self, now: Nanos, reply: HeartbeatReply) {
        if Some(reply.broker_epoch) != self.broker_epoch() || reply.broker != self.id {
            return; // answer to a previous registration
        }
        self.heartbeat_in_flight = false;
        self.fenced = reply.fenced;
        self.log_info_queries = reply.log_info_queries;
        let from = self.lease_from.take();
        if let Some(timeout) = self.config.session_timeout {
            self.lease_until = from.filter(|_| !reply.fenced).map(|t| t + timeout);
            self.check_lease(now);
        }
        let more = reply.metadata.end_offset
            > reply.metadata.from + reply.metadata.records.len() as Offset;
        self.apply_delta(now, &reply.metadata);
        if more {
            self.send_heartbeat(now); // keep pulling
        }
        self.tick_shutdown(now);
    }

    fn apply_delta(&mut self, now: Nanos, delta: &crate::controller::MetadataDelta) {
        let before = self.image.next_offset;
        self.metadata_end = self.metadata_end.max(delta.end_offset);
        for r in &delta.records {
            if let crate::controller::MetadataRecord::UncleanRecovery {
                tp,
                leader,
                leader_epoch,
                log_end,
            } = r
            {
                if *leader == self.id {
                    self.recovery_ends
                        .insert(tp.clone(), (*leader_epoch, *log_end));
                }
            }
        }
        match self.image.apply_delta(delta) {
            Ok(0) => {}
            Ok(_) => {
                let offset = self.image.next_offset;
                self.outputs
                    .push(NodeOutput::Broker(BrokerEvent::MetadataApplied { offset }));
                // Act only on a caught-up image: an intermediate state may name this
                // broker leader of an epoch long gone.
                if offset >= delta.end_offset {
                    self.reconcile(now);
                }
            }
            Err(crate::controller::ImageError::Gap { .. }) if delta.from > before => {
                // Reordered reply from further ahead: the next pull fills the gap.
            }
            Err(e) => {
                tracing::error!(error = %e, "metadata delta rejected");
                self.outputs
                    .push(NodeOutput::Broker(BrokerEvent::MetadataError {
                        error: e.to_string(),
                    }));
            }
        }
    }

    /// Make hosted replicas match the image, their compaction settings included.
    fn reconcile(&mut self, now: Nanos) {
        self.reconcile_replicas(now);
        self.sync_compaction();
    }

    fn reconcile_replicas(&mut self, now: Nanos) {
        let wanted: BTreeMap<TopicPartition, (PartitionState, u64, usize, bool)> = self
            .image
            .partitions_of_broker(self.id)
            .filter_map(|(tp, s)| {
                let topic = self.image.topic(&tp.topic)?;
                let min_insync = topic.config.min_insync_replicas as usize;
                // After an unclean recovery a follower may hold more than the new leader
                // below its HW: the truncation is allowed (and reported), as after an
                // unclean election.
                let unclean =
                    topic.config.unclean_leader_election || s.recovered_at_epoch.is_some();
                Some((tp, (s.clone(), topic.topic_id, min_insync, unclean)))
            })
            .collect();
        let fenced: BTreeSet<NodeId> = self
            .image
            .brokers
            .values()
            .filter(|b| b.is_fenced())
            .map(|b| b.id)
            .collect();
        let mut hosted_changed = false;
        // Partitions no longer assigned here (topic deleted or moved): drop their data, so
        // a re-created topic of the same name starts from an empty log.
        let gone: Vec<TopicPartition> = self
            .replicas
            .keys()
            .filter(|tp| wanted.get(*tp).map(|w| w.1) != self.topic_ids.get(*tp).copied())
            .cloned()
            .collect();
        for tp in gone {
            if let Some(mut r) = self.replicas.remove(&tp) {
                r.become_follower(now, None, r.leader_epoch().saturating_add(1), 0);
                for effect in r.poll_outputs() {
                    match effect {
                        ReplicaEffect::Send { to, msg } => {
                            self.outputs.push(NodeOutput::Send { to, msg })
                        }
                        // A group append to the partition now gone: matched (or dropped,
                        // if its groups unloaded) like any other answer.
                        ReplicaEffect::LocalProduceAnswer(resp) => {
                            if resp.tp.topic == crate::txn::TRANSACTION_STATE_TOPIC {
                                self.txns.host.acks.push(resp)
                            } else {
                                self.groups.host.acks.push(resp)
                            }
                        }
                        ReplicaEffect::LocalMarkerAnswer(resp) => {
                            self.txn_partition.marker_acks.push(resp)
                        }
                        _ => {}
                    }
                }
            }
            if let Some(topic_id) = self.topic_ids.remove(&tp) {
                self.remove_partition_files(&tp, topic_id);
            }
            self.outputs
                .push(NodeOutput::Broker(BrokerEvent::PartitionRemoved {
                    tp: tp.clone(),
                }));
            hosted_changed = true;
        }
        // A log that failed to open for a partition no longer assigned here is not offline.
        self.failed.retain(|tp, _| wanted.contains_key(tp));
        self.damaged.retain(|tp| wanted.contains_key(tp));
        self.damaged_ends.retain(|tp, _| wanted.contains_key(tp));
        self.recovery_ends.retain(|tp, _| wanted.contains_key(tp));
        for (tp, (state, topic_id, min_insync, unclean)) in wanted {
            if !self.replicas.contains_key(&tp)
                && self.open_replica(&tp, topic_id, min_insync).is_some()
            {
                hosted_changed = true;
            }
            if let Some(r) = self.replicas.get_mut(&tp) {
                // A read failure may have been transient: read the log through first.
                r.recheck_log_now();
            }
            if self.repairable(&tp, &state) {
                // Offline here, and the controller has taken this copy out of the ISR and
                // the ELR and another replica leads: every committed record is on the new
                // leader, and nobody counts on this log any more, so its damaged part can
                // be cut (the first unreadable batch and everything after it) and fetched
                // again from the leader (KIP-112 waits for a restart; this repairs in
                // place). Only if even the cut fails is the whole log dropped.
                tracing::warn!(%tp, "repairing offline partition: refetching from the leader");
                let repair = match self.replicas.get_mut(&tp) {
                    Some(r) => r.repair_log(),
                    None => Repair::Failed, // the log did not open
                };
                if repair == Repair::Cut {
                    self.outputs
                        .push(NodeOutput::Broker(BrokerEvent::PartitionRepaired {
                            tp: tp.clone(),
                        }));
                } else if repair == Repair::Failed {
                    self.replicas.remove(&tp);
                    self.failed.remove(&tp);
                    self.damaged.remove(&tp);
                    self.damaged_ends.remove(&tp);
                    self.remove_partition_files(&tp, topic_id);
                    self.outputs
                        .push(NodeOutput::Broker(BrokerEvent::PartitionRepaired {
                            tp: tp.clone(),
                        }));
                    if self.open_replica(&tp, topic_id, min_insync).is_some() {
                        hosted_changed = true;
                    }
                }
            }
            self.cut_for_recovery(&tp, &state);
            let Some(r) = self.replicas.get_mut(&tp) else {
                continue; // the log did not open: offline here, retried later
            };
            r.set_fenced_brokers(fenced.clone());
            if r.config().min_insync_replicas != min_insync
                || r.config().unclean_leader_election != unclean
            {
                let mut cfg = self.config.replica_config(min_insync);
                cfg.unclean_leader_election = unclean;
                r.set_config(cfg);
            }
            r.apply_partition_state(
                now,
                state.leader,
                state.leader_epoch,
                state.partition_epoch,
                &state.isr,
                &state.replicas,
            );
        }
        if hosted_changed {
            self.save_meta();
        }
    }

    /// Elected by an unclean recovery (KIP-966) with a log a read found damaged: cut it at
    /// the first damaged batch, which is where the manager was told it ends, so it can
    /// lead with what precedes the damage. Damage found after the answer, below the end
    /// the manager was told, is repaired from a peer first.
    fn cut_for_recovery(&mut self, tp: &TopicPartition, state: &PartitionState) {
        let elected =
            state.leader == Some(self.id) && state.recovered_at_epoch == Some(state.leader_epoch);
        if !elected {
            return;
        }
        if !self.replicas.contains_key(tp) && self.damaged_ends.contains_key(tp) {
            // The log refused to open: open it with recovery cutting at the corrupt batch.
            let (Some(&(_, _, topic_id)), Some(topic)) =
                (self.damaged_ends.get(tp), self.image.topic(&tp.topic))
            else {
                return;
            };
            let min_insync = topic.config.min_insync_replicas as usize;
            let mut log_config = self.config.log.clone();
            log_config.truncate_on_corruption = true;
            tracing::warn!(%tp, "elected by unclean recovery: reopening the log cut at its damage");
            if self
                .open_replica_with(tp, topic_id, min_insync, log_config)
                .is_some()
            {
                self.outputs
                    .push(NodeOutput::Broker(BrokerEvent::PartitionRepaired {
                        tp: tp.clone(),
                    }));
                self.save_meta();
            }
            return;
        }
        let Some(r) = self.replicas.get_mut(tp).filter(|r| r.log_corrupt()) else {
            return;
        };
        // The manager chose this copy for the log end it answered. Damage a read found
        // only later, below that end (the log read whole when it answered), is not what the
        // choice priced in: cutting there drops records the manager counted on, committed
        // ones among them (seed 200330 of `--fault-rate 4 --max-down 2` lost 150
        // acknowledged records so). Such a batch is refilled from a peer instead (asked at
        // every recheck); the cut stays the last resort, once every other replica has said
        // it holds no copy.
        let relied_on = self
            .recovery_ends
            .get(tp)
            .filter(|(epoch, _)| *epoch == state.leader_epoch)
            .map(|&(_, end)| end);
        let below_choice = relied_on.is_some_and(|end| r.damaged_at().is_some_and(|at| at < end));
        let no_peer_copy = state
            .replicas
            .iter()
            .filter(|&&b| b != self.id)
            .all(|&b| r.peer_lacks_damaged_batch(b));
        if below_choice && !no_peer_copy {
            tracing::warn!(%tp, "elected by unclean recovery with damage below its answer: asking peers");
            return;
        }
        tracing::warn!(%tp, "elected by unclean recovery: cutting the log at its damage");
        if r.repair_log() == Repair::Cut {
            self.outputs
                .push(NodeOutput::Broker(BrokerEvent::PartitionRepaired {
                    tp: tp.clone(),
                }));
        }
    }

    /// Whether an offline partition may be dropped and refetched (see `reconcile`).
    fn repairable(&self, tp: &TopicPartition, state: &PartitionState) -> bool {
        // Only a damaged log: one that is briefly unreadable comes back by itself (its
        // recheck), whole. And only once the leader said it holds no copy of the damaged
        // batch: if it does, peer repair restores this copy whole, and cutting it could
        // drop the last intact copy of a later batch that the new leader, unread yet, may
        // have damaged too. A log that did not open has no replica to ask: cut at once.
        self.corrupt_partitions().contains(tp)
            && state.leader.is_some_and(|l| {
                l != self.id
                    && self
                        .replicas
                        .get(tp)
                        .is_none_or(|r| r.peer_lacks_damaged_batch(l))
            })
            && !state.isr.contains(&self.id)
            && !state.elr.contains(&self.id)
    }

    fn remove_partition_files(&mut self, tp: &TopicPartition, topic_id: u64) {
        let dir = partition_dir(tp, topic_id);
        match self.storage.list(&dir) {
            Ok(files) => {
                for f in files {
                    let path = format!("{dir}/{f}");
                    if let Err(e) = self.storage.remove(&path) {
                        tracing::warn!(%tp, error = %e, "cannot remove partition file");
                    }
                }
            }
            Err(e) => tracing::warn!(%tp, error = %e, "cannot list partition dir"),
        }
    }

    fn metadata_response(&self, req: &MetadataRequest) -> MetadataResponse {
        let wanted: Option<BTreeSet<&str>> = req
            .topics
            .as_ref()
            .map(|t| t.iter().map(|s| s.as_str()).collect());
        let partitions = self
            .image
            .partitions()
            .filter(|(tp, _)| {
                wanted
                    .as_ref()
                    .is_none_or(|w| w.contains(tp.topic.as_str()))
            })
            .map(|(tp, s)| PartitionMetadata {
                tp,
                leader: s.leader,
                leader_epoch: s.leader_epoch,
                partition_epoch: s.partition_epoch,
                replicas: s.replicas.clone(),
                isr: s.isr.clone(),
                elr: s.elr.clone(),
            })
            .collect();
        let unknown_topics = req
            .topics
            .iter()
            .flatten()
            .filter(|t| self.image.topic(t).is_none())
            .cloned()
            .collect();
        MetadataResponse {
            correlation: req.correlation,
            brokers: self.image.unfenced_brokers(),
            partitions,
            unknown_topics,
        }
    }
}

/// `Some(leader hint)` when a controller refused a request because it is not the active
/// controller.
fn not_controller(resp: &ControllerResponse) -> Option<Option<NodeId>> {
    let e = match resp {
        ControllerResponse::RegisterBroker(Err(e))
        | ControllerResponse::BrokerHeartbeat(Err(e))
        | ControllerResponse::AlterPartition { result: Err(e), .. }
        | ControllerResponse::CreateTopic { result: Err(e), .. }
        | ControllerResponse::ControlledShutdown(Err(e)) => e,
        _ => return None,
    };
    match e {
        ControllerError::NotController { leader } => Some(*leader),
        _ => None,
    }
}

/// Cut off from the controller: a produce answer's write may be committed, but this broker
/// may no longer speak for the partition (the client retries and learns the outcome from
/// the leader it finds).
fn lapse_answer(msg: &mut Message) {
    if let Message::ProduceResponse(resp) = msg {
        if resp.result.is_ok() {
            resp.result = Err(ProduceError::RequestTimedOut);
        }
    }
}

/// A replica's effect other than a message (see `Broker::drain_replica_effects`).
#[inline(never)]
fn route_rare_effect(
    outputs: &mut Vec<NodeOutput>,
    acks: &mut Vec<ProduceResponse>,
    txn_acks: &mut Vec<ProduceResponse>,
    marker_acks: &mut Vec<ProduceResponse>,
    controller: Address,
    effect: ReplicaEffect,
) {
    outputs.push(match effect {
        // (The caller routes messages itself; this is for completeness.)
        ReplicaEffect::Send { to, msg } => NodeOutput::Send { to, msg },
        // Answers to this broker's own (group coordinator) appends.
        ReplicaEffect::LocalProduceAnswer(resp) => {
            if resp.tp.topic == crate::txn::TRANSACTION_STATE_TOPIC {
                txn_acks.push(resp);
            } else {
                acks.push(resp);
            }
            return;
        }
        // Answers to transaction markers appended for a coordinator.
        ReplicaEffect::LocalMarkerAnswer(resp) => {
            marker_acks.push(resp);
            return;
        }
        ReplicaEffect::AlterPartition(p) => NodeOutput::Send {
            to: controller,
            msg: Message::ControllerRequest(alter_request(p)),
        },
        ReplicaEffect::Event(e) => NodeOutput::Broker(BrokerEvent::Replica(e)),
    });
}

fn alter_request(p: IsrProposal) -> ControllerRequest {
    ControllerRequest::AlterPartition {
        tp: p.tp,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: p.new_isr,
    }
}

mod cleaning;
#[cfg(test)]
mod cleaning_tests;
mod coordinator_host;
#[cfg(test)]
mod group_tests;
mod groups;
mod replica_set;
mod shutdown;
#[cfg(test)]
mod txn_coordinator_tests;
#[cfg(test)]
mod txn_e2e_tests;
mod txn_partition;
#[cfg(test)]
mod txn_tests;
mod txns;
mod unopened;
use replica_set::ReplicaSet;
pub use shutdown::ShutdownPhase;
#[cfg(test)]
mod proptests;
#[cfg(test)]
pub(crate) mod tests;
