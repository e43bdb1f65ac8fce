//! A partition's transactions as its log records them (Kafka's `ProducerStateManager`
//! ongoing / unreplicated transactions and its aborted-transaction index): which
//! transactions are open and from which offset, which have a marker the high watermark has
//! not yet passed, and every aborted transaction `(producer id, first offset, marker
//! offset)`. Rebuilt from the log with the producer table, so it survives restarts and
//! leader changes.
//!
//! The **last stable offset** is the first offset a read_committed reader may not read:
//! `min(hw, first offset of the oldest transaction not yet decided below the hw)`. A
//! transaction stays undecided until its marker is committed (below the HW), as in Kafka:
//! a marker a new leader may not hold must not let readers past the transaction.

use crate::txn::{AbortedTxn, TxnResult};
use crate::types::Offset;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnIndex {
    /// Open transactions: (first offset, producer id).
    ongoing: BTreeSet<(Offset, u64)>,
    /// Transactions whose marker is in the log but not yet below the HW:
    /// (first offset, marker offset). Pruned by [`TxnIndex::on_high_watermark`].
    unreplicated: BTreeSet<(Offset, Offset)>,
    /// Aborted transactions in marker order (so `last_offset` increases).
    aborted: Vec<AbortedTxn>,
}

impl TxnIndex {
    /// `producer_id`'s transaction opened at `first_offset`.
    pub(crate) fn begin(&mut self, producer_id: u64, first_offset: Offset) {
        self.ongoing.insert((first_offset, producer_id));
    }

    /// `producer_id`'s transaction opened at `first_offset` ended with `result`, its
    /// marker at `marker_offset`.
    pub(crate) fn complete(
        &mut self,
        producer_id: u64,
        first_offset: Offset,
        marker_offset: Offset,
        result: TxnResult,
    ) {
        debug_assert!(first_offset < marker_offset, "a marker follows its records");
        let removed = self.ongoing.remove(&(first_offset, producer_id));
        debug_assert!(removed, "completing a transaction that is not open");
        self.unreplicated.insert((first_offset, marker_offset));
        if result == TxnResult::Abort {
            debug_assert!(self
                .aborted
                .last()
                .is_none_or(|a| a.last_offset < marker_offset));
            self.aborted.push(AbortedTxn {
                producer_id,
                first_offset,
                last_offset: marker_offset,
            });
        }
    }

    /// The HW reached `hw`: markers below it are committed, their transactions decided.
    pub fn on_high_watermark(&mut self, hw: Offset) {
        self.unreplicated.retain(|&(_, marker)| marker >= hw);
    }

    /// The first offset of the oldest transaction not decided below `hw` (open, or its
    /// marker at or past `hw`), if any.
    pub fn first_unstable_offset(&self, hw: Offset) -> Option<Offset> {
        let open = self.ongoing.first().map(|&(first, _)| first);
        let undecided = self
            .unreplicated
            .iter()
            .filter(|&&(_, marker)| marker >= hw)
            .map(|&(first, _)| first)
            .min();
        match (open, undecided) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The last stable offset at high watermark `hw`: read_committed readers read below it.
    pub fn last_stable_offset(&self, hw: Offset) -> Offset {
        self.first_unstable_offset(hw).map_or(hw, |f| f.min(hw))
    }

    /// The aborted transactions a read of `[from, to)` must know about: those whose range
    /// `[first_offset, last_offset)` reaches into it (as Kafka's `collectAbortedTxns`).
    pub fn aborted_overlapping(&self, from: Offset, to: Offset) -> Vec<AbortedTxn> {
        // Sorted by marker offset: skip those ending before `from`.
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        self.aborted[start..]
            .iter()
            .filter(|a| a.first_offset < to)
            .copied()
            .collect()
    }

    /// Every aborted transaction, oldest marker first.
    pub fn aborted(&self) -> &[AbortedTxn] {
        &self.aborted
    }

    /// Open transactions as (producer id, first offset), oldest first.
    pub fn ongoing(&self) -> impl Iterator<Item = (u64, Offset)> + '_ {
        self.ongoing.iter().map(|&(first, pid)| (pid, first))
    }
}
