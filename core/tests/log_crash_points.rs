//! Crashes *inside* an operation: the storage "dies" before its N-th mutation (every later
//! call fails), then the disk crashes (unsynced bytes lost, kept or torn) and the log is
//! reopened. Recovery must never claim corruption for this, must keep everything flushed
//! before the operation (unless the operation itself was a truncation), and must serve
//! only batches that were really appended, densely.

use proptest::prelude::*;
use skein_core::log::*;
use skein_core::testing::MemStorage;
use std::cell::Cell;
use std::rc::Rc;
mod common;
use common::cases;

/// MemStorage that stops working after a budget of mutating calls.
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

#[derive(Clone, Debug)]
enum Op {
    Append(usize),
    Roll,
    Truncate(u16),
    TruncateBelow(u8),
    Retention,
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1usize..4).prop_map(Op::Append),
        1 => Just(Op::Roll),
        2 => any::<u16>().prop_map(Op::Truncate),
        1 => any::<u8>().prop_map(Op::TruncateBelow),
        2 => Just(Op::Retention),
        3 => Just(Op::Flush),
    ]
}

#[derive(Clone, Debug, PartialEq)]
struct MB {
    base: u64,
    epoch: u32,
    values: Vec<Vec<u8>>,
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 300,
        index_interval_bytes: 90,
        retention_bytes: Some(700),
        retention_ms: None,
        segment_ms: None,
        ..LogConfig::default()
    }
}

struct St {
    log: PartitionLog<Dying>,
    model: Vec<MB>,
    start: u64,
    counter: u32,
}

impl St {
    fn leo(&self) -> u64 {
        self.model
            .last()
            .map_or(self.start, |b| b.base + b.values.len() as u64)
    }
    /// Applies `op`; returns the batch it tried to append, if any. On error the model is
    /// left as it was before the op.
    fn apply(&mut self, op: &Op) -> (Result<(), LogError>, Option<MB>) {
        match op {
            Op::Append(n) => {
                let epoch = 1 + self.counter / 7;
                let values: Vec<Vec<u8>> = (0..*n)
                    .map(|_| {
                        self.counter += 1;
                        self.counter.to_be_bytes().repeat(6)
                    })
                    .collect();
                let b = RecordBatch::from_values(0, values.iter().cloned());
                let mb = MB {
                    base: self.leo(),
                    epoch,
                    values,
                };
                let r = self.log.append_as_leader(b, epoch, 0).map(|_| ());
                if r.is_ok() {
                    self.model.push(mb.clone());
                }
                (r, Some(mb))
            }
            Op::Roll => (self.log.roll(), None),
            Op::Flush => (self.log.flush(), None),
            Op::Truncate(frac) => {
                let x = self.start + (self.leo() - self.start) * *frac as u64 / u16::MAX as u64;
                let r = self.log.truncate_to(x);
                if r.is_ok() {
                    if x <= self.start {
                        self.model.clear();
                        self.start = x;
                    } else {
                        self.model.retain(|b| b.base + b.values.len() as u64 <= x);
                    }
                }
                (r, None)
            }
            Op::TruncateBelow(back) => {
                let x = self.start.saturating_sub(*back as u64 % 4);
                let r = self.log.truncate_to(x);
                if r.is_ok() {
                    self.model.clear();
                    self.start = x;
                }
                (r, None)
            }
            Op::Retention => {
                let r = self.log.apply_retention(0).map(|_| ());
                if r.is_ok() {
                    self.start = self.log.log_start_offset();
                    let s = self.start;
                    self.model.retain(|b| b.base >= s);
                }
                (r, None)
            }
        }
    }
}

fn read_all(log: &mut PartitionLog<Dying>) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    while at < log.log_end_offset() {
        for b in log.read(at, 500).unwrap() {
            assert_eq!(b.base_offset, at, "not dense");
            at = b.next_offset();
            out.push(b);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), ..ProptestConfig::default() })]

    #[test]
    fn crash_inside_an_operation(
        prefix in proptest::collection::vec(op(), 0..40),
        last in op(),
        budget in 0u32..10,
        mode in 0u8..3,
        seed in any::<u64>(),
        budget2 in proptest::option::of(0u32..12),
    ) {
        let mem = MemStorage::new();
        let st = Dying { mem: mem.clone(), budget: Rc::new(Cell::new(None)) };
        let (log, _) = PartitionLog::open(st.clone(), "p", config()).unwrap();
        let mut s = St { log, model: Vec::new(), start: 0, counter: 0 };
        for o in &prefix {
            s.apply(o).0.unwrap();
        }
        let before = s.model.clone();
        let flushed = s.log.flushed_offset();
        let start_before = s.start;
        st.budget.set(Some(budget));
        let (_, attempted) = s.apply(&last);
        drop(s);
        st.budget.set(None);
        common::crash_with_mode(&mem, seed, mode);
        // Optionally die during recovery too, and crash again (tearing).
        if let Some(b2) = budget2 {
            st.budget.set(Some(b2));
            let r = PartitionLog::open(st.clone(), "p", config());
            if let Err(e) = &r {
                prop_assert!(!matches!(e, LogError::Corrupt { .. }), "{e}");
            }
            drop(r);
            st.budget.set(None);
            mem.crash(|f| (f.synced_len + f.len) / 2);
        }
        let (mut log, sum) = PartitionLog::open(st.clone(), "p", config())
            .unwrap_or_else(|e| panic!("false corruption after crash in {last:?}: {e}"));
        prop_assert!(sum.corruption.is_none(), "{sum:?}");
        let got = read_all(&mut log);
        let mut candidates = before.clone();
        candidates.extend(attempted);
        for g in &got {
            let c = candidates.iter().find(|c| c.base == g.base_offset);
            let c = c.unwrap_or_else(|| panic!("batch at {} never appended", g.base_offset));
            let vals: Vec<_> = g.records.iter().map(|r| r.value.clone().unwrap()).collect();
            prop_assert_eq!(&vals, &c.values);
            prop_assert_eq!(g.partition_leader_epoch, c.epoch);
            prop_assert_eq!(log.epoch_cache().epoch_at(g.base_offset), Some(c.epoch));
        }
        let leo = log.log_end_offset();
        let lower = match &last {
            Op::Truncate(_) | Op::TruncateBelow(_) => 0,
            _ => flushed,
        };
        prop_assert!(leo >= lower, "lost flushed data: leo {leo} < {lower} after {last:?}");
        if !matches!(last, Op::TruncateBelow(_) | Op::Truncate(_)) {
            prop_assert!(log.log_start_offset() >= start_before);
        }
        for e in log.epoch_cache().entries() {
            prop_assert!(e.start_offset >= log.log_start_offset() && e.start_offset < leo);
        }
    }
}
