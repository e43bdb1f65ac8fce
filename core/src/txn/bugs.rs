//! Deliberate transaction-protocol bugs for the bug zoo (all false by default), one per
//! protection KIP-98/447/890 adds. They join [`crate::bugs::BUG_NAMES`] (as `late-txn-marker`,
//! `unverified-txn-partition`, `no-lso`, `txn-offsets-visible-early`, `no-txn-fencing`) once
//! the simulator's transactional workload finds each of them within a tested bound.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnBugs {
    /// KIP-890 part 2 off (KAFKA-17754's shape): the coordinator does not bump the
    /// producer epoch at EndTxn; markers carry the transaction's own epoch, so a delayed
    /// marker (or a late produce) of a finished transaction is taken as part of the next one.
    #[serde(default)]
    pub late_txn_marker: bool,
    /// KIP-890 part 1 off: a partition leader appends a transactional batch without asking
    /// the coordinator whether the partition is in the producer's ongoing transaction.
    #[serde(default)]
    pub unverified_txn_partition: bool,
    /// read_committed fetches are bounded by the high watermark, not the last stable
    /// offset: records of open transactions are returned.
    #[serde(default)]
    pub no_lso: bool,
    /// The group coordinator applies a TxnOffsetCommit at once, not when the transaction's
    /// commit marker lands: offsets of a transaction that later aborts are visible.
    #[serde(default)]
    pub txn_offsets_visible_early: bool,
    /// InitProducerId with a transactional id does not bump the epoch: an older producer
    /// instance (a zombie) is not fenced and goes on writing and committing.
    #[serde(default)]
    pub no_txn_fencing: bool,
}

impl TxnBugs {
    pub fn any(&self) -> bool {
        self.late_txn_marker
            || self.unverified_txn_partition
            || self.no_lso
            || self.txn_offsets_visible_early
            || self.no_txn_fencing
    }
}
