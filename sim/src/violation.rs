//! What a failed invariant reports: every invariant's name, which are safety properties,
//! and one [`Violation`]. A ground-floor module: the report, the scenario format and the
//! tracer name invariants without importing the checks ([`crate::invariants`]).

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
/// After the last fault heals, every follower that is up and whose log reads is back in
/// its leader's ISR within the liveness bound (a follower stuck on a divergent suffix it
/// cannot get rid of never is).
pub const UNDER_REPLICATED: &str = "under-replicated";

/// The leader the controller names for a partition is in the ISR it names, and every
/// replica presuming leadership lists itself in its own ISR (TLA+ `LeaderInIsr`).
pub const LEADER_IN_ISR: &str = "leader-in-isr";
/// Every member of the controller's ISR holds, at every offset below the HW of a replica
/// presuming leadership, the record that replica holds (TLA+ `StrongIsr`).
pub const STRONG_ISR: &str = "strong-isr";
/// No replica's high watermark is past its log end (TLA+ `HighWatermarkRangeOk`).
pub const VALID_HW: &str = "valid-high-watermark";
/// Along a partition's committed log, a producer id's epoch never goes back: once a batch
/// of epoch e is committed, no later batch of that producer id carries an epoch below e.
/// A lower one is a write by a fenced (zombie) instance that the leader should have refused
/// with `InvalidProducerEpoch` (KIP-360, KIP-588). Not judged on a partition after an
/// unclean election, which may legitimately lose the newer epoch's batches.
pub const FENCED_PRODUCER_WRITE: &str = "fenced-producer-write";
/// A partition consumer never skips a record silently: every record of the final
/// committed log at an offset its position passed was read by it there, unless a
/// truncation it reported (KIP-320's `DivergingEpoch`) covers that offset.
pub const SKIPPED_RECORDS: &str = "consumer-skipped-records";
/// A follower that truncates on its leader's diverging-epoch answer (KIP-279/320) and
/// concludes that its log matches the leader's below the truncation point really holds the
/// leader's records there (Raft's Log Matching; docs/simulation.md).
pub const LOG_MATCHING: &str = "log-matching";

// The controller quorum's invariants (`invariants/quorum.rs`), judged in runs with
// `--controllers 3` or 5 (Raft; `fenced-broker-ack` where brokers hold a session lease).

/// At most one controller leads a Raft term (election safety).
pub const RAFT_TWO_LEADERS: &str = "raft-two-leaders";
/// No controller goes on leading an old Raft term for long after a newer term's leader was
/// seen (check-quorum: a leader without a majority steps down).
pub const RAFT_STALE_LEADER: &str = "raft-stale-leader";
/// Log matching: two controllers' logs holding an entry of the same index and term hold
/// the same entries up to it.
pub const RAFT_LOG_MATCHING: &str = "raft-log-matching";
/// Committed metadata is never lost or reordered: once an index is committed anywhere,
/// every controller that commits that index commits the same entry.
pub const METADATA_COMMIT_LOST: &str = "metadata-commit-lost";
/// No broker acknowledges a produce request after the committed metadata fenced it.
pub const FENCED_BROKER_ACK: &str = "fenced-broker-ack";
/// Every broker applies the committed metadata log in order: within one process
/// incarnation its image's offset never goes back, never passes what was committed, and
/// the records it applied are the committed ones at their offsets (`invariants/metadata.rs`;
/// judged with one controller too).
pub const METADATA_IN_ORDER: &str = "metadata-in-order";

// The consumer-group invariants, checked by `group_invariants` (which depends on this module,
// not the other way round).

/// At most one member of the group owns a partition in any generation.
pub const GROUP_SINGLE_OWNER: &str = "group-single-owner";
/// After the last fault heals, no partition stays without an owner for longer than the
/// rebalance bound.
pub const GROUP_UNOWNED: &str = "group-partition-unowned";
/// The group's committed offset of a partition never goes backwards (except after an
/// explicit reset), as seen at the coordinator currently in charge.
pub const GROUP_OFFSET_REGRESSION: &str = "group-offset-regression";
/// A commit acknowledged to a member survives coordinator failover: a coordinator that
/// loads the group, and every later OffsetFetch answer, holds at least that offset.
pub const GROUP_ACKED_COMMIT_LOST: &str = "group-acked-commit-lost";
/// With commit-after-process, every record below an acknowledged committed offset was
/// processed by some member.
pub const GROUP_UNPROCESSED: &str = "group-unprocessed-commit";

// The transaction invariants (`invariants/txn.rs`), judged in `--workload txn` runs only.

/// A read_committed consumer never returns a record whose transaction the committed log
/// aborts (G1a as the log decides it).
pub const TXN_ABORTED_READ: &str = "txn-aborted-read";
/// The last stable offset never passes an open transaction (a record served to
/// read_committed has its marker below the serving leader's HW) and never goes back within
/// a leader's epoch.
pub const TXN_LSO: &str = "txn-lso";
/// Atomic visibility: the committed logs never decide one transaction both ways (some of
/// its records committed and others aborted, on one partition or across several).
pub const TXN_TORN: &str = "txn-torn";
/// Once a newer instance of a transactional id is initialised, an older instance never
/// writes or commits at an identity (producer id, epoch) not older than the newer one's.
pub const TXN_FENCED_WRITE: &str = "txn-fenced-write";
/// A marker applies to its own transaction only: it never closes records of two client
/// transactions at once, nor records of a transaction its client was told ended the
/// other way (KAFKA-17754: a late marker landing on the next transaction).
pub const TXN_MARKER_MISAPPLIED: &str = "txn-marker-misapplied";

/// The transaction invariants, in report order.
pub const TXN_NAMES: &[&str] = &[
    TXN_ABORTED_READ,
    TXN_LSO,
    TXN_TORN,
    TXN_FENCED_WRITE,
    TXN_MARKER_MISAPPLIED,
];

/// Read-process-write is exactly-once (txn workload): at the end of the run, every
/// committed input record below the pipelines' group's committed offset has its output
/// exactly once in each output topic's committed records, and no other output is there
/// (none of an aborted input, none above the committed offset unless a transaction is
/// still completing). Judged from the final logs (`invariants/exactly_once.rs`).
pub const TXN_EXACTLY_ONCE: &str = "txn-exactly-once";

/// The group invariants, in report order.
pub const GROUP_NAMES: &[&str] = &[
    GROUP_SINGLE_OWNER,
    GROUP_UNOWNED,
    GROUP_OFFSET_REGRESSION,
    GROUP_ACKED_COMMIT_LOST,
    GROUP_UNPROCESSED,
];

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
    UNDER_REPLICATED,
    LEADER_IN_ISR,
    STRONG_ISR,
    VALID_HW,
    FENCED_PRODUCER_WRITE,
    SKIPPED_RECORDS,
    LOG_MATCHING,
    RAFT_TWO_LEADERS,
    RAFT_STALE_LEADER,
    RAFT_LOG_MATCHING,
    METADATA_COMMIT_LOST,
    FENCED_BROKER_ACK,
    METADATA_IN_ORDER,
    GROUP_SINGLE_OWNER,
    GROUP_UNOWNED,
    GROUP_OFFSET_REGRESSION,
    GROUP_ACKED_COMMIT_LOST,
    GROUP_UNPROCESSED,
    TXN_ABORTED_READ,
    TXN_LSO,
    TXN_TORN,
    TXN_FENCED_WRITE,
    TXN_MARKER_MISAPPLIED,
    TXN_EXACTLY_ONCE,
];

/// The invariants that judge progress after the heal rather than what was ever observed:
/// a partition without a leader (`liveness`), a follower not back in its ISR
/// (`under-replicated`), a group partition no member owns (`group-partition-unowned`). A
/// correct core may fail them under faults it cannot recover from by design (a corrupt last
/// ISR copy stays offline, docs/simulation.md "Liveness failures by cause");
/// nothing they report was ever wrong, only late.
pub const PROGRESS: &[&str] = &[LIVENESS, UNDER_REPLICATED, GROUP_UNOWNED];

/// Whether an invariant is a safety property (everything but the [`PROGRESS`] ones): a
/// safety failure is always a finding, whatever the faults.
pub fn is_safety(name: &str) -> bool {
    !PROGRESS.contains(&name)
}

/// One violation: which invariant, when, and what was seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub invariant: &'static str,
    pub at: SimTime,
    pub detail: String,
}
