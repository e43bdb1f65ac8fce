//! Small shared vocabulary types: offsets, epochs, ids, time.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Position of a record in a partition log. Dense and increasing from the log start.
pub type Offset = u64;
/// Leader epoch of a partition: bumped by the controller on every leader change.
pub type LeaderEpoch = u32;
/// Partition epoch: bumped by the controller on every leader or ISR change.
pub type PartitionEpoch = u32;
/// Broker (and controller) node id.
pub type NodeId = u32;
/// Monotonic time given to state machines by their driver, in nanoseconds since an
/// arbitrary origin (simulated or real). State machines never read a clock themselves.
pub type Nanos = u64;
/// Record timestamps, as in Kafka: milliseconds since the Unix epoch, chosen by producers.
pub type TimestampMs = i64;

/// A topic partition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: u32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: u32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
