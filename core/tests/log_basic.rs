//! Example-based tests of the partition log on MemStorage (FileStorage's: skein-node's tests/log_file_storage.rs).

use skein_core::log::*;
use skein_core::testing::MemStorage;

pub fn rec(v: &[u8]) -> Record {
    Record::new(0, None, Some(v.to_vec()))
}

pub fn batch(n: usize, ts: i64, tag: u8) -> RecordBatch {
    RecordBatch::from_values(ts, (0..n).map(|i| vec![tag, i as u8, 7, 7, 7]))
}

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 100,
        retention_ms: None,
        segment_ms: None,
        ..LogConfig::default()
    }
}

fn values(bs: &[RecordBatch]) -> Vec<Vec<u8>> {
    bs.iter()
        .flat_map(|b| b.records.iter().map(|r| r.value.clone().unwrap()))
        .collect()
}

#[test]
fn append_read_reopen() {
    let mem = MemStorage::new();
    let (mut log, _) = PartitionLog::open(mem.clone(), "t-0", small()).unwrap();
    for i in 0..20u8 {
        let info = log
            .append_as_leader(batch(3, 1000 + i as i64, i), 1 + (i as u32 / 7), 0)
            .unwrap();
        assert_eq!(info.base_offset, i as u64 * 3);
    }
    assert_eq!(log.log_end_offset(), 60);
    assert!(log.segment_count() > 3);
    let all = log.read(0, usize::MAX).unwrap();
    assert_eq!(all.len(), 20);
    for (i, b) in all.iter().enumerate() {
        assert_eq!(b.base_offset, i as u64 * 3);
    }
    let some = log.read(31, 1).unwrap();
    assert_eq!(some.len(), 1);
    assert_eq!(some[0].base_offset, 30);
    assert_eq!(log.offset_for_timestamp(1010).unwrap(), Some(30));
    assert_eq!(log.offset_for_timestamp(5000).unwrap(), None);
    assert_eq!(log.epoch_cache().entries().len(), 3);
    log.flush().unwrap();
    let expect = values(&all);
    drop(log);
    let (mut log, sum) = PartitionLog::open(mem.clone(), "t-0", small()).unwrap();
    assert_eq!(sum.bytes_truncated, 0);
    assert_eq!(log.log_end_offset(), 60);
    assert_eq!(values(&log.read(0, usize::MAX).unwrap()), expect);
    assert_eq!(log.offset_for_timestamp(1010).unwrap(), Some(30));
    assert_eq!(log.epoch_cache().end_offset_for_epoch(1, 60), Some((1, 21)));

    log.truncate_to(32).unwrap();
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(log.epoch_cache().end_offset_for_epoch(2, 30), Some((2, 30)));
    let info = log.append_as_leader(batch(2, 2000, 99), 9, 0).unwrap();
    assert_eq!(info.base_offset, 30);
    assert_eq!(log.epoch_cache().latest_epoch(), Some(9));
    drop(log);
    // Unsynced append lost on crash; truncation stays.
    mem.crash_lose_unsynced();
    let (log, sum) = PartitionLog::open(mem.clone(), "t-0", small()).unwrap();
    assert_eq!(log.log_end_offset(), 30, "{sum:?}");
    assert_eq!(log.epoch_cache().latest_epoch(), Some(2));
}

#[test]
fn torn_tail_is_cut_and_reported() {
    let mem = MemStorage::new();
    let (mut log, _) = PartitionLog::open(mem.clone(), "p", small()).unwrap();
    log.append_as_leader(batch(2, 1, 1), 1, 0).unwrap();
    log.flush().unwrap();
    log.append_as_leader(batch(2, 1, 2), 1, 0).unwrap();
    drop(log);
    mem.crash(|f| {
        if f.path.ends_with(".log") {
            f.len - 5
        } else {
            f.len
        }
    });
    let (mut log, sum) = PartitionLog::open(mem.clone(), "p", small()).unwrap();
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(sum.batches_truncated, 1);
    assert!(sum.bytes_truncated > 0);
    assert!(sum.corruption.is_none());
    assert_eq!(log.read(0, 10).unwrap().len(), 1);
}

#[test]
fn bit_flip_detected_on_read() {
    let mem = MemStorage::new();
    let (mut log, _) = PartitionLog::open(mem.clone(), "p", LogConfig::default()).unwrap();
    for i in 0..4 {
        log.append_as_leader(batch(2, 1, i), 1, 0).unwrap();
    }
    log.flush().unwrap();
    let path = "p/00000000000000000000.log";
    let len = mem.contents(path).unwrap().len() as u64;
    assert!(mem.flip_bit(path, len - 3, 2));
    match log.read(0, usize::MAX) {
        Err(LogError::Corrupt { offset, .. }) => assert_eq!(offset, 6),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Flushed data corrupt: open refuses by default...
    drop(log);
    let err = PartitionLog::open(mem.clone(), "p", LogConfig::default()).unwrap_err();
    assert!(matches!(err, LogError::Corrupt { .. }), "{err:?}");
    // ...or cuts and flags it when asked to.
    let cfg = LogConfig {
        truncate_on_corruption: true,
        ..LogConfig::default()
    };
    let (mut log, sum) = PartitionLog::open(mem.clone(), "p", cfg).unwrap();
    assert!(sum.corruption.is_some());
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(log.read(0, usize::MAX).unwrap().len(), 3);
}

#[test]
fn checkpoint_files_look_as_documented() {
    let mem = MemStorage::new();
    let (mut log, _) = PartitionLog::open(mem.clone(), "t-0", small()).unwrap();
    log.append_as_leader(batch(2, 5, 1), 3, 0).unwrap();
    log.append_as_leader(batch(2, 6, 1), 4, 0).unwrap();
    log.flush().unwrap();
    log.append_as_leader(batch(2, 7, 1), 4, 0).unwrap();
    log.flush().unwrap();
    let ep = String::from_utf8(mem.contents("t-0/leader-epoch-checkpoint").unwrap()).unwrap();
    let rp = String::from_utf8(mem.contents("t-0/recovery-point-checkpoint").unwrap()).unwrap();
    assert!(
        ep.starts_with("skein-leader-epoch-checkpoint v1\n2\n3 0\n4 2\ncrc "),
        "{ep}"
    );
    // A journal (docs/format.md): written whole when the log was created, then a line
    // appended by each flush.
    let crc = |s: &str| format!("{:08x}", crc32fast::hash(s.as_bytes()));
    assert_eq!(
        rp,
        format!(
            "skein-recovery-point v2\n0 {}\n4 {}\n6 {}\n",
            crc("0"),
            crc("4"),
            crc("6")
        ),
    );
    // Reopened, the log trusts the last line: nothing above 6 is re-validated as a tail.
    drop(log);
    let (_, summary) = PartitionLog::open(mem.clone(), "t-0", small()).unwrap();
    assert_eq!(summary.recovery_point, Some(6));
    let files: Vec<String> = mem.files().into_iter().map(|f| f.0).collect();
    assert_eq!(
        files,
        vec![
            "t-0/00000000000000000000.index",
            "t-0/00000000000000000000.log",
            "t-0/00000000000000000000.timeindex",
            "t-0/leader-epoch-checkpoint",
            "t-0/recovery-point-checkpoint",
        ]
    );
}
