//! The partition's transaction state against the definition: a property test drives random
//! appends (plain, idempotent, transactional), markers and HW moves through the producer
//! table and compares its LSO and aborted index with a plain model computed from the log;
//! unit tests pin the epoch and coordinator fencing of markers.

use super::*;
use crate::log::{ProducerInfo, RecordBatch, TxnMarker};
use crate::txn::{AbortedTxn, TxnResult};
use crate::types::Offset;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn info(producer_id: u64, producer_epoch: u16, base_sequence: u32) -> ProducerInfo {
    ProducerInfo {
        producer_id,
        producer_epoch,
        base_sequence,
    }
}

fn marker(producer_id: u64, producer_epoch: u16, result: TxnResult, coord: u32) -> TxnMarker {
    TxnMarker {
        producer_id,
        producer_epoch,
        result,
        coordinator_epoch: coord,
    }
}

/// A transactional data batch of `n` records from `pid` at `seq`, placed at `at`.
fn txn_batch(pid: u64, epoch: u16, seq: u32, n: usize, at: Offset) -> RecordBatch {
    RecordBatch::from_values(0, (0..n).map(|i| vec![i as u8]))
        .transactional()
        .with_producer(Some(info(pid, epoch, seq)))
        .at(at)
}

/// One transaction as the model sees it: `[first, marker)`, decided by `result` (None:
/// still open).
#[derive(Clone, Debug)]
struct ModelTxn {
    pid: u64,
    first: Offset,
    end: Option<(Offset, TxnResult)>,
}

/// The definition, from the log alone: a producer's transaction opens at its first
/// transactional batch and closes at its next marker.
fn model(log: &[RecordBatch]) -> Vec<ModelTxn> {
    let mut txns: Vec<ModelTxn> = Vec::new();
    let mut open: BTreeMap<u64, usize> = BTreeMap::new();
    for b in log {
        if let Some(m) = b.as_txn_marker() {
            if let Some(i) = open.remove(&m.producer_id) {
                txns[i].end = Some((b.base_offset, m.result));
            }
        } else if b.is_transactional() {
            let pid = b
                .producer
                .expect("transactional batches have a producer")
                .producer_id;
            open.entry(pid).or_insert_with(|| {
                txns.push(ModelTxn {
                    pid,
                    first: b.base_offset,
                    end: None,
                });
                txns.len() - 1
            });
        }
    }
    txns
}

/// LSO by definition: the HW, or the first offset of the oldest transaction that is open
/// or whose marker the HW has not passed, if lower.
fn model_lso(txns: &[ModelTxn], hw: Offset) -> Offset {
    txns.iter()
        .filter(|t| t.end.is_none_or(|(marker, _)| marker >= hw))
        .map(|t| t.first)
        .fold(hw, Offset::min)
}

fn model_aborted(txns: &[ModelTxn]) -> Vec<AbortedTxn> {
    let mut v: Vec<AbortedTxn> = txns
        .iter()
        .filter_map(|t| match t.end {
            Some((marker, TxnResult::Abort)) => Some(AbortedTxn {
                producer_id: t.pid,
                first_offset: t.first,
                last_offset: marker,
            }),
            _ => None,
        })
        .collect();
    v.sort_by_key(|a| a.last_offset);
    v
}

#[derive(Clone, Debug)]
enum Op {
    /// A data batch from producer `pid` (transactional or not) of `n` records.
    Data {
        pid: u8,
        txn: bool,
        n: u8,
    },
    /// A plain (producer-less) batch.
    Plain,
    Marker {
        pid: u8,
        commit: bool,
    },
    /// The HW moves up by this much (at most to the log end).
    Hw(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..3, any::<bool>(), 1u8..4).prop_map(|(pid, txn, n)| Op::Data { pid, txn, n }),
        1 => Just(Op::Plain),
        2 => (0u8..3, any::<bool>()).prop_map(|(pid, commit)| Op::Marker { pid, commit }),
        3 => (0u8..6).prop_map(Op::Hw),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn lso_and_aborted_index_match_the_definition(ops in prop::collection::vec(op(), 1..60)) {
        let mut table = ProducerStateTable::new();
        let mut log: Vec<RecordBatch> = Vec::new();
        let mut seq: BTreeMap<u64, u32> = BTreeMap::new();
        let (mut leo, mut hw, mut last_lso) = (0u64, 0u64, 0u64);
        for op in ops {
            let batch = match op {
                Op::Data { pid, txn, n } => {
                    let pid = u64::from(pid);
                    let s = seq.entry(pid).or_insert(0);
                    let b = RecordBatch::from_values(0, (0..n).map(|i| vec![i]))
                        .with_producer(Some(info(pid, 0, *s)))
                        .at(leo);
                    *s += u32::from(n);
                    Some(if txn { b.transactional() } else { b })
                }
                Op::Plain => Some(RecordBatch::from_values(0, [vec![0]]).at(leo)),
                Op::Marker { pid, commit } => {
                    let result = if commit { TxnResult::Commit } else { TxnResult::Abort };
                    let m = marker(u64::from(pid), 0, result, 0);
                    Some(RecordBatch::txn_marker(m, 0).at(leo))
                }
                Op::Hw(k) => {
                    hw = (hw + u64::from(k)).min(leo);
                    table.on_high_watermark(hw);
                    None
                }
            };
            if let Some(b) = batch {
                leo = b.next_offset();
                table.load_batch(&b);
                log.push(b);
            }
            let txns = model(&log);
            let lso = table.last_stable_offset(hw);
            prop_assert_eq!(lso, model_lso(&txns, hw), "LSO at hw {}", hw);
            prop_assert!(lso >= last_lso, "the LSO went back: {} -> {}", last_lso, lso);
            last_lso = lso;
            let aborted = model_aborted(&txns);
            prop_assert_eq!(table.txns().aborted(), aborted.as_slice());
            // Every window: exactly the aborted transactions reaching into it.
            for from in 0..=leo {
                for to in from..=leo {
                    let want: Vec<AbortedTxn> = aborted
                        .iter()
                        .filter(|a| a.last_offset >= from && a.first_offset < to)
                        .copied()
                        .collect();
                    prop_assert_eq!(table.txns().aborted_overlapping(from, to), want);
                }
            }
            // A new leader's table, rebuilt from the log, says the same.
            let mut rebuilt = ProducerStateTable::rebuild(&log);
            rebuilt.on_high_watermark(hw);
            prop_assert_eq!(rebuilt.last_stable_offset(hw), lso);
            prop_assert_eq!(rebuilt.txns().aborted(), table.txns().aborted());
        }
    }
}

#[test]
fn a_transactional_batch_opens_and_a_marker_closes_the_transaction() {
    let mut t = ProducerStateTable::new();
    t.load_batch(&RecordBatch::from_values(0, [vec![0]]).at(0));
    t.load_batch(&txn_batch(7, 0, 0, 2, 1));
    assert!(t.has_open_txn(7, 0));
    assert!(!t.has_open_txn(7, 1), "open at its own epoch only");
    t.load_batch(&txn_batch(7, 0, 2, 1, 3));
    assert_eq!(t.entry(7).unwrap().txn_first_offset, Some(1));
    assert_eq!(
        t.last_stable_offset(10),
        1,
        "the open transaction holds the LSO"
    );
    assert_eq!(t.last_stable_offset(1), 1);
    let m = marker(7, 0, TxnResult::Abort, 4);
    t.load_batch(&RecordBatch::txn_marker(m, 0).at(4));
    assert!(!t.has_open_txn(7, 0));
    // Until the HW passes the marker, the transaction is still undecided.
    assert_eq!(t.last_stable_offset(4), 1);
    t.on_high_watermark(5);
    assert_eq!(t.last_stable_offset(5), 5);
    let abort = AbortedTxn {
        producer_id: 7,
        first_offset: 1,
        last_offset: 4,
    };
    assert_eq!(t.txns().aborted(), [abort]);
    assert!(abort.covers(7, 3) && !abort.covers(7, 4) && !abort.covers(8, 2));
    // The marker carries no sequence: the producer goes on at its next one.
    assert_eq!(t.check(&info(7, 0, 3), 1), SequenceCheck::Append);
}

#[test]
fn a_marker_with_a_newer_epoch_fences_the_old_one_and_restarts_the_sequence() {
    let mut t = ProducerStateTable::new();
    t.load_batch(&txn_batch(7, 2, 0, 3, 0));
    let bumped = marker(7, 3, TxnResult::Commit, 1);
    assert_eq!(t.check_marker(&bumped, false), MarkerCheck::Append);
    t.record_marker(&bumped, 3);
    assert_eq!(t.entry(7).unwrap().producer_epoch, 3);
    // A late write of the finished transaction, at the old epoch (KIP-890 part 2).
    assert_eq!(
        t.check(&info(7, 2, 3), 1),
        SequenceCheck::InvalidProducerEpoch {
            current: 3,
            received: 2
        }
    );
    // The next transaction, at the bumped epoch, starts its sequence at 0.
    assert_eq!(t.check(&info(7, 3, 0), 1), SequenceCheck::Append);
    assert_eq!(
        t.check(&info(7, 3, 4), 1),
        SequenceCheck::OutOfOrderSequence {
            expected: 0,
            received: 4
        }
    );
    // A late marker of the old epoch is refused.
    assert_eq!(
        t.check_marker(&marker(7, 2, TxnResult::Abort, 1), false),
        MarkerCheck::InvalidProducerEpoch {
            current: 3,
            received: 2
        }
    );
}

#[test]
fn a_late_bumped_marker_does_not_close_the_next_transaction() {
    // T1's data at epoch 2; its end bumped the epoch to 3 and its marker (copy 2, a retry)
    // was written. T2's data then opens a transaction at epoch 3. Copy 1 of T1's marker,
    // late, also carries epoch 3: it must not close T2 (KAFKA-17754 under KIP-890 part 2;
    // Kafka's transaction-version-2 check, KAFKA-19446).
    let mut t = ProducerStateTable::new();
    t.load_batch(&txn_batch(7, 2, 0, 2, 0));
    let t1_end = marker(7, 3, TxnResult::Commit, 1);
    assert_eq!(t.check_marker(&t1_end, true), MarkerCheck::Append);
    t.record_marker(&t1_end, 2);
    // A retry at the same epoch with nothing open is still taken (it closes nothing).
    assert_eq!(t.check_marker(&t1_end, true), MarkerCheck::Append);
    t.load_batch(&txn_batch(7, 3, 0, 1, 3));
    assert!(t.has_open_txn(7, 3));
    assert_eq!(
        t.check_marker(&t1_end, true),
        MarkerCheck::InvalidProducerEpoch {
            current: 3,
            received: 3
        }
    );
    // T2's own marker, bumped to 4, closes it.
    assert_eq!(
        t.check_marker(&marker(7, 4, TxnResult::Abort, 1), true),
        MarkerCheck::Append
    );
    // Without the bump (an old client's keep_epoch, or part 2 off) a marker at the data's
    // own epoch is its transaction's: taken, as Kafka's transaction version 1 does.
    assert_eq!(t.check_marker(&t1_end, false), MarkerCheck::Append);
}

#[test]
fn a_marker_from_an_older_coordinator_is_fenced() {
    let mut t = ProducerStateTable::new();
    t.load_batch(&txn_batch(7, 0, 0, 1, 0));
    t.record_marker(&marker(7, 0, TxnResult::Commit, 5), 1);
    assert_eq!(
        t.check_marker(&marker(7, 0, TxnResult::Commit, 4), false),
        MarkerCheck::CoordinatorFenced {
            current: 5,
            received: 4
        }
    );
    assert_eq!(
        t.check_marker(&marker(7, 0, TxnResult::Commit, 5), false),
        MarkerCheck::Append
    );
    // An unknown producer's marker is appended (it closes nothing).
    assert_eq!(
        t.check_marker(&marker(9, 0, TxnResult::Abort, 0), false),
        MarkerCheck::Append
    );
    t.record_marker(&marker(9, 0, TxnResult::Abort, 0), 2);
    assert!(t.txns().aborted().is_empty(), "no transaction was open");
}

#[test]
fn epoch_markers_and_txn_markers_carry_no_sequence_state() {
    let mut t = ProducerStateTable::new();
    t.load_batch(&RecordBatch::epoch_marker(0, 1, 0));
    assert!(t.is_empty());
    t.load_batch(&txn_batch(7, 0, 0, 2, 1));
    t.load_batch(&RecordBatch::txn_marker(marker(7, 0, TxnResult::Commit, 0), 0).at(3));
    let e = t.entry(7).unwrap();
    assert_eq!(
        e.last_sequence(),
        Some(1),
        "the marker's u32::MAX sequence is not kept"
    );
    assert_eq!(e.coordinator_epoch, Some(0));
    // Never data: consumer fetches and the group coordinator's load skip control batches.
    let m = RecordBatch::txn_marker(marker(7, 0, TxnResult::Abort, 0), 0);
    assert!(m.is_control() && m.data_records().next().is_none());
}
