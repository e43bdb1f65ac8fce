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
            retention_ms: None,
            retention_bytes: None,
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
