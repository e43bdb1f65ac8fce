//! The metadata image: cluster state as of some metadata log offset.
//!
//! Built only by applying [`MetadataRecord`]s in log order. The controller keeps one; every
//! broker keeps its own copy, advanced by the records it pulls with its heartbeats. Applying
//! validates each record against the image (structural invariants, epoch monotonicity), so a
//! broker fed a bogus or out-of-order record gets a typed [`ImageError`] instead of silently
//! diverging.

use super::record::MetadataRecord;
// Re-exported so the older path `controller::image::TopicConfig` keeps working.
pub use super::topic_config::TopicConfig;
use crate::types::{LeaderEpoch, NodeId, Offset, PartitionEpoch, TopicPartition};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Whether a registered broker may lead partitions and be in ISRs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BrokerState {
    /// Alive (heartbeating within its session timeout).
    Unfenced,
    /// Missed its session timeout or restarted; `since` is the offset of the fencing record.
    Fenced { since: Offset },
}

/// A registered broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    pub id: NodeId,
    /// Offset of the broker's latest `BrokerRegistered` record. Heartbeats must carry it, so
    /// a previous incarnation's late heartbeats are recognised as stale.
    pub broker_epoch: Offset,
    pub incarnation: u64,
    pub state: BrokerState,
}

impl BrokerInfo {
    pub fn is_fenced(&self) -> bool {
        matches!(self.state, BrokerState::Fenced { .. })
    }
}

/// Replica assignment, ISR and epochs of one partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// Assignment order; `replicas[0]` is the preferred leader.
    pub replicas: Vec<NodeId>,
    /// In-sync replicas, kept in assignment order. Never empty: the last member stays even
    /// when fenced or offline (it may hold the only copy of committed records).
    pub isr: Vec<NodeId>,
    /// Eligible leader replicas (KIP-966), in assignment order: replicas that left the ISR
    /// while it was below `min.insync.replicas`. The high watermark cannot advance while
    /// the ISR is that small, so each of them still holds every committed record and may be
    /// elected when no ISR member can lead. Disjoint from the ISR; cleared once the ISR is
    /// back at `min.insync.replicas`.
    #[serde(default)]
    pub elr: Vec<NodeId>,
    /// ELR members removed because their copy stopped being trustworthy (the log failed a
    /// read): the last known eligible replicas, preferred by an unclean election. Cleared
    /// with the ELR.
    #[serde(default)]
    pub last_known_elr: Vec<NodeId>,
    /// None while no eligible replica is alive.
    pub leader: Option<NodeId>,
    /// Bumped on every leader change (including to/from no leader).
    pub leader_epoch: LeaderEpoch,
    /// Bumped on every leader or ISR change; AlterPartition must name the current one.
    pub partition_epoch: PartitionEpoch,
    /// The leader epoch of the partition's latest unclean recovery (KIP-966), if it had
    /// one: from then on its replicas may hold less than a high watermark they saw.
    #[serde(default)]
    pub recovered_at_epoch: Option<LeaderEpoch>,
}

impl PartitionState {
    /// The partition and its new state, if `r` is a `PartitionChanged` record.
    pub fn changed_by(r: &MetadataRecord) -> Option<(&TopicPartition, PartitionState)> {
        let MetadataRecord::PartitionChanged {
            tp,
            replicas,
            isr,
            elr,
            last_known_elr,
            leader,
            leader_epoch,
            partition_epoch,
        } = r
        else {
            return None;
        };
        Some((
            tp,
            PartitionState {
                replicas: replicas.clone(),
                isr: isr.clone(),
                elr: elr.clone(),
                last_known_elr: last_known_elr.clone(),
                leader: *leader,
                leader_epoch: *leader_epoch,
                partition_epoch: *partition_epoch,
                recovered_at_epoch: None,
            },
        ))
    }
}

impl PartitionState {
    /// Checks the structural invariants: replicas non-empty and distinct; ISR non-empty,
    /// distinct and a subset of the replicas; the leader (if any) is in the ISR.
    pub fn validate(&self) -> Result<(), String> {
        if self.replicas.is_empty() {
            return Err("no replicas".into());
        }
        let replicas: BTreeSet<NodeId> = self.replicas.iter().copied().collect();
        if replicas.len() != self.replicas.len() {
            return Err(format!("duplicate replicas in {:?}", self.replicas));
        }
        if self.isr.is_empty() {
            return Err("empty ISR".into());
        }
        let isr: BTreeSet<NodeId> = self.isr.iter().copied().collect();
        if isr.len() != self.isr.len() {
            return Err(format!("duplicate ISR members in {:?}", self.isr));
        }
        if let Some(extra) = isr.difference(&replicas).next() {
            return Err(format!("ISR member {extra} is not a replica"));
        }
        if let Some(leader) = self.leader {
            if !isr.contains(&leader) {
                return Err(format!("leader {leader} is not in the ISR {:?}", self.isr));
            }
        }
        let elr: BTreeSet<NodeId> = self.elr.iter().copied().collect();
        if elr.len() != self.elr.len() {
            return Err(format!("duplicate ELR members in {:?}", self.elr));
        }
        if let Some(extra) = elr.difference(&replicas).next() {
            return Err(format!("ELR member {extra} is not a replica"));
        }
        if let Some(both) = elr.intersection(&isr).next() {
            return Err(format!("{both} is in both the ISR and the ELR"));
        }
        if let Some(extra) = self.last_known_elr.iter().find(|b| !replicas.contains(b)) {
            return Err(format!("last known ELR member {extra} is not a replica"));
        }
        Ok(())
    }
}

/// A topic and its partitions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    pub name: String,
    /// Distinguishes a re-created topic from a deleted one of the same name.
    pub topic_id: u64,
    pub config: TopicConfig,
    pub partitions: BTreeMap<u32, PartitionState>,
}

/// Metadata records starting at offset `from`, as pulled by a broker. `end_offset` is the
/// sender's log end, so the receiver knows whether more remain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataDelta {
    pub from: Offset,
    pub records: Vec<MetadataRecord>,
    pub end_offset: Offset,
}

/// Why a record (or delta) could not be applied to an image.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ImageError {
    #[error("metadata record at offset {offset}: unknown broker {broker}")]
    UnknownBroker { offset: Offset, broker: NodeId },
    #[error("metadata record at offset {offset}: broker {broker} epoch {got} is not its current epoch {current}")]
    StaleBrokerEpoch {
        offset: Offset,
        broker: NodeId,
        current: Offset,
        got: Offset,
    },
    #[error("metadata record at offset {offset}: unknown topic {topic:?}")]
    UnknownTopic { offset: Offset, topic: String },
    #[error("metadata record at offset {offset}: topic {topic:?} already exists")]
    TopicExists { offset: Offset, topic: String },
    #[error(
        "metadata record at offset {offset}: topic {topic:?} has id {current}, record names {got}"
    )]
    TopicIdMismatch {
        offset: Offset,
        topic: String,
        current: u64,
        got: u64,
    },
    #[error("metadata record at offset {offset}: invalid topic config for {topic:?}: {reason}")]
    InvalidTopicConfig {
        offset: Offset,
        topic: String,
        reason: String,
    },
    #[error("metadata record at offset {offset}: invalid state for partition {tp}: {reason}")]
    InvalidPartition {
        offset: Offset,
        tp: TopicPartition,
        reason: String,
    },
    #[error("metadata record at offset {offset}: producer ids from {first} were already allocated (next free is {next})")]
    ProducerIdReuse {
        offset: Offset,
        first: u64,
        next: u64,
    },
    #[error("metadata delta starts at {got} but the image needs offset {expected} next")]
    Gap { expected: Offset, got: Offset },
}

/// Cluster metadata as of `next_offset` applied records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataImage {
    /// Number of records applied = offset of the next record to apply.
    pub next_offset: Offset,
    pub brokers: BTreeMap<NodeId, BrokerInfo>,
    pub topics: BTreeMap<String, TopicInfo>,
    /// Id the next created topic gets.
    pub next_topic_id: u64,
    /// First producer id not yet allocated.
    pub next_producer_id: u64,
}

impl MetadataImage {
    /// The empty image (nothing applied).
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds an image by applying `records` from offset 0.
    pub fn from_records<'a>(
        records: impl IntoIterator<Item = &'a MetadataRecord>,
    ) -> Result<Self, ImageError> {
        let mut image = Self::new();
        for record in records {
            image.apply(record)?;
        }
        Ok(image)
    }

    pub fn broker(&self, id: NodeId) -> Option<&BrokerInfo> {
        self.brokers.get(&id)
    }

    /// Registered and not fenced.
    pub fn is_unfenced(&self, id: NodeId) -> bool {
        self.brokers.get(&id).is_some_and(|b| !b.is_fenced())
    }

    /// Unfenced broker ids, ascending.
    pub fn unfenced_brokers(&self) -> Vec<NodeId> {
        self.brokers
            .values()
            .filter(|b| !b.is_fenced())
            .map(|b| b.id)
            .collect()
    }

    pub fn topic(&self, name: &str) -> Option<&TopicInfo> {
        self.topics.get(name)
    }

    pub fn partition(&self, tp: &TopicPartition) -> Option<&PartitionState> {
        self.topics.get(&tp.topic)?.partitions.get(&tp.partition)
    }

    /// All partitions in (topic, partition) order.
    pub fn partitions(&self) -> impl Iterator<Item = (TopicPartition, &PartitionState)> + '_ {
        self.topics.values().flat_map(|t| {
            t.partitions
                .iter()
                .map(move |(p, s)| (TopicPartition::new(t.name.clone(), *p), s))
        })
    }

    /// Partitions that have `broker` among their replicas.
    pub fn partitions_of_broker(
        &self,
        broker: NodeId,
    ) -> impl Iterator<Item = (TopicPartition, &PartitionState)> + '_ {
        self.partitions()
            .filter(move |(_, s)| s.replicas.contains(&broker))
    }

    /// Applies records `delta.records` that this image has not applied yet. Records before
    /// `next_offset` are skipped, so duplicated or reordered deltas are harmless. Returns how
    /// many records were applied. (A delta whose `end_offset` is below `next_offset` is
    /// simply a late reply: the controller's log is durable and never shrinks.)
    pub fn apply_delta(&mut self, delta: &MetadataDelta) -> Result<usize, ImageError> {
        if delta.from > self.next_offset {
            return Err(ImageError::Gap {
                expected: self.next_offset,
                got: delta.from,
            });
        }
        let skip = (self.next_offset - delta.from) as usize;
        let mut applied = 0;
        for record in delta.records.iter().skip(skip) {
            self.apply(record)?;
            applied += 1;
        }
        Ok(applied)
    }

    /// Applies one record at offset `self.next_offset`. On error the image is unchanged.
    pub fn apply(&mut self, record: &MetadataRecord) -> Result<(), ImageError> {
        let offset = self.next_offset;
        match record {
            MetadataRecord::BrokerRegistered {
                broker,
                incarnation,
            } => {
                self.brokers.insert(
                    *broker,
                    BrokerInfo {
                        id: *broker,
                        broker_epoch: offset,
                        incarnation: *incarnation,
                        state: BrokerState::Unfenced,
                    },
                );
            }
            MetadataRecord::BrokerFenced {
                broker,
                broker_epoch,
            } => {
                let info = self.broker_mut(offset, *broker, *broker_epoch)?;
                info.state = BrokerState::Fenced { since: offset };
            }
            MetadataRecord::BrokerUnfenced {
                broker,
                broker_epoch,
            } => {
                let info = self.broker_mut(offset, *broker, *broker_epoch)?;
                info.state = BrokerState::Unfenced;
            }
            MetadataRecord::TopicCreated {
                name,
                topic_id,
                config,
            } => self.create_topic(offset, name, *topic_id, config)?,
            MetadataRecord::TopicConfigChanged {
                name,
                topic_id,
                config,
            } => self.change_topic_config(offset, name, *topic_id, config)?,
            MetadataRecord::TopicDeleted { name, topic_id } => {
                self.topic_mut(offset, name, *topic_id)?;
                self.topics.remove(name);
            }
            r @ MetadataRecord::PartitionChanged { .. } => {
                let (tp, mut new) = PartitionState::changed_by(r).expect("a partition change");
                self.check_partition_change(offset, tp, &new)?;
                let topic = self
                    .topics
                    .get_mut(&tp.topic)
                    .expect("checked by check_partition_change");
                new.recovered_at_epoch = topic
                    .partitions
                    .get(&tp.partition)
                    .and_then(|old| old.recovered_at_epoch);
                topic.partitions.insert(tp.partition, new);
            }
            MetadataRecord::UncleanRecovery {
                tp,
                leader,
                leader_epoch,
                ..
            } => {
                let state = self
                    .topics
                    .get_mut(&tp.topic)
                    .and_then(|t| t.partitions.get_mut(&tp.partition))
                    .filter(|s| s.leader == Some(*leader) && s.leader_epoch == *leader_epoch)
                    .ok_or_else(|| ImageError::InvalidPartition {
                        offset,
                        tp: tp.clone(),
                        reason: format!(
                            "unclean recovery names leader {leader} at epoch {leader_epoch}, \
                             not the partition's current leader and epoch"
                        ),
                    })?;
                state.recovered_at_epoch = Some(*leader_epoch);
            }
            MetadataRecord::ProducerIdsAllocated { first, count } => {
                if *first < self.next_producer_id {
                    return Err(ImageError::ProducerIdReuse {
                        offset,
                        first: *first,
                        next: self.next_producer_id,
                    });
                }
                self.next_producer_id = first.saturating_add(*count);
            }
        }
        self.next_offset += 1;
        Ok(())
    }

    /// Applies `TopicCreated`: a new topic without partitions (they follow as
    /// `PartitionChanged` records).
    fn create_topic(
        &mut self,
        offset: Offset,
        name: &str,
        topic_id: u64,
        config: &TopicConfig,
    ) -> Result<(), ImageError> {
        if self.topics.contains_key(name) {
            return Err(ImageError::TopicExists {
                offset,
                topic: name.to_string(),
            });
        }
        config
            .validate()
            .map_err(|reason| ImageError::InvalidTopicConfig {
                offset,
                topic: name.to_string(),
                reason,
            })?;
        self.topics.insert(
            name.to_string(),
            TopicInfo {
                name: name.to_string(),
                topic_id,
                config: config.clone(),
                partitions: BTreeMap::new(),
            },
        );
        self.next_topic_id = self.next_topic_id.max(topic_id + 1);
        Ok(())
    }

    /// Applies `TopicConfigChanged`: partition count and replication factor never change.
    fn change_topic_config(
        &mut self,
        offset: Offset,
        name: &str,
        topic_id: u64,
        config: &TopicConfig,
    ) -> Result<(), ImageError> {
        let topic = self.topic_mut(offset, name, topic_id)?;
        let invalid = |reason: String| ImageError::InvalidTopicConfig {
            offset,
            topic: name.to_string(),
            reason,
        };
        config.validate().map_err(invalid)?;
        if config.partitions != topic.config.partitions
            || config.replication_factor != topic.config.replication_factor
        {
            return Err(invalid(
                "partition count and replication factor cannot change".into(),
            ));
        }
        topic.config = config.clone();
        Ok(())
    }

    fn broker_mut(
        &mut self,
        offset: Offset,
        broker: NodeId,
        epoch: Offset,
    ) -> Result<&mut BrokerInfo, ImageError> {
        let info = self
            .brokers
            .get_mut(&broker)
            .ok_or(ImageError::UnknownBroker { offset, broker })?;
        if info.broker_epoch != epoch {
            return Err(ImageError::StaleBrokerEpoch {
                offset,
                broker,
                current: info.broker_epoch,
                got: epoch,
            });
        }
        Ok(info)
    }

    fn topic_mut(
        &mut self,
        offset: Offset,
        name: &str,
        topic_id: u64,
    ) -> Result<&mut TopicInfo, ImageError> {
        let topic = self
            .topics
            .get_mut(name)
            .ok_or_else(|| ImageError::UnknownTopic {
                offset,
                topic: name.to_string(),
            })?;
        if topic.topic_id != topic_id {
            return Err(ImageError::TopicIdMismatch {
                offset,
                topic: name.to_string(),
                current: topic.topic_id,
                got: topic_id,
            });
        }
        Ok(topic)
    }

    /// The invariants every partition change must keep; see `docs/replication-controller.md`.
    fn check_partition_change(
        &self,
        offset: Offset,
        tp: &TopicPartition,
        new: &PartitionState,
    ) -> Result<(), ImageError> {
        let invalid = |reason: String| ImageError::InvalidPartition {
            offset,
            tp: tp.clone(),
            reason,
        };
        let topic = self
            .topics
            .get(&tp.topic)
            .ok_or_else(|| ImageError::UnknownTopic {
                offset,
                topic: tp.topic.clone(),
            })?;
        if tp.partition >= topic.config.partitions {
            return Err(invalid(format!(
                "topic has {} partitions",
                topic.config.partitions
            )));
        }
        new.validate().map_err(invalid)?;
        if new.replicas.len() != topic.config.replication_factor as usize {
            return Err(invalid(format!(
                "{} replicas but replication factor {}",
                new.replicas.len(),
                topic.config.replication_factor
            )));
        }
        if let Some(leader) = new.leader {
            if !self.is_unfenced(leader) {
                return Err(invalid(format!(
                    "leader {leader} is not a live (unfenced) broker"
                )));
            }
        }
        if let Some(old) = topic.partitions.get(&tp.partition) {
            if old.replicas != new.replicas {
                return Err(invalid("replica assignment cannot change".into()));
            }
            if new.partition_epoch <= old.partition_epoch {
                return Err(invalid(format!(
                    "partition epoch {} does not advance past {}",
                    new.partition_epoch, old.partition_epoch
                )));
            }
            let leader_changed = new.leader != old.leader;
            if leader_changed && new.leader_epoch <= old.leader_epoch {
                return Err(invalid(format!(
                    "leader changed but leader epoch {} does not advance past {}",
                    new.leader_epoch, old.leader_epoch
                )));
            }
            if !leader_changed && new.leader_epoch != old.leader_epoch {
                return Err(invalid(format!(
                    "leader epoch changed from {} to {} without a leader change",
                    old.leader_epoch, new.leader_epoch
                )));
            }
        }
        Ok(())
    }
}
