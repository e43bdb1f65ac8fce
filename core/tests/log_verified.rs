//! The log's shortcut for segments it wrote itself (`Segment::verified`: start a read at
//! the batch holding the offset asked for, skip CRCs already known good, stop `read_below`
//! at `below`) must not change what any read returns or which error it reports. Two logs
//! get the same appends, bit flips, read errors and truncations: one on a `MemStorage`
//! (which tracks file generations, so the shortcut applies), one on the same kind of disk
//! with generations hidden (so every read checks every batch from the sparse index entry
//! on, as before the shortcut). Every read must give the same answer on both.

use proptest::prelude::*;
use skein_core::log::*;
use skein_core::testing::MemStorage;
mod common;
use common::cases;

/// A `MemStorage` that does not report generations: the log never trusts earlier checks.
#[derive(Clone, Debug)]
struct Untracked(MemStorage);

impl Storage for Untracked {
    fn list(&self, dir: &str) -> Result<Vec<String>, StorageError> {
        self.0.list(dir)
    }
    fn exists(&self, path: &str) -> bool {
        self.0.exists(path)
    }
    fn len(&self, path: &str) -> Result<u64, StorageError> {
        self.0.len(path)
    }
    fn read_at(&mut self, path: &str, pos: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        self.0.read_at(path, pos, buf)
    }
    fn append(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        self.0.append(path, data)
    }
    fn sync(&mut self, path: &str) -> Result<(), StorageError> {
        self.0.sync(path)
    }
    fn truncate(&mut self, path: &str, len: u64) -> Result<(), StorageError> {
        self.0.truncate(path, len)
    }
    fn remove(&mut self, path: &str) -> Result<(), StorageError> {
        self.0.remove(path)
    }
    fn write_atomic(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        self.0.write_atomic(path, data)
    }
}

fn batch(i: u32, n: usize) -> RecordBatch {
    let records = (0..n).map(|j| (Some(vec![j as u8]), Some(format!("v-{i}-{j}").into_bytes())));
    RecordBatch::new(i as i64, records)
}

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        index_interval_bytes: 150,
        retention_ms: None,
        segment_ms: None,
        ..LogConfig::default()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Append(usize),
    Read { from: u64, max: usize },
    ReadBelow { from: u64, below: u64, max: usize },
    Flip { file: usize, pos: usize, bit: u8 },
    ReadError(bool),
    Truncate(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..5).prop_map(Op::Append),
        4 => (0u64..80, 1usize..600).prop_map(|(from, max)| Op::Read { from, max }),
        4 => (0u64..80, 0u64..80, 1usize..600)
            .prop_map(|(from, below, max)| Op::ReadBelow { from, below, max }),
        1 => (0usize..100, 0usize..1000, 0u8..8)
            .prop_map(|(file, pos, bit)| Op::Flip { file, pos, bit }),
        1 => any::<bool>().prop_map(Op::ReadError),
        1 => (0u64..80).prop_map(Op::Truncate),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), ..ProptestConfig::default() })]

    #[test]
    fn shortcut_reads_equal_full_checks(ops in proptest::collection::vec(op(), 1..60)) {
        let (fast_mem, slow_mem) = (MemStorage::new(), MemStorage::new());
        let (mut fast, _) = PartitionLog::open(fast_mem.clone(), "p", cfg()).unwrap();
        let (mut slow, _) = PartitionLog::open(Untracked(slow_mem.clone()), "p", cfg()).unwrap();
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                Op::Append(n) => {
                    let a = fast.append_as_leader(batch(i as u32, n), 1, 0);
                    let b = slow.append_as_leader(batch(i as u32, n), 1, 0);
                    prop_assert_eq!(a, b);
                }
                Op::Read { from, max } => {
                    prop_assert_eq!(fast.read(from, max), slow.read(from, max));
                }
                Op::ReadBelow { from, below, max } => {
                    let a = fast.read_below(from, below, max);
                    prop_assert_eq!(&a, &slow.read_below(from, below, max));
                    // And it is `read` cut at `below`.
                    let cut = slow.read(from, max).map(|bs| {
                        let mut bs: Vec<_> = bs.into_iter().filter(|b| b.base_offset < below).collect();
                        if let Some(b) = bs.last_mut().filter(|b| b.next_offset() > below) {
                            b.records.truncate((below - b.base_offset) as usize);
                        }
                        bs
                    });
                    prop_assert_eq!(a, cut);
                }
                Op::Flip { file, pos, bit } => {
                    let files: Vec<_> = fast_mem
                        .files()
                        .into_iter()
                        .filter(|(p, len, _)| *len > 0 && p.ends_with(".log"))
                        .collect();
                    if !files.is_empty() {
                        let (path, len, _) = &files[file % files.len()];
                        let at = (pos as u64) % len;
                        prop_assert!(fast_mem.flip_bit(path, at, bit));
                        prop_assert!(slow_mem.flip_bit(path, at, bit));
                    }
                }
                Op::ReadError(on) => {
                    fast_mem.set_read_error(None, on);
                    slow_mem.set_read_error(None, on);
                }
                Op::Truncate(to) => {
                    prop_assert_eq!(fast.truncate_to(to), slow.truncate_to(to));
                }
            }
            prop_assert_eq!(fast.log_end_offset(), slow.log_end_offset());
        }
    }
}
