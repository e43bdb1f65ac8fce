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

/// `n` in decimal, as `n.to_string()` would write it, built in `buf` without the formatting
/// machinery (about 1,000 instructions a call through `fmt`; this runs per record written).
pub fn decimal(n: u64, buf: &mut [u8; 20]) -> &str {
    std::str::from_utf8(decimal_digits(n, buf)).expect("ASCII digits")
}

/// [`decimal`]'s digits as bytes (for writers of bytes: no UTF-8 check).
pub fn decimal_digits(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    // Two digits per division: half the divisions of one at a time.
    const PAIRS: [u8; 200] = {
        let mut t = [0u8; 200];
        let mut i = 0;
        while i < 100 {
            t[2 * i] = b'0' + (i / 10) as u8;
            t[2 * i + 1] = b'0' + (i % 10) as u8;
            i += 1;
        }
        t
    };
    let mut start = buf.len();
    let mut n = n;
    while n >= 100 {
        let r = (n % 100) as usize * 2;
        n /= 100;
        start -= 2;
        buf[start..start + 2].copy_from_slice(&PAIRS[r..r + 2]);
    }
    if n >= 10 {
        let r = n as usize * 2;
        start -= 2;
        buf[start..start + 2].copy_from_slice(&PAIRS[r..r + 2]);
    } else {
        start -= 1;
        buf[start] = b'0' + n as u8;
    }
    &buf[start..]
}

#[cfg(test)]
mod tests {
    use super::{decimal, earliest};

    #[test]
    fn decimal_writes_what_display_writes() {
        let mut buf = [0u8; 20];
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            101,
            999,
            1000,
            12345,
            1 << 40,
            u64::MAX - 1,
            u64::MAX,
        ] {
            assert_eq!(decimal(n, &mut buf), n.to_string());
        }
        for n in 0..100_000u64 {
            assert_eq!(decimal(n, &mut buf), n.to_string());
        }
    }

    #[test]
    fn earliest_is_the_min_of_the_deadlines_present() {
        assert_eq!(earliest(None, None), None);
        assert_eq!(earliest(Some(5), None), Some(5));
        assert_eq!(earliest(None, Some(7)), Some(7));
        assert_eq!(earliest(Some(9), Some(3)), Some(3));
        assert_eq!(earliest(Some(0), Some(3)), Some(0));
    }
}
