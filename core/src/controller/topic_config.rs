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
        Ok(())
    }
}
