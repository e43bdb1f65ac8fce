//! Per-topic configuration: what a topic is created with and what `TopicConfigChanged`
//! records carry. Its own module so that records and the image both depend on it, and the
//! image depends on records, never the other way round.

use serde::{Deserialize, Serialize};

/// Per-topic configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfig {
    pub partitions: u32,
    pub replication_factor: u16,
    /// acks=all produce is refused when the ISR is smaller than this.
    pub min_insync_replicas: u16,
    /// Allow electing a leader from outside the ISR when no ISR member is alive (possible
    /// data loss; always reported).
    pub unclean_leader_election: bool,
    /// KIP-966's `unclean.recovery.strategy`: what the controller does for a partition none
    /// of whose ISR and ELR members can lead (docs/replication-controller.md, "Unclean
    /// recovery"). Applies when `unclean_leader_election` is off (that older switch elects
    /// at once, without asking the replicas).
    #[serde(default)]
    pub unclean_recovery_strategy: UncleanRecoveryStrategy,
    /// Delete segments older than this (None: keep forever).
    pub retention_ms: Option<i64>,
    /// Delete old segments beyond this many bytes per partition (None: no limit).
    pub retention_bytes: Option<u64>,
    /// Kafka's `cleanup.policy`: trim by retention (`delete`, the default), keep the latest
    /// record of every key (`compact`), or both (docs/compaction.md).
    #[serde(default)]
    pub cleanup_policy: CleanupPolicy,
    /// Kafka's `delete.retention.ms`: how long a tombstone (a keyed record with a null
    /// value) stays readable after the cleaning that first saw it.
    #[serde(default = "default_delete_retention_ms")]
    pub delete_retention_ms: i64,
    /// Kafka's `min.compaction.lag.ms`: a record younger than this is never compacted.
    #[serde(default)]
    pub min_compaction_lag_ms: i64,
    /// Kafka's `min.cleanable.dirty.ratio`, in thousandths (500 = 0.5): a log is cleaned
    /// once the uncleaned share of its cleanable bytes reaches it.
    #[serde(default = "default_dirty_ratio_permille")]
    pub min_cleanable_dirty_ratio_permille: u16,
}

/// Kafka's default `delete.retention.ms`: one day.
pub const DEFAULT_DELETE_RETENTION_MS: i64 = 24 * 3600 * 1000;

/// Kafka's default `min.cleanable.dirty.ratio` (0.5), in thousandths.
pub const DEFAULT_DIRTY_RATIO_PERMILLE: u16 = 500;

fn default_delete_retention_ms() -> i64 {
    DEFAULT_DELETE_RETENTION_MS
}

fn default_dirty_ratio_permille() -> u16 {
    DEFAULT_DIRTY_RATIO_PERMILLE
}

/// Kafka's `cleanup.policy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CleanupPolicy {
    /// Old segments are deleted by `retention.ms` / `retention.bytes`.
    #[default]
    Delete,
    /// The log keeps at least the latest record of every key; nothing is deleted by age.
    Compact,
    /// Both: compacted, and old segments deleted by retention.
    CompactDelete,
}

impl CleanupPolicy {
    /// The config value, as Kafka spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Compact => "compact",
            Self::CompactDelete => "compact,delete",
        }
    }

    pub fn compacts(self) -> bool {
        matches!(self, Self::Compact | Self::CompactDelete)
    }

    pub fn deletes(self) -> bool {
        matches!(self, Self::Delete | Self::CompactDelete)
    }
}

impl std::str::FromStr for CleanupPolicy {
    type Err = String;

    /// Kafka's list syntax: `delete`, `compact`, `compact,delete` (either order, spaces
    /// allowed).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts: Vec<String> = s
            .split(',')
            .map(|p| p.trim().to_ascii_lowercase())
            .collect();
        parts.sort();
        parts.dedup();
        match parts.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["delete"] => Ok(Self::Delete),
            ["compact"] => Ok(Self::Compact),
            ["compact", "delete"] => Ok(Self::CompactDelete),
            _ => Err(format!(
                "unknown cleanup.policy {s:?} (delete, compact or compact,delete)"
            )),
        }
    }
}

impl Default for TopicConfig {
    fn default() -> Self {
        Self {
            partitions: 1,
            replication_factor: 1,
            min_insync_replicas: 1,
            unclean_leader_election: false,
            unclean_recovery_strategy: UncleanRecoveryStrategy::default(),
            retention_ms: None,
            retention_bytes: None,
            cleanup_policy: CleanupPolicy::default(),
            delete_retention_ms: DEFAULT_DELETE_RETENTION_MS,
            min_compaction_lag_ms: 0,
            min_cleanable_dirty_ratio_permille: DEFAULT_DIRTY_RATIO_PERMILLE,
        }
    }
}

/// KIP-966's `unclean.recovery.strategy`. Balanced is the default, as in KIP-966.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum UncleanRecoveryStrategy {
    /// Never elect uncleanly: the partition waits for an ISR or ELR member (or an operator).
    None,
    /// Recover only when every ISR and ELR member's copy is damaged (reported corrupt: it can
    /// never lead as it is). Waits until every ISR, ELR and last known ELR member has
    /// answered, or `unclean_recovery_timeout`, and never elects a replica whose usable log
    /// ends below a high watermark that any answering replica reported: whatever some
    /// replica knew committed must survive the election.
    #[default]
    Balanced,
    /// Recover as soon as no ISR or ELR member can lead (fenced, offline or damaged), with
    /// the first answers: the best replica leads even if it lacks committed records.
    Aggressive,
}

impl UncleanRecoveryStrategy {
    /// The config value's name, as `unclean.recovery.strategy` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::Balanced => "Balanced",
            Self::Aggressive => "Aggressive",
        }
    }
}

impl std::str::FromStr for UncleanRecoveryStrategy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Self::None),
            "balanced" => Ok(Self::Balanced),
            "aggressive" => Ok(Self::Aggressive),
            _ => Err(format!(
                "unknown unclean.recovery.strategy {s:?} (None, Balanced or Aggressive)"
            )),
        }
    }
}

impl TopicConfig {
    /// The log's compaction settings: None unless `cleanup.policy` holds `compact`.
    pub fn compaction(&self) -> Option<crate::log::CompactionConfig> {
        self.cleanup_policy
            .compacts()
            .then_some(crate::log::CompactionConfig {
                delete_retention_ms: self.delete_retention_ms,
                min_compaction_lag_ms: self.min_compaction_lag_ms,
                min_cleanable_dirty_ratio_permille: self.min_cleanable_dirty_ratio_permille,
            })
    }

    /// Checks the config on its own; returns the reason it is invalid.
    pub fn validate(&self) -> Result<(), String> {
        if self.partitions == 0 {
            return Err("partitions must be at least 1".into());
        }
        if self.replication_factor == 0 {
            return Err("replication factor must be at least 1".into());
        }
        if self.min_insync_replicas == 0 {
            return Err("min.insync.replicas must be at least 1".into());
        }
        if self.min_insync_replicas > self.replication_factor {
            return Err(format!(
                "min.insync.replicas {} exceeds replication factor {}",
                self.min_insync_replicas, self.replication_factor
            ));
        }
        if matches!(self.retention_ms, Some(ms) if ms <= 0) {
            return Err("retention.ms must be positive".into());
        }
        if self.delete_retention_ms < 0 {
            return Err("delete.retention.ms must not be negative".into());
        }
        if self.min_compaction_lag_ms < 0 {
            return Err("min.compaction.lag.ms must not be negative".into());
        }
        if self.min_cleanable_dirty_ratio_permille > 1000 {
            return Err("min.cleanable.dirty.ratio must be between 0 and 1".into());
        }
        Ok(())
    }
}
