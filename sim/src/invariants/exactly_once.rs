//! `txn-exactly-once`: read-process-write, judged from the simulator's ground truth at the
//! end of a txn run. Each committed input record below the group's committed offset has
//! its derived output exactly once in each output topic's committed records (what a
//! read_committed reader sees), and nothing else is there: no output twice, none of an
//! aborted input record, none at or above the committed offset unless a transaction is
//! still completing.
//!
//! Pure functions over logs ([`classify`], [`judge`]), so crafted logs test them; the world
//! reads the leaders' logs and the group coordinator (`world/report.rs`).

use crate::txn_pipeline::parse_output;
use skein_core::log::RecordBatch;
use skein_core::txn::TxnResult;
use skein_core::Offset;
use std::collections::{BTreeMap, BTreeSet};

/// A partition's records by transactional outcome, as a read_committed reader of the
/// whole log would find them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Classified {
    /// Visible: plain records, and those of transactions whose commit marker is in the log.
    pub committed: Vec<(Offset, String)>,
    /// Records of transactions whose abort marker is in the log.
    pub aborted: Vec<(Offset, String)>,
    /// Records of transactions with no marker yet (still completing, or never will).
    pub open: Vec<(Offset, String)>,
}

/// Sorts the records of `batches` (a log in offset order) by outcome. Control batches
/// (leader-epoch and transaction markers) hold no records of their own.
pub fn classify(batches: &[RecordBatch]) -> Classified {
    let mut c = Classified::default();
    let mut pending: BTreeMap<u64, Vec<(Offset, String)>> = BTreeMap::new();
    for b in batches {
        if let Some(m) = b.as_txn_marker() {
            let recs = pending.remove(&m.producer_id).unwrap_or_default();
            match m.result {
                TxnResult::Commit => c.committed.extend(recs),
                TxnResult::Abort => c.aborted.extend(recs),
            }
            continue;
        }
        if b.is_control() {
            continue;
        }
        let recs = b.iter_offsets().map(|(o, r)| {
            let v = r.value.as_deref().unwrap_or_default();
            (o, String::from_utf8_lossy(v).into_owned())
        });
        match b.producer.filter(|_| b.is_transactional()) {
            Some(p) => pending.entry(p.producer_id).or_default().extend(recs),
            None => c.committed.extend(recs),
        }
    }
    c.open = pending.into_values().flatten().collect();
    for l in [&mut c.committed, &mut c.aborted, &mut c.open] {
        l.sort();
    }
    c
}

/// What the end of a run holds for the pipelines.
#[derive(Clone, Debug, Default)]
pub struct PipelineTruth {
    /// The input topic's partitions.
    pub input: BTreeMap<u32, Classified>,
    /// Each output topic's partitions.
    pub outputs: BTreeMap<String, BTreeMap<u32, Classified>>,
    /// The group's committed offset per input partition (absent: none committed).
    pub committed: BTreeMap<u32, Offset>,
    /// The group's `__consumer_offsets` partition holds transactional offsets with no
    /// marker yet: a transaction is still completing, its outputs perhaps already visible.
    pub offsets_pending: bool,
}

/// Every violation of exactly-once in `t`, one sentence each (empty: it holds).
pub fn judge(t: &PipelineTruth) -> Vec<String> {
    let mut found = Vec::new();
    for (topic, parts) in &t.outputs {
        // Per input record: where its committed outputs are, and whether one is undecided.
        let mut outs: BTreeMap<(u32, Offset), Vec<(u32, Offset)>> = BTreeMap::new();
        let mut undecided: BTreeSet<(u32, Offset)> = BTreeSet::new();
        for (&q, c) in parts {
            for (o, v) in &c.committed {
                match parse_output(v) {
                    Some(input) => outs.entry(input).or_default().push((q, *o)),
                    None => found.push(format!(
                        "{topic}-{q}@{o} holds {v:?}, which names no input record"
                    )),
                }
            }
            undecided.extend(c.open.iter().filter_map(|(_, v)| parse_output(v)));
        }
        for (&(p, o), at) in &outs {
            let places = || {
                at.iter()
                    .map(|(q, x)| format!("{topic}-{q}@{x}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if at.len() > 1 {
                found.push(format!(
                    "input {}-{p}@{o} has {} committed outputs in {topic} ({}): processed more than once",
                    crate::topic::TOPIC,
                    at.len(),
                    places()
                ));
            }
            let input = t.input.get(&p);
            let holds = |l: fn(&Classified) -> &Vec<(Offset, String)>| {
                input.is_some_and(|c| l(c).binary_search_by_key(&o, |(x, _)| *x).is_ok())
            };
            if holds(|c| &c.aborted) {
                found.push(format!(
                    "{} is the output of input {}-{p}@{o}, an aborted record (read_committed returned it)",
                    places(),
                    crate::topic::TOPIC
                ));
            } else if holds(|c| &c.committed)
                && o >= t.committed.get(&p).copied().unwrap_or(0)
                && !t.offsets_pending
            {
                found.push(format!(
                    "{} is the output of input {}-{p}@{o}, at or above the group's committed offset {} with no transaction completing: its offsets were not committed with it",
                    places(),
                    crate::topic::TOPIC,
                    t.committed.get(&p).copied().unwrap_or(0)
                ));
            }
        }
        for (&p, c) in &t.input {
            let below = t.committed.get(&p).copied().unwrap_or(0);
            for (o, v) in c.committed.iter().take_while(|(o, _)| *o < below) {
                let key = (p, *o);
                if !outs.contains_key(&key) && !undecided.contains(&key) {
                    found.push(format!(
                        "input {}-{p}@{o} ({v:?}) is below the group's committed offset {below} but has no committed output in {topic}: processed zero times",
                        crate::topic::TOPIC
                    ));
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_core::log::{ProducerInfo, TxnMarker};

    fn data(base: Offset, values: &[&str]) -> RecordBatch {
        RecordBatch::from_values(0, values.iter().map(|v| v.as_bytes().to_vec())).at(base)
    }

    fn txn(pid: u64, base: Offset, values: &[&str]) -> RecordBatch {
        data(base, values)
            .with_producer(Some(ProducerInfo {
                producer_id: pid,
                producer_epoch: 0,
                base_sequence: 0,
            }))
            .transactional()
    }

    fn marker(pid: u64, at: Offset, result: TxnResult) -> RecordBatch {
        RecordBatch::txn_marker(
            TxnMarker {
                producer_id: pid,
                producer_epoch: 0,
                result,
                coordinator_epoch: 1,
            },
            0,
        )
        .at(at)
    }

    fn offsets(c: &[(Offset, String)]) -> Vec<Offset> {
        c.iter().map(|(o, _)| *o).collect()
    }

    #[test]
    fn classify_sorts_records_by_their_transactions_outcome() {
        let log = [
            data(0, &["a"]),
            txn(7, 1, &["b", "c"]),
            txn(8, 3, &["d"]),
            marker(7, 4, TxnResult::Commit),
            txn(9, 5, &["e"]),
            marker(8, 6, TxnResult::Abort),
        ];
        let c = classify(&log);
        assert_eq!(offsets(&c.committed), vec![0, 1, 2]);
        assert_eq!(offsets(&c.aborted), vec![3]);
        assert_eq!(offsets(&c.open), vec![5]);
        assert_eq!(c.committed[1].1, "b");
    }

    /// Input sim-0: t1-1@0 and t1-2@1 committed, t2-1@2 aborted; the group committed 2.
    /// Each output topic holds one output per input below 2 (written by pipeline
    /// transactions 5 and 6, each committed; 6's first attempt, producer 4, aborted).
    fn truth(out_b: Vec<RecordBatch>) -> PipelineTruth {
        let input = [
            txn(1, 0, &["t1-1", "t1-2"]),
            marker(1, 2, TxnResult::Commit),
            txn(2, 3, &["t2-1"]),
            marker(2, 4, TxnResult::Abort),
        ];
        let good = vec![
            txn(4, 0, &["r1-1@0:0"]),
            marker(4, 1, TxnResult::Abort),
            txn(5, 2, &["r1-3@0:0", "r1-5@0:1"]),
            marker(5, 4, TxnResult::Commit),
        ];
        let mut t = PipelineTruth::default();
        t.input.insert(0, classify(&input));
        t.outputs
            .insert("sim-out-b".into(), [(0, classify(&out_b))].into());
        t.outputs
            .insert("sim-out-c".into(), [(0, classify(&good))].into());
        t.committed.insert(0, 2);
        t
    }

    fn good_b() -> Vec<RecordBatch> {
        vec![
            txn(4, 0, &["r1-2@0:0"]),
            marker(4, 1, TxnResult::Abort),
            txn(5, 2, &["r1-4@0:0", "r1-6@0:1"]),
            marker(5, 4, TxnResult::Commit),
        ]
    }

    #[test]
    fn exactly_once_holds_with_an_aborted_attempt() {
        assert_eq!(judge(&truth(good_b())), Vec::<String>::new());
    }

    #[test]
    fn a_committed_second_output_is_a_duplicate() {
        let mut b = good_b();
        b.push(txn(6, 5, &["r2-1@0:1"]));
        b.push(marker(6, 6, TxnResult::Commit));
        let found = judge(&truth(b.clone()));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("more than once"), "{found:?}");
        // Near-twin: the second attempt aborted.
        let last = b.len() - 1;
        b[last] = marker(6, 6, TxnResult::Abort);
        assert_eq!(judge(&truth(b)), Vec::<String>::new());
    }

    #[test]
    fn an_input_below_the_committed_offset_without_output_is_lost() {
        // Only the aborted attempt wrote sim-0@0's output to sim-out-b.
        let b = vec![
            txn(4, 0, &["r1-2@0:0"]),
            marker(4, 1, TxnResult::Abort),
            txn(5, 2, &["r1-6@0:1"]),
            marker(5, 3, TxnResult::Commit),
        ];
        let found = judge(&truth(b.clone()));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("processed zero times"), "{found:?}");
        // Near-twin: the group committed only up to 0 and a later transaction, not yet
        // marked, holds sim-0@0's output; nothing is missing then.
        let mut t = truth(b);
        t.committed.insert(0, 0);
        t.outputs
            .get_mut("sim-out-c")
            .unwrap()
            .insert(0, classify(&[]));
        let mut b2 = t.outputs["sim-out-b"][&0].clone();
        b2.committed.clear();
        b2.open.push((9, "r1-9@0:0".into()));
        t.outputs.get_mut("sim-out-b").unwrap().insert(0, b2);
        assert_eq!(judge(&t), Vec::<String>::new());
    }

    #[test]
    fn an_output_above_the_committed_offset_needs_a_completing_transaction() {
        let mut t = truth(good_b());
        t.committed.insert(0, 1);
        let found = judge(&t);
        assert_eq!(found.len(), 2, "one per output topic: {found:?}");
        assert!(found[0].contains("not committed with it"), "{found:?}");
        // Near-twin: the offsets' transaction is still completing.
        t.offsets_pending = true;
        assert_eq!(judge(&t), Vec::<String>::new());
    }

    #[test]
    fn the_output_of_an_aborted_input_is_an_aborted_read() {
        let mut b = good_b();
        b.push(txn(6, 5, &["r2-1@0:3"]));
        b.push(marker(6, 6, TxnResult::Commit));
        let found = judge(&truth(b));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("an aborted record"), "{found:?}");
    }
}
