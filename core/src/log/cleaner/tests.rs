//! The cleaner against a plain definition of compaction, and under crashes at every
//! storage call of a cleaning.

use super::*;
use crate::log::{CompactionConfig, LogConfig, StorageError};
use crate::testing::MemStorage;
use proptest::prelude::*;
use std::cell::Cell;
use std::rc::Rc;

/// One record as a reader sees it: (batch base, offset, key, value).
type Rec = (Offset, Offset, Option<Vec<u8>>, Option<Vec<u8>>);

const DIR: &str = "t-0";

fn cfg(segment_bytes: u64, delete_retention_ms: i64) -> LogConfig {
    LogConfig {
        segment_bytes,
        segment_ms: None,
        retention_ms: None,
        index_interval_bytes: 64,
        compaction: Some(CompactionConfig {
            delete_retention_ms,
            min_compaction_lag_ms: 0,
            min_cleanable_dirty_ratio_permille: 0,
        }),
        ..LogConfig::default()
    }
}

/// Every record of the log, read from its start across gaps.
fn records<S: Storage>(log: &mut PartitionLog<S>) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    while at < log.log_end_offset() {
        let batches = log.read(at, 1 << 20).expect("read");
        let Some(last) = batches.last() else { break };
        let next = last.next_offset();
        for b in &batches {
            for (o, r) in b.iter_offsets() {
                out.push((b.base_offset, o, r.key.clone(), r.value.clone()));
            }
        }
        assert!(next > at, "reads make progress");
        at = next;
    }
    out
}

/// The plain definition: of the records below `end`, keep the latest of each key (and
/// every record of a batch starting at a `protected` offset); keep everything from `end`
/// on. Offsets unchanged. A first cleaning: no tombstone has expired.
fn compact(records: &[Rec], end: Offset, protected: &BTreeSet<Offset>) -> Vec<Rec> {
    let mut latest = BTreeMap::new();
    for (_, o, k, _) in records.iter().filter(|r| r.1 < end) {
        latest.insert(k.clone(), *o);
    }
    records
        .iter()
        .filter(|(b, o, k, _)| *o >= end || protected.contains(b) || latest.get(k) == Some(o))
        .cloned()
        .collect()
}

/// Appends one batch of `(key, value)` records at time `now`.
fn append<S: Storage>(log: &mut PartitionLog<S>, recs: &[(u8, Option<u8>)], now: TimestampMs) {
    let batch = RecordBatch::new(
        now,
        recs.iter()
            .map(|(k, v)| (Some(vec![*k]), v.map(|v| vec![v; 3]))),
    );
    log.append_as_leader(batch, 0, now).expect("append");
}

fn input(now_ms: TimestampMs, below: Offset) -> CleanerInput {
    CleanerInput {
        now_ms,
        cleanable_below: below,
    }
}

/// A log of `batches` (each a list of records), flushed, its last segment rolled away
/// from the data when `roll`.
fn log_of(batches: &[Vec<(u8, Option<u8>)>], segment_bytes: u64) -> PartitionLog<MemStorage> {
    let (mut log, _) =
        PartitionLog::open(MemStorage::new(), DIR, cfg(segment_bytes, 1_000)).unwrap();
    for (i, b) in batches.iter().enumerate() {
        append(&mut log, b, 100 + i as i64);
    }
    log.roll().unwrap();
    log.flush().unwrap();
    log
}

#[test]
fn a_cleaning_keeps_the_latest_record_per_key_at_its_offset() {
    let batches: Vec<Vec<(u8, Option<u8>)>> = vec![
        vec![(1, Some(1))],
        vec![(1, Some(2)), (2, Some(1)), (1, Some(3))],
        vec![(3, Some(1)), (2, Some(2))],
        vec![(3, None)],
        vec![(4, Some(1)), (1, Some(4))],
        vec![(2, Some(3))],
    ];
    let mut log = log_of(&batches, 200);
    assert!(log.segment_count() > 2, "several segments to clean");
    let before = records(&mut log);
    let leo = log.log_end_offset();
    let mut c = Cleaner::new();
    assert_eq!(
        c.run(&mut log, input(1_000, leo), 1_000),
        Ok(CleanerStep::Finished)
    );
    let after = records(&mut log);
    let first_epoch_batch = BTreeSet::from([0]);
    let want = compact(&before, leo, &first_epoch_batch);
    let strip = |v: &[Rec]| {
        v.iter()
            .map(|r| (r.1, r.2.clone(), r.3.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&after), strip(&want));
    // The tombstone of key 3 is the latest of its key: it stays (first cleaning).
    assert!(after.iter().any(|r| r.2 == Some(vec![3]) && r.3.is_none()));
    assert_eq!(log.log_end_offset(), leo, "the log end stays");
    assert_eq!(log.clean_state().clean_point, leo);
    assert!(c.stats().records_dropped > 0);
    // Nothing left to clean: the next step is idle.
    assert_eq!(c.step(&mut log, input(1_001, leo)), Ok(CleanerStep::Idle));
    // A reopen reads the same records: the gaps are below the clean point.
    let storage = log.close().unwrap();
    let (mut log, sum) = PartitionLog::open(storage.clone(), DIR, cfg(200, 1_000)).unwrap();
    assert!(sum.corruption.is_none());
    assert_eq!(records(&mut log), after);
    // Without the checkpoint, the same gaps below the recovery point are corruption: the
    // clean point is what makes them legal.
    let mut st = storage;
    st.remove(&format!(
        "{DIR}/{}",
        super::super::compaction::CLEANER_CHECKPOINT
    ))
    .unwrap();
    assert!(matches!(
        PartitionLog::open(st, DIR, cfg(200, 1_000)),
        Err(LogError::Corrupt { .. })
    ));
}

#[test]
fn nothing_at_or_past_the_high_watermark_is_cleaned() {
    let batches: Vec<Vec<(u8, Option<u8>)>> = (0..12).map(|i| vec![(1, Some(i))]).collect();
    let mut log = log_of(&batches, 150);
    let before = records(&mut log);
    let bases = log.segment_bases();
    let hw = bases[5];
    let mut c = Cleaner::new();
    assert_eq!(
        c.run(&mut log, input(1_000, hw), 1_000),
        Ok(CleanerStep::Finished)
    );
    let after = records(&mut log);
    let at_or_past = |v: &[Rec]| v.iter().filter(|r| r.1 >= hw).cloned().collect::<Vec<_>>();
    assert_eq!(
        at_or_past(&after),
        at_or_past(&before),
        "untouched from the HW on"
    );
    assert!(
        after.len() < before.len(),
        "older values of key 1 below the HW went"
    );
    assert_eq!(log.clean_state().clean_point, hw);
}

#[test]
fn min_compaction_lag_keeps_young_segments() {
    let batches: Vec<Vec<(u8, Option<u8>)>> = (0..8).map(|i| vec![(1, Some(i))]).collect();
    let mut log = log_of(&batches, 150);
    let mut config = log.config().compaction.unwrap();
    config.min_compaction_lag_ms = 10_000;
    log.set_compaction(Some(config));
    let leo = log.log_end_offset();
    let mut c = Cleaner::new();
    // Records were written at 100..108 ms: at 5_000 ms none is 10 s old.
    assert_eq!(c.step(&mut log, input(5_000, leo)), Ok(CleanerStep::Idle));
    assert_eq!(
        c.run(&mut log, input(20_000, leo), 1_000),
        Ok(CleanerStep::Finished)
    );
}

#[test]
fn a_tombstone_stays_for_delete_retention_after_the_cleaning_that_first_saw_it() {
    let (mut log, _) = PartitionLog::open(MemStorage::new(), DIR, cfg(120, 1_000)).unwrap();
    append(&mut log, &[(9, Some(0))], 0);
    append(&mut log, &[(1, Some(1))], 0);
    append(&mut log, &[(1, None)], 0);
    log.roll().unwrap();
    let tomb = log.log_end_offset() - 1;
    let has_tombstone = |log: &mut PartitionLog<MemStorage>| {
        records(log).iter().any(|r| r.1 == tomb && r.3.is_none())
    };
    let mut c = Cleaner::new();
    // Each cleaning needs dirty data: one more segment each time.
    let mut clean_at = |log: &mut PartitionLog<MemStorage>, now: i64, v: u8| {
        append(log, &[(2, Some(v))], now);
        log.roll().unwrap();
        let leo = log.log_end_offset();
        assert_eq!(
            c.run(log, input(now, leo), 1_000),
            Ok(CleanerStep::Finished)
        );
    };
    clean_at(&mut log, 5_000, 1); // first seen at 5_000
    assert!(has_tombstone(&mut log));
    clean_at(&mut log, 5_999, 2);
    assert!(has_tombstone(&mut log), "999 ms after the first cleaning");
    clean_at(&mut log, 6_000, 3);
    assert!(!has_tombstone(&mut log), "1_000 ms after: removed");
    // The value it deleted went long before; key 9's only record stays.
    assert!(records(&mut log).iter().all(|r| r.2 != Some(vec![1])));
    assert!(records(&mut log).iter().any(|r| r.2 == Some(vec![9])));
}

#[test]
fn a_truncation_under_a_cleaning_abandons_it() {
    let batches: Vec<Vec<(u8, Option<u8>)>> = (0..10).map(|i| vec![(i % 3, Some(i))]).collect();
    let mut log = log_of(&batches, 150);
    let leo = log.log_end_offset();
    let mut c = Cleaner::new();
    assert_eq!(
        c.step(&mut log, input(1_000, leo)),
        Ok(CleanerStep::Working)
    );
    assert_eq!(
        c.step(&mut log, input(1_000, leo)),
        Ok(CleanerStep::Working)
    );
    log.truncate_to(3).unwrap();
    assert!(matches!(
        c.step(&mut log, input(1_000, 3)),
        Ok(CleanerStep::Abandoned(_))
    ));
    assert_eq!(c.stats().passes_abandoned, 1);
    assert!(!c.busy());
}

/// MemStorage that dies (every mutating call fails) after a budget of mutating calls.
#[derive(Clone, Debug)]
struct Dying {
    mem: MemStorage,
    budget: Rc<Cell<Option<u32>>>,
}

impl Dying {
    fn spend(&self, path: &str) -> Result<(), StorageError> {
        match self.budget.get() {
            Some(0) => Err(StorageError::Io {
                path: path.into(),
                reason: "process died".into(),
            }),
            Some(n) => {
                self.budget.set(Some(n - 1));
                Ok(())
            }
            None => Ok(()),
        }
    }
}

impl Storage for Dying {
    fn list(&self, dir: &str) -> Result<Vec<String>, StorageError> {
        self.mem.list(dir)
    }
    fn exists(&self, path: &str) -> bool {
        self.mem.exists(path)
    }
    fn len(&self, path: &str) -> Result<u64, StorageError> {
        self.mem.len(path)
    }
    fn read_at(&mut self, path: &str, pos: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        self.mem.read_at(path, pos, buf)
    }
    fn append(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        self.spend(path)?;
        self.mem.append(path, data)
    }
    fn sync(&mut self, path: &str) -> Result<(), StorageError> {
        self.spend(path)?;
        self.mem.sync(path)
    }
    fn truncate(&mut self, path: &str, len: u64) -> Result<(), StorageError> {
        self.spend(path)?;
        self.mem.truncate(path, len)
    }
    fn remove(&mut self, path: &str) -> Result<(), StorageError> {
        self.spend(path)?;
        self.mem.remove(path)
    }
    fn write_atomic(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        self.spend(path)?;
        self.mem.write_atomic(path, data)
    }
}

/// Case count: modest by default; `SKEIN_PROPTEST_CASES=N` for a soak.
fn cases(default: u32) -> u32 {
    std::env::var("SKEIN_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn batches_strategy() -> impl Strategy<Value = Vec<Vec<(u8, Option<u8>)>>> {
    let record = (0u8..5, proptest::option::weighted(0.8, any::<u8>()));
    proptest::collection::vec(proptest::collection::vec(record, 1..4), 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(128),
        ..ProptestConfig::default()
    })]

    /// A cleaning run to its end gives exactly the plain definition.
    #[test]
    fn a_cleaning_equals_the_plain_definition(
        batches in batches_strategy(),
        segment_bytes in 100u64..400,
    ) {
        let mut log = log_of(&batches, segment_bytes);
        let before = records(&mut log);
        let leo = log.log_end_offset();
        let mut c = Cleaner::new();
        let r = c.run(&mut log, input(1_000, leo), 10_000).unwrap();
        prop_assert!(matches!(r, CleanerStep::Finished | CleanerStep::Idle));
        let after = records(&mut log);
        let end = log.clean_state().clean_point;
        let want = compact(&before, end, &BTreeSet::from([0]));
        let strip = |v: &[Rec]| v.iter().map(|r| (r.1, r.2.clone(), r.3.clone())).collect::<Vec<_>>();
        prop_assert_eq!(strip(&after), strip(&want));
    }

    /// The process dies at a random storage call of a cleaning (or between two steps),
    /// the disk loses what was not synced, the log is reopened: every segment holds its
    /// old records or its cleaned ones, never anything else, and no corruption is claimed.
    #[test]
    fn a_crash_anywhere_in_a_cleaning_leaves_each_segment_old_or_new(
        batches in batches_strategy(),
        segment_bytes in 100u64..400,
        budget in 0u32..40,
        steps in 0usize..200,
        torn in any::<bool>(),
    ) {
        // The run without a crash gives the "new" log.
        let mut clean = log_of(&batches, segment_bytes);
        let old = records(&mut clean);
        let leo = clean.log_end_offset();
        let mut c = Cleaner::new();
        c.run(&mut clean, input(1_000, leo), 10_000).unwrap();
        let new = records(&mut clean);
        let bounds = clean.segment_bases();

        let mem = MemStorage::new();
        let st = Dying { mem: mem.clone(), budget: Rc::new(Cell::new(None)) };
        let (mut log, _) = PartitionLog::open(st.clone(), DIR, cfg(segment_bytes, 1_000)).unwrap();
        for (i, b) in batches.iter().enumerate() {
            append(&mut log, b, 100 + i as i64);
        }
        log.roll().unwrap();
        log.flush().unwrap();
        st.budget.set(Some(budget));
        let mut c = Cleaner::new();
        for _ in 0..steps {
            match c.step(&mut log, input(1_000, leo)) {
                Ok(CleanerStep::Working) => {}
                _ => break,
            }
        }
        drop(log);
        st.budget.set(None);
        if torn {
            mem.crash(|f| (f.synced_len + f.len) / 2);
        } else {
            mem.crash_lose_unsynced();
        }
        let (mut log, sum) = PartitionLog::open(st, DIR, cfg(segment_bytes, 1_000))
            .unwrap_or_else(|e| panic!("reopen after a crash in a cleaning: {e}"));
        prop_assert!(sum.corruption.is_none());
        let got = records(&mut log);
        let strip = |v: &[Rec], lo: Offset, hi: Offset| {
            v.iter().filter(|r| r.1 >= lo && r.1 < hi).map(|r| (r.1, r.2.clone(), r.3.clone())).collect::<Vec<_>>()
        };
        let mut edges = bounds.clone();
        edges.push(Offset::MAX);
        for w in edges.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let g = strip(&got, lo, hi);
            prop_assert!(
                g == strip(&old, lo, hi) || g == strip(&new, lo, hi),
                "segment [{lo}, {hi}) is neither old nor new: {g:?}"
            );
        }
        prop_assert!(!mem.files().iter().any(|(p, _, _)| p.ends_with(".cleaned") || p.ends_with(".swap")));
    }
}
