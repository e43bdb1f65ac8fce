//! `TxnMetadata`: the coordinator's state of one transactional id (Kafka's
//! `TransactionMetadata`), and its transitions as pure functions.
//!
//! ```text
//!          InitProducerId                AddPartitions/AddOffsets          EndTxn(commit)
//!  (new) ----------------> Empty ---------------------------> Ongoing ----------------> PrepareCommit
//!                            ^  ^                              |  |  \                      | markers
//!                            |  |             InitProducerId / |  |   \ EndTxn(abort)       v  written
//!                            |  |             timeout:         |  |    +-----> PrepareAbort  CompleteCommit
//!                            |  |        PrepareEpochFence <---+  |               ^    |        |
//!                            |  |               +-----------------|---------------+    v        |
//!                            |  +------ InitProducerId ------ CompleteAbort <---markers written |
//!                            +--------- InitProducerId -----------------------------------------+
//! ```
//! (`Complete*` -> `Ongoing` too, by the next AddPartitions; `Empty`/`Complete*` -> `Dead`.)
//!
//! Each transition builds the *target* metadata from the current one; the coordinator
//! writes it to `__transaction_state` and adopts it only once the write is committed, so
//! the durable and the in-memory state never disagree. `PrepareEpochFence` is Kafka's
//! in-memory step between an `Ongoing` transaction and the abort that fences it (on
//! InitProducerId or timeout): [`TxnMetadata::fence_and_abort`] passes through it and the
//! record written says `PrepareAbort`, as in Kafka.

use crate::types::{Nanos, TopicPartition};
use std::collections::BTreeSet;

/// The largest producer epoch handed out: Kafka's epochs are int16, and the coordinator
/// keeps one value spare for the bump of a fencing abort.
pub const MAX_PRODUCER_EPOCH: u16 = i16::MAX as u16 - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnState {
    /// Initialised, no transaction open.
    Empty,
    /// A transaction is open: partitions have been added.
    Ongoing,
    /// EndTxn(commit) decided: markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a fence or a timeout decided: markers are being written.
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    /// In memory only: an Ongoing transaction is about to be aborted at a bumped epoch.
    PrepareEpochFence,
    /// The id is being removed.
    Dead,
}

impl TxnState {
    /// Whether a transaction in this state is being completed (markers in flight).
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    pub fn is_complete(self) -> bool {
        matches!(self, TxnState::CompleteCommit | TxnState::CompleteAbort)
    }
}

/// Kafka's `TransactionState.validPreviousStates`: whether `from -> to` is a legal step.
pub fn is_legal(from: TxnState, to: TxnState) -> bool {
    use TxnState::*;
    match to {
        Empty => matches!(from, Empty | CompleteCommit | CompleteAbort),
        Ongoing => matches!(from, Ongoing | Empty | CompleteCommit | CompleteAbort),
        PrepareCommit => from == Ongoing,
        PrepareAbort => matches!(from, Ongoing | PrepareEpochFence),
        CompleteCommit => from == PrepareCommit,
        CompleteAbort => from == PrepareAbort,
        PrepareEpochFence => from == Ongoing,
        Dead => matches!(from, Empty | CompleteCommit | CompleteAbort),
    }
}

/// One transactional id's state (the whole value of its `__transaction_state` record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMetadata {
    pub producer_id: u64,
    pub producer_epoch: u16,
    /// The epoch before the last bump made by EndTxn (KIP-890 part 2) or InitProducerId:
    /// a retry of that request carries it and is answered as the original was. `None`
    /// after a fencing bump (the fenced producer gets `ProducerFenced`).
    pub last_producer_epoch: Option<u16>,
    /// `transaction.timeout.ms` as the producer asked at InitProducerId.
    pub timeout_ms: u32,
    pub state: TxnState,
    /// The partitions of the ongoing (or completing) transaction.
    pub partitions: BTreeSet<TopicPartition>,
    /// When the ongoing transaction began (coordinator clock); 0 when none is open.
    pub start_time: Nanos,
    /// The completing transaction's end bumped the epoch (KIP-890 part 2): its markers
    /// carry an epoch newer than the one its writes were made at, so a partition can tell
    /// a late copy of them from a marker of the next transaction (which writes at that
    /// very epoch). False without the bump (an old client's EndTxn, the zoo's
    /// `late-txn-marker`), and whenever no transaction is completing.
    pub bumped: bool,
}

impl TxnMetadata {
    /// A fresh id's metadata with the producer id the controller handed out.
    pub fn new(producer_id: u64, producer_epoch: u16, timeout_ms: u32) -> Self {
        Self {
            producer_id,
            producer_epoch,
            last_producer_epoch: None,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_time: 0,
            bumped: false,
        }
    }

    fn to(&self, state: TxnState) -> Self {
        debug_assert!(
            is_legal(self.state, state),
            "illegal transaction transition {:?} -> {:?}",
            self.state,
            state
        );
        Self {
            state,
            // Only a completing transaction's markers carry the flag.
            bumped: self.bumped
                && matches!(
                    state,
                    TxnState::PrepareCommit
                        | TxnState::PrepareAbort
                        | TxnState::CompleteCommit
                        | TxnState::CompleteAbort
                ),
            ..self.clone()
        }
    }

    /// Whether the epoch can be bumped without running out (else a new producer id).
    pub fn epoch_exhausted(&self) -> bool {
        self.producer_epoch >= MAX_PRODUCER_EPOCH
    }

    /// InitProducerId on an idle id: `Empty` at `epoch + 1` (or the same epoch when `bump`
    /// is false: the `no_txn_fencing` bug), with the new timeout.
    pub fn reinit(&self, timeout_ms: u32, bump: bool) -> Self {
        debug_assert!(
            !self.epoch_exhausted() || !bump,
            "bump of an exhausted epoch"
        );
        let mut m = self.to(TxnState::Empty);
        if bump {
            m.last_producer_epoch = Some(self.producer_epoch);
            m.producer_epoch = self.producer_epoch + 1;
        }
        m.timeout_ms = timeout_ms;
        m.partitions.clear();
        m.start_time = 0;
        m
    }

    /// InitProducerId with a new producer id (first use is [`Self::new`]; this is the
    /// epoch-exhausted case): `Empty` at the new id, epoch 0.
    pub fn with_new_producer_id(&self, producer_id: u64, epoch: u16, timeout_ms: u32) -> Self {
        let mut m = self.to(TxnState::Empty);
        m.producer_id = producer_id;
        m.producer_epoch = epoch;
        m.last_producer_epoch = None;
        m.timeout_ms = timeout_ms;
        m.partitions.clear();
        m.start_time = 0;
        m
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: `Ongoing` with `partitions` added; a
    /// transaction that was not open starts at `now`.
    pub fn add_partitions(&self, now: Nanos, partitions: &[TopicPartition]) -> Self {
        let mut m = self.to(TxnState::Ongoing);
        if self.state != TxnState::Ongoing {
            m.partitions.clear();
            m.start_time = now;
        }
        m.partitions.extend(partitions.iter().cloned());
        m
    }

    /// EndTxn: `Prepare{Commit,Abort}`; with `bump` (KIP-890 part 2) at `epoch + 1`, which
    /// the markers carry and the producer is handed.
    pub fn prepare(&self, commit: bool, bump: bool) -> Self {
        let mut m = self.to(if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        });
        if bump && !self.epoch_exhausted() {
            m.last_producer_epoch = Some(self.producer_epoch);
            m.producer_epoch = self.producer_epoch + 1;
            m.bumped = true;
        }
        m
    }

    /// InitProducerId over an open transaction, or its timeout: `Ongoing ->
    /// PrepareEpochFence -> PrepareAbort` at `epoch + 1` (unless `bump` is false: the
    /// `no_txn_fencing` bug), so the current producer instance is fenced.
    pub fn fence_and_abort(&self, bump: bool) -> Self {
        let mut fence = self.to(TxnState::PrepareEpochFence);
        if bump && !self.epoch_exhausted() {
            fence.producer_epoch = self.producer_epoch + 1;
            // No retry identity: the fenced instance must not pass as a retry.
            fence.last_producer_epoch = None;
        }
        let mut abort = fence.to(TxnState::PrepareAbort);
        abort.bumped = fence.producer_epoch != self.producer_epoch;
        abort
    }

    /// All markers are written: `Complete{Commit,Abort}`, partitions cleared.
    pub fn complete(&self) -> Self {
        let mut m = self.to(match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            _ => TxnState::CompleteAbort,
        });
        m.partitions.clear();
        m.start_time = 0;
        m
    }

    /// The result the markers of a `Prepare*`/`Complete*` transaction carry.
    pub fn result(&self) -> Option<crate::txn::TxnResult> {
        match self.state {
            TxnState::PrepareCommit | TxnState::CompleteCommit => {
                Some(crate::txn::TxnResult::Commit)
            }
            TxnState::PrepareAbort | TxnState::CompleteAbort => Some(crate::txn::TxnResult::Abort),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TxnState::*;
    use super::*;

    const ALL: [TxnState; 8] = [
        Empty,
        Ongoing,
        PrepareCommit,
        PrepareAbort,
        CompleteCommit,
        CompleteAbort,
        PrepareEpochFence,
        Dead,
    ];

    /// The whole table, against Kafka's `validPreviousStates`.
    #[test]
    fn the_transition_table_is_kafkas() {
        let legal: &[(TxnState, TxnState)] = &[
            (Empty, Empty),
            (CompleteCommit, Empty),
            (CompleteAbort, Empty),
            (Empty, Ongoing),
            (Ongoing, Ongoing),
            (CompleteCommit, Ongoing),
            (CompleteAbort, Ongoing),
            (Ongoing, PrepareCommit),
            (Ongoing, PrepareAbort),
            (PrepareEpochFence, PrepareAbort),
            (PrepareCommit, CompleteCommit),
            (PrepareAbort, CompleteAbort),
            (Ongoing, PrepareEpochFence),
            (Empty, Dead),
            (CompleteCommit, Dead),
            (CompleteAbort, Dead),
        ];
        for from in ALL {
            for to in ALL {
                assert_eq!(
                    is_legal(from, to),
                    legal.contains(&(from, to)),
                    "{from:?} -> {to:?}"
                );
            }
        }
    }

    fn tp(p: u32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    #[test]
    fn a_transaction_runs_its_course() {
        let m = TxnMetadata::new(9, 0, 1000);
        let on = m.add_partitions(50, &[tp(0)]);
        assert_eq!((on.state, on.start_time), (Ongoing, 50));
        let on = on.add_partitions(80, &[tp(1), tp(0)]);
        assert_eq!(
            on.start_time, 50,
            "adding to an open transaction keeps its start"
        );
        assert_eq!(on.partitions.len(), 2);
        let pc = on.prepare(true, true);
        assert_eq!(
            (pc.state, pc.producer_epoch, pc.last_producer_epoch),
            (PrepareCommit, 1, Some(0))
        );
        assert_eq!(pc.partitions.len(), 2, "markers go to every partition");
        let cc = pc.complete();
        assert_eq!((cc.state, cc.partitions.len()), (CompleteCommit, 0));
        assert_eq!(cc.result(), Some(crate::txn::TxnResult::Commit));
        // Without part 2 the epoch stays.
        assert_eq!(on.prepare(false, false).producer_epoch, 0);
        let next = cc.add_partitions(99, &[tp(3)]);
        assert_eq!(next.partitions, BTreeSet::from([tp(3)]));
        assert_eq!(next.start_time, 99);
    }

    #[test]
    fn fencing_bumps_without_a_retry_identity() {
        let on = TxnMetadata::new(9, 4, 1000).add_partitions(0, &[tp(0)]);
        let f = on.fence_and_abort(true);
        assert_eq!(
            (f.state, f.producer_epoch, f.last_producer_epoch),
            (PrepareAbort, 5, None)
        );
        assert_eq!(on.fence_and_abort(false).producer_epoch, 4);
        let r = f.complete().reinit(500, true);
        assert_eq!((r.state, r.producer_epoch, r.timeout_ms), (Empty, 6, 500));
        assert_eq!(r.last_producer_epoch, Some(5));
    }

    #[test]
    #[should_panic(expected = "illegal transaction transition")]
    #[cfg(debug_assertions)]
    fn an_illegal_step_is_caught() {
        let _ = TxnMetadata::new(1, 0, 10).prepare(true, true);
    }
}
