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

/// The earlier of two optional deadlines (`None`: no deadline). Written out because
/// `[a, b].into_iter().flatten().min()` costs several times the instructions, and the timer
/// folds run after every step of a simulation.
#[inline]
pub fn earliest(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

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

#[cfg(test)]
mod tests {
    use super::earliest;

    #[test]
    fn earliest_is_the_min_of_the_deadlines_present() {
        assert_eq!(earliest(None, None), None);
        assert_eq!(earliest(Some(5), None), Some(5));
        assert_eq!(earliest(None, Some(7)), Some(7));
        assert_eq!(earliest(Some(9), Some(3)), Some(3));
        assert_eq!(earliest(Some(0), Some(3)), Some(0));
    }
}
