//! The invariants the simulator checks while a run goes, and their violations.

use crate::time::SimTime;
use serde::Serialize;

/// No acknowledged acks=all write is lost: once acked at offset o, every later leader
/// holds it at o and consumers read it there.
pub const ACKED_WRITE_LOST: &str = "acked-write-lost";
/// Replicas agree on every offset below their high watermark.
pub const REPLICA_DIVERGENCE: &str = "replica-divergence";
/// A leader's high watermark never moves backwards within its epoch.
pub const HW_REGRESSION: &str = "hw-regression";
/// At most one broker acknowledges writes for a partition at any moment.
pub const SPLIT_BRAIN: &str = "concurrent-acking-leaders";
/// Consumers never read at or above the high watermark of the broker serving them.
pub const DIRTY_READ: &str = "dirty-read";
/// A consumer never sees the record at an offset change.
pub const RECORD_CHANGED: &str = "record-changed";
/// After the last fault heals, every partition has a leader and every acked record is
/// readable, within the liveness bound.
pub const LIVENESS: &str = "liveness";
/// The client history passes skein-jepsen's checker.
pub const HISTORY: &str = "history";

/// Every invariant, in report order.
pub const NAMES: &[&str] = &[
    ACKED_WRITE_LOST,
    REPLICA_DIVERGENCE,
    HW_REGRESSION,
    SPLIT_BRAIN,
    DIRTY_READ,
    RECORD_CHANGED,
    LIVENESS,
    HISTORY,
];

/// One violation: which invariant, when, and what was seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub invariant: &'static str,
    pub at: SimTime,
    pub detail: String,
}
